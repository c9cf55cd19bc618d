// expand.cpp — reduces every form of SPEC §2 to the core and emits it in A-normal form.
// Variables are alpha-converted as they are bound (each binding makes a new Var), so the output
// needs no renaming; tuples follow SPEC §2 exactly: (f a b c) = (f (cons a (cons b c))).
#include <algorithm>
#include <cstdio>
#include <unordered_map>
#include <unordered_set>
#include <functional>

#include "interp.hpp"

namespace vlad {

namespace {

int next_var_id = 1;

struct Scope {
  // name -> Var, or name -> letrec group member
  struct Entry {
    const char* name;
    Var* var;
    Lambda* rec;  // letrec member
  };
  std::vector<Entry> entries;
  Scope* parent;
  explicit Scope(Scope* p) : parent(p) {}
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;
  const Entry* find(const char* name) const {
    if (entries.size() <= kScan) {
      for (auto it = entries.rbegin(); it != entries.rend(); ++it)
        if (it->name == name) return &*it;
    } else {
      // A scope of many names (a pattern of thousands of variables): found through an index of
      // its entries, the last of a name winning, as the scan from the end finds it. (Scanned, a
      // body reading each of n variables took n^2 / 2 comparisons to expand.) Entries are only
      // ever appended, so the index is brought up to date here.
      for (; indexed < entries.size(); indexed++) own[entries[indexed].name] = indexed;
      auto it = own.find(name);
      if (it != own.end()) return &entries[it->second];
    }
    if (!parent) return nullptr;
    // What the enclosing scopes give a name, remembered here: a scope's entries are all made
    // before a scope inside it is, so the answer stays right. (Each lookup walked the whole chain:
    // 20,000 nested lets took 2 s to expand, 10^5 took 80 s; a keyword, never bound, walks it all.)
    auto it = outer.find(name);
    if (it != outer.end()) return it->second;
    const Entry* e = parent->find(name);
    outer.emplace(name, e);
    return e;
  }

 private:
  static constexpr size_t kScan = 16;
  mutable std::unordered_map<const char*, const Entry*> outer;
  mutable std::unordered_map<const char*, size_t> own;
  mutable size_t indexed = 0;
};

struct S {  // interned keywords
  const char *quote, *lambda, *define, *let, *letstar, *letrec, *if_, *cond, *else_, *and_, *or_, *begin,
      *cons, *consstar, *list, *include, *arrow, *car, *cdr;
  S() {
    quote = intern("quote"); lambda = intern("lambda"); define = intern("define"); let = intern("let");
    letstar = intern("let*"); letrec = intern("letrec"); if_ = intern("if"); cond = intern("cond");
    else_ = intern("else"); and_ = intern("and"); or_ = intern("or"); begin = intern("begin");
    cons = intern("cons"); consstar = intern("cons*"); list = intern("list"); include = intern("include");
    arrow = intern("===>");
    car = intern("car");
    cdr = intern("cdr");
  }
};

const S& syms() {
  static S s;
  return s;
}

[[noreturn]] void syntax_error(const std::string& msg, const Sx* at) { throw Error(msg, at ? at->pos : Pos()); }

std::vector<Sx*> list_items(Sx* s, const char* what) {
  std::vector<Sx*> out;
  Sx* p = s;
  while (p->type == Sx::Pair) {
    out.push_back(p->car);
    p = p->cdr;
  }
  if (p->type != Sx::Nil) syntax_error(std::string(what) + ": improper list in syntax", s);
  return out;
}

struct Expander {
  Interp& in;
  bool prelude;
  // The inner lambdas a curried define makes, (define ((f a) b) ...): named f too, so a call
  // trace says "in gradient-R", not "in lambda".
  std::vector<const Sx*> curried;
  const char* curried_name = nullptr;
  // The variables bound to a name of the program's (destructure): a pattern's part, a
  // parameter or a let's value takes the name of the variable it is bound to, unless it has one
  // already ((let ((x y)) ...) binds x to y's). Closures conform by the names of their free
  // variables (transform.cpp, closures_conform), and these were all "_" or "call".
  std::unordered_set<Var*> named_vars;

  Var* fresh(const char* name) {
    Var* v = new_var(name);
    return v;
  }

