// tags.cpp — zero (0), plus (⊕), bundle/primal/tangent, *j (J←) and *j-inverse (J←⁻¹) on values.
// Transformed pairs are pairs of transformed values (paper §4, the pair notation (v1 ,x v2)), so
// only reals and other tags carry explicit tags; closures carry theirs on their lambda.
// Zeros are lazy (paper, end of §4): a LazyZero stands for the zero of a value until inspected.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "../eval/interp.hpp"
#include "../prims/prims.hpp"
#include "ad.hpp"

namespace vlad {

namespace {

// Structure sharing is preserved (paper, end of §4): while one operation walks a structure, its
// results for the pairs it has already met are reused, so a DAG of n pairs costs O(n) even when
// it unfolds to 2^n leaves. Shallow structures (the common tuples) skip the table.
// The table: open addressing over (a, b) keys, made when a walk first gets deep and kept from
// walk to walk: an entry counts only in the walk (epoch) that made it, so ending a walk is one
// increment, not a clearing (a forward derivative of a list of 1,000 reals spent 12% of its time
// clearing and regrowing a table freed after each walk). It is malloc's memory, which the
// collector does not scan, so the keys and results of the walk running are also kept in `keep`,
// memory it scans: a key is not always part of a structure that outlives the walk (one level of
// a lazy zero is made afresh each time it is inspected), and once collected its address could be
// reused, within the walk, by another pair, which took its stale result (the printer's memo did
// so). `keep` is cleared when the walk ends, so it pins nothing of another walk's; an entry of
// another walk is never read. Tables above kKeep entries (32 MiB)
// are freed when their walk ends; all of them after each evaluation (release_ad_tables). (Freed
// after each walk above 2 MiB, a table was fresh memory for the next walk: the kernel's page
// faults for it were three quarters of a process's faults in reverse family 5, whose two sums
// of a DAG of 10^5 pairs each grew a table to 8 MiB.)
struct PairMemo {
  struct Entry {
    Value a, b, r;
    uint64_t epoch;  // the walk that made it (0: none)
  };
  static constexpr size_t kKeep = 1u << 20;
  int depth = 0;
  Entry* table = nullptr;
  size_t mask = 0, used = 0;
  uint64_t epoch = 1;

  static size_t hash(uint64_t a, uint64_t b) { return (size_t)((a * 31 + b) * 0x9E3779B97F4A7C15ull >> 20); }
  Entry* slot(uint64_t a, uint64_t b) {
    for (size_t i = hash(a, b) & mask;; i = (i + 1) & mask) {
      Entry* e = &table[i];
      if (e->epoch != epoch || (e->a.bits == a && e->b.bits == b)) return e;
    }
  }
  bool live(const Entry* e) const { return e->epoch == epoch; }
  void make(size_t cap) {
    table = static_cast<Entry*>(calloc(cap, sizeof(Entry)));
    if (!table) throw memory_error();
    mask = cap - 1;
    used = 0;
    // A large table is fresh memory (calloc maps it, zero pages), which the probes would first
    // read (a fault mapping the shared zero page) and then write (a second fault, copying it).
    if (cap * sizeof(Entry) >= (1u << 20)) populate_pages(table, cap * sizeof(Entry));
  }
  // The keys and results of this walk's entries, in memory the collector scans (gc_alloc_uncollectable).
  Value* keep = nullptr;
  size_t kept = 0, keep_cap = 0;
  static constexpr size_t kKeepValues = 1u << 16;  // kept from walk to walk up to this (512 KiB)

