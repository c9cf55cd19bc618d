// eval.cpp — eval/apply over compiled A-normal bodies (paper §4's E and A).
// Tail calls loop in `apply` without growing the stack; non-tail calls recurse on the C++ stack,
// which the interpreter runs on a large dedicated thread stack, under a depth limit.
#include <alloca.h>

#include <algorithm>
#include <cstdlib>

#include "../ad/ad.hpp"
#include "code.hpp"
#include "interp.hpp"

namespace vlad {

thread_local Interp* current = nullptr;
thread_local char* stack_limit = nullptr;
thread_local long eval_depth = 0;

// The active calls, one record per depth: what was called and from where. Errors unwind the
// C++ stack without stopping in each frame; the trace is read from here afterwards (a frame
// replaced by a tail call is overwritten, as in Lua).
struct CallRecord {
  uint64_t f;
  Pos pos;
};
static thread_local CallRecord* call_records = nullptr;
static thread_local long call_capacity = 0;

// Positions inside the prelude and the primitives' rules: an error there is reported at the
// user's call, and a tail call inside them keeps the user's call site in the record.
static const char* const prelude_file = intern("<prelude>");
static const char* const rules_file = intern("<rules>");
static inline bool internal(Pos p) { return p.file == prelude_file || p.file == rules_file; }

void release_call_records() {
  free(call_records);
  call_records = nullptr;
  call_capacity = 0;
}

static void grow_call_records(long need) {
  long cap = call_capacity ? call_capacity : 1024;
  while (cap <= need) cap *= 2;
  call_records = static_cast<CallRecord*>(realloc(call_records, sizeof(CallRecord) * cap));
  if (!call_records) throw Error("out of memory");
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

[[noreturn]] __attribute__((noinline, cold)) void pattern_error(Value v, const Binding* b) {
  static const char* car_name = intern("car");
  static const char* cdr_name = intern("cdr");
  if (b->pattern == car_name || b->pattern == cdr_name)  // the prelude's inlined car and cdr
    throw Error(std::string(b->pattern) + ": expected a pair, got " + write_string(v), b->pos);
  throw Error("value " + write_string(v) + " does not match pattern " + (b->pattern ? b->pattern : "?"), b->pos);
}

// Compares a value with a constant pattern, looking through AD tags on reals.
bool matches_constant(Value v, Value k) {
  if (k.is_real()) {
    Value p = strip_tags(v);
    return p.is_real() && p.as_real() == k.as_real();
  }
  if (is(k, Kind::String)) return is(v, Kind::String) && string_of(v) == string_of(k);
  if (is_pair(k)) return is_pair(v) && matches_constant(car(v), car(k)) && matches_constant(cdr(v), cdr(k));
  if (is_lazy(v)) return matches_constant(force(v), k);
  return v == k;
}

Value global_value(Binding* b) {
  Value v = b->cell->value;
  if (v.is_unbound()) throw Error(std::string("unbound variable ") + b->cell->name, b->pos);
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
    return l->name ? l->name : "lambda";
  }
  if (is(f, Kind::Prim)) return static_cast<Prim*>(f.as_obj())->name;
  return "?";
}

struct Exec {
  Value* fr;
  Value* env;
  Pos tail_pos;  // the call site of the tail call run() returned

  Value get(int r) const { return r >= 0 ? fr[r] : env[-r - 1]; }

  // x, x2 = car, cdr of (f a): the forward phase's call in reverse-transformed code.
  void run_split(const Instr* ip) {
    Value fv = get(ip->a);
    Value out[2];
    if (is(fv, Kind::Closure)) {
      Closure* cl = static_cast<Closure*>(fv.as_obj());
      Lambda* lam = cl->lambda;
      bool done = ip->op2 == AppPair ? lam->native_split2 && lam->native_split2(cl, get(ip->b), get(ip->b2), out)
                                     : lam->native_split1 && lam->native_split1(cl, get(ip->b), out);
      if (done) {
        fr[ip->x] = out[0];
        fr[ip->x2] = out[1];
        return;
      }
    }
    Value av = ip->op2 == AppPair ? cons(get(ip->b), get(ip->b2)) : get(ip->b);
    split_into(ip, apply(fv, av, ip->src->pos), "(cons value backpropagator)");
  }