  Binding& emit(Body* out, Op op, const char* name, Pos pos) {
    out->binds.emplace_back();
    Binding& b = out->binds.back();
    b.op = op;
    b.x = fresh(name);
    b.pos = pos;
    return b;
  }

  Var* constant(Body* out, Value v, Pos pos) {
    Binding& b = emit(out, Op::Const, "k", pos);
    b.constant = v;
    return b.x;
  }

  bool is_keyword(const Sx* head, Scope* sc, const char* kw) {
    return sx_is_sym(head, kw) && !sc->find(kw);
  }

  // ---- patterns ----
  // A pattern is normalised to: Sym, (cons p q), or a constant.
  // (vars: the names so far, a set: a pattern of n variables was n^2 / 2 comparisons)
  void collect_pattern_vars(Sx* p, std::unordered_set<const char*>& vars, Scope* sc) {
    const S& k = syms();
    if (p->type == Sx::Sym) {
      if (!vars.insert(p->text).second) syntax_error(std::string("duplicate variable ") + p->text + " in pattern", p);
      return;
    }
    if (p->type == Sx::Pair) {
      Sx* head = p->car;
      if (sx_is_sym(head, k.quote)) return;
      if (sx_is_sym(head, k.cons) || sx_is_sym(head, k.consstar) || sx_is_sym(head, k.list)) {
        for (Sx* q : list_items(p->cdr, "pattern")) collect_pattern_vars(q, vars, sc);
        return;
      }
      syntax_error("bad pattern " + sx_to_string(p) + " (expected a variable, (cons p q), (cons* p ...), (list p ...) or a constant)", p);
    }
  }

  void check_pattern(Sx* p, Scope* sc) {
    std::unordered_set<const char*> vars;
    collect_pattern_vars(p, vars, sc);
  }

  // Binds pattern `p` against the value in `v`, adding variables to `sc`.
  // The text a split or check of a pattern reports on a mismatch (pattern_error, eval.cpp): the
  // whole pattern's, or (prefixed by \x01) what a count of arguments or list elements reads
  // best as: kind 'A' (NAME's N arguments, element I), 'L' (list pattern TEXT's N elements, element
  // I) or 'E' (the end of that list), completed with what the value shows at run time.
  // The text itself is interned once and referred to by its address (\x03 and the address in
  // hex): a copy in each element's text made a pattern of n elements n^2 bytes (10,000 variables:
  // 600 MB, in memory outside the heap limit).
  static const char* count_text(char kind, size_t n, size_t i, const char* text) {
    char ref[32];
    snprintf(ref, sizeof ref, "\x03%llx", (unsigned long long)(uintptr_t)text);
    return intern(std::string("\x01") + kind + std::to_string(n) + " " + std::to_string(i) + " " + ref);
  }

  // `args_of`: the pattern is a formals list's (cons* p q ...), of the procedure of that name ("" if
  // anonymous): its splits report a count of arguments.
  void destructure(Sx* p, Var* v, Body* out, Scope* sc, const char* whole, const char* args_of = nullptr) {
    const S& k = syms();
    switch (p->type) {
      case Sx::Sym:
        if (named_vars.insert(v).second) v->name = p->text;
        sc->entries.push_back({p->text, v, nullptr});
        return;
      case Sx::Real: case Sx::Bool: case Sx::Str: case Sx::Nil: {
        Binding& b = emit(out, Op::Check, "_", p->pos);
        b.a = v;
        b.constant = sx_to_value(p);
        b.pattern = whole;
        return;
      }
      case Sx::Pair: {
        Sx* head = p->car;
        if (sx_is_sym(head, k.quote)) {
          Binding& b = emit(out, Op::Check, "_", p->pos);
          b.a = v;
          auto items = list_items(p->cdr, "quote");
          if (items.size() != 1) syntax_error("quote: expected one datum", p);
          b.constant = sx_to_value(items[0]);
          b.pattern = whole;
          return;
        }
        auto items = list_items(p->cdr, "pattern");
        if (sx_is_sym(head, k.list)) {
          Var* cur = v;
          const char* text = intern(sx_to_string(p));
          for (size_t i = 0; i < items.size(); i++) {
            Sx* q = items[i];
            const char* at = count_text('L', items.size(), i, text);
            Binding& a = emit(out, Op::Car, "_", q->pos);
            a.a = cur; a.pattern = at;
            Var* av = a.x;
            Binding& d = emit(out, Op::Cdr, "_", q->pos);
            d.a = cur; d.pattern = at;
            Var* dv = d.x;
            destructure(q, av, out, sc, whole);
            cur = dv;
          }
          Binding& c = emit(out, Op::Check, "_", p->pos);
          c.a = cur; c.constant = Value::nil(); c.pattern = count_text('E', items.size(), items.size(), text);
          return;
        }
        if (sx_is_sym(head, k.cons) && items.size() != 2) syntax_error("cons pattern: expected two sub-patterns", p);
        if (items.empty()) syntax_error("cons* pattern: expected at least one sub-pattern", p);
        Var* cur = v;
        for (size_t i = 0; i + 1 < items.size(); i++) {
          const char* at = args_of ? count_text('A', items.size(), i, args_of) : whole;
          Binding& a = emit(out, Op::Car, "_", items[i]->pos);
          a.a = cur; a.pattern = at;
          Var* av = a.x;
          Binding& d = emit(out, Op::Cdr, "_", items[i]->pos);
          d.a = cur; d.pattern = at;
          Var* dv = d.x;
          destructure(items[i], av, out, sc, whole);
          cur = dv;
        }
        destructure(items.back(), cur, out, sc, whole);
        return;
      }
    }
  }

