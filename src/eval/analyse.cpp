// analyse.cpp — free variables (in a fixed order) and compilation of an A-normal body into
// instructions with lexical addresses: a frame slot for the lambda's own variables, an env index
// for its free variables. Done once per lambda, on its first call.
#include <algorithm>
#include <climits>
#include <iterator>
#include <set>
#include <unordered_map>

#include "code.hpp"
#include "depth_lease.hpp"
#include "interp.hpp"

namespace vlad {

namespace {

struct FreeWalk {
  // (Vectors the thread keeps, DepthLease, so that a walk does not grow fresh ones by doubling:
  // their mallocs and frees were 4% of W4's first call.)
  std::vector<Var*>& refs;  // sorted and compared at the end: cheaper than sets
  std::vector<Var*>& bound;
  std::vector<Lambda*>& nested;
  std::set<Lambda*> visited;
  bool revisit = false;  // a lambda met twice: shared, or in a cycle (transformed code)

  void lambda(Lambda* lam) {
    if (lam->free_done) {
      refs.insert(refs.end(), lam->free.begin(), lam->free.end());
      return;
    }
    if (!visited.insert(lam).second) {
      revisit = true;
      return;
    }
    nested.push_back(lam);
    bound.push_back(lam->param);
    body(lam->body);
  }

  void body(Body* b) {
    for (Binding& bd : b->binds) {
      bound.push_back(bd.x);
      if (bd.a) refs.push_back(bd.a);
      if (bd.b) refs.push_back(bd.b);
      if (bd.op == Op::If) {
        body(bd.then_);
        body(bd.else_);
      } else if (bd.op == Op::Lambda) {
        if (bd.caps) {
          for (size_t i = 0; i < bd.lam->free.size(); i++) refs.push_back(bd.caps[i]);
          if (!bd.lam->free_done) compute_free_variables(bd.lam);
        } else {
          lambda(bd.lam);
        }
      }
    }
    refs.push_back(b->result);
  }
};

}  // namespace

namespace {
// The variables met by a walk, by address (open addressing, linear probing): each bound one, and
// each one read, once. (Sorting every read by id instead was 4% of W4's first call.) Not the
// transform's FlatSet (flat_map.hpp): its clear() goes over the largest array it ever grew to and
// its arrays come from an arena; this one is sized afresh for each lambda, and with a FlatSet kept
// per depth, or made per lambda over a stack buffer, the first call took 5.9% or 1.4% more.
class SeenSet {
 public:
  void reset(size_t n) {
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    slots_.assign(cap, nullptr);
    mask_ = cap - 1;
  }
  // Whether v was absent (and is now present).
  bool insert(Var* v) {
    for (size_t i = ((uintptr_t)v * 0x9E3779B97F4A7C15ull >> 20) & mask_;; i = (i + 1) & mask_) {
      if (slots_[i] == v) return false;
      if (!slots_[i]) {
        slots_[i] = v;
        return true;
      }
    }
  }

 private:
  std::vector<Var*> slots_;
  size_t mask_ = 0;
};

struct FreeBuffers {
  std::vector<Var*> refs, bound, free;
  std::vector<Lambda*> nested;
  SeenSet seen;
};
}  // namespace

void compute_free_variables(Lambda* lam) {
  if (lam->free_done) return;
  DepthLease<FreeBuffers> lease;
  FreeBuffers& buf = lease.get();
  buf.refs.clear();
  buf.bound.clear();
  buf.free.clear();
  buf.nested.clear();
  FreeWalk w{buf.refs, buf.bound, buf.nested, {}, false};
  std::vector<Lambda*> members;
  if (lam->group) members.assign(lam->group->begin(), lam->group->end());
  else members.push_back(lam);
  for (Lambda* m : members) w.visited.insert(m);
  for (Lambda* m : members) {
    w.bound.push_back(m->param);
    w.body(m->body);
  }
  // free = the variables read and not bound, in the order of their ids
  std::vector<Var*>& free = buf.free;
  buf.seen.reset(w.refs.size() + w.bound.size());
  for (Var* v : w.bound) buf.seen.insert(v);
  for (Var* v : w.refs)
    if (buf.seen.insert(v)) free.push_back(v);
  std::sort(free.begin(), free.end(), [](Var* a, Var* b) { return a->id < b->id; });
  for (Lambda* m : members) {
    m->free.assign(free.begin(), free.end());
    m->free_done = true;
  }
  // The lambdas met inside. When they form a tree, innermost first (the reverse of the walk's
  // order, which meets a lambda before those inside it): each then finds those inside it done and
  // walks its own body only. (In the walk's order each walked all the bodies inside it again:
  // 2,000 nested lambdas took 320 MB and 0.5 s, 10,000 took 7 GB and 35 s.) Where one was met
  // twice (a transform's lambdas may contain one another), in the walk's order: a lambda computed
  // first would take an enclosing one's parameter, walked inside it, for one of its own.
  if (w.revisit) {
    for (Lambda* n : w.nested) compute_free_variables(n);
  } else {
    for (size_t i = w.nested.size(); i-- > 0;) compute_free_variables(w.nested[i]);
  }
}

namespace {

// Per-variable notes live in the Var (Var::mark), not in hash maps: compiling is a large part of
// a nested derivative's first call.
uint32_t compile_pass = 0;

struct Compiler {
  Lambda* lam = nullptr;
  int nslots = 0;
  uint32_t pass = ++compile_pass;