  // The two halves of a pair into slots x and x2 (a split instruction's result).
  void split_into(const Instr* ip, Value r, const char* shape_text) {
    if (is_lazy(r)) r = force(r);
    if (!is_pair(r)) {
      Binding shape;
      shape.pattern = shape_text;
      shape.pos = ip->src->pos;
      pattern_error(r, &shape);
    }
    fr[ip->x] = car(r);
    fr[ip->x2] = cdr(r);
  }

  // Runs a body. Returns true for a tail call (leaving the callee and argument in f, arg).
  bool run(const Code* c, Value& f, Value& arg, Value& result) {
    const Instr* ip = c->ins;
    const Instr* end = ip + c->n;
    work.steps += c->n;  // a block runs to its end (its last instruction may be a tail call)
    for (; ip < end; ip++) {
      switch (ip->op) {
        case Op::Const: fr[ip->x] = ip->k; break;
        case Op::Copy: fr[ip->x] = get(ip->a); break;
        case Op::Global: fr[ip->x] = global_value(ip->src); break;
        case Op::App: {
          work.applications++;
          if (ip->split) {
            run_split(ip);
            break;
          }
          Value fv = get(ip->a);
          Value av;
          if (ip->op2 == AppPair) {
            if (is(fv, Kind::Prim)) {
              Prim* p = static_cast<Prim*>(fv.as_obj());
              if (p->arity == 2 && p->fn2) {
                try {
                  fr[ip->x] = p->fn2(p, get(ip->b), get(ip->b2));
                } catch (Error& e) {
                  if (!e.pos.file) e.pos = ip->src->pos;
                  throw;
                }
                break;
              }
            } else if (is(fv, Kind::Closure)) {
              Closure* cl = static_cast<Closure*>(fv.as_obj());
              if (cl->lambda->native2) {
                Value r = cl->lambda->native2(cl, get(ip->b), get(ip->b2));
                if (!r.is_unbound()) {
                  fr[ip->x] = r;
                  break;
                }
              }
            }
            av = cons(get(ip->b), get(ip->b2));
          } else {
            av = get(ip->b);
          }
          if (ip->tail) {
            f = fv;
            arg = av;
            tail_pos = ip->src->pos;
            return true;
          }
          fr[ip->x] = apply(fv, av, ip->src->pos);
          break;
        }
        case Op::Lambda: {
          Lambda* lam = ip->src->lam;
          int n = ip->ncaps;
          if (n == 0) {
            fr[ip->x] = closure_of(lam, nullptr);
          } else {
            Value v = make_closure(lam, nullptr, n);
            Closure* cl = static_cast<Closure*>(v.as_obj());
            for (int k = 0; k < n; k++) cl->env[k] = get(ip->caps[k]);
            fr[ip->x] = v;
          }
          break;
        }
        case Op::Cons: fr[ip->x] = cons(get(ip->a), get(ip->b)); break;
        case Op::Car:
        case Op::Cdr: {
          Value v = get(ip->a);
          if (is_pair(v)) {
            fr[ip->x] = ip->op == Op::Car ? car(v) : cdr(v);
          } else if (is_lazy(v)) {
            Value m = force(v);
            if (!is_pair(m)) pattern_error(m, ip->src);
            fr[ip->x] = ip->op == Op::Car ? car(m) : cdr(m);
          } else {
            pattern_error(v, ip->src);
          }
          break;
        }
        case Op::Check: {
          Value v = get(ip->a);
          if (!matches_constant(v, ip->k)) pattern_error(v, ip->src);
          fr[ip->x] = Value::nil();
          break;
        }
        case Op::If: {
          Value c = get(ip->a);
          const Code* branch = c.is_false() ? ip->else_ : ip->then_;
          if (ip->tail) return run(branch, f, arg, result);
          Value r;
          if (run(branch, f, arg, r)) {  // cannot happen: branch not in tail position
            r = apply(f, arg);
          }
          fr[ip->x] = r;
          break;
        }
        case Op::BackCall: {  // (f̄ . x̄) = (unsensitize (bp (sensitize ȳ))), usually split at once
          work.applications++;
          Value fv = get(ip->a);
          Value out[2];
          if (is(fv, Kind::Closure)) {
            Closure* cl = static_cast<Closure*>(fv.as_obj());
            if (cl->lambda->native_back && cl->lambda->native_back(cl, get(ip->b), out)) {
              if (ip->split) {
                fr[ip->x] = out[0];
                fr[ip->x2] = out[1];
              } else {
                fr[ip->x] = cons(out[0], out[1]);
              }
              break;
            }
          }
          Value r = unsensitize(apply(fv, sensitize(get(ip->b)), ip->src->pos));
          if (ip->split) split_into(ip, r, "(cons f-bar x-bar)");
          else fr[ip->x] = r;
          break;
        }
        case Op::EnvRef: {
          Value v = get(ip->a);
          fr[ip->x] = env_ref(v, ip->src->index, ip->src->lam);
          break;
        }
      }
    }
    result = get(c->result);
    return false;
  }
};

[[noreturn]] __attribute__((noinline, cold)) void depth_error(Interp* in) {
  eval_depth--;
  throw Error("recursion depth limit exceeded (" + std::to_string(in->depth_limit) +
              " nested calls); raise it with --depth-limit");
}

[[noreturn]] __attribute__((noinline, cold)) void interrupted(Interp* in) {
  in->interrupt = false;
  throw Error("interrupted");
}

[[noreturn]] __attribute__((noinline, cold)) void not_a_procedure(Value f, Value arg) {
  throw Error("not a procedure: " + write_string(f) + " cannot be applied to " + write_string(arg));
}

}  // namespace