  static constexpr const char* kNoRest =
      "rest parameters are not supported (every procedure takes one argument: (f a b) passes the tuple (a . b))";
  static bool proper(const Sx* l) {
    while (l->type == Sx::Pair) l = l->cdr;
    return l->type == Sx::Nil;
  }

  // The single pattern a formals list stands for: () -> '(), (p) -> p, (p q ...) -> (cons* p q ...).
  Sx* formals_pattern(Sx* formals, const Sx* at) {
    if (formals->type == Sx::Nil) return formals;
    if (formals->type != Sx::Pair) syntax_error("lambda: expected a parameter list, got " + sx_to_string(formals), at);
    if (!proper(formals)) syntax_error(std::string("lambda: ") + kNoRest, at);
    auto items = list_items(formals, "lambda");
    if (items.size() == 1) return items[0];
    Sx* pat = sx_nil(formals->pos);
    for (size_t i = items.size(); i-- > 0;) pat = sx_cons(items[i], pat, items[i]->pos);
    return sx_cons(sx_sym("cons*", formals->pos), pat, formals->pos);
  }

  // Builds a lambda from a formals list and a body (several expressions allowed).
  Lambda* make_lambda(Sx* formals, Sx* body, Scope* sc, const char* name, const Sx* at) {
    Sx* pat = formals_pattern(formals, at);
    check_pattern(pat, sc);
    Lambda* lam = new_lambda();
    lam->name = name;
    lam->pos = at->pos;
    Scope inner(sc);
    lam->param = fresh(pat->type == Sx::Sym ? pat->text : "arg");
    lam->body = new_body();
    const char* whole = intern(sx_to_string(formals->type == Sx::Pair && formals->cdr->type == Sx::Nil ? formals->car : pat));
    bool tuple = formals->type == Sx::Pair && formals->cdr->type != Sx::Nil;  // (cons* p q ...)
    // (a count of arguments reads "NAME: expected 2 arguments, got 1 (... pattern (x y))": the
    // procedure's name and its formals as written, \x02 between them)
    const char* args_of = tuple ? intern(std::string(name ? name : "") + "\x02" + sx_to_string(formals)) : nullptr;
    destructure(pat, lam->param, lam->body, &inner, whole, args_of);
    lam->body->result = sequence(body, lam->body, &inner, at);
    return lam;
  }

  Var* lambda_binding(Body* out, Lambda* lam, Pos pos) {
    Binding& b = emit(out, Op::Lambda, lam->name ? lam->name : "lambda", pos);
    b.lam = lam;
    return b.x;
  }

  Var* sequence(Sx* forms, Body* out, Scope* sc, const Sx* at) {
    auto items = list_items(forms, "body");
    if (items.empty()) syntax_error("empty body", at);
    Var* r = nullptr;
    for (Sx* e : items) {
      if (e->type == Sx::Pair && is_keyword(e->car, sc, syms().define))
        syntax_error("define: only allowed at top level", e);
      r = expr(e, out, sc);
    }
    return r;
  }

