// transform.cpp — the run-time transforms of lambda bodies, computed once per lambda and cached.
// Forward (j*): the body with every value bundled — constants bundled with zero tangents, every
// closure and global seen through j*, calls calling the transformed callee.
// Reverse (*j): paper §4 — the forward phase φ of each binding, then a backpropagator lambda
// that runs ρ of each binding in reverse order, accumulating sensitivities with ⊕.
#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <memory_resource>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "../eval/depth_lease.hpp"
#include "../eval/interp.hpp"
#include "flat_map.hpp"
#include "../prims/prims.hpp"
#include "ad.hpp"

namespace vlad {

namespace {

template <class K, class V>
using PMap = std::pmr::unordered_map<K, V>;
template <class K>
using PSet = std::pmr::unordered_set<K>;
using VarMap = PMap<Var*, Var*>;

// A fresh variable named "F:name" or "R:name" (tag 'F' or 'R'). Names are interned, so the
// tagged name is looked up by the name's address, not built and interned again for each of the
// thousands of variables a nested transform makes.
Var* tagged_var(Var* v, char tag) {
  thread_local std::unordered_map<const char*, const char*> names[2];
  const char*& n = names[tag == 'R'][v->name];
  if (!n) n = intern(std::string(1, tag) + ":" + v->name);
  return new_var(n);
}

template <class Map>
Var* lookup(const Map& m, Var* v) {
  auto it = m.find(v);
  if (it == m.end()) throw Error(std::string("internal error: transform lost variable ") + v->name);
  return it->second;
}

Var* cap_of(const Binding& b, size_t k) { return b.caps ? b.caps[k] : b.lam->free[k]; }

template <class Map>
Var** map_caps(const Binding& b, const Map& m) {
  size_t n = b.lam->free.size();
  Var** caps = static_cast<Var**>(gc_alloc(sizeof(Var*) * (n ? n : 1)));
  for (size_t k = 0; k < n; k++) caps[k] = lookup(m, cap_of(b, k));
  return caps;
}

const char* append_xf(const char* xf, char t) { return intern(std::string(xf) + t); }

// ---- bodies at their exact size ----
// The reverse transform emits a body binding by binding, and the body then lives as long as its
// lambda (the source of the next level's transform, marked by every collection). Grown by
// doubling, it would be copied about twice over and keep up to half its bytes unused (W4's six
// levels: 36,513 bindings, a third of its first call spent copying them). A body being emitted
// takes a buffer from this thread's pool instead, whose capacity is kept from body to body, and
// is copied out at its exact size when finished (fit_body), the buffer going back to the pool.
constexpr int kPoolBuffers = 64;
struct BindingPool {
  gc_vector<Binding> buffers[kPoolBuffers];  // (in uncollectable memory: the collector scans it)
  int n = 0;
};
thread_local BindingPool* binding_pool = nullptr;
// How many ensure_body calls this thread is inside: the pool serves only bodies a transform emits
// (a lone body made elsewhere keeps its own small buffer). The pool lives until the thread's
// evaluation ends (release_binding_pool, runner.cpp): given back after each outermost transform,
// it was refilled too often to pay (W4's first call: 118 M instructions against 110). Its idle
// buffers keep their last contents, copies of live bindings, until reused.
thread_local int transforming = 0;

BindingPool* pool() {
  if (!binding_pool) binding_pool = new (gc_alloc_uncollectable(sizeof(BindingPool))) BindingPool();
  return binding_pool;
}

// An empty body about to be emitted into: a pooled buffer, when there is one.
void take_buffer(Body* b) {
  if (transforming == 0) return;
  BindingPool* p = pool();
  if (p->n > 0) b->binds.swap(p->buffers[--p->n]);
}

// A finished body (and its branches) at its exact size; its buffer back to the pool.
void fit_body(Body* b) {
  for (Binding& bd : b->binds)
    if (bd.op == Op::If) {
      fit_body(bd.then_);
      fit_body(bd.else_);
    }
  if (b->binds.capacity() == b->binds.size()) return;
  gc_vector<Binding> exact(b->binds.begin(), b->binds.end());
  exact.swap(b->binds);
  BindingPool* p = pool();
  if (p->n == kPoolBuffers) return;  // (exact frees the old buffer)
  exact.clear();
  p->buffers[p->n++].swap(exact);
}

}  // namespace

void release_binding_pool() {
  if (!binding_pool) return;
  binding_pool->~BindingPool();
  gc_free_uncollectable(binding_pool);
  binding_pool = nullptr;
}

namespace {

// ---- emitting bindings ----
struct Emitter {
  Body* body;
  Pos pos;
  // One constant binding per primitive per body: the transforms insert plus, %rzero, sensitize
  // ... many times, and every binding is transformed again under nesting.
  std::unordered_map<Prim*, Var*> prims{};
  Binding& emit(Op op, const char* name) {
    work.transformed_bindings++;
    if (body->binds.capacity() == 0) take_buffer(body);
    body->binds.emplace_back();
    Binding& b = body->binds.back();
    b.op = op;
    b.x = new_var(name);
    b.pos = pos;
    return b;
  }
  Var* constant(Value v) {
    Binding& b = emit(Op::Const, "k");
    b.constant = v;
    return b.x;
  }
  // A binding of two operands.
  Var* binary(Op op, const char* name, Var* a, Var* d) {
    Binding& b = emit(op, name);
    b.a = a;
    b.b = d;
    return b.x;
  }
  Var* app(Var* f, Var* a) { return binary(Op::App, "call", f, a); }
  Var* prim(Prim* p) {
    auto it = prims.find(p);
    if (it != prims.end()) return it->second;
    return prims[p] = constant(Value::obj(p));
  }
  Var* prim_app(Prim* p, Var* a) { return app(prim(p), a); }
  Var* cons(Var* a, Var* d) { return binary(Op::Cons, "cons", a, d); }
  Var* proj(Op op, Var* a, const char* pattern = "(cons value backpropagator)") {
    Binding& b = emit(op, op == Op::Car ? "car" : "cdr");
    b.a = a;
    b.pattern = pattern;
    return b.x;
  }
  // The two halves of a pair-valued binding's result (the compiler fuses the three).
  std::pair<Var*, Var*> split(Var* p, const char* pattern) { return {proj(Op::Car, p, pattern), proj(Op::Cdr, p, pattern)}; }
  Var* env_ref(Var* a, int index, Lambda* lam) {
    Binding& b = emit(Op::EnvRef, "env");
    b.a = a;
    b.index = index;
    b.lam = lam;
    return b.x;
  }
  Var* lambda(Lambda* lam, Var** caps) {
    Binding& b = emit(Op::Lambda, lam->name ? lam->name : "lambda");
    b.lam = lam;
    b.caps = caps;
    return b.x;
  }
  Var* back_call(Var* bp, Var* y) { return binary(Op::BackCall, "back", bp, y); }
  // s, or the zero of (*j-inverse fw) when s is the placeholder zero of backpropagator code.
  Var* sens(Var* s, Var* fw) { return binary(Op::Sens, "sens", s, fw); }
};

// A copy of a body with fresh variables for everything it binds; `m` maps the variables it
// refers to but does not bind (those absent from `m` are kept).
Body* clone_body(Body* src, VarMap& m) {
  auto get = [&](Var* v) -> Var* {
    if (!v) return nullptr;
    auto it = m.find(v);
    return it == m.end() ? v : it->second;
  };
  Body* out = new_body();
  out->binds.reserve(src->binds.size());
  for (const Binding& b : src->binds) {
    Binding n = b;
    n.a = get(b.a);
    n.b = get(b.b);
    if (b.op == Op::Global) n.cache_in.bits = n.cache_out.bits = 0;  // (no transform cached yet)
    if (b.op == Op::Lambda) {
      size_t k = b.lam->free.size();
      n.caps = static_cast<Var**>(gc_alloc(sizeof(Var*) * (k ? k : 1)));
      for (size_t i = 0; i < k; i++) n.caps[i] = get(cap_of(b, i));
    }
    if (b.op == Op::If) {
      n.then_ = clone_body(b.then_, m);
      n.else_ = clone_body(b.else_, m);
    }
    n.x = new_var(b.x->name);
    m[b.x] = n.x;
    out->binds.push_back(n);
  }
  out->result = get(src->result);
  return out;
}

// ---- constants as free variables ----

bool holds_real(Value v) {
  for (;;) {
    if (v.is_real()) return true;
    if (!is_pair(v)) return false;
    if (holds_real(car(v))) return true;
    v = cdr(v);
  }
}

void convert_constants(Body* b, std::vector<Var*>& ks, gc_vector<Value>& vals) {
  for (Binding& bd : b->binds) {
    if (bd.op == Op::Const && holds_real(bd.constant)) {
      Var* k = new_var(intern("%k" + std::to_string(ks.size())));
      ks.push_back(k);
      vals.push_back(bd.constant);
      bd.op = Op::Copy;
      bd.a = k;
      bd.constant = Value();
    } else if (bd.op == Op::If) {
      convert_constants(bd.then_, ks, vals);
      convert_constants(bd.else_, ks, vals);
    }
  }
}

gc_vector<Value>* new_values() { return new (gc_alloc(sizeof(gc_vector<Value>))) gc_vector<Value>(); }

bool own_real_constant(Body* b) {
  for (const Binding& bd : b->binds) {
    if (bd.op == Op::Const && holds_real(bd.constant)) return true;
    if (bd.op == Op::If && (own_real_constant(bd.then_) || own_real_constant(bd.else_))) return true;
  }
  return false;
}

// The text of a lambda up to the names of its bound variables: free variables of the outermost
// by name, of nested lambdas by index (their captures name them); a lambda met again inside
// itself (a letrec) by its depth.
struct ShapeWriter {
  std::string out;
  std::vector<Lambda*> stack;