  Var* note(Var* v) {
    if (v->mark != pass) {
      v->mark = pass;
      v->uses = 0;
      v->last_read = -1;
      v->free_index = -1;
    }
    return v;
  }
  int& uses(Var* v) { return note(v)->uses; }

  int ref(Var* v) {
    int i = note(v)->free_index;
    if (i == Var::kLocalVar) return v->slot;
    if (i < 0) throw Error(std::string("internal error: variable ") + v->name + " is not in scope", lam->pos);
    return -(i + 1);
  }

  void bind(Var* v) {
    note(v)->free_index = Var::kLocalVar;
    v->slot = nslots++;
  }

  void count_uses(Body* b) {
    for (Binding& bd : b->binds) {
      if (bd.a) uses(bd.a)++;
      if (bd.b) uses(bd.b)++;
      if (bd.op == Op::If) {
        count_uses(bd.then_);
        count_uses(bd.else_);
      } else if (bd.op == Op::Lambda) {
        for (size_t i = 0; i < bd.lam->free.size(); i++) uses(bd.caps ? bd.caps[i] : bd.lam->free[i])++;
      }
    }
    uses(b->result)++;
  }

  // Frame slots are reused once a variable is dead (A-normal code has many short-lived
  // temporaries): positions number the bindings in execution order, branches depth first; a
  // slot is freed after its variable's last read. A branch's variables never outlive it, and a
  // variable last read in one branch is dead in the other, so one free list serves both.
  std::vector<int> free_slots;
  int position = 0;

  void note_read(Var* v) { note(v)->last_read = position; }

  void number_reads(Body* b) {
    for (Binding& bd : b->binds) {
      ++position;
      if (bd.a) note_read(bd.a);
      if (bd.b) note_read(bd.b);
      if (bd.op == Op::Lambda)
        for (size_t k = 0; k < bd.lam->free.size(); k++) note_read(bd.caps ? bd.caps[k] : bd.lam->free[k]);
      if (bd.op == Op::If) {
        number_reads(bd.then_);
        number_reads(bd.else_);
      }
    }
    ++position;
    note_read(b->result);
  }

  int take_slot() {
    if (free_slots.empty()) return nslots++;
    int s = free_slots.back();
    free_slots.pop_back();
    return s;
  }

  void release_dead(Var* v) {
    if (v && note(v)->free_index == Var::kLocalVar) {
      if (v->last_read == position) {
        free_slots.push_back(v->slot);
        v->last_read = -1;  // free once, even when read twice at one position
      }
    }
  }

  void assign_slots(Body* b) {
    for (Binding& bd : b->binds) {
      ++position;
      release_dead(bd.a);
      if (bd.b != bd.a) release_dead(bd.b);
      if (bd.op == Op::Lambda)
        for (size_t k = 0; k < bd.lam->free.size(); k++) release_dead(bd.caps ? bd.caps[k] : bd.lam->free[k]);
      note(bd.x)->free_index = Var::kLocalVar;
      bd.x->slot = take_slot();
      if (note(bd.x)->last_read < 0) {  // never read: its slot is free at once
        free_slots.push_back(bd.x->slot);
      }
      if (bd.op == Op::If) {
        assign_slots(bd.then_);
        assign_slots(bd.else_);
      }
    }
    ++position;
    release_dead(b->result);
  }

  // Whether binding bd has no effect but its value (it cannot fail, and makes only a new
  // object): unread, it is not run at all. (The transforms leave such bindings behind: the
  // transformed operator of a call that a rule then makes another way, say.)
  static bool pure(const Binding& bd) {
    return bd.op == Op::Const || bd.op == Op::Cons || bd.op == Op::Lambda;
  }