  Var* global_ref(const char* name, Body* out, Pos pos) {
    Cell* c = in.cell(name, prelude);
    if (c->value.is_unbound()) in.force_cell(c);  // (a prelude definition not read yet: now)
    // (a builtin is constant; a host primitive, which the host may register again, is not)
    if (prelude && c->value.is_obj() && kind_of(c->value) == Kind::Prim &&
        static_cast<Prim*>(c->value.as_obj())->cls != PrimClass::Host)
      return constant(out, c->value, pos);
    Binding& b = emit(out, Op::Global, name, pos);
    b.cell = c;
    return b.x;
  }

  Var* variable(Sx* s, Body* out, Scope* sc) {
    const Scope::Entry* e = sc->find(s->text);
    if (e) {
      if (e->var) return e->var;
      return lambda_binding(out, e->rec, s->pos);
    }
    return global_ref(s->text, out, s->pos);
  }

  Var* tuple(const std::vector<Sx*>& args, size_t from, Body* out, Scope* sc, Pos pos) {
    if (from >= args.size()) return constant(out, Value::nil(), pos);
    if (from + 1 == args.size()) return expr(args[from], out, sc);
    Var* a = expr(args[from], out, sc);
    Var* d = tuple(args, from + 1, out, sc, pos);
    Binding& b = emit(out, Op::Cons, "tuple", pos);
    b.a = a; b.b = d;
    return b.x;
  }

  Var* make_list(const std::vector<Sx*>& args, size_t from, Body* out, Scope* sc, Pos pos, bool star) {
    if (star && from + 1 == args.size()) return expr(args[from], out, sc);
    if (from >= args.size()) return constant(out, Value::nil(), pos);
    Var* a = expr(args[from], out, sc);
    Var* d = make_list(args, from + 1, out, sc, pos, star);
    Binding& b = emit(out, Op::Cons, "cons", pos);
    b.a = a; b.b = d;
    return b.x;
  }

  Var* if_form(Var* c, const std::function<Var*(Body*)>& then_, const std::function<Var*(Body*)>& else_, Body* out,
               Pos pos) {
    Binding& b = emit(out, Op::If, "if", pos);
    b.a = c;
    Body* t = new_body();
    Body* e = new_body();
    Var* x = b.x;  // b may move when branches emit into other bodies; keep what we need first
    size_t idx = out->binds.size() - 1;
    t->result = then_(t);
    e->result = else_(e);
    out->binds[idx].then_ = t;
    out->binds[idx].else_ = e;
    return x;
  }