  void lambda(Lambda* lam) {
    for (size_t i = 0; i < stack.size(); i++)
      if (stack[i] == lam) {
        out += "(rec " + std::to_string(i) + ")";
        return;
      }
    ensure_body(lam);
    if (!lam->free_done) compute_free_variables(lam);
    std::unordered_map<Var*, int> bound;
    bound[lam->param] = 0;
    stack.push_back(lam);
    out += "(lambda";
    body(lam, lam->body, bound);
    out += ")";
    stack.pop_back();
  }

  void ref(Lambda* lam, Var* v, const std::unordered_map<Var*, int>& bound) {
    auto it = bound.find(v);
    if (it != bound.end()) {
      out += " b" + std::to_string(it->second);
      return;
    }
    if (stack.size() == 1) {
      out += std::string(" f:") + v->name;
      return;
    }
    if (lam->free.size() <= 16) {
      for (size_t i = 0; i < lam->free.size(); i++)
        if (lam->free[i] == v) {
          out += " n" + std::to_string(i);
          return;
        }
    } else {  // (indexed: a lambda of n free variables reading each was n^2)
      auto& index = free_index[lam];
      if (index.empty())
        for (size_t i = lam->free.size(); i-- > 0;) index[lam->free[i]] = (int)i;  // (the first wins)
      auto f = index.find(v);
      if (f != index.end()) {
        out += " n" + std::to_string(f->second);
        return;
      }
    }
    out += " ?";
  }
  std::unordered_map<Lambda*, std::unordered_map<Var*, int>> free_index;

