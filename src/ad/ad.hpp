// ad.hpp — the AD machinery on values (tags, zero, plus, bundle, *j and their inverses) and the
// run-time transforms of lambda bodies (forward: paper §2 lifted to closures; reverse: paper §4).
#pragma once
#include "../eval/ast.hpp"

namespace vlad {

struct Prim;

// ---- shared machinery (tags.cpp) ----
Value zero_of(Value v);               // (zero v), lazy
Value rzero(Value v);                 // zero of (*j-inverse v), lazy: what backpropagators start from
Value reverse_zero(int k);            // (reverse^k 0), 1 <= k <= 8: made once, shared (zero_shallow gives it)
Value materialize_zero(Value z);      // one level of a lazy zero, e.g. a pair of lazy zeros
// One level of any lazy value (a zero, *j of a pair), repeated until the value is not lazy.
Value force(Value v);
inline bool is_data_view(Value v);
// A lazy object that force builds once and keeps (*j of a pair, list-ref's one-hot lists).
inline bool is_built_lazily(Value v) {
  return v.is_obj() && (v.as_obj()->kind == Kind::LazyJ || v.as_obj()->kind == Kind::OneHot ||
                        v.as_obj()->kind == Kind::HotSum);
}
inline bool is_lazy(Value v) { return is(v, Kind::Zero) || is_built_lazily(v) || is_data_view(v); }
Value plus(Value a, Value b);         // ⊕ (paper §4)
// a ⊕ b into r when neither holds a real ((), booleans, strings, primitives, closures with an
// empty environment and no constants): either one, as plus gives it; false otherwise.
bool inert_sum(Value a, Value b, Value* r);
bool inert_atom(Value v);  // (), #t, #f or a string: its own zero, its own primal and tangent
Value strip_tags(Value v);            // the primal real under any number of tags (comparisons)
Value env_ref(Value closure, int index, Lambda* lam);

// ---- forward mode ----
Value bundle(Value primal, Value tangent_perturbation);
Value bundle_untagged(Value primal, Value tangent);  // (bundle p (perturb t)), no tag made
Value primal(Value v);
// A perturbation. The tangent of a forward procedure b is the procedure (%tangent-of b), which
// gives the tangent of b's result (docs/language.md, "Derivatives of functions").
Value tangent(Value v);
// The tangent as the AD primitives' own rules take it apart: a forward procedure's is the
// procedure of the same lambda over the tangents in its environment (%tangent).
Value tangent_structural(Value v);
Value tangent_untagged(Value v);  // (unperturb (tangent_structural v)), no tag made
// The sensitivity of x in (tangent x) given that of the result, y (%tangent-bar).
Value tangent_bar(Value x, Value y);
Value perturb(Value v);
Value unperturb(Value v);
Value j_star(Value v);  // (bundle v (perturb (zero v)))
// The last result of a pure operation op (an address standing for it; null: j*) on a closure c
// with an environment, in a small per-evaluation cache (tags.cpp): the slot (c, op) would be in;
// it holds c's result when key == c and op matches.
struct ClosureMemo {
  Value key;
  const void* op;
  Value r;
};
ClosureMemo* closure_memo(const void* op, Value c);

// ---- reverse mode ----
Value star_j(Value v);          // J← (paper §4)
Value star_j_inverse(Value v);  // J←⁻¹
bool star_j_inverse_parts(Value a, Value d, Value* out);  // of the pair (a . d), taken apart
// The error (*j-inverse v) raises at once, if any: v's kind checked, a pair not walked. (The reverse
// version of *j-inverse computes J(J⁻¹ x) as J⁻¹(J x), which for an x that is no reverse value
// gives x where the primal call fails: native.cpp rev_ad_s checks x so.)
void check_j_inverse_arg(Value v);
Value sensitize(Value v);
Value unsensitize(Value v);

// Applies transform 'F' (j*) or 'R' (*j) to a value.
Value transform_value(Value v, char t);

// The backpropagator of a call of the reverse-transformed closure f on x whose value holds no real:
// (f̄ . x̄) = (zero of f's primal . zero of x's primal) whatever ȳ (a raw backpropagator).
Value zero_backpropagator(Value f, Value x);
// Its lambda (this interpreter's, made on first need): native code makes such closures itself.
Lambda* zero_backpropagator_lambda();

// ---- closures as data: constants are free variables (paper §4) ----
// The lambda with its real constants as free variables (lam->cc), or null for a lambda made by a
// transform, a rule, or a letrec group, whose closures conform only with closures of itself.
Lambda* constant_converted(Lambda* lam);
// Two closures conform when their lambdas are one, or have the same shape once their constants
// are free variables. Then `lam` is the lambda to build the result over and ex, ey (of
// lam->free.size()) the two environments in its order, constants included.
bool closures_conform(Value x, Value y, Lambda** lam, gc_vector<Value>* ex, gc_vector<Value>* ey);
// Whether a procedure can be the sensitivity or tangent of another (tags.cpp): vjp's check.
bool procedures_conform(Value a, Value b);

// ---- transforms of lambdas, computed once and cached on the lambda ----
Lambda* forward_transform(Lambda* lam);
Lambda* reverse_transform(Lambda* lam);

// The forward / reverse version of a primitive: a closure of its rule lambda (or the primitive
// itself for those that act on transformed values directly).
Value prim_forward(Prim* p);
Value prim_reverse(Prim* p);

// Gives a builtin primitive's rule lambda (and its backpropagator lambda) a native fast path for
// arguments at the first level of transformation (native.cpp).
void install_native(Prim* p, Lambda* rule, char kind);
// The forward transform f of a linear lambda (Lambda::linear_forward) gets the same native; that of
// +, -, * or /'s forward rule, the forward-over-forward one (native.cpp fwd2_binary2).
void install_linear_forward(Lambda* f);
// The reverse transform r of a forward rule lam: for +, - and *, a split form run at once
// (reverse over forward, native.cpp rf_split2).
void install_reverse_forward(Lambda* lam, Lambda* r);
// Frees this thread's memo tables (at the end of a thread that evaluated).
void release_ad_tables();
// Frees this thread's pool of buffers for bodies being emitted by the reverse transform.
void release_binding_pool();
// The reverse transform r of a prelude lambda with a native first-level form, when lam is one:
// list-ref's walks at once, with one backpropagator (Interp::list_ref_bp, whose native form
// install_list_ref_bp gives); equal?'s compares the data two reverse values stand for at once,
// with the zero backpropagator its body's way out makes.
void install_prelude_rule(Lambda* lam, Lambda* r);
void install_list_ref_bp(Lambda* bp);
// dot's likewise: at the first level, the products and their sum at once, with one
// backpropagator (Interp::dot_bp, whose native form install_dot_bp gives).
void install_dot_bp(Lambda* bp);
// distance's likewise: v-, dot and sqrt at once (Interp::distance_bp, install_distance_bp).
void install_distance_bp(Lambda* bp);
// v+'s and v-'s likewise: map2 of + or -'s reverse rule applied to each pair of elements at once,
// with one backpropagator (Interp::vplus_bp / vminus_bp, named `name`, or null when its free
// variables are not the native form's).
Lambda* install_v2_bp(Lambda* bp, const char* name);

// ---- constants in reverse-transformed code ----
// A reverse real made from a constant of the code (the reverse transform's φ of a constant), or
// computed at the first level by a primitive from such reals only: it depends on no input, so
// the primitives record nothing for it (their backpropagator is the zero one, kConstRealView /
// kConstPairView). Otherwise it is the plain (reverse r) it prints as.
constexpr uint32_t kConstLeafAux = 0xFFFFFFFFu;
Value const_leaf(double r);
// Constant leaves of the whole numbers kSmallLeafMin <= i < kSmallLeafMax are one each for the
// process (a leaf is never changed, and nothing tells two equal ones apart): short loops' counters
// and index arithmetic (W6's (+ (* 2 j) i) a weight) make no object. (Few: a saving once a run,
// which tests/cost.sh's allocation per operation at the margin, from n = 100 on, does not see.)
// small_leaves() is the table native code reads, by i - kSmallLeafMin (0 until made);
// small_leaf(i) the leaf, made if needed.
constexpr int kSmallLeafMin = -16, kSmallLeafMax = 64;
const uint64_t* small_leaves();
Value small_leaf(int i);
inline bool is_const_leaf(Value v) { return v.is_obj() && v.as_obj()->kind == Kind::Reverse && v.as_obj()->aux == kConstLeafAux; }
// For the native tier, which makes them inline: the node (reverse y) of a binary arithmetic
// primitive applied to x1, x2 at the first level (its backpropagator is its kViewBpNode view)
// holds the primitive (aux = its id + 1) and rev_node_args(p) of its arguments (0 for + and -,
// whose derivatives are constant: a Tagged of 16 bytes; 1: a RevNode of 24 without x2; 2: a
// RevNode); and whether a rule lambda computes its forward phase that way (rev_binary_s2).
int rev_node_args(Prim* p);
// The backpropagator of every node of + (or -): the view of one node made for the primitive
// (native.cpp); unbound when there is none.
Value shared_bp_view(Prim* p);
// The backpropagator of a binary primitive applied to two constant leaves (kConstPairView).
Value const_pair_view();
bool is_rev_binary_rule(Lambda* rule);
// The forward phases (Lambda::native_split1) of car's and cdr's reverse rules at the first level,
// which the native tier inlines for a pair and for a view of *j of one.
using Split1 = bool (*)(Closure*, Value, Value*);
Split1 rev_car_split();
Split1 rev_cdr_split();
// The forward phase of a predicate's or a one-argument comparison's reverse rule (its
// backpropagator the view kViewBpConst of the argument), which the native tier inlines for
// zero?, positive? and negative? of a reverse real.
Split1 rev_const_split();
// The forward phase of a comparison's reverse rule on two arguments (rev_compare_s2: the zero
// backpropagator for two plain reverse reals), which the native tier inlines.
using Split2 = bool (*)(Closure*, Value, Value, Value*);
Split2 rev_compare_split2();
// The forward phase of a unary arithmetic primitive's reverse rule (rev_unary_s: a node holding
// x, or for a constant leaf a constant leaf and the zero backpropagator const_real_view()).
Split1 rev_unary_split();
// The native2 form of a binary arithmetic primitive's forward rule at the first level (two
// bundles of reals), which the native tier inlines for +, -, * and /.
using Native2 = Value (*)(Closure*, Value, Value);
Native2 fwd_binary_form();
// The C library's function a unary arithmetic primitive computes (sqrt, abs, exp, log, sin, cos,
// tan, tanh), which native code calls on an unboxed real, counting the primitive itself; null
// for any other primitive.
using UnaryFn = double (*)(double);
UnaryFn unary_arith_fn(Prim* p);
// For sin and cos: y = (p x), and *d = its derivative at x, from one sincos call (the bits sin
// and cos give); null for any other primitive. A reverse node of sin or cos holds d as its x2.
using UnaryDFn = double (*)(double, double*);
UnaryDFn unary_with_derivative_fn(Prim* p);
// The native1 form of a unary arithmetic primitive's forward rule (a bundle of reals), which
// native code calls directly.
using Native1 = Value (*)(Closure*, Value);
Native1 fwd_unary_form();
Value const_real_view();
// The zero backpropagator of null? or pair? (any predicate) applied to () (rev_const_s).
Value const_nil_view();
// x̄ = ȳ f'(x), boxed, from the node of a unary primitive f (its backpropagator's work, metered
// as back_node meters it), or 0 for the node of another primitive. Allocates nothing.
uint64_t unary_node_bar(const RevNode* n, double y);

// ---- views of backpropagators (native.cpp; Value::is_view) ----
// The backpropagator of a builtin primitive applied at the first level of transformation, made
// without allocating: a view of the RevNode of its result, of the pair car or cdr took apart, or
// of the argument of a comparison or a predicate (whose sensitivities are zero). Only backpropagator
// calls (back_call) and chains see them; anything else that meets one gets the closure of the
// primitive's backpropagator lambda it stands for.
// Data views stand for *j of data at the first level, made lazily without allocating (paper, end
// of §4: J← is lazy): kViewJ on a pair P is (*j P), whose parts are views again; kViewJCar /
// kViewJCdr on P are (*j (car P)) / (*j (cdr P)) for a part that is not a pair (a real, mostly).
// The backpropagators of car, cdr and constant-sensitivity primitives applied to them have views
// of their own (the ...J / ...JCar tags), pointing at P.
enum ViewTag : uint64_t {
  kViewBpNode = 1, kViewBpCar = 2, kViewBpCdr = 3, kViewBpConst = 4,
  kViewJ = 5, kViewJCar = 6, kViewJCdr = 7,
  kViewBpCarJ = 8, kViewBpCdrJ = 9, kViewBpConstJ = 10, kViewBpConstJCar = 11, kViewBpConstJCdr = 12,
  kViewZero = 13,  // (zero P) of a pair P, lazily (what a LazyZero of a pair is, without allocating)
  kViewRZero = 14,  // (%rzero P) of a pair P: the zero of (*j-inverse P), lazily (a LazyZero with one strip)
  kViewBpFwd = 15,  // the backpropagator of +, - or *'s forward rule, reverse-transformed (native.cpp)
};
inline uint64_t view_tag(Value v) { return v.bits & 15; }
inline Obj* view_obj(Value v) { return reinterpret_cast<Obj*>(v.bits & ~uint64_t(15)); }
inline Value view_of(Value obj, ViewTag tag) { return Value(obj.bits | tag, 0); }
inline bool is_j_view(Value v) {
  return v.is_view() && (v.bits >> 48) == 0 && view_tag(v) >= kViewJ && view_tag(v) <= kViewJCdr;
}
// (*j P) of a pair P, seen without making it.
inline bool is_j_pair_view(Value v) { return is_j_view(v) && view_tag(v) == kViewJ; }
// A zero view of either kind: a zero, shaped as a pair.
inline bool is_zero_view(Value v) {
  return v.is_view() && (v.bits >> 48) == 0 && (view_tag(v) == kViewZero || view_tag(v) == kViewRZero);
}
// The reverse tags a zero view strips from its pair's parts (lazy_zero's `strip`): 0 or 1.
inline int zero_view_strip(Value v) { return view_tag(v) == kViewRZero; }
inline bool is_data_view(Value v) { return is_j_view(v) || is_zero_view(v); }
// (*j x) for a part x of a pair P (cdr_side: x = (cdr P)), at the first level, lazily.
Value j_part(Pair* p, bool cdr_side);
// (car z) or (cdr z) of a zero z shaped as a pair (a zero view, or a lazy zero of a pair), as
// the part of the pair force(z) would make, without making it: false for any other z.
bool zero_part(Value z, bool cdr_side, Value* out);
// The part of a pair that a kViewJCar / kViewJCdr view stands for (*j of it).
inline Value j_view_part(Value v) {
  Pair* p = static_cast<Pair*>(view_obj(v));
  return view_tag(v) == kViewJCar ? p->car : p->cdr;
}
// The real under a reverse real at the first level: an object of kind Reverse holding a real (a
// tagged real, a primitive's record), or a view of *j of a real in a data pair; false otherwise.
inline bool plain_reverse(Value v, double& x) {
  Value r;
  if (is_j_view(v) && view_tag(v) != kViewJ) r = j_view_part(v);  // (*j r) of a real r in a pair
  else if (is(v, Kind::Reverse)) r = static_cast<Tagged*>(v.as_obj())->v;
  else return false;
  if (!r.is_real()) return false;
  x = r.as_real();
  return true;
}
// The closure a view stands for (v itself when it is not a view).
Value materialize_view(Value v);
inline Value unview(Value v) { return v.is_view() ? materialize_view(v) : v; }
// A view's backpropagator applied to ȳ: (f̄ . x̄) into out, or with `three` (f̄, car x̄, cdr x̄);
// false when ȳ is outside the fast case.
bool back_view(Value bp, Value y, Value* out, bool three = false);
// The two parts of a pair sensitivity into out[0], out[1] (the placeholder zero gives two).
void split_sensitivity(Value s, Value* out);
// The error of a sensitivity that is not a pair where its value is one (a user's, that does not conform).
[[noreturn]] void sensitivity_not_pair(Value s, Pos pos = Pos());

}  // namespace vlad