  unsigned exprs = 0;
  Var* expr(Sx* e, Body* out, Scope* sc) {
    const S& k = syms();
    if ((++exprs & 4095) == 0) poll_interrupt(e->pos);
    switch (e->type) {
      case Sx::Real: return constant(out, Value::real(e->real), e->pos);
      case Sx::Bool: return constant(out, Value::boolean(e->boolean), e->pos);
      case Sx::Str: return constant(out, sx_to_value(e), e->pos);
      case Sx::Nil: syntax_error("empty application (); the empty list is written '()", e);
      case Sx::Sym:
        if (e->text == k.arrow) syntax_error("===> must follow a top-level expression", e);
        return variable(e, out, sc);
      case Sx::Pair: break;
    }
    Sx* head = e->car;
    auto args = list_items(e->cdr, "application");
    if (head->type == Sx::Sym && !sc->find(head->text)) {
      const char* h = head->text;
      if (h == k.quote) {
        if (args.size() != 1) syntax_error("quote: expected one datum", e);
        return constant(out, sx_to_value(args[0]), e->pos);
      }
      if (h == k.lambda) {
        if (args.size() < 2) syntax_error("lambda: expected (lambda (pattern) body ...)", e);
        const char* name = std::find(curried.begin(), curried.end(), e) != curried.end() ? curried_name : nullptr;
        return lambda_binding(out, make_lambda(args[0], e->cdr->cdr, sc, name, e), e->pos);
      }
      if (h == k.if_) {
        if (args.size() != 3) syntax_error("if: expected (if test consequent alternative)", e);
        Var* c = expr(args[0], out, sc);
        return if_form(c, [&](Body* b) { return expr(args[1], b, sc); },
                       [&](Body* b) { return expr(args[2], b, sc); }, out, e->pos);
      }
      if (h == k.cons) {
        if (args.size() != 2) syntax_error("cons: expected two arguments", e);
        Var* a = expr(args[0], out, sc);
        Var* d = expr(args[1], out, sc);
        Binding& b = emit(out, Op::Cons, "cons", e->pos);
        b.a = a; b.b = d;
        return b.x;
      }
      if (h == k.list) return make_list(args, 0, out, sc, e->pos, false);
      if (h == k.consstar) {
        if (args.empty()) syntax_error("cons*: expected at least one argument", e);
        return make_list(args, 0, out, sc, e->pos, true);
      }
      if (h == k.begin) {
        if (args.empty()) return constant(out, Value::nil(), e->pos);
        return sequence(e->cdr, out, sc, e);
      }
      if (h == k.and_) return and_or(args, 0, out, sc, e->pos, true);
      if (h == k.or_) return and_or(args, 0, out, sc, e->pos, false);
      if (h == k.cond) return cond(args, 0, out, sc, e);
      if (h == k.let) return let(e, args, out, sc);
      if (h == k.letstar) return letstar(e, args, 0, out, sc);
      if (h == k.letrec) return letrec(e, args, out, sc);
      if (h == k.define) syntax_error("define: only allowed at top level", e);
      if (h == k.include) syntax_error("include: only allowed at top level", e);
    }
    if (prelude && head->type == Sx::Sym && !sc->find(head->text) && args.size() == 1 &&
        (head->text == syms().car || head->text == syms().cdr)) {
      // The prelude is closed over the builtins: its car and cdr are the core projections,
      // which every transform handles in place (no call, no backpropagator closure).
      Cell* c = in.cell(head->text, true);
      if (c->value.is_obj() && kind_of(c->value) == Kind::Prim) {
        Var* a = expr(args[0], out, sc);
        Binding& b = emit(out, head->text == syms().car ? Op::Car : Op::Cdr, head->text, e->pos);
        b.a = a;
        b.pattern = head->text;  // errors read "car: expected a pair, got ..."
        return b.x;
      }
    }
    Var* f = expr(head, out, sc);
    Var* a = tuple(args, 0, out, sc, e->pos);
    Binding& b = emit(out, Op::App, "call", e->pos);
    b.a = f; b.b = a;
    return b.x;
  }

  Var* and_or(const std::vector<Sx*>& args, size_t i, Body* out, Scope* sc, Pos pos, bool is_and) {
    if (i >= args.size()) return constant(out, Value::boolean(is_and), pos);
    if (i + 1 == args.size()) return expr(args[i], out, sc);
    Var* c = expr(args[i], out, sc);
    if (is_and)
      return if_form(c, [&](Body* b) { return and_or(args, i + 1, b, sc, pos, true); },
                     [&](Body* b) { return constant(b, Value::boolean(false), pos); }, out, pos);
    return if_form(c, [&](Body*) { return c; }, [&](Body* b) { return and_or(args, i + 1, b, sc, pos, false); }, out,
                   pos);
  }

  Var* cond(const std::vector<Sx*>& clauses, size_t i, Body* out, Scope* sc, Sx* whole) {
    if (i >= clauses.size()) syntax_error("cond: must end in an else clause", whole);
    Sx* cl = clauses[i];
    if (cl->type != Sx::Pair) syntax_error("cond: bad clause " + sx_to_string(cl), cl);
    if (is_keyword(cl->car, sc, syms().else_)) {
      if (i + 1 != clauses.size()) syntax_error("cond: else must be the last clause", cl);
      if (cl->cdr->type == Sx::Nil) syntax_error("cond: empty else clause", cl);
      return sequence(cl->cdr, out, sc, cl);
    }
    static const char* arrow = intern("=>");
    if (cl->cdr->type == Sx::Pair && cl->cdr->car->type == Sx::Sym && cl->cdr->car->text == arrow)
      syntax_error("cond: => clauses are not supported (bind the test's value with let, then test it)", cl->cdr->car);
    if (i + 1 == clauses.size()) syntax_error("cond: must end in an else clause", whole);
    Var* c = expr(cl->car, out, sc);
    return if_form(
        c,
        [&](Body* b) { return cl->cdr->type == Sx::Nil ? c : sequence(cl->cdr, b, sc, cl); },
        [&](Body* b) { return cond(clauses, i + 1, b, sc, whole); }, out, cl->pos);
  }