  void body(Lambda* lam, Body* b, std::unordered_map<Var*, int>& bound) {
    for (const Binding& bd : b->binds) {
      out += " (" + std::to_string((int)bd.op);
      if (bd.a) ref(lam, bd.a, bound);
      if (bd.b) ref(lam, bd.b, bound);
      switch (bd.op) {
        case Op::Const:
        case Op::Check: out += " " + write_string(bd.constant); break;
        case Op::Global: out += std::string(" ") + bd.cell->name + "/" + bd.xf; break;
        case Op::EnvRef:
        case Op::Sens: out += " " + std::to_string(bd.index); break;
        case Op::App: out += bd.raw_call ? std::string(" raw/") + bd.xf : ""; break;
        case Op::Lambda:
          for (size_t k = 0; k < bd.lam->free.size(); k++) ref(lam, cap_of(bd, k), bound);
          lambda(bd.lam);
          break;
        case Op::If:
          body(lam, bd.then_, bound);
          out += " |";
          body(lam, bd.else_, bound);
          break;
        default: break;
      }
      out += ")";
      int n = (int)bound.size();
      bound[bd.x] = n;
    }
    ref(lam, b->result, bound);
  }
};

}  // namespace

Lambda* constant_converted(Lambda* L) {
  if (L->cc) return L->cc;
  if (L->cc_none) return nullptr;
  if (L->rule_of || L->raw_bp || L->way_out || L->group) {  // (never unset)
    L->cc_none = true;
    return nullptr;
  }
  if (L->transform == 'F' || L->transform == 'R') {
    // T(S): T of S with its constants as free variables, whose values are T of S's constants
    Lambda* S = L->source ? constant_converted(L->source) : nullptr;
    if (!S) {
      L->cc_none = !L->source || L->source->cc_none;  // (W4: zeros of rules transformed six times)
      return nullptr;
    }
    L->cc_consts = new_values();
    Lambda* C = L;
    if (S != L->source) {
      C = L->transform == 'F' ? forward_transform(S) : reverse_transform(S);
      for (Value k : *L->source->cc_consts) L->cc_consts->push_back(transform_value(k, L->transform));
      C->cc = C;
      if (!C->cc_consts) C->cc_consts = new_values();
      C->shape = intern(std::string(1, L->transform) + S->shape);
    }
    C->cc_nconst = S->cc_nconst;
    L->shape = intern(std::string(1, L->transform) + S->shape);
    L->cc = C;
    return C;
  }
  if (L->transform || L->lazy_of || !L->body) return nullptr;
  if (!L->free_done) compute_free_variables(L);
  L->cc_consts = new_values();
  Lambda* C = L;
  if (own_real_constant(L->body)) {
    AnalysisScope analysis;
    VarMap m;
    C = new_lambda();
    C->param = new_var(L->param->name);
    m[L->param] = C->param;
    C->body = clone_body(L->body, m);
    std::vector<Var*> ks;
    convert_constants(C->body, ks, *L->cc_consts);
    C->name = L->name;
    C->pos = L->pos;
    C->free.assign(L->free.begin(), L->free.end());
    C->free.insert(C->free.end(), ks.begin(), ks.end());  // fresh: their ids follow L's
    C->cc_nconst = (int)ks.size();
    C->free_done = true;
    C->cc = C;
    C->cc_consts = new_values();
  }
  ShapeWriter w;
  w.lambda(C);
  C->shape = intern(w.out);
  L->shape = C->shape;
  L->cc = C;
  return C;
}

bool closures_conform(Value x, Value y, Lambda** lam, gc_vector<Value>* ex, gc_vector<Value>* ey) {
  Closure* a = static_cast<Closure*>(x.as_obj());
  Closure* b = static_cast<Closure*>(y.as_obj());
  Lambda* la = constant_converted(a->lambda);
  Lambda* lb = constant_converted(b->lambda);
  if (!la || !lb || (la != lb && la->shape != lb->shape)) return false;
  auto ext = [](Closure* c, gc_vector<Value>* e) {
    e->assign(c->env, c->env + c->aux);
    e->insert(e->end(), c->lambda->cc_consts->begin(), c->lambda->cc_consts->end());
  };
  ext(a, ex);
  ext(b, ey);
  if (la != lb) {  // y's environment in x's order, by the names of the free variables
    gc_vector<Value> r(la->free.size());
    for (size_t i = 0; i < la->free.size(); i++) {
      size_t j = 0;
      while (j < lb->free.size() && strcmp(lb->free[j]->name, la->free[i]->name)) j++;
      if (j == lb->free.size()) return false;
      r[i] = (*ey)[j];
    }
    *ey = std::move(r);
  }
  *lam = la;
  return true;
}

namespace {

// A raw backpropagator (lam->raw_bp) takes ȳ and returns (f̄ . x̄) without sensitivity tags;
// as a value it is the procedure (sensitize ∘ body ∘ unsensitize) (SPEC §4). That procedure as
// an explicit lambda, with the same free variables, is what the transforms see.
Lambda* tagged_version(Lambda* B) {
  if (B->wrapped) return B->wrapped;
  if (!B->free_done) compute_free_variables(B);
  Lambda* W = new_lambda();
  W->name = B->name;
  W->pos = B->pos;
  W->param = new_var("ys");
  W->free.assign(B->free.begin(), B->free.end());
  W->free_done = true;
  W->lazy_of = B;
  W->lazy_kind = 'W';
  B->wrapped = W;
  return W;
}

Body* tagged_body(Lambda* W, Lambda* B) {
  ensure_body(B);
  Body* body = new_body();
  Emitter e{body, B->pos};
  Var* y = e.prim_app(current->p_unsensitize, W->param);
  VarMap m;
  m[B->param] = y;
  Body* copy = clone_body(B->body, m);
  for (const Binding& b : copy->binds) body->binds.push_back(b);
  body->result = e.prim_app(current->p_sensitize, copy->result);
  return body;
}

// ---- forward ----

Body* forward_body(Body* src, VarMap& m) {
  Body* out = new_body();
  out->binds.reserve(src->binds.size());
  for (const Binding& b : src->binds) {
    Binding n = b;
    work.transformed_bindings++;
    n.x = tagged_var(b.x, 'F');
    if (b.a) n.a = lookup(m, b.a);
    if (b.b) n.b = lookup(m, b.b);
    if (b.op == Op::Global) n.cache_in.bits = n.cache_out.bits = 0;  // (no transform cached yet)
    switch (b.op) {
      case Op::Const: n.constant = j_star(b.constant); break;
      case Op::Global: n.xf = append_xf(b.xf, 'F'); break;
      case Op::BackCall:  // the raw entry of the forward transform of the backpropagator
        n.op = Op::App;
        n.raw_call = true;
        n.xf = append_xf("", 'F');
        break;
      case Op::App:
        if (b.raw_call) n.xf = append_xf(b.xf, 'F');
        break;
      case Op::Lambda:
        n.lam = forward_transform(b.lam);
        n.caps = map_caps(b, m);
        break;
      case Op::EnvRef: n.lam = forward_transform(b.lam); break;
      case Op::If:
        n.then_ = forward_body(b.then_, m);
        n.else_ = forward_body(b.else_, m);
        break;
      default: break;
    }
    m[b.x] = n.x;
    out->binds.push_back(n);
  }
  out->result = lookup(m, src->result);
  return out;
}

// The transform of lam before its body is made (ensure_body maps lam's variables to these).
Lambda* start_transform(Lambda* lam, char t) {
  Lambda* r = new_lambda();
  r->transform = t;
  r->source = lam;
  r->name = lam->name;
  r->pos = lam->pos;
  if (!lam->free_done) compute_free_variables(lam);
  r->param = tagged_var(lam->param, t);
  r->free.reserve(lam->free.size());
  for (Var* v : lam->free) r->free.push_back(tagged_var(v, t));
  r->free_done = true;
  return r;
}

// ---- reverse ----

Lambda* general_reverse(Lambda* lam);

// Op::Car or Op::Cdr when b reads the user's global car or cdr untransformed; else Op::App.
Op user_projection(const Binding& b) {
  if (b.op != Op::Global || *b.xf) return Op::App;
  return b.cell == current->user_car ? Op::Car : b.cell == current->user_cdr ? Op::Cdr : Op::App;
}

// The variables a branch of an `if` refers to but does not bind, in id order.
void branch_refs(Body* b, std::set<Var*>& refs, std::set<Var*>& bound) {
  for (const Binding& bd : b->binds) {
    bound.insert(bd.x);
    if (bd.a) refs.insert(bd.a);
    if (bd.b) refs.insert(bd.b);
    if (bd.op == Op::If) {
      branch_refs(bd.then_, refs, bound);
      branch_refs(bd.else_, refs, bound);
    } else if (bd.op == Op::Lambda) {
      for (size_t k = 0; k < bd.lam->free.size(); k++) refs.insert(cap_of(bd, k));
    }
  }
  refs.insert(b->result);
}

std::vector<Var*> if_free_vars(const Binding& b) {
  std::set<Var*> refs, bound;
  refs.insert(b.a);
  branch_refs(b.then_, refs, bound);
  branch_refs(b.else_, refs, bound);
  std::vector<Var*> out;
  for (Var* v : refs)
    if (!bound.count(v)) out.push_back(v);
  std::sort(out.begin(), out.end(), [](Var* x, Var* y) { return x->id < y->id; });
  return out;
}

// A reverse transform's arena starts in a block the thread keeps per depth of transforms (grown
// from malloc, an arena took ~17 blocks a transform: W4's first call made 11,000 aligned
// allocations and frees). (The lease is a base so that it is made before the arena.)
struct ArenaBlock {
  alignas(std::max_align_t) char bytes[128 << 10];
};
struct TransformArena : private DepthLease<ArenaBlock>, public std::pmr::monotonic_buffer_resource {
  TransformArena() : std::pmr::monotonic_buffer_resource(get().bytes, sizeof(ArenaBlock)) {}
};

// The reverse transform of one lambda L (paper §4). Its forward phase runs φ of each binding;
// every way out of it (its result, or the branch of a tail `if` that is taken) returns
// (cons x⃖ backpropagator), the backpropagator running ρ of the bindings on that way out in
// reverse order. A way out that ends in a call is then a tail call of the forward phase (the
// compiler sees (cons (car p) (λ ... (cdr p) ...)) of the call's p), so loops stay flat.
//
// Backpropagators are raw: they take ȳ and return (f̄ . x̄) without sensitivity tags, and inside
// them a zero that flowed back from a backpropagator call skipped for a zero ȳ is a placeholder
// (Value::zero_sens), completed to the zero of the right shape (`Sens`) wherever a sensitivity
// is built into a structure or returned.
struct Reverse {
  // The tables below, a few thousand entries per lambda under nesting, take their memory from
  // this arena, given back at once when the transform is done (malloc and free of their nodes
  // were a sixth of W4's first call). (Like the C++ stack, the collector does not scan it: every
  // variable in these tables is also in a body or the lambdas being transformed.)
  TransformArena arena;
  Lambda* L;
  Lambda* RL;
  FlatMap<Var*, Var*> fw{&arena};  // x -> x⃖ (paper: reverse variables)
  FlatMap<Var*, Var*> tilde{&arena};  // App binding x -> its backpropagator (paper: x̃)
  FlatSet<Var*> constant_vars{&arena};
  // Variables bound to a primitive that commutes with *j (zero, %rzero, plus, *j, *j-inverse: the
  // transforms insert them by the thousand): the reverse transform of a call of one is the same
  // call on the reverse value, with no backpropagator, and ρ applies the transpose (rev_commuting in
  // prims.cpp, inlined): none for zero and %rzero, x̄ to both summands for plus (when its argument is
  // a cons made here), each other for *j and *j-inverse.
  FlatMap<Var*, Prim*> commuting_prims{&arena};
  FlatMap<Var*, std::pair<Var*, Var*>> cons_parts{&arena};
  // Calls of the user's car and cdr taken as projections (`specialize`: the first-level transform
  // of a user lambda, in the branch run while those are the builtins — see run()): the variables
  // bound to those globals, and the calls, with the projection each is.
  bool specialize = false;
  FlatMap<Var*, Op> proj_callee{&arena}, proj_calls{&arena};
  FlatSet<Var*> used_otherwise{&arena};  // variables read other than as a callee (dispatch())
  // A non-tail `if` binding's forward phase yields its value and the backpropagator of the branch
  // taken, which maps x̄ to the list of sensitivities of the variables the `if` refers to.
  struct IfInfo {
    Var* bp;
    std::vector<Var*> vars;
  };
  PMap<Var*, IfInfo> ifs{&arena};
  FlatSet<Var*> all_bps{&arena};
  FlatMap<Var*, int> use_count{&arena};  // reads of each variable of L's body (count_uses)
  // Projections bound in the forward phase: a -> the variable bound to (car a), (cdr a), env k of a.
  FlatMap<Var*, Var*> car_of{&arena}, cdr_of{&arena};
  // The same seen from the forward phase: x⃖ -> a⃖ for x⃖ = (car a⃖), (cdr a⃖) (retake_projections).
  FlatMap<Var*, Var*> fw_car{&arena}, fw_cdr{&arena};
  PMap<Var*, std::map<int, Var*>> env_of{&arena};
  // The source variables whose φ has been emitted on the way to the current point: those a
  // backpropagator made here may capture. Branches push and pop.
  std::vector<Var*> scope_log;
  FlatSet<Var*> in_scope{&arena};
  size_t scope_mark() const { return scope_log.size(); }
  void scope_pop(size_t mark) {
    while (scope_log.size() > mark) {
      in_scope.erase(scope_log.back());
      scope_log.pop_back();
    }
  }
  // The variable bound to a projection of x (found in `known`) if it is in scope here.
  Var* known_in_scope(FlatMap<Var*, Var*>& known, Var* x) {
    auto k = known.find(x);
    return k != known.end() && in_scope.count(k->second) ? k->second : nullptr;
  }

