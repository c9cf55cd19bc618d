// ad.hpp — the AD machinery on values (tags, zero, plus, bundle, *j and their inverses) and the
// run-time transforms of lambda bodies (forward: paper §2 lifted to closures; reverse: paper §4).
#pragma once
#include "../eval/ast.hpp"

namespace vlad {

struct Prim;

// ---- shared machinery (tags.cpp) ----
Value zero_of(Value v);               // (zero v), lazy
Value rzero(Value v);                 // zero of (*j-inverse v), lazy: what backpropagators start from
Value materialize_zero(Value z);      // one level of a lazy zero, e.g. a pair of lazy zeros
// One level of any lazy value (a zero, *j of a pair), repeated until the value is not lazy.
Value force(Value v);
inline bool is_lazy(Value v) {
  return v.is_obj() && (v.as_obj()->kind == Kind::Zero || v.as_obj()->kind == Kind::LazyJ);
}
Value plus(Value a, Value b);         // ⊕ (paper §4)
Value strip_tags(Value v);            // the primal real under any number of tags (comparisons)
Value env_ref(Value closure, int index, Lambda* lam);

// ---- forward mode ----
Value bundle(Value primal, Value tangent_perturbation);
Value primal(Value v);
Value tangent(Value v);  // a perturbation
Value perturb(Value v);
Value unperturb(Value v);
Value j_star(Value v);  // (bundle v (perturb (zero v)))

// ---- reverse mode ----
Value star_j(Value v);          // J← (paper §4)
Value star_j_inverse(Value v);  // J←⁻¹
Value sensitize(Value v);
Value unsensitize(Value v);

// Applies transform 'F' (j*) or 'R' (*j) to a value.
Value transform_value(Value v, char t);

// The backpropagator of a call of the reverse-transformed closure f on x whose value holds no real:
// (f̄ . x̄) = (zero of f's primal . zero of x's primal) whatever ȳ (a raw backpropagator).
Value zero_backpropagator(Value f, Value x);

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

// ---- views of backpropagators (native.cpp; Value::is_view) ----
// The backpropagator of a builtin primitive applied at the first level of transformation, made
// without allocating: a view of the RevNode of its result, of the pair car or cdr took apart, or
// of the argument of a comparison or a predicate (whose sensitivities are zero). Only backpropagator
// calls (back_call) and chains see them; anything else that meets one gets the closure of the
// primitive's backpropagator lambda it stands for.
enum ViewTag : uint64_t { kViewBpNode = 1, kViewBpCar = 2, kViewBpCdr = 3, kViewBpConst = 4 };
// The closure a view stands for (v itself when it is not a view).
Value materialize_view(Value v);
inline Value unview(Value v) { return v.is_view() ? materialize_view(v) : v; }
// A view's backpropagator applied to ȳ: (f̄ . x̄) into out, or with `three` (f̄, car x̄, cdr x̄);
// false when ȳ is outside the fast case.
bool back_view(Value bp, Value y, Value* out, bool three = false);
// The two parts of a pair sensitivity into out[0], out[1] (the placeholder zero gives two).
void split_sensitivity(Value s, Value* out);

}  // namespace vlad