  struct LetBinding {
    Sx* pat;
    Sx* init;
  };

  std::vector<LetBinding> let_bindings(Sx* bs, const char* what, Sx* at) {
    std::vector<LetBinding> out;
    for (Sx* b : list_items(bs, what)) {
      if (b->type != Sx::Pair) syntax_error(std::string(what) + ": bad binding " + sx_to_string(b), b);
      auto items = list_items(b, what);
      if (items.size() != 2) syntax_error(std::string(what) + ": a binding is (pattern expression), got " + sx_to_string(b), b);
      out.push_back({items[0], items[1]});
    }
    (void)at;
    return out;
  }

  Var* let(Sx* e, const std::vector<Sx*>& args, Body* out, Scope* sc) {
    if (args.size() >= 1 && args[0]->type == Sx::Sym) {  // named let
      if (args.size() < 3) syntax_error("let: expected (let name ((var init) ...) body ...)", e);
      auto bs = let_bindings(args[1], "let", e);
      // (letrec ((name (lambda (vars...) body))) (name inits...))
      Sx* formals = sx_nil(e->pos);
      for (size_t i = bs.size(); i-- > 0;) formals = sx_cons(bs[i].pat, formals, bs[i].pat->pos);
      std::vector<Var*> inits;
      for (auto& b : bs) inits.push_back(expr(b.init, out, sc));
      Scope rs(sc);
      Lambda* lam = new_lambda();
      rs.entries.push_back({args[0]->text, nullptr, lam});
      auto* group = new (gc_alloc(sizeof(gc_vector<Lambda*>))) gc_vector<Lambda*>();
      group->push_back(lam);
      // (in the prelude, named for the definition it is in: a trace says "in length at ...", where
      // "in loop" named no procedure the user called)
      const char* name = prelude && curried_name ? curried_name : args[0]->text;
      fill_lambda(lam, formals, e->cdr->cdr->cdr, &rs, name, e);
      lam->group = group;
      Var* f = lambda_binding(out, lam, e->pos);
      Var* a = tuple_of_vars(inits, out, e->pos);
      Binding& b = emit(out, Op::App, "call", e->pos);
      b.a = f; b.b = a;
      return b.x;
    }
    if (args.size() < 2) syntax_error("let: expected (let ((pattern init) ...) body ...)", e);
    auto bs = let_bindings(args[0], "let", e);
    std::vector<Var*> vals;
    for (auto& b : bs) vals.push_back(expr(b.init, out, sc));
    Scope inner(sc);
    std::unordered_set<const char*> seen;
    for (auto& b : bs) collect_pattern_vars(b.pat, seen, sc);
    for (size_t i = 0; i < bs.size(); i++)
      destructure(bs[i].pat, vals[i], out, &inner, intern(sx_to_string(bs[i].pat)));
    return sequence(e->cdr->cdr, out, &inner, e);
  }

  Var* tuple_of_vars(const std::vector<Var*>& vs, Body* out, Pos pos) {
    if (vs.empty()) return constant(out, Value::nil(), pos);
    Var* acc = vs.back();
    for (size_t i = vs.size() - 1; i-- > 0;) {
      Binding& b = emit(out, Op::Cons, "tuple", pos);
      b.a = vs[i]; b.b = acc;
      acc = b.x;
    }
    return acc;
  }

  Var* letstar(Sx* e, const std::vector<Sx*>& args, size_t, Body* out, Scope* sc) {
    if (args.size() < 2) syntax_error("let*: expected (let* ((pattern init) ...) body ...)", e);
    auto bs = let_bindings(args[0], "let*", e);
    Scope* cur = sc;
    std::vector<Scope*> scopes;
    for (auto& b : bs) {
      check_pattern(b.pat, cur);
      Var* v = expr(b.init, out, cur);
      Scope* next = new Scope(cur);
      scopes.push_back(next);
      destructure(b.pat, v, out, next, intern(sx_to_string(b.pat)));
      cur = next;
    }
    Var* r = sequence(e->cdr->cdr, out, cur, e);
    for (Scope* s : scopes) delete s;
    return r;
  }

