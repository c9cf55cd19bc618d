// native.cpp — native fast paths for the rule lambdas of builtin primitives.
// A primitive's forward and reverse versions are VLAD closures (prims.cpp writes their rules), so
// that transforming them again works like any closure. At the first level of transformation —
// bundles of plain reals, reverse values of plain reals — running them through the interpreter
// costs several allocations per arithmetic operation; these functions compute the same values
// (and count the same primitive operations) directly. Anything else falls back to the rule body.
// A reverse primitive's backpropagator is not made here: its caller gets a view (ad.hpp) of the
// result's RevNode (or of the argument), and the view is the closure only when something other
// than a backpropagator call looks at it.
#include <atomic>
#include <mutex>
#include <cmath>
#include <cstring>

#include "../eval/interp.hpp"
#include "../prims/prims.hpp"
#include "ad.hpp"

namespace vlad {

namespace {

// What a primitive's native rules compute, decided once per primitive from its name.
enum NativeOp : uint8_t { N_NONE, N_ADD, N_SUB, N_MUL, N_DIV, N_ATAN, N_EXPT, N_MIN, N_MAX,
                          N_SQRT, N_EXP, N_LOG, N_SIN, N_COS, N_ABS, N_TAN, N_TANH };

NativeOp native_op_of(const char* n) {
  static const struct { const char* name; NativeOp op; } table[] = {
      {"+", N_ADD},   {"-", N_SUB},     {"*", N_MUL},   {"/", N_DIV},   {"atan", N_ATAN}, {"expt", N_EXPT},
      {"min", N_MIN}, {"max", N_MAX},   {"sqrt", N_SQRT}, {"exp", N_EXP}, {"log", N_LOG},   {"sin", N_SIN},
      {"cos", N_COS}, {"abs", N_ABS},   {"tan", N_TAN}, {"tanh", N_TANH}};
  for (const auto& e : table)
    if (!strcmp(n, e.name)) return e.op;
  return N_NONE;
}

struct Ids {
  int add, sub, mul, div, sqrt_, exp_, log_, sin_, cos_, tanh_, lt, gt, le, ge, expt_, eq;
};

// The builtins' ids are the same in every interpreter (made in one order, before any other
// primitive). Read on every native rule's path: set once, then a load and a test, inline (a
// function-local static cost a call and its guard each time: 10 instructions a sin's backward).
Ids ids_of_builtins;
std::atomic<bool> ids_ready{false};
__attribute__((noinline, cold)) void init_ids() {
  static std::once_flag once;
  std::call_once(once, [] {
    Interp& in = *current;
    Ids& r = ids_of_builtins;
    r.add = in.prim("+")->id; r.sub = in.prim("-")->id; r.mul = in.prim("*")->id; r.div = in.prim("/")->id;
    r.sqrt_ = in.prim("sqrt")->id; r.exp_ = in.prim("exp")->id; r.log_ = in.prim("log")->id;
    r.sin_ = in.prim("sin")->id; r.cos_ = in.prim("cos")->id; r.tanh_ = in.prim("tanh")->id;
    r.lt = in.prim("<")->id; r.gt = in.prim(">")->id; r.le = in.prim("<=")->id; r.ge = in.prim(">=")->id;
    r.expt_ = in.prim("expt")->id;
    r.eq = in.prim("=")->id;
    ids_ready.store(true, std::memory_order_release);
  });
}
inline const Ids& ids() {
  if (__builtin_expect(!ids_ready.load(std::memory_order_acquire), 0)) init_ids();
  return ids_of_builtins;
}

inline void count(int id, uint64_t n = 1) { current->meter[id] += n; }

// The derivative of a unary primitive at x, counting the operations its rule performs.
void unary_derivative(NativeOp op, double x, double& d) {
  const Ids& I = ids();
  switch (op) {
    case N_SQRT: d = 1 / (2 * std::sqrt(x)); count(I.div); count(I.mul); count(I.sqrt_); break;
    case N_EXP: d = std::exp(x); count(I.exp_); break;
    case N_LOG: d = 1 / x; count(I.div); break;
    case N_SIN: d = std::cos(x); count(I.cos_); break;
    case N_COS: d = -std::sin(x); count(I.sub); count(I.sin_); break;
    case N_ABS:
      count(I.lt);
      if (x < 0) d = -1;
      else { count(I.gt); d = x > 0 ? 1 : 0; }
      break;
    case N_TAN: { double c = std::cos(x); d = 1 / (c * c); count(I.cos_); count(I.mul); count(I.div); break; }
    case N_TANH: { double y = std::tanh(x); d = 1 - y * y; count(I.tanh_); count(I.mul); count(I.sub); break; }
    default: d = 0; break;
  }
}

// sin and cos with their derivatives, from one sincos call (its two results are the bits sin
// and cos give, checked on 12 M arguments and the special values): a reverse node of either keeps
// the derivative, so that its backward pass computes no second function; a forward rule gets both
// at once. counted_derivative counts what unary_derivative counts for them.
inline bool has_sincos(NativeOp op) { return op == N_SIN || op == N_COS; }
inline double sincos_parts(NativeOp op, double x, double& d) {
  double s, c;
  sincos(x, &s, &c);
  d = op == N_SIN ? c : -s;
  return op == N_SIN ? s : c;
}
inline void counted_derivative(NativeOp op) {
  const Ids& I = ids();
  if (op == N_SIN) count(I.cos_);
  else { count(I.sub); count(I.sin_); }
}
// The derivative a unary primitive's node made by rev_unary_s (or native code's copy of it) stands
// for, counted as unary_derivative counts it: kept in the node for sin and cos.
inline double node_derivative(NativeOp op, const RevNode* n) {
  double d;
  if (has_sincos(op)) {
    d = n->x2.as_real();
    counted_derivative(op);
  } else {
    unary_derivative(op, n->x1.as_real(), d);
  }
  return d;
}

// The partial derivatives of a binary primitive (general rules: prims.cpp `binary(...)`).
void binary_partials(NativeOp op, double x1, double x2, double& d1, double& d2) {
  const Ids& I = ids();
  switch (op) {
    case N_DIV: d1 = 1 / x2; d2 = -(x1 / (x2 * x2)); count(I.div, 2); count(I.mul); count(I.sub); break;
    case N_ATAN: {
      double r = x1 * x1 + x2 * x2;
      d1 = x2 / r; d2 = -(x1 / r);
      count(I.mul, 4); count(I.add, 2); count(I.div, 2); count(I.sub);
      break;
    }
    case N_EXPT:
      count(I.eq);
      if (x2 == 0) count(I.eq);  // (and (= x2 0) (= x1 0))
      if (x2 == 0 && x1 == 0) d1 = 0;
      else { d1 = x2 * std::pow(x1, x2 - 1); count(I.mul); count(I.expt_); count(I.sub); }
      count(I.gt);
      if (x1 > 0) { d2 = std::pow(x1, x2) * std::log(x1); count(I.mul); count(I.expt_); count(I.log_); }
      else d2 = 0;
      break;
    case N_MIN: { count(I.le, 2); bool a = x1 <= x2; d1 = a ? 1 : 0; d2 = a ? 0 : 1; break; }
    case N_MAX: { count(I.ge, 2); bool a = x1 >= x2; d1 = a ? 1 : 0; d2 = a ? 0 : 1; break; }
    default: d1 = d2 = 0; break;
  }
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

inline Prim* prim_of(Closure* c) { return c->lambda->native_prim; }
inline Lambda* bp_of(Closure* c) { return c->lambda->native_bp; }
inline NativeOp op_of(Prim* p) { return (NativeOp)p->native_op; }

// ---- forward ----

// The C library's function a unary arithmetic primitive's own function calls (prims.cpp), or
// null: computed directly by the forms here and by native code (jit.cpp), without the
// primitive's boxed call.
UnaryFn unary_fn_of(NativeOp op) {
  switch (op) {
    case N_SQRT: return static_cast<UnaryFn>(std::sqrt);
    case N_ABS: return static_cast<UnaryFn>(std::fabs);
    case N_EXP: return static_cast<UnaryFn>(std::exp);
    case N_LOG: return static_cast<UnaryFn>(std::log);
    case N_SIN: return static_cast<UnaryFn>(std::sin);
    case N_COS: return static_cast<UnaryFn>(std::cos);
    case N_TAN: return static_cast<UnaryFn>(std::tan);
    case N_TANH: return static_cast<UnaryFn>(std::tanh);
    default: return nullptr;
  }
}

// Primitive p (a builtin arithmetic one, whose native operation is op) applied to reals, counted
// as its own function counts it: the common operations computed here, without the call, the
// arguments' boxing and their checks (a forward rule's primal part; p_add and the others in
// prims.cpp compute the same doubles).
inline double arith1(Prim* p, NativeOp op, double x) {
  if (UnaryFn f = unary_fn_of(op)) {
    count(p->id);
    return f(x);
  }
  return p->fn1(p, Value::real(x)).as_real();
}
inline double arith2(Prim* p, NativeOp op, double x1, double x2) {
  switch (op) {
    case N_ADD: count(p->id); return x1 + x2;
    case N_SUB: count(p->id); return x1 - x2;
    case N_MUL: count(p->id); return x1 * x2;
    case N_DIV: count(p->id); return x1 / x2;
    default: return p->fn2(p, Value::real(x1), Value::real(x2)).as_real();
  }
}

// The value y and tangent t of unary primitive p (whose native operation is op) applied to the
// bundle (x dx), its operations counted.
void fwd_unary_parts(Prim* p, NativeOp op, double x, double dx, double& y, double& t) {
  double d;
  if (has_sincos(op)) {
    count(p->id);
    y = sincos_parts(op, x, d);
    counted_derivative(op);
  } else {
    y = arith1(p, op, x);
    unary_derivative(op, x, d);
  }
  count(ids().mul);
  t = d * dx;
}

Value fwd_unary(Closure* c, Value v) {
  double x, dx, y, t;
  if (!plain_bundle(v, x, dx)) return Value::unbound();
  Prim* p = prim_of(c);
  fwd_unary_parts(p, op_of(p), x, dx, y, t);
  return make_bundle(Value::real(y), Value::real(t));
}

// The value y and tangent t of binary primitive p (whose native operation is op) applied to the
// bundles (x1 dx1) and (x2 dx2), its operations counted (the primitive's own by fn2).
void fwd_binary_parts(Prim* p, NativeOp op, double x1, double dx1, double x2, double dx2, double& y, double& t) {
  const Ids& I = ids();
  y = arith2(p, op, x1, x2);
  switch (op) {
    case N_ADD: t = dx1 + dx2; count(I.add); break;
    case N_SUB: t = dx1 - dx2; count(I.sub); break;
    case N_MUL: t = x2 * dx1 + x1 * dx2; count(I.mul, 2); count(I.add); break;
    default: {
      double d1, d2;
      binary_partials(op, x1, x2, d1, d2);
      t = d1 * dx1 + d2 * dx2;
      count(I.mul, 2);
      count(I.add);
    }
  }
}

Value fwd_binary2(Closure* c, Value a, Value b) {
  double x1, dx1, x2, dx2, y, t;
  if (!plain_bundle(a, x1, dx1) || !plain_bundle(b, x2, dx2)) return Value::unbound();
  Prim* p = prim_of(c);
  fwd_binary_parts(p, op_of(p), x1, dx1, x2, dx2, y, t);
  return make_bundle(Value::real(y), Value::real(t));
}

Value fwd_binary1(Closure* c, Value v) {
  if (is_lazy(v)) v = force(v);
  if (!is_pair(v)) return Value::unbound();
  return fwd_binary2(c, car(v), cdr(v));
}

// ---- forward over forward ----
// F:forward-op, the forward transform of the forward rule of +, -, * or / (or sqrt, exp, log, sin,
// cos), applied to outer bundles whose primal and tangent are bundles of reals (the values of a
// forward derivative taken inside another): the outer bundle of (bundle y t) and its tangent, as
// the transformed rule computes them — each arithmetic operation of the rule (prims.cpp
// fwd_binary, partial_rules, fwd_unary and the derivatives in make_builtin_prims) is fwd_binary2
// or fwd_unary on outer bundles, a rule's constant the bundle of it and 0 — with the same
// operations counted. The rule's primal, tangent, bundle and perturb count nothing. Anything else:
// the transformed rule's body. (It made 23-25 objects a call; this makes three.)
struct Dual {
  double p, t;  // an outer bundle of reals
};

// (op given: a primitive's native operation is set when its rules are first made)
Dual dual(int id, NativeOp op, Dual a, Dual b) {
  Dual r;
  fwd_binary_parts(current->prims[id], op, a.p, a.t, b.p, b.t, r.p, r.t);
  return r;
}

inline bool bundle_of_bundles(Value v, Dual& x, Dual& dx) {
  if (!is(v, Kind::Bundle)) return false;
  Bundle* b = static_cast<Bundle*>(v.as_obj());
  return plain_bundle(b->primal, x.p, dx.p) && plain_bundle(b->tangent, x.t, dx.t);
}

Dual dual1(int id, NativeOp op, Dual a) {
  Dual r;
  fwd_unary_parts(current->prims[id], op, a.p, a.t, r.p, r.t);
  return r;
}

// The forms of the arithmetic primitives' forward rules (prims.cpp: fwd_binary's tangents from
// partial_rules, fwd_unary's derivatives), written once and evaluated by E on its numbers N:
// E::one and E::two apply the primitive with the given id and operation, E::k makes a constant.
// (Forward over forward evaluates them on duals; reverse over forward on reals, its forward phase
// counting each operation, its backward phase recomputing a derivative uncounted.)
template <class E, class N>
N rule_tangent(E& e, NativeOp op, N x1, N dx1, N x2, N dx2) {
  const Ids& I = ids();
  auto mul = [&](N a, N b) { return e.two(I.mul, N_MUL, a, b); };
  switch (op) {
    case N_ADD: return e.two(I.add, N_ADD, dx1, dx2);  // (+ dx1 dx2)
    case N_SUB: return e.two(I.sub, N_SUB, dx1, dx2);  // (- dx1 dx2)
    case N_MUL: return e.two(I.add, N_ADD, mul(x2, dx1), mul(x1, dx2));  // (+ (* x2 dx1) (* x1 dx2))
    default: {  // N_DIV: (+ (* (/ 1 x2) dx1) (* (- 0 (/ x1 (* x2 x2))) dx2))
      N d1 = e.two(I.div, N_DIV, e.k(1), x2);
      N d2 = e.two(I.sub, N_SUB, e.k(0), e.two(I.div, N_DIV, x1, mul(x2, x2)));
      return e.two(I.add, N_ADD, mul(d1, dx1), mul(d2, dx2));
    }
  }
}

template <class E, class N>
N rule_derivative(E& e, NativeOp op, N x) {
  const Ids& I = ids();
  switch (op) {
    case N_SQRT:  // (/ 1 (* 2 (sqrt x)))
      return e.two(I.div, N_DIV, e.k(1), e.two(I.mul, N_MUL, e.k(2), e.one(I.sqrt_, N_SQRT, x)));
    case N_EXP: return e.one(I.exp_, N_EXP, x);                           // (exp x)
    case N_LOG: return e.two(I.div, N_DIV, e.k(1), x);                     // (/ 1 x)
    case N_SIN: return e.one(I.cos_, N_COS, x);                           // (cos x)
    default: return e.two(I.sub, N_SUB, e.k(0), e.one(I.sin_, N_SIN, x));  // N_COS: (- 0 (sin x))
  }
}

struct DualForms {
  Dual one(int id, NativeOp op, Dual a) { return dual1(id, op, a); }
  Dual two(int id, NativeOp op, Dual a, Dual b) { return dual(id, op, a, b); }
  Dual k(double c) { return Dual{c, 0}; }
};

Value fwd2_binary2(Closure* c, Value a, Value b) {
  Dual x1, dx1, x2, dx2;
  if (!bundle_of_bundles(a, x1, dx1) || !bundle_of_bundles(b, x2, dx2)) return Value::unbound();
  Prim* p = prim_of(c);
  DualForms e;
  Dual y = dual(p->id, op_of(p), x1, x2), t = rule_tangent(e, op_of(p), x1, dx1, x2, dx2);
  return make_bundle(make_bundle(Value::real(y.p), Value::real(t.p)), make_bundle(Value::real(y.t), Value::real(t.t)));
}

// The unary primitives whose forward-over-forward rule is made here, and their derivatives' forms.
bool fwd2_unary_op(NativeOp op) { return op == N_SQRT || op == N_EXP || op == N_LOG || op == N_SIN || op == N_COS; }

Value fwd2_unary(Closure* c, Value b) {
  Dual x, dx;
  if (!bundle_of_bundles(b, x, dx)) return Value::unbound();
  Prim* p = prim_of(c);
  const Ids& I = ids();
  NativeOp op = op_of(p);
  DualForms e;
  Dual y = dual1(p->id, op, x), d = rule_derivative(e, op, x);
  Dual t = dual(I.mul, N_MUL, d, dx);  // (* d dx)
  return make_bundle(make_bundle(Value::real(y.p), Value::real(t.p)), make_bundle(Value::real(y.t), Value::real(t.t)));
}

Value fwd2_binary1(Closure* c, Value v) {
  if (is_lazy(v)) v = force(v);
  if (!is_pair(v)) return Value::unbound();
  return fwd2_binary2(c, car(v), cdr(v));
}

// ---- reverse over forward ----
// R:forward-op, the reverse transform of the forward rule of +, - or *, applied to two reverse
// values of bundles of reals (a forward derivative taken inside a reverse one): the value
// (*j (bundle y t)) and, as its backpropagator, a view of a record of the two arguments
// (kViewBpFwd), as the transformed rule computes them — the rule's arithmetic counted once each
// in this phase. The view called on ȳ = (bundle ȳp ȳt) of reals (back_view) gives what the rule's
// transformed backpropagator gives: f̄ the rule itself and x̄ the pair of (bundle x̄i d̄xi), each
// primitive's transpose applied (and counted) as at the first level, and each part summed with
// the zero the other path gives it (+ 0.0: a -0 comes back +0, as there). Each variable of
// these three rules has at most two uses, so the order of its sums does not matter (for / it
// would). Any other ȳ, and anything else that looks at the view, gets the transformed rule's own
// backpropagator, made by running its body again (materialize_view), the operations it counts
// not counted twice. Any other argument: the body. (The body made 20-30 objects a call.)
thread_local bool rf_body_only = false;  // while that body runs again

inline bool reverse_bundle(Value v, double& x, double& dx) {
  if (!is(v, Kind::Reverse) || v.as_obj()->aux != 0) return false;
  return plain_bundle(static_cast<Tagged*>(v.as_obj())->v, x, dx);
}

inline double count2(int id, double a, double b) {
  Prim* p = current->prims[id];
  return arith2(p, op_of(p), a, b);
}

// (*j (bundle y t)) into out[0], and into out[1] the view of the record of p's arguments a and b
// (b () for a unary p).
bool rf_result(Prim* p, double y, double t, Value a, Value b, Value* out) {
  out[0] = make_tagged(Kind::Reverse, make_bundle(Value::real(y), Value::real(t)));
  RevNode* n = static_cast<RevNode*>(gc_alloc(sizeof(RevNode)));
  n->kind = Kind::Reverse;
  n->aux = p->id + 1;
  n->v = Value::nil();
  n->x1 = a;
  n->x2 = b;
  out[1] = view_of(Value::obj(n), kViewBpFwd);
  return true;
}

inline double count1(int id, double a) {
  Prim* p = current->prims[id];
  return arith1(p, op_of(p), a);
}

// The forms on reals: each operation counted (a forward phase), or not (recomputed later).
struct RealForms {
  bool counted;
  double one(int id, NativeOp op, double a) {
    if (counted) return count1(id, a);
    return op == N_SQRT ? std::sqrt(a) : op == N_EXP ? std::exp(a) : op == N_SIN ? std::sin(a) : std::cos(a);
  }
  double two(int id, NativeOp op, double a, double b) {
    if (counted) return count2(id, a, b);
    return op == N_ADD ? a + b : op == N_SUB ? a - b : op == N_MUL ? a * b : a / b;
  }
  double k(double c) { return c; }
};

bool rf_split2(Closure* c, Value a, Value b, Value* out) {
  double x1, dx1, x2, dx2, y, t;
  if (rf_body_only || !reverse_bundle(a, x1, dx1) || !reverse_bundle(b, x2, dx2)) return false;
  Prim* p = prim_of(c);
  RealForms e{true};
  y = e.two(p->id, op_of(p), x1, x2);
  t = rule_tangent(e, op_of(p), x1, dx1, x2, dx2);
  return rf_result(p, y, t, a, b, out);
}

bool rf_split1(Closure* c, Value v, Value* out) {
  if (is_lazy(v)) v = force(v);
  return is_pair(v) && rf_split2(c, car(v), cdr(v), out);
}

bool rf_split1u(Closure* c, Value v, Value* out) {
  double x, dx;
  if (rf_body_only || !reverse_bundle(v, x, dx)) return false;
  Prim* p = prim_of(c);
  NativeOp op = op_of(p);
  RealForms e{true};
  double y = count1(p->id, x);
  double t = count2(ids().mul, rule_derivative(e, op, x), dx);  // (* d dx)
  return rf_result(p, y, t, v, Value::nil(), out);
}

bool back_node_op(NativeOp op, const RevNode* n, double y, Value* out, bool three = false);

// x̄ of the unary rule's derivative expression d at x, for d̄: each node's transpose as
// back_node applies and counts it, the constants' sensitivities computed and dropped as there.
double rule_derivative_bar(NativeOp op, double x, double d_bar) {
  RevNode n;
  Value o[3];
  auto node_bar = [&](NativeOp nop, double a, double b, double y, int part) {  // part 1 or 2 of x̄
    n.x1 = Value::real(a);
    n.x2 = Value::real(b);
    back_node_op(nop, &n, y, o, true);  // (a unary node gives x̄ whole)
    return o[part].as_real();
  };
  switch (op) {
    case N_SQRT: {  // (/ 1 m), m = (* 2 s), s = (sqrt x)
      double s = std::sqrt(x), m = 2 * s;
      double m_bar = node_bar(N_DIV, 1, m, d_bar, 2), s_bar = node_bar(N_MUL, 2, s, m_bar, 2);
      return node_bar(N_SQRT, x, 0, s_bar, 1);
    }
    case N_EXP: return node_bar(N_EXP, x, 0, d_bar, 1);
    case N_LOG: return node_bar(N_DIV, 1, x, d_bar, 2);
    case N_SIN: return node_bar(N_COS, x, 0, d_bar, 1);
    default: return node_bar(N_SIN, x, 0, node_bar(N_SUB, 0, 0, d_bar, 2), 1);  // N_COS: (- 0 s), s = (sin x)
  }
}

// The view's backpropagator on ȳ = (bundle yp yt) of reals (false for any other ȳ).
bool rf_back(const RevNode* n, Value ys, Value* out, bool three) {
  double yp, yt, x1, dx1, x2, dx2;
  Prim* p = current->prims[n->aux - 1];
  const Ids& I = ids();
  if (p->arity == 1) {  // (bundle (op x) (perturb (* d dx))), d the derivative's expression
    if (!plain_bundle(ys, yp, yt) || !reverse_bundle(n->x1, x1, dx1)) return false;
    NativeOp op = op_of(p);
    RealForms e{false};
    double d = rule_derivative(e, op, x1);
    count(I.mul, 2);  // (* d dx) on ȳt
    double d_bar = dx1 * yt, dx_bar = d * yt;
    double x_bar_d = rule_derivative_bar(op, x1, d_bar);
    RevNode node;
    node.x1 = Value::real(x1);
    Value o[2];
    back_node_op(op, &node, yp, o);  // (op x) on ȳp
    out[0] = prim_forward(p);
    out[1] = make_bundle(Value::real(o[1].as_real() + x_bar_d + 0.0), Value::real(0.0 + dx_bar));
    return true;
  }
  if (!plain_bundle(ys, yp, yt) || !reverse_bundle(n->x1, x1, dx1) || !reverse_bundle(n->x2, x2, dx2)) return false;
  double b1, db1, b2, db2;  // x̄1, d̄x1, x̄2, d̄x2
  switch (op_of(p)) {
    case N_ADD: b1 = b2 = yp; db1 = db2 = yt; break;
    case N_SUB:
      count(I.sub, 2);
      b1 = yp, db1 = yt, b2 = 0 - yp, db2 = 0 - yt;
      break;
    case N_MUL:  // the transposes of (* x1 x2), (* x2 dx1) and (* x1 dx2)
      count(I.mul, 6);
      b1 = x2 * yp + dx2 * yt;
      b2 = x1 * yp + dx1 * yt;
      db1 = x2 * yt;
      db2 = x1 * yt;
      break;
    default: {  // N_DIV: the transposes, last node first, each as back_node_op gives it
      RevNode node;
      Value o[3];
      auto bar = [&](NativeOp op, double a, double b, double y) {
        node.x1 = Value::real(a);
        node.x2 = Value::real(b);
        back_node_op(op, &node, y, o, true);
      };
      double d1 = 1 / x2, s = x2 * x2, q = x1 / s, d2 = 0 - q;
      bar(N_MUL, d2, dx2, yt);  // (* d2 dx2), its ȳ that of the tangent's sum
      double d2_bar = o[1].as_real();
      db2 = o[2].as_real();
      bar(N_SUB, 0, q, d2_bar);  // (- 0 q)
      double q_bar = o[2].as_real();
      bar(N_DIV, x1, s, q_bar);  // (/ x1 s)
      double b1_q = o[1].as_real(), s_bar = o[2].as_real();
      bar(N_MUL, x2, x2, s_bar);  // (* x2 x2)
      double b2_s1 = o[1].as_real(), b2_s2 = o[2].as_real();
      bar(N_MUL, d1, dx1, yt);  // (* d1 dx1)
      double d1_bar = o[1].as_real();
      db1 = o[2].as_real();
      bar(N_DIV, 1, x2, d1_bar);  // (/ 1 x2)
      double b2_d1 = o[2].as_real();
      bar(N_DIV, x1, x2, yp);  // (/ x1 x2)
      double b1_y = o[1].as_real(), b2_y = o[2].as_real();
      b1 = b1_y + b1_q;
      b2 = ((b2_s1 + b2_s2) + b2_d1) + b2_y;
    }
  }
  out[0] = prim_forward(p);
  Value s1 = make_bundle(Value::real(b1 + 0.0), Value::real(0.0 + db1));
  Value s2 = make_bundle(Value::real(b2 + 0.0), Value::real(0.0 + db2));
  if (three) {
    out[1] = s1;
    out[2] = s2;
  } else {
    out[1] = cons(s1, s2);
  }
  return true;
}

// The transformed rule's own backpropagator for the record n: its body run again on the same
// arguments, the primitive operations it counts taken back.
Value rf_materialize(const RevNode* n) {
  Interp& in = *current;
  Prim* p = in.prims[n->aux - 1];
  Lambda* rl = reverse_transform(static_cast<Closure*>(prim_forward(p).as_obj())->lambda);
  std::vector<uint64_t> meter = in.meter;
  bool was = rf_body_only;
  rf_body_only = true;
  Value r;
  try {
    r = apply(closure_of(rl, nullptr), p->arity == 1 ? n->x1 : cons(n->x1, n->x2));
  } catch (...) {
    rf_body_only = was;
    in.meter = meter;
    throw;
  }
  rf_body_only = was;
  in.meter = meter;
  return unview(cdr(force(r)));
}

// ---- reverse: the forward phase ----
// Each computes (value . backpropagator) into out[0], out[1]; the pair-returning forms a
// program sees wrap them.

// The view of a comparison of two plain reverse reals: its argument's shape is known.
const Value kConstPairView = Value((1ull << 48) | kViewBpConst, 0);
// The zero backpropagator of a unary primitive applied to a constant (its argument a real).
const Value kConstRealView = Value((1ull << 48) | 16 | kViewBpConst, 0);
// The zero backpropagator of the prelude's equal? (reverse, first level) applied to two plain
// reverse reals: what zero_backpropagator(its closure, (a . b)) makes, without making it.
const Value kEqualRealsView = Value((1ull << 48) | 32 | kViewBpConst, 0);
// The zero backpropagator of a predicate applied to () (a list walk's end: null? of it): what
// zero_bp_lambda's closure over () gives, (() . ()), without making it.
const Value kConstNilView = Value((1ull << 48) | 64 | kViewBpConst, 0);

// (The small ones, in memory the collector scans and never frees.)
std::atomic<uint64_t> small_leaf_table[kSmallLeafMax - kSmallLeafMin];
static_assert(sizeof(std::atomic<uint64_t>) == sizeof(uint64_t), "native code reads the table as words");

Value const_leaf_impl(double r) {
  if (r >= kSmallLeafMin && r < kSmallLeafMax) {
    int i = (int)r;
    if ((double)i == r && !(r == 0 && std::signbit(r))) return small_leaf(i);
  }
  Tagged* t = static_cast<Tagged*>(gc_alloc_atomic(sizeof(Tagged)));
  t->kind = Kind::Reverse;
  t->aux = kConstLeafAux;
  t->v = Value::real(r);
  return Value::obj(t);
}

// (reverse y) holding the primitive and its arguments.
Value make_node(Prim* p, double y, int nargs, double x1, double x2) {
  size_t bytes = nargs == 0 ? sizeof(Tagged) : nargs == 1 ? sizeof(Tagged) + sizeof(Value) : sizeof(RevNode);
  RevNode* n = static_cast<RevNode*>(gc_alloc_atomic(bytes));
  n->kind = Kind::Reverse;
  n->aux = p->id + 1;
  n->v = Value::real(y);
  if (nargs >= 1) n->x1 = Value::real(x1);
  if (nargs >= 2) n->x2 = Value::real(x2);
  return Value::obj(n);
}

inline int node_args(NativeOp op) { return op == N_ADD || op == N_SUB ? 0 : op >= N_SQRT ? 1 : 2; }

}  // namespace

int rev_node_args(Prim* p) { return node_args(op_of(p)); }

namespace {

bool rev_unary_s(Closure* c, Value v, Value* out) {
  double x;
  if (!plain_reverse(v, x)) return false;
  Prim* p = prim_of(c);
  NativeOp op = op_of(p);
  if (is_const_leaf(v)) {  // nothing to record
    out[0] = const_leaf(arith1(p, op, x));
    out[1] = kConstRealView;
    return true;
  }
  if (has_sincos(op)) {  // the node of sin or cos holds its derivative too (has_sincos)
    count(p->id);
    double d, y = sincos_parts(op, x, d);
    out[0] = make_node(p, y, 2, x, d);
  } else {
    out[0] = make_node(p, arith1(p, op, x), 1, x, 0);
  }
  out[1] = view_of(out[0], kViewBpNode);
  return true;
}

// The backpropagator of a node of + or - (whose derivatives are constant): the view of one node
// for the primitive, made once for the process (never collected), not of the result's own node,
// which the backpropagator would otherwise keep alive (W3's inner sum: 16 bytes a loop step).
// Unbound for a primitive id past the table (a host's primitive never is + or -).
}  // namespace
// (made once a process, under a lock, for every interpreter's primitive of that id; then cached
// on the Prim, which shared_bp_view reads)
__attribute__((noinline)) Value make_shared_bp_view(Prim* p) {
  static std::atomic<uint64_t> table[1024];
  static std::mutex made;
  if (p->id < 0 || p->id >= 1024) return Value::unbound();
  uint64_t bits = table[p->id].load(std::memory_order_acquire);
  if (!bits) {
    std::lock_guard<std::mutex> lock(made);
    bits = table[p->id].load(std::memory_order_relaxed);
    if (!bits) {
      RevNode* n = static_cast<RevNode*>(gc_alloc_uncollectable(sizeof(RevNode)));
      n->kind = Kind::Reverse;
      n->aux = p->id + 1;
      n->v = n->x1 = n->x2 = Value::real(0);
      bits = view_of(Value::obj(n), kViewBpNode).bits;
      table[p->id].store(bits, std::memory_order_release);
    }
  }
  p->shared_bp_bits = bits;
  return Value(bits, 0);
}
Value shared_bp_view(Prim* p) { return p->shared_bp_bits ? Value(p->shared_bp_bits, 0) : make_shared_bp_view(p); }
namespace {

bool rev_binary_prim(Prim* p, Value a, Value b, Value* out) {
  double x1, x2;
  if (!plain_reverse(a, x1) || !plain_reverse(b, x2)) return false;
  Value y = Value::real(arith2(p, op_of(p), x1, x2));
  if (is_const_leaf(a) && is_const_leaf(b)) {  // nothing to record
    out[0] = const_leaf(y.as_real());
    out[1] = kConstPairView;
    return true;
  }
  int nargs = node_args(op_of(p));
  out[0] = make_node(p, y.as_real(), nargs, x1, x2);
  out[1] = nargs == 0 ? shared_bp_view(p) : Value::unbound();
  if (out[1].is_unbound()) out[1] = view_of(out[0], kViewBpNode);
  return true;
}

bool rev_binary_s2(Closure* c, Value a, Value b, Value* out) { return rev_binary_prim(prim_of(c), a, b, out); }

bool rev_binary_s1(Closure* c, Value v, Value* out) {
  if (is_lazy(v)) v = force(v);
  return is_pair(v) && rev_binary_s2(c, car(v), cdr(v), out);
}

}  // namespace

bool is_rev_binary_rule(Lambda* rule) { return rule->native_split2 == rev_binary_s2; }

namespace {

// The backpropagator of a projection or of a constant-sensitivity primitive, which closes over
// its argument xr: a view of xr when xr is an object, else the closure.
Value arg_view(Closure* c, Value xr, ViewTag tag) {
  if (xr.is_obj()) return view_of(xr, tag);
  if (xr.is_nil() && tag == kViewBpConst) return kConstNilView;  // (its bp: zero_bp_lambda())
  if (is_j_view(xr)) {  // the argument is itself a view of *j of a pair P: a view of P
    Value p = Value::obj(view_obj(xr));
    uint64_t t = view_tag(xr);
    if (t == kViewJ) return view_of(p, tag == kViewBpCar ? kViewBpCarJ : tag == kViewBpCdr ? kViewBpCdrJ : kViewBpConstJ);
    if (tag == kViewBpConst) return view_of(p, t == kViewJCar ? kViewBpConstJCar : kViewBpConstJCdr);
  }
  return make_closure(bp_of(c), &xr, 1);
}

// The argument a backpropagator view of a data view closes over.
Value arg_of_view(Value v) {
  Value p = Value::obj(view_obj(v));
  switch (view_tag(v)) {
    case kViewBpCarJ:
    case kViewBpCdrJ:
    case kViewBpConstJ: return view_of(p, kViewJ);
    case kViewBpConstJCar: return view_of(p, kViewJCar);
    case kViewBpConstJCdr: return view_of(p, kViewJCdr);
    default: return p;
  }
}

// (An argument that is no pair: declined, so that the rule's body raises the error where its
// call is, in a frame of its own: raised here, it had no position, and the error showed the
// caller's call site instead.)
bool projectable(Value xr) { return is_j_pair_view(xr) || is_pair(is_lazy(xr) ? force(xr) : xr); }

bool rev_car_s(Closure* c, Value xr, Value* out) {
  if (!projectable(xr)) return false;
  Prim* p = prim_of(c);
  out[0] = p->fn1(p, xr);
  out[1] = arg_view(c, xr, kViewBpCar);
  return true;
}

bool rev_cdr_s(Closure* c, Value xr, Value* out) {
  if (!projectable(xr)) return false;
  Prim* p = prim_of(c);
  out[0] = p->fn1(p, xr);
  out[1] = arg_view(c, xr, kViewBpCdr);
  return true;
}

}  // namespace

Split1 rev_car_split() { return rev_car_s; }
Split1 rev_cdr_split() { return rev_cdr_s; }

namespace {

bool rev_const_s(Closure* c, Value xr, Value* out) {
  Prim* p = prim_of(c);
  out[0] = p->fn1(p, xr);
  out[1] = arg_view(c, xr, kViewBpConst);
  return true;
}

bool rev_compare_s2(Closure* c, Value a, Value b, Value* out) {
  Prim* p = prim_of(c);
  // (what is no real: declined, so that the rule's call, in its record, raises the error where
  // the comparison is written)
  if (!strip_tags(a).is_real() || !strip_tags(b).is_real()) return false;
  out[0] = p->fn2(p, a, b);
  double x;
  if (plain_reverse(a, x) && plain_reverse(b, x)) {
    out[1] = kConstPairView;
  } else {
    Value xr = cons(a, b);
    out[1] = make_closure(bp_of(c), &xr, 1);
  }
  return true;
}

bool rev_compare_s1(Closure* c, Value v, Value* out) {
  if (is_lazy(v)) v = force(v);
  if (!is_pair(v)) return false;
  Prim* p = prim_of(c);
  out[0] = p->fn2(p, car(v), cdr(v));
  out[1] = arg_view(c, v, kViewBpConst);
  return true;
}

template <bool (*S)(Closure*, Value, Value*)>
Value paired1(Closure* c, Value v) {
  Value out[2];
  return S(c, v, out) ? cons(out[0], unview(out[1])) : Value::unbound();
}

template <bool (*S)(Closure*, Value, Value, Value*)>
Value paired2(Closure* c, Value a, Value b) {
  Value out[2];
  return S(c, a, b, out) ? cons(out[0], unview(out[1])) : Value::unbound();
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

// (f̄ . (a . b)): as three values when `three` (the caller takes the argument pair apart).
inline bool result2(Value* out, double a, double b, bool three) {
  out[0] = Value::nil();
  if (three) {
    out[1] = Value::real(a);
    out[2] = Value::real(b);
  } else {
    out[1] = cons(Value::real(a), Value::real(b));
  }
  return true;
}

// x̄ of an arithmetic primitive's node for ȳ = y.
bool back_node_op(NativeOp op, const RevNode* n, double y, Value* out, bool three) {
  const Ids& I = ids();
  switch (node_args(op)) {
    case 1: {
      double d;
      unary_derivative(op, n->x1.as_real(), d);
      count(I.mul);
      return result(out, Value::real(d * y));
    }
    case 0:
      if (op == N_ADD) return result2(out, y, y, three);
      count(I.sub);
      return result2(out, y, 0 - y, three);
    default: {
      double x1 = n->x1.as_real(), x2 = n->x2.as_real(), d1, d2;
      if (op == N_MUL) {
        count(I.mul, 2);
        return result2(out, x2 * y, x1 * y, three);
      }
      binary_partials(op, x1, x2, d1, d2);
      count(I.mul, 2);
      return result2(out, d1 * y, d2 * y, three);
    }
  }
}

bool back_node(Prim* p, const RevNode* n, double y, Value* out, bool three = false) {
  return back_node_op(op_of(p), n, y, out, three);
}

bool bp_unary(Closure* c, Value yv, Value* out) {
  double y;
  if (!plain_real(yv, y) || !c->env[0].is_real()) return false;
  RevNode n;
  n.x1 = c->env[0];
  return back_node(c->lambda->native_prim, &n, y, out);
}

bool bp_binary(Closure* c, Value yv, Value* out) {
  double y;
  if (!plain_real(yv, y)) return false;
  Prim* p = c->lambda->native_prim;
  RevNode n;
  if (node_args(op_of(p)) == 2) {
    if (!c->env[0].is_real() || !c->env[1].is_real()) return false;
    n.x1 = c->env[0];
    n.x2 = c->env[1];
  }
  return back_node(p, &n, y, out);
}

bool bp_zero_sens(Closure* c, Value, Value* out) { return result(out, rzero(c->env[0])); }

Value car_bar(Value xr, Value y) { return cons(y, rzero(cdr(force(xr)))); }
Value cdr_bar(Value xr, Value y) { return cons(rzero(car(force(xr))), y); }

bool bp_car(Closure* c, Value y, Value* out) { return result(out, car_bar(c->env[0], y)); }
bool bp_cdr(Closure* c, Value y, Value* out) { return result(out, cdr_bar(c->env[0], y)); }

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

// ---- forward over reverse ----
// F:reverse-op, the forward transform of an arithmetic primitive's reverse rule, applied to outer
// bundles of reverse reals (a reverse derivative taken inside a forward one): the rule's value
// (*j (op x1 x2)) — an outer bundle of two reverse reals, its reals computed by fwd_binary2 /
// fwd_unary on the bundles x_i of the arguments' reals, counted as there — and its
// backpropagator, the closure of the transformed rule's own lambda over the x_i it captures
// (none for + and -), as the transformed body makes them; nothing is walked or tagged on the way.
// Anything else: the transformed rule's body. (It made 12-14 objects a call; this makes 3-6.)

// The bundle (x x') of the reals of an outer bundle of reverse reals v.
inline bool bundle_of_reverse(Value v, double& x, double& xt) {
  if (!is(v, Kind::Bundle)) return false;
  Bundle* b = static_cast<Bundle*>(v.as_obj());
  return plain_reverse(b->primal, x) && plain_reverse(b->tangent, xt);
}

// The transformed rule's backpropagator lambda, found in its body once (Lambda::native_bp), or
// null when its free variables are not the n arguments' bundles the rule's own captures.
Lambda* fr_bp(Lambda* f, size_t n) {
  if (!f->native_bp) {
    ensure_body(f);
    Lambda* bp = find_bp(f->body);
    if (!bp) return nullptr;
    compute_free_variables(bp);
    f->native_bp = bp;
  }
  return f->native_bp->free.size() == n ? f->native_bp : nullptr;
}

inline Value reverse_bundle_of(double y, double t) {
  return make_bundle(make_tagged(Kind::Reverse, Value::real(y)), make_tagged(Kind::Reverse, Value::real(t)));
}

bool fr_split2(Closure* c, Value a, Value b, Value* out) {
  double x1, x1t, x2, x2t, y, t;
  if (!bundle_of_reverse(a, x1, x1t) || !bundle_of_reverse(b, x2, x2t)) return false;
  Prim* p = prim_of(c);
  int n = node_args(op_of(p));
  Lambda* bp = fr_bp(c->lambda, n);
  if (!bp) return false;
  fwd_binary_parts(p, op_of(p), x1, x1t, x2, x2t, y, t);
  out[0] = reverse_bundle_of(y, t);
  if (n == 0) {
    out[1] = closure_of(bp, nullptr);
  } else {
    Value env[2] = {make_bundle(Value::real(x1), Value::real(x1t)), make_bundle(Value::real(x2), Value::real(x2t))};
    out[1] = make_closure(bp, env, 2);
  }
  return true;
}

bool fr_split1(Closure* c, Value v, Value* out) {
  if (is_lazy(v)) v = force(v);
  return is_pair(v) && fr_split2(c, car(v), cdr(v), out);
}

bool fr_split1u(Closure* c, Value v, Value* out) {
  double x, xt, y, t;
  if (!bundle_of_reverse(v, x, xt)) return false;
  Prim* p = prim_of(c);
  Lambda* bp = fr_bp(c->lambda, 1);
  if (!bp) return false;
  fwd_unary_parts(p, op_of(p), x, xt, y, t);
  out[0] = reverse_bundle_of(y, t);
  Value env = make_bundle(Value::real(x), Value::real(xt));
  out[1] = make_closure(bp, &env, 1);
  return true;
}

template <bool (*S)(Closure*, Value, Value*)>
Value fr_paired1(Closure* c, Value v) {
  Value out[2];
  return S(c, v, out) ? cons(out[0], out[1]) : Value::unbound();
}

Value fr_paired2(Closure* c, Value a, Value b) {
  Value out[2];
  return fr_split2(c, a, b, out) ? cons(out[0], out[1]) : Value::unbound();
}

// ---- reverse over reverse ----
// R:reverse-op, the reverse transform of +, - or *'s reverse rule, applied to inner reverse values
// of outer reverse reals (a reverse derivative taken inside a reverse one: W5's saddle), and
// R:backpropagator of *, the transform of the raw body of that rule's backpropagator, which the
// inner backward pass calls inside the outer forward one. Their bodies run 8-9 steps a call, and
// the backpropagators they return 12-16 more: with + and -, a third of W5's steps. These forms
// make what the bodies make — the same values, and the same backpropagator closures (the same
// lambdas over the same environments) — at once, each primitive operation computed and counted
// by the first-level forms the bodies call (rev_binary_s2, back_view); those backpropagators'
// native_back computes their bodies' values from reals the same way. Anything else (another
// level of nesting, a zero sensitivity, a shape not met here): the bodies, as they are.

// What a free variable of such a backpropagator holds (Lambda::rr_slots).
enum RrSlot : int8_t { kRrNone = 0, kRrBp, kRrX1, kRrX2, kRrY, kRrBp1, kRrBp2, kRrKinds };
constexpr int8_t kRrUnusable = -1, kRrReady = 1;

// An inner reverse value of an outer reverse real x: (reverse x), holding x as it is, 
// or a view of *j of the part x of a data pair.
inline bool inner_reverse(Value v, Value& x) {
  if (is_j_view(v) && view_tag(v) != kViewJ) x = j_view_part(v);
  else if (is(v, Kind::Reverse) && v.as_obj()->aux == 0) x = static_cast<Tagged*>(v.as_obj())->v;
  else return false;
  double d;
  return plain_reverse(x, d);
}

// The lambda binding bd's i-th capture: the variable of the body it closes over.
inline Var* capture(const Binding& bd, size_t i) { return bd.caps ? bd.caps[i] : bd.lam->free[i]; }

// Records in obp->rr_slots what each of obp's free variables (bound by bd) holds: from[k] is the
// body's variable that holds kind k. False when one is none of them.
bool rr_map_slots(const Binding& bd, Var* const* from) {
  Lambda* obp = bd.lam;
  compute_free_variables(obp);
  if (obp->free.size() > sizeof obp->rr_slots) return false;
  for (size_t i = 0; i < obp->free.size(); i++) {
    int8_t k = kRrNone;
    for (int j = 1; j < kRrKinds; j++)
      if (from[j] && capture(bd, i) == from[j]) k = (int8_t)j;
    if (k == kRrNone) return false;
    obp->rr_slots[i] = k;
  }
  return true;
}

// The lambda of the closure obp's body returns as f̄ (the sensitivity of the closure called),
// when it closes over `nfree` variables.
Lambda* rr_fbar_lambda(Lambda* obp, size_t nfree) {
  ensure_body(obp);
  Lambda* f = find_bp(obp->body);
  if (!f) return nullptr;
  compute_free_variables(f);
  return f->free.size() == nfree ? f : nullptr;
}

// The closure of obp over what its slots hold (from[kind]).
Value rr_closure(Lambda* obp, const Value* from) {
  int n = (int)obp->free.size();
  if (n == 0) return closure_of(obp, nullptr);  // (the lambda's one empty closure)
  Value c = make_closure(obp, nullptr, n);
  for (int i = 0; i < n; i++) static_cast<Closure*>(c.as_obj())->env[i] = from[obp->rr_slots[i]];
  return c;
}

// Whether bp is the backpropagator rev_binary_prim gives a record of +, - or *: the view of its
// node (or of the primitive's shared node), or the zero one of two constant leaves.
inline bool node_bar2_ok(Value bp) {
  if (bp == kConstPairView) return true;
  if (!bp.is_view() || (bp.bits >> 48) != 0 || view_tag(bp) != kViewBpNode) return false;
  const Ids& I = ids();
  int id = (int)static_cast<const RevNode*>(view_obj(bp))->aux - 1;
  return id == I.mul || id == I.add || id == I.sub;
}

// x̄ = (a . b) of such a backpropagator (node_bar2_ok) for ȳ = y, as back_view gives it and
// counts it. (Callers check every backpropagator first: nothing is counted for a call that then
// falls back to its body, which counts again.)
inline void node_bar2(Value bp, double y, double& a, double& b) {
  if (bp == kConstPairView) {
    a = b = 0;
    return;
  }
  const RevNode* n = static_cast<const RevNode*>(view_obj(bp));
  const Ids& I = ids();
  int id = (int)n->aux - 1;
  if (id == I.mul) {
    count(I.mul, 2);
    a = n->x2.as_real() * y;
    b = n->x1.as_real() * y;
  } else if (id == I.add) {
    a = b = y;
  } else {
    count(I.sub);
    a = y;
    b = 0 - y;
  }
}

bool rr_rule_back(Closure* k, Value ys, Value* out);
bool rr_bp_back(Closure* k, Value ys, Value* out);
bool rr_bp_split1(Closure* c, Value y, Value* out);

// R:backpropagator of op's raw body, for op's rule's backpropagator: for *, (* x2 y) and (* x1 y)
// reverse-transformed and taken apart, and the backpropagator over their backpropagators, y, x1
// and x2; for -, (- 0 y) and the backpropagator over its; for +, no call and no variable.
void rr_prepare_bp(Lambda* raw, Prim* p) {
  if (raw->rr_slots[0] == kRrUnusable || raw->native_split1) return;
  raw->rr_slots[0] = kRrUnusable;
  ensure_body(raw);
  compute_free_variables(raw);
  NativeOp op = op_of(p);
  size_t ncalls = op == N_MUL ? 2 : op == N_SUB ? 1 : 0;
  if (raw->free.size() != (op == N_MUL ? 2u : 0u) || !raw->param) return;
  Var* apps[2] = {};
  size_t napps = 0;
  const Binding* lam_bind = nullptr;
  Var* from[kRrKinds] = {};
  for (const Binding& bd : raw->body->binds) {
    if (bd.op == Op::App) {
      if (napps == ncalls || bd.raw_call) return;
      apps[napps++] = bd.x;
    } else if (bd.op == Op::Lambda) {
      if (lam_bind) return;
      lam_bind = &bd;
    } else if (bd.op == Op::Cdr && napps > 0 && bd.a == apps[napps - 1]) {
      from[napps == 1 ? kRrBp1 : kRrBp2] = bd.x;
    } else if (bd.op == Op::If || bd.op == Op::BackCall) {
      return;
    }
  }
  from[kRrY] = raw->param;
  if (op == N_MUL) {
    from[kRrX1] = raw->free[0];
    from[kRrX2] = raw->free[1];
  }
  if (napps != ncalls || !lam_bind || (ncalls >= 1 && !from[kRrBp1]) || (ncalls == 2 && !from[kRrBp2]) ||
      !rr_map_slots(*lam_bind, from))
    return;
  Lambda* obp = lam_bind->lam;
  if (!(obp->native_bp = rr_fbar_lambda(obp, op == N_MUL ? 2 : 0))) return;
  obp->native_prim = p;
  set_bp<rr_bp_back>(obp);
  raw->native_prim = p;
  raw->rr_obp = obp;
  raw->rr_slots[0] = kRrReady;
  raw->native_split1 = rr_bp_split1;
}

// The transformed rule r's body: (*j-inverse xr) taken apart into x1 and x2; the primitive applied
// to them, its value and backpropagator taken apart; *j of the value; the closure of the rule's
// transformed backpropagator (over x1 and x2, or nothing), and the backpropagator (over the
// primitive's backpropagator, x1 and x2, or some of them).
bool rr_prepare_rule(Lambda* r) {
  if (r->rr_slots[0] == kRrReady) return true;
  if (r->rr_slots[0] == kRrUnusable) return false;
  r->rr_slots[0] = kRrUnusable;  // (until shown otherwise)
  ensure_body(r);
  Var* apps[3] = {};
  int napps = 0;
  const Binding* lams[2] = {};
  int nlams = 0;
  Var* from[kRrKinds] = {};
  for (const Binding& bd : r->body->binds) {
    if (bd.op == Op::App) {
      if (napps == 3 || bd.raw_call) return false;
      apps[napps++] = bd.x;
    } else if (bd.op == Op::Lambda) {
      if (nlams == 2) return false;
      lams[nlams++] = &bd;
    } else if ((bd.op == Op::Car || bd.op == Op::Cdr) && napps == 1 && bd.a == apps[0]) {
      from[bd.op == Op::Car ? kRrX1 : kRrX2] = bd.x;
    } else if (bd.op == Op::Cdr && napps == 2 && bd.a == apps[1]) {
      from[kRrBp] = bd.x;
    } else if (bd.op == Op::If || bd.op == Op::BackCall) {
      return false;
    }
  }
  if (napps != 3 || nlams != 2 || !from[kRrX1] || !from[kRrX2] || !from[kRrBp]) return false;
  Prim* p = r->native_prim;
  bool mul = op_of(p) == N_MUL;
  Lambda* vbp = lams[0]->lam;
  compute_free_variables(vbp);
  if (vbp->free.size() != (mul ? 2u : 0u)) return false;
  if (mul && (capture(*lams[0], 0) != from[kRrX1] || capture(*lams[0], 1) != from[kRrX2])) return false;
  if (!rr_map_slots(*lams[1], from)) return false;
  Lambda* obp = lams[1]->lam;
  if (!(obp->native_bp = rr_fbar_lambda(obp, 0))) return false;
  obp->native_prim = p;
  set_bp<rr_rule_back>(obp);
  if (vbp->raw_variant) rr_prepare_bp(vbp->raw_variant, p);
  r->native_bp = vbp;
  r->rr_obp = obp;
  r->rr_slots[0] = kRrReady;
  return true;
}

bool rr_split2(Closure* c, Value a, Value b, Value* out) {
  Value x[kRrKinds], o[2];
  Lambda* r = c->lambda;
  if (!inner_reverse(a, x[kRrX1]) || !inner_reverse(b, x[kRrX2]) || !rr_prepare_rule(r)) return false;
  if (!rev_binary_s2(c, x[kRrX1], x[kRrX2], o)) return false;
  x[kRrBp] = o[1];
  Value vbp = closure_of(r->native_bp, x + kRrX1);
  out[0] = cons(star_j(o[0]), vbp);
  out[1] = rr_closure(r->rr_obp, x);
  return true;
}

bool rr_split1(Closure* c, Value v, Value* out) {
  if (is_lazy(v)) v = force(v);
  return is_pair(v) && rr_split2(c, car(v), cdr(v), out);
}

// The backpropagator of R:reverse-op on ȳ = ((reverse y) . c̄), y a real and c̄ the sensitivity of
// the rule's backpropagator (for *, a closure whose first two slots are reals): f̄ the rule's
// closure and x̄ = (*j (x̄1 . x̄2)), the primitive's backpropagator applied to y (and c̄'s slots added).
bool rr_rule_back(Closure* k, Value ys, Value* out) {
  if (!is(ys, Kind::Pair)) return false;
  Value cs = cdr(ys);
  double yd;
  if (!plain_reverse(car(ys), yd)) return false;  // (*j-inverse of it: a real)
  Value y = Value::real(yd);
  Lambda* obp = k->lambda;
  Value bp = Value::unbound();
  for (size_t i = 0; i < obp->free.size(); i++)
    if (obp->rr_slots[i] == kRrBp) bp = k->env[i];
  bool mul = op_of(obp->native_prim) == N_MUL;
  Value c0, c1;
  if (mul) {
    if (!is(cs, Kind::Closure) || static_cast<Closure*>(cs.as_obj())->aux < 2) return false;
    c0 = env_ref(cs, 0, nullptr);
    c1 = env_ref(cs, 1, nullptr);
    if (!c0.is_real() || !c1.is_real()) return false;
  }
  if (!node_bar2_ok(bp)) return false;
  double a, b;
  node_bar2(bp, y.as_real(), a, b);
  Value s1 = Value::real(mul ? c0.as_real() + a : a);
  Value s2 = Value::real(mul ? c1.as_real() + b : b);
  out[0] = closure_of(obp->native_bp, nullptr);
  out[1] = view_of(cons(s1, s2), kViewJ);  // (*j of the pair)
  return true;
}

// R:backpropagator of op's raw body on y (an outer reverse real): for *, over x1 and x2, the value
// (() . ((* x2 y) . (* x1 y))); for -, (() . (y . (- 0 y))); for +, (() . (y . y)); and the
// backpropagator over the products' or the difference's backpropagators (and y, x1 and x2).
bool rr_bp_split1(Closure* c, Value y, Value* out) {
  double d;
  if (!plain_reverse(y, d)) return false;
  Lambda* raw = c->lambda->raw_variant;
  Prim* p = raw->native_prim;
  Value x[kRrKinds], o1[2], o2[2];
  x[kRrY] = y;
  switch (op_of(p)) {
    case N_MUL:
      x[kRrX1] = c->env[0];
      x[kRrX2] = c->env[1];
      // (both operands checked first: the first product is counted when made, and a fall back
      // to the body would count it again)
      if (!plain_reverse(x[kRrX1], d) || !plain_reverse(x[kRrX2], d)) return false;
      if (!rev_binary_prim(p, x[kRrX2], y, o1) || !rev_binary_prim(p, x[kRrX1], y, o2)) return false;
      x[kRrBp1] = o1[1];
      x[kRrBp2] = o2[1];
      out[0] = cons(Value::nil(), cons(o1[0], o2[0]));
      break;
    case N_SUB:
      if (!rev_binary_prim(p, small_leaf(0), y, o1)) return false;  // (the body's constant (reverse 0))
      x[kRrBp1] = o1[1];
      out[0] = cons(Value::nil(), cons(y, o1[0]));
      break;
    default: out[0] = cons(Value::nil(), cons(y, y)); break;
  }
  out[1] = rr_closure(raw->rr_obp, x);
  return true;
}

// Its backpropagator on ȳ = (f̄ . (s1 . s2)), s1 and s2 reals: f̄ = the closure of the rule's
// backpropagator (for *, over (x̄1 x̄2) = (s2 y, s1 y)) and x̄ = the sensitivity of y: for *,
// s2 x1 + s1 x2 from the two products' backpropagators (the second's first, as the body calls
// them); for -, s1 + that of (- 0 y) for s2; for +, s1 + s2.
bool rr_bp_back(Closure* k, Value ys, Value* out) {
  if (!is(ys, Kind::Pair)) return false;
  Value ss = cdr(ys);
  if (!is(ss, Kind::Pair)) return false;
  Value s1 = car(ss), s2 = cdr(ss);
  if (!s1.is_real() || !s2.is_real()) return false;
  Lambda* obp = k->lambda;
  Value bp1 = Value::unbound(), bp2 = Value::unbound();
  for (size_t i = 0; i < obp->free.size(); i++) {
    if (obp->rr_slots[i] == kRrBp1) bp1 = k->env[i];
    if (obp->rr_slots[i] == kRrBp2) bp2 = k->env[i];
  }
  double a1, b1, a2, b2;
  switch (op_of(obp->native_prim)) {
    case N_MUL: {  // (the second product's backpropagator first, as the body calls them)
      if (!node_bar2_ok(bp1) || !node_bar2_ok(bp2)) return false;
      node_bar2(bp2, s2.as_real(), a2, b2);
      node_bar2(bp1, s1.as_real(), a1, b1);
      Value env[2] = {Value::real(a2), Value::real(a1)};
      out[0] = closure_of(obp->native_bp, env);
      out[1] = Value::real(b2 + b1);
      return true;
    }
    case N_SUB:
      if (!node_bar2_ok(bp1)) return false;
      node_bar2(bp1, s2.as_real(), a1, b1);
      out[0] = closure_of(obp->native_bp, nullptr);
      out[1] = Value::real(s1.as_real() + b1);
      return true;
    default:
      out[0] = closure_of(obp->native_bp, nullptr);
      out[1] = Value::real(s1.as_real() + s2.as_real());
      return true;
  }
}

// The backpropagator lambda shared by comparisons and predicates: the inner lambda of the
// prelude's %zero-bp, (lambda (ys) (sensitize (cons '() (%rzero xr)))).
Lambda* zero_bp_lambda() {
  Value z = current->prelude_value("%zero-bp");
  if (!is(z, Kind::Closure)) throw Error("internal error: the prelude has no %zero-bp");
  Lambda* outer = static_cast<Closure*>(z.as_obj())->lambda;
  Lambda* bp = find_bp(outer->body);
  if (!bp) throw Error("internal error: %zero-bp makes no closure");
  compute_free_variables(outer);
  if (!bp->native_back) set_bp<bp_zero_sens>(bp);
  return bp;
}

Lambda* rule_bp(Prim* p) {
  Value r = prim_reverse(p);
  return static_cast<Closure*>(r.as_obj())->lambda->native_bp;
}

// ---- the AD primitives' rules ----
// Their forward rules apply the primitive to primal and tangent (fwd_linear); their reverse rules
// compute the value from the reverse argument and close the backpropagator over xr or x (prims.cpp
// rev_commuting, rev_linear). The C++ operations behind them act on values of any level, so these
// natives are exact at every level of nesting, not only the first.

enum AdOp : uint8_t { A_NONE, A_ZERO, A_RZERO, A_PLUS, A_PERTURB, A_UNPERTURB, A_BUNDLE, A_PRIMAL, A_TANGENT,
                      A_TANGENT_S, A_SENSITIZE, A_UNSENSITIZE, A_J, A_JINV };

AdOp ad_op_of(const char* n) {
  static const struct { const char* name; AdOp op; } table[] = {
      {"zero", A_ZERO},         {"%rzero", A_RZERO},     {"plus", A_PLUS},           {"perturb", A_PERTURB},
      {"unperturb", A_UNPERTURB}, {"bundle", A_BUNDLE},   {"primal", A_PRIMAL},       {"tangent", A_TANGENT}, {"%tangent", A_TANGENT_S},
      {"sensitize", A_SENSITIZE}, {"unsensitize", A_UNSENSITIZE}, {"*j", A_J},          {"*j-inverse", A_JINV}};
  for (const auto& e : table)
    if (!strcmp(n, e.name)) return e.op;
  return A_NONE;
}

inline AdOp ad_op(Prim* p) { return (AdOp)p->native_op; }

// Commuting with *j: the value is computed on the reverse values directly.
inline bool commutes(AdOp op) { return op == A_ZERO || op == A_RZERO || op == A_PLUS || op == A_J || op == A_JINV; }

// v when it is a Bundle (primal and tangent at once, as forward_part takes them), else null.
inline const Bundle* as_bundle(Value v) { return is(v, Kind::Bundle) ? static_cast<const Bundle*>(v.as_obj()) : nullptr; }
// Whether v is a pair of two Bundles (a forward primitive's argument tuple under nested forward
// derivatives), into *a and *d.
inline bool bundle_pair(Value v, const Bundle** a, const Bundle** d) {
  if (!is_pair(v)) return false;
  *a = as_bundle(car(v));
  *d = as_bundle(cdr(v));
  return *a && *d;
}

Value apply_linear(Value m, Value x);
Value fwd_linear_deep(Closure* c, Value v);

// A pair, or a value standing for one (a view, a lazy zero or *j): what plus adds part by part.
inline bool is_structure(Value v) { return is_pair(v) || is_data_view(v) || is(v, Kind::Zero) || is(v, Kind::LazyJ); }

// On a structure of forward values (of any depth of nesting), zero, %rzero and plus act on it
// directly: its zero is the structure's lazy zero (a bundle's, the bundle of its parts' zeros;
// %rzero's strips through a bundle or a forward closure where it reaches one: tags.cpp
// forward_rzero), and two such add part by part (bundles by their parts), a lazy zero in O(1).
// Taken apart into primal and tangent and bundled again (fwd_ad, and fwd_linear_deep at each
// further forward level), each was four walks of the whole structure: O(n) for each (zero xs) of
// an n-list in a forward derivative, and for each projection of a list in a reverse pass inside
// one, whose backpropagator adds %rzero of the rest to a sensitivity. Into *r when it applies.
bool structure_ad(Prim* p, Value v, Value* r) {
  if (!is_pair(v) && !is_data_view(v)) return false;
  switch (ad_op(p)) {
    case A_ZERO: *r = zero_of(v); return true;
    case A_RZERO: *r = rzero(v); return true;
    case A_PLUS: {
      Value a = car(v), b = cdr(v);
      if (!is_structure(a) || !is_structure(b)) return false;
      *r = plus(a, b);
      return true;
    }
    default: return false;
  }
}

// A closure of a lambda the forward transform made (j* of a closure, or one made by its code).
inline bool forward_closure(Value v) {
  return is(v, Kind::Closure) && static_cast<Closure*>(v.as_obj())->lambda->transform == 'F';
}

Value fwd_ad(Closure* c, Value v) {
  Prim* p = prim_of(c);
  // The sum of two forward values without a real (a procedure's sensitivity in a backward pass
  // under a forward derivative, say: the reverse version of a primitive, and ()), and the zero
  // of an atom: their primal and tangent parts, taken, added or zeroed and bundled again, give
  // the same value back (forward over reverse: 12,000 calls in particle, ~1,800 instructions each)
  Value r;
  if (ad_op(p) == A_PLUS && is_pair(v) && inert_sum(car(v), cdr(v), &r)) return r;
  if ((ad_op(p) == A_ZERO || ad_op(p) == A_RZERO) && inert_atom(v)) return v;
  // The sum of two forward closures (j* of closures, or ones made by forward-transformed code:
  // closures' sensitivities in a backward pass under a forward derivative) without taking them
  // apart: (bundle (plus (primal a) (primal b)) (plus (tangent a) (tangent b))) is (plus a b),
  // slot by slot of their environments, where a zero added stays as it is. Taken apart, their
  // environments were walked whole: under forward over reverse, each call of a closure over an
  // n-list cost O(n) objects (~14 a list element), a hessian-vector-product through one O(n^2).
  if (ad_op(p) == A_PLUS && is_pair(v) && forward_closure(car(v)) && forward_closure(cdr(v))) return plus(car(v), cdr(v));
  if (structure_ad(p, v, &r)) return r;
  // (of a closure with an environment: the result made before for it, if it is still cached;
  // gradient-R's (*j f) of one closure once an integration step, inside a forward derivative)
  ClosureMemo* memo = is(v, Kind::Closure) && v.as_obj()->aux != 0 ? closure_memo(p, v) : nullptr;
  if (memo && memo->key == v && memo->op == p) return memo->r;
  // (the primal's part first: when both fail, the error is the primal call's, with the value the
  // program gave, not its tangent's)
  Value t, q;
  const Bundle *a, *d;
  if (bundle_pair(v, &a, &d) && p->arity == 2) {  // (bundle x y) and ⊕ under nested forward derivatives
    q = p->fn2(p, a->primal, d->primal);
    t = p->fn2(p, a->tangent, d->tangent);
  } else if (const Bundle* b = as_bundle(v)) {
    q = apply_prim(p, b->primal);
    t = apply_prim(p, b->tangent);
  } else {
    q = apply_prim(p, primal(v));
    t = apply_prim(p, tangent_untagged(v));
  }
  r = bundle_untagged(q, t);
  if (memo) *memo = {v, p, r};
  return r;
}

bool rev_ad_s(Closure* c, Value xr, Value* out) {
  Prim* p = prim_of(c);
  Lambda* bp = bp_of(c);
  Value x = Value::unbound();
  if (commutes(ad_op(p))) {
    out[0] = apply_prim(p, xr);
    // (*j-inverse x) of an x that is no reverse value fails in the primal: J⁻¹(J x) does not
    if (ad_op(p) == A_JINV) check_j_inverse_arg(out[0]);
  } else {
    x = star_j_inverse(xr);
    out[0] = star_j(apply_prim(p, x));
  }
  size_t n = bp->free.size();
  if (n == 0) {
    out[1] = closure_of(bp, nullptr);
  } else {  // the bp closes over xr (commuting rules) or x (the others)
    Value env = x.is_unbound() ? xr : x;
    out[1] = make_closure(bp, &env, 1);
  }
  return true;
}

bool bp_ad(Closure* c, Value y, Value* out) {
  Prim* p = c->lambda->native_prim;
  Value e = c->aux ? c->env[0] : Value::nil();
  switch (ad_op(p)) {
    case A_ZERO:
    case A_RZERO: return result(out, rzero(e));
    case A_PLUS: return result(out, cons(y, y));
    case A_PERTURB: return result(out, unperturb(y));
    case A_UNPERTURB: return result(out, perturb(y));
    case A_BUNDLE: return result(out, cons(primal(y), tangent_structural(y)));
    case A_PRIMAL: return result(out, bundle(y, zero_of(tangent_structural(e))));
    case A_TANGENT: return result(out, tangent_bar(e, y));
    case A_TANGENT_S: return result(out, bundle(zero_of(primal(e)), y));
    case A_SENSITIZE: return result(out, unsensitize(y));
    case A_UNSENSITIZE: return result(out, sensitize(y));
    case A_J: return result(out, star_j_inverse(y));
    case A_JINV: return result(out, star_j(y));
    case A_NONE: break;
  }
  return false;
}

// F(M) of a linear M (M the closure of the lambda this one transforms).
// m applied to x, m's native form called at once when it is F(M) of a linear M at a lower level
// or M's forward rule (neither declines, nor counts an application: apply's frame, without a
// position, never shows in a trace).
Value apply_linear(Value m, Value x) {
  Closure* mc = static_cast<Closure*>(m.as_obj());
  auto f = mc->lambda->native1;
  if (f == fwd_linear_deep || f == fwd_ad) return f(mc, x);
  return apply(m, x);
}

Value fwd_linear_deep(Closure* c, Value v) {
  // (the AD primitive at the bottom of the forward transforms: structures as fwd_ad takes them)
  Lambda* base = c->lambda->source;
  while (base && base->native1 == fwd_linear_deep) base = base->source;
  Value r;
  if (base && base->native1 == fwd_ad && structure_ad(base->native_prim, v, &r)) return r;
  Value m = closure_of(c->lambda->source, nullptr);
  // (the primal's part first: when both fail, the error names the program's value, not its tangent
  // (under two forward derivatives, (unperturb x) of x = 2 said "got 1"), as fwd_ad's does)
  Value t, q;
  if (const Bundle* b = as_bundle(v)) {
    q = apply_linear(m, b->primal);
    t = apply_linear(m, b->tangent);
  } else {
    q = apply_linear(m, primal(v));
    t = apply_linear(m, tangent_untagged(v));
  }
  return bundle_untagged(q, t);
}

void install_ad_native(Prim* p, Lambda* rule, char kind) {
  AdOp op = ad_op_of(p->name);
  if (op == A_NONE) return;
  p->native_op = op;
  rule->native_prim = p;
  if (kind == 'F') {
    rule->native1 = fwd_ad;
    rule->linear_forward = true;
    return;
  }
  compute_free_variables(rule);
  Lambda* bp = find_bp(rule->body);
  if (!bp || bp->free.size() > 1) return;
  // the bp's one free variable must be what rev_ad_s gives it: xr itself for the commuting rules,
  // for the others x = (*j-inverse xr) (whatever name the expansion gave it)
  if (bp->free.size() == 1 && (bp->free[0] == rule->param) != commutes(op)) return;
  bp->native_prim = p;
  rule->native_bp = bp;
  set_rule1<rev_ad_s>(rule);
  set_bp<bp_ad>(bp);
}

}  // namespace

Value const_leaf(double r) { return const_leaf_impl(r); }
const uint64_t* small_leaves() { return reinterpret_cast<const uint64_t*>(small_leaf_table); }
Value small_leaf(int i) {
  std::atomic<uint64_t>& slot = small_leaf_table[i - kSmallLeafMin];
  uint64_t bits = slot.load(std::memory_order_acquire);
  if (bits) return Value(bits, 0);
  Tagged* t = static_cast<Tagged*>(gc_alloc_uncollectable(sizeof(Tagged)));
  t->kind = Kind::Reverse;
  t->aux = kConstLeafAux;
  t->v = Value::real(i);
  uint64_t expected = 0;
  if (!slot.compare_exchange_strong(expected, Value::obj(t).bits, std::memory_order_acq_rel)) {
    gc_free_uncollectable(t);  // another thread's is the one
    return Value(expected, 0);
  }
  return Value::obj(t);
}
Value const_pair_view() { return kConstPairView; }
Split1 rev_const_split() { return rev_const_s; }
Split2 rev_compare_split2() { return rev_compare_s2; }
Split1 rev_unary_split() { return rev_unary_s; }
Native2 fwd_binary_form() { return fwd_binary2; }
UnaryFn unary_arith_fn(Prim* p) {
  return p->cls == PrimClass::Arith && p->arity == 1 ? unary_fn_of(native_op_of(p->name)) : nullptr;
}
Native1 fwd_unary_form() { return fwd_unary; }
namespace {
// (native code boxes d without a check: a NaN made canonical here, as Value::real makes it)
template <NativeOp op>
double with_derivative(double x, double* d) {
  double y = sincos_parts(op, x, *d);
  *d = Value::real(*d).as_real();
  return y;
}
}  // namespace
UnaryDFn unary_with_derivative_fn(Prim* p) {
  if (p->cls != PrimClass::Arith || p->arity != 1) return nullptr;
  NativeOp op = native_op_of(p->name);
  return op == N_SIN ? with_derivative<N_SIN> : op == N_COS ? with_derivative<N_COS> : nullptr;
}

uint64_t unary_node_bar(const RevNode* n, double y) {
  Interp* in = current;
  NativeOp op = op_of(in->prims[n->aux - 1]);
  if (node_args(op) != 1) return 0;
  double d = node_derivative(op, n);  // back_node_op's unary case, without its result pair
  in->meter[ids().mul]++;
  return Value::real(d * y).bits;
}
Value const_real_view() { return kConstRealView; }
Value const_nil_view() { return kConstNilView; }

namespace {
// A reverse pair at the first level as list-ref's walk meets it: a pair, or a view of *j of one.
inline bool reverse_pair(Value v) { return is_pair(v) || is_j_pair_view(v); }

// The pair of a list under a view of *j of it (data: a list W6's weights, say) after x steps
// down its cdrs, walked in the data itself; null when a step meets no plain pair (then the walk
// on the reverse values decides).
Pair* data_walk(Value lr, double x) {
  if (!is_j_pair_view(lr)) return nullptr;
  Pair* p = static_cast<Pair*>(view_obj(lr));
  for (double k = 0; k < x; k++) {
    if (!is_pair(p->cdr)) return nullptr;
    p = static_cast<Pair*>(p->cdr.as_obj());
  }
  return p;
}

// (list-ref l i) in reverse mode, l a reverse list and i a first-level reverse real indexing it:
// the element as the transformed body's steps give it (car and cdr applied to the reverse
// values: views of *j of pairs walk without allocating), and for the i steps' chained
// backpropagators one (bp_list_ref). Anything else (an index out of range, deeper nesting): the
// transformed body, with its errors.
bool rev_list_ref_s2(Closure*, Value lr, Value ir, Value* out) {
  double x;
  if (!plain_reverse(ir, x) || !(x >= 0 && x < 1e15) || x != std::floor(x)) return false;
  Interp& in = *current;
  Value env[2] = {lr, Value::real(x)};
  if (Pair* p = data_walk(lr, x)) {  // (car and cdr of such views are j_part of its pairs)
    out[0] = j_part(p, false);
    out[1] = make_closure(in.list_ref_bp, env, 2);
    return true;
  }
  Value cur = lr;
  for (double k = 0; k < x; k++) {
    if (!reverse_pair(cur)) return false;
    cur = in.p_cdr->fn1(in.p_cdr, cur);
  }
  if (!reverse_pair(cur)) return false;
  out[0] = in.p_car->fn1(in.p_car, cur);
  out[1] = make_closure(in.list_ref_bp, env, 2);
  return true;
}

bool rev_list_ref_s1(Closure* c, Value xr, Value* out) {
  if (!reverse_pair(xr)) return false;
  Interp& in = *current;
  return rev_list_ref_s2(c, in.p_car->fn1(in.p_car, xr), in.p_cdr->fn1(in.p_cdr, xr), out);
}

// What %list-ref-bp's lambda computes: (f̄ . (l̄ . ī)), f̄ the zero of list-ref (whose constants,
// as free variables, are zeros), l̄ the zeros of l's first i elements, then (ȳ . the zero of the
// rest), ī zero.
bool bp_list_ref(Closure* c, Value y, Value* out) {
  if (y.is_zero_sens()) return false;  // (the body completes the placeholder zero)
  Interp& in = *current;
  Value cur = c->env[0], head = Value::nil();
  Pair* last = nullptr;
  double x = c->env[1].as_real();
  auto append = [&](Value z) {
    Value p = cons(z, Value::nil());
    if (last) last->cdr = p;
    else head = p;
    last = static_cast<Pair*>(p.as_obj());
  };
  Value tail;
  if (x < 4294967296.0 && data_walk(cur, x)) {
    // over data: the list, made only if something looks at it (⊕ adds it into a list without it)
    out[0] = zero_of(closure_of(in.list_ref, nullptr));
    out[1] = cons(make_one_hot(Value::obj(view_obj(cur)), (uint32_t)x, y), Value::real(0));
    return true;
  }
  if (Pair* end = data_walk(cur, x)) {  // rzero of j_part(p, side) is the zero of that part
    for (Pair* p = static_cast<Pair*>(view_obj(cur)); p != end; p = static_cast<Pair*>(p->cdr.as_obj()))
      append(p->car.is_real() ? Value::real(0) : zero_of(p->car));
    tail = cons(y, zero_of(end->cdr));
  } else {
    for (double k = 0; k < x; k++) {
      append(rzero(in.p_car->fn1(in.p_car, cur)));
      cur = in.p_cdr->fn1(in.p_cdr, cur);
    }
    tail = cons(y, rzero(in.p_cdr->fn1(in.p_cdr, cur)));
  }
  if (last) last->cdr = tail;
  else head = tail;
  out[0] = zero_of(closure_of(in.list_ref, nullptr));  // (its constants are free variables: zeros)
  out[1] = cons(head, Value::real(0));
  return true;
}

// (dot u v) in reverse mode, u and v reverse lists of one length whose elements are reverse
// reals at the first level (pairs of them, or views of *j of data lists): the sum the loop's
// steps compute, ((0 + u_1 v_1) + u_2 v_2) + ..., each operation counted as there, and for the
// steps' backpropagators one (bp_dot). Anything else — lists of two lengths, deeper nesting, an
// element u_i and v_i both constants of the code (whose product records nothing: the steps'
// sensitivities then differ) — the transformed body, with its errors.
// One step down a first-level reverse list: its element and the rest (a pair's parts, or a view
// of *j of a data pair's, as car and cdr give them); false when l is neither.
inline bool reverse_list_step(Value l, Value& elem, Value& rest) {
  if (is_pair(l)) {
    Pair* p = static_cast<Pair*>(l.as_obj());
    elem = p->car;
    rest = p->cdr;
    return true;
  }
  if (!is_j_pair_view(l)) return false;
  Pair* p = static_cast<Pair*>(view_obj(l));
  elem = j_part(p, false);
  rest = j_part(p, true);
  return true;
}

// Walks two first-level reverse lists u and v in step, calling each(x1, x2) on their elements'
// reals: false (before any work a caller counts) unless both are lists of one length whose
// elements are first-level reverse reals, no two at one position constants of the code (whose
// products and sums record nothing: the bodies' sensitivities would differ); n the length.
template <class F>
bool walk_reals(Value u, Value v, uint64_t& n, F each) {
  Value a, b;
  n = 0;
  while (!u.is_nil()) {
    double x1, x2;
    if (!reverse_list_step(u, a, u) || !reverse_list_step(v, b, v) || !plain_reverse(a, x1) ||
        !plain_reverse(b, x2) || (is_const_leaf(a) && is_const_leaf(b)))
      return false;
    each(x1, x2);
    n++;
  }
  return v.is_nil();
}

bool rev_dot_s2(Closure*, Value ur, Value vr, Value* out) {
  Interp& in = *current;
  if (!in.dot_bp) return false;
  uint64_t n;
  double acc = 0;
  if (!walk_reals(ur, vr, n, [&](double x1, double x2) { acc = acc + x1 * x2; })) return false;
  const Ids& I = ids();
  count(I.mul, n);
  count(I.add, n);
  // (the sum of no terms is the loop's constant 0, a constant leaf as the body's)
  out[0] = n == 0 ? const_leaf(0) : make_tagged(Kind::Reverse, Value::real(acc));
  Value env[2] = {ur, vr};
  out[1] = make_closure(in.dot_bp, env, 2);
  return true;
}

bool rev_dot_s1(Closure* c, Value xr, Value* out) {
  if (!reverse_pair(xr)) return false;
  Interp& in = *current;
  return rev_dot_s2(c, in.p_car->fn1(in.p_car, xr), in.p_cdr->fn1(in.p_cdr, xr), out);
}

// The reals of a first-level reverse list vals times y, a fresh list (the sensitivity of the list
// shape, of vals' length): what %dot-bar gives, the products counted. When last_zero (ȳ = +0: the
// loop's last step is skipped, as a structural backpropagator's is), the list's last cell is not
// made: its rest from there is the zero of shape's rest from there, as the body's skipped step
// leaves it (a zero view, whose parts later backpropagators skip).
Value scaled_list(Value vals, Value shape, double y, uint64_t& n, bool last_zero) {
  Value head = Value::nil(), e, d;
  Pair* last = nullptr;
  n = 0;
  while (reverse_list_step(vals, e, vals)) {  // (lists rev_dot_s2 walked)
    Value here = shape;
    reverse_list_step(shape, d, shape);
    if (last_zero && vals.is_nil()) {
      Value z = rzero(here);
      if (last) last->cdr = z;
      else head = z;
      break;
    }
    double x = 0;
    plain_reverse(e, x);
    Value p = cons(Value::real(x * y), Value::nil());
    if (last) last->cdr = p;
    else head = p;
    last = static_cast<Pair*>(p.as_obj());
    n++;
  }
  count(ids().mul, n);
  return head;
}

// What %dot-bp's lambda computes: (f̄ . (ū . v̄)), f̄ the zero of dot (whose constant, as a free
// variable, is a zero), ū_i = v_i ȳ and v̄_i = u_i ȳ, the transposes of the steps' products (the
// sums pass ȳ on unchanged), as the loop's steps give them: for ȳ = +0 the last step's two zeros,
// not products (its backpropagator skipped: 0 · inf is no NaN there); a zero ȳ of any form (a
// program's (), #t, (zero ...)) as +0. (Its closures are made only by rev_dot_s2, over lists it
// checked.) Any other ȳ: the lambda's body.
inline bool skipped_zero(Value y);
bool bp_dot(Closure* c, Value y, Value* out) {
  Interp& in = *current;
  Value u = c->env[0], v = c->env[1];
  double s = 0;
  if (!skipped_zero(y) && !plain_real(y, s)) return false;  // (a zero: as +0, the body's steps' way)
  bool last_zero = Value::real(s).bits == Value::real(0.0).bits;
  uint64_t n;
  Value u_bar = scaled_list(v, u, s, n, last_zero);
  // (dot v v), magnitude's: the two lists are equal, made once (the values are immutable), their
  // products counted twice, as the body computes them
  Value v_bar = u_bar;
  if (u == v) count(ids().mul, n);
  else v_bar = scaled_list(u, v, s, n, last_zero);
  out[0] = zero_of(closure_of(in.dot, nullptr));
  out[1] = cons(u_bar, v_bar);
  return true;
}

// (map2 f l1 l2) in reverse mode, f the reverse rule of a binary arithmetic primitive and l1, l2
// reverse lists of one length n >= 1 whose elements are reverse reals at the first level: the
// rule applied to each pair of elements (rev_binary_s2, as the body's calls of f apply it), the
// list of their values into *ys. False for anything else — lists of two lengths or none, deeper
// nesting, two constants of the code for one element (whose rule records nothing) — with
// nothing counted. (The forward phase of v+ and v-, whose f is + or -'s rule: rev_v2_s2.)
bool map2_rule_forward(Closure* fc, Value l1, Value l2, Value* ys) {
  uint64_t n;
  if (!walk_reals(l1, l2, n, [](double, double) {}) || n == 0) return false;  // (first: nothing counted)
  Value c1, c2, a, b;
  Value head = Value::nil(), o[2];
  Pair* last = nullptr;
  for (c1 = l1, c2 = l2; reverse_list_step(c1, a, c1) && reverse_list_step(c2, b, c2);) {
    rev_binary_s2(fc, a, b, o);
    Value p = cons(o[0], Value::nil());
    if (last) last->cdr = p;
    else head = p;
    last = static_cast<Pair*>(p.as_obj());
  }
  *ys = head;
  return true;
}

// (v+ u v) and (v- u v) in reverse mode: (map2 + u v) as map2_rule_forward computes it, with one
// backpropagator (bp_v2) for the steps' of v+'s body and map2's.
bool rev_v2_s2(Closure* c, Value ur, Value vr, Value* out) {
  Interp& in = *current;
  bool plus = c->lambda->source == in.v_plus;
  Lambda* bp = plus ? in.vplus_bp : in.vminus_bp;
  if (!bp) return false;
  Value f = prim_reverse(plus ? in.p_add : in.p_sub);
  Value ys;
  if (!map2_rule_forward(static_cast<Closure*>(f.as_obj()), ur, vr, &ys)) return false;
  out[0] = ys;
  Value env[5] = {closure_of(c->lambda->source, nullptr), f, ur, vr, ys};
  out[1] = make_closure(bp, env, 5);
  return true;
}

bool rev_v2_s1(Closure* c, Value xr, Value* out) {
  Value u, v;
  return reverse_list_step(xr, u, v) && rev_v2_s2(c, u, v, out);
}

// A sensitivity a backpropagator call skips, as a zero (eval.cpp zero_sensitivity).
inline bool skipped_zero(Value y) {
  return y.is_zero_sens() || y.is_nil() || y.is_bool() || is(y, Kind::Zero) || is_zero_view(y) || is(y, Kind::String);
}

// What (map2 f l1 l2)'s backpropagator gives, as the body's steps would: (f̄ . (f̄_f . (l̄1 .
// l̄2))), f̄ the zero of map2, and l̄1, l̄2 the lists of the two parts of each element's x̄: for ȳ_i real, what
// the backpropagator of its value (the view of its node, as the body's call of f gave it) gives
// it; for a zero ȳ_i (a call the body skips) the zeros of the element's arguments; for anything
// else, that backpropagator's call (its answer, or its error). From where the rest of ȳ is a zero
// (a projection's), the zeros of the lists' rests (the body's later steps skipped). f̄_f, the sum
// of f's sensitivities, is () when an element's backpropagator ran, else f's zero. As in the body,
// ȳ's spine is taken apart first (a rest that is no pair nor zero: its error), then the elements
// from the last to the first (each step calls the rest's backpropagator before its element's).
// (into out[1] f̄_f, out[2] l̄1, out[3] l̄2)
void map2_rule_back(Value f, Value l1, Value l2, Value ys, Value y, Value* out) {
  Value cur = y;
  Prim* p = prim_of(static_cast<Closure*>(f.as_obj()));
  // per step: ȳ_i, its two arguments and its value's node (on the stack, which the collector
  // scans, for lists of up to 16: no allocation and free a call; past that in a vector)
  Value small[64];
  gc_vector<Value> big;
  size_t nel = 0;
  auto push = [&](Value e, Value a, Value b, Value node) {
    if (nel + 4 > 64 && big.empty()) big.assign(small, small + nel);
    if (!big.empty()) big.insert(big.end(), {e, a, b, node});
    else small[nel] = e, small[nel + 1] = a, small[nel + 2] = b, small[nel + 3] = node;
    nel += 4;
  };
  bool zero_rest = false;
  // (ys unbound: the rule's nodes are not read, + or -'s: l1 gives the length)
  auto more = [&] { return ys.is_unbound() ? !l1.is_nil() : is_pair(ys); };
  for (bool top = true; more(); ys = ys.is_unbound() ? ys : cdr(ys), top = false) {
    if (!top && skipped_zero(cur)) {  // (the recursive step's backpropagator skipped)
      zero_rest = true;
      break;
    }
    Value e, rest, a, b;
    if (is_pair(cur)) {
      e = car(cur);
      rest = cdr(cur);
    } else if (zero_part(cur, false, &e) && zero_part(cur, true, &rest)) {  // a zero of a pair, lazily
    } else {
      Value m = is_lazy(cur) ? force(cur) : cur;
      if (!is_pair(m)) sensitivity_not_pair(m);
      e = car(m);
      rest = cdr(m);
    }
    reverse_list_step(l1, a, l1);
    reverse_list_step(l2, b, l2);
    push(e, a, b, ys.is_unbound() ? Value::nil() : car(ys));
    cur = rest;
  }
  // the lists from their ends: the rests' zeros (or ()), then each element's parts
  Value h1 = zero_rest ? rzero(l1) : Value::nil(), h2 = zero_rest ? rzero(l2) : Value::nil(), o[3];
  bool called = false;
  Value* el = big.empty() ? small : big.data();
  for (size_t k = nel; k >= 4; k -= 4) {
    Value e = el[k - 4], a = el[k - 3], b = el[k - 2], node = el[k - 1];  // (a node: no element was two constants)
    Value bp = node_args(op_of(p)) == 0 ? shared_bp_view(p) : view_of(node, kViewBpNode);
    if (e.is_real() && back_view(bp, e, o, true)) {
      called = true;
    } else if (skipped_zero(e)) {
      o[1] = rzero(a);
      o[2] = rzero(b);
    } else {
      Value r = back_call(bp, e, o, Pos(), true);  // (what the body's call gives, or its error)
      if (!r.is_unbound()) {
        r = force(r);
        if (!is_pair(r)) sensitivity_not_pair(r);
        split_sensitivity(cdr(r), o + 1);
      }
      called = true;
    }
    h1 = cons(o[1], h1);
    h2 = cons(o[2], h2);
  }
  out[1] = called ? Value::nil() : rzero(f);
  out[2] = h1;
  out[3] = h2;
}

// What %v+-bp's (or %v--bp's) lambda computes: (f̄ . (ū . v̄)), f̄ the zero of v+ (or v-), ū and
// v̄ map2's l̄1 and l̄2 (its f̄_f, the sensitivity of v+'s `+`, dropped); for a zero ȳ, which v+'s
// body does not give map2's backpropagator, the zeros of u and v.
bool bp_v2(Closure* c, Value y, Value* out) {
  Value parts[4];
  if (skipped_zero(y)) {  // (v+'s body skips map2's backpropagator: the zeros of u and v)
    out[0] = zero_of(c->env[0]);
    out[1] = cons(rzero(c->env[2]), rzero(c->env[3]));
    return true;
  }
  map2_rule_back(c->env[1], c->env[2], c->env[3], c->env[4], y, parts);
  out[0] = zero_of(c->env[0]);
  out[1] = cons(parts[2], parts[3]);
  return true;
}


// (distance u v) = (magnitude (v- u v)) = (sqrt (dot d d)), d = (v- u v), in reverse mode, u and v
// reverse lists of one length n >= 1 whose elements are first-level reverse reals (no element two
// constants of the code): what the three bodies' forward phases compute — v-'s n differences
// (`-`'s rule), dot's sum of squares, sqrt's rule on it: the node of its value — counted as
// there, at once, with one backpropagator (bp_distance) for theirs. Anything else: the body.
bool rev_distance_s2(Closure*, Value ur, Value vr, Value* out) {
  Interp& in = *current;
  if (!in.distance_bp) return false;
  uint64_t n;
  double acc = 0;
  auto square = [&](double x1, double x2) {
    double d = x1 - x2;
    acc = acc + d * d;
  };
  if (!walk_reals(ur, vr, n, square) || n == 0) return false;
  const Ids& I = ids();
  count(I.sub, n);
  count(I.mul, n);
  count(I.add, n);
  Prim* sq = current->prims[I.sqrt_];
  prim_reverse(sq);  // (its rules made: its native operation, which its node's backpropagator reads, set)
  Value node = make_node(sq, arith1(sq, N_SQRT, acc), 1, acc, 0);  // (sqrt counted by arith1)
  out[0] = node;
  Value env[3] = {ur, vr, node};
  out[1] = make_closure(in.distance_bp, env, 3);
  return true;
}

bool rev_distance_s1(Closure* c, Value xr, Value* out) {
  Value u, v;
  return reverse_list_step(xr, u, v) && rev_distance_s2(c, u, v, out);
}

// What %distance-bp's lambda computes, as the three bodies' backpropagators would, each called as
// its caller's call gives it: ȳ to sqrt's node's (its error, for a ȳ that is no real), d̄ to dot's
// (bp_dot's products d_i d̄, or for d̄ = +0 the last step's zero), m̄ = ū ⊕ v̄ (the sensitivity of
// magnitude's v, given to dot twice), m̄ to v-'s (each element's (m̄_i, 0 - m̄_i); from a zero
// rest, the rests' zeros; a zero m̄, a call skipped: the zeros of u and v). (f̄ . (ū . v̄)).
bool bp_distance(Closure* c, Value y, Value* out) {
  Interp& in = *current;
  Value u = c->env[0], v = c->env[1], node = c->env[2];
  out[0] = zero_of(closure_of(in.distance, nullptr));
  if (skipped_zero(y)) {  // (magnitude's backpropagator skipped, then v-'s)
    out[1] = cons(rzero(u), rzero(v));
    return true;
  }
  Value o[3];
  Value r = back_call(view_of(node, kViewBpNode), y, o, Pos());  // sqrt's: d̄ (or its error)
  Value d_bar = r.is_unbound() ? o[1] : cdr(force(r));
  double s;
  if (!plain_real(d_bar, s)) return false;  // (never: sqrt's x̄ is a real)
  bool last_zero = Value::real(s).bits == Value::real(0.0).bits;
  // m̄ from the end: its cells (d_i d̄ twice, summed), the last one's zero view for d̄ = +0
  Value cu = u, cv = v, a, b, e;
  Value m_head = Value::nil();
  Pair* m_last = nullptr;
  uint64_t n = 0;
  Value here = u;  // (the shape of dot's u: magnitude's d, the list of v-'s values, of u's length)
  while (reverse_list_step(cu, a, cu) && reverse_list_step(cv, b, cv)) {
    double x1 = 0, x2 = 0;
    plain_reverse(a, x1);
    plain_reverse(b, x2);
    if (last_zero && cu.is_nil()) {
      Value z = rzero(here);  // (⊕ of two zero views: one)
      if (m_last) m_last->cdr = z;
      else m_head = z;
      break;
    }
    double p = (x1 - x2) * s;
    Value cell = cons(Value::real(p + p), Value::nil());
    if (m_last) m_last->cdr = cell;
    else m_head = cell;
    m_last = static_cast<Pair*>(cell.as_obj());
    here = cu;
    n++;
  }
  count(ids().mul, 2 * n);  // (dot's two lists' products)
  if (skipped_zero(m_head)) {  // (n = 1, d̄ = +0: v-'s backpropagator skipped)
    out[1] = cons(rzero(u), rzero(v));
    return true;
  }
  Value parts[4];
  Value f = prim_reverse(in.p_sub);
  map2_rule_back(f, u, v, Value::unbound(), m_head, parts);  // (`-`'s nodes are not read)
  out[1] = cons(parts[2], parts[3]);
  return true;
}

}  // namespace

namespace {
// The prelude's equal? on plain data: 1 or 0, or -1 for anything it would have to look at that is
// not plain (a view, a lazy value, a tagged value): then the transformed body decides.
enum DataKind { D_REAL, D_NIL, D_BOOL, D_PAIR, D_OTHER, D_UNKNOWN };
DataKind data_kind(Value v) {
  if (v.is_real()) return D_REAL;
  if (v.is_nil()) return D_NIL;
  if (v.is_bool()) return D_BOOL;
  if (!v.is_obj() || v.is_view()) return D_UNKNOWN;
  switch (kind_of(v)) {
    case Kind::Pair: return D_PAIR;
    case Kind::String:
    case Kind::Closure:
    case Kind::Prim: return D_OTHER;  // (equal? gives #f for them, whatever the other)
    default: return D_UNKNOWN;
  }
}
// (`compares` counts the `=` the body would have applied.)
int data_equal(Value a, Value b, uint64_t& compares) {
  for (;;) {
    DataKind ka = data_kind(a);
    if (ka == D_OTHER) return string_equal(a, b);  // (strings: as the body's %string=?; else #f)
    if (ka == D_UNKNOWN) return -1;
    DataKind kb = data_kind(b);
    if (kb == D_UNKNOWN) return -1;
    if (ka != kb) return 0;
    if (ka == D_REAL) {
      compares++;
      return a.as_real() == b.as_real();
    }
    if (ka != D_PAIR) return a == b;  // () or booleans
    int r = data_equal(static_cast<Pair*>(a.as_obj())->car, static_cast<Pair*>(b.as_obj())->car, compares);
    if (r != 1) return r;
    a = static_cast<Pair*>(a.as_obj())->cdr;
    b = static_cast<Pair*>(b.as_obj())->cdr;
  }
}

// A first-level reverse value as the plain data it stands for: a reverse real's real, a view of
// *j of a pair's pair, () and booleans themselves; unbound for anything else.
Value reverse_data(Value v) {
  double x;
  if (plain_reverse(v, x)) return Value::real(x);
  if (is_j_pair_view(v)) return Value::obj(view_obj(v));
  if (v.is_nil() || v.is_bool()) return v;
  return Value::unbound();
}

bool rev_equal_compare(Value a, Value b, Value* out) {
  Value da = reverse_data(a), db = reverse_data(b);
  if (da.is_unbound() || db.is_unbound()) return false;
  uint64_t compares = 0;
  int r = data_equal(da, db, compares);
  if (r < 0) return false;  // (the body will count its `=` itself)
  current->meter[current->p_num_eq->id] += compares;  // as the body's `=` counted them
  out[0] = Value::boolean(r == 1);
  return true;
}

// The zero backpropagator of equal? of a and b: a view when both are plain reverse reals (the
// closure of equal?'s reverse transform, which has no free variables, is then known).
Value equal_zero_bp(Closure* c, Value a, Value b, Value xr) {
  double x;
  if (c->lambda->free.empty() && plain_reverse(a, x) && plain_reverse(b, x)) return kEqualRealsView;
  return zero_backpropagator(Value::obj(c), xr.is_unbound() ? cons(a, b) : xr);
}

// Two plain reverse reals (W7's node codes): what rev_equal_compare and equal_zero_bp give them,
// in one test of each (the body's one `=` counted, the zero backpropagator's view).
bool rev_equal_reals(Closure* c, Value a, Value b, Value* out) {
  double x, y;
  if (!c->lambda->free.empty() || !plain_reverse(a, x) || !plain_reverse(b, y)) return false;
  current->meter[current->p_num_eq->id]++;
  out[0] = Value::boolean(x == y);
  out[1] = kEqualRealsView;
  return true;
}

bool rev_equal_s2(Closure* c, Value a, Value b, Value* out) {
  if (rev_equal_reals(c, a, b, out)) return true;
  if (!rev_equal_compare(a, b, out)) return false;
  out[1] = equal_zero_bp(c, a, b, Value::unbound());
  return true;
}

bool rev_equal_s1(Closure* c, Value xr, Value* out) {
  if (!reverse_pair(xr)) return false;
  Interp& in = *current;
  Value a = in.p_car->fn1(in.p_car, xr), b = in.p_cdr->fn1(in.p_cdr, xr);
  if (rev_equal_reals(c, a, b, out)) return true;
  if (!rev_equal_compare(a, b, out)) return false;
  out[1] = equal_zero_bp(c, a, b, xr);
  return true;
}
}  // namespace

void install_prelude_rule(Lambda* lam, Lambda* r) {
  Interp& in = *current;
  if (lam == in.list_ref && in.list_ref_bp) set_rule2<rev_list_ref_s1, rev_list_ref_s2>(r);
  else if (lam == in.equal_p) set_rule2<rev_equal_s1, rev_equal_s2>(r);
  else if (lam == in.dot && in.dot_bp) set_rule2<rev_dot_s1, rev_dot_s2>(r);
  else if (lam == in.distance && in.distance_bp) set_rule2<rev_distance_s1, rev_distance_s2>(r);
  else if (lam == in.v_plus || lam == in.v_minus) set_rule2<rev_v2_s1, rev_v2_s2>(r);
}
void install_list_ref_bp(Lambda* bp) {
  bp->name = intern("backpropagator of list-ref");  // (as the transformed body's prints)
  set_bp<bp_list_ref>(bp);
}
// Whether bp's free variables are the names given, in that order (what its native form reads).
bool free_variables_are(Lambda* bp, std::initializer_list<const char*> names) {
  compute_free_variables(bp);
  if (bp->free.size() != names.size()) return false;
  size_t k = 0;
  for (const char* n : names)
    if (strcmp(bp->free[k++]->name, n) != 0) return false;
  return true;
}
void install_distance_bp(Lambda* bp) {
  if (!free_variables_are(bp, {"u", "v", "node"})) {  // (bp_distance reads them at env[0..2])
    current->distance_bp = nullptr;  // (then distance's reverse transform is its body, as before)
    return;
  }
  bp->name = intern("backpropagator of distance");  // (as the transformed body's prints)
  set_bp<bp_distance>(bp);
}
// (null when its free variables are not what bp_v2 reads: then the reverse transform of v+ or v-
// is its body, as before)
Lambda* install_v2_bp(Lambda* bp, const char* name) {
  if (!free_variables_are(bp, {"g", "f", "l1", "l2", "ys"})) return nullptr;
  bp->name = intern(name);  // (as the transformed body's prints)
  set_bp<bp_v2>(bp);
  return bp;
}
void install_dot_bp(Lambda* bp) {
  if (!free_variables_are(bp, {"u", "v"})) {  // (bp_dot reads them at env[0] and env[1])
    current->dot_bp = nullptr;  // (then dot's reverse transform is its body, as before)
    return;
  }
  bp->name = intern("backpropagator of dot");  // (as the transformed body's prints)
  set_bp<bp_dot>(bp);
}

void install_reverse_forward(Lambda* lam, Lambda* r) {
  if (lam->native_split2 == rev_binary_s2) {  // reverse over reverse
    // (for an interpreter without the native tier only: compiled, the bodies are as fast)
    NativeOp op = op_of(lam->native_prim);
    if (!current->jit && (op == N_ADD || op == N_SUB || op == N_MUL)) {
      r->native_prim = lam->native_prim;
      r->native_split1 = rr_split1;
      r->native_split2 = rr_split2;
    }
    return;
  }
  if (lam->native1 == fwd_unary && fwd2_unary_op(op_of(lam->native_prim))) {
    r->native_prim = lam->native_prim;
    r->native_split1 = rf_split1u;
    return;
  }
  if (lam->native2 != fwd_binary2) return;
  NativeOp op = op_of(lam->native_prim);
  if (op != N_ADD && op != N_SUB && op != N_MUL && op != N_DIV) return;
  r->native_prim = lam->native_prim;
  r->native_split1 = rf_split1;
  r->native_split2 = rf_split2;
}

void install_linear_forward(Lambda* f) {
  Lambda* m = f->source;
  if (m && f->transform == 'F' && m->native_prim && m->native_prim->cls == PrimClass::Arith &&
      (m->native_split2 == rev_binary_s2 || m->native_split1 == rev_unary_s)) {
    f->native_prim = m->native_prim;
    if (m->native_split2 == rev_binary_s2) {
      f->native1 = fr_paired1<fr_split1>;
      f->native2 = fr_paired2;
      f->native_split1 = fr_split1;
      f->native_split2 = fr_split2;
    } else {
      f->native1 = fr_paired1<fr_split1u>;
      f->native_split1 = fr_split1u;
    }
    return;
  }
  if (m && m->native2 == fwd_binary2 && f->transform == 'F') {
    NativeOp op = op_of(m->native_prim);
    if (op == N_ADD || op == N_SUB || op == N_MUL || op == N_DIV) {
      f->native_prim = m->native_prim;
      f->native1 = fwd2_binary1;
      f->native2 = fwd2_binary2;
    }
    return;
  }
  if (m && m->native1 == fwd_unary && f->transform == 'F') {
    if (fwd2_unary_op(op_of(m->native_prim))) {
      f->native_prim = m->native_prim;
      f->native1 = fwd2_unary;
    }
    return;
  }
  if (!m || !m->linear_forward || !m->free.empty() || f->transform != 'F') return;
  f->linear_forward = true;
  f->native1 = fwd_linear_deep;
}

Value materialize_view(Value v) {
  if (!v.is_view()) return v;
  uint64_t tag = view_tag(v);
  if (is_data_view(v)) {  // (these need no interpreter: the host may print them)
    if (is_zero_view(v)) return make_lazy_zero(Value::obj(view_obj(v)), zero_view_strip(v));
    if (tag == kViewJ) return make_lazy_j(Value::obj(view_obj(v)), 1);
    return star_j(j_view_part(v));
  }
  Interp& in = *current;
  if (v == kConstNilView) {
    Value nil = Value::nil();
    return make_closure(zero_bp_lambda(), &nil, 1);
  }
  if ((v.bits >> 48) == 1) {  // kConstPairView: a comparison of two reverse reals (kConstRealView: of one)
    Value xr = v.bits & 16 ? star_j(Value::real(0)) : cons(star_j(Value::real(0)), star_j(Value::real(0)));
    if (v.bits & 32) return zero_backpropagator(closure_of(reverse_transform(in.equal_p), nullptr), xr);
    return make_closure(zero_bp_lambda(), &xr, 1);
  }
  Value obj = Value::obj(view_obj(v));
  switch (tag) {
    case kViewBpNode: {
      RevNode* n = static_cast<RevNode*>(view_obj(v));
      Prim* p = in.prims[n->aux - 1];
      Lambda* bp = rule_bp(p);
      Value env[2] = {n->x1, n->x2};
      return closure_of(bp, node_args(op_of(p)) == 0 ? nullptr : env);
    }
    case kViewBpFwd: return rf_materialize(static_cast<RevNode*>(view_obj(v)));
    case kViewBpCar: return make_closure(rule_bp(in.prim("car")), &obj, 1);
    case kViewBpCdr: return make_closure(rule_bp(in.prim("cdr")), &obj, 1);
    case kViewBpConst: return make_closure(zero_bp_lambda(), &obj, 1);
    case kViewBpCarJ:
    case kViewBpCdrJ:
    case kViewBpConstJ:
    case kViewBpConstJCar:
    case kViewBpConstJCdr: {
      Value xr = arg_of_view(v);
      Lambda* bp = tag == kViewBpCarJ ? rule_bp(in.prim("car")) : tag == kViewBpCdrJ ? rule_bp(in.prim("cdr")) : zero_bp_lambda();
      return make_closure(bp, &xr, 1);
    }
  }
  throw Error("internal error: an unknown view");
}

bool back_view(Value bp, Value y, Value* out, bool three) {
  if (bp == kEqualRealsView) return false;  // (never called in practice: the value is a boolean)
  if (bp == kConstNilView) return !three && result(out, Value::nil());
  if ((bp.bits >> 48) == 1) {
    if (!(bp.bits & 16)) return result2(out, 0, 0, three);
    if (three) return false;
    return result(out, Value::real(0));
  }
  Obj* o = view_obj(bp);
  switch (view_tag(bp)) {
    case kViewBpNode: {
      double yr;
      if (!plain_real(y, yr)) return false;
      RevNode* n = static_cast<RevNode*>(o);
      NativeOp op = op_of(current->prims[n->aux - 1]);
      if (three && node_args(op) == 1) three = false;
      if (node_args(op) == 1) {  // (a heap node: its derivative as node_derivative gives it)
        double d = node_derivative(op, n);
        count(ids().mul);
        result(out, Value::real(d * yr));
        break;
      }
      if (!back_node(current->prims[n->aux - 1], n, yr, out, three)) return false;
      if (three) return true;
      break;
    }
    case kViewBpFwd: return rf_back(static_cast<RevNode*>(o), y, out, three);
    case kViewBpCar:
      if (three) {
        out[0] = Value::nil();
        out[1] = y;
        out[2] = rzero(cdr(force(Value::obj(o))));
        return true;
      }
      result(out, car_bar(Value::obj(o), y));
      break;
    case kViewBpCdr:
      if (three) {
        out[0] = Value::nil();
        out[1] = rzero(car(force(Value::obj(o))));
        out[2] = y;
        return true;
      }
      result(out, cdr_bar(Value::obj(o), y));
      break;
    case kViewBpConst: result(out, rzero(Value::obj(o))); break;
    case kViewBpCarJ:  // xr = (*j P): the other part's zero is the zero of (cdr P)
    case kViewBpCdrJ: {
      Pair* p = static_cast<Pair*>(o);
      bool car_side = view_tag(bp) == kViewBpCarJ;
      Value other = zero_of(car_side ? p->cdr : p->car);
      out[0] = Value::nil();
      if (three) {
        out[1] = car_side ? y : other;
        out[2] = car_side ? other : y;
        return true;
      }
      out[1] = car_side ? cons(y, other) : cons(other, y);
      break;
    }
    case kViewBpConstJ:
    case kViewBpConstJCar:
    case kViewBpConstJCdr: result(out, rzero(arg_of_view(bp))); break;
    default: return false;
  }
  if (three) split_sensitivity(out[1], out + 1);
  return true;
}

void install_native(Prim* p, Lambda* rule, char kind) {
  if (p->cls == PrimClass::AD) return install_ad_native(p, rule, kind);
  if (p->cls == PrimClass::Host) return;
  const char* n = p->name;
  p->native_op = native_op_of(n);
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
  compute_free_variables(rule);
  if (p->cls == PrimClass::Compare || p->cls == PrimClass::Predicate) {
    if (p->fwd_rule) {  // tag predicates look under the transform: keep the rule
      rule->native_prim = nullptr;
      return;
    }
    rule->native_bp = zero_bp_lambda();
    if (p->arity == 2) set_rule2<rev_compare_s1, rev_compare_s2>(rule);
    else set_rule1<rev_const_s>(rule);
    return;
  }
  Lambda* bp = find_bp(rule->body);
  if (!bp) return;
  bp->native_prim = p;
  rule->native_bp = bp;
  size_t nf = bp->free.size();
  if (p->cls == PrimClass::Arith) {
    if (p->arity == 1) {
      if (nf > 1) return;
      set_rule1<rev_unary_s>(rule);
      set_bp<bp_unary>(bp);
    } else {
      if ((size_t)node_args(op_of(p)) != nf) return;
      set_rule2<rev_binary_s1, rev_binary_s2>(rule);
      set_bp<bp_binary>(bp);
    }
    return;
  }
  if (nf != 1) return;
  if (!strcmp(n, "car")) {
    set_rule1<rev_car_s>(rule);
    set_bp<bp_car>(bp);
  } else if (!strcmp(n, "cdr")) {
    set_rule1<rev_cdr_s>(rule);
    set_bp<bp_cdr>(bp);
  }
}

}  // namespace vlad
