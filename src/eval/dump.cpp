// dump.cpp — debug printing of the analysed form (A-normal bodies, nested lambdas, branches).
#include <cstdio>
#include <string>

#include "../prims/prims.hpp"
#include "ast.hpp"

namespace vlad {

namespace {

std::string var_name(const Var* v) { return v ? std::string(v->name) + "_" + std::to_string(v->id) : "-"; }

void dump_body(const Body* b, int indent, std::string& out, int lambda_depth);

void dump_lambda(const Lambda* lam, int indent, std::string& out, int lambda_depth) {
  std::string pad(indent, ' ');
  out += pad + "(lambda " + var_name(lam->param) + "  ; " + (lam->name ? lam->name : "") +
         (lam->transform ? std::string(" [") + lam->transform + "]" : "") + (lam->raw_bp ? " [raw]" : "") + " free:";
  for (const Var* v : lam->free) out += " " + var_name(v);
  out += "\n";
  if (lambda_depth > 0) ensure_body(const_cast<Lambda*>(lam));
  if (lambda_depth > 0 && lam->body) dump_body(lam->body, indent + 2, out, lambda_depth - 1);
  else out += pad + "  ...\n";
  out += pad + ")\n";
}

void dump_body(const Body* b, int indent, std::string& out, int lambda_depth) {
  static const char* names[] = {"const", "copy", "global", "app", "lambda", "cons", "car", "cdr",
                                "check", "if", "envref", "backcall", "sens"};
  std::string pad(indent, ' ');
  for (const Binding& bd : b->binds) {
    out += pad + var_name(bd.x) + " = " + names[(int)bd.op];
    if (bd.op == Op::Const) out += " " + write_string(bd.constant);
    if (bd.op == Op::Global) out += std::string(" ") + bd.cell->name + " " + bd.xf;
    if (bd.a) out += " " + var_name(bd.a);
    if (bd.b) out += " " + var_name(bd.b);
    if (bd.op == Op::EnvRef) out += " #" + std::to_string(bd.index);
    if (bd.op == Op::Sens && bd.index) {  // the path into b: (car (cdr b)) is "da"
      out += " of ";
      for (int k = sens_path_length(bd.index); k-- > 0;) out += sens_path_cdr(bd.index, k) ? "d" : "a";
    }
    out += "\n";
    if (bd.op == Op::If) {
      dump_body(bd.then_, indent + 4, out, lambda_depth);
      out += pad + "  else\n";
      dump_body(bd.else_, indent + 4, out, lambda_depth);
    }
    if (bd.op == Op::Lambda) {
      if (bd.lam->raw_bp) dump_lambda(bd.lam, indent + 4, out, lambda_depth);
      else out += std::string(indent + 4, ' ') + "(lambda " + (bd.lam->name ? bd.lam->name : "") + " ...)\n";
    }
  }
  out += pad + "=> " + var_name(b->result) + "\n";
}

}  // namespace

std::string lambda_to_string(const Lambda* lam) {
  std::string out;
  dump_lambda(lam, 0, out, 3);
  return out;
}

}  // namespace vlad