  void fill_lambda(Lambda* lam, Sx* formals, Sx* body, Scope* sc, const char* name, Sx* at) {
    Lambda* made = make_lambda(formals, body, sc, name, at);
    lam->param = made->param;
    lam->body = made->body;
    lam->name = name;
    lam->pos = made->pos;
  }

  Var* letrec(Sx* e, const std::vector<Sx*>& args, Body* out, Scope* sc) {
    if (args.size() < 2) syntax_error("letrec: expected (letrec ((name (lambda ...)) ...) body ...)", e);
    auto bs = let_bindings(args[0], "letrec", e);
    Scope rs(sc);
    auto* group = new (gc_alloc(sizeof(gc_vector<Lambda*>))) gc_vector<Lambda*>();
    std::vector<Sx*> lambdas;
    for (auto& b : bs) {
      if (b.pat->type != Sx::Sym) syntax_error("letrec: each binding must name a variable", b.pat);
      Sx* init = b.init;
      if (init->type != Sx::Pair || !is_keyword(init->car, sc, syms().lambda))
        syntax_error(std::string("letrec: bindings must be lambdas, but ") + b.pat->text + " is bound to " +
                         sx_to_string(init), init);
      auto items = list_items(init->cdr, "lambda");
      if (items.size() < 2) syntax_error("lambda: expected (lambda (pattern) body ...)", init);
      Lambda* lam = new_lambda();
      for (auto& en : rs.entries)
        if (en.name == b.pat->text) syntax_error(std::string("letrec: duplicate name ") + b.pat->text, b.pat);
      rs.entries.push_back({b.pat->text, nullptr, lam});
      group->push_back(lam);
      lambdas.push_back(init);
    }
    for (size_t i = 0; i < bs.size(); i++) {
      Lambda* lam = (*group)[i];
      fill_lambda(lam, lambdas[i]->cdr->car, lambdas[i]->cdr->cdr, &rs, bs[i].pat->text, lambdas[i]);
      lam->group = group;
    }
    return sequence(e->cdr->cdr, out, &rs, e);
  }
};

Lambda* thunk_of(Expander& ex, Sx* e, Pos pos) {
  Lambda* lam = new_lambda();
  lam->pos = pos;
  lam->param = new_var("_");
  lam->body = new_body();
  Scope top(nullptr);
  lam->body->result = ex.expr(e, lam->body, &top);
  compute_free_variables(lam);
  return lam;
}

}  // namespace

Var* new_var(const char* name) {
  // Pointer-free for the collector (names are interned outside its heap): not scanned when marked.
  Var* v = static_cast<Var*>(gc_alloc_atomic(sizeof(Var)));
  new (v) Var();
  v->name = name;
  v->id = __atomic_fetch_add(&next_var_id, 1, __ATOMIC_RELAXED);
  keep_while_analysing(v);  // (the transforms' maps of variables are not scanned)
  return v;
}

bool is_syntax_keyword(const char* name) {
  const S& k = syms();
  for (const char* kw : {k.quote, k.lambda, k.define, k.let, k.letstar, k.letrec, k.if_, k.cond, k.else_, k.and_,
                         k.or_, k.begin, k.cons, k.consstar, k.list, k.include})
    if (name == kw) return true;
  return false;
}

std::string syntax_definition_message(const char* name) {
  return std::string("define: ") + name + " is syntax; it cannot be defined at top level";
}

Lambda* new_lambda() {
  Lambda* l = static_cast<Lambda*>(gc_alloc(sizeof(Lambda)));
  new (l) Lambda();
  l->owner = current;
  l->empty_closure = Value::unbound();
  // (a letrec's members are held only by the expander's scope, a std::vector, until the body
  // first names them)
  keep_while_analysing(l);
  return l;
}

Body* new_body() {
  Body* b = static_cast<Body*>(gc_alloc(sizeof(Body)));
  new (b) Body();
  return b;
}

gc_vector<TopLevel> expand_toplevel(Interp& in, Sx* form, bool prelude, const std::string& dir) {
  (void)dir;
  Expander ex{in, prelude, {}, nullptr, {}};
  const S& k = syms();
  gc_vector<TopLevel> out;
  if (form->type == Sx::Pair && sx_is_sym(form->car, k.begin)) {
    for (Sx* f : list_items(form->cdr, "begin")) {
      auto sub = expand_toplevel(in, f, prelude, dir);
      for (TopLevel& t : out) t.print = false;  // only the last value of a begin is printed
      out.insert(out.end(), sub.begin(), sub.end());
    }
    return out;
  }
  if (form->type == Sx::Pair && sx_is_sym(form->car, k.define)) {
    auto args = list_items(form->cdr, "define");
    if (args.size() < 2) syntax_error("define: expected (define name expression) or (define (name pattern ...) body ...)", form);
    Sx* target = args[0];
    Sx* body = form->cdr->cdr;
    for (Sx* t = target; t->type == Sx::Pair; t = t->car)  // (define (f . args) ...), (define (f x . r) ...)
      if (!Expander::proper(t)) syntax_error(std::string("define: ") + Expander::kNoRest, form);
    // Curried: (define ((f a) b) body) = (define (f a) (lambda (b) body))
    while (target->type == Sx::Pair && target->car->type == Sx::Pair) {
      Sx* lam = sx_cons(sx_sym("lambda", target->pos), sx_cons(target->cdr, body, target->pos), target->pos);
      ex.curried.push_back(lam);
      body = sx_cons(lam, sx_nil(target->pos), target->pos);
      target = target->car;
    }
    if (target->type == Sx::Pair && target->car->type == Sx::Sym) {
      ex.curried_name = target->car->text;
      // (the prelude's (define (gradient-R f) (if (procedure? f) (lambda (x) ...) error)): a
      // curried define with a check first; its lambda is named as a curried define's)
      if (prelude && ex.curried.empty()) {
        Sx* last = body;
        while (last->type == Sx::Pair && last->cdr->type == Sx::Pair) last = last->cdr;
        Sx* e = last->type == Sx::Pair ? last->car : nullptr;
        if (e && e->type == Sx::Pair && sx_is_sym(e->car, k.if_) && e->cdr->type == Sx::Pair &&
            e->cdr->cdr->type == Sx::Pair)
          e = e->cdr->cdr->car;  // the consequent
        if (e && e->type == Sx::Pair && sx_is_sym(e->car, k.lambda)) ex.curried.push_back(e);
      }
    }
    TopLevel t;
    t.pos = form->pos;
    // A keyword's calls stay the form's (cons, list, if, ...): defined, the name would be bound
    // and never called (only a local binding shadows a keyword).
    const Sx* name = target->type == Sx::Sym ? target : target->type == Sx::Pair ? target->car : nullptr;
    if (name && name->type == Sx::Sym && is_syntax_keyword(name->text))
      syntax_error(syntax_definition_message(name->text), form);
    if (target->type == Sx::Sym) {
      if (args.size() != 2) syntax_error("define: expected (define name expression)", form);
      t.cell = in.cell(target->text, prelude);
      Sx* init = args[1];
      // Name a lambda after the variable it defines.
      if (init->type == Sx::Pair && sx_is_sym(init->car, k.lambda)) {
        Lambda* lam = new_lambda();
        lam->pos = form->pos;
        lam->param = new_var("_");
        lam->body = new_body();
        Scope top(nullptr);
        auto items = list_items(init->cdr, "lambda");
        if (items.size() < 2) syntax_error("lambda: expected (lambda (pattern) body ...)", init);
        Lambda* f = ex.make_lambda(items[0], init->cdr->cdr, &top, target->text, init);
        lam->body->result = ex.lambda_binding(lam->body, f, init->pos);
        compute_free_variables(lam);
        t.thunk = lam;
      } else {
        t.thunk = thunk_of(ex, init, form->pos);
      }
    } else if (target->type == Sx::Pair && target->car->type == Sx::Sym) {
      t.cell = in.cell(target->car->text, prelude);
      Lambda* lam = new_lambda();
      lam->pos = form->pos;
      lam->param = new_var("_");
      lam->body = new_body();
      Scope top(nullptr);
      Lambda* f = ex.make_lambda(target->cdr, body, &top, target->car->text, form);
      lam->body->result = ex.lambda_binding(lam->body, f, form->pos);
      compute_free_variables(lam);
      t.thunk = lam;
    } else {
      syntax_error("define: bad target " + sx_to_string(target), form);
    }
    out.push_back(t);
    return out;
  }
  TopLevel t;
  t.pos = form->pos;
  t.thunk = thunk_of(ex, form, form->pos);
  out.push_back(t);
  return out;
}

}  // namespace vlad
