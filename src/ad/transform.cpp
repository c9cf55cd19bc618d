// transform.cpp — the run-time transforms of lambda bodies, computed once per lambda and cached.
// Forward (j*): the body with every value bundled — constants bundled with zero tangents, every
// closure and global seen through j*, calls calling the transformed callee.
// Reverse (*j): paper §4 — the forward phase φ of each binding, then a backpropagator lambda
// that runs ρ of each binding in reverse order, accumulating sensitivities with ⊕.
#include <algorithm>
#include <set>
#include <unordered_map>

#include "../eval/interp.hpp"
#include "../prims/prims.hpp"
#include "ad.hpp"

namespace vlad {

namespace {

using VarMap = std::unordered_map<Var*, Var*>;

Var* tagged_var(Var* v, char tag) {
  std::string n = std::string(1, tag) + ":" + v->name;
  return new_var(intern(n));
}

Var* lookup(const VarMap& m, Var* v) {
  auto it = m.find(v);
  if (it == m.end()) throw Error(std::string("internal error: transform lost variable ") + v->name);
  return it->second;
}

Var** map_caps(const Binding& b, const VarMap& m) {
  size_t n = b.lam->free.size();
  Var** caps = static_cast<Var**>(gc_alloc(sizeof(Var*) * (n ? n : 1)));
  for (size_t k = 0; k < n; k++) caps[k] = lookup(m, b.caps ? b.caps[k] : b.lam->free[k]);
  return caps;
}

const char* append_xf(const char* xf, char t) { return intern(std::string(xf) + t); }

// ---- emitting bindings ----
struct Emitter {
  Body* body;
  Pos pos;
  // One constant binding per primitive per body: the transforms insert plus, %rzero, sensitize
  // ... many times, and every binding is transformed again under nesting.
  std::unordered_map<Prim*, Var*> prims{};
  Binding& emit(Op op, const char* name) {
    work.transformed_bindings++;
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
  Var* app(Var* f, Var* a) {
    Binding& b = emit(Op::App, "call");
    b.a = f;
    b.b = a;
    return b.x;
  }
  Var* prim(Prim* p) {
    auto it = prims.find(p);
    if (it != prims.end()) return it->second;
    return prims[p] = constant(Value::obj(p));
  }
  Var* prim_app(Prim* p, Var* a) { return app(prim(p), a); }
  Var* cons(Var* a, Var* d) {
    Binding& b = emit(Op::Cons, "cons");
    b.a = a;
    b.b = d;
    return b.x;
  }
  Var* proj(Op op, Var* a, const char* pattern = "(cons value backpropagator)") {
    Binding& b = emit(op, op == Op::Car ? "car" : "cdr");
    b.a = a;
    b.pattern = pattern;
    return b.x;
  }
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
};

// BackCall is shorthand for three calls; the transforms see the calls.
Body* expand_backcalls(Body* src) {
  bool any = false;
  for (const Binding& b : src->binds) any |= b.op == Op::BackCall;
  if (!any) return src;
  Body* out = new_body();
  Emitter e{out, Pos()};
  for (const Binding& b : src->binds) {
    if (b.op != Op::BackCall) {
      out->binds.push_back(b);
      continue;
    }
    e.pos = b.pos;
    Var* s = e.prim_app(current->p_sensitize, b.b);
    Var* r = e.app(b.a, s);
    Var* k = e.prim(current->p_unsensitize);
    Binding& u = e.emit(Op::App, "call");
    u.a = k;
    u.b = r;
    u.x = b.x;
  }
  out->result = src->result;
  return out;
}

// ---- forward ----

Body* forward_body(Body* src, VarMap& m) {
  src = expand_backcalls(src);
  Body* out = new_body();
  out->binds.reserve(src->binds.size());
  for (const Binding& b : src->binds) {
    Binding n = b;
    work.transformed_bindings++;
    n.x = tagged_var(b.x, 'F');
    if (b.a) n.a = lookup(m, b.a);
    if (b.b) n.b = lookup(m, b.b);
    n.cache_in = n.cache_out = Value::unbound();
    switch (b.op) {
      case Op::Const: n.constant = j_star(b.constant); break;
      case Op::Global: n.xf = append_xf(b.xf, 'F'); break;
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

Lambda* start_transform(Lambda* lam, char t, VarMap& m) {
  Lambda* r = new_lambda();
  r->transform = t;
  r->source = lam;
  r->name = lam->name;
  r->pos = lam->pos;
  if (!lam->free_done) compute_free_variables(lam);
  r->param = tagged_var(lam->param, t);
  m[lam->param] = r->param;
  for (Var* v : lam->free) {
    Var* tv = tagged_var(v, t);
    m[v] = tv;
    r->free.push_back(tv);
  }
  r->free_done = true;
  return r;
}

// ---- reverse ----

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
      for (size_t k = 0; k < bd.lam->free.size(); k++) refs.insert(bd.caps ? bd.caps[k] : bd.lam->free[k]);
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

struct Reverse {
  Lambda* L;
  Lambda* RL;
  VarMap fw;                             // x -> x⃖ (paper: reverse variables)
  std::unordered_map<Var*, Var*> tilde;  // App binding x -> its backpropagator (paper: x̃)
  std::unordered_map<Var*, Var*> sens;   // x -> current x̄ (absent: still zero)
  Emitter bp{nullptr, Pos()};
  // An `if` binding's forward phase yields its value and the backpropagator of the branch taken,
  // which maps x̄ to the list of sensitivities of the variables the `if` refers to.
  struct IfInfo {
    Var* bp;
    std::vector<Var*> vars;
  };
  std::unordered_map<Var*, IfInfo> ifs;
  std::vector<Var*> all_bps;

  // Variables bound to constants and globals: their sensitivities flow nowhere (ρ of those
  // bindings is empty), so accumulating them is dead code.
  std::unordered_map<Var*, bool> constant_vars;

  // x̄ ⊕= e, with the zero start known statically (paper §4: ρ accumulates with ⊕).
  void acc(Var* x, Var* e) {
    if (constant_vars.count(x)) return;
    auto it = sens.find(x);
    if (it == sens.end()) {
      sens[x] = e;
      return;
    }
    sens[x] = bp.prim_app(current->p_plus, bp.cons(it->second, e));
  }

  Var* sens_or_zero(Var* x) {
    auto it = sens.find(x);
    if (it != sens.end()) return it->second;
    return bp.prim_app(current->p_rzero, lookup(fw, x));  // x̄ = 0 (J⁻¹ x⃖)
  }

  void phi(const Binding& b, Emitter& out) {
    out.pos = b.pos;
    Var* x = nullptr;
    switch (b.op) {
      case Op::Const:
        x = out.constant(star_j(b.constant));
        constant_vars[b.x] = true;
        break;
      case Op::Copy: x = lookup(fw, b.a); break;
      case Op::Global: {
        constant_vars[b.x] = true;
        Binding& n = out.emit(Op::Global, b.x->name);
        n.cell = b.cell;
        n.xf = append_xf(b.xf, 'R');
        x = n.x;
        break;
      }
      case Op::App: {  // φ{x_i = x_j x_k} ≡ (x⃖_i, x̃_i) = x⃖_j x⃖_k
        Var* p = out.app(lookup(fw, b.a), lookup(fw, b.b));
        x = out.proj(Op::Car, p);
        tilde[b.x] = out.proj(Op::Cdr, p);
        all_bps.push_back(tilde[b.x]);
        break;
      }
      case Op::Lambda: {  // φ{x_i = λ x e} ≡ x⃖_i = ←(λ x e)
        Binding tmp = b;
        x = out.lambda(reverse_transform(b.lam), map_caps(tmp, fw));
        break;
      }
      case Op::Cons: x = out.cons(lookup(fw, b.a), lookup(fw, b.b)); break;
      case Op::Car:
      case Op::Cdr: x = out.proj(b.op, lookup(fw, b.a), b.pattern); break;
      case Op::Check: {
        Binding& n = out.emit(Op::Check, "_");
        n.a = lookup(fw, b.a);
        n.constant = b.constant;
        n.pattern = b.pattern;
        x = n.x;
        break;
      }
      case Op::EnvRef: x = out.env_ref(lookup(fw, b.a), b.index, reverse_transform(b.lam)); break;
      case Op::BackCall: throw Error("internal error: BackCall survived expansion");
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
        x = out.proj(Op::Car, pr, "(cons value backpropagator)");
        Var* bpv = out.proj(Op::Cdr, pr, "(cons value backpropagator)");
        ifs[b.x] = IfInfo{bpv, vars};
        all_bps.push_back(bpv);
        break;
      }
    }
    fw[b.x] = x;
  }

  // Computes a backpropagator's free variables, backpropagators first, the latest first.
  // Backpropagators chain (a loop of n steps makes a chain of n), and the collector marks an
  // object's fields from the last to the first, so with the chain at env[0] its mark stack stays
  // shallow instead of growing with n.
  void finish_backprop(Lambda* B) {
    compute_free_variables(B);
    std::set<Var*> is_bp(all_bps.begin(), all_bps.end());
    std::stable_sort(B->free.begin(), B->free.end(), [&](Var* a, Var* b) {
      bool ba = is_bp.count(a), bb = is_bp.count(b);
      if (ba != bb) return ba;
      return ba ? a->id > b->id : a->id < b->id;
    });
  }

  // φ of a branch, ending in (cons x⃖ backpropagator), the backpropagator running ρ of the branch.
  Body* phi_branch(Body* branch, const std::vector<Var*>& vars, Pos pos) {
    branch = expand_backcalls(branch);
    Body* nb = new_body();
    Emitter be{nb, pos};
    for (const Binding& bd : branch->binds) phi(bd, be);
    Lambda* B = new_lambda();
    B->name = "backpropagator of if";
    B->pos = pos;
    B->param = new_var("ybar");
    B->body = new_body();
    auto saved_sens = std::move(sens);
    Emitter saved_bp = bp;
    sens.clear();
    bp = Emitter{B->body, pos};
    sens[branch->result] = B->param;
    for (size_t i = branch->binds.size(); i-- > 0;) rho(branch->binds[i]);
    Var* list = bp.constant(Value::nil());
    for (size_t k = vars.size(); k-- > 0;) list = bp.cons(sens_or_zero(vars[k]), list);
    B->body->result = list;
    sens = std::move(saved_sens);
    bp = saved_bp;
    finish_backprop(B);
    Var* bpv = be.lambda(B, nullptr);
    nb->result = be.cons(lookup(fw, branch->result), bpv);
    return nb;
  }

  void rho(const Binding& b) {
    auto it = sens.find(b.x);
    if (it == sens.end()) return;  // x̄ is zero: nothing flows back
    Var* xb = it->second;
    bp.pos = b.pos;
    switch (b.op) {
      case Op::Const:
      case Op::Global:
      case Op::Check: return;
      case Op::Copy: acc(b.a, xb); return;  // ρ{x_i = x_j} ≡ x̄_j ⊕= x̄_i
      case Op::App: {                        // ρ{x_i = x_j x_k} ≡ (x̄_j, x̄_k) ⊕= x̃_i x̄_i
        Binding& call = bp.emit(Op::BackCall, "back");
        call.a = tilde.at(b.x);
        call.b = xb;
        Var* u = call.x;
        Var* fb = bp.proj(Op::Car, u, "(cons f-bar x-bar)");
        Var* ab = bp.proj(Op::Cdr, u, "(cons f-bar x-bar)");
        acc(b.a, fb);  // when j = k both halves accumulate into the same variable
        acc(b.b, ab);
        return;
      }
      case Op::Lambda: {  // ρ{x_i = λ x e} ≡ [x̄'_1 ... x̄'_l] ⊕= x̄_i (environment sensitivities)
        for (size_t k = 0; k < b.lam->free.size(); k++)
          acc(b.caps ? b.caps[k] : b.lam->free[k], bp.env_ref(xb, (int)k, b.lam));
        return;
      }
      case Op::Cons:
        acc(b.a, bp.proj(Op::Car, xb, "(cons a d)"));
        acc(b.b, bp.proj(Op::Cdr, xb, "(cons a d)"));
        return;
      case Op::Car: {
        Var* other = bp.prim_app(current->p_rzero, bp.proj(Op::Cdr, lookup(fw, b.a)));
        acc(b.a, bp.cons(xb, other));
        return;
      }
      case Op::Cdr: {
        Var* other = bp.prim_app(current->p_rzero, bp.proj(Op::Car, lookup(fw, b.a)));
        acc(b.a, bp.cons(other, xb));
        return;
      }
      case Op::EnvRef: {
        // the sensitivity of a closure of b.lam that is zero but at one environment slot
        Lambda* rl = reverse_transform(b.lam);
        size_t n = b.lam->free.size();
        Var** caps = static_cast<Var**>(gc_alloc(sizeof(Var*) * (n ? n : 1)));
        for (size_t k = 0; k < n; k++)
          caps[k] = (int)k == b.index ? xb : bp.prim_app(current->p_rzero, bp.env_ref(lookup(fw, b.a), (int)k, rl));
        acc(b.a, bp.lambda(b.lam, caps));
        return;
      }
      case Op::BackCall: return;  // expanded before the transform
      case Op::If: {
        const IfInfo& info = ifs.at(b.x);
        Var* cur = bp.app(info.bp, xb);
        for (Var* v : info.vars) {
          acc(v, bp.proj(Op::Car, cur, "(list sensitivity ...)"));
          cur = bp.proj(Op::Cdr, cur, "(list sensitivity ...)");
        }
        return;
      }
    }
  }

  void run() {
    Body* body = expand_backcalls(L->body);
    RL->body = new_body();
    Emitter out{RL->body, L->pos};
    for (const Binding& b : body->binds) phi(b, out);
    // The backpropagator: λ ȳ. let x̄ = 0 ...; ρ{x_n = e_n}; ...; ρ{x_1 = e_1} in (f̄, x̄_0)
    Lambda* B = new_lambda();
    B->name = intern(std::string("backpropagator of ") + (L->name ? L->name : "lambda"));
    B->pos = L->pos;
    B->param = new_var("ys");
    B->body = new_body();
    bp = Emitter{B->body, L->pos};
    sens[body->result] = bp.prim_app(current->p_unsensitize, B->param);
    for (size_t i = body->binds.size(); i-- > 0;) rho(body->binds[i]);
    size_t nf = L->free.size();
    Var** caps = static_cast<Var**>(gc_alloc(sizeof(Var*) * (nf ? nf : 1)));
    for (size_t k = 0; k < nf; k++) caps[k] = sens_or_zero(L->free[k]);
    Var* fbar = bp.lambda(L, caps);
    Var* xbar = sens_or_zero(L->param);
    B->body->result = bp.prim_app(current->p_sensitize, bp.cons(fbar, xbar));
    finish_backprop(B);
    Var* bpv = out.lambda(B, nullptr);
    RL->body->result = out.cons(lookup(fw, body->result), bpv);
  }
};

}  // namespace

Lambda* forward_transform(Lambda* lam) {
  if (lam->fwd) return lam->fwd;
  AnalysisScope analysis;
  VarMap m;
  Lambda* f = start_transform(lam, 'F', m);
  lam->fwd = f;  // before the body: recursive references find it
  f->body = forward_body(lam->body, m);
  return f;
}

Lambda* reverse_transform(Lambda* lam) {
  if (lam->rev) return lam->rev;
  AnalysisScope analysis;
  Reverse r;
  r.L = lam;
  r.RL = start_transform(lam, 'R', r.fw);
  lam->rev = r.RL;
  r.run();
  return r.RL;
}

}  // namespace vlad