  // ---- the state of the backpropagator being written ----
  FlatMap<Var*, Var*> sens{&arena};  // x -> current x̄ (absent: still zero)
  FlatSet<Var*> maybe_placeholder{&arena};
  // Sensitivities of projections of one variable, combined into one structure when that
  // variable's sensitivity is next needed (a pair, or a closure of `lam`), instead of a one-hot
  // structure per projection added up with ⊕.
  struct Pending {
    Var* car = nullptr;
    Var* cdr = nullptr;
    bool calls_only = true;  // car and cdr from calls of the user's car and cdr only (proj_calls)
    Lambda* lam = nullptr;
    std::map<int, Var*> slots;
  };
  PMap<Var*, Pending> pending{&arena};
  Emitter bp{nullptr, Pos()};

  struct State {
    FlatMap<Var*, Var*> sens;
    FlatSet<Var*> maybe_placeholder;
    PMap<Var*, Pending> pending;
    Emitter bp;
  };
  State save() { return State{std::move(sens), std::move(maybe_placeholder), std::move(pending), bp}; }
  void restore(State& s) {
    sens = std::move(s.sens);
    maybe_placeholder = std::move(s.maybe_placeholder);
    pending = std::move(s.pending);
    bp = s.bp;
  }
  void start_backprop(Lambda* B, Pos pos) {
    sens.clear();
    maybe_placeholder.clear();
    pending.clear();
    bp = Emitter{B->body, pos};
  }

  Var* plus(Var* a, Var* b) {
    Var* k = bp.prim(current->p_plus);  // (bound first, so that the pair is the call's argument
    Var* r = bp.app(k, bp.cons(a, b));   // next to it: the compiler fuses the two, no pair made)
    if (maybe_placeholder.count(a) && maybe_placeholder.count(b)) maybe_placeholder.insert(r);
    return r;
  }

  // x̄ ⊕= e (paper §4: ρ accumulates with ⊕), the zero start known statically.
  void acc(Var* x, Var* e) {
    if (constant_vars.count(x)) return;
    auto it = sens.find(x);
    if (it == sens.end()) {
      sens[x] = e;
      return;
    }
    it->second = plus(it->second, e);
  }

  Var* proj(Op op, Var* a, const char* pattern) {
    Var* r = bp.proj(op, a, pattern);
    if (maybe_placeholder.count(a)) maybe_placeholder.insert(r);
    return r;
  }

  // The zero of (*j-inverse x⃖).
  Var* zero_of_fw(Var* xf) { return bp.prim_app(current->p_rzero, xf); }

  // x̄ as a value that may be built into a structure or returned: never the placeholder.
  Var* complete(Var* s, Var* fwv) {
    if (!maybe_placeholder.count(s)) return s;
    return bp.sens(s, fwv);
  }

  // The current x̄ (null when zero), after adding in the pending projections of x.
  Var* get_sens(Var* x) {
    auto pit = pending.find(x);
    if (pit != pending.end()) {
      Pending p = std::move(pit->second);
      pending.erase(pit);
      Var* xf = lookup(fw, x);
      Var* s;
      if (p.lam) {
        Lambda* rl = reverse_transform(p.lam);
        size_t n = p.lam->free.size();
        Var** caps = static_cast<Var**>(gc_alloc(sizeof(Var*) * (n ? n : 1)));
        for (size_t k = 0; k < n; k++) {
          auto sl = p.slots.find((int)k);
          auto& slots = env_of[x];
          auto known = slots.find((int)k);
          Var* kf = known != slots.end() && in_scope.count(known->second) ? lookup(fw, known->second)
                                                                          : bp.env_ref(xf, (int)k, rl);
          caps[k] = sl != p.slots.end() ? complete(sl->second, kf) : zero_of_fw(kf);
        }
        s = bp.lambda(p.lam, caps);  // the sensitivity of a closure of lam (paper §4)
      } else {
        auto part = [&](Var* ps, FlatMap<Var*, Var*>& known, Op op) {
          Var* k = known_in_scope(known, x);
          Var* pf = k ? lookup(fw, k) : bp.proj(op, xf, "(cons a d)");
          return ps ? complete(ps, pf) : zero_of_fw(pf);
        };
        // Calls' backpropagators were skipped for a zero ȳ, the placeholder standing for their
        // results: when all the calls' ȳ are placeholders, so is the group (as their sum was).
        Var* pa = p.car ? p.car : p.cdr;
        Var* pd = p.cdr ? p.cdr : p.car;
        Var* a = part(p.car, car_of, Op::Car);
        Var* d = part(p.cdr, cdr_of, Op::Cdr);
        s = bp.cons(a, d);
        if (p.calls_only && maybe_placeholder.count(pa) && maybe_placeholder.count(pd)) {
          Var* f = bp.prim(current->p_zero_sens2);  // (before the cons: the call takes the pair's parts)
          Var* t = bp.app(f, bp.cons(pa, pd));
          Binding& n_if = bp.emit(Op::If, "if");
          n_if.a = t;
          n_if.then_ = new_body();
          n_if.then_->result = pa;
          n_if.else_ = new_body();
          n_if.else_->result = s;
          s = n_if.x;
          maybe_placeholder.insert(s);
        }
      }
      acc(x, s);
    }
    auto it = sens.find(x);
    return it == sens.end() ? nullptr : it->second;
  }

  void add_pending(Var* a, Op op, int index, Lambda* lam, Var* e, bool call = false) {
    if (constant_vars.count(a)) return;
    Pending& p = pending[a];
    if (!call) p.calls_only = false;
    Var** slot = op == Op::Car ? &p.car : op == Op::Cdr ? &p.cdr : &p.slots[index];
    if (op == Op::EnvRef) p.lam = lam;
    *slot = *slot ? plus(*slot, e) : e;
  }

  // x̄ completed, or the zero of x's shape: what a backpropagator returns for x.
  Var* final_sens(Var* x) {
    Var* s = get_sens(x);
    Var* xf = lookup(fw, x);
    return s ? complete(s, xf) : zero_of_fw(xf);
  }

  // (car a) or (cdr a) taken before on the way here (the same part: a pair is never changed):
  // its forward variable, not a new projection (W3's loop takes (car xs) three times, (cdr xs)
  // twice: of a *j view, each a call of the view stub, under nesting each transformed again).
  // Its ρ stays its own (proj_calls, add_pending: the sensitivities of both parts add up).
  // Null when there is none in scope.
  Var* taken_again(Op op, Var* a) {
    Var* k = known_in_scope(op == Op::Car ? car_of : cdr_of, a);
    return k ? lookup(fw, k) : nullptr;
  }

