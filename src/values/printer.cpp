// printer.cpp — SPEC §4 printed forms: Scheme notation, shortest round-trip reals, tags at the root.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <unordered_map>

#include "../ad/ad.hpp"
#include "../eval/ast.hpp"
#include "../eval/interp.hpp"
#include "../prims/prims.hpp"

namespace vlad {

std::string format_real(double d) {
  if (std::isnan(d)) return "+nan";
  if (std::isinf(d)) return d > 0 ? "+inf" : "-inf";
  if (d == 0) return std::signbit(d) ? "-0" : "0";  // (-0 reads back as -0: SPEC §4)
  char buf[64];
  if (d == std::floor(d) && std::fabs(d) < 1e21) {
    snprintf(buf, sizeof buf, "%.0f", d);
    return buf;
  }
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(buf, sizeof buf, "%.*g", prec, d);
    if (strtod(buf, nullptr) == d) break;
  }
  return buf;
}

namespace {

// A structure whose parts are shared prints as large as it unfolds (2^60 leaves for 60 conses of
// a pair with itself): every few thousand nodes, Ctrl-C (or the host's interrupt) stops it.
inline void poll() {
  static thread_local unsigned nodes = 0;
  if ((++nodes & 4095) == 0) poll_interrupt();
}

// Whether every real leaf of v is wrapped in tag kind k, and whether one is: such a structure is
// the distributed form of one tagged pair, and prints with the tag at the root (its strings and
// procedures in both parts). 0: no; 1: yes,
// no leaf tagged (no real at all); 2: yes, a leaf tagged.
int distributed(Value v, Kind k);

// Whether the procedure v is what the transform of tag kind k makes (j* for Kind::Bundle, *j for
// Kind::Reverse) at its outermost level: a closure of a lambda that transform made, or of a
// primitive's rule of that kind; or a primitive that is its own version of that kind (its rule
// acts on tagged values directly, as car's forward version is car).
bool transformed_by(Value v, Kind k) {
  char t = k == Kind::Bundle ? 'F' : 'R';
  if (is(v, Kind::Prim)) {
    Prim* p = static_cast<Prim*>(v.as_obj());
    return p->cls != PrimClass::Host && !(t == 'F' ? p->fwd_rule : p->rev_rule);
  }
  Lambda* l = static_cast<Closure*>(v.as_obj())->lambda;
  return (l->transform ? l->transform : l->rule_kind) == t;
}

// The answers for the pairs met while printing one value (write_string), by pair and kind: the
// printer asks it of every pair it writes, and each question walked that pair's whole car-subtree
// again (a list nested 40,000 deep in its cars took 10 s to print; 10^6 deep never ended).
thread_local std::unordered_map<uintptr_t, uint8_t>* distributed_memo = nullptr;
// The structures write_tagged_root builds (project) while that memo is in use, kept alive to the
// end of the print: the memo is keyed by address, and a pair of the primal part printed and then
// collected could be reused for one of the tangent part, which took its stale answer (a long list
// of nested bundles printed tangents 3 where they were 4, from run to run).
thread_local gc_vector<Value>* projected_keep = nullptr;

int distributed_part(Value v, Kind k) {
  v = force(v);
  if (!distributed_memo || !is_pair(v)) return distributed(v, k);
  uintptr_t key = (uintptr_t)v.as_obj() | (k == Kind::Reverse ? 1 : 0);  // (objects are aligned)
  auto it = distributed_memo->find(key);
  if (it != distributed_memo->end()) return it->second;
  int r = distributed(v, k);
  (*distributed_memo)[key] = (uint8_t)r;
  // The pair is the memo's key by its address: kept to the end of the print. A pair made while
  // printing (a level of a lazy zero or of *j of a list), once collected, left its address to
  // another, which took its answer: (list (*j (list 1 2)) (zero (list 3 4))) printed its zeros as
  // reverse values under GC stress.
  if (projected_keep) projected_keep->push_back(v);
  return r;
}

int distributed(Value v, Kind k) {
  int state = 1;
  for (;;) {
    poll();
    v = force(v);
    if (v.is_real()) return 0;
    if (!v.is_obj()) return state;
    Kind vk = kind_of(v);
    if (vk == k) return 2;
    // (a string prints the same in either part, as does a procedure transformed by the tag's
    // transform; an untransformed procedure is no tagged value: the pair is not distributed)
    if (vk == Kind::Closure || vk == Kind::Prim) {
      if (!transformed_by(v, k)) return 0;
      return state;
    }
    if (vk != Kind::Pair) return vk == Kind::String ? state : 0;
    int c = distributed_part(car(v), k);
    if (c == 0) return 0;
    if (c == 2) state = 2;
    v = cdr(v);
  }
}

// Takes the distributed form apart: part 0 is the primal (or untagged value), part 1 the tangent.
Value project(Value v, Kind k, int part) {
  poll();
  v = force(v);
  if (!v.is_obj()) return v;
  Kind vk = kind_of(v);
  if (vk == Kind::Pair) return cons(project(car(v), k, part), project(cdr(v), k, part));
  // a transformed procedure (transformed_by), or a primitive that is its own version: what
  // `primal` (or `*j-inverse`) and `tangent` give of it (a tangent is a procedure too)
  if (vk == Kind::Closure || vk == Kind::Prim) {
    try {
      if (k == Kind::Reverse) return star_j_inverse(v);
      return part == 0 ? primal(v) : unperturb(tangent(v));
    } catch (const Error&) {
      return v;  // (printing never fails: the procedure as it is)
    }
  }
  if (vk != k) return v;
  if (k == Kind::Bundle) {
    Bundle* b = static_cast<Bundle*>(v.as_obj());
    return part == 0 ? b->primal : b->tangent;
  }
  return static_cast<Tagged*>(v.as_obj())->v;
}

void write(std::string& out, Value v, bool display);

Value kept(Value v) {
  if (projected_keep) projected_keep->push_back(v);
  return v;
}

void write_tagged_root(std::string& out, Value v, Kind k, bool display) {
  if (k == Kind::Bundle) {
    out += "(forward ";
    write(out, kept(project(v, k, 0)), display);
    out += " (perturbation ";
    write(out, kept(project(v, k, 1)), display);
    out += "))";
  } else {
    out += "(reverse ";
    write(out, kept(project(v, k, 0)), display);
    out += ")";
  }
}

// The most characters a brief print writes (write_brief); past it, it stops.
thread_local size_t print_limit = SIZE_MAX;
struct PrintLimitReached {};

void write(std::string& out, Value v, bool display) {
  poll();
  if (out.size() > print_limit) throw PrintLimitReached();
  if (v.is_real()) { out += format_real(v.as_real()); return; }
  if (v.is_nil()) { out += "()"; return; }
  if (v.is_bool()) { out += v.is_false() ? "#f" : "#t"; return; }
  if (v.is_zero_sens()) { out += "#<zero>"; return; }  // never leaves a backpropagator
  v = unview(v);
  if (!v.is_obj()) { out += "#<unbound>"; return; }
  switch (kind_of(v)) {
    case Kind::Pair: {
      for (Kind k : {Kind::Bundle, Kind::Reverse})
        if (distributed_part(v, k) == 2) { write_tagged_root(out, v, k, display); return; }
      out += "(";
      write(out, car(v), display);
      Value p = force(cdr(v));
      while (is_pair(p)) {
        poll();
        out += " ";
        write(out, car(p), display);
        p = force(cdr(p));
      }
      if (!p.is_nil()) {
        out += " . ";
        write(out, p, display);
      }
      out += ")";
      return;
    }
    case Kind::String: {
      String* s = static_cast<String*>(v.as_obj());
      if (display) { out.append(s->chars, s->len); return; }
      out += '"';
      for (size_t i = 0; i < s->len; i++) {
        char c = s->chars[i];
        if (c == '"' || c == '\\') { out += '\\'; out += c; }
        else if (c == '\n') out += "\\n";
        else if (c == '\t') out += "\\t";
        else if (c == '\r') out += "\\r";
        else if (c == '\a') out += "\\a";
        else if (c == '\b') out += "\\b";
        else if ((unsigned char)c < 0x20 || c == 0x7f) {  // (the reader's \xHH; reads it back)
          char buf[8];
          snprintf(buf, sizeof buf, "\\x%x;", (unsigned char)c);
          out += buf;
        } else out += c;
      }
      out += '"';
      return;
    }
    // (the library's internal names, %tangent-of and the like, are not the user's to see)
    case Kind::Prim: {
      const char* name = static_cast<Prim*>(v.as_obj())->name;
      out += name[0] == '%' ? std::string("#<procedure>") : std::string("#<procedure ") + name + ">";
      return;
    }
    case Kind::Closure: {
      Lambda* l = static_cast<Closure*>(v.as_obj())->lambda;
      bool internal = l->name && l->name[0] == '%' && l->pos.file && !strcmp(l->pos.file, "<prelude>");
      if (l->name && !internal) out += std::string("#<procedure ") + l->name + ">";
      else out += "#<procedure>";
      return;
    }
    case Kind::Bundle: {
      Bundle* b = static_cast<Bundle*>(v.as_obj());
      out += "(forward ";
      write(out, b->primal, display);
      out += " (perturbation ";
      write(out, b->tangent, display);
      out += "))";
      return;
    }
    case Kind::Reverse: out += "(reverse "; write(out, static_cast<Tagged*>(v.as_obj())->v, display); out += ")"; return;
    case Kind::Perturbation: out += "(perturbation "; write(out, static_cast<Tagged*>(v.as_obj())->v, display); out += ")"; return;
    case Kind::Sensitivity: out += "(sensitivity "; write(out, static_cast<Tagged*>(v.as_obj())->v, display); out += ")"; return;
    case Kind::Zero:
    case Kind::LazyJ:
    case Kind::OneHot:
    case Kind::HotSum: write(out, force(v), display); return;
  }
}

// While one value is printed: the memo of distributed() (the outermost print keeps it).
struct PrintScope {
  std::unordered_map<uintptr_t, uint8_t> memo;
  gc_vector<Value> keep;  // (its buffer is the collector's, scanned; this object is on the stack)
  bool outer = distributed_memo == nullptr;
  PrintScope() {
    if (outer) {
      distributed_memo = &memo;
      projected_keep = &keep;
    }
  }
  ~PrintScope() {
    if (outer) {
      distributed_memo = nullptr;
      projected_keep = nullptr;
    }
  }
};

}  // namespace

std::string write_string(Value v) {
  PrintScope scope;
  std::string out;
  write(out, v, false);
  return out;
}

std::string write_brief(Value v, size_t limit) {
  PrintScope scope;
  struct Limit {  // (restored however the print ends)
    size_t was = print_limit;
    explicit Limit(size_t l) { print_limit = l; }
    ~Limit() { print_limit = was; }
  } set(limit);
  std::string out;
  try {
    write(out, v, false);
  } catch (const PrintLimitReached&) {
  }
  if (out.size() > limit) return out.substr(0, limit) + " ...";
  return out;
}

std::string display_string(Value v) {
  PrintScope scope;
  std::string out;
  write(out, v, true);
  return out;
}

}  // namespace vlad