Value apply(Value f, Value arg, Pos call_pos) {
  Interp* in = current;
  char here;
  long depth = ++eval_depth;
  if (depth > in->depth_limit || &here < stack_limit) depth_error(in);
  struct DepthGuard {
    ~DepthGuard() { eval_depth--; }
  } guard;
  if (depth >= call_capacity) grow_call_records(depth);
  CallRecord* rec = &call_records[depth];
  rec->f = f.bits;
  rec->pos = call_pos;
  Value* frame = nullptr;
  int cap = 0;
  for (;;) {
    if (in->interrupt.load(std::memory_order_relaxed)) interrupted(in);
    if (is(f, Kind::Closure)) {
      Closure* cl = static_cast<Closure*>(f.as_obj());
      Lambda* lam = cl->lambda;
      if (lam->native1) {
        Value r = lam->native1(cl, arg);
        if (!r.is_unbound()) return r;
      }
      if (!lam->code) compile(lam);
      const Code* code = lam->code;
      if (code->nslots > cap) {
        cap = code->nslots;
        frame = static_cast<Value*>(alloca(sizeof(Value) * cap));
      }
      frame[0] = arg;
      Exec ex{frame, cl->env, Pos()};
      Value result;
      if (ex.run(code, f, arg, result)) {
        rec = &call_records[depth];  // the records may have moved while the body ran
        rec->f = f.bits;
        if (!internal(ex.tail_pos) || internal(rec->pos) || !rec->pos.file) rec->pos = ex.tail_pos;
        continue;
      }
      return result;
    }
    if (is(f, Kind::Prim)) return apply_prim(static_cast<Prim*>(f.as_obj()), arg);
    if (is(f, Kind::Zero)) {  // the zero of a procedure: materialise it and call that
      f = materialize_zero(f);
      continue;
    }
    not_a_procedure(f, arg);
  }
}

void attach_trace(Error& e) {
  if (e.traced) return;
  e.traced = true;
  long d = std::min(e.depth, call_capacity - 1);
  if (d >= 1 && (!e.pos.file || internal(e.pos))) {
    // the innermost call with a known call site in the user's code
    Pos fallback = e.pos;
    e.pos = Pos();
    for (long k = d; k >= 1 && !e.pos.file; k--)
      if (call_records[k].pos.file && !internal(call_records[k].pos)) e.pos = call_records[k].pos;
    if (!e.pos.file) e.pos = fallback.file ? fallback : call_records[d].pos;
  }
  for (long k = d; k >= 1; k--) {
    if (e.trace.size() >= 20) {
      e.trace_dropped = k;
      break;
    }
    const CallRecord& r = call_records[k];
    if (!r.pos.file) continue;  // the top-level form itself
    e.trace.push_back(TraceEntry{callee_name(Value(r.f, 0)), r.pos});
  }
}

Value run_toplevel(Interp& in, const TopLevel& t) {
  (void)in;
  compile(t.thunk);
  return apply(closure_of(t.thunk, nullptr), Value::nil(), Pos());
}

}  // namespace vlad