  void phi(const Binding& b, Emitter& out) {
    out.pos = b.pos;
    Var* x = nullptr;
    switch (b.op) {
      case Op::Const:
        x = out.constant(b.constant.is_real() ? const_leaf(b.constant.as_real()) : star_j(b.constant));
        constant_vars.insert(b.x);
        if (b.constant.is_obj() && kind_of(b.constant) == Kind::Prim) {
          Prim* p = static_cast<Prim*>(b.constant.as_obj());
          if (p == current->p_zero || p == current->p_rzero || p == current->p_plus || p == current->p_star_j ||
              p == current->p_star_j_inverse)
            commuting_prims[b.x] = p;
        }
        break;
      case Op::Copy: x = lookup(fw, b.a); break;
      case Op::Sens:
        x = out.sens(lookup(fw, b.a), lookup(fw, b.b));
        out.body->binds.back().index = b.index;  // (its path: φ of a part is that part of φ)
        break;
      case Op::Global: {
        constant_vars.insert(b.x);
        if (Op op = user_projection(b); specialize && op != Op::App) {
          proj_callee[b.x] = op;
          if (!used_otherwise.count(b.x)) {  // only called: the builtin's reverse version is not read
            scope_log.push_back(b.x);
            in_scope.insert(b.x);
            return;
          }
        }
        Binding& n = out.emit(Op::Global, b.x->name);
        n.cell = b.cell;
        n.xf = append_xf(b.xf, 'R');
        x = n.x;
        break;
      }
      case Op::BackCall:  // a call of a backpropagator's raw entry, transformed like any call
      case Op::App: {  // φ{x_i = x_j x_k} ≡ (x⃖_i, x̃_i) = x⃖_j x⃖_k
        if (Prim* c = commuting_call(b)) {
          x = out.prim_app(c, lookup(fw, b.b));
          // (ρ of a zero ignores x̄: as for a constant, nothing is accumulated for it)
          if (c == current->p_zero || c == current->p_rzero) constant_vars.insert(b.x);
          break;
        }
        if (Op op = projection_call(b); op != Op::App) {  // (car a) as a's car: as Op::Car below
          x = taken_again(op, b.b);
          if (!x) {
            x = out.proj(op, lookup(fw, b.b), op == Op::Car ? current->p_car->name : current->p_cdr->name);
            (op == Op::Car ? car_of : cdr_of).emplace(b.b, b.x);
            (op == Op::Car ? fw_car : fw_cdr).emplace(x, lookup(fw, b.b));
          }
          proj_calls[b.x] = op;
          break;
        }
        Var* p = out.app(lookup(fw, b.a), lookup(fw, b.b));
        if (b.op == Op::BackCall || b.raw_call) {
          Binding& call = out.body->binds.back();
          call.raw_call = true;
          call.xf = append_xf(b.op == Op::BackCall ? "" : b.xf, 'R');
        }
        auto [v, t] = out.split(p, "(cons value backpropagator)");
        x = v;
        tilde[b.x] = t;
        all_bps.insert(t);
        break;
      }
      case Op::Lambda:  // φ{x_i = λ x e} ≡ x⃖_i = ←(λ x e)
        x = out.lambda(reverse_transform(b.lam), map_caps(b, fw));
        break;
      case Op::Cons:
        x = out.cons(lookup(fw, b.a), lookup(fw, b.b));
        cons_parts[b.x] = {b.a, b.b};
        break;
      case Op::Car:
      case Op::Cdr:
        x = taken_again(b.op, b.a);
        if (!x) {
          x = out.proj(b.op, lookup(fw, b.a), b.pattern);
          (b.op == Op::Car ? car_of : cdr_of).emplace(b.a, b.x);
          (b.op == Op::Car ? fw_car : fw_cdr).emplace(x, lookup(fw, b.a));
        }
        break;
      case Op::Check: {
        Binding& n = out.emit(Op::Check, "_");
        n.a = lookup(fw, b.a);
        n.constant = b.constant;
        n.pattern = b.pattern;
        x = n.x;
        break;
      }
      case Op::EnvRef:
        x = out.env_ref(lookup(fw, b.a), b.index, reverse_transform(b.lam));
        env_of[b.a].emplace(b.index, b.x);
        break;
      case Op::If: {
        // The paper encodes `if` as a call of if-procedure on two thunks; transforming the
        // branches in place computes the same values without building the thunks.
        std::vector<Var*> vars = if_free_vars(b);
        Body* t = phi_branch(b.then_, vars, b.pos);
        Body* e = phi_branch(b.else_, vars, b.pos);
        Binding& n = out.emit(Op::If, "if");
        n.a = lookup(fw, b.a);
        n.then_ = t;
        n.else_ = e;
        Var* pr = n.x;
        auto [v, bpv] = out.split(pr, "(cons value backpropagator)");
        x = v;
        ifs[b.x] = IfInfo{bpv, vars};
        all_bps.insert(bpv);
        break;
      }
    }
    fw[b.x] = x;
    scope_log.push_back(b.x);
    in_scope.insert(b.x);
  }

  // Whether b (a backpropagator's body or a branch of it) only builds structures from its
  // variables and zeros: Lambda::structural. `zeros` are the variables bound to zero or %rzero.
  static bool structural(const Body* b, FlatSet<Var*>& zeros) {
    for (const Binding& bd : b->binds) {
      switch (bd.op) {
        case Op::Const:
          if (bd.constant.is_real() && bd.constant.as_real() != 0) return false;  // (none are)
          if (bd.constant.is_obj() && kind_of(bd.constant) == Kind::Prim) {
            Prim* p = static_cast<Prim*>(bd.constant.as_obj());
            if (p == current->p_zero || p == current->p_rzero) zeros.insert(bd.x);
          }
          break;
        case Op::Copy:
        case Op::Cons:
        case Op::Car:
        case Op::Cdr:
        case Op::Check:
        case Op::EnvRef:
        case Op::Sens:
        case Op::Lambda: break;
        case Op::App:
          if (bd.raw_call || !zeros.count(bd.a)) return false;
          break;
        case Op::If:
          if (!structural(bd.then_, zeros) || !structural(bd.else_, zeros)) return false;
          break;
        default: return false;  // Global, BackCall
      }
    }
    return true;
  }

  // Finishes a backpropagator: its body at its exact size, whether it is structural, and its free
  // variables, backpropagators first, the latest first.
  // Backpropagators chain (a loop of n steps makes a chain of n), and the collector marks an
  // object's fields from the last to the first, so with the chain at env[0] its mark stack stays
  // shallow instead of growing with n.
  void finish_backprop(Lambda* B) {
    compute_free_variables(B);
    if (retake_projections(B)) {
      B->free_done = false;
      compute_free_variables(B);
    }
    fit_body(B->body);
    B->raw_bp = true;
    FlatSet<Var*> zeros{&arena};
    B->structural = structural(B->body, zeros);
    // (ids are unique: the order is total)
    auto mid = std::partition(B->free.begin(), B->free.end(), [&](Var* v) { return all_bps.count(v) > 0; });
    std::sort(B->free.begin(), mid, [](Var* a, Var* b) { return a->id > b->id; });
    std::sort(mid, B->free.end(), [](Var* a, Var* b) { return a->id < b->id; });
  }

