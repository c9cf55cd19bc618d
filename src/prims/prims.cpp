// prims.cpp — the builtin primitives, declared in one table. Each arithmetic row carries its
// partial derivatives as VLAD expressions; from them the forward and reverse versions are written
// once (see rules below), in VLAD, so they can themselves be transformed (nesting to any depth).
#include <cerrno>
#include <cstring>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <unistd.h>

#include "../ad/ad.hpp"
#include "../eval/interp.hpp"
#include "prims.hpp"
#include "../values/reader.hpp"

namespace vlad {

std::atomic<bool> stdout_mid_line{false};

namespace {
std::string stdin_buf;  // read from fd 0, not yet taken: stdin_buf[stdin_at ...]
size_t stdin_at = 0;
bool stdin_ended = false;

// Reads more of standard input into the buffer: false at its end (or on an error).
bool stdin_fill() {
  if (stdin_ended) return false;
  if (stdin_at > 0) {
    stdin_buf.erase(0, stdin_at);
    stdin_at = 0;
  }
  char chunk[65536];
  for (;;) {
    ssize_t n = read(0, chunk, sizeof chunk);
    if (n > 0) {
      stdin_buf.append(chunk, (size_t)n);
      return true;
    }
    if (n < 0 && errno == EINTR) continue;
    stdin_ended = true;
    return false;
  }
}

bool stdin_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
}  // namespace

bool stdin_line(std::string& line) {
  for (size_t scanned = stdin_at;;) {
    size_t nl = stdin_buf.find('\n', scanned);
    if (nl != std::string::npos) {
      line.assign(stdin_buf, stdin_at, nl - stdin_at);
      stdin_at = nl + 1;
      return true;
    }
    scanned = stdin_buf.size() - stdin_at;  // (offset from stdin_at: the buffer may move)
    if (!stdin_fill()) break;
    scanned += stdin_at;
  }
  if (stdin_at >= stdin_buf.size()) return false;
  line.assign(stdin_buf, stdin_at, std::string::npos);  // a last line with no newline
  stdin_at = stdin_buf.size();
  return true;
}

bool stdin_token(std::string& token) {
  for (;;) {  // (blanks, lines included, before it)
    while (stdin_at < stdin_buf.size() && stdin_space(stdin_buf[stdin_at])) stdin_at++;
    if (stdin_at < stdin_buf.size()) break;
    if (!stdin_fill()) return false;
  }
  token.clear();
  for (;;) {
    while (stdin_at < stdin_buf.size() && !stdin_space(stdin_buf[stdin_at])) token += stdin_buf[stdin_at++];
    if (stdin_at < stdin_buf.size() || !stdin_fill()) return true;
  }
}

std::string stdin_rest() {
  while (stdin_fill()) {
  }
  std::string rest = stdin_buf.substr(std::min(stdin_at, stdin_buf.size()));
  stdin_at = stdin_buf.size();
  return rest;
}

void meter_count(Prim* p) { current->meter[p->id]++; }

namespace {

Value forced(Value v) { return is_lazy(v) ? force(v) : v; }

[[noreturn]] void type_error(Prim* p, const char* expected, Value v) {
  throw Error(std::string(p->name) + ": expected " + expected + ", got " + write_brief(v));
}

[[noreturn]] void second_arg_error(Prim* p, Value b);

// A real argument (the second of a binary primitive's: `second`, whose error says more).
template <bool second = false>
inline double real_arg(Prim* p, Value v) {
  if (v.is_real()) return v.as_real();
  if (is_lazy(v)) {
    Value m = force(v);
    if (m.is_real()) return m.as_real();
  }
  if (second) second_arg_error(p, v);
  type_error(p, "a real", v);
}

// Comparisons and predicates look through AD tags (a transformed comparison compares primals).
template <bool second = false>
inline double compare_arg(Prim* p, Value v) {
  if (v.is_real()) return v.as_real();
  Value s = strip_tags(v);
  if (s.is_real()) return s.as_real();
  if (second) second_arg_error(p, v);
  type_error(p, "a real", v);
}

// A binary primitive's second argument that is not a real: a call with more arguments, (+ a b c),
// gives it the rest, (b . c), which the user never wrote: the message asks whether that is what
// they did. (A proper list, (* x (list 1 2)), is more likely a list given as the second argument.)
[[noreturn]] __attribute__((noinline, cold)) void second_arg_error(Prim* p, Value b) {
  Value r = forced(b);
  long n = 2;
  for (; is_pair(r) && n < 1000000; n++) r = forced(cdr(r));
  if (n > 2 && !r.is_nil())  // (or a pair as the second argument, (* dt v) with v a pair: the same tuple)
    throw Error(std::string(p->name) + ": expected a real, got " + write_brief(b) + " (" + p->name +
                " takes 2 arguments: was it given " + std::to_string(n) + "?)");
  type_error(p, "a real", b);
}

#define UNARY(fname, expr)                             \
  Value fname(Prim* p, Value v) {                      \
    double x = real_arg(p, v);                         \
    meter_count(p);                                    \
    return Value::real(expr);                          \
  }
#define BINARY(fname, expr)                            \
  Value fname(Prim* p, Value a, Value b) {             \
    double x = real_arg(p, a), y = real_arg<true>(p, b); \
    meter_count(p);                                    \
    return Value::real(expr);                          \
  }
#define COMPARE(fname, expr)                           \
  Value fname(Prim* p, Value a, Value b) {             \
    double x = compare_arg(p, a), y = compare_arg<true>(p, b); \
    meter_count(p);                                    \
    return Value::boolean(expr);                       \
  }
// (zero?, positive?, negative?: predicates, which accept any value and never fail, SPEC §3: #f
// for what is no real, uncounted)
#define COMPARE1(fname, expr)                          \
  Value fname(Prim* p, Value v) {                      \
    Value s = v.is_real() ? v : strip_tags(v);         \
    if (!s.is_real()) return Value::boolean(false);    \
    double x = s.as_real();                            \
    meter_count(p);                                    \
    return Value::boolean(expr);                       \
  }

BINARY(p_add, x + y)
BINARY(p_sub, x - y)
BINARY(p_mul, x * y)
BINARY(p_div, x / y)
BINARY(p_atan2, std::atan2(x, y))
BINARY(p_expt, std::pow(x, y))
// (a NaN argument gives NaN, whichever it is: IEEE 754-2019's minimum and maximum; (max 1 nan) was
// nan and (max nan 1) 1. The derivative rules' choice of partial is the comparison's, unchanged.)
BINARY(p_min, x <= y || x != x ? x : y)
BINARY(p_max, x >= y || x != x ? x : y)
UNARY(p_sqrt, std::sqrt(x))
UNARY(p_exp, std::exp(x))
UNARY(p_log, std::log(x))
UNARY(p_sin, std::sin(x))
UNARY(p_cos, std::cos(x))
UNARY(p_abs, std::fabs(x))
UNARY(p_tan, std::tan(x))
UNARY(p_tanh, std::tanh(x))
COMPARE(p_eq, x == y)
COMPARE(p_lt, x < y)
COMPARE(p_gt, x > y)
COMPARE(p_le, x <= y)
COMPARE(p_ge, x >= y)
COMPARE1(p_zerop, x == 0)
COMPARE1(p_positivep, x > 0)
COMPARE1(p_negativep, x < 0)




// (*j x) of a real x in a pair, or the zero of a pair: known without making them (a reverse real
// for each of W7's tests of its tree's parts). (A view of *j of a pair's other parts can stand
// for a lazy value, a zero or a *j of a pair: that is forced.)
inline bool j_atom_view(Value v) { return is_j_view(v) && view_tag(v) != kViewJ && j_view_part(v).is_real(); }
inline bool pair_view(Value v) { return is_j_pair_view(v) || is_zero_view(v); }

// Whether both are the placeholder zero of backpropagator code (transform.cpp groups projections).
Value p_zero_sens2p(Prim*, Value a, Value b) { return Value::boolean(a.is_zero_sens() && b.is_zero_sens()); }
// (equal? of two strings, the prelude's)
Value p_string_eq(Prim*, Value a, Value b) { return Value::boolean(string_equal(forced(a), forced(b))); }
// (the prelude's %sensitivity-of? for a procedure: its sensitivity or tangent is a closure of its lambda)
Value p_procedures_conform(Prim*, Value a, Value b) { return Value::boolean(procedures_conform(a, b)); }
Value p_nullp(Prim*, Value v) { return Value::boolean(!pair_view(v) && !j_atom_view(v) && forced(v).is_nil()); }
Value p_booleanp(Prim*, Value v) { return Value::boolean(!pair_view(v) && !j_atom_view(v) && forced(v).is_bool()); }
Value p_realp(Prim*, Value v) { return Value::boolean(strip_tags(v).is_real()); }
// (%reals? y): y is a proper, non-empty list of untagged reals (the prelude's fast basis). A lazy
// value or a tagged element answers #f: the general way handles them.
Value p_realsp(Prim*, Value v) {
  if (pair_view(v) || j_atom_view(v)) return Value::boolean(false);
  v = forced(v);
  if (!is_pair(v)) return Value::boolean(false);
  for (;;) {
    if (!car(v).is_real()) return Value::boolean(false);
    Value d = cdr(v);
    if (d.is_nil()) return Value::boolean(true);
    if (pair_view(d) || j_atom_view(d)) return Value::boolean(false);
    d = forced(d);
    if (!is_pair(d)) return Value::boolean(false);
    v = d;
  }
}
Value p_pairp(Prim*, Value v) { return Value::boolean(pair_view(v) || (!j_atom_view(v) && is_pair(forced(v)))); }
Value p_procedurep(Prim*, Value v) {
  if (v.is_view() && !is_data_view(v)) return Value::boolean(true);  // a backpropagator
  v = forced(v);
  return Value::boolean(is(v, Kind::Closure) || is(v, Kind::Prim));
}
Value p_stringp(Prim*, Value v) { return Value::boolean(is(forced(v), Kind::String)); }
Value p_perturbationp(Prim*, Value v) { return Value::boolean(is(forced(v), Kind::Perturbation)); }
Value p_sensitivityp(Prim*, Value v) { return Value::boolean(is(forced(v), Kind::Sensitivity)); }
Value p_forwardp(Prim*, Value v) {
  v = forced(v);
  if (is(v, Kind::Bundle)) return Value::boolean(true);
  if (is(v, Kind::Closure)) {
    Lambda* l = static_cast<Closure*>(v.as_obj())->lambda;
    return Value::boolean(l->transform == 'F' || (l->rule_of && l->rule_kind == 'F'));
  }
  return Value::boolean(false);
}
Value p_reversep(Prim*, Value v) {
  v = forced(v);
  if (is(v, Kind::Reverse)) return Value::boolean(true);
  if (is(v, Kind::Closure)) {
    Lambda* l = static_cast<Closure*>(v.as_obj())->lambda;
    return Value::boolean(l->transform == 'R' || (l->rule_of && l->rule_kind == 'R'));
  }
  return Value::boolean(false);
}

Value p_car(Prim* p, Value v) {
  if (is_j_pair_view(v)) return j_part(static_cast<Pair*>(view_obj(v)), false);
  v = forced(v);
  if (!is_pair(v)) type_error(p, "a pair", v);
  return car(v);
}
Value p_cdr(Prim* p, Value v) {
  if (is_j_pair_view(v)) return j_part(static_cast<Pair*>(view_obj(v)), true);
  v = forced(v);
  if (!is_pair(v)) type_error(p, "a pair", v);
  return cdr(v);
}
Value p_if(Prim* p, Value v) {
  v = forced(v);
  if (!is_pair(v) || !is_pair(forced(cdr(v)))) type_error(p, "(cons test (cons consequent alternative))", v);
  Value rest = forced(cdr(v));
  return car(v).is_false() ? cdr(rest) : car(rest);
}
Value p_real(Prim* p, Value v) {
  if (!strip_tags(v).is_real()) type_error(p, "a real", v);
  return v;
}
// Output that cannot be written (a full disk, a pipe whose reader is gone while SIGPIPE is
// ignored) stops the program: a loop printing forever would otherwise never end.
void check_output(Prim* p) {
  if (__builtin_expect(!std::cout.good(), 0))
    throw Error(std::string(p->name) + ": error writing standard output (is the disk full, or the reader gone?)");
}
Value p_write_real(Prim* p, Value v) {
  // (under a derivative, the real it is the primal of: a progress print inside a differentiated
  // optimiser prints its number, as the untransformed program does)
  Value x = strip_tags(v);
  if (!x.is_real()) type_error(p, "a real", v);
  std::cout << write_string(x) << "\n";
  stdout_mid_line.store(false, std::memory_order_relaxed);
  check_output(p);
  return v;
}
Value p_write(Prim* p, Value v) {
  std::cout << write_string(v) << "\n";
  stdout_mid_line.store(false, std::memory_order_relaxed);
  check_output(p);
  return v;
}
Value p_display(Prim* p, Value v) {
  std::string text = display_string(v);
  std::cout << text;
  if (!text.empty()) stdout_mid_line.store(text.back() != '\n', std::memory_order_relaxed);
  check_output(p);
  return v;
}
Value p_newline(Prim* p, Value v) {
  std::cout << "\n";
  stdout_mid_line.store(false, std::memory_order_relaxed);
  check_output(p);
  return v;
}
Value p_read_real(Prim* p, Value) {
  std::cout.flush();
  // (one whitespace-separated numeral, in the program's syntax: #x10, +inf, 1e-3)
  std::string t;
  if (!stdin_token(t)) throw Error(std::string(p->name) + ": no real on standard input");
  double d;
  if (!parse_numeral(t, d)) throw Error(std::string(p->name) + ": not a real on standard input: " + t);
  return Value::real(d);
}
Value p_error(Prim*, Value v) {
  v = forced(v);
  std::string msg;
  Value rest = Value::nil();
  if (is_pair(v)) {
    msg = is(car(v), Kind::String) ? string_of(car(v)) : write_brief(car(v));
    rest = cdr(v);
  } else {
    msg = is(v, Kind::String) ? string_of(v) : write_brief(v);
  }
  if (!rest.is_nil()) {
    if (is_pair(rest) || rest.is_nil()) {
      while (is_pair(rest) && msg.size() < 1000) {  // (a message, not a dump: the first irritants)
        msg += " " + write_brief(car(rest));
        rest = cdr(rest);
      }
      if (is_pair(rest)) msg += " ...";
      else if (!rest.is_nil()) msg += " " + write_brief(rest);
    } else {
      msg += " " + write_brief(rest);
    }
  }
  throw Error(msg);
}

}  // namespace

thread_local NestedError nested_error;

void host_prim_check(Prim* p) {
  if (!p->host) throw Error(std::string(p->name) + ": its interpreter has been destroyed");
  if (current && p->host->owner && p->host->owner != current)
    throw Error(std::string(p->name) + ": a host primitive of another interpreter (a procedure may be used only by the interpreter that made it)");
}

namespace {

// Host primitives: the reals of the argument go to the host's function; an exception it throws
// becomes an Error naming the primitive, so it reaches the host as a vlad::Error with a trace.
Value call_host(Prim* p, const std::vector<double>& xs) {
  host_prim_check(p);
  nested_error = NestedError();  // (one the host function caught and dealt with, earlier)
  try {
    return Value::real(p->host->f(xs));
  } catch (const std::exception& e) {
    NestedError nested = std::move(nested_error);
    nested_error = NestedError();
    if (nested.error && nested.message == e.what()) {
      // An error of an evaluation the host function started, on its way out: the same error
      // goes on, its trace to be completed with the calls of this evaluation (this primitive's
      // call among them) as if the inner evaluation's calls had been made from here.
      try {
        std::rethrow_exception(nested.error);
      } catch (Error& inner) {
        inner.traced = false;
        inner.depth = eval_depth;
        throw;
      }
    }
    throw Error(std::string(p->name) + ": " + e.what());
  } catch (...) {
    throw Error(std::string(p->name) + ": the host function threw a non-standard exception");
  }
}
Value p_host1(Prim* p, Value v) {
  if (!p->host) return call_host(p, {});
  int n = p->host->arity;
  if (n == 1) return call_host(p, {real_arg(p, v)});
  std::string expected = "a tuple of " + std::to_string(n) + " reals";
  std::vector<double> xs;
  Value rest = forced(v);
  for (int i = 0; i < n; i++) {
    Value x = rest;
    if (i + 1 < n) {  // (x_i . rest)
      if (!is_pair(rest)) type_error(p, expected.c_str(), v);
      x = car(rest);
      rest = forced(cdr(rest));
    }
    x = forced(x);
    if (!x.is_real()) type_error(p, expected.c_str(), v);
    xs.push_back(x.as_real());
  }
  return call_host(p, xs);
}
Value p_host2(Prim* p, Value a, Value b) { return call_host(p, {real_arg(p, a), real_arg(p, b)}); }

Value p_zero(Prim*, Value v) { return zero_of(v); }
Value p_rzero(Prim*, Value v) { return rzero(v); }
Value p_plus(Prim*, Value a, Value b) { return plus(a, b); }
Value p_perturb(Prim*, Value v) { return perturb(v); }
Value p_unperturb(Prim*, Value v) { return unperturb(v); }
Value p_bundle(Prim*, Value a, Value b) { return bundle(a, b); }
Value p_primal(Prim*, Value v) { return primal(v); }
Value p_tangent(Prim*, Value v) { return tangent(v); }
Value p_tangent_s(Prim*, Value v) { return tangent_structural(v); }
Value p_tangent_bar(Prim*, Value x, Value y) { return tangent_bar(x, y); }
Value p_sensitize(Prim*, Value v) { return sensitize(v); }
Value p_unsensitize(Prim*, Value v) { return unsensitize(v); }
Value p_star_j(Prim*, Value v) { return star_j(v); }
Value p_star_j_inverse(Prim*, Value v) { return star_j_inverse(v); }

// ---- derivative rules (VLAD source) ----
// Unary real primitive u with derivative D(x) (paper §4: ←u and its forward analogue).
std::string fwd_unary(const std::string& op, const std::string& d) {
  return "(lambda (b) (let ((x (primal b)) (dx (unperturb (tangent b)))) (bundle (" + op +
         " x) (perturb (* " + d + " dx)))))";
}
std::string rev_unary(const std::string& op, const std::string& d) {
  return "(lambda (xr) (let ((x (*j-inverse xr))) (cons (*j (" + op +
         " x)) (lambda (y) (cons '() (* " + d + " y))))))";
}
// Real binary primitive op, taking the pair (x1 . x2), with partials over x1 and x2: `tan` is the
// tangent expression over dx1 and dx2, `sens` the pair of argument sensitivities over y. (Host
// primitives of more arguments: host_fwd_rule, host_rev_rule.)
std::string fwd_binary(const std::string& op, const std::string& tan) {
  return "(lambda (b) (let* ((p (primal b)) (x1 (car p)) (x2 (cdr p)) (t (unperturb (tangent b))) (dx1 (car t)) "
         "(dx2 (cdr t))) (bundle (" + op + " x1 x2) (perturb " + tan + "))))";
}
std::string rev_binary(const std::string& op, const std::string& sens) {
  return "(lambda (xr) (let* ((p (*j-inverse xr)) (x1 (car p)) (x2 (cdr p))) (cons (*j (" + op +
         " x1 x2)) (lambda (y) (cons '() " + sens + ")))))";
}
// The tangent (into *fwd) and the sensitivity tuple (returned) of a binary primitive with
// partials d1, d2 (expressions over x1, x2).
std::string partial_rules(const std::string& d1, const std::string& d2, std::string* fwd) {
  *fwd = "(+ (* " + d1 + " dx1) (* " + d2 + " dx2))";
  return "(cons (* " + d1 + " y) (* " + d2 + " y))";
}
// The rules of a host primitive op of n >= 2 reals with partial primitives d[0..n-1], in text
// linear in n: each partial takes the argument tuple p as it is (op's own argument), and the
// tangent's parts are taken apart by one pattern, (cons* dx1 dx2 ... dxn). (fwd_binary's form
// grown to n, (car (cdr (cdr ... p))) for each part and a call (d x1 ... xn) for each partial, was text of size n^2,
// built by prepending: n = 1000 took 4 s to register and 2 s and a GB to analyse at its first
// use.) Every name is looked up in one of two or three scopes: a let* binding each part in a
// scope of its own made a chain of n scopes, up which each partial's distinct name was looked
// for, n^2 in all. The tangent is d1 dx1 + (d2 dx2 + (... + dn dxn)) and the sensitivity
// (d1 y . (d2 y . ... dn y)), as before.
std::string host_fwd_rule(const std::string& op, const std::vector<std::string>& d) {
  size_t n = d.size();
  std::string parts = "(cons*", sum;
  for (size_t i = 1; i <= n; i++) parts += " dx" + std::to_string(i);
  parts += ")";
  for (size_t i = 1; i < n; i++) sum += "(+ (* (" + d[i - 1] + " p) dx" + std::to_string(i) + ") ";
  sum += "(* (" + d[n - 1] + " p) dx" + std::to_string(n) + ")" + std::string(n - 1, ')');
  return "(lambda (b) (let ((p (primal b)) (t (unperturb (tangent b)))) (let ((" + parts + " t)) (bundle (" + op +
         " p) (perturb " + sum + ")))))";
}
std::string host_rev_rule(const std::string& op, const std::vector<std::string>& d) {
  std::string sens;
  for (const std::string& di : d) sens += " (* (" + di + " p) y)";
  return "(lambda (xr) (let ((p (*j-inverse xr))) (cons (*j (" + op + " p)) (lambda (y) (cons* '()" + sens + ")))))";
}
// Comparisons and type predicates: the result does not depend on the reals, so the sensitivity
// is zero; they look through tags, so their forward version is themselves.
std::string rev_constant(const std::string& op) {
  return "(lambda (xr) (cons (" + op + " xr) (%zero-bp xr)))";
}
// Tag predicates look at the outermost tag, under the transform's own.
std::string fwd_tagpred(const std::string& op) { return "(lambda (b) (" + op + " (primal b)))"; }
std::string rev_tagpred(const std::string& op) {
  return "(lambda (xr) (cons (" + op + " (*j-inverse xr)) (%zero-bp xr)))";
}
// The AD primitives are linear, so their forward version applies them to primal and tangent
// alike; their reverse version applies the transpose (paper §4, ←0 ←⊕ ←J ←J⁻¹).
// (%tangent: the tangent part as the structure of the value, also for a procedure.)
std::string fwd_linear(const std::string& op) {
  return "(lambda (v) (bundle (" + op + " (primal v)) (perturb (" + op + " (unperturb (%tangent v))))))";
}
// For the operations that commute with *j (J(op x) = op (J x): zero, plus, *j, *j-inverse and
// the lazy zero), the value is computed on the reverse values directly: no J⁻¹ of the argument,
// which would walk it (paper end of §4: these primitives must not traverse their input).
std::string rev_commuting(const std::string& op, const std::string& transpose) {
  return "(lambda (xr) (cons (" + op + " xr) (lambda (y) (cons '() " + transpose + "))))";
}
std::string rev_linear(const std::string& op, const std::string& transpose) {
  return "(lambda (xr) (let ((x (*j-inverse xr))) (cons (*j (" + op +
         " x)) (lambda (y) (cons '() " + transpose + ")))))";
}
// Structural primitives act on transformed values directly; their sensitivity rule is given.
std::string rev_structural(const std::string& op, const std::string& sens) {
  return "(lambda (xr) (cons (" + op + " xr) (lambda (y) (cons '() " + sens + "))))";
}

struct Row {
  const char* name;
  int arity;
  PrimClass cls;
  Value (*fn1)(Prim*, Value);
  Value (*fn2)(Prim*, Value, Value);
  std::string fwd, rev;
};

const char* intern_rule(const std::string& s) { return s.empty() ? nullptr : intern(s); }

std::vector<Row> table() {
  std::vector<Row> t;
  auto unary = [&](const char* n, Value (*f)(Prim*, Value), const std::string& d) {
    t.push_back({n, 1, PrimClass::Arith, f, nullptr, fwd_unary(n, d), rev_unary(n, d)});
  };
  auto binary = [&](const char* n, Value (*f)(Prim*, Value, Value), const std::string& d1, const std::string& d2) {
    std::string tan;
    std::string sens = partial_rules(d1, d2, &tan);
    t.push_back({n, 2, PrimClass::Arith, nullptr, f, fwd_binary(n, tan), rev_binary(n, sens)});
  };
  t.push_back({"+", 2, PrimClass::Arith, nullptr, p_add, fwd_binary("+", "(+ dx1 dx2)"), rev_binary("+", "(cons y y)")});
  t.push_back({"-", 2, PrimClass::Arith, nullptr, p_sub, fwd_binary("-", "(- dx1 dx2)"),
               rev_binary("-", "(cons y (- 0 y))")});
  t.push_back({"*", 2, PrimClass::Arith, nullptr, p_mul, fwd_binary("*", "(+ (* x2 dx1) (* x1 dx2))"),
               rev_binary("*", "(cons (* x2 y) (* x1 y))")});
  binary("/", p_div, "(/ 1 x2)", "(- 0 (/ x1 (* x2 x2)))");
  binary("atan", p_atan2, "(/ x2 (+ (* x1 x1) (* x2 x2)))", "(- 0 (/ x1 (+ (* x1 x1) (* x2 x2))))");
  // (x1^0 is the constant 1, whose partial is 0 at x1 = 0 too, not 0 * 0^-1 = nan: a polynomial
  // written with expt had no derivative at 0, nor x^n an (n+1)-th. Only at x1 = 0: elsewhere the
  // partial x2 x1^(x2-1) is 0 at x2 = 0 by itself, and keeps its derivative in x2, which a
  // constant 0 lost where the exponent varies: the third derivative of x^x at 1 was 2, not 3)
  binary("expt", p_expt, "(if (and (= x2 0) (= x1 0)) 0 (* x2 (expt x1 (- x2 1))))",
         "(if (> x1 0) (* (expt x1 x2) (log x1)) 0)");
  binary("min", p_min, "(if (<= x1 x2) 1 0)", "(if (<= x1 x2) 0 1)");
  binary("max", p_max, "(if (>= x1 x2) 1 0)", "(if (>= x1 x2) 0 1)");
  unary("sqrt", p_sqrt, "(/ 1 (* 2 (sqrt x)))");
  unary("exp", p_exp, "(exp x)");
  unary("log", p_log, "(/ 1 x)");
  unary("sin", p_sin, "(cos x)");
  unary("cos", p_cos, "(- 0 (sin x))");
  unary("abs", p_abs, "(if (< x 0) -1 (if (> x 0) 1 0))");
  unary("tan", p_tan, "(let ((c (cos x))) (/ 1 (* c c)))");
  unary("tanh", p_tanh, "(let ((y (tanh x))) (- 1 (* y y)))");
  for (auto [n, f] : std::vector<std::pair<const char*, Value (*)(Prim*, Value, Value)>>{
           {"=", p_eq}, {"<", p_lt}, {">", p_gt}, {"<=", p_le}, {">=", p_ge}})
    t.push_back({n, 2, PrimClass::Compare, nullptr, f, "", rev_constant(n)});
  for (auto [n, f] : std::vector<std::pair<const char*, Value (*)(Prim*, Value)>>{
           {"zero?", p_zerop}, {"positive?", p_positivep}, {"negative?", p_negativep}})
    t.push_back({n, 1, PrimClass::Compare, f, nullptr, "", rev_constant(n)});
  for (auto [n, f] : std::vector<std::pair<const char*, Value (*)(Prim*, Value)>>{{"null?", p_nullp},
                                                                                   {"boolean?", p_booleanp},
                                                                                   {"real?", p_realp},
                                                                                   {"pair?", p_pairp},
                                                                                   {"procedure?", p_procedurep},
                                                                                   {"string?", p_stringp}})
    t.push_back({n, 1, PrimClass::Predicate, f, nullptr, "", rev_constant(n)});
  for (auto [n, f] : std::vector<std::pair<const char*, Value (*)(Prim*, Value)>>{
           {"perturbation?", p_perturbationp},
           {"forward?", p_forwardp},
           {"sensitivity?", p_sensitivityp},
           {"reverse?", p_reversep},
           {"%reals?", p_realsp}})
    t.push_back({n, 1, PrimClass::Predicate, f, nullptr, fwd_tagpred(n), rev_tagpred(n)});
  t.push_back({"%zero-sensitivities?", 2, PrimClass::Predicate, nullptr, p_zero_sens2p, "", rev_constant("%zero-sensitivities?")});
  t.push_back({"%string=?", 2, PrimClass::Predicate, nullptr, p_string_eq, "", rev_constant("%string=?")});
  t.push_back({"%procedures-conform?", 2, PrimClass::Predicate, nullptr, p_procedures_conform, "",
               rev_constant("%procedures-conform?")});
  t.push_back({"car", 1, PrimClass::Structural, p_car, nullptr, "",
               rev_structural("car", "(cons y (%rzero (cdr xr)))")});
  t.push_back({"cdr", 1, PrimClass::Structural, p_cdr, nullptr, "",
               rev_structural("cdr", "(cons (%rzero (car xr)) y)")});
  t.push_back({"if-procedure", 1, PrimClass::Structural, p_if, nullptr, "",
               "(lambda (xr) (let ((c (car xr)) (th (car (cdr xr))) (el (cdr (cdr xr)))) (cons (if-procedure xr) "
               "(lambda (y) (cons '() (cons (%rzero c) (if c (cons y (%rzero el)) (cons (%rzero th) y))))))))"});
  t.push_back({"real", 1, PrimClass::Structural, p_real, nullptr, "", rev_structural("real", "y")});
  t.push_back({"write-real", 1, PrimClass::Structural, p_write_real, nullptr, "", rev_structural("write-real", "y")});
  t.push_back({"write", 1, PrimClass::Structural, p_write, nullptr, "", rev_structural("write", "y")});
  t.push_back({"display", 1, PrimClass::Structural, p_display, nullptr, "", rev_structural("display", "y")});
  t.push_back({"newline", 1, PrimClass::Structural, p_newline, nullptr, "", rev_structural("newline", "y")});
  t.push_back({"read-real", 1, PrimClass::Structural, p_read_real, nullptr,
               "(lambda (b) (bundle (read-real '()) (perturb 0)))",
               "(lambda (xr) (cons (*j (read-real '())) (lambda (y) (cons '() (%rzero xr)))))"});
  t.push_back({"error", 1, PrimClass::Structural, p_error, nullptr, "", ""});
  // AD primitives.
  t.push_back({"zero", 1, PrimClass::AD, p_zero, nullptr, fwd_linear("zero"), rev_commuting("zero", "(%rzero xr)")});
  t.push_back({"%rzero", 1, PrimClass::AD, p_rzero, nullptr, fwd_linear("%rzero"), rev_commuting("%rzero", "(%rzero xr)")});
  t.push_back({"plus", 2, PrimClass::AD, nullptr, p_plus, fwd_linear("plus"), rev_commuting("plus", "(cons y y)")});
  t.push_back({"perturb", 1, PrimClass::AD, p_perturb, nullptr, fwd_linear("perturb"), rev_linear("perturb", "(unperturb y)")});
  t.push_back({"unperturb", 1, PrimClass::AD, p_unperturb, nullptr, fwd_linear("unperturb"),
               rev_linear("unperturb", "(perturb y)")});
  t.push_back({"bundle", 2, PrimClass::AD, nullptr, p_bundle, fwd_linear("bundle"),
               rev_linear("bundle", "(cons (primal y) (%tangent y))")});
  t.push_back({"primal", 1, PrimClass::AD, p_primal, nullptr, fwd_linear("primal"),
               rev_linear("primal", "(bundle y (zero (%tangent x)))")});
  t.push_back({"tangent", 1, PrimClass::AD, p_tangent, nullptr, fwd_linear("tangent"),
               rev_linear("tangent", "(%tangent-bar x y)")});
  t.push_back({"%tangent", 1, PrimClass::AD, p_tangent_s, nullptr, fwd_linear("%tangent"),
               rev_linear("%tangent", "(bundle (zero (primal x)) y)")});
  // The transpose of tangent: linear in y; its own transpose is tangent again.
  t.push_back({"%tangent-bar", 2, PrimClass::AD, nullptr, p_tangent_bar, fwd_linear("%tangent-bar"),
               "(lambda (xr) (let ((p (*j-inverse xr))) (cons (*j (%tangent-bar p)) "
               "(lambda (z) (cons '() (cons (zero (car p)) (tangent z)))))))"});
  t.push_back({"sensitize", 1, PrimClass::AD, p_sensitize, nullptr, fwd_linear("sensitize"),
               rev_linear("sensitize", "(unsensitize y)")});
  t.push_back({"unsensitize", 1, PrimClass::AD, p_unsensitize, nullptr, fwd_linear("unsensitize"),
               rev_linear("unsensitize", "(sensitize y)")});
  t.push_back({"*j", 1, PrimClass::AD, p_star_j, nullptr, fwd_linear("*j"), rev_commuting("*j", "(*j-inverse y)")});
  t.push_back({"*j-inverse", 1, PrimClass::AD, p_star_j_inverse, nullptr, fwd_linear("*j-inverse"),
               rev_commuting("*j-inverse", "(*j y)")});
  return t;
}

}  // namespace

namespace {

Prim* new_prim(const char* name, int arity, PrimClass cls, Value (*fn1)(Prim*, Value),
               Value (*fn2)(Prim*, Value, Value), const std::string& fwd, const std::string& rev) {
  Prim* p = static_cast<Prim*>(gc_alloc(sizeof(Prim)));  // (kept by Interp::prims)
  new (p) Prim();
  p->kind = Kind::Prim;
  p->name = intern(name);
  p->arity = arity;
  p->cls = cls;
  p->fn1 = fn1;
  p->fn2 = fn2;
  p->fwd_rule = intern_rule(fwd);
  p->rev_rule = intern_rule(rev);
  p->fwd = Value::unbound();
  p->rev = Value::unbound();
  return p;
}

}  // namespace

std::vector<Prim*, traceable_allocator<Prim*>> make_builtin_prims() {
  std::vector<Prim*, traceable_allocator<Prim*>> out;
  for (const Row& r : table()) out.push_back(new_prim(r.name, r.arity, r.cls, r.fn1, r.fn2, r.fwd, r.rev));
  return out;
}

std::string host_alias(const std::string& name) { return "%host:" + name; }

// The rules are the builtins' (fwd_unary, rev_unary; for more arguments host_fwd_rule and
// host_rev_rule, fwd_binary's and rev_binary's computation in text linear in the arity) with calls
// of the partials' primitives as the partial derivatives, so forward, reverse and nested AD of a
// host primitive work as for `sin`.
// They name the primitive and its partials by their prelude aliases, which the expander leaves
// late-bound: a partial registered again is what the rules call from then on.
Prim* make_host_prim(const std::string& name, Host* host, const std::vector<std::string>& rule_names) {
  int n = host->arity;
  std::string fwd, rev, op = host_alias(name);
  if (!host->partials.empty()) {
    if (n == 1) {
      std::string d = "(" + rule_names[0] + " x)";
      fwd = fwd_unary(op, d);
      rev = rev_unary(op, d);
    } else {
      fwd = host_fwd_rule(op, rule_names);
      rev = host_rev_rule(op, rule_names);
    }
  }
  Prim* p = new_prim(name.c_str(), n == 2 ? 2 : 1, PrimClass::Host, n == 2 ? nullptr : p_host1,
                     n == 2 ? p_host2 : nullptr, fwd, rev);
  p->host = host;
  return p;
}

bool string_equal(Value a, Value b) {
  if (!is(a, Kind::String) || !is(b, Kind::String)) return false;
  const String* x = static_cast<const String*>(a.as_obj());
  const String* y = static_cast<const String*>(b.as_obj());
  return x->len == y->len && std::memcmp(x->chars, y->chars, x->len) == 0;
}

Value apply_prim(Prim* p, Value arg) {
  if (p->arity == 2) {
    if (is_lazy(arg)) arg = force(arg);
    if (!is_pair(arg)) throw Error(std::string(p->name) + ": expected a pair of arguments, got " + write_brief(arg));
    return p->fn2(p, car(arg), cdr(arg));
  }
  return p->fn1(p, arg);
}

}  // namespace vlad