  // Binding i and the next two are (p = e), (car p), (cdr p) with p used by those two only.
  bool split_at(Body* b, size_t i) {
    size_t n = b->binds.size();
    Binding& bd = b->binds[i];
    return i + 2 < n && uses(bd.x) == 2 && b->binds[i + 1].op == Op::Car && b->binds[i + 1].a == bd.x &&
           b->binds[i + 2].op == Op::Cdr && b->binds[i + 2].a == bd.x;
  }

  // Bindings i .. i+4 are the way out of a reverse-transformed body through a tail call:
  // p = (f a), v = (car p), t = (cdr p), B = (closure capturing t), (cons v B) = the result.
  // Returns the index of t among B's captures, or -1.
  int chain_call_at(Body* b, size_t i, bool tail) {
    size_t n = b->binds.size();
    if (!tail || b->binds[i].op != Op::App || b->binds[i].raw_call || i + 5 != n || !split_at(b, i)) return -1;
    Binding& v = b->binds[i + 1];
    Binding& t = b->binds[i + 2];
    Binding& lam = b->binds[i + 3];
    Binding& res = b->binds[i + 4];
    if (lam.op != Op::Lambda || res.op != Op::Cons || res.x != b->result || res.a != v.x || res.b != lam.x ||
        uses(v.x) != 1 || uses(t.x) != 1 || uses(lam.x) != 1 || uses(res.x) != 1)
      return -1;
    for (size_t k = 0; k < lam.lam->free.size(); k++)
      if ((lam.caps ? lam.caps[k] : lam.lam->free[k]) == t.x) return (int)k;
    return -1;
  }

  int* caps_of(Binding& bd, int* ncaps) {
    size_t nf = bd.lam->free.size();
    *ncaps = (int)nf;
    int* caps = static_cast<int*>(gc_alloc_atomic(sizeof(int) * (nf ? nf : 1)));
    for (size_t k = 0; k < nf; k++) caps[k] = ref(bd.caps ? bd.caps[k] : bd.lam->free[k]);
    return caps;
  }