  // A backpropagator that would keep both a value of the forward phase and projections of it
  // (W3's loop: the list xs, and (car xs), (cdr xs), (car (cdr xs)), which its Sens bindings
  // read for their zeros' shapes) takes the projections again at its start instead: the closure
  // the forward phase makes for each step is smaller (W3: 12 free variables to 8, 112 bytes to
  // 80 of the 272 kept a step), for a few loads when it runs. Only projections of a value it
  // keeps anyway: it keeps nothing more alive. Reads in B's body (its branches too) are renamed
  // to the new variables. Whether anything was taken again.
  bool retake_projections(Lambda* B) {
    auto parent = [&](Var* v, Op* op) -> Var* {
      if (auto it = fw_car.find(v)) {
        *op = Op::Car;
        return it->second;
      }
      if (auto it = fw_cdr.find(v)) {
        *op = Op::Cdr;
        return it->second;
      }
      return nullptr;
    };
    FlatSet<Var*> kept{&arena};
    for (Var* v : B->free) kept.insert(v);
    // v is taken again when a variable it is a projection of (at any depth) is kept. Remembered
    // for each variable on the way up: the projections of a pattern of n elements form a chain n
    // deep, and walking it for each of them made the transform of such a body n^2 (a closure over
    // 10,000 pattern variables: 0.7 s).
    FlatMap<Var*, char> retaken_memo{&arena};  // (1 or 2: not below a kept one, or below one)
    std::vector<Var*> climb;
    auto retaken = [&](Var* v) {
      Op op;
      climb.clear();
      bool r = false;
      for (Var* u = parent(v, &op); u; u = parent(u, &op)) {
        if (auto it = retaken_memo.find(u)) {  // u's answer: whether u is kept or below a kept one
          r = it->second == 2;
          break;
        }
        climb.push_back(u);
        if (kept.count(u)) {
          r = true;
          break;
        }
      }
      // (the memo holds, for each u climbed, whether u is kept or below a kept one: r for all of
      // them, as none but the last can be kept)
      for (Var* u : climb) retaken_memo[u] = r ? 2 : 1;
      return r;
    };
    VarMap m{&arena};
    std::vector<Binding> pre;
    // the new variable for v (and those it is taken from, first): v itself for a kept root
    std::function<Var*(Var*)> take = [&](Var* v) -> Var* {
      if (kept.count(v) && !retaken(v)) return v;
      if (auto it = m.find(v); it != m.end()) return it->second;
      Op op = Op::Car;
      Var* u = take(parent(v, &op));
      Binding n;
      n.op = op;
      n.x = new_var(v->name);
      n.a = u;
      n.pos = B->pos;
      n.pattern = "(cons a d)";
      pre.push_back(n);
      work.transformed_bindings++;
      return m[v] = n.x;
    };
    for (Var* v : B->free)
      if (retaken(v)) take(v);
    if (m.empty() || captures_any(B->body, m)) return false;
    // A part read only for the zero a Sens makes of it when its sensitivity is the placeholder
    // (W3: the zeros of (car xs), (cdr xs), (car (cdr xs))), which is seldom, is not taken here:
    // the Sens names the kept value and the path to the part (sens_path), taken only then.
    std::unordered_map<Var*, std::pair<int, int>> reads;  // v -> (as a Sens's b, otherwise)
    count_reads(B->body, m, reads);
    for (const Binding& n : pre) reads[n.a].second++;  // (by a part taken of it)
    std::unordered_map<Var*, int> path_of;  // a part read only by Sens -> its path from its root
    std::unordered_map<Var*, Var*> root_of;
    for (auto& [v, r] : reads) {
      if (!m.count(v) || r.second > 0 || r.first == 0) continue;
      std::vector<bool> steps;  // from v up to the kept root
      Var* u = v;
      Op op;
      while (Var* up = parent(u, &op)) {
        steps.push_back(op == Op::Cdr);
        u = up;
        if ((kept.count(u) && !retaken(u)) || (int)steps.size() > kSensPathMax) break;  // (no deeper: n^2)
      }
      if (!kept.count(u) || retaken(u) || (int)steps.size() > kSensPathMax) continue;
      int path = (int)steps.size();
      for (size_t k = 0; k < steps.size(); k++)  // (step 0 is the root's, the last found)
        if (steps[steps.size() - 1 - k]) path |= 1 << (5 + k);
      path_of[v] = path;
      root_of[v] = u;
    }
    if (!path_of.empty()) {
      sens_paths(B->body, path_of, root_of);
      // the parts no longer read: not taken (those read by a part still taken stay)
      std::unordered_set<Var*> gone;
      for (auto& [v, p] : path_of) gone.insert(m[v]);
      // (a part comes after the one it is taken from, so from the last back, each part's parts
      // are settled when it is reached; one pass, where a search of all for each was n^2)
      std::unordered_set<Var*> read_by_kept_part;
      for (size_t k = pre.size(); k-- > 0;) {
        if (gone.count(pre[k].x) && read_by_kept_part.count(pre[k].x)) gone.erase(pre[k].x);
        if (!gone.count(pre[k].x)) read_by_kept_part.insert(pre[k].a);
      }
      pre.erase(std::remove_if(pre.begin(), pre.end(), [&](const Binding& n) { return gone.count(n.x) > 0; }),
                pre.end());
    }
    rename_uses(B->body, m);
    // (after a first call of a captured backpropagator and the projections of its result: a body
    // that starts so is the head of a chain, which the evaluator walks without recursion, and
    // the call's result taken apart at once is never made)
    auto& binds = B->body->binds;
    size_t at = 0;
    if (!binds.empty() && binds[0].op == Op::BackCall) {
      std::vector<Var*> parts{binds[0].x};
      for (at = 1; at < binds.size() && (binds[at].op == Op::Car || binds[at].op == Op::Cdr) &&
                   std::find(parts.begin(), parts.end(), binds[at].a) != parts.end();
           at++)
        parts.push_back(binds[at].x);
    }
    binds.insert(binds.begin() + at, pre.begin(), pre.end());
    return true;
  }
  // The reads in b (its branches included) of the variables m maps: as a Sens's b, and otherwise.
  static void count_reads(const Body* b, VarMap& m, std::unordered_map<Var*, std::pair<int, int>>& reads) {
    auto other = [&](Var* v) {
      if (v && m.count(v)) reads[v].second++;
    };
    for (const Binding& bd : b->binds) {
      if (bd.op == Op::Sens && !bd.index && bd.b && m.count(bd.b)) {
        reads[bd.b].first++;
        other(bd.a);
        continue;
      }
      other(bd.a);
      other(bd.b);
      if (bd.op == Op::If) {
        count_reads(bd.then_, m, reads);
        count_reads(bd.else_, m, reads);
      }
    }
    other(b->result);
  }
  // Each Sens in b reading one of those parts as its b: the kept value instead, and the path.
  static void sens_paths(Body* b, std::unordered_map<Var*, int>& path_of, std::unordered_map<Var*, Var*>& root_of) {
    for (Binding& bd : b->binds) {
      if (bd.op == Op::Sens && !bd.index && bd.b) {
        auto it = path_of.find(bd.b);
        if (it != path_of.end()) {
          bd.index = it->second;
          bd.b = root_of[it->first];
        }
      }
      if (bd.op == Op::If) {
        sens_paths(bd.then_, path_of, root_of);
        sens_paths(bd.else_, path_of, root_of);
      }
    }
  }
  // Whether a lambda made in b (its branches included) captures one of the variables m maps. (The
  // lambdas a backpropagator makes, f̄ and the closures of constants, capture sensitivities and
  // L's own free variables, not values of the forward phase: none does.)
  static bool captures_any(const Body* b, VarMap& m) {
    for (const Binding& bd : b->binds) {
      if (bd.op == Op::Lambda)
        for (size_t i = 0; i < bd.lam->free.size(); i++)
          if (m.count(cap_of(bd, i))) return true;
      if (bd.op == Op::If && (captures_any(bd.then_, m) || captures_any(bd.else_, m))) return true;
    }
    return false;
  }
  // Renames, in b (its branches included), the reads of the variables m maps (lambdas made in b
  // capture none of them: captures_any).
  static void rename_uses(Body* b, VarMap& m) {
    auto get = [&](Var*& v) {
      if (!v) return;
      auto it = m.find(v);
      if (it != m.end()) v = it->second;
    };
    for (Binding& bd : b->binds) {
      switch (bd.op) {
        case Op::Const:
        case Op::Global: break;
        case Op::Lambda: break;  // (captures sensitivities and L's free variables: captures_any)
        case Op::If:
          get(bd.a);
          rename_uses(bd.then_, m);
          rename_uses(bd.else_, m);
          break;
        default:
          get(bd.a);
          get(bd.b);
      }
    }
    get(b->result);
  }

  Lambda* new_backprop(const char* name, Pos pos) {
    Lambda* B = new_lambda();
    B->name = name;
    B->pos = pos;
    B->param = new_var("ybar");
    B->body = new_body();
    return B;
  }

  // φ of a non-tail branch, ending in (cons x⃖ backpropagator), the backpropagator running ρ of
  // the branch and returning the list of the sensitivities of `vars`.
  Body* phi_branch(Body* branch, const std::vector<Var*>& vars, Pos pos) {
    Body* nb = new_body();
    Emitter be{nb, pos};
    size_t mark = scope_mark();
    for (const Binding& bd : branch->binds) phi(bd, be);
    Lambda* B = new_backprop("backpropagator of if", pos);
    State saved = save();
    start_backprop(B, pos);
    sens[branch->result] = B->param;
    for (size_t i = branch->binds.size(); i-- > 0;) rho(branch->binds[i], i ? &branch->binds[i - 1] : nullptr);
    Var* list = bp.constant(Value::nil());
    for (size_t k = vars.size(); k-- > 0;) list = bp.cons(final_sens(vars[k]), list);
    B->body->result = list;
    restore(saved);
    scope_pop(mark);
    finish_backprop(B);
    Var* bpv = be.lambda(B, nullptr);
    nb->result = be.cons(lookup(fw, branch->result), bpv);
    return nb;
  }

  // The commuting primitive b calls, or null.
  Prim* commuting_call(const Binding& b) const {
    if (b.op != Op::App || b.raw_call) return nullptr;
    auto it = commuting_prims.find(b.a);
    if (it == commuting_prims.end()) return nullptr;
    if (it->second == current->p_plus && !cons_parts.count(b.b)) return nullptr;
    return it->second;
  }

  // Op::Car or Op::Cdr when b calls the user's car or cdr, to be taken as a projection; else App.
  Op projection_call(const Binding& b) const {
    if (!specialize || b.op != Op::App || b.raw_call) return Op::App;
    auto it = proj_callee.find(b.a);
    return it == proj_callee.end() ? Op::App : it->second;
  }

