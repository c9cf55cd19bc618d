// eval.cpp — eval/apply over compiled A-normal bodies (paper §4's E and A).
// Tail calls loop in `apply` without growing the stack; non-tail calls recurse on the C++ stack,
// which the interpreter runs on a large dedicated thread stack, under a depth limit.
// Reverse-transformed code returns (cons value backpropagator); a caller that takes it apart at
// once gets the two halves without the pair, and a tail call of the forward phase links the
// caller's backpropagator into a chain (below) instead of growing the stack.
#include <alloca.h>

#include <algorithm>
#include <exception>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <vector>

#include "../ad/ad.hpp"
#include "code.hpp"
#include "exec.hpp"
#include "interp.hpp"

namespace vlad {

__thread Interp* current = nullptr;
__thread char* stack_limit = nullptr;
__thread long eval_depth = 0;

// The active calls, one record per depth: what was called and from where. Errors unwind the
// C++ stack without stopping in each frame; the trace is read from here afterwards (a frame
// replaced by a tail call is overwritten, as in Lua).
struct CallRecord {
  uint64_t f;
  Pos pos;
};
static __thread CallRecord* call_records = nullptr;
// note_retained's last backpropagator, held weakly: a link the collector clears when it is freed
// (GC_MALLOC_ATOMIC_UNCOLLECTABLE: neither scanned nor freed), so that a backpropagator made later
// at its address is not taken for it and left unmeasured. A plain address compared here did so
// under GC stress (a peak of 592 bytes reported for 576,208), and it would not do to hold the
// backpropagator itself: that would keep its whole tape alive until the next one.
static thread_local uintptr_t* last_retained_link = nullptr;  // (GC_HIDE_POINTER of it; 0: none)
static __thread long call_capacity = 0;

// Positions inside the prelude and the primitives' rules: an error there is reported at the
// user's call, and a tail call inside them keeps the user's call site in the record.
static const char* const prelude_file = intern("<prelude>");
static const char* const rules_file = intern("<rules>");
static inline bool internal(Pos p) { return p.file == prelude_file || p.file == rules_file; }

void forget_retained_note() {
  if (last_retained_link && *last_retained_link) {
    GC_unregister_disappearing_link(reinterpret_cast<void**>(last_retained_link));
    *last_retained_link = 0;
  }
}

// The records are in memory the collector scans (a root): an error's trace is read from
// them after the error has unwound the calls (attach_trace), when a record may hold the only
// reference to its callee — a closure made for the call, say. In malloc's memory (before), a
// collection in between (another thread's) freed it, and the trace read a freed object.
// (Records above the current depth keep their callees alive until overwritten, or until the
// evaluation ends: release_call_records.)
void release_call_records() {
  if (call_records) {
    GC_remove_roots(call_records, call_records + call_capacity);
    free(call_records);
  }
  call_records = nullptr;
  call_capacity = 0;
}

static void grow_call_records(long need) {
  long cap = call_capacity ? call_capacity : 1024;
  while (cap <= need) cap *= 2;
  // (malloc's memory registered as a root, not the collector's heap: growing them near the heap
  // limit does not fail)
  CallRecord* grown = static_cast<CallRecord*>(malloc(sizeof(CallRecord) * cap));
  if (!grown) throw Error("out of memory");
  if (call_records) memcpy(grown, call_records, sizeof(CallRecord) * call_capacity);
  GC_add_roots(grown, grown + cap);  // (before the old records stop being one)
  if (call_records) {
    GC_remove_roots(call_records, call_records + call_capacity);
    free(call_records);
  }
  call_records = grown;
  call_capacity = cap;
}

Value closure_of(Lambda* lam, const Value* env) {
  size_t n = lam->free.size();
  if (n == 0) {
    if (lam->empty_closure.is_unbound()) lam->empty_closure = make_closure(lam, nullptr, 0);
    return lam->empty_closure;
  }
  return make_closure(lam, env, (int)n);
}

namespace {

// A count's mismatch (expand.cpp, count_text): "f: expected 3 arguments, got 2", "pattern (list a
// b): expected a list of 2 elements, got 3"; v is the rest of the tuple or list where it failed.
[[noreturn]] void count_error(Value v, const char* text, Pos pos) {
  char kind = text[1];
  char* end = nullptr;
  long n = strtol(text + 2, &end, 10);
  long i = strtol(end, &end, 10);
  std::string what = end && *end == ' ' ? end + 1 : "";
  if (!what.empty() && what[0] == '\x03')  // the text's address (expand.cpp count_text)
    what = reinterpret_cast<const char*>((uintptr_t)strtoull(what.c_str() + 1, nullptr, 16));
  v = strip_tags(v);
  if (kind == 'A') {  // what: the procedure's name, \x02, its formals as written
    size_t sep = what.find('\x02');
    std::string formals = sep == std::string::npos ? std::string() : what.substr(sep + 1);
    if (sep != std::string::npos) what.resize(sep);
    long got = i + (v.is_nil() ? 0 : 1);
    throw Error((what.empty() ? std::string() : what + ": ") + "expected " + std::to_string(n) + " arguments, got " +
                    std::to_string(got) +
                    (formals.empty() ? std::string() : " (the argument tuple does not match pattern " + formals + ")"),
                pos);
  }
  // the elements of the list given: those matched (i) and those left in v
  long got = i;
  for (; is_pair(v) && got < 100000000; got++) v = strip_tags(cdr(v));
  throw Error("value does not match pattern " + what + ": expected a list of " + std::to_string(n) + " element" +
                  (n == 1 ? "" : "s") + ", got " +
                  (v.is_nil() ? std::to_string(got) : std::string("a value that is not a list")),
              pos);
}

[[noreturn]] __attribute__((noinline, cold)) void pattern_error(Value v, const char* pattern, Pos pos) {
  static const char* car_name = intern("car");
  static const char* cdr_name = intern("cdr");
  if (pattern == car_name || pattern == cdr_name)  // the prelude's inlined car and cdr
    throw Error(std::string(pattern) + ": expected a pair, got " + write_brief(v), pos);
  if (pattern && pattern[0] == '\x01') count_error(v, pattern, pos);
  if (pattern && !strcmp(pattern, "(cons a d)")) sensitivity_not_pair(v, pos);  // (the transforms' projections of one)
  throw Error("value " + write_brief(v) + " does not match pattern " + (pattern ? pattern : "?"), pos);
}

[[noreturn]] void pattern_error(Value v, const Binding* b) { pattern_error(v, b->pattern, b->pos); }

// Compares a value with a constant pattern, looking through AD tags on reals.
bool matches_constant(Value v, Value k) {
  if (!k.is_real() && is_lazy(v)) v = force(v);
  if (k.is_real()) {
    Value p = strip_tags(v);
    return p.is_real() && p.as_real() == k.as_real();
  }
  if (is(k, Kind::String)) return is(v, Kind::String) && string_of(v) == string_of(k);
  if (is_pair(k)) return is_pair(v) && matches_constant(car(v), car(k)) && matches_constant(cdr(v), cdr(k));
  if (is_lazy(v)) return matches_constant(force(v), k);
  return v == k;
}

[[noreturn]] __attribute__((noinline, cold)) void unbound_error(Binding* b) {
  std::string msg = std::string("unbound variable ") + b->cell->name;
  if (is_syntax_keyword(b->cell->name))  // ((reduce cons '()) l): cons is syntax here, as in the paper
    msg += std::string(" (") + b->cell->name + " is a special form, not a procedure: wrap it in a lambda)";
  throw Error(msg, b->pos);
}

Value global_value(Binding* b) {
  Value v = b->cell->value;
  if (v.is_unbound() && (v = current->force_cell(b->cell)).is_unbound()) unbound_error(b);
  if (!*b->xf) return v;
  if (v == b->cache_in) return b->cache_out;
  Value t = v;
  for (const char* p = b->xf; *p; p++) t = transform_value(t, *p);
  b->cache_in = v;
  b->cache_out = t;
  return t;
}

const char* callee_name(Value f) {
  if (is(f, Kind::Closure)) {
    Lambda* l = static_cast<Closure*>(f.as_obj())->lambda;
    // a primitive's forward or reverse version (or a transform of one), by the primitive's name
    for (const Lambda* r = l; r; r = r->source ? r->source : r->lazy_of)
      if (r->rule_of) return r->rule_of->name;
    return l->name ? l->name : "lambda";
  }
  if (is(f, Kind::Prim)) return static_cast<Prim*>(f.as_obj())->name;
  return "?";
}

// The halves of a pair result into out[0], out[1] (a value of a split instruction or of a call
// whose caller takes it apart).
// A value that is not the pair a split or a car or cdr takes apart. In the forward or reverse
// version of a primitive that takes a pair of arguments, or a transform of it (`self`, the
// closure running the code: its rule takes them apart first), the primitive's own error, as a
// primal call gives it: "-: expected a pair of arguments, got 1".
[[noreturn]] __attribute__((noinline, cold)) void shape_error(Value r, const char* shape_text, Pos pos, Value self) {
  if (is(self, Kind::Closure)) {
    const Prim* p = nullptr;  // (a transform of a rule, under nesting: the rule it was made from)
    for (const Lambda* l = static_cast<Closure*>(self.as_obj())->lambda; l && !p; l = l->source ? l->source : l->lazy_of)
      p = l->rule_of;
    if (p && p->arity == 2) throw Error(std::string(p->name) + ": expected a pair of arguments, got " + write_brief(r), pos);
  }
  pattern_error(r, shape_text, pos);
}

// The pattern the value of split instruction ip must match: that of the (car x) it fused (split_at:
// the binding after ip's own), which is the user's when user code takes a call's value apart
// ((let (((list p q) (g 1))) ...) said "does not match pattern (cons value backpropagator)"), and
// transformed code's (cons value backpropagator) otherwise.
inline const char* split_pattern(const Instr* ip, const char* fallback = "(cons value backpropagator)") {
  const Binding* car = ip->src + 1;
  return car->op == Op::Car && car->pattern ? car->pattern : fallback;
}
// Where its mismatch is: the pattern's (its first variable, as a lambda's parameters report it, or
// the (car x) call) when the program's, else `call` (the call's own, in transformed code). It was
// the call's: (let ((a (* x 1))) (let (((cons p q) a)) p)) reported (* x 1).
inline Pos split_pos(const Instr* ip, Pos call) {
  const Binding* car = ip->src + 1;
  return car->op == Op::Car && car->pattern && car->pos.file ? car->pos : call;
}

void split_value(Value r, Value* out, const char* shape_text, Pos pos, Value self = Value()) {
  if (is_lazy(r)) r = force(r);
  if (r.is_zero_sens()) {  // the parts of a placeholder zero (a grouped sensitivity: transform.cpp)
    out[0] = out[1] = r;
    return;
  }
  if (!is_pair(r)) shape_error(r, shape_text, pos, self);
  out[0] = car(r);
  out[1] = cdr(r);
}

// A value with no real in it at its root: its sensitivity is its own zero.
inline bool inert_value(Value v) { return v.is_nil() || v.is_bool() || is(v, Kind::String); }

// A sensitivity that is zero by its representation: a backpropagator given it returns zeros (it
// is linear), so the call is skipped. Reals are not looked at: 0 times an infinite partial
// derivative is NaN in IEEE arithmetic, and that is what the call would give.
inline bool zero_sensitivity(Value y) {
  return y.is_zero_sens() || y.is_nil() || y.is_bool() || is(y, Kind::Zero) || is_zero_view(y) ||
         is(y, Kind::String);
}

Value raw_apply(Value t, Value y, Pos pos, Value* out, const char* xf);

// ȳ = +0.0 for a backpropagator that only builds structures from ȳ and zeros (Lambda::structural):
// its result is all zeros, as for a zero sensitivity. (Not for any backpropagator: one that
// multiplies ȳ by an infinite partial derivative gives NaN, which skipping it would hide.)
inline bool structural_zero(Value bp, Value y) {
  return y.bits == Value::real(0.0).bits && is(bp, Kind::Closure) && static_cast<Closure*>(bp.as_obj())->lambda->structural;
}

}  // namespace

Value Exec::arg_of(const Instr* ip) const { return ip->op2 == AppPair ? cons(get(ip->b), get(ip->b2)) : get(ip->b); }
Value Exec::tail_arg() const { return arg2.is_unbound() ? arg : cons(arg, arg2); }

namespace {
// Records at ip the kind of callee fv is (Instr::seen), for the native tier.
inline void note_callee(const Instr* ip, Value fv) {
  uint8_t bit = kSeenOther;
  if (is(fv, Kind::Prim)) {
    bit = kSeenPrim;
  } else if (is(fv, Kind::Closure)) {
    Lambda* lam = static_cast<Closure*>(fv.as_obj())->lambda;
    bool native = ip->split ? (ip->op2 == AppPair ? (void*)lam->native_split2 : (void*)lam->native_split1) != nullptr
                            : ip->op2 == AppPair && lam->native2;
    bit = native ? kSeenNative : kSeenClosure;
  }
  if (!(ip->seen & bit)) const_cast<Instr*>(ip)->seen |= bit;
}
// The same for the backpropagator bp a split BackCall calls.
inline void note_backprop(const Instr* ip, Value bp) {
  static const uint64_t const_pair = const_pair_view().bits;
  uint8_t bit = kSeenBackOther;
  if (bp.bits == const_pair) {
    bit = kSeenBackNode;
  } else if (bp.is_view() && (bp.bits >> 48) == 0) {
    uint64_t t = view_tag(bp);
    if (t == kViewBpNode) bit = kSeenBackNode;
    else if (t == kViewBpCarJ || t == kViewBpCdrJ) bit = kSeenBackProj;
  }
  if (!(ip->seen & bit)) const_cast<Instr*>(ip)->seen |= bit;
}
}  // namespace

bool split_star_j_inverse(Exec* ex, const Instr* ip, Value fv);

namespace {
// A callee's native forward phase (Lambda::native_split1/2) at call ip: an error without a
// position gets the call's, as a primitive's at once does (op_app). (site(), not call_site(): ip
// may be a chain call, whose union holds its chain's lambda and captures, not a position — read
// as one, they printed a garbage file name and line.)
inline bool native_split(const Instr* ip, Lambda* lam, Closure* cl, Value a, Value b, Value* out) {
  try {
    return ip->op2 == AppPair ? lam->native_split2 && lam->native_split2(cl, a, b, out)
                              : lam->native_split1 && lam->native_split1(cl, a, out);
  } catch (Error& e) {
    if (!e.pos.file) e.pos = ip->site();
    throw;
  }
}
}  // namespace

// x, x2 = car, cdr of (f a): the forward phase's call in reverse-transformed code.
void Exec::run_split(const Instr* ip) {
  Value fv = get(ip->a);
  note_callee(ip, fv);
  Value out[2];
  if (is(fv, Kind::Prim) && static_cast<Prim*>(fv.as_obj()) == current->p_star_j_inverse && split_star_j_inverse(this, ip, fv))
    return;
  if (is(fv, Kind::Closure)) {
    Closure* cl = static_cast<Closure*>(fv.as_obj());
    Lambda* lam = cl->lambda;
    bool done = native_split(ip, lam, cl, get(ip->b), ip->op2 == AppPair ? get(ip->b2) : Value::unbound(), out);
    if (done) {
      fr[ip->x] = out[0];
      fr[ip->x2] = out[1];
      return;
    }
  }
  Value r = apply_split(fv, arg_of(ip), ip->call_site(), out);
  if (!r.is_unbound()) split_value(r, out, split_pattern(ip), split_pos(ip, ip->call_site()), self);
  fr[ip->x] = out[0];
  fr[ip->x2] = out[1];
}

// The backpropagator of a way out whose value is v and whose tail call's backpropagator is
// bp: the closure of ip->chain with bp in its hole, or, when v holds no real (a boolean, say),
// a backpropagator of zeros: its sensitivity can only be zero, so the chain is not kept.
Value Exec::way_out_bp(const Instr* ip, Value v, Value bp) {
  if (inert_value(v)) return zero_backpropagator(self, fr[0]);
  Value b = make_closure(ip->chain, nullptr, ip->ncaps);
  Closure* cl = static_cast<Closure*>(b.as_obj());
  for (int k = 0; k < ip->ncaps; k++) cl->env[k] = k == ip->hole ? bp : get(ip->caps[k]);
  return b;
}

// Stores a branch's or a call's outcome (value or pair) into the instruction's slots.
void Exec::store(const Instr* ip, Exit e, const char* shape_text) {
  if (ip->split) {
    if (e == Exit::Pair) {
      fr[ip->x] = r1;
      fr[ip->x2] = r2;
    } else {
      Value out[2];
      split_value(r1, out, split_pattern(ip, shape_text), split_pos(ip, ip->src->pos), self);
      fr[ip->x] = out[0];
      fr[ip->x2] = out[1];
    }
  } else {
    fr[ip->x] = e == Exit::Pair ? cons(r1, unview(r2)) : r1;
  }
}

inline int Exec::op_const(const Instr* ip) {
  fr[ip->x] = ip->k();
  return kContinue;
}

inline int Exec::op_copy(const Instr* ip) {
  fr[ip->x] = get(ip->a);
  return kContinue;
}

inline int Exec::op_sens(const Instr* ip) {
  Value s = get(ip->a);
  if (!s.is_zero_sens()) {
    fr[ip->x] = s;
    return kContinue;
  }
  Value b = get(ip->b);
  if (int path = ip->src->index) b = sens_part(b, path, ip);
  fr[ip->x] = rzero(b);
  return kContinue;
}

// The part of v a Sens's path names, taken as Car and Cdr instructions take it (op_car_cdr).
__attribute__((noinline)) Value Exec::sens_part(Value v, int path, const Instr* ip) {
  for (int k = 0, n = sens_path_length(path); k < n; k++) {
    bool cdr_side = sens_path_cdr(path, k);
    if (is_pair(v)) {
      v = cdr_side ? cdr(v) : car(v);
    } else if (is_j_view(v) && view_tag(v) == kViewJ) {
      v = j_part(static_cast<Pair*>(view_obj(v)), cdr_side);
    } else if (is_lazy(v)) {
      Value m = force(v);
      if (!is_pair(m)) pattern_error(m, "(cons a d)", ip->src->pos);
      v = cdr_side ? cdr(m) : car(m);
    } else if (!v.is_zero_sens()) {
      pattern_error(v, "(cons a d)", ip->src->pos);  // (the forward phase took these parts: never)
    }
  }
  return v;
}

inline int Exec::op_global(const Instr* ip) {
  fr[ip->x] = global_value(ip->src);
  return kContinue;
}

namespace {
Value prim_in_frame(Prim* p, Value arg, Pos pos);
}

inline int Exec::op_app(const Instr* ip) {
  work.applications++;
  if (ip->raw_call) {
    Value out[2];
    Value r = raw_apply(get(ip->a), arg_of(ip), ip->src->pos, ip->split ? out : nullptr, ip->src->xf);
    if (ip->split) {
      if (!r.is_unbound()) split_value(r, out, split_pattern(ip), split_pos(ip, ip->src->pos), self);
      fr[ip->x] = out[0];
      fr[ip->x2] = out[1];
    } else {
      fr[ip->x] = r;
    }
    return kContinue;
  }
  if (ip->split) {
    run_split(ip);
    return kContinue;
  }
  Value fv = get(ip->a);
  if (ip->chain_call) {
    // A native reverse rule is called at once (no pair for its argument, no trampoline).
    if (is(fv, Kind::Closure)) {
      Closure* callee = static_cast<Closure*>(fv.as_obj());
      Lambda* lam = callee->lambda;
      Value out[2];
      bool done = native_split(ip, lam, callee, get(ip->b), ip->op2 == AppPair ? get(ip->b2) : Value::unbound(), out);
      if (done) {
        r1 = out[0];
        r2 = way_out_bp(ip, out[0], out[1]);
        return (int)Exit::Pair;
      }
    }
    Value b = make_closure(ip->chain, nullptr, ip->ncaps);
    Closure* cl = static_cast<Closure*>(b.as_obj());
    for (int k = 0; k < ip->ncaps; k++) cl->env[k] = k == ip->hole ? Value::nil() : get(ip->caps[k]);
    chain = cl;
    hole = ip->hole;
    f = fv;
    arg = arg_of(ip);
    arg2 = Value::unbound();
    tail_pos = ip->site();
    return (int)Exit::ChainTail;
  }
  note_callee(ip, fv);
  if (ip->op2 != AppPair && !ip->tail && is(fv, Kind::Prim)) {
    // a primitive given one value (the AD library's %rzero, *j, *j-inverse in transformed
    // backpropagators: most of nested reverse mode's applications): called in its record at
    // once, without apply_core's set-up, as native code calls it (vlad_jit_prim1, vlad_jit_prim)
    fr[ip->x] = prim_in_frame(static_cast<Prim*>(fv.as_obj()), get(ip->b), ip->call_site());
    return kContinue;
  }
  if (ip->op2 == AppPair) {
    if (is(fv, Kind::Prim)) {
      Prim* p = static_cast<Prim*>(fv.as_obj());
      if (p->arity == 2 && p->fn2) {
        try {
          fr[ip->x] = p->fn2(p, get(ip->b), get(ip->b2));
        } catch (Error& e) {
          if (!e.pos.file) e.pos = ip->call_site();
          throw;
        }
        return kContinue;
      }
    } else if (is(fv, Kind::Closure)) {
      Closure* cl = static_cast<Closure*>(fv.as_obj());
      if (cl->lambda->native2) {
        Value r;
        try {
          r = cl->lambda->native2(cl, get(ip->b), get(ip->b2));
        } catch (Error& e) {  // (as a primitive's, at once: the call's position)
          if (!e.pos.file) e.pos = ip->call_site();
          throw;
        }
        if (!r.is_unbound()) {
          fr[ip->x] = r;
          return kContinue;
        }
      }
    }
  }
  Value av = arg_of(ip);
  if (ip->tail) {
    f = fv;
    arg = av;
    arg2 = Value::unbound();
    tail_pos = ip->call_site();
    return (int)Exit::Tail;
  }
  fr[ip->x] = apply(fv, av, ip->call_site());
  return kContinue;
}

inline int Exec::op_lambda(const Instr* ip) {
  Lambda* lam = ip->lam;
  int n = ip->ncaps;
  if (ip->self_ref) {  // a closure of the running lambda over the same environment
    fr[ip->x] = self;
    return kContinue;
  }
  if (ip->inert_guard && inert_value(get(ip->b))) {  // a way out whose value holds no real
    fr[ip->x] = zero_backpropagator(self, fr[0]);
    return kContinue;
  }
  if (n == 0) {
    fr[ip->x] = closure_of(lam, nullptr);
  } else {
    Value v = make_closure(lam, nullptr, n);
    Closure* cl = static_cast<Closure*>(v.as_obj());
    for (int k = 0; k < n; k++) cl->env[k] = get(ip->caps[k]);
    fr[ip->x] = v;
  }
  return kContinue;
}

inline int Exec::op_cons(const Instr* ip) {
  fr[ip->x] = cons(get(ip->a), get(ip->b));
  return kContinue;
}

inline int Exec::op_car_cdr(const Instr* ip) {
  Value v = get(ip->a);
  if (__builtin_expect(is_pair(v), 1)) {
    fr[ip->x] = ip->op == Op::Car ? car(v) : cdr(v);
    return kContinue;
  }
  return op_car_cdr_other(ip, v);
}

__attribute__((noinline)) int Exec::op_car_cdr_other(const Instr* ip, Value v) {
  if (is_j_view(v) && view_tag(v) == kViewJ) {  // a part of (*j P), lazily
    fr[ip->x] = j_part(static_cast<Pair*>(view_obj(v)), ip->op == Op::Cdr);
  } else if (zero_part(v, ip->op == Op::Cdr, &fr[ip->x])) {  // a part of a zero, lazily
  } else if (is_lazy(v)) {
    Value m = force(v);
    if (!is_pair(m)) shape_error(m, ip->src->pattern, ip->src->pos, self);
    fr[ip->x] = ip->op == Op::Car ? car(m) : cdr(m);
  } else if (v.is_zero_sens()) {  // a part of a placeholder zero
    fr[ip->x] = v;
  } else {
    shape_error(v, ip->src->pattern, ip->src->pos, self);
  }
  return kContinue;
}

inline int Exec::op_check(const Instr* ip) {
  Value v = get(ip->a);
  if (!matches_constant(v, ip->k())) pattern_error(v, ip->src);
  fr[ip->x] = Value::nil();
  return kContinue;
}

inline int Exec::op_if(const Instr* ip) {
  Value c = get(ip->a);
  const Code* branch = c.is_false() ? ip->else_ : ip->then_;
  if (ip->tail) return (int)run(branch);
  Exit e = run(branch);  // not in tail position: a value or a pair
  store(ip, e, "(cons value backpropagator)");
  return kContinue;
}

inline int Exec::op_backcall(const Instr* ip) {
  // (f̄ . x̄) = (unsensitize (bp (sensitize ȳ))), usually split at once
  work.applications++;
  Value out[3];
  // A backpropagator view taken apart at once (most of the backward pass of first-level code):
  // back_view directly, as back_call would call it.
  Value bp = get(ip->a), y = get(ip->b);
  if (ip->split && !zero_sensitivity(y)) note_backprop(ip, bp);
  if (bp.is_view() && ip->split && !zero_sensitivity(y) && back_view(bp, y, out, ip->split3)) {
    fr[ip->x] = out[0];
    fr[ip->x2] = out[1];
    if (ip->split3) fr[ip->x3] = out[2];
    return kContinue;
  }
  // A chain head's first instruction, which native code runs (the interpreter walks the chain
  // instead, run_raw): the rest of the chain as that walk runs it, with no call record of its
  // own for a raw backpropagator and the chain's call site for the end's.
  bool link = ip->op2 == BackChainLink;
  Pos pos = link ? call_records[eval_depth].pos : ip->call_site();
  if (ip->split3) {  // (f̄ a b) with x̄ = (a . b)
    back_call(bp, y, out, pos, true, !link);
    fr[ip->x] = out[0];
    fr[ip->x2] = out[1];
    fr[ip->x3] = out[2];
    return kContinue;
  }
  Value r = back_call(bp, y, out, pos, false, !link);
  if (r.is_unbound()) {
    r1 = out[0];
    r2 = out[1];
    store(ip, Exit::Pair, "(cons f-bar x-bar)");
  } else {
    r1 = r;
    store(ip, Exit::Value, "(cons f-bar x-bar)");
  }
  return kContinue;
}

inline int Exec::op_envref(const Instr* ip) {
  Value v = get(ip->a);
  fr[ip->x] = v.is_zero_sens() ? v : env_ref(v, ip->index, ip->lam);
  return kContinue;
}

// One instruction, interpreted.
int Exec::step(const Instr* ip) {
  switch (ip->op) {
    case Op::Const: return op_const(ip);
    case Op::Copy: return op_copy(ip);
    case Op::Sens: return op_sens(ip);
    case Op::Global: return op_global(ip);
    case Op::App: return op_app(ip);
    case Op::Lambda: return op_lambda(ip);
    case Op::Cons: return op_cons(ip);
    case Op::Car: return op_car_cdr(ip);
    case Op::Cdr: return op_car_cdr(ip);
    case Op::Check: return op_check(ip);
    case Op::If: return op_if(ip);
    case Op::BackCall: return op_backcall(ip);
    case Op::EnvRef: return op_envref(ip);
  }
  return kContinue;
}

Exit Exec::finish(const Code* c) {
  if (c->pair_result) {
    r1 = get(c->r1);
    if (c->triple_result) {
      if (want3) {
        r2 = get(c->r2);
        r3 = get(c->r3);
        return Exit::Triple;
      }
      r2 = cons(get(c->r2), get(c->r3));
      return Exit::Pair;
    }
    r2 = get(c->r2);
    return Exit::Pair;
  }
  r1 = get(c->result);
  return Exit::Value;
}

Exit Exec::interpret(const Code* c, int start) {
  work.steps += c->n - start;  // a block runs to its end (its last instruction may be a tail call)
  // Threaded dispatch: each kind of instruction jumps to the next one's handler itself (one
  // indirect jump a handler, each predicted on its own), in the order of Op.
  static void* const handlers[] = {&&Const, &&Copy, &&Global, &&App, &&Lambda, &&Cons, &&CarCdr,
                                   &&CarCdr, &&Check, &&If, &&EnvRef, &&BackCall, &&Sens};
  static_assert((int)Op::Sens == 12, "one handler per Op, in order");
  const Instr* ip = c->ins + start;
  const Instr* const end = c->ins + c->n;
  int e;
#define VLAD_NEXT                   \
  do {                              \
    if (++ip == end) goto done;     \
    goto* handlers[(int)ip->op];    \
  } while (0)
  if (ip == end) goto done;
  goto* handlers[(int)ip->op];
Const:
  op_const(ip);
  VLAD_NEXT;
Copy:
  op_copy(ip);
  VLAD_NEXT;
Sens:
  op_sens(ip);
  VLAD_NEXT;
Cons:
  op_cons(ip);
  VLAD_NEXT;
CarCdr:
  op_car_cdr(ip);
  VLAD_NEXT;
EnvRef:
  op_envref(ip);
  VLAD_NEXT;
Global:
  op_global(ip);
  VLAD_NEXT;
Check:
  op_check(ip);
  VLAD_NEXT;
Lambda:
  op_lambda(ip);
  VLAD_NEXT;
App:
  e = op_app(ip);
  if (e != kContinue) return Exit(e);
  VLAD_NEXT;
If:
  e = op_if(ip);
  if (e != kContinue) return Exit(e);
  VLAD_NEXT;
BackCall:
  e = op_backcall(ip);
  if (e != kContinue) return Exit(e);
  VLAD_NEXT;
#undef VLAD_NEXT
done:
  return finish(c);
}

// Errors raised in runtime calls of native code wait here while the native frames return.
static thread_local std::exception_ptr jit_pending;

void jit_keep_error() { jit_pending = std::current_exception(); }

// Runs f, a piece of the interpreter native code calls: its result, or kThrown with the error kept.
template <class F>
int jit_guard(F f) {
  try {
    return f();
  } catch (...) {
    jit_keep_error();
    return kThrown;
  }
}

Exit Exec::run_native(const Code* c, int start) {
  int r = jit_entry(this, start, &work, current->meter.data(), reinterpret_cast<void*>(c->native));
  if (r != kThrown) return Exit(r);
  std::exception_ptr e = jit_pending;
  jit_pending = nullptr;
  std::rethrow_exception(e);
}

// Each runtime call of native code runs one piece of the interpreter and keeps an error for
// run_native (native frames have no unwind tables).
#define VLAD_JIT_CALL(name, expr) \
  extern "C" int name(Exec* ex, const Instr* ip) { return jit_guard([&] { return expr; }); }
VLAD_JIT_CALL(vlad_jit_step, ex->step(ip))
VLAD_JIT_CALL(vlad_jit_sens, ex->op_sens(ip))
VLAD_JIT_CALL(vlad_jit_app, ex->op_app(ip))
VLAD_JIT_CALL(vlad_jit_lambda, ex->op_lambda(ip))
VLAD_JIT_CALL(vlad_jit_cons, ex->op_cons(ip))
VLAD_JIT_CALL(vlad_jit_car_cdr, ex->op_car_cdr(ip))
VLAD_JIT_CALL(vlad_jit_check, ex->op_check(ip))
VLAD_JIT_CALL(vlad_jit_backcall, ex->op_backcall(ip))
VLAD_JIT_CALL(vlad_jit_envref, ex->op_envref(ip))
VLAD_JIT_CALL(vlad_jit_global, ex->op_global(ip))

extern "C" int vlad_jit_store(Exec* ex, const Instr* ip, int e) {
  return jit_guard([&] {
    ex->store(ip, Exit(e), "(cons value backpropagator)");
    return Exec::kContinue;
  });
}

// After native code ran a raw backpropagator's body for a split BackCall (emit_back_raw): its
// halves (r1, r2: exit Pair) or its value (r1), stored as op_backcall stores what run_raw gives.
extern "C" int vlad_jit_back_done(Exec* ex, const Instr* ip, int e, uint64_t r1, uint64_t r2) {
  return jit_guard([&] {
    Value out[3];
    if (Exit(e) == Exit::Pair) {
      out[0] = Value(r1, 0);
      out[1] = Value(r2, 0);
    } else {
      split_value(Value(r1, 0), out, "(cons f-bar x-bar)", ip->call_site());
    }
    if (ip->split3) {
      split_sensitivity(out[1], out + 1);
      ex->fr[ip->x3] = out[2];
    }
    ex->fr[ip->x] = out[0];
    ex->fr[ip->x2] = out[1];
    return Exec::kContinue;
  });
}

VLAD_JIT_CALL(vlad_jit_arg_pair, (ex->arg = ex->arg_of(ip), Exec::kContinue))

namespace {
// A body is compiled once it has run jit_threshold times in a short while: its runs are counted
// in windows of 2^jit_window_bits of this thread's steps and halved for each window gone by. Code
// run once per pass of a large computation (W4's hundreds of bodies, transformed six times over)
// stays interpreted: compiled, it would bring ~5 MB of machine code through the instruction cache
// a pass, which costs more than the dispatch it saves (docs/native-tier.md).
inline bool hot(Code* c) {
  uint32_t now = (uint32_t)(work.steps >> current->jit_window_bits);
  if (c->runs_window != now) {
    uint32_t gone = now - c->runs_window;
    c->runs = gone >= 32 ? 0 : c->runs >> gone;
    c->runs_window = now;
  }
  return ++c->runs >= current->jit_threshold;
}
}  // namespace

Exit Exec::run(const Code* c, int start) {
  if (c->native) return run_native(c, start);
  if (c->entry && current->jit && !c->jit_failed && hot(const_cast<Code*>(c))) {
    jit_compile(const_cast<Code*>(c));
    if (c->native) return run_native(c, start);
  }
  return interpret(c, start);
}

namespace {


[[noreturn]] __attribute__((noinline, cold)) void depth_error(Interp* in) {
  long depth = eval_depth--;
  if (depth <= in->depth_limit)  // the evaluation stack ran out first: a higher limit cannot help
    throw Error("recursion too deep: the evaluation stack is full before the depth limit (" +
                std::to_string(in->depth_limit) + " nested calls) is reached");
  throw Error("recursion depth limit exceeded (" + std::to_string(in->depth_limit) +
              " nested calls): a recursion that does not end? (else raise the limit with " + in->depth_limit_knob + ")");
}

[[noreturn]] __attribute__((noinline, cold)) void interrupted(Interp* in, Pos at = Pos()) {
  in->interrupt = false;
  Error e("interrupted", at);
  e.interrupt = true;
  throw e;
}

[[noreturn]] __attribute__((noinline, cold)) void not_a_procedure(Value f, Value arg) {
  std::string hint;
  // (tangent b) of a procedure b is a perturbation of its tangent function
  if (f.is_obj() && (kind_of(f) == Kind::Perturbation || kind_of(f) == Kind::Sensitivity)) {
    Value in = static_cast<Tagged*>(f.as_obj())->v;
    if (is(in, Kind::Closure) || is(in, Kind::Prim))
      hint = kind_of(f) == Kind::Perturbation ? " (unperturb it to call the procedure)" : " (unsensitize it to call the procedure)";
  }
  // Under a derivative a non-procedure the program applies is seen bundled or reverse-tagged (the
  // transformed global `g` of (define g 3) is (forward 3 (perturbation 0))): the message is the
  // primal call's, of the values the program wrote (as other errors under AD are)
  if (f.is_obj() && (kind_of(f) == Kind::Bundle || kind_of(f) == Kind::Reverse)) {
    f = strip_tags(f);
    arg = strip_tags(arg);
  }
  throw Error("not a procedure: " + write_brief(f) + " cannot be applied to " + write_brief(arg) + hint);
}

// One level of nested evaluation: the depth limit, the stack guard and the call record.
// Enters a call's frame (its record at the new depth): the depth, or an error with none entered.
// A frame not `counted` has its record (in traces) but is not held to the depth limit (the C++
// stack is checked all the same).
inline long enter_frame(Value f, Pos pos, bool counted = true) {
  char here;
  long depth = ++eval_depth;
  Interp* in = current;
  if ((counted && depth > in->depth_limit) || &here < stack_limit) depth_error(in);
  if (depth >= call_capacity) {
    try {
      grow_call_records(depth);
    } catch (...) {
      eval_depth--;
      throw;
    }
  }
  CallRecord* rec = &call_records[depth];
  rec->f = f.bits;
  rec->pos = pos;
  return depth;
}

struct CallFrame {
  long depth;
  CallFrame(Value f, Pos pos, bool counted = true) : depth(enter_frame(f, pos, counted)) {}
  ~CallFrame() { eval_depth--; }
  CallRecord* record() const { return &call_records[depth]; }
};

// A primitive applied to one value (not a pair of arguments) in its record, as apply_core applies
// it, but not counted against the depth limit, which counts nested calls of procedures: native
// code runs such primitives inline for the arguments they usually get, without a record, and a
// primitive called at exactly the limit raised the error in the interpreter and not in native
// code (the fuzzer found it).
Value prim_in_frame(Prim* p, Value arg, Pos pos) {
  CallFrame frame(Value::obj(p), pos, false);
  Interp* in = current;
  if (in->interrupt.load(std::memory_order_relaxed)) interrupted(in);
  try {
    return apply_prim(p, arg);
  } catch (const std::bad_alloc&) {  // (a transform's containers past the heap limit: located)
    throw memory_error();
  }
}

}  // namespace

// (*j-inverse xr) taken apart at once (a primitive's reverse rule transformed again: its
// argument tuple, whose parts are reverse values) when xr is a pair: the parts without the pair
// (star_j_inverse_parts), as the primitive's call would give them, within its call frame. False
// when that does not apply (the call is made as before).
bool split_star_j_inverse(Exec* ex, const Instr* ip, Value fv) {
  Value a, d;
  if (ip->op2 == AppPair) {
    a = ex->get(ip->b);
    d = ex->get(ip->b2);
  } else {
    Value v = ex->get(ip->b);
    if (!is(v, Kind::Pair)) return false;
    a = static_cast<Pair*>(v.as_obj())->car;
    d = static_cast<Pair*>(v.as_obj())->cdr;
  }
  Value out[2];
  {
    CallFrame frame(fv, ip->call_site());
    Interp* in = current;
    if (in->interrupt.load(std::memory_order_relaxed)) interrupted(in);
    if (!star_j_inverse_parts(a, d, out)) return false;
  }
  ex->fr[ip->x] = out[0];
  ex->fr[ip->x2] = out[1];
  return true;
}

namespace {

// A tail call replaces its frame's record: the callee, and the call site unless that is inside
// the prelude or the rules (then the user's call site stays).
inline void note_tail_call(CallRecord* rec, Value f, Pos pos) {
  rec->f = f.bits;
  if (!internal(pos) || internal(rec->pos) || !rec->pos.file) rec->pos = pos;
}

Code* code_of(Lambda* lam) {
  if (!lam->code) {
    try {
      compile(lam);
    } catch (const std::bad_alloc&) {
      // (its containers past the heap limit: an Error, which the calls being unwound locate)
      throw memory_error();
    }
  }
  return lam->code;
}

}  // namespace

extern "C" int vlad_jit_self_tail(Exec* ex, const Instr* ip) {
  return jit_guard([&] {
    Interp* in = current;
    if (in->interrupt.load(std::memory_order_relaxed)) interrupted(in);
    note_tail_call(&call_records[eval_depth], ex->self, ip->site());  // apply_core's frame, as its loop does
    return Exec::kContinue;
  });
}

namespace {

// ---- chains ----
// A reverse-transformed body whose way out is a tail call (a loop, say) makes its backpropagator
// B before the call, with a hole where the callee's backpropagator goes: the call then replaces
// the caller's frame, and when the last callee returns (value . b̃), b̃ fills the last hole. Each
// B starts by calling the backpropagator in its hole (the chain_head code): calling the first
// one would recurse down the whole chain, so the chain is walked to its end, the backpropagator
// there called, and each B's rest run from the innermost out.

thread_local std::vector<Closure*>* chain_stack = nullptr;

// The walk back through a long chain prefetches the link it will run kChainAhead links ahead
// (in a large heap, a cache miss each: perf put a fifth of run_raw's time at W3's n = 10^6 on
// reading the next link, none with this).
constexpr size_t kChainAhead = 8;
inline void prefetch_link(const Closure* c) {
  __builtin_prefetch(c);
  __builtin_prefetch(reinterpret_cast<const char*>(c) + 64);
}

// Keeps a value where the collector sees it until this point.
inline void keep_alive(Value v) { asm volatile("" : : "r"(v.bits) : "memory"); }

// Runs the raw backpropagator cl on ȳ; the halves of its (f̄ . x̄) into out (returns unbound) or,
// for a body that returns a single value, that value. With `three`, (f̄, car x̄, cdr x̄) into out
// instead of the halves: x̄ taken apart, or never made when the body can give its parts
// (Exit::Triple).
// (`record` false: no call record for cl, a link of a chain whose record is the innermost one.)
// (as_procedure: called by a program with a sensitivity, not by a backpropagator call: a zero ȳ
// is not skipped — a skip's placeholder zeros would be its result, #<zero> — but given to the body)
Value run_raw(Closure* cl, Value y, Value* out, Pos pos, bool three = false, bool record = true, bool as_procedure = false) {
  const Code* lone = code_of(cl->lambda);
  if (!lone->chain_head && !cl->lambda->native_back) {  // no chain to walk: its body, as below
    std::optional<CallFrame> frame;
    if (record) frame.emplace(Value::obj(cl), pos);
    Value* fr = static_cast<Value*>(alloca(sizeof(Value) * std::max(1, lone->nslots)));
    Exec ex{fr, cl->env, Value::obj(cl), Value(), Value(), Value(), Value(), nullptr, 0, Pos()};
    ex.want3 = three;
    fr[0] = y;
    Exit e = ex.run(lone);
    if (e == Exit::Triple) {
      out[0] = ex.r1;
      out[1] = ex.r2;
      out[2] = ex.r3;
      return Value::unbound();
    }
    if (e != Exit::Pair) return ex.r1;
    if (!out) return cons(ex.r1, ex.r2);
    out[0] = ex.r1;
    out[1] = ex.r2;
    if (three) split_sensitivity(out[1], out + 1);
    return Value::unbound();
  }
  std::optional<CallFrame> frame;
  if (record) frame.emplace(Value::obj(cl), pos);
  if (!chain_stack) {
    // Room for a chain of 2^20 at once: pages the stack never reaches are never touched, and a
    // chain of 10^6 steps is not copied twenty times over, each copy on fresh pages.
    chain_stack = new std::vector<Closure*>();
    chain_stack->reserve(1u << 20);
  }
  std::vector<Closure*>& stack = *chain_stack;  // not scanned: `root` keeps the chain alive
  size_t base = stack.size();
  Value root = Value::obj(cl);
  int nslots = 1;
  // Walk to the end of the chain: `end` is either a raw backpropagator that does not start by
  // calling its hole (run here), or another kind of backpropagator (called).
  // (The links of a long chain are made by one lambda, as a rule: the walk reads that lambda's
  // hole once, so that each step waits on one load, from the link before.)
  Value end = root;
  Closure* direct = nullptr;
  Lambda* last = nullptr;
  int hole = 0;
  for (;;) {
    if (!is(end, Kind::Closure)) break;
    Closure* c = static_cast<Closure*>(end.as_obj());
    if (c->lambda != last) {
      if (!c->lambda->raw_bp) break;
      Code* code = code_of(c->lambda);
      nslots = std::max(nslots, code->nslots);
      if (!code->chain_head) {
        direct = c;
        break;
      }
      last = c->lambda;
      hole = code->chain_hole;
    }
    stack.push_back(c);
    end = c->env[hole];
  }
  size_t top = stack.size();
  Value* fr = static_cast<Value*>(alloca(sizeof(Value) * nslots));
  Exec ex;  // (field by field: the aggregate's zeroing compiled to `rep stos`, slow to start)
  ex.fr = fr;
  ex.env = nullptr;
  ex.chain = nullptr;
  ex.hole = 0;
  ex.tail_pos = Pos();
  // Each body's outcome goes to the first instruction of the one below it on the stack, the last
  // one's to the caller: each is asked for x̄'s parts when that consumer takes x̄ apart.
  auto asks3 = [&](size_t i) { return i > base ? stack[i - 1]->lambda->code->ins[0].split3 : three; };
  Value halves[3];  // (f̄, x̄) or, after Exit::Triple, (f̄, car x̄, cdr x̄)
  Exit e = Exit::Pair;
  try {
    if (direct && !(as_procedure && top == base) && (zero_sensitivity(y) || structural_zero(Value::obj(direct), y))) {
      // (the chain's end skipped as back_call skips it, and as native code, which enters a short
      // chain at its first instruction and so calls the end through a backpropagator call, does)
      halves[0] = halves[1] = halves[2] = Value::zero_sens();
      e = asks3(top) ? Exit::Triple : Exit::Pair;
    } else if (direct && direct->lambda->native_back && direct->lambda->native_back(direct, y, halves)) {
      // (a native form of the last backpropagator: the halves; when it declines, its body)
    } else if (direct) {
      fr[0] = y;
      ex.env = direct->env;
      ex.self = Value::obj(direct);
      ex.want3 = asks3(top);
      e = ex.run(direct->lambda->code);
      if (e == Exit::Pair || e == Exit::Triple) {
        halves[0] = ex.r1;
        halves[1] = ex.r2;
        if (e == Exit::Triple) halves[2] = ex.r3;
      }
    } else {
      Value r = back_call(end, y, halves, pos);
      if (!r.is_unbound()) split_value(r, halves, "(cons f-bar x-bar)", pos);
    }
    for (size_t i = top; i-- > base;) {
      if (e != Exit::Pair && e != Exit::Triple) split_value(ex.r1, halves, "(cons f-bar x-bar)", pos);
      if (i >= base + kChainAhead) prefetch_link(stack[i - kChainAhead]);
      Closure* c = stack[i];
      const Code* code = c->lambda->code;
      const Instr& first = code->ins[0];
      fr[0] = y;
      fr[first.x] = halves[0];
      if (first.split3 && e == Exit::Triple) {
        fr[first.x2] = halves[1];
        fr[first.x3] = halves[2];
      } else if (first.split3) {
        Value parts[2];
        split_sensitivity(halves[1], parts);
        fr[first.x2] = parts[0];
        fr[first.x3] = parts[1];
      } else {  // (never asked for the parts)
        fr[first.x2] = halves[1];
      }
      ex.env = c->env;
      ex.self = Value::obj(c);
      ex.want3 = asks3(i);
      e = ex.run(code, 1);
      if (e == Exit::Pair || e == Exit::Triple) {
        halves[0] = ex.r1;
        halves[1] = ex.r2;
        if (e == Exit::Triple) halves[2] = ex.r3;
      }
    }
  } catch (...) {
    stack.resize(base);
    throw;
  }
  stack.resize(base);
  keep_alive(root);
  if (e != Exit::Pair && e != Exit::Triple) return ex.r1;
  if (out) {
    out[0] = halves[0];
    out[1] = halves[1];
    if (e == Exit::Triple) out[2] = halves[2];
    else if (three) split_sensitivity(out[1], out + 1);
    return Value::unbound();
  }
  return cons(halves[0], halves[1]);
}

}  // namespace

// The meter's retained bytes: a backpropagator called by a program (not by another
// backpropagator) holds the whole tape of its forward phase.
void note_retained(Value bp) {
  void* obj = bp.as_obj();
  if (!last_retained_link) {
    last_retained_link = static_cast<uintptr_t*>(GC_MALLOC_ATOMIC_UNCOLLECTABLE(sizeof(uintptr_t)));
    *last_retained_link = 0;
  }
  if (*last_retained_link == GC_HIDE_POINTER(obj)) return;  // called again (one call per component of a Jacobian, say)
  forget_retained_note();
  *last_retained_link = GC_HIDE_POINTER(obj);
  GC_general_register_disappearing_link(reinterpret_cast<void**>(last_retained_link), obj);
  uint64_t b = reachable_bytes(bp);
  if (b > work.retained_peak) work.retained_peak = b;
}

namespace {

// Applies f to arg. With `out`, a callee that delivers its value as two halves (a pair result,
// a native reverse rule, a chain) writes them there and unbound is returned; otherwise the value.
Value apply_core(Value f, Value arg, Pos call_pos, Value* out, Lambda* entry = nullptr) {
  Interp* in = current;
  CallFrame frame(f, call_pos);
  Pos site = call_pos;  // the call now running: the last tail call's site once one is taken
  Value* fr = nullptr;
  int cap = 0;
  // The chain being made by tail calls of this frame: its first backpropagator (what the caller
  // gets) and the hole of its last.
  Value chain_first = Value::unbound();
  Closure* chain_last = nullptr;
  int chain_hole = 0;
  Value halves[2];
  for (;;) {
    if (in->interrupt.load(std::memory_order_relaxed)) interrupted(in);
    if (is(f, Kind::Closure)) {
      Closure* cl = static_cast<Closure*>(f.as_obj());
      Lambda* lam = cl->lambda;
      if (entry) {  // a raw call: this body over the closure's environment
        lam = entry;
        entry = nullptr;
        if (lam->native_split1 && out && lam->native_split1(cl, arg, halves)) break;
      } else if (lam->native_split1 && (out || chain_last)) {
        if (lam->native_split1(cl, arg, halves)) break;
      } else if (lam->native1) {
        Value r = lam->native1(cl, arg);
        if (!r.is_unbound()) {
          halves[0] = r;
          goto value;
        }
      }
      if (lam->raw_bp && lam == cl->lambda) {  // a backpropagator called as a procedure: (sensitize ∘ body ∘ unsensitize)
        if (in->meter_retained) note_retained(f);
        Value r = run_raw(cl, unsensitize(arg), halves, site, false, true, true);
        halves[0] = sensitize(r.is_unbound() ? cons(halves[0], halves[1]) : r);
        goto value;
      }
      const Code* code = code_of(lam);
      if (code->nslots > cap) {
        cap = code->nslots;
        fr = static_cast<Value*>(alloca(sizeof(Value) * cap));
      }
      fr[0] = arg;
      Exec ex{fr, cl->env, f, Value(), Value(), Value(), Value(), nullptr, 0, Pos()};
      Exit e = ex.run(code);
      if (ex.pend_first) {  // the links of a native loop's chain calls, made before its exit
        if (chain_last) chain_last->env[chain_hole] = Value::obj(ex.pend_first);
        else chain_first = Value::obj(ex.pend_first);
        chain_last = ex.pend_last;
        chain_hole = ex.pend_hole;
      }
      if (e == Exit::Tail || e == Exit::ChainTail) {
        if (e == Exit::ChainTail) {
          if (chain_last) chain_last->env[chain_hole] = Value::obj(ex.chain);
          else chain_first = Value::obj(ex.chain);
          chain_last = ex.chain;
          chain_hole = ex.hole;
        }
        f = ex.f;
        arg = ex.tail_arg();
        note_tail_call(frame.record(), f, ex.tail_pos);  // (the records may have moved while the body ran)
        site = ex.tail_pos;
        continue;
      }
      if (e == Exit::Pair) {
        halves[0] = ex.r1;
        halves[1] = ex.r2;
        break;
      }
      halves[0] = ex.r1;
      goto value;
    }
    if (is(f, Kind::Prim)) {
      halves[0] = apply_prim(static_cast<Prim*>(f.as_obj()), arg);
      goto value;
    }
    if (is(f, Kind::Zero)) {  // the zero of a procedure: materialise it and call that
      f = materialize_zero(f);
      continue;
    }
    if (f.is_view()) {  // a primitive's backpropagator, called as a procedure
      f = materialize_view(f);
      continue;
    }
    not_a_procedure(f, arg);
  }
  if (false) {
  value:  // a single value: done, unless a chain needs its two halves
    if (!chain_last) return halves[0];
    split_value(halves[0], halves, "(cons value backpropagator)", site);
  }
  if (chain_last) {  // the callee's backpropagator fills the last hole; the caller gets the first
    chain_last->env[chain_hole] = halves[1];
    halves[1] = chain_first;
  }
  if (out) {
    out[0] = halves[0];
    out[1] = halves[1];
    return Value::unbound();
  }
  return cons(halves[0], unview(halves[1]));
}

// A transformed backpropagator call (Binding::raw_call): the raw entry of t's lambda over t's
// environment; anything else is called as (%backcall t y), transformed by xf.
Value raw_apply(Value t, Value y, Pos pos, Value* out, const char* xf) {
  t = unview(t);
  if (is(t, Kind::Closure)) {
    Lambda* lam = static_cast<Closure*>(t.as_obj())->lambda;
    Lambda* entry = lam->raw_variant ? lam->raw_variant : lam->raw_bp ? lam : nullptr;
    if (entry) return apply_core(t, y, pos, out, entry);
  }
  Value helper = current->prelude_value("%backcall");
  for (const char* p = xf; *p; p++) helper = transform_value(helper, *p);
  return apply_core(helper, cons(t, y), pos, out);
}

}  // namespace

Value apply(Value f, Value arg, Pos call_pos) { return apply_core(f, arg, call_pos, nullptr); }

Value apply_split(Value f, Value arg, Pos call_pos, Value* out) { return apply_core(f, arg, call_pos, out); }

void poll_interrupt() {
  Interp* in = current;
  if (in && in->interrupt.load(std::memory_order_relaxed)) interrupted(in);
}

void poll_interrupt(Pos at) {
  Interp* in = current;
  if (in && in->interrupt.load(std::memory_order_relaxed)) interrupted(in, at);
}

ptrdiff_t depth_offset_from_work() { return (char*)&eval_depth - (char*)work_address(); }

EnterLayout enter_layout() {
  EnterLayout l;
  char* w = (char*)work_address();
  ptrdiff_t d[4] = {(char*)&current - w, (char*)&stack_limit - w, (char*)&call_records - w, (char*)&call_capacity - w};
  l.ok = true;
  for (ptrdiff_t x : d) l.ok = l.ok && x == (int32_t)x;
  l.current = (int32_t)d[0];
  l.stack_limit = (int32_t)d[1];
  l.records = (int32_t)d[2];
  l.capacity = (int32_t)d[3];
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winvalid-offsetof"  // Interp is not standard-layout; g++ lays it out plainly
  l.depth_limit = (int32_t)offsetof(Interp, depth_limit);
  l.interrupt = (int32_t)offsetof(Interp, interrupt);
#pragma GCC diagnostic pop
  l.record_bytes = (int32_t)sizeof(CallRecord);
  l.record_pos = (int32_t)offsetof(CallRecord, pos);
  static_assert(sizeof(std::atomic<bool>) == 1 && sizeof(Pos) == 16, "the inline frame entry reads these as laid out");
  return l;
}

extern "C" int vlad_jit_enter(uint64_t f, const Instr* ip) {
  return jit_guard([&] {
    long depth = enter_frame(Value(f, 0), ip->site());
    Interp* in = current;
    if (in->interrupt.load(std::memory_order_relaxed)) {  // as apply_core's loop, in the frame
      try {
        interrupted(in);
      } catch (...) {
        eval_depth = depth - 1;
        throw;
      }
    }
    return 0;
  });
}

// A tail call that a callee native code called directly made (its Exec at `callee`, exit Tail):
// when the new callee is a closure with native code of its own (Lambda::direct), the frame goes
// on with it, as apply_core's loop goes on (Ctrl-C checked, the call record updated): 1; else 0
// (vlad_jit_return then does the rest), or kThrown.
extern "C" int vlad_jit_tail(Exec* callee) {
  return jit_guard([&] {
    Value f = callee->f;
    if (!is(f, Kind::Closure) || !static_cast<Closure*>(f.as_obj())->lambda->direct) return 0;
    Interp* in = current;
    if (in->interrupt.load(std::memory_order_relaxed)) interrupted(in);
    note_tail_call(&call_records[eval_depth], f, callee->tail_pos);
    return 1;
  });
}

namespace {
// vlad_jit_return's work; chain0 (with its hole): a chain tail's backpropagator that native code
// made the first link of, before calling the chain tail's callee (vlad_jit_return_chain).
int jit_return(Exec* ex, const Instr* ip, Exec* callee, int e, Closure* chain0, int hole0) {
  long depth = eval_depth;  // the callee's frame, left here
  return jit_guard([&] {
    try {
      Exit x = Exit(e);
      // the chain made by the callee's chain calls, as apply_core links them
      Value first = Value::unbound();
      Closure* last = nullptr;
      int hole = 0;
      auto link = [&](Closure* from, Closure* to, int h) {
        if (last) last->env[hole] = Value::obj(from);
        else first = Value::obj(from);
        last = to;
        hole = h;
      };
      if (chain0) link(chain0, chain0, hole0);
      if (callee->pend_first) link(callee->pend_first, callee->pend_last, callee->pend_hole);
      if (x == Exit::ChainTail) link(callee->chain, callee->chain, callee->hole);
      Value out[2];
      Value r;
      Pos pos = ip->site();
      if (x == Exit::Tail || x == Exit::ChainTail) {
        // apply_core's loop goes on in the same frame: here a new one at the same depth, whose
        // record is what note_tail_call would make of the old one
        pos = call_records[depth].pos;
        if (!internal(callee->tail_pos) || internal(pos) || !pos.file) pos = callee->tail_pos;
        eval_depth = depth - 1;
        r = apply_core(callee->f, callee->tail_arg(), pos, ip->split || last ? out : nullptr);
      } else {
        eval_depth = depth - 1;
        if (x == Exit::Pair) {
          out[0] = callee->r1;
          out[1] = callee->r2;
          r = ip->split || last ? Value::unbound() : cons(out[0], unview(out[1]));
        } else {
          r = callee->r1;
        }
      }
      if (last) {  // the last hole gets the backpropagator of the last callee; the caller the first
        if (!r.is_unbound()) split_value(r, out, "(cons value backpropagator)", pos);
        last->env[hole] = out[1];
        out[1] = first;
        r = ip->split ? Value::unbound() : cons(out[0], out[1]);
      }
      if (ip->split) {  // as run_split
        if (!r.is_unbound()) split_value(r, out, split_pattern(ip), split_pos(ip, ip->call_site()), ex->self);
        ex->fr[ip->x] = out[0];
        ex->fr[ip->x2] = out[1];
      } else {
        ex->fr[ip->x] = r;
      }
      return Exec::kContinue;
    } catch (...) {
      eval_depth = depth - 1;
      throw;
    }
  });
}

}  // namespace

extern "C" int vlad_jit_return(Exec* ex, const Instr* ip, Exec* callee, int e) {
  return jit_return(ex, ip, callee, e, nullptr, 0);
}

// After a chain tail call that native code went on with in the same frame (its backpropagator
// `chain`, with `hole`, already made), the new callee's outcome that native code does not take
// (another chain, a tail call, a value): as vlad_jit_return, the chain linked first.
extern "C" int vlad_jit_return_chain(Exec* ex, const Instr* ip, Exec* callee, int e, uint64_t chain, int hole) {
  return jit_return(ex, ip, callee, e, static_cast<Closure*>(Value(chain, 0).as_obj()), hole);
}

extern "C" int vlad_jit_back_native(bool (*fn)(Closure*, Value, Value*), Closure* cl, uint64_t y, Value* out) {
  return jit_guard([&] {
    Value yv(y, 0);
    if (zero_sensitivity(yv) || structural_zero(Value::obj(cl), yv)) return 0;
    return fn(cl, yv, out) ? 1 : 0;
  });
}

extern "C" int vlad_jit_back_native3(Exec* ex, const Instr* ip, Closure* cl, Value* out) {
  return jit_guard([&] {
    Value y = ex->get(ip->b);
    if (zero_sensitivity(y) || structural_zero(Value::obj(cl), y)) return 0;
    std::optional<CallFrame> frame;
    if (ip->op2 != BackChainLink) frame.emplace(Value::obj(cl), ip->call_site());
    Value halves[2];
    if (!cl->lambda->native_back(cl, y, halves)) return 0;
    out[0] = halves[0];
    split_sensitivity(halves[1], out + 1);
    return 1;
  });
}

namespace {
// A binary primitive's function on the call's two operands, at once (op_app's fn2 case: no
// frame, the call's position given to an error without one).
int prim2_at_once(Exec* ex, const Instr* ip, Prim* p) {
  try {
    ex->fr[ip->x] = p->fn2(p, ex->get(ip->b), ex->get(ip->b2));
  } catch (Error& e) {
    if (!e.pos.file) e.pos = ip->site();  // (as native_split: any call)
    throw;
  }
  return Exec::kContinue;
}
}  // namespace

extern "C" int vlad_jit_prim(Exec* ex, const Instr* ip) {
  return jit_guard([&] {
    work.applications++;
    Value fv = ex->get(ip->a);
    Prim* p = static_cast<Prim*>(fv.as_obj());
    if (ip->split) {  // run_split's path
      if (p == current->p_star_j_inverse && split_star_j_inverse(ex, ip, fv)) return Exec::kContinue;
      Value arg = ex->arg_of(ip), r, out[2];
      {
        CallFrame frame(fv, ip->call_site());
        Interp* in = current;
        if (in->interrupt.load(std::memory_order_relaxed)) interrupted(in);
        r = apply_prim(p, arg);
      }
      split_value(r, out, split_pattern(ip), split_pos(ip, ip->call_site()), ex->self);
      ex->fr[ip->x] = out[0];
      ex->fr[ip->x2] = out[1];
      return Exec::kContinue;
    }
    if (ip->op2 == AppPair && p->arity == 2 && p->fn2) return prim2_at_once(ex, ip, p);
    if (ip->op2 != AppPair) {  // (op_app's case)
      ex->fr[ip->x] = prim_in_frame(p, ex->get(ip->b), ip->call_site());
      return Exec::kContinue;
    }
    Value arg = ex->arg_of(ip);
    CallFrame frame(fv, ip->call_site());
    Interp* in = current;
    if (in->interrupt.load(std::memory_order_relaxed)) interrupted(in);
    ex->fr[ip->x] = apply_prim(p, arg);
    return Exec::kContinue;
  });
}

// The same for a primitive of one argument, not split (native code checked which): its function
// called in its frame, as apply_core calls it.
extern "C" int vlad_jit_prim1(Exec* ex, const Instr* ip) {
  return jit_guard([&] {
    work.applications++;
    Prim* p = static_cast<Prim*>(ex->get(ip->a).as_obj());
    ex->fr[ip->x] = prim_in_frame(p, ex->get(ip->b), ip->call_site());
    return Exec::kContinue;
  });
}

extern "C" int vlad_jit_tail_prim(Exec* ex, const Instr* ip) {
  return jit_guard([&] {
    work.applications++;
    Value fv = ex->get(ip->a);
    Prim* p = static_cast<Prim*>(fv.as_obj());
    if (ip->op2 == AppPair && p->arity == 2 && p->fn2) return prim2_at_once(ex, ip, p);  // as op_app
    // apply_core's loop: the frame's record becomes the primitive's, then Ctrl-C, then the call
    Value arg = ex->arg_of(ip);
    note_tail_call(&call_records[eval_depth], fv, ip->call_site());
    Interp* in = current;
    if (in->interrupt.load(std::memory_order_relaxed)) interrupted(in);
    ex->fr[ip->x] = apply_prim(p, arg);
    return Exec::kContinue;
  });
}

extern "C" uint64_t vlad_jit_pair(uint64_t a, uint64_t b) {
  try {
    return cons(Value(a, 0), Value(b, 0)).bits;
  } catch (...) {
    jit_keep_error();
    return 0;
  }
}

Value back_call(Value bp, Value y, Value* out, Pos pos, bool three, bool record) {
  if (zero_sensitivity(y) || structural_zero(bp, y)) {
    out[0] = out[1] = out[2 * three] = Value::zero_sens();
    return Value::unbound();
  }
  if (three) {  // (f̄ car-x̄ cdr-x̄): the caller takes x̄ apart at once
    if (bp.is_view() && back_view(bp, y, out, true)) return Value::unbound();
    // a raw backpropagator gives the three itself (and may make no x̄); anything else, the halves
    bool raw = is(bp, Kind::Closure) && static_cast<Closure*>(bp.as_obj())->lambda->raw_bp;
    Value r = raw ? run_raw(static_cast<Closure*>(bp.as_obj()), y, out, pos, true, record) : back_call(bp, y, out, pos, false);
    if (r.is_unbound() && raw) return r;
    if (!r.is_unbound()) split_value(r, out, "(cons f-bar x-bar)", pos);
    split_sensitivity(out[1], out + 1);
    return Value::unbound();
  }
  if (bp.is_view()) {
    if (back_view(bp, y, out)) return Value::unbound();
    bp = materialize_view(bp);
  }
  if (is(bp, Kind::Closure)) {
    Closure* cl = static_cast<Closure*>(bp.as_obj());
    Lambda* lam = cl->lambda;
    if (lam->native_back && lam->native_back(cl, y, out)) return Value::unbound();
    if (lam->raw_bp) return run_raw(cl, y, out, pos, false, record);
  }
  return unsensitize(apply(bp, sensitize(y), pos));
}

void attach_trace(Error& e, long base) {
  if (e.traced) return;
  e.traced = true;
  long d = std::min(e.depth, call_capacity - 1);
  if (d > base && (!e.pos.file || internal(e.pos))) {
    // the innermost call with a known call site in the user's code
    Pos fallback = e.pos;
    e.pos = Pos();
    for (long k = d; k > base && !e.pos.file; k--)
      if (call_records[k].pos.file && !internal(call_records[k].pos)) e.pos = call_records[k].pos;
    if (!e.pos.file) e.pos = fallback.file ? fallback : call_records[d].pos;
  }
  // (an inner evaluation's error, passed on by a host primitive (call_host) to be traced on
  // here, whose trace is full already: trace_dropped counted every call below it then)
  if (e.trace_dropped) return;
  // A binary primitive's error raised in a rule's own backpropagator (the primitive applied to a
  // sensitivity a program gave that does not conform: (1 . 2) for a real) asks whether the user
  // gave the primitive three arguments (second_arg_error): they wrote no such call. Without it.
  if (d > base && is(Value(call_records[d].f, 0), Kind::Closure)) {
    Lambda* lam = static_cast<Closure*>(Value(call_records[d].f, 0).as_obj())->lambda;
    std::string m = e.what();
    size_t hint = lam->raw_bp && lam->pos.file == rules_file ? m.find(" takes 2 arguments: was it given") : std::string::npos;
    size_t open = hint == std::string::npos ? hint : m.rfind(" (", hint);
    if (open != std::string::npos) static_cast<std::runtime_error&>(e) = std::runtime_error(m.substr(0, open));
  }
  for (long k = d; k > base; k--) {
    const CallRecord& r = call_records[k];
    if (!r.pos.file) continue;  // the top-level form itself
    // a call inside a primitive's rule (its own frame follows, by the primitive's name), and the
    // application of what is no procedure (the message says so), are not calls a user wrote
    if (r.pos.file == rules_file) continue;
    Value f(r.f, 0);
    if (!is(f, Kind::Closure) && !is(f, Kind::Prim)) continue;
    if (f == Value::obj(current->p_error)) continue;  // (error ...) raised it: where is the location
    // a library procedure the library called (gradient-F's map): not a call the user made or
    // wrote; the user's function it calls reads "called by" the library procedure the user did call
    // (it read "in lambda, called by map / in map, called by gradient-F")
    if (internal(r.pos) && is(f, Kind::Closure) && internal(static_cast<Closure*>(f.as_obj())->lambda->pos)) continue;
    const char* name = callee_name(f);
    if (name[0] == '%' && name[1]) name++;  // a library helper (%jacobian-R): by the name a user knows
    if (!e.trace.empty()) {  // a recursion's calls from one site: one line, counted
      TraceEntry& last = e.trace.back();
      if (last.pos.file == r.pos.file && last.pos.line == r.pos.line && last.pos.col == r.pos.col && last.name == name) {
        last.repeats++;
        continue;
      }
    }
    if (e.trace.size() >= 20) {
      e.trace_dropped = k;
      break;
    }
    e.trace.push_back(TraceEntry{name, r.pos});
  }
}

Value run_toplevel(Interp& in, const TopLevel& t) {
  (void)in;
  compile(t.thunk);
  poll_interrupt(t.pos);  // (a Ctrl-C during the form's analysis: located at the form)
  return apply(closure_of(t.thunk, nullptr), Value::nil(), Pos());
}

}  // namespace vlad