  void put(Value a, Value b, Value r) {
    if (2 * (used + 1) > mask + 1) {  // at most half full
      Entry* old = table;
      size_t n = mask + 1;
      make(2 * n);
      for (size_t i = 0; i < n; i++)
        if (old[i].epoch == epoch) put(old[i].a, old[i].b, old[i].r);
      free(old);
    }
    Entry* e = slot(a.bits, b.bits);
    if (!live(e)) used++;
    *e = Entry{a, b, r, epoch};
  }
  void insert(Value a, Value b, Value r) {
    if (kept + 3 > keep_cap) {
      size_t cap = keep_cap ? 2 * keep_cap : 1024;
      Value* k = static_cast<Value*>(gc_alloc_uncollectable(cap * sizeof(Value)));  // (zeroed)
      if (keep) {
        memcpy(k, keep, kept * sizeof(Value));
        gc_free_uncollectable(keep);
      }
      keep = k;
      keep_cap = cap;
    }
    keep[kept++] = a;
    keep[kept++] = b;
    keep[kept++] = r;
    put(a, b, r);
  }
  void release(bool all = false) {
    if (keep) {
      memset(static_cast<void*>(keep), 0, kept * sizeof(Value));  // (pins nothing now)
      kept = 0;
      if (all || keep_cap > kKeepValues) {
        gc_free_uncollectable(keep);
        keep = nullptr;
        keep_cap = 0;
      }
    }
    if (!table) return;
    epoch++;
    used = 0;
    if (mask + 1 <= kKeep && !all) return;
    free(table);
    table = nullptr;
  }
};

template <class F>
Value memo_pair(PairMemo& m, Value a, Value b, F make) {
  if (m.depth < 8) {
    m.depth++;
    Value r;
    try {
      r = make();
    } catch (...) {
      if (--m.depth == 0) m.release();
      throw;
    }
    if (--m.depth == 0) m.release();
    return r;
  }
  if (!m.table) m.make(64);
  PairMemo::Entry* e = m.slot(a.bits, b.bits);
  if (m.live(e)) return e->r;
  m.depth++;
  Value r;
  try {
    r = make();
  } catch (...) {
    m.depth--;
    throw;
  }
  m.depth--;
  m.insert(a, b, r);
  return r;
}

thread_local PairMemo plus_memo, bundle_memo, part_memo, star_j_inverse_memo;
// The steps the walks along lists (spine_walk, below) are to record in their memos, one list per
// memo (and zero_forward_part's levels), in memory the collector scans: a step's pair may be one
// forced from a temporary lazy value, held by nothing else until its result is recorded.
using SpineVector = std::vector<Value, traceable_allocator<Value>>;
thread_local SpineVector* plus_spine = nullptr;
thread_local SpineVector* bundle_spine = nullptr;
thread_local SpineVector* part_spine = nullptr;
thread_local SpineVector* star_j_inverse_spine = nullptr;
thread_local SpineVector* zero_part_spine = nullptr;

// Pure operations on closures with an environment, the last few results made on this thread: j*
// (bundle_raw) and the forward versions of the AD primitives (native.cpp fwd_ad). A program
// that takes derivatives of one closure again and again — an inner `gradient-F`, `gradient-R` or
// `derivative-F` of a closure over data, once an integration step — bundled or transformed its
// whole environment each time (particle FF: 55 K closures, 6% of the instructions). Each result
// is a pure function of the closure's lambda and environment, and a program cannot tell two
// equal results apart (there is no eq?), so the one made before is reused. Keys and results are
// held in memory the collector scans, so a key's address cannot be reused while it is here;
// emptied after each evaluation (release_ad_tables).
struct ClosureCache {
  static constexpr size_t kSize = 16;
  ClosureMemo* e = nullptr;
  ClosureMemo* slot(const void* op, Value c) {
    if (!e) {
      e = static_cast<ClosureMemo*>(gc_alloc_uncollectable(sizeof(ClosureMemo) * kSize));
      for (size_t i = 0; i < kSize; i++) e[i].key = Value(0, 0);
    }
    return &e[((c.bits >> 4) ^ (uintptr_t)op) * 0x9E3779B97F4A7C15ull >> 60];
  }
};
thread_local ClosureCache closure_cache;
// The op of star_j_inverse's entries in the cache (a closure's *j-inverse).
const char kStarJInverseOp = 0;
// Whether p is the *j-inverse of the reverse closure s that the cache holds: then the lazy zero
// of s stripped once is the zero of p, without making either.
inline bool star_j_inverse_of(Value s, Value p) {
  ClosureMemo* m = closure_cache.e ? closure_cache.slot(&kStarJInverseOp, s) : nullptr;
  return m && m->key == s && m->op == &kStarJInverseOp && m->r == p;
}

[[noreturn]] void ad_error(const char* who, const std::string& what, Value v) {
  throw Error(std::string(who) + ": " + what + ", got " + write_brief(v));
}

inline Closure* as_closure(Value v) { return static_cast<Closure*>(v.as_obj()); }
inline Value tagged_value(Value v) { return static_cast<Tagged*>(v.as_obj())->v; }

bool is_atom(Value v) {
  return v.is_nil() || v.is_bool() || is(v, Kind::String);
}

// Whether lam has real constants, which act as free variables when its closures are zeroed,
// added or bundled (constant_converted).
bool has_constants(Lambda* lam) {
  Lambda* c = constant_converted(lam);
  return c && c != lam;
}

// (A closure with an empty environment but real constants is not: its constants are free
// variables.)
bool inert(Value v) {
  return is_atom(v) || is(v, Kind::Prim) ||
         (is(v, Kind::Closure) && static_cast<Closure*>(v.as_obj())->aux == 0 &&
          !has_constants(static_cast<Closure*>(v.as_obj())->lambda));
}

// Two values without reals that are different values of one kind: two booleans, two strings or
// two primitives that differ. They do not conform (the paper: a primitive conforms to itself);
// any other two such values sum to either (the sensitivity of a procedure argument can be a
// primitive at one level and its transformed version at another, () stands for any inert zero).
// The primitive a procedure is at some level of transformation: itself, or the primitive whose
// rule (forward or reverse, transformed any number of times) a closure's lambda is; else null.
Prim* primitive_of(Value v) {
  if (is(v, Kind::Prim)) return static_cast<Prim*>(v.as_obj());
  if (!is(v, Kind::Closure)) return nullptr;
  Lambda* lam = static_cast<Closure*>(v.as_obj())->lambda;
  while (lam->transform && lam->source) lam = lam->source;
  return lam->rule_of;
}

bool different_atoms(Value a, Value b) {
  if (a.is_bool() && b.is_bool()) return a != b;
  // (two primitives, or their versions at any levels: sin and cos's forward rule do not conform
  // under a derivative as sin and cos do not in the primal)
  Prim* pa = primitive_of(a);
  Prim* pb = pa ? primitive_of(b) : nullptr;
  if (pa && pb) return pa != pb;
  if (is(a, Kind::String) && is(b, Kind::String)) return !string_equal(a, b);
  return false;
}

// Whether two closures are one procedure whose lambdas differ: a transform of a raw
// backpropagator and the transform of its tagged version (the raw variant, which a transformed
// BackCall calls), their environments the same free variables in the same order. Reverse over
// reverse sums their sensitivities (plus_closures); reverse over forward bundles them (bundle_raw).
bool raw_variants(const Closure* x, const Closure* y) {
  return (x->lambda->raw_variant == y->lambda || y->lambda->raw_variant == x->lambda) && x->aux == y->aux;
}

}  // namespace

// Whether a, a procedure, can be the sensitivity or the tangent of the procedure b (vjp's ȳ, a
// direction): two closures conform as plus and bundle take them (the same lambda, or lambdas the
// same up to their constants' values), and what their environments hold conforms too — a real
// for a real, a pair for a pair, a procedure so for a procedure; two primitives are the same
// one. Anything else — a backpropagator, lazy or tagged values (nested levels), a primitive
// against a closure without reals (the sensitivity of a procedure argument can be a primitive at
// one level and its transformed version at another), atoms — is left to where it is used; so is
// what lies past a budget of nodes.
namespace {
bool procs_conform(Value a, Value b, int& budget);

bool slot_conforms(Value s, Value y, int& budget) {
  while (--budget > 0) {
    if (s.is_view() || y.is_view() || is_lazy(s) || is_lazy(y)) return true;
    if (y.is_real()) return strip_tags(s).is_real();
    if (!y.is_obj()) return true;
    switch (kind_of(y)) {
      case Kind::Pair:
        if (!is(s, Kind::Pair)) return false;
        if (!slot_conforms(car(s), car(y), budget)) return false;
        s = cdr(s);
        y = cdr(y);
        continue;
      case Kind::Closure:
      case Kind::Prim:
        return (is(s, Kind::Closure) || is(s, Kind::Prim)) && procs_conform(s, y, budget);
      default: return true;
    }
  }
  return true;
}

bool procs_conform(Value a, Value b, int& budget) {
  if (a.is_view() || b.is_view()) return true;
  a = is_lazy(a) ? force(a) : a;
  b = is_lazy(b) ? force(b) : b;
  if (is(a, Kind::Prim) && is(b, Kind::Prim)) return a == b;
  // (a primitive and a closure: only a closure without reals in it, whose zero it is)
  if (is(a, Kind::Prim) && is(b, Kind::Closure)) return inert(b);
  if (is(a, Kind::Closure) && is(b, Kind::Prim)) return inert(a);
  if (!is(a, Kind::Closure) || !is(b, Kind::Closure)) return true;
  const Closure* x = as_closure(a);
  const Closure* y = as_closure(b);
  if ((x->lambda == y->lambda || raw_variants(x, y)) && x->aux == y->aux) {
    for (uint32_t i = 0; i < x->aux; i++)
      if (!slot_conforms(x->env[i], y->env[i], budget)) return false;
    return true;
  }
  Lambda* la;
  gc_vector<Value> ex, ey;
  if (!closures_conform(a, b, &la, &ex, &ey)) return false;
  // (a seed is read slot by slot in the value's lambda's order: a closure of another lambda of
  // the same code whose free variables come in another order — its parameters in another order —
  // would be read wrongly; plus takes it, by name)
  Lambda* lb = constant_converted(y->lambda);
  if (la != lb) {
    if (la->free.size() != lb->free.size()) return false;
    for (size_t i = 0; i < la->free.size(); i++)
      if (strcmp(la->free[i]->name, lb->free[i]->name)) return false;
  }
  for (size_t i = 0; i < ex.size(); i++)
    if (!slot_conforms(ex[i], ey[i], budget)) return false;
  return true;
}
}  // namespace

bool procedures_conform(Value a, Value b) {
  int budget = 100000;
  return procs_conform(a, b, budget);
}

namespace {

Value lazy_zero(Value v, int strip);

// A closure of lam with its constants as free variables (lam->cc): the environment values part(i)
// for lam's n free variables, then the zeros of its constants (a zero, or the constants' tangents
// or sensitivities, which the transforms leave zero).
template <class F>
Value over_constants(Lambda* lam, int n, F part) {
  const gc_vector<Value>& k = *lam->cc_consts;
  Value r = make_closure(lam->cc, nullptr, n + (int)k.size());
  for (int i = 0; i < n; i++) as_closure(r)->env[i] = part(i);
  for (size_t i = 0; i < k.size(); i++) as_closure(r)->env[n + i] = lazy_zero(k[i], 0);
  return r;
}

// The lambda a closure had before `n` reverse transforms, or null when one of them was the
// reverse version of a primitive (whose untransformed form is that primitive).
Lambda* strip_lambda(Lambda* lam, int n, Prim** prim) {
  for (; n > 0; n--) {
    if (lam->rule_of && lam->rule_kind == 'R') {
      *prim = lam->rule_of;
      return nullptr;
    }
    if (lam->transform != 'R') return nullptr;
    lam = lam->source;
  }
  return lam;
}

// (reverse^k 0) for k = 1 .. kZeroTowers: the zero of a real under k reverse tags, made once and
// shared (values are never changed, and nothing tells two equal tagged reals apart). Nested
// reverse mode takes the zeros of such reals all the time (W4's six levels: 2,300 a pass).
constexpr int kZeroTowers = 8;
const Value* zero_towers() {
  static const Value* towers = [] {
    Value* t = static_cast<Value*>(gc_alloc_uncollectable(sizeof(Value) * (kZeroTowers + 1)));
    t[0] = Value::real(0);
    for (int k = 1; k <= kZeroTowers; k++) t[k] = make_tagged(Kind::Reverse, t[k - 1]);
    return t;
  }();
  return towers;
}

// (reverse z) for z a zero just made: a shared tower when z is one (or 0).
Value reverse_of_zero(Value z) {
  const Value* t = zero_towers();
  for (int k = 0; k < kZeroTowers; k++)
    if (z.bits == t[k].bits) return t[k + 1];
  return make_tagged(Kind::Reverse, z);
}

}  // namespace

Value reverse_zero(int k) { return zero_towers()[k]; }

namespace {

Value zero_shallow(Value v, int strip);

// The zero of (J⁻¹)^strip of a forward value v (a bundle, or the forward transform of a closure):
// what the forward version of %rzero makes of it, the zeros of its primal and tangent bundled
// again. (A lazy %rzero of a structure of forward values, forward over reverse, reaches them.)
Value forward_rzero(Value v, int strip) {
  Value t = lazy_zero(tangent_untagged(v), strip);
  return bundle_untagged(lazy_zero(primal(v), strip), t);
}

// For v a real under d >= strip reverse tags (nested reverse mode's reals): the shared zero
// tower of d - strip tags, found in one walk down; false for anything else.
static bool stripped_tower(Value v, int strip, Value* out) {
  int d = 0;
  Value u = v;
  do {
    u = tagged_value(u);
    d++;
  } while (is(u, Kind::Reverse));
  if (!u.is_real() || d < strip || d - strip > kZeroTowers) return false;
  *out = zero_towers()[d - strip];
  return true;
}

// The zero of (J⁻¹)^strip v (strip > 0) where finding it cannot fail, or a lazy zero, which
// raises *j-inverse's error only if it is looked at: for a real under at least `strip` reverse
// tags, the shared tower of what is left (what the lazy zero would give when made); for (), #t
// and #f, themselves; for a pair under one strip, its zero view (kViewRZero); for anything else,
// the lazy zero. (Reverse over reverse takes such zeros at every backward step: a lazy zero each
// was 2.3% of particle RR's objects.)
static Value stripped_zero(Value v, int strip) {
  if (is(v, Kind::Reverse)) {
    Value z;
    if (stripped_tower(v, strip, &z)) return z;
  } else if (v.is_nil() || v.is_bool()) {
    return v;  // its own zero, stripped or not (zero_shallow)
  } else if (strip == 1 && is_pair(v)) {
    return view_of(v, kViewRZero);  // the same lazy zero, as a view
  } else if (is_j_pair_view(v)) {
    // (*j P) of a pair P, a view: the zero of (J⁻¹)^(strip - 1) P, as lazy_zero gives it (under
    // one strip, P's zero view: the same value on every way into a shared structure, where a lazy
    // zero made here was a new key for bundle_raw's memo each time, and a DAG was bundled once
    // per path, 2^n pairs for n: reverse over forward of (plus x (zero x))). (Only for a pair:
    // the zero of *j of a real stays a lazy zero, which a backpropagator given it skips, where
    // lazy_zero would give 0, which it would run on.)
    return lazy_zero(v, strip);
  }
  return make_lazy_zero(v, strip);
}

// Zero of (J⁻¹)^strip v, built one level deep: reals (tagged or not) completely, pairs and
// closures as structures of lazy zeros.
Value zero_shallow(Value v, int strip) {
  v = unview(v);
  if (v.is_real()) {
    if (strip > 0) ad_error("*j-inverse", "expected a reverse value", v);
    return Value::real(0);
  }
  if (!v.is_obj() || is(v, Kind::String)) return v;
  switch (kind_of(v)) {
    case Kind::Pair: {
      if (strip == 0) return cons(lazy_zero(car(v), 0), lazy_zero(cdr(v), 0));
      Value a = stripped_zero(car(v), strip);  // (the car first, as forward_part)
      return cons(a, stripped_zero(cdr(v), strip));
    }
    case Kind::Reverse: {
      // a real under reverse tags: its shared tower at once (the recursion below gives the same,
      // a level a call)
      Value z;
      if (stripped_tower(v, strip, &z)) return z;
      if (strip > 0) return zero_shallow(tagged_value(v), strip - 1);
      return reverse_of_zero(zero_shallow(tagged_value(v), 0));
    }
    case Kind::Bundle: {
      if (strip > 0) return forward_rzero(v, strip);
      Bundle* b = static_cast<Bundle*>(v.as_obj());
      return make_bundle(zero_shallow(b->primal, 0), zero_shallow(b->tangent, 0));
    }
    case Kind::Perturbation:
    case Kind::Sensitivity:
      if (strip > 0) ad_error("*j-inverse", "expected a reverse value", v);
      return make_tagged(kind_of(v), zero_shallow(tagged_value(v), 0));
    case Kind::Zero: {
      LazyZero* z = static_cast<LazyZero*>(v.as_obj());
      return zero_shallow(z->src, (int)z->aux + strip);
    }
    case Kind::LazyJ:
    case Kind::OneHot:
    case Kind::HotSum: return zero_shallow(force(v), strip);
    case Kind::Prim: return v;
    case Kind::Closure: {
      Closure* c = as_closure(v);
      if (strip > 0 && c->lambda->transform == 'F') return forward_rzero(v, strip);
      Prim* prim = nullptr;
      Lambda* lam = strip_lambda(c->lambda, strip, &prim);
      if (prim) return Value::obj(prim);
      if (!lam) ad_error("*j-inverse", "expected a reverse value", v);
      int n = (int)c->aux;
      if (has_constants(lam))  // its constants are free variables: zero too
        return over_constants(lam, n, [&](int i) {
          return strip ? stripped_zero(c->env[i], strip) : make_lazy_zero(c->env[i], 0);
        });
      if (n == 0) return closure_of(lam, nullptr);
      Value r = make_closure(lam, nullptr, n);
      for (int i = 0; i < n; i++)
        as_closure(r)->env[i] = strip ? stripped_zero(c->env[i], strip) : make_lazy_zero(c->env[i], 0);
      return r;
    }
    case Kind::String: return v;
  }
  return v;
}

// A lazy zero, or the zero itself when it is as cheap to build as to defer.
Value lazy_zero(Value v, int strip) {
  if (strip > 0 && is_j_view(v)) {  // the zero of (*j-inverse (*j x)) is the zero of x
    Pair* p = static_cast<Pair*>(view_obj(v));
    return lazy_zero(view_tag(v) == kViewJ ? Value::obj(p) : j_view_part(v), strip - 1);
  }
  if (is_zero_view(v) && strip == 0) return v;
  // (*j P) of a pair P, still a view: its zero deferred too (built here, zero_shallow would
  // unview it, and the lazy zeros of its parts are views again: a walk of the whole structure,
  // O(n) for each (zero xs) of an n-list read inside a transformed body)
  if (is_j_pair_view(v)) return make_lazy_zero(v, strip);
  if (v.is_real() || !v.is_obj()) return zero_shallow(v, strip);
  switch (kind_of(v)) {
    case Kind::Pair:
      if (strip <= 1) return view_of(v, strip == 0 ? kViewZero : kViewRZero);
      return make_lazy_zero(v, strip);
    case Kind::Closure: {
      // An empty environment: the zero is the stripped lambda's one empty closure (or the
      // primitive), no dearer to give than a lazy zero.
      Closure* c = as_closure(v);
      if (c->aux == 0) {
        Prim* prim = nullptr;
        Lambda* lam = strip_lambda(c->lambda, strip, &prim);
        if (prim) return Value::obj(prim);
        if (lam && !has_constants(lam)) return closure_of(lam, nullptr);
        // the lambda's one empty closure: its zero made once (a lazy zero is never changed)
        if (strip == 0 && v == c->lambda->empty_closure) {
          if (c->lambda->empty_zero.is_unbound()) c->lambda->empty_zero = make_lazy_zero(v, 0);
          return c->lambda->empty_zero;
        }
      }
      return make_lazy_zero(v, strip);
    }
    case Kind::LazyJ:
    case Kind::OneHot:
    case Kind::HotSum: return make_lazy_zero(v, strip);
    case Kind::Zero: {
      LazyZero* z = static_cast<LazyZero*>(v.as_obj());
      return make_lazy_zero(z->src, (int)z->aux + strip);
    }
    default: return zero_shallow(v, strip);
  }
}

}  // namespace

Value zero_of(Value v) { return lazy_zero(v, 0); }
Value rzero(Value v) { return lazy_zero(v, 1); }

Value materialize_zero(Value z) {
  LazyZero* lz = static_cast<LazyZero*>(z.as_obj());
  return zero_shallow(lz->src, (int)lz->aux);
}

namespace {

Value star_j_n(Value x, int n) {
  for (int k = 0; k < n; k++) x = star_j(x);
  return x;
}

// One level of *j^n of a pair: the pair of the *j^n of its parts (themselves lazy when pairs).
// Built once per LazyJ; a pair whose car and cdr are one value keeps them one value.
Value build_lazy_j(Value v) {
  LazyJ* z = static_cast<LazyJ*>(v.as_obj());
  if (!z->built.is_unbound()) return z->built;
  Value src = force(z->src);
  int n = (int)z->aux;
  if (!is_pair(src)) return z->built = star_j_n(src, n);
  Value a = star_j_n(car(src), n);
  Value d = cdr(src) == car(src) ? a : star_j_n(cdr(src), n);
  return z->built = cons(a, d);
}

// The element of a OneHot's list at data pair p (the i-th of the k before its y): a real's zero,
// or the zero of whatever is there (as bp_list_ref made them).
inline Value one_hot_zero(Pair* p) { return p->car.is_real() ? Value::real(0) : zero_of(p->car); }

inline bool is_hot(Value v) { return is(v, Kind::OneHot) || is(v, Kind::HotSum); }
constexpr uint32_t kHotLast = (1u << 24) - 1;  // HotSum's aux: the last element given
constexpr uint32_t kHotMaxLeaves = 255;         // (aux >> 24): OneHots under it, at most this
// The last element a OneHot or HotSum gives a value (the cells of its list before the zero of
// the rest), and the OneHots it is made of.
inline uint32_t hot_last(Value v) {
  Obj* o = v.as_obj();
  return o->kind == Kind::OneHot ? o->aux : o->aux & kHotLast;
}
inline uint32_t hot_leaves(Value v) {
  Obj* o = v.as_obj();
  return o->kind == Kind::OneHot ? 1 : o->aux >> 24;
}
// The data list (its first pair) under a OneHot or HotSum.
Pair* hot_src(Value v) {
  while (is(v, Kind::HotSum)) v = static_cast<HotSum*>(v.as_obj())->a;
  return static_cast<Pair*>(static_cast<OneHot*>(v.as_obj())->src.as_obj());
}
// Element i (data pair p the i-th of the list) of the list a OneHot or HotSum stands for, as the
// lists built and summed by plus_pairs give it: the sum of its parts' elements i, in order, where
// both have one; where one part's list has ended (its rest a zero, which plus_pairs gives the
// other's rest for), the other's; unbound past the last element any part gives.
Value hot_elem(Value v, uint32_t i, Pair* p) {
  if (is(v, Kind::OneHot)) {
    OneHot* h = static_cast<OneHot*>(v.as_obj());
    return i < h->aux ? one_hot_zero(p) : i == h->aux ? h->y : Value::unbound();
  }
  HotSum* s = static_cast<HotSum*>(v.as_obj());
  if (i > (s->aux & kHotLast)) return Value::unbound();
  Value ea = hot_elem(s->a, i, p), eb = hot_elem(s->b, i, p);
  if (ea.is_unbound()) return eb;
  if (eb.is_unbound()) return ea;
  return plus(ea, eb);
}

// When every element of h is a real (its OneHots' ys and the data's elements through its last
// are reals), those elements into e[0..last]: the same sums in doubles (plus of two reals is
// their sum; a NaN stays a NaN through later sums, and Value::real makes every NaN one), each
// HotSum's parts' lists summed where both have an element and the longer one's taken after.
bool hot_all_real(Value v) {
  if (is(v, Kind::OneHot)) return static_cast<OneHot*>(v.as_obj())->y.is_real();
  HotSum* s = static_cast<HotSum*>(v.as_obj());
  return hot_all_real(s->a) && hot_all_real(s->b);
}
void hot_eval(Value v, double* e, std::vector<std::vector<double>>& pool, size_t depth) {
  if (is(v, Kind::OneHot)) {
    OneHot* h = static_cast<OneHot*>(v.as_obj());
    for (uint32_t i = 0; i < h->aux; i++) e[i] = 0.0;
    e[h->aux] = h->y.as_real();
    return;
  }
  HotSum* s = static_cast<HotSum*>(v.as_obj());
  uint32_t ka = hot_last(s->a), kb = hot_last(s->b);
  hot_eval(s->a, e, pool, depth);
  if (is(s->b, Kind::OneHot)) {  // (its zeros and y added where a has elements, taken after)
    double y = static_cast<OneHot*>(s->b.as_obj())->y.as_real();
    uint32_t i = 0;
    for (; i < kb && i <= ka; i++) e[i] = e[i] + 0.0;  // (a -0 becomes +0, as plus made it)
    for (; i < kb; i++) e[i] = 0.0;
    e[kb] = kb <= ka ? e[kb] + y : y;
    return;
  }
  if (pool.size() <= depth) pool.resize(depth + 1);
  if (pool[depth].size() < (size_t)kb + 1) pool[depth].resize((size_t)kb + 1);
  double* t = pool[depth].data();  // (deeper levels may move pool's vectors, not their buffers)
  hot_eval(s->b, t, pool, depth + 1);
  uint32_t i = 0;
  for (; i <= kb && i <= ka; i++) e[i] = e[i] + t[i];
  for (; i <= kb; i++) e[i] = t[i];
}
bool hot_reals(Value h, Pair* p, std::vector<double>& e) {
  uint32_t last = hot_last(h);
  if (!hot_all_real(h)) return false;
  for (uint32_t i = 0; i <= last; i++, p = static_cast<Pair*>(p->cdr.as_obj()))
    if (!p->car.is_real()) return false;
  e.resize((size_t)last + 1);
  std::vector<std::vector<double>> pool;
  hot_eval(h, e.data(), pool, 0);
  return true;
}

// The cells of h's list from element i (at data pair p) on: through its last element, then the
// zero of the data's rest (the tail plus_pairs gives: all the parts' rests are that zero).
// (reals: h's elements as hot_reals gives them, or null)
Value hot_cells(Value h, uint32_t i, Pair* p, const std::vector<double>* reals = nullptr) {
  uint32_t last = hot_last(h);
  Value head = Value::nil();
  Pair* cell_last = nullptr;
  for (;; i++, p = static_cast<Pair*>(p->cdr.as_obj())) {
    Value cell = cons(reals ? Value::real((*reals)[i]) : hot_elem(h, i, p), Value::nil());
    if (cell_last) cell_last->cdr = cell;
    else head = cell;
    cell_last = static_cast<Pair*>(cell.as_obj());
    if (i == last) {
      cell_last->cdr = zero_of(p->cdr);
      return head;
    }
  }
}

Value build_hot(Value v) {
  Value& built = is(v, Kind::OneHot) ? static_cast<OneHot*>(v.as_obj())->built : static_cast<HotSum*>(v.as_obj())->built;
  if (built.is_unbound()) {
    Pair* p = hot_src(v);
    if (is(v, Kind::HotSum)) {
      std::vector<double> e;
      if (hot_reals(v, p, e)) return built = hot_cells(v, 0, p, &e);
    }
    built = hot_cells(v, 0, p);
  }
  return built;
}

}  // namespace

Value j_part(Pair* p, bool cdr_side) {
  Value x = cdr_side ? p->cdr : p->car;
  if (is_pair(x)) return view_of(x, kViewJ);
  if (x.is_nil() || x.is_bool()) return x;  // its own *j
  return view_of(Value::obj(p), cdr_side ? kViewJCdr : kViewJCar);
}

bool zero_part(Value z, bool cdr_side, Value* out) {
  Value src;
  int strip;
  if (is_zero_view(z)) {
    src = Value::obj(view_obj(z));
    strip = zero_view_strip(z);
  } else if (is(z, Kind::Zero)) {
    LazyZero* lz = static_cast<LazyZero*>(z.as_obj());
    src = lz->src;
    strip = (int)lz->aux;
  } else {
    return false;
  }
  if (!is_pair(src)) return false;
  // zero_shallow's pair of lazy zeros, one part of it
  Value x = cdr_side ? cdr(src) : car(src);
  *out = strip == 0 ? lazy_zero(x, 0) : stripped_zero(x, strip);
  return true;
}

Value force(Value v) {
  for (;;) {
    if (is_zero_view(v)) return zero_shallow(Value::obj(view_obj(v)), zero_view_strip(v));
    if (is_j_view(v)) {
      Pair* p = static_cast<Pair*>(view_obj(v));
      if (view_tag(v) == kViewJ) return cons(j_part(p, false), j_part(p, true));
      v = star_j(j_view_part(v));
      continue;
    }
    if (!v.is_obj()) return v;
    Kind k = kind_of(v);
    if (k == Kind::Zero) v = materialize_zero(v);
    else if (k == Kind::LazyJ) v = build_lazy_j(v);
    else if (k == Kind::OneHot || k == Kind::HotSum) v = build_hot(v);
    else return v;
  }
}

Value strip_tags(Value v) {
  for (;;) {
    if (is_zero_view(v)) return v;  // a pair
    if (is_j_view(v)) {
      if (view_tag(v) == kViewJ) return v;
      v = j_view_part(v);  // *j only adds a reverse tag
      continue;
    }
    if (!v.is_obj()) return v;
    switch (kind_of(v)) {
      case Kind::Bundle: v = static_cast<Bundle*>(v.as_obj())->primal; continue;
      case Kind::Reverse: v = tagged_value(v); continue;
      case Kind::Zero:
      case Kind::LazyJ:
      case Kind::OneHot:
      case Kind::HotSum: v = force(v); continue;
      default: return v;
    }
  }
}

void sensitivity_not_pair(Value s, Pos pos) {
  throw Error("a sensitivity and its value do not conform: the sensitivity of a pair is a pair, got " + write_brief(s), pos);
}

void split_sensitivity(Value s, Value* out) {
  if (s.is_zero_sens()) {
    out[0] = out[1] = s;
    return;
  }
  s = force(s);
  if (!is_pair(s)) sensitivity_not_pair(s);
  out[0] = car(s);
  out[1] = cdr(s);
}

// Slot `index` of a closure sensitivity. A zero view there (lazy_zero's zero of a pair, as
// zero_shallow and over_constants leave in a closure's zero) stays one: a sensitivity may be a
// zero view wherever it may be a lazy zero (primitives force both), and making the lazy zero was
// 3.5% of particle RR's objects.
static inline Value sens_slot(Value c, int index) {
  Value e = as_closure(c)->env[index];
  return is_zero_view(e) ? e : unview(e);
}

Value env_ref(Value v, int index, Lambda* lam) {
  (void)lam;
  // (a closure itself, nearly always — W4: 594,000 of 601,000 — without force's tests)
  if (v.is_obj() && kind_of(v) == Kind::Closure && index < (int)as_closure(v)->aux) return sens_slot(v, index);
  v = force(unview(v));
  if (!is(v, Kind::Closure) || (int)as_closure(v)->aux <= index)
    throw Error("a sensitivity and its value do not conform: the sensitivity of a closure is a closure of its "
                "lambda, got " + write_brief(v));
  return sens_slot(v, index);
}

// ---- ⊕ ----

namespace {
Value plus_rest(Value a, Value b);

// The sum of a OneHot or HotSum h and a list l (h + l when h_left, else l + h), the sums
// plus_pairs would make of them once h is built, made without building it: its cells through its
// last element are summed with l's (in plus_pairs' order), and l's rest with the zero of the
// data's rest. (No memo: h's cells would be new, shared with nothing.)
Value plus_hot_list(Value h, Value l, bool h_left) {
  Pair* p = hot_src(h);
  uint32_t k = hot_last(h);
  Value head = Value::nil(), tail;
  Pair* last = nullptr;
  std::vector<double> e;
  bool reals = is(h, Kind::HotSum) && hot_reals(h, p, e);
  for (uint32_t i = 0;; i++) {
    Value z = reals ? Value::real(e[i]) : hot_elem(h, i, p);
    Value cell = cons(h_left ? plus(z, car(l)) : plus(car(l), z), Value::nil());
    if (last) last->cdr = cell;
    else head = cell;
    last = static_cast<Pair*>(cell.as_obj());
    Value dl = cdr(l);
    if (i == k) {  // the built list's cdr here is the zero of the data's rest: not a pair object
      Value z_rest = zero_of(p->cdr);
      tail = h_left ? plus(z_rest, dl) : plus(dl, z_rest);
      break;
    }
    p = static_cast<Pair*>(p->cdr.as_obj());
    if (!is(dl, Kind::Pair)) {  // l ends first: the rest of h's list, built
      Value rest = hot_cells(h, i + 1, p, reals ? &e : nullptr);
      tail = h_left ? plus(rest, dl) : plus(dl, rest);
      break;
    }
    l = dl;
  }
  last->cdr = tail;
  return head;
}

// A walk of two lists at once (the sum of two pairs; bundle, primal, tangent and *j-inverse of
// pairs): along the cdrs in a loop, the cars recursively, so that a long list is no deeper than
// its elements (walked recursively, a list of 17 went 9 levels past the depth where the memo table
// starts, a hash insert a pair; bundled so, a list of 10^6 went 10^6 frames deep). From the pair
// of operands (a, b), each step makes a cell of elem(a, b); next(a, b, na, nb) gives the next
// operands along the cdrs and whether they are another step; if not, last(na, nb) is the rest of
// the list. Sharing is kept as memo_pair keeps it: once the table is in use, each step looks its
// operands up and, at the end, records its result, the suffix. (`spine`: (a, b, result) of the
// steps to record, scanned: `a` may be a pair plus_rest forced from a temporary *j of a list, held
// only there while the rest is summed, which allocates; collected then, its address went into the
// memo for a later pair to take its sum — found by a helper's instrumented GC-stress build.
// Entries given up are cleared, not left pinned.)
template <class Elem, class Next, class Last>
Value spine_walk(PairMemo& m, SpineVector*& spine, Value a, Value b, Elem elem, Next next, Last last) {
  if (m.depth >= 8 && !m.table) m.make(64);
  m.depth++;
  if (!spine) spine = new SpineVector();
  struct Leave {
    PairMemo& m;
    SpineVector* spine;
    size_t mark;
    ~Leave() {
      std::fill(spine->begin() + mark, spine->end(), Value());
      spine->resize(mark);
      if (--m.depth == 0) m.release();
    }
  };
  Leave leave{m, spine, spine->size()};
  Value head = Value::nil(), tail;
  Pair* cell_last = nullptr;
  for (;;) {
    if (m.table) {
      PairMemo::Entry* e = m.slot(a.bits, b.bits);
      if (m.live(e)) {
        tail = e->r;
        break;
      }
    }
    Value cell = cons(elem(a, b), Value::nil());
    if (cell_last) cell_last->cdr = cell;
    else head = cell;
    cell_last = static_cast<Pair*>(cell.as_obj());
    if (m.table) spine->insert(spine->end(), {a, b, cell});
    Value na, nb;
    if (!next(a, b, na, nb)) {
      tail = last(na, nb);
      break;
    }
    a = na;
    b = nb;
  }
  if (cell_last) cell_last->cdr = tail;
  else head = tail;
  SpineVector& sp = *spine;
  for (size_t i = leave.mark; i + 2 < sp.size(); i += 3) m.insert(sp[i], sp[i + 1], sp[i + 2]);
  return head;
}

__attribute__((noinline)) Value plus_pairs(Value a, Value b) {
  return spine_walk(
      plus_memo, plus_spine, a, b, [](Value x, Value y) { return plus(car(x), car(y)); },
      [](Value x, Value y, Value& nx, Value& ny) {
        nx = cdr(x);
        ny = cdr(y);
        return is(nx, Kind::Pair) && is(ny, Kind::Pair);
      },
      [](Value x, Value y) { return plus(x, y); });
}
}  // namespace

// The common cases here, with no frame to speak of: two reals, a zero, two pairs; the others in
// plus_rest.
ClosureMemo* closure_memo(const void* op, Value c) { return closure_cache.slot(op, c); }

// A thread's walks keep their small memo tables between walks: freed when each evaluation ends
// (run_job), as its free lists are; so is the cache of operations on closures.
void release_ad_tables() {
  for (PairMemo* m : {&plus_memo, &bundle_memo, &part_memo, &star_j_inverse_memo}) m->release(true);
  if (closure_cache.e) gc_free_uncollectable(closure_cache.e);
  closure_cache.e = nullptr;
  for (SpineVector** sp : {&plus_spine, &bundle_spine, &part_spine, &star_j_inverse_spine, &zero_part_spine}) {
    delete *sp;
    *sp = nullptr;
  }
}

bool inert_sum(Value a, Value b, Value* r) {
  if (!inert(a) || !inert(b) || different_atoms(a, b)) return false;  // (plus raises the error)
  *r = a.is_nil() ? b : a;
  return true;
}

bool inert_atom(Value v) { return is_atom(v); }

Value plus(Value a, Value b) {
  if (a.is_real() && b.is_real()) return Value::real(a.as_real() + b.as_real());
  if (a.is_zero_sens()) return b;  // the placeholder zero of backpropagator code
  if (b.is_zero_sens()) return a;
  if (is(a, Kind::Zero) || is_zero_view(a)) return b;
  if (is_zero_view(b)) return a;
  if (is(a, Kind::Pair) && is(b, Kind::Pair)) return plus_pairs(a, b);
  return plus_rest(a, b);
}

namespace {
// The sum of two closures: the closure of their environments' sums; unbound if they do not conform.
Value plus_closures(Value a, Value b) {
  Closure* x = as_closure(a);
  Closure* y = as_closure(b);
  if ((x->lambda == y->lambda || raw_variants(x, y)) && x->aux == y->aux && !has_constants(x->lambda)) {
    int n = (int)x->aux;
    if (n == 0) return a;
    Value r = make_closure(x->lambda, nullptr, n);
    for (int i = 0; i < n; i++) as_closure(r)->env[i] = plus(x->env[i], y->env[i]);
    return r;
  }
  // constants are free variables: they add too
  Lambda* lam;
  gc_vector<Value> ex, ey;
  if (!closures_conform(a, b, &lam, &ex, &ey)) return Value::unbound();
  Value r = make_closure(lam, nullptr, (int)ex.size());
  for (size_t i = 0; i < ex.size(); i++) as_closure(r)->env[i] = plus(ex[i], ey[i]);
  return r;
}

__attribute__((noinline)) Value plus_rest(Value a, Value b) {
  // two reverse reals (the sensitivities of first-level reverse values under a further reverse
  // transform): the case below, at once
  double x, y;
  if (plain_reverse(a, x) && plain_reverse(b, y)) return make_tagged(Kind::Reverse, Value::real(x + y));
  // two primitives or two closures (the sensitivities of procedures: a fold's or a map's f),
  // the switch's cases below at once
  if (a.is_obj() && b.is_obj()) {
    Kind ka = kind_of(a), kb = kind_of(b);
    if (ka == Kind::Prim && kb == Kind::Prim && a == b) return a;
    if (ka == Kind::Closure && kb == Kind::Closure) {
      Value r = plus_closures(a, b);
      if (!r.is_unbound()) return r;
    }
    // Two values tagged alike outermost (reverse values of reverse values, and the sensitivities
    // of nested levels: W4's sums are of towers two to five tags deep): the common tags peeled in
    // a loop, what they wrap added once, and the tags put back — the switch's tagged case below,
    // without this function's checks at every level.
    if (ka == kb && (ka == Kind::Reverse || ka == Kind::Sensitivity || ka == Kind::Perturbation)) {
      constexpr int kMax = 16;
      Kind tags[kMax];
      int d = 0;
      Value a0 = a, b0 = b;
      do {
        tags[d++] = ka;
        a = tagged_value(a);
        b = tagged_value(b);
      } while (d < kMax && a.is_obj() && b.is_obj() && (ka = kind_of(a)) == kind_of(b) &&
               (ka == Kind::Reverse || ka == Kind::Sensitivity || ka == Kind::Perturbation));
      Value r = plus(a, b);
      // One side a zero (the sum is the other's value, bit for bit): that side's tower itself.
      // W4's later reverse call adds ~500 towers a call, four in five of them to a zero.
      if (r.bits == a.bits) return a0;
      if (r.bits == b.bits) return b0;
      while (d > 0) r = make_tagged(tags[--d], r);
      return r;
    }
  }
  if (is_j_view(a) && is_j_view(b) && view_tag(a) == kViewJ && view_tag(b) == kViewJ) {
    // (along the cdrs in a loop, as plus_pairs, remembered under the views)
    return spine_walk(
        plus_memo, plus_spine, a, b,
        [](Value x, Value y) {
          return plus(j_part(static_cast<Pair*>(view_obj(x)), false), j_part(static_cast<Pair*>(view_obj(y)), false));
        },
        [](Value x, Value y, Value& nx, Value& ny) {
          nx = j_part(static_cast<Pair*>(view_obj(x)), true);
          ny = j_part(static_cast<Pair*>(view_obj(y)), true);
          return is_j_pair_view(nx) && is_j_pair_view(ny);
        },
        [](Value x, Value y) { return plus(x, y); });
  }
  // Views materialised are dispatched again from the start: what a view stands for can be a zero
  // (*j of the zero of a reverse real), a pair, or a view again (*j of a part that is a view of
  // a pair: two such, from two sensitivities of one list under nested reverse mode).
  if (a.is_view() || b.is_view()) return plus(unview(a), unview(b));
  if (is(b, Kind::Zero)) return a;
  if (is_hot(a) || is_hot(b)) {
    if (is_hot(a) && is_hot(b)) {
      // a sum to build when it is looked at, if not too many (hot_elem walks it for each element)
      uint32_t leaves = hot_leaves(a) + hot_leaves(b), last = std::max(hot_last(a), hot_last(b));
      if (leaves <= kHotMaxLeaves && last <= kHotLast && hot_src(a) == hot_src(b))
        return make_hot_sum(a, b, last | leaves << 24);
      a = force(a);
    }
    if (is_hot(a) && is_pair(b)) return plus_hot_list(a, b, true);
    if (is_hot(b) && is_pair(a)) return plus_hot_list(b, a, false);
    if (is_hot(a)) a = force(a);
    if (is_hot(b)) b = force(b);
    return plus(a, b);
  }
  if (is(a, Kind::LazyJ)) a = force(a);
  if (is(b, Kind::LazyJ)) b = force(b);
  if (a.is_real() && b.is_real()) return Value::real(a.as_real() + b.as_real());
  if (a.is_obj() && b.is_obj() && kind_of(a) == kind_of(b)) {
    switch (kind_of(a)) {
      case Kind::Pair: return plus_pairs(a, b);  // (pairs once forced)
      case Kind::Bundle: {
        Bundle* x = static_cast<Bundle*>(a.as_obj());
        Bundle* y = static_cast<Bundle*>(b.as_obj());
        return make_bundle(plus(x->primal, y->primal), plus(x->tangent, y->tangent));
      }
      case Kind::Reverse:
      case Kind::Perturbation:
      case Kind::Sensitivity: return make_tagged(kind_of(a), plus(tagged_value(a), tagged_value(b)));
      case Kind::Closure: {
        Value r = plus_closures(a, b);
        if (r.is_unbound()) break;
        return r;
      }
      case Kind::Prim:
      case Kind::String:
        if (different_atoms(a, b)) break;
        return a;
      case Kind::Zero:
      case Kind::LazyJ:
      case Kind::OneHot:
      case Kind::HotSum: break;
    }
  }
  // Values without a real inside ((), booleans, strings, primitives, closures with an empty
  // environment — e.g. a primitive's reverse version) are their own zero, and their
  // sensitivities carry nothing: any two of them add to either.
  if (inert(a) && inert(b) && !different_atoms(a, b)) return a.is_nil() ? b : a;
  throw Error("plus: values do not conform: " + write_brief(a) + " and " + write_brief(b));
}
}  // namespace

// ---- forward mode ----

Value perturb(Value v) { return make_tagged(Kind::Perturbation, v); }

Value unperturb(Value v) {
  v = force(v);
  if (!is(v, Kind::Perturbation)) ad_error("unperturb", "expected a perturbation", v);
  return tagged_value(v);
}

Value sensitize(Value v) { return make_tagged(Kind::Sensitivity, v); }

Value unsensitize(Value v) {
  v = force(v);
  if (!is(v, Kind::Sensitivity)) ad_error("unsensitize", "expected a sensitivity", v);
  return tagged_value(v);
}

namespace {

[[noreturn]] void nonconform(const char* who, Value p, Value t) {
  throw Error(std::string(who) + ": primal and tangent do not conform: " + write_brief(p) + " and " +
              write_brief(t));
}

bool is_tangent_fn(Value v) { return is(v, Kind::Closure) && as_closure(v)->lambda == current->tangent_fn; }

Value forward_part(const char* who, Value v, int part);

Value bundle_raw(Value p, Value t);

// spine_walk's next for a walk of one list under one key (primal, tangent, *j-inverse of a list):
// its cdr, while a pair.
bool next_cdr(Value x, Value y, Value& nx, Value& ny) {
  nx = cdr(x);
  ny = y;
  return is(nx, Kind::Pair);
}

// How bundle_raw takes apart the two it is given, when both are pairs or stand for pairs: 'P',
// two pairs; 'V', *j of a pair on either side, or two zero views (remembered under the views,
// which are the same on every way into a shared structure; their forced pairs' parts bundled);
// 'Z', a pair and a zero view (j*: the parts of the zero, not the zero made); 0, none of these.
inline bool stands_for_pair(Value v) { return is(v, Kind::Pair) || is_j_pair_view(v) || is_zero_view(v); }
char bundle_step(Value p, Value t) {
  if (is(p, Kind::Pair) && is(t, Kind::Pair)) return 'P';
  if (is_j_pair_view(p) || is_j_pair_view(t) || (is_zero_view(p) && is_zero_view(t)))
    return stands_for_pair(p) && stands_for_pair(t) ? 'V' : 0;
  if (is(p, Kind::Pair) && is_zero_view(t)) return 'Z';
  return 0;
}
// The bundle of two that bundle_step takes apart: the pair of their parts' bundles, along the
// cdrs in a loop (spine_walk). Bundled recursively, a closure's environment of a list of 10^6
// went 10^6 frames deep (0.4 GB of the evaluation stack, 1.3 s for j* of a closure over it).
Value bundle_pairs(Value p, Value t) {
  // (a 'V' step's forced pairs, made by the step's element and read by its next)
  Value fx, fy;
  return spine_walk(
      bundle_memo, bundle_spine, p, t,
      [&](Value x, Value y) {
        switch (bundle_step(x, y)) {
          case 'Z': return bundle_raw(car(x), lazy_zero(static_cast<Pair*>(view_obj(y))->car, zero_view_strip(y)));
          case 'V':
            fx = force(unview(x));
            fy = force(unview(y));
            return bundle_raw(car(fx), car(fy));
          default: return bundle_raw(car(x), car(y));
        }
      },
      [&](Value x, Value y, Value& nx, Value& ny) {
        switch (bundle_step(x, y)) {
          case 'Z':
            nx = cdr(x);
            ny = lazy_zero(static_cast<Pair*>(view_obj(y))->cdr, zero_view_strip(y));
            break;
          case 'V':
            nx = cdr(fx);
            ny = cdr(fy);
            break;
          default:
            nx = cdr(x);
            ny = cdr(y);
        }
        return bundle_step(nx, ny) != 0;
      },
      [](Value x, Value y) { return bundle_raw(x, y); });
}

// Whether bundle_raw makes (bundle x y) of these two as one Bundle at once: two reals, or two
// tagged values of one kind (a list already bundled by an enclosing forward derivative).
inline bool bundles_at_once(Value x, Value y) {
  if (x.is_real()) return y.is_real();
  if (!x.is_obj() || !y.is_obj()) return false;
  Kind k = kind_of(x);
  return (k == Kind::Bundle || k == Kind::Reverse || k == Kind::Perturbation || k == Kind::Sensitivity) &&
         kind_of(y) == k;
}

// bundle_pairs of a short list and a list whose elements bundle at once (a point and a direction:
// particle's positions bundled for a forward gradient), in one loop; unbound for anything else.
// The same list as bundle_pairs makes, which memoises no pair above depth 8 of a walk: this
// walks no deeper than that. (The elements wait on the C stack, which the collector scans.)
Value bundle_flat_list(Value p, Value t) {
  constexpr int kMax = 8;
  Value pv[kMax], tv[kMax];
  int n = 0, room = kMax - bundle_memo.depth;
  for (; is_pair(p) && is_pair(t); n++) {
    Value x = car(p), y = car(t);
    if (n >= room || !bundles_at_once(x, y)) return Value::unbound();
    pv[n] = x;
    tv[n] = y;
    p = cdr(p);
    t = cdr(t);
  }
  if (!p.is_nil() || !t.is_nil()) return Value::unbound();
  Value r = Value::nil();
  while (n-- > 0) r = cons(make_bundle(pv[n], tv[n]), r);
  return r;
}

// bundle with the tangent already unwrapped from its perturbation tag.
Value bundle_raw(Value p, Value t) {
  // (the common cases first, as the general way below takes them: two reals or two tagged values
  // of one kind, two pairs)
  if (bundles_at_once(p, t)) return make_bundle(p, t);
  if (is(p, Kind::Pair) && is(t, Kind::Pair)) {
    Value r = bundle_flat_list(p, t);
    return r.is_unbound() ? bundle_pairs(p, t) : r;
  }
  // *j of a pair, or two zeros of pairs, still views (forward over reverse: (*j x) and the
  // zeros of its parts under a forward derivative, taken apart and bundled again): remembered
  // under the views, which are the same for every way into a shared structure, where the pairs
  // made from them (a LazyJ or a lazy zero's level, each time a view is made into one) are not:
  // a DAG was bundled once per path, 2^n pairs for n.
  if (is_j_pair_view(p) || is_j_pair_view(t) || (is_zero_view(p) && is_zero_view(t))) {
    if (bundle_step(p, t) == 'V') return bundle_pairs(p, t);  // (two that stand for pairs: along the cdrs in a loop)
    return memo_pair(bundle_memo, p, t, [&] { return bundle_raw(force(unview(p)), force(unview(t))); });
  }
  p = unview(p);
  if (is_zero_view(t) && is(p, Kind::Pair)) return bundle_pairs(p, t);  // (j*: bundle_pairs)
  if (is_zero_view(t)) t = force(t);
  t = unview(t);
  bool tangent_zero = false;  // t is the zero of a closure p (j*)
  if (is(t, Kind::Zero)) {
    if (is(p, Kind::Closure) && (int)as_closure(p)->aux == 0) return closure_of(forward_transform(as_closure(p)->lambda), nullptr);
    LazyZero* z = static_cast<LazyZero*>(t.as_obj());
    // (or the zero of s stripped once, p being s's *j-inverse: j* under a reverse derivative,
    // whose transformed bundle takes both apart first)
    tangent_zero = is(p, Kind::Closure) && ((z->aux == 0 && z->src == p) || (z->aux == 1 && star_j_inverse_of(z->src, p)));
    t = tangent_zero ? p : materialize_zero(t);
  }
  if (is_built_lazily(t)) t = force(t);
  // The tangent of a forward procedure b (the closure (%tangent-of b)) holds b whole: its
  // tangent part is b's.
  // (Two such tangents bundle as any two closures of one lambda.)
  if (is_tangent_fn(t) && !is_tangent_fn(p)) t = forward_part("bundle", as_closure(t)->env[0], 1);
  if (p.is_real()) {
    if (!t.is_real()) nonconform("bundle", p, t);
    return make_bundle(p, t);
  }
  if (different_atoms(p, t)) nonconform("bundle", p, t);  // (two booleans, primitives, strings)
  if (!p.is_obj()) {
    // (a tangent without a real in it is no tangent at all: the sensitivity of a procedure
    // argument, a primitive, summed with () under reverse over forward over reverse mode)
    if (t != p && !(p.is_bool() && t.is_bool()) && !inert(t)) nonconform("bundle", p, t);
    return p;
  }
  switch (kind_of(p)) {
    case Kind::Pair:
      if (!is_pair(t)) nonconform("bundle", p, t);
      return bundle_pairs(p, t);
    case Kind::Bundle:
    case Kind::Reverse:
    case Kind::Perturbation:
    case Kind::Sensitivity:
      if (!t.is_obj() || kind_of(t) != kind_of(p)) nonconform("bundle", p, t);
      return make_bundle(p, t);
    case Kind::Prim:
      return prim_forward(static_cast<Prim*>(p.as_obj()));
    case Kind::Closure: {
      Closure* c = as_closure(p);
      if (!is(t, Kind::Closure)) {
        // (a closure that holds no real — a primitive's reverse version — has only a zero
        // tangent, which a tangent without a real stands for, as for an atom above: reverse over
        // forward over reverse over reverse of a function passing + to fold)
        if (!inert(p) || !inert(t)) nonconform("bundle", p, t);
        t = p;
        tangent_zero = true;
      }
      // (or the raw variant of c: reverse over forward over reverse over reverse)
      if ((as_closure(t)->lambda == c->lambda || raw_variants(c, as_closure(t))) &&
          (tangent_zero || !has_constants(c->lambda))) {
        // (the forward transform bundles the lambda's constants with zero tangents)
        Lambda* fl = forward_transform(c->lambda);
        int n = (int)c->aux;
        if (n == 0) return closure_of(fl, nullptr);
        ClosureMemo* memo = tangent_zero ? closure_cache.slot(nullptr, p) : nullptr;
        if (memo && memo->key == p && memo->op == nullptr) return memo->r;
        Value r = make_closure(fl, nullptr, n);
        for (int i = 0; i < n; i++)
          as_closure(r)->env[i] = bundle_raw(c->env[i], tangent_zero ? zero_of(c->env[i]) : as_closure(t)->env[i]);
        if (memo) *memo = {p, nullptr, r};
        return r;
      }
      // constants are free variables: the tangent's constants are theirs
      Lambda* lam;
      gc_vector<Value> ep, et;
      if (!closures_conform(p, t, &lam, &ep, &et)) nonconform("bundle", p, t);
      Value r = make_closure(forward_transform(lam), nullptr, (int)ep.size());
      for (size_t i = 0; i < ep.size(); i++) as_closure(r)->env[i] = bundle_raw(ep[i], et[i]);
      return r;
    }
    case Kind::String: return p;
    case Kind::Zero:
    case Kind::LazyJ:
    case Kind::OneHot:
    case Kind::HotSum: return bundle_raw(force(p), t);
  }
  return p;
}

// The primal (part 0) or the unwrapped tangent (part 1) of a forward value.
// What a zero of a pair or of *j of one (a zero view, or a lazy zero of either) is the zero of,
// and its strips; false for any other value.
bool zero_of_pair(Value v, Value& src, int& strip) {
  if (is_zero_view(v)) {
    src = Value::obj(view_obj(v));
    strip = zero_view_strip(v);
    return true;
  }
  if (is(v, Kind::Zero)) {
    Value s = static_cast<LazyZero*>(v.as_obj())->src;
    if (is_pair(s) || is_j_pair_view(s)) {
      src = s;
      strip = (int)v.as_obj()->aux;
      return true;
    }
  }
  return false;
}

// forward_part of such a zero: the zero of the part of its one level, (zero (cons a d)) for a
// the part of its car's zero and d that of its cdr's, remembered under what it is the zero of
// (the pair, or the view of *j of it) and its strips, which are the same for every way into a
// shared structure; the level made afresh each time is not (a DAG's zero was walked once per
// path: 2^n pairs). Along the cdrs in a loop (a list's zero, d again such a zero), the cars
// recursively: recursively along the cdrs, the zero of a list of 10^6 went 10^6 frames deep.
Value zero_forward_part(const char* who, Value src, int strip, int part) {
  PairMemo& m = part_memo;
  if (m.depth >= 8 && !m.table) m.make(64);
  m.depth++;
  if (!zero_part_spine) zero_part_spine = new SpineVector();
  SpineVector& sp = *zero_part_spine;
  struct Leave {
    PairMemo& m;
    SpineVector& sp;
    size_t mark;
    ~Leave() {
      std::fill(sp.begin() + mark, sp.end(), Value());
      sp.resize(mark);
      if (--m.depth == 0) m.release();
    }
  } leave{m, sp, sp.size()};
  Value r;
  for (;;) {
    Value key = Value::real(16 + 4 * strip + part);
    if (m.table) {
      PairMemo::Entry* e = m.slot(src.bits, key.bits);
      if (m.live(e)) {
        r = e->r;
        break;
      }
    }
    Value level = zero_shallow(src, strip);
    if (!is(level, Kind::Pair)) {  // (as forward_part takes it)
      r = zero_of(forward_part(who, level, part));
      break;
    }
    Value a = forward_part(who, car(level), part);  // (the car first: an error names the first part at fault)
    sp.insert(sp.end(), {src, key, a});
    Value d = cdr(level), dsrc;
    int dstrip = 0;
    if (!zero_of_pair(d, dsrc, dstrip)) {  // the rest's part, at once
      r = forward_part(who, d, part);
      break;
    }
    src = dsrc;
    strip = dstrip;
  }
  // the levels walked, innermost first: each the zero of (its car's part . the level below's)
  for (size_t i = sp.size(); i > leave.mark; i -= 3) {
    r = zero_of(cons(sp[i - 1], r));
    if (m.table) m.insert(sp[i - 3], sp[i - 2], r);
  }
  return r;
}

Value forward_part(const char* who, Value v, int part) {
  {
    Value src;
    int strip;
    if (zero_of_pair(v, src, strip)) return zero_forward_part(who, src, strip, part);
  }
  v = unview(v);
  if (v.is_real()) ad_error(who, "expected a forward value", v);
  if (!v.is_obj()) return v;
  switch (kind_of(v)) {
    case Kind::Bundle: {
      Bundle* b = static_cast<Bundle*>(v.as_obj());
      return part == 0 ? b->primal : b->tangent;
    }
    case Kind::Pair: {
      // (a pair of two Bundles, where the memo is not in use: its parts' parts at once, as the
      // walk below takes them; the argument tuple of a forward primitive under nested forward
      // derivatives, W4's)
      Value a = car(v), d = cdr(v);
      if (part_memo.depth < 8 && is(a, Kind::Bundle) && is(d, Kind::Bundle)) {
        const Bundle* ba = static_cast<const Bundle*>(a.as_obj());
        const Bundle* bd = static_cast<const Bundle*>(d.as_obj());
        return part == 0 ? cons(ba->primal, bd->primal) : cons(ba->tangent, bd->tangent);
      }
      // (along the cdrs in a loop, as bundle_pairs; the car first: an error names the first part
      // at fault)
      return spine_walk(
          part_memo, part_spine, v, Value::real(part), [&](Value x, Value) { return forward_part(who, car(x), part); },
          next_cdr,
          [&](Value x, Value) { return forward_part(who, x, part); });
    }
    case Kind::Closure: {
      Closure* c = as_closure(v);
      Lambda* lam = c->lambda;
      if (lam->rule_of && lam->rule_kind == 'F') return Value::obj(lam->rule_of);
      if (lam->transform != 'F') ad_error(who, "expected a forward value", v);
      int n = (int)c->aux;
      if (part == 1 && has_constants(lam->source))  // the source's constants: zero tangents
        return over_constants(lam->source, n, [&](int i) { return forward_part(who, c->env[i], part); });
      if (n == 0) return closure_of(lam->source, nullptr);
      Value r = make_closure(lam->source, nullptr, n);
      for (int i = 0; i < n; i++) as_closure(r)->env[i] = forward_part(who, c->env[i], part);
      return r;
    }
    case Kind::Zero: return zero_of(forward_part(who, materialize_zero(v), part));
    case Kind::LazyJ:
    case Kind::OneHot:
    case Kind::HotSum: return forward_part(who, force(v), part);
    case Kind::String: return v;
    case Kind::Prim:
      // A primitive that acts on forward values directly is its own forward version.
      if (static_cast<Prim*>(v.as_obj())->fwd_rule == nullptr) return v;
      ad_error(who, "expected a forward value", v);
    default: ad_error(who, "expected a forward value", v);
  }
}

}  // namespace

Value bundle(Value p, Value t) {
  t = force(t);
  if (!is(t, Kind::Perturbation)) ad_error("bundle", "expected a perturbation as the tangent", t);
  return bundle_raw(p, tagged_value(t));
}

Value bundle_untagged(Value p, Value t) { return bundle_raw(p, t); }

namespace {

bool is_forward_procedure(Value v) {
  Lambda* lam = as_closure(v)->lambda;
  return lam->transform == 'F' || (lam->rule_of && lam->rule_kind == 'F');
}

// The unwrapped tangent of a forward value as `tangent` gives it: as forward_part, except that the
// tangent of a forward procedure b is the procedure y -> (unperturb (tangent (b (j* y)))), the
// closure (%tangent-of b), which keeps b whole (the tangent of b's result depends on b's primal).
Value tangent_part(Value v) {
  v = unview(v);
  if (v.is_obj()) switch (kind_of(v)) {
      case Kind::Closure:
        if (is_forward_procedure(v)) return closure_of(current->tangent_fn, &v);
        break;
      case Kind::Prim: {  // a primitive that is its own forward version (car, pair?, ...): so too
        Prim* p = static_cast<Prim*>(v.as_obj());
        if (!p->fwd_rule && p->cls != PrimClass::Host) return closure_of(current->tangent_fn, &v);
        break;
      }
      case Kind::Pair:  // (along the cdrs in a loop, the car first, as forward_part)
        return spine_walk(
            part_memo, part_spine, v, Value::real(2), [](Value x, Value) { return tangent_part(car(x)); },
            next_cdr,
            [](Value x, Value) { return tangent_part(x); });
      case Kind::Zero: return zero_of(tangent_part(materialize_zero(v)));
      case Kind::LazyJ:
      case Kind::OneHot:
      case Kind::HotSum: return tangent_part(force(v));
      default: break;
    }
  return forward_part("tangent", v, 1);
}

// The sensitivity of x in (tangent x), given the unwrapped sensitivity t of the result.
Value tangent_bar_raw(Value x, Value t) {
  // (a pair of pairs taken apart along the cdrs in a loop: a long list is no deeper than its
  // elements; each level as the one before)
  Value head = Value::nil();
  Pair* last = nullptr;
  for (;;) {
    Value r = Value::unbound();
    if (!t.is_zero_sens()) {
      Value tf = force(unview(t));
      if (is_tangent_fn(tf)) {
        r = as_closure(tf)->env[0];
      } else {
        Value xf = force(unview(x));
        if (is_pair(tf) && is_pair(xf)) {
          Value cell = cons(tangent_bar_raw(car(xf), car(tf)), Value::nil());
          if (last) last->cdr = cell;
          else head = cell;
          last = static_cast<Pair*>(cell.as_obj());
          x = cdr(xf);
          t = cdr(tf);
          continue;
        }
      }
    }
    if (r.is_unbound()) r = bundle_raw(zero_of(primal(x)), t);
    if (!last) return r;
    last->cdr = r;
    return head;
  }
}

}  // namespace

Value primal(Value v) { return forward_part("primal", v, 0); }
Value tangent(Value v) { return perturb(tangent_part(v)); }
Value tangent_structural(Value v) { return perturb(forward_part("tangent", v, 1)); }
Value tangent_untagged(Value v) { return forward_part("tangent", v, 1); }
Value tangent_bar(Value x, Value y) {
  Value yf = force(y);
  if (!is(yf, Kind::Perturbation)) return bundle(zero_of(primal(x)), y);
  return tangent_bar_raw(x, tagged_value(yf));
}
Value j_star(Value v) { return bundle_raw(v, zero_of(v)); }

// ---- reverse mode ----

Value star_j(Value v) {
  if (v.is_real()) return make_tagged(Kind::Reverse, v);
  // (*j (*j P)) of a pair P: the lazy *j of it twice (the case of LazyJ below, without making
  // the first)
  if (is_j_pair_view(v)) return make_lazy_j(Value::obj(view_obj(v)), 2);
  v = unview(v);
  if (!v.is_obj()) return v;
  switch (kind_of(v)) {
    case Kind::Pair: return view_of(v, kViewJ);  // walked only as far as it is inspected
    case Kind::Bundle:
    case Kind::Reverse:
    case Kind::Perturbation:
    case Kind::Sensitivity: return make_tagged(Kind::Reverse, v);
    case Kind::Prim: return prim_reverse(static_cast<Prim*>(v.as_obj()));
    case Kind::Closure: {
      Closure* c = as_closure(v);
      Lambda* rl = reverse_transform(c->lambda);
      int n = (int)c->aux;
      if (n == 0) return closure_of(rl, nullptr);
      Value r = make_closure(rl, nullptr, n);
      for (int i = 0; i < n; i++) as_closure(r)->env[i] = star_j(c->env[i]);
      return r;
    }
    case Kind::Zero: {
      LazyZero* z = static_cast<LazyZero*>(v.as_obj());
      if (z->aux > 0) return make_lazy_zero(z->src, (int)z->aux - 1);
      return star_j(materialize_zero(v));
    }
    case Kind::LazyJ: {
      LazyJ* z = static_cast<LazyJ*>(v.as_obj());
      return make_lazy_j(z->src, (int)z->aux + 1);
    }
    case Kind::OneHot:
    case Kind::HotSum: return star_j(force(v));
    case Kind::String: return v;
  }
  return v;
}

Value star_j_inverse(Value v) {
  if (is_j_view(v)) {  // O(1): the data *j was given
    if (view_tag(v) == kViewJ) return Value::obj(view_obj(v));
    return j_view_part(v);
  }
  v = unview(v);
  if (v.is_real()) ad_error("*j-inverse", "expected a reverse value", v);
  if (!v.is_obj()) return v;
  switch (kind_of(v)) {
    case Kind::Reverse: return tagged_value(v);
    case Kind::Pair:  // (along the cdrs in a loop, the car first, as forward_part)
      return spine_walk(
          star_j_inverse_memo, star_j_inverse_spine, v, Value::nil(), [](Value x, Value) { return star_j_inverse(car(x)); },
          next_cdr,
          [](Value x, Value) { return star_j_inverse(x); });
    case Kind::Closure: {
      Closure* c = as_closure(v);
      Lambda* lam = c->lambda;
      if (lam->rule_of && lam->rule_kind == 'R') return Value::obj(lam->rule_of);
      if (lam->transform != 'R') ad_error("*j-inverse", "expected a reverse value", v);
      int n = (int)c->aux;
      if (n == 0) return closure_of(lam->source, nullptr);
      // The closure cache (above): an inner derivative taken again and again of one reverse
      // closure (a gradient-F inside a reverse derivative, whose transformed j* takes *j-inverse
      // of its function first) walked the environment each time, and the result, a new closure,
      // was never j*'s memo's hit either.
      ClosureMemo* memo = closure_cache.slot(&kStarJInverseOp, v);
      if (memo->key == v && memo->op == &kStarJInverseOp) return memo->r;
      Value r = make_closure(lam->source, nullptr, n);
      for (int i = 0; i < n; i++) as_closure(r)->env[i] = star_j_inverse(c->env[i]);
      *closure_cache.slot(&kStarJInverseOp, v) = {v, &kStarJInverseOp, r};
      return r;
    }
    case Kind::Zero: {
      LazyZero* z = static_cast<LazyZero*>(v.as_obj());
      return make_lazy_zero(z->src, (int)z->aux + 1);
    }
    case Kind::LazyJ: {  // O(1): the value *j was given
      LazyJ* z = static_cast<LazyJ*>(v.as_obj());
      return z->aux == 1 ? z->src : make_lazy_j(z->src, (int)z->aux - 1);
    }
    case Kind::OneHot:
    case Kind::HotSum: return star_j_inverse(force(v));
    case Kind::String: return v;
    case Kind::Prim:
      if (static_cast<Prim*>(v.as_obj())->rev_rule == nullptr) return v;
      ad_error("*j-inverse", "expected a reverse value", v);
    default: ad_error("*j-inverse", "expected a reverse value", v);
  }
}

namespace {
void check_j_inverse_atom(Value v);
}

// (A pair is walked, as the primal's *j-inverse walks it at once: under a reverse derivative,
// (*j-inverse (cons x x)) gave its error lazily, at the + that later took its value apart, or
// none when nothing did.)
void check_j_inverse_arg(Value v) {
  if (!is_pair(v)) return check_j_inverse_atom(v);
  std::vector<Value> todo{v};
  while (!todo.empty()) {
    Value w = todo.back();
    todo.pop_back();
    if (is_pair(w)) {
      todo.push_back(cdr(w));
      todo.push_back(car(w));
    } else if (!is_lazy(w)) {  // (a lazy part, a zero or *j of data, is not made to be checked)
      check_j_inverse_atom(w);
    }
  }
}

namespace {
void check_j_inverse_atom(Value v) {
  if (v.is_real()) ad_error("*j-inverse", "expected a reverse value", v);
  if (!v.is_obj() || v.is_view()) return;
  switch (kind_of(v)) {
    case Kind::Closure: {
      Lambda* lam = as_closure(v)->lambda;
      if ((lam->rule_of && lam->rule_kind == 'R') || lam->transform == 'R') return;
      break;
    }
    case Kind::Prim:
      if (static_cast<Prim*>(v.as_obj())->rev_rule == nullptr) return;
      break;
    case Kind::Bundle:
    case Kind::Perturbation:
    case Kind::Sensitivity: break;
    default: return;
  }
  ad_error("*j-inverse", "expected a reverse value", v);
}
}  // namespace

// (*j-inverse v) taken apart at once, v a pair (the argument tuple of a primitive's reverse rule
// under a further transform): the parts' *j-inverse into out, without the pair *j-inverse would
// make, when each part is a reverse-tagged value or a view of *j of data — parts whose
// *j-inverse neither fails nor walks, so nothing depends on the order or on the walk's memo.
// False otherwise (the caller makes the pair as before).
bool star_j_inverse_parts(Value a, Value d, Value* out) {
  auto simple = [](Value x) { return is_j_view(x) || is(x, Kind::Reverse); };
  if (!simple(a) || !simple(d)) return false;
  out[0] = star_j_inverse(a);
  out[1] = star_j_inverse(d);
  return true;
}

Value transform_value(Value v, char t) { return t == 'F' ? j_star(v) : star_j(v); }

}  // namespace vlad