  // prev: the binding before b in its body, if any.
  void rho(const Binding& b, const Binding* prev = nullptr) {
    Var* xb = get_sens(b.x);
    if (!xb) return;  // x̄ is zero: nothing flows back
    bp.pos = b.pos;
    switch (b.op) {
      case Op::Const:
      case Op::Global:
      case Op::Check: return;
      case Op::Copy:  // ρ{x_i = x_j} ≡ x̄_j ⊕= x̄_i
      case Op::Sens: acc(b.a, xb); return;
      case Op::BackCall:
      case Op::App: {  // ρ{x_i = x_j x_k} ≡ (x̄_j, x̄_k) ⊕= x̃_i x̄_i
        if (Prim* p = commuting_call(b)) {
          if (p == current->p_zero || p == current->p_rzero) return;  // a zero derivative
          if (p == current->p_plus) {  // (x̄_1, x̄_2) ⊕= (x̄, x̄)
            auto [s1, s2] = cons_parts.at(b.b);
            acc(s1, xb);
            acc(s2, xb);
          } else {
            // (*j and *j-inverse give the placeholder zero back unchanged)
            Var* t = bp.prim_app(p == current->p_star_j ? current->p_star_j_inverse : current->p_star_j, xb);
            if (maybe_placeholder.count(xb)) maybe_placeholder.insert(t);
            acc(b.b, t);
          }
          return;
        }
        if (auto pc = proj_calls.find(b.x); pc != proj_calls.end()) {
          add_pending(b.b, pc->second, 0, nullptr, xb, true);
          return;
        }
        Var* u = bp.back_call(tilde.at(b.x), xb);
        auto [fb, ab] = bp.split(u, "(cons f-bar x-bar)");
        maybe_placeholder.insert(fb);
        maybe_placeholder.insert(ab);
        if (prev && prev->op == Op::Cons && prev->x == b.b && prev->x != b.a && use_count.at(b.b) == 1) {
          // The argument tuple built just before the call, for it alone: ρ of that cons here, its
          // projections of x̄ next to the split (the compiler takes x̄ apart in the same instruction:
          // no pair), before the callee's f̄ is summed in. (Its own ρ then finds a zero x̄.)
          acc(prev->a, proj(Op::Car, ab, "(cons a d)"));
          acc(prev->b, proj(Op::Cdr, ab, "(cons a d)"));
        } else {
          acc(b.b, ab);
        }
        acc(b.a, fb);  // when j = k both halves accumulate into the same variable
        return;
      }
      case Op::Lambda: {  // ρ{x_i = λ x e} ≡ [x̄'_1 ... x̄'_l] ⊕= x̄_i (environment sensitivities)
        // x̄_i is a closure of lam with its constants as free variables (way_out)
        Lambda* sl = constant_converted(b.lam);
        // No environment reference for a captured variable whose x̄ is not accumulated (a
        // constant, a zero) — but always the last one's: env_ref checks that x̄ is a closure with
        // that many slots, and the same error is raised at the same place as with all of them.
        size_t n = b.lam->free.size();
        for (size_t k = 0; k < n; k++) {
          if (k + 1 < n && constant_vars.count(cap_of(b, k))) continue;
          Var* e = bp.env_ref(xb, (int)k, sl ? sl : b.lam);
          if (maybe_placeholder.count(xb)) maybe_placeholder.insert(e);
          acc(cap_of(b, k), e);
        }
        return;
      }
      case Op::Cons:
        acc(b.a, proj(Op::Car, xb, "(cons a d)"));
        acc(b.b, proj(Op::Cdr, xb, "(cons a d)"));
        return;
      case Op::Car:
      case Op::Cdr: add_pending(b.a, b.op, 0, nullptr, xb); return;
      case Op::EnvRef: add_pending(b.a, Op::EnvRef, b.index, b.lam, xb); return;
      case Op::If: {
        const IfInfo& info = ifs.at(b.x);
        Var* cur = bp.back_call(info.bp, xb);
        maybe_placeholder.insert(cur);
        for (Var* v : info.vars) {
          auto [s, rest] = bp.split(cur, "(list sensitivity ...)");
          maybe_placeholder.insert(s);
          maybe_placeholder.insert(rest);
          acc(v, s);
          cur = rest;
        }
        return;
      }
    }
  }

  // A binding of the body being emitted that lies on the way to the current way out.
  struct Segment {
    Body* body;
    size_t upto;  // bindings [0, upto) of body are on the way
  };

  // The backpropagator of one way out of the forward phase, whose value is `result`: ρ of the
  // bindings on the way, in reverse order, then (f̄ . x̄). Returns (cons result⃖ backpropagator).
  Var* way_out(Emitter& out, const std::vector<Segment>& path, Var* result) {
    Lambda* B = new_backprop(intern(std::string("backpropagator of ") + (L->name ? L->name : "lambda")), L->pos);
    B->way_out = true;
    start_backprop(B, L->pos);
    sens[result] = B->param;
    for (size_t s = path.size(); s-- > 0;)
      for (size_t i = path[s].upto; i-- > 0;) rho(path[s].body->binds[i], i ? &path[s].body->binds[i - 1] : nullptr);
    size_t nf = L->free.size();
    Var** caps = static_cast<Var**>(gc_alloc(sizeof(Var*) * (nf ? nf : 1)));
    for (size_t k = 0; k < nf; k++) caps[k] = final_sens(L->free[k]);
    // f̄ is over L with its constants as free variables, whose sensitivities are zero (the
    // sensitivities zero and plus build have the same form: tags.cpp).
    Lambda* C = constant_converted(L);
    Var* fbar;
    if (C && C != L) {
      size_t nc = L->cc_consts->size();
      if (nf == 0) {  // one closure for every call
        Value z = make_closure(C, nullptr, (int)nc);
        for (size_t k = 0; k < nc; k++) static_cast<Closure*>(z.as_obj())->env[k] = zero_of((*L->cc_consts)[k]);
        fbar = bp.constant(z);
      } else {
        Var** all = static_cast<Var**>(gc_alloc(sizeof(Var*) * (nf + nc)));
        for (size_t k = 0; k < nf; k++) all[k] = caps[k];
        for (size_t k = 0; k < nc; k++) all[nf + k] = bp.constant(zero_of((*L->cc_consts)[k]));
        fbar = bp.lambda(C, all);
      }
    } else {
      fbar = bp.lambda(L, caps);
    }
    Var* xbar = final_sens(L->param);
    B->body->result = bp.cons(fbar, xbar);
    finish_backprop(B);
    Var* bpv = out.lambda(B, nullptr);
    return out.cons(lookup(fw, result), bpv);
  }

  // φ of a body in tail position of the forward phase: its last binding, when it is an `if`
  // whose value is the body's, gets a way out in each branch.
  void tail_body(Body* body, Emitter& out, std::vector<Segment>& path, size_t start = 0) {
    size_t n = body->binds.size();
    for (size_t i = start; i < n; i++) {
      const Binding& b = body->binds[i];
      if (i + 1 == n && b.op == Op::If && b.x == body->result) {
        out.pos = b.pos;
        Body* branches[2] = {new_body(), new_body()};
        path.push_back(Segment{body, i});
        for (int k = 0; k < 2; k++) {
          Emitter be{branches[k], b.pos};
          size_t mark = scope_mark();
          tail_body(k == 0 ? b.then_ : b.else_, be, path);
          scope_pop(mark);
        }
        path.pop_back();
        Binding& n_if = out.emit(Op::If, "if");
        n_if.a = lookup(fw, b.a);
        n_if.then_ = branches[0];
        n_if.else_ = branches[1];
        out.body->result = n_if.x;
        return;
      }
      phi(b, out);
    }
    path.push_back(Segment{body, n});
    out.body->result = way_out(out, path, body->result);
    path.pop_back();
  }

  static size_t count_bindings(const Body* b) {
    size_t n = b->binds.size();
    for (const Binding& bd : b->binds)
      if (bd.op == Op::If) n += count_bindings(bd.then_) + count_bindings(bd.else_);
    return n;
  }

  void count_uses(const Body* b) {
    for (const Binding& bd : b->binds) {
      if (bd.a) use_count[bd.a]++;
      if (bd.b) use_count[bd.b]++;
      if (bd.op == Op::If) {
        count_uses(bd.then_);
        count_uses(bd.else_);
      } else if (bd.op == Op::Lambda) {
        if (!bd.lam->free_done) compute_free_variables(bd.lam);
        for (size_t k = 0; k < bd.lam->free.size(); k++) use_count[cap_of(bd, k)]++;
      }
    }
    use_count[b->result]++;
  }

  void run() {
    ensure_body(L);
    // (the tables keyed by L's variables, sized once instead of rehashed as they grow)
    size_t n = count_bindings(L->body) + L->free.size() + 1;
    fw.reserve(n);
    in_scope.reserve(n);
    sens.reserve(n);
    use_count.reserve(n);
    count_uses(L->body);
    // L with its constants as free variables (the zero or tangent of a closure with constants is
    // a closure of it, and so are the transforms of those): the constants' sensitivities are zero,
    // as where they are constants (f̄ below) — at every level, or a derivative taken through a
    // closure's sensitivity differs between the modes.
    if (constant_converted(L) == L && L->cc_nconst > 0)
      for (size_t k = L->free.size() - (size_t)L->cc_nconst; k < L->free.size(); k++) constant_vars.insert(L->free[k]);
    RL->body = new_body();
    Emitter out{RL->body, L->pos};
    std::vector<Segment> path;
    if (!RL->general && !L->transform && !L->raw_bp && !L->rule_of && calls_user_projection(L->body)) {
      dispatch(out, path);
      return;
    }
    tail_body(L->body, out, path);
  }