  bool entry_next = false;  // the next body compiled is the lambda's own (compile)
  Code* body(Body* b, bool tail) {
    bool top = entry_next;
    entry_next = false;
    Code* c = static_cast<Code*>(gc_alloc(sizeof(Code)));
    new (c) Code();
    gc_vector<Instr> ins;  // scanned: it alone holds the caps arrays and branch code until copied
    size_t n = b->binds.size();
    ins.reserve(n);  // (at most one instruction a binding)
    // (cons r1 r2) as the body's value, last: returned as two values.
    size_t end = n;
    bool chain_way_out = n >= 5 && chain_call_at(b, n - 5, tail) >= 0;
    if (n > 0 && !chain_way_out && b->binds[n - 1].op == Op::Cons && b->binds[n - 1].x == b->result && uses(b->result) == 1) {
      c->pair_result = true;
      c->r1 = ref(b->binds[n - 1].a);
      c->r2 = ref(b->binds[n - 1].b);
      end = n - 1;
      // ... and a raw backpropagator's (cons f̄ (cons a b)) as three (Code::triple_result)
      Binding* xbar = n >= 2 ? &b->binds[n - 2] : nullptr;
      if (top && lam->raw_bp && xbar && xbar->op == Op::Cons && xbar->x == b->binds[n - 1].b &&
          xbar->x != b->binds[n - 1].a && uses(xbar->x) == 1) {
        c->triple_result = true;
        c->r2 = ref(xbar->a);
        c->r3 = ref(xbar->b);
        end = n - 2;
      }
    }
    for (size_t i = 0; i < end; i++) {
      Binding& bd = b->binds[i];
      if ((i & 4095) == 4095) poll_interrupt(bd.pos);  // (a body of a million bindings: Ctrl-C works)
      if (uses(bd.x) == 0 && pure(bd)) continue;
      // (cons value backpropagator) = (f a), taken apart at once: one instruction, and natively
      // implemented callees never build the pair.
      bool split = (bd.op == Op::App || bd.op == Op::BackCall || bd.op == Op::If) && split_at(b, i);
      int hole = chain_way_out && i + 5 == n ? chain_call_at(b, i, tail) : -1;
      Instr in{};
      in.op = bd.op;
      in.src = &bd;
      in.x = bd.x->slot;
      if (bd.a) in.a = ref(bd.a);
      if (bd.b) in.b = ref(bd.b);
      if (bd.op == Op::Const || bd.op == Op::Check) in.kbits = bd.constant.bits;
      in.raw_call = bd.raw_call;
      if (bd.op == Op::EnvRef) {
        in.index = bd.index;
        in.lam = bd.lam;
      }
      bool last = i + 1 == n && bd.x == b->result;
      bool split3 = false;
      if (split) {
        in.split = true;
        in.x = b->binds[i + 1].x->slot;
        in.x2 = b->binds[i + 2].x->slot;
        // ... and its x̄ taken apart at once too: (f̄ car-x̄ cdr-x̄)
        if (bd.op == Op::BackCall && split_at(b, i + 2)) {
          split3 = true;
          in.split3 = true;
          in.x2 = b->binds[i + 3].x->slot;
          in.x3 = b->binds[i + 4].x->slot;
        }
      }
      switch (bd.op) {
        case Op::If:
          in.then_ = body(bd.then_, tail && last);
          in.else_ = body(bd.else_, tail && last);
          in.tail = tail && last;
          break;
        case Op::App:
          in.tail = tail && last && !split;
          if (hole >= 0) {
            in.split = false;
            in.tail = true;
            in.chain_call = true;
            in.hole = hole;
            in.chain = b->binds[i + 3].lam;
            in.caps = caps_of(b->binds[i + 3], &in.ncaps);
          }
          // Fuse (f (cons p q)) when the pair is used only here: binary primitives then take
          // their two arguments without the pair being allocated.
          if (!ins.empty() && ins.back().op == Op::Cons && b->binds[i - 1].x == bd.b && uses(bd.b) == 1) {
            Instr& prev = ins.back();
            in.op2 = AppPair;
            in.b = prev.a;
            in.b2 = prev.b;
            ins.pop_back();
            // ... and (cons q r) for q too, when that pair is read only there: (f p q . r)
            Var* q = b->binds[i - 1].b;
            if (i >= 2 && !ins.empty() && ins.back().op == Op::Cons && b->binds[i - 2].x == q && uses(q) == 1 &&
                ins.back().x == in.b2)
              in.parts3 = true;
          }
          break;
        case Op::Lambda: {
          in.lam = bd.lam;
          in.caps = caps_of(bd, &in.ncaps);
          in.self_ref = bd.lam == lam && in.ncaps == (int)lam->free.size();
          for (int k = 0; in.self_ref && k < in.ncaps; k++) in.self_ref = in.caps[k] == -(k + 1);
          // (cons v B) = the body's value, B a backpropagator: a way out of a reverse transform
          if (lam->transform == 'R' && bd.lam->way_out && i + 2 == n && b->binds[n - 1].op == Op::Cons &&
              b->binds[n - 1].b == bd.x && b->binds[n - 1].x == b->result) {
            in.inert_guard = true;
            in.b = ref(b->binds[n - 1].a);
          }
          break;
        }
        default: break;
      }
      if ((in.op == Op::App && !in.chain_call) || in.op == Op::BackCall) {
        in.site_file = bd.pos.file;
        in.site_line = bd.pos.line;
        in.site_col = bd.pos.col;
      }
      ins.push_back(in);
      if (hole >= 0) i += 4;
      else if (split3) i += 4;
      else if (split) i += 2;
    }
    c->n = (int)ins.size();
    c->ins = static_cast<Instr*>(gc_alloc(sizeof(Instr) * (ins.size() ? ins.size() : 1)));
    std::copy(ins.begin(), ins.end(), c->ins);
    c->result = ref(b->result);
    return c;
  }
};

}  // namespace

void compile(Lambda* lam) {
  if (lam->code) return;
  AnalysisScope analysis;
  ensure_body(lam);
  if (!lam->free_done) compute_free_variables(lam);
  Compiler c;
  c.lam = lam;
  for (size_t i = 0; i < lam->free.size(); i++) c.note(lam->free[i])->free_index = (int)i;
  c.bind(lam->param);
  c.number_reads(lam->body);
  // A reverse transform's argument stays in its slot: a way out may need its shape (eval.cpp).
  if (lam->transform == 'R') c.note(lam->param)->last_read = INT_MAX;
  c.position = 0;
  c.assign_slots(lam->body);
  c.count_uses(lam->body);
  c.entry_next = true;
  Code* code = c.body(lam->body, true);
  code->nslots = c.nslots;
  code->entry = true;
  code->lam = lam;
  // A backpropagator that starts by calling the backpropagator it captured for a tail call.
  if (lam->raw_bp && code->n > 0) {
    const Instr& first = code->ins[0];
    if (first.op == Op::BackCall && first.split && first.a < 0 && first.b == 0) {
      code->chain_head = true;
      code->chain_hole = -first.a - 1;
      code->ins[0].op2 = BackChainLink;
    }
  }
  lam->code = code;
}

}  // namespace vlad
