// native.cpp — native fast paths for the rule lambdas of builtin primitives.
// A primitive's forward and reverse versions are VLAD closures (prims.cpp writes their rules), so
// that transforming them again works like any closure. At the first level of transformation —
// bundles of plain reals, reverse values of plain reals — running them through the interpreter
// costs several allocations per arithmetic operation; these functions compute the same values
// (and count the same primitive operations) directly. Anything else falls back to the rule body.
#include <cmath>
#include <cstring>

#include "../eval/interp.hpp"
#include "../prims/prims.hpp"
#include "ad.hpp"

namespace vlad {

namespace {

struct Ids {
  int add, sub, mul, div, sqrt_, exp_, log_, sin_, cos_, tanh_, lt, gt, le, ge, expt_;
};

const Ids& ids() {
  static Ids i = [] {
    Interp& in = *current;
    Ids r;
    r.add = in.prim("+")->id; r.sub = in.prim("-")->id; r.mul = in.prim("*")->id; r.div = in.prim("/")->id;
    r.sqrt_ = in.prim("sqrt")->id; r.exp_ = in.prim("exp")->id; r.log_ = in.prim("log")->id;
    r.sin_ = in.prim("sin")->id; r.cos_ = in.prim("cos")->id; r.tanh_ = in.prim("tanh")->id;
    r.lt = in.prim("<")->id; r.gt = in.prim(">")->id; r.le = in.prim("<=")->id; r.ge = in.prim(">=")->id;
    r.expt_ = in.prim("expt")->id;
    return r;
  }();
  return i;
}

inline void count(int id, uint64_t n = 1) { current->meter[id] += n; }

// The derivative of a unary primitive at x, counting the operations its rule performs.
bool unary_derivative(const char* name, double x, double& d) {
  const Ids& I = ids();
  if (!strcmp(name, "sqrt")) { d = 1 / (2 * std::sqrt(x)); count(I.div); count(I.mul); count(I.sqrt_); }
  else if (!strcmp(name, "exp")) { d = std::exp(x); count(I.exp_); }
  else if (!strcmp(name, "log")) { d = 1 / x; count(I.div); }
  else if (!strcmp(name, "sin")) { d = std::cos(x); count(I.cos_); }
  else if (!strcmp(name, "cos")) { d = -std::sin(x); count(I.sub); count(I.sin_); }
  else if (!strcmp(name, "abs")) {
    count(I.lt);
    if (x < 0) d = -1;
    else { count(I.gt); d = x > 0 ? 1 : 0; }
  }
  else if (!strcmp(name, "tan")) { double c = std::cos(x); d = 1 / (c * c); count(I.cos_); count(I.mul); count(I.div); }
  else if (!strcmp(name, "tanh")) { double y = std::tanh(x); d = 1 - y * y; count(I.tanh_); count(I.mul); count(I.sub); }
  else return false;
  return true;
}

// The partial derivatives of a binary primitive (general rules: prims.cpp `binary(...)`).
bool binary_partials(const char* name, double x1, double x2, double& d1, double& d2) {
  const Ids& I = ids();
  if (!strcmp(name, "/")) { d1 = 1 / x2; d2 = -(x1 / (x2 * x2)); count(I.div, 2); count(I.mul); count(I.sub); }
  else if (!strcmp(name, "atan")) {
    double r = x1 * x1 + x2 * x2;
    d1 = x2 / r; d2 = -(x1 / r);
    count(I.mul, 4); count(I.add, 2); count(I.div, 2); count(I.sub);
  }
  else if (!strcmp(name, "expt")) {
    d1 = x2 * std::pow(x1, x2 - 1); count(I.mul); count(I.expt_); count(I.sub);
    count(I.gt);
    if (x1 > 0) { d2 = std::pow(x1, x2) * std::log(x1); count(I.mul); count(I.expt_); count(I.log_); }
    else d2 = 0;
  }
  else if (!strcmp(name, "min")) { count(I.le, 2); bool a = x1 <= x2; d1 = a ? 1 : 0; d2 = a ? 0 : 1; }
  else if (!strcmp(name, "max")) { count(I.ge, 2); bool a = x1 >= x2; d1 = a ? 1 : 0; d2 = a ? 0 : 1; }
  else return false;
  return true;
}

inline bool plain_bundle(Value v, double& x, double& dx) {
  if (!is(v, Kind::Bundle)) return false;
  Bundle* b = static_cast<Bundle*>(v.as_obj());
  if (!b->primal.is_real()) return false;
  if (b->tangent.is_real()) dx = b->tangent.as_real();
  else return false;
  x = b->primal.as_real();
  return true;
}

inline bool plain_reverse(Value v, double& x) {
  if (!is(v, Kind::Reverse)) return false;
  Value r = static_cast<Tagged*>(v.as_obj())->v;
  if (!r.is_real()) return false;
  x = r.as_real();
  return true;
}

inline Prim* prim_of(Closure* c) { return c->lambda->native_prim; }
inline Lambda* bp_of(Closure* c) { return c->lambda->native_bp; }

Value make_bp(Lambda* bp, double a, double b, int n) {
  Value env[2] = {Value::real(a), Value::real(b)};
  if (n == 0) return closure_of(bp, nullptr);
  return make_closure(bp, env, n);
}

// ---- forward ----

Value fwd_unary(Closure* c, Value v) {
  double x, dx, d;
  if (!plain_bundle(v, x, dx)) return Value::unbound();
  Prim* p = prim_of(c);
  Value y = p->fn1(p, Value::real(x));
  unary_derivative(p->name, x, d);
  count(ids().mul);
  return make_bundle(y, Value::real(d * dx));
}

Value fwd_binary2(Closure* c, Value a, Value b) {
  double x1, dx1, x2, dx2;
  if (!plain_bundle(a, x1, dx1) || !plain_bundle(b, x2, dx2)) return Value::unbound();
  Prim* p = prim_of(c);
  const Ids& I = ids();
  Value y = p->fn2(p, Value::real(x1), Value::real(x2));
  double t;
  if (!strcmp(p->name, "+")) { t = dx1 + dx2; count(I.add); }
  else if (!strcmp(p->name, "-")) { t = dx1 - dx2; count(I.sub); }
  else if (!strcmp(p->name, "*")) { t = x2 * dx1 + x1 * dx2; count(I.mul, 2); count(I.add); }
  else {
    double d1, d2;
    binary_partials(p->name, x1, x2, d1, d2);
    t = d1 * dx1 + d2 * dx2;
    count(I.mul, 2);
    count(I.add);
  }
  return make_bundle(y, Value::real(t));
}

Value fwd_binary1(Closure* c, Value v) {
  if (is_lazy(v)) v = force(v);
  if (!is_pair(v)) return Value::unbound();
  return fwd_binary2(c, car(v), cdr(v));
}

// ---- reverse: the forward phase ----
// Each computes (value . backpropagator) into out[0], out[1]; the pair-returning forms a
// program sees wrap them.

bool rev_unary_s(Closure* c, Value v, Value* out) {
  double x;
  if (!plain_reverse(v, x)) return false;
  Prim* p = prim_of(c);
  Value y = p->fn1(p, Value::real(x));
  Lambda* bp = bp_of(c);
  out[0] = star_j(y);
  out[1] = make_bp(bp, x, 0, (int)bp->free.size());
  return true;
}

bool rev_binary_s2(Closure* c, Value a, Value b, Value* out) {
  double x1, x2;
  if (!plain_reverse(a, x1) || !plain_reverse(b, x2)) return false;
  Prim* p = prim_of(c);
  Value y = p->fn2(p, Value::real(x1), Value::real(x2));
  Lambda* bp = bp_of(c);
  out[0] = star_j(y);
  out[1] = make_bp(bp, x1, x2, (int)bp->free.size());
  return true;
}

bool rev_binary_s1(Closure* c, Value v, Value* out) {
  if (is_lazy(v)) v = force(v);
  return is_pair(v) && rev_binary_s2(c, car(v), cdr(v), out);
}

// Structural and constant-sensitivity rules: the backpropagator closes over xr.
bool rev_struct_s(Closure* c, Value xr, Value* out) {
  Prim* p = prim_of(c);
  out[0] = p->fn1(p, xr);
  out[1] = make_closure(bp_of(c), &xr, 1);
  return true;
}

bool rev_compare_s2(Closure* c, Value a, Value b, Value* out) {
  Prim* p = prim_of(c);
  out[0] = p->fn2(p, a, b);
  Value xr = cons(a, b);
  out[1] = make_closure(bp_of(c), &xr, 1);
  return true;
}

bool rev_compare_s1(Closure* c, Value v, Value* out) {
  if (is_lazy(v)) v = force(v);
  if (!is_pair(v)) return false;
  Prim* p = prim_of(c);
  out[0] = p->fn2(p, car(v), cdr(v));
  out[1] = make_closure(bp_of(c), &v, 1);
  return true;
}

template <bool (*S)(Closure*, Value, Value*)>
Value paired1(Closure* c, Value v) {
  Value out[2];
  return S(c, v, out) ? cons(out[0], out[1]) : Value::unbound();
}

template <bool (*S)(Closure*, Value, Value, Value*)>
Value paired2(Closure* c, Value a, Value b) {
  Value out[2];
  return S(c, a, b, out) ? cons(out[0], out[1]) : Value::unbound();
}

template <bool (*S1)(Closure*, Value, Value*)>
void set_rule1(Lambda* rule) {
  rule->native1 = paired1<S1>;
  rule->native_split1 = S1;
}

template <bool (*S1)(Closure*, Value, Value*), bool (*S2)(Closure*, Value, Value, Value*)>
void set_rule2(Lambda* rule) {
  set_rule1<S1>(rule);
  rule->native2 = paired2<S2>;
  rule->native_split2 = S2;
}

// ---- reverse: the backpropagators ----
// Each takes ȳ without its sensitivity tag and returns (f̄ . x̄) untagged (for BackCall); the
// tagged form a program sees is made by `tagged` below.

inline bool plain_real(Value v, double& y) {
  if (is_lazy(v)) v = force(v);
  if (!v.is_real()) return false;
  y = v.as_real();
  return true;
}

// The sensitivities a backpropagator returns: f̄ (a primitive's is ()) and x̄.
inline bool result(Value* out, Value x_bar) {
  out[0] = Value::nil();
  out[1] = x_bar;
  return true;
}

bool bp_unary(Closure* c, Value yv, Value* out) {
  double y, d;
  if (!plain_real(yv, y) || !c->env[0].is_real()) return false;
  Prim* p = c->lambda->native_prim;
  unary_derivative(p->name, c->env[0].as_real(), d);
  count(ids().mul);
  return result(out, Value::real(d * y));
}

bool bp_binary(Closure* c, Value yv, Value* out) {
  double y;
  if (!plain_real(yv, y)) return false;
  Prim* p = c->lambda->native_prim;
  const Ids& I = ids();
  if (!strcmp(p->name, "+")) return result(out, cons(Value::real(y), Value::real(y)));
  if (!strcmp(p->name, "-")) {
    count(I.sub);
    return result(out, cons(Value::real(y), Value::real(0 - y)));
  }
  if (!c->env[0].is_real() || !c->env[1].is_real()) return false;
  double x1 = c->env[0].as_real(), x2 = c->env[1].as_real();
  if (!strcmp(p->name, "*")) {
    count(I.mul, 2);
    return result(out, cons(Value::real(x2 * y), Value::real(x1 * y)));
  }
  double d1, d2;
  binary_partials(p->name, x1, x2, d1, d2);
  count(I.mul, 2);
  return result(out, cons(Value::real(d1 * y), Value::real(d2 * y)));
}

bool bp_zero_sens(Closure* c, Value, Value* out) { return result(out, rzero(c->env[0])); }

bool bp_car(Closure* c, Value y, Value* out) {
  Value xr = force(c->env[0]);
  return result(out, cons(y, rzero(cdr(xr))));
}

bool bp_cdr(Closure* c, Value y, Value* out) {
  Value xr = force(c->env[0]);
  return result(out, cons(rzero(car(xr)), y));
}

// The backpropagator as a program calls it: (sensitize ȳ) to (sensitize (cons f̄ x̄)).
template <bool (*RAW)(Closure*, Value, Value*)>
Value tagged(Closure* c, Value ys) {
  if (is_lazy(ys)) ys = force(ys);
  if (!is(ys, Kind::Sensitivity)) return Value::unbound();
  Value out[2];
  if (!RAW(c, static_cast<Tagged*>(ys.as_obj())->v, out)) return Value::unbound();
  return sensitize(cons(out[0], out[1]));
}

template <bool (*RAW)(Closure*, Value, Value*)>
void set_bp(Lambda* bp) {
  bp->native1 = tagged<RAW>;
  bp->native_back = RAW;
}

Lambda* find_bp(Body* b) {
  for (Binding& bd : b->binds) {
    if (bd.op == Op::Lambda) return bd.lam;
    if (bd.op == Op::If) {
      if (Lambda* l = find_bp(bd.then_)) return l;
      if (Lambda* l = find_bp(bd.else_)) return l;
    }
  }
  return nullptr;
}

}  // namespace

void install_native(Prim* p, Lambda* rule, char kind) {
  if (p->cls == PrimClass::Host || p->cls == PrimClass::AD) return;
  const char* n = p->name;
  rule->native_prim = p;
  if (kind == 'F') {
    if (p->cls != PrimClass::Arith) return;
    if (p->arity == 1) rule->native1 = fwd_unary;
    else {
      rule->native1 = fwd_binary1;
      rule->native2 = fwd_binary2;
    }
    return;
  }
  Lambda* bp = find_bp(rule->body);
  if (!bp) return;
  compute_free_variables(rule);
  bp->native_prim = p;
  rule->native_bp = bp;
  size_t nf = bp->free.size();
  if (p->cls == PrimClass::Arith) {
    if (p->arity == 1) {
      if (nf > 1) return;
      set_rule1<rev_unary_s>(rule);
      set_bp<bp_unary>(bp);
    } else {
      bool simple = !strcmp(n, "+") || !strcmp(n, "-");
      if (simple ? nf != 0 : nf != 2) return;
      set_rule2<rev_binary_s1, rev_binary_s2>(rule);
      set_bp<bp_binary>(bp);
    }
    return;
  }
  if (nf != 1) return;
  if (p->cls == PrimClass::Compare || p->cls == PrimClass::Predicate) {
    if (p->fwd_rule) {  // tag predicates look under the transform: keep the rule
      rule->native_prim = nullptr;
      return;
    }
    if (p->arity == 2) set_rule2<rev_compare_s1, rev_compare_s2>(rule);
    else set_rule1<rev_struct_s>(rule);
    set_bp<bp_zero_sens>(bp);
    return;
  }
  if (!strcmp(n, "car")) {
    set_rule1<rev_struct_s>(rule);
    set_bp<bp_car>(bp);
  } else if (!strcmp(n, "cdr")) {
    set_rule1<rev_struct_s>(rule);
    set_bp<bp_cdr>(bp);
  }
}

}  // namespace vlad