  // Fills used_otherwise with the variables the body reads other than as the callee of a call.
  void note_uses(Body* b) {
    for (const Binding& bd : b->binds) {
      if (bd.a && (bd.op != Op::App || bd.raw_call)) used_otherwise.insert(bd.a);
      if (bd.b) used_otherwise.insert(bd.b);
      if (bd.op == Op::Lambda)
        for (size_t k = 0; k < bd.lam->free.size(); k++) used_otherwise.insert(cap_of(bd, k));
      if (bd.op == Op::If) {
        note_uses(bd.then_);
        note_uses(bd.else_);
      }
    }
    used_otherwise.insert(b->result);
  }

  // Whether a body (not the lambdas in it) calls the user's car or cdr by name.
  static bool calls_user_projection(Body* body) {
    std::unordered_set<Var*> callees;
    std::function<bool(Body*)> scan = [&](Body* b) {
      for (const Binding& bd : b->binds) {
        if (user_projection(bd) != Op::App) callees.insert(bd.x);
        if (bd.op == Op::App && !bd.raw_call && callees.count(bd.a)) return true;
        if (bd.op == Op::If && (scan(bd.then_) || scan(bd.else_))) return true;
      }
      return false;
    };
    return scan(body);
  }

  // The first-level transform of a user lambda that calls car or cdr: while the user's car and
  // cdr are the builtins (a cell the definitions keep up to date, read at each call), those calls
  // are projections of the argument, whose sensitivities group into one pair per variable (as
  // a pattern's car and cdr do), where each call's backpropagator would give a one-hot pair and
  // ⊕ would add them up: 3 pairs a step instead of 10 in W3's loop. Otherwise the body is the
  // general transform's (made when first needed), called with the same argument and environment.
  // A body that starts by taking its argument apart does so before the test (native loops pass
  // the two parts without a pair then).
  void dispatch(Emitter& out, std::vector<Segment>& path) {
    Body* body = L->body;
    size_t k = 0;
    if (body->binds.size() > 2 && body->binds[0].op == Op::Car && body->binds[0].a == L->param &&
        body->binds[1].op == Op::Cdr && body->binds[1].a == L->param)
      k = 2;
    for (size_t i = 0; i < k; i++) phi(body->binds[i], out);
    note_uses(body);
    Binding& test = out.emit(Op::Global, "builtin-car-cdr");
    test.cell = current->builtin_projections;
    Var* builtin = test.x;
    Body* branches[2] = {new_body(), new_body()};
    {
      Emitter be{branches[0], L->pos};
      size_t mark = scope_mark();
      specialize = true;
      tail_body(body, be, path, k);
      specialize = false;
      scope_pop(mark);
    }
    {
      // (a position in the rules: the call record keeps the user's call site, as before)
      Emitter ge{branches[1], Pos{intern("<rules>"), L->pos.line, L->pos.col}};
      size_t n = RL->free.size();
      Var** caps = static_cast<Var**>(gc_alloc(sizeof(Var*) * (n ? n : 1)));
      for (size_t i = 0; i < n; i++) caps[i] = RL->free[i];
      Var* g = ge.lambda(general_reverse(L), caps);
      Var* arg = k ? ge.cons(lookup(fw, body->binds[0].x), lookup(fw, body->binds[1].x)) : lookup(fw, L->param);
      branches[1]->result = ge.app(g, arg);
    }
    Binding& n_if = out.emit(Op::If, "if");
    n_if.a = builtin;
    n_if.then_ = branches[0];
    n_if.else_ = branches[1];
    out.body->result = n_if.x;
  }
};

// The reverse transform of lam that does not take calls of car and cdr for projections (above).
Lambda* general_reverse(Lambda* lam) {
  if (lam->rev_general) return lam->rev_general;
  Lambda* r = start_transform(lam, 'R');
  r->lazy_of = lam;
  r->lazy_kind = 'R';
  r->general = true;
  return lam->rev_general = r;
}

}  // namespace

Lambda* zero_backpropagator_lambda() {
  Interp& in = *current;
  if (!in.zero_bp) {
    Lambda* z = static_cast<Lambda*>(gc_alloc_uncollectable(sizeof(Lambda)));
    new (z) Lambda();
    z->empty_closure = Value::unbound();
    z->owner = &in;
    z->name = intern("backpropagator");
    z->param = new_var("ybar");
    z->body = new_body();
    Var* fv = new_var("f");
    Var* xv = new_var("x");
    Emitter e{z->body, Pos()};
    Var* fz = e.prim_app(in.p_rzero, fv);
    Var* xz = e.prim_app(in.p_rzero, xv);
    z->body->result = e.cons(fz, xz);
    z->free.push_back(fv);
    z->free.push_back(xv);
    z->free_done = true;
    z->raw_bp = true;
    in.zero_bp = z;
  }
  return in.zero_bp;
}

Value zero_backpropagator(Value f, Value x) {
  Value env[2] = {f, x};
  return make_closure(zero_backpropagator_lambda(), env, 2);
}

namespace {

// The transforms of a lambda's own body (the paper's), cached; the body is made on first need.
Lambda* plain_transform(Lambda* lam, char t) {
  Lambda*& cached = t == 'F' ? lam->fwd_plain : lam->rev_plain;
  if (cached) return cached;
  Lambda* r = start_transform(lam, t);
  r->lazy_of = lam;
  r->lazy_kind = t;
  return cached = r;
}
Lambda* forward_plain(Lambda* lam) { return plain_transform(lam, 'F'); }
Lambda* reverse_plain(Lambda* lam) { return plain_transform(lam, 'R'); }

// A transform of lam as a procedure. A raw backpropagator B is the procedure of its tagged
// version (tagged_version); the transform's raw variant is the transform of B's own body. A
// lambda with a raw variant passes it on, so that BackCalls transformed any number of times
// reach the body they call.
Lambda* transform_lambda(Lambda* lam, char t) {
  Lambda*& cached = t == 'F' ? lam->fwd : lam->rev;
  if (cached) return cached;
  AnalysisScope analysis;
  Lambda* (*plain)(Lambda*) = t == 'F' ? forward_plain : reverse_plain;
  if (lam->raw_bp) {
    Lambda* r = plain(tagged_version(lam));
    r->source = lam;
    Lambda* raw = plain(lam);
    raw->source = lam;
    r->raw_variant = raw;
    return cached = r;
  }
  Lambda* r = plain(lam);
  cached = r;  // before the raw variant: it may refer back
  if (t == 'F') install_linear_forward(r);
  if (t == 'R') {
    install_prelude_rule(lam, r);
    install_reverse_forward(lam, r);
  }
  if (lam->raw_variant) r->raw_variant = transform_lambda(lam->raw_variant, t);
  return r;
}

}  // namespace

void ensure_body(Lambda* lam) {
  if (lam->body || !lam->lazy_of) return;
  AnalysisScope analysis;
  struct Transforming {
    Transforming() { transforming++; }
    ~Transforming() { transforming--; }
  } transforming_guard;
  Lambda* src = lam->lazy_of;
  if (lam->lazy_kind == 'W') {
    lam->body = tagged_body(lam, src);
    fit_body(lam->body);
    return;
  }
  if (!src->free_done) compute_free_variables(src);
  VarMap m;
  m.reserve(src->free.size() + 1);
  m[src->param] = lam->param;
  for (size_t k = 0; k < src->free.size(); k++) m[src->free[k]] = lam->free[k];
  if (lam->lazy_kind == 'F') {
    ensure_body(src);
    lam->body = forward_body(src->body, m);
    return;
  }
  Reverse r;
  r.L = src;
  r.RL = lam;
  r.fw.reserve(m.size());
  for (const auto& e : m) r.fw[e.first] = e.second;
  try {
    r.run();
    fit_body(lam->body);
  } catch (...) {
    // Interrupted (Ctrl-C while a primitive's rule was being built, say) or out of heap: the
    // half-made body must not be taken for the transform, which is made again on next need.
    lam->body = nullptr;
    throw;
  }
}

Lambda* forward_transform(Lambda* lam) { return transform_lambda(lam, 'F'); }

Lambda* reverse_transform(Lambda* lam) { return transform_lambda(lam, 'R'); }

}  // namespace vlad
