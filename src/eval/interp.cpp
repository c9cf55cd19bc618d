// interp.cpp — an interpreter instance: its namespaces and primitives, the prelude, includes,
// and the read → expand → evaluate pipeline for a whole text.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "../ad/ad.hpp"
#include "exec.hpp"
#include "interp.hpp"

namespace vlad {

extern const char* prelude_source;

namespace {
void mark_raw_backpropagator(Lambda* outer) {
  for (Binding& bd : outer->body->binds)
    if (bd.op == Op::Lambda) bd.lam->raw_bp = true;
}
}  // namespace

namespace {
// A host primitive no longer in the table: its function is deleted when the collector finds the
// primitive unreachable (a finalizer), or when its interpreter is destroyed while a value still
// refers to it (calling it then reports so, as for the table's own).
void retire_host_prim(Interp* in, Prim* was) {
  GC_register_finalizer_no_order(was, [](void* obj, void*) {
    Prim* q = static_cast<Prim*>(obj);
    delete q->host;
    q->host = nullptr;
  }, nullptr, nullptr, nullptr);
  auto& r = in->retired_prims;
  r.erase(std::remove_if(r.begin(), r.end(), [](uintptr_t* slot) {
            if (*slot) return false;
            GC_FREE(slot);
            return true;
          }), r.end());
  auto* slot = static_cast<uintptr_t*>(GC_MALLOC_ATOMIC_UNCOLLECTABLE(sizeof(uintptr_t)));
  *slot = GC_HIDE_POINTER(was);
  GC_general_register_disappearing_link(reinterpret_cast<void**>(slot), was);
  r.push_back(slot);
}

void* reveal_slot(void* slot) { return *static_cast<uintptr_t*>(slot) ? GC_REVEAL_POINTER(*static_cast<uintptr_t*>(slot)) : nullptr; }
}  // namespace

void destroy_interp(Interp* in) {
  for (uintptr_t* slot : in->retired_prims) {
    // (read under the collector's lock: it may be clearing the slot; once on this stack, it stays)
    Prim* q = static_cast<Prim*>(GC_call_with_alloc_lock(reveal_slot, slot));
    if (q) {
      delete q->host;
      q->host = nullptr;
      q->fwd = q->rev = Value::unbound();
      GC_unregister_disappearing_link(reinterpret_cast<void**>(slot));
    }
    GC_FREE(slot);
  }
  for (auto& [name, c] : in->prelude_cells) GC_FREE(c);
  for (auto& [name, c] : in->user_cells) GC_FREE(c);
  // A primitive outlives its interpreter while a value the host holds refers to it (it prints as
  // before); what it needed of the interpreter goes: its rules' closures, and a host primitive's
  // function, which calling it then reports (prims.cpp).
  for (Prim* p : in->prims) {
    delete p->host;
    p->host = nullptr;
    p->fwd = Value::unbound();
    p->rev = Value::unbound();
    p->shared_bp_bits = 0;
  }
  if (in->zero_bp) GC_FREE(in->zero_bp);
  if (in->builtin_projections) GC_FREE(in->builtin_projections);
  delete in;
}

namespace {
// The collector's pacing while a large heap grows (a long reverse pass's forward phase: its
// records all stay live): a collection of a heap of 16 MiB or more in use that finds at least
// three quarters of what was allocated since the last one still live has marked it all for
// little, and the next would again. After two such collections in a row, the next waits until
// gc_grow times the heap in use has been allocated (VLAD_GC_GROW; 0: off); the floor is back at
// gc_floor once a collection frees more. W3 at n = 10^6: 7 collections (170-218 ms of marking)
// -> 6 (73 ms), 610 -> 511 ms. (After one such collection already, repeated passes of 27 MB
// each ran 5% slower, the heap grown by 60% for their garbage: fresh pages cost more here.)
// Called by the collector with its lock held: only the unsynchronised statistics are read.
size_t gc_floor = 4u << 20;
int gc_grow = 3;
size_t gc_allocd_before = 0, gc_in_use_before = 0;
int gc_growing = 0;  // collections in a row that found the heap growing so
GC_on_collection_event_proc gc_host_event = nullptr;  // an embedding host's own, still called
void on_collection(GC_EventType e) {
  if (gc_host_event) gc_host_event(e);
  if (e == GC_EVENT_START) note_collection_stack();  // (heap.cpp: the pace after a deep stack)
  if (gc_grow <= 0 || (e != GC_EVENT_START && e != GC_EVENT_END)) return;
  GC_prof_stats_s s;
  GC_get_prof_stats_unsafe(&s, sizeof s);
  if (e == GC_EVENT_START) {
    gc_allocd_before = s.bytes_allocd_since_gc;
    return;
  }
  size_t in_use = s.heapsize_full - s.free_bytes_full;
  bool growing = in_use >= (16u << 20) && in_use > gc_in_use_before &&
                 in_use - gc_in_use_before >= gc_allocd_before / 4 * 3;
  gc_in_use_before = in_use;
  gc_growing = growing ? gc_growing + 1 : 0;
  GC_set_min_bytes_allocd(gc_growing >= 2 ? std::max(gc_floor, in_use * (size_t)gc_grow) : gc_floor);
}
}  // namespace

namespace {
// The prelude's top-level forms, each a definition: its text's range and first line, by the cell
// of the name it defines (Interp::lazy_definitions). A form that is not a definition of a name
// is run at once.
// The prelude's text, kept as a string for the reader.
const std::string& prelude_text() {
  static const std::string* text = new std::string(prelude_source);
  return *text;
}

void scan_prelude(Interp& in) {
  const std::string& src = prelude_text();
  for (const DatumText& t : top_level_datums(src)) {
    // (define NAME ...), (define (NAME ...) ...) or curried (define ((NAME ...) ...) ...)
    std::string name;
    if (src.compare(t.begin, 8, "(define ") == 0) {
      size_t k = t.begin + 8;
      while (k < t.end && (isspace((unsigned char)src[k]) || src[k] == '(')) k++;
      size_t e = k;
      while (e < t.end && !isspace((unsigned char)src[e]) && src[e] != '(' && src[e] != ')') e++;
      name = src.substr(k, e - k);
    }
    std::string text = std::string(t.line - 1, '\n') + src.substr(t.begin, t.end - t.begin);  // (at its line)
    if (name.empty()) {
      RunOptions opt;
      opt.prelude = true;
      run_text(in, text, intern("<prelude>"), opt, [](Value, Pos) {});
      continue;
    }
    Interp::LazyDefinition d;
    d.begin = (uint32_t)t.begin;
    d.end = (uint32_t)t.end;
    d.line = t.line;
    in.lazy_prelude[in.cell(intern(name), true)] = (uint32_t)in.lazy_definitions.size();  // (a later one wins)
    in.lazy_definitions.push_back(d);
  }
}
}  // namespace

Value Interp::force_cell(Cell* c) {
  if (!c->value.is_unbound()) return c->value;
  auto u = lazy_user.find(c);
  if (u != lazy_user.end()) {
    Cell* p = u->second;
    Value v = force_cell(p);
    if (c->value.is_unbound() && !v.is_unbound()) {  // (the program may have defined it meanwhile)
      c->value = v;
      user_cell_written(c);
    }
    if (!c->value.is_unbound()) lazy_user.erase(c);
    return c->value;
  }
  auto it = lazy_prelude.find(c);
  if (it == lazy_prelude.end() || lazy_definitions[it->second].loading) return c->value;  // (its own definition names it)
  LazyDefinition& d = lazy_definitions[it->second];  // (the vector is complete: the reference stays)
  struct Loading {
    LazyDefinition& d;
    ~Loading() { d.loading = false; }
  } loading{d};
  d.loading = true;
  Interp* saved = current;
  current = this;
  struct Restore {
    Interp* saved;
    ~Restore() { current = saved; }
  } restore{saved};
  AnalysisScope analysis;  // (counted as analysis: a program's counts are its own, as before)
  RunOptions opt;
  opt.prelude = true;
  gc_vector<TopForm> forms =
      read_program(std::string(d.line - 1, '\n') + prelude_text().substr(d.begin, d.end - d.begin), intern("<prelude>"));
  for (const TopForm& f : forms) run_form(*this, f.form, opt, [](Value, Pos) {});
  if (!c->value.is_unbound()) lazy_prelude.erase(c);
  return c->value;
}

Interp::Interp() {
  gc_init();
  // A reverse pass keeps its whole forward phase alive until the backpropagator runs, so the
  // live heap grows steadily; collecting when the heap has doubled (not grown by a third)
  // halves the marking work there (W3 gradient at n = 10^5: 0.97 s -> 0.50 s, +23% memory).
  if (!getenv("GC_FREE_SPACE_DIVISOR")) GC_set_free_space_divisor(1);
  jit = jit_supported();
  if (const char* e = getenv("VLAD_JIT")) jit = jit && std::string(e) != "off";
  if (const char* e = getenv("VLAD_JIT_THRESHOLD")) jit_threshold = (uint32_t)std::max(1L, atol(e));
  if (const char* e = getenv("VLAD_JIT_WINDOW")) jit_window_bits = (uint32_t)std::min(63L, std::max(0L, atol(e)));
  for (Prim* p : make_builtin_prims()) add_prim(p);
  p_plus = prim("plus");
  p_zero = prim("zero");
  p_rzero = prim("%rzero");
  p_sensitize = prim("sensitize");
  p_unsensitize = prim("unsensitize");
  p_star_j = prim("*j");
  p_star_j_inverse = prim("*j-inverse");
  Interp* saved = current;
  current = this;
  scan_prelude(*this);
  // (what the interpreter itself reaches into, now: the rest when a program first names it)
  for (const char* name : {"%zero-bp", "%backcall", "%list-ref-bp", "%dot-bp", "dot", "%v+-bp", "%v--bp",
                           "%distance-bp", "distance", "v+", "v-", "list-ref", "equal?", "%tangent-of"})
    if (prelude_value(name).is_unbound()) throw Error(std::string("internal error: the prelude defines no ") + name);
  // %zero-bp makes the backpropagators of comparisons and predicates: raw, like every rule's.
  mark_raw_backpropagator(static_cast<Closure*>(prelude_value("%zero-bp").as_obj())->lambda);
  Lambda* lrb = static_cast<Closure*>(prelude_value("%list-ref-bp").as_obj())->lambda;
  mark_raw_backpropagator(lrb);
  for (Binding& b : lrb->body->binds)
    if (b.op == Op::Lambda) list_ref_bp = b.lam;
  Lambda* dbp = static_cast<Closure*>(prelude_value("%dot-bp").as_obj())->lambda;
  mark_raw_backpropagator(dbp);
  for (Binding& b : dbp->body->binds)
    if (b.op == Op::Lambda) dot_bp = b.lam;
  dot = static_cast<Closure*>(prelude_value("dot").as_obj())->lambda;
  auto raw_bp_of = [&](const char* maker) {  // the lambda of a prelude function's closures: raw backpropagators
    Lambda* m = static_cast<Closure*>(prelude_value(maker).as_obj())->lambda;
    mark_raw_backpropagator(m);
    Lambda* r = nullptr;
    for (Binding& b : m->body->binds)
      if (b.op == Op::Lambda) r = b.lam;
    return r;
  };
  vplus_bp = raw_bp_of("%v+-bp");
  distance_bp = raw_bp_of("%distance-bp");
  distance = static_cast<Closure*>(prelude_value("distance").as_obj())->lambda;
  vminus_bp = raw_bp_of("%v--bp");
  v_plus = static_cast<Closure*>(prelude_value("v+").as_obj())->lambda;
  v_minus = static_cast<Closure*>(prelude_value("v-").as_obj())->lambda;
  p_add = prim("+");
  p_sub = prim("-");
  list_ref = static_cast<Closure*>(prelude_value("list-ref").as_obj())->lambda;
  equal_p = static_cast<Closure*>(prelude_value("equal?").as_obj())->lambda;
  p_car = prim("car");
  p_error = prim("error");
  p_cdr = prim("cdr");
  p_num_eq = prim("=");
  p_zero_sens2 = prim("%zero-sensitivities?");
  install_list_ref_bp(list_ref_bp);
  install_dot_bp(dot_bp);
  install_distance_bp(distance_bp);
  vplus_bp = install_v2_bp(vplus_bp, "backpropagator of v+");
  vminus_bp = install_v2_bp(vminus_bp, "backpropagator of v-");
  tangent_of = prelude_value("%tangent-of");
  for (Binding& b : static_cast<Closure*>(tangent_of.as_obj())->lambda->body->binds)
    if (b.op == Op::Lambda) tangent_fn = b.lam;
  // The user's namespace starts as a copy of the prelude's (of a definition not read yet, when
  // it is: force_cell).
  for (auto& [name, c] : prelude_cells) {
    Cell* u = cell(name, false);
    if (c->value.is_unbound() && lazy_prelude.count(c)) lazy_user[u] = c;
    else u->value = c->value;
  }
  user_car = cell(p_car->name, false);
  user_cdr = cell(p_cdr->name, false);
  builtin_projections = static_cast<Cell*>(gc_alloc_uncollectable(sizeof(Cell)));
  builtin_projections->name = intern("%builtin-car-cdr");
  user_cell_written(user_car);
  current = saved;
  // Past the prelude (whose garbage the default policy recycles at start-up), collect only after
  // a few MiB of allocation however small the live heap: a collection marks the program's code
  // (bindings, variables, instructions: ~0.5 MiB with the prelude, megabytes under nested
  // transforms) whatever the garbage, and with the live heap small the collector otherwise ran
  // every megabyte or so (W6: 53 collections, 24 ms of a 69 ms run; with this: 12, 5-7 ms).
  // (Process-wide, like the free-space divisor: docs/embedding.md.)
  static std::once_flag gc_pacing;
  std::call_once(gc_pacing, [] {
    size_t min = 4u << 20;
    if (const char* e = getenv("VLAD_GC_MIN")) min = (size_t)std::max(1L, atol(e));
    gc_floor = min;
    GC_set_min_bytes_allocd(min);
    if (const char* e = getenv("VLAD_GC_GROW")) gc_grow = atoi(e);
    gc_host_event = GC_get_on_collection_event();
    GC_set_on_collection_event(on_collection);
  });
}

void Interp::add_prim(Prim* p) {
  auto old = prim_by_name.find(p->name);
  if (old != prim_by_name.end() && old->second->cls == PrimClass::Host && p->cls == PrimClass::Host) {
    // A host primitive registered again takes the old one's id (and its count), so a host that
    // re-registers in a loop does not grow the table; the old one lives on while a value refers
    // to it, and its function goes with it (only a host's primitive has ids no code holds:
    // native rules and nodes are made for builtins only).
    Prim* was = old->second;
    p->id = was->id;
    prims[p->id] = p;
    retire_host_prim(this, was);
  } else {
    p->id = (int)prims.size();
    prims.push_back(p);
    meter.push_back(0);
  }
  prim_by_name[p->name] = p;
  // (a host primitive is in the prelude's namespace only under its alias: prims.hpp)
  cell(p->cls == PrimClass::Host ? intern(host_alias(p->name)) : p->name, true)->value = Value::obj(p);
  Cell* u = cell(p->name, false);
  u->value = Value::obj(p);
  user_cell_written(u);
}

void Interp::user_cell_written(Cell* c) {
  if (!builtin_projections || (c != user_car && c != user_cdr)) return;
  bool builtin = user_car->value == Value::obj(p_car) && user_cdr->value == Value::obj(p_cdr);
  builtin_projections->value = Value::boolean(builtin);
}

Cell* Interp::cell(const char* name, bool prelude) {
  auto& table = prelude ? prelude_cells : user_cells;
  auto it = table.find(name);
  if (it != table.end()) return it->second;
  Cell* c = static_cast<Cell*>(gc_alloc_uncollectable(sizeof(Cell)));
  c->name = name;
  c->value = Value::unbound();
  table[name] = c;
  return c;
}

std::string read_file(const std::string& path) {
  if (path.empty()) throw Error("cannot open file: the file name is empty");
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) throw Error("cannot open file " + path + ": it is a directory");
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error("cannot open file " + path);
  std::string text;
  char buf[65536];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) { text.append(buf, (size_t)n); continue; }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {  // (an unreadable file is not an empty one)
      std::string why = strerror(errno);
      close(fd);
      throw Error("cannot read file " + path + ": " + why);
    }
    break;
  }
  close(fd);
  return text;
}

namespace {

bool file_exists(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}


std::string include_key(const std::string& path) {
  char real[4096];
  return realpath(path.c_str(), real) ? real : path;
}

bool before(Pos a, Pos b) { return a.line < b.line || (a.line == b.line && a.col <= b.col); }

// Whether a lambda at `at` is written inside `form` (not one a function defined elsewhere made,
// as in (define inc (adder 1)), which would name every closure of adder's lambda "inc").
bool within(Pos at, Sx* form) {
  if (at.file != form->pos.file || !before(form->pos, at)) return false;
  std::vector<Sx*> todo{form};
  while (!todo.empty()) {  // (any position inside the form at or after it will do)
    Sx* x = todo.back();
    todo.pop_back();
    if (x->pos.file == at.file && before(at, x->pos)) return true;
    if (x->type == Sx::Pair) {
      todo.push_back(x->car);
      todo.push_back(x->cdr);
    }
  }
  return false;
}
}  // namespace

std::string find_include(Interp& in, const std::string& name, const std::string& dir, Pos pos) {
  std::string file = name;
  size_t slash = file.rfind('/');
  if (file.find('.', slash == std::string::npos ? 0 : slash) == std::string::npos) file += ".vlad";
  std::vector<std::string> dirs;
  if (!dir.empty()) dirs.push_back(dir);  // (none for -e, standard input, the REPL)
  dirs.insert(dirs.end(), in.include_dirs.begin(), in.include_dirs.end());
  dirs.push_back(".");
  for (const auto& d : dirs) {
    std::string p = file[0] == '/' ? file : d + "/" + file;
    if (file_exists(p)) return p;
  }
  throw Error("include: cannot find " + file, pos);
}

std::string dir_of(const std::string& path) {
  size_t k = path.rfind('/');
  return k == std::string::npos ? "." : path.substr(0, k);
}

bool include_target(Interp& in, Sx* form, const RunOptions& opt, std::string& path) {
  static const char* include = intern("include");
  if (form->type != Sx::Pair || !sx_is_sym(form->car, include)) return false;
  Sx* arg = form->cdr->type == Sx::Pair ? form->cdr->car : nullptr;
  if (!arg || arg->type != Sx::Str || form->cdr->cdr->type != Sx::Nil)
    throw Error("include: expected (include \"name\")", form->pos);
  path = find_include(in, std::string(arg->text, arg->len), opt.dir, form->pos);
  if (!in.included.insert(include_key(path)).second) path.clear();
  return true;
}

void run_form(Interp& in, Sx* form, const RunOptions& opt, const std::function<void(Value, Pos)>& on_value) {
  std::string path;
  if (include_target(in, form, opt, path)) {
    if (path.empty()) return;
    RunOptions sub = opt;
    sub.dir = dir_of(path);
    run_text(in, read_file(path), intern(path), sub, on_value);
    return;
  }
  // VLAD_TIME_FORMS=1 (for benchmarks, docs/performance.md): the wall time of each top-level form
  // of a program, expansion included, to standard error, free of a process's start-up noise
  static const bool time_forms = getenv("VLAD_TIME_FORMS") != nullptr;
  auto t0 = std::chrono::steady_clock::now();
  struct FormTimer {
    bool on;
    std::chrono::steady_clock::time_point t0;
    Pos pos;
    ~FormTimer() {
      if (!on) return;
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      fprintf(stderr, "# time %s:%d: %.4f ms\n", pos.file ? pos.file : "?", pos.line, ms);
    }
  } timer{time_forms && !opt.prelude && !opt.untimed, t0, form->pos};
  gc_vector<TopLevel> tops;
  {
    AnalysisScope analysis;
    tops = expand_toplevel(in, form, opt.prelude, opt.dir);
  }
  for (const TopLevel& t : tops) {
    Value v = run_toplevel(in, t);
    if (t.cell) {
      if (is(v, Kind::Closure)) {  // (define f (let (...) (lambda ...))): the lambda is f's
        Lambda* l = static_cast<Closure*>(v.as_obj())->lambda;
        if (!l->name && within(l->pos, form)) l->name = t.cell->name;
      }
      t.cell->value = v;
      in.user_cell_written(t.cell);
    } else if (t.print) {
      on_value(v, t.pos);
    }
  }
}

void begin_program(Interp& in, const std::string& file) {
  in.included.clear();
  if (!file.empty()) in.included.insert(include_key(file));
}

void predefine_procedures(Interp& in, const gc_vector<TopForm>& forms, const RunOptions& opt) {
  if (opt.prelude || forms.size() < 2) return;
  const char* define = intern("define");
  const char* lambda = intern("lambda");
  std::set<const char*> seen;
  RunOptions quiet = opt;
  quiet.untimed = true;
  for (const TopForm& f : forms) {
    Sx* form = f.form;
    if (form->type != Sx::Pair || !sx_is_sym(form->car, define) || form->cdr->type != Sx::Pair) continue;
    Sx* target = form->cdr->car;
    const char* name = nullptr;
    if (target->type == Sx::Pair) {  // (define (f p ...) ...), curried too
      while (target->type == Sx::Pair) target = target->car;
      if (target->type == Sx::Sym) name = target->text;
    } else if (target->type == Sx::Sym && form->cdr->cdr->type == Sx::Pair) {  // (define f (lambda ...))
      Sx* init = form->cdr->cdr->car;
      if (init->type == Sx::Pair && sx_is_sym(init->car, lambda)) name = target->text;
    }
    Cell* c = name ? in.cell(name, false) : nullptr;
    // (a prelude name not read yet counts as defined: a program's forms before its own definition
    // of such a name see the prelude's, as they would had it been read at start-up)
    if (!name || !seen.insert(name).second || !c->value.is_unbound() || in.lazy_user.count(c)) continue;
    try {
      run_form(in, form, quiet, [](Value, Pos) {});
    } catch (const Error& e) {
      // (an interrupt stops the program: taken here for a definition's error, it was lost, and
      // the program ran on to its end)
      if (e.interrupt) throw;
    }
  }
}

void run_text(Interp& in, const std::string& text, const char* file, const RunOptions& opt,
              const std::function<void(Value, Pos)>& on_value) {
  gc_vector<TopForm> forms = read_program(text, file);
  predefine_procedures(in, forms, opt);
  // The collector starts a collection only when an allocation needs memory; where a program's
  // or a REPL's forms are small, most allocation is their analysis, which holds collections
  // off (AnalysisScope), so the heap grew instead (40,000 lines piped to the REPL: 4
  // collections, 420 MiB of heap for 0.3 MiB live). Past 32 MiB (or half the heap) allocated
  // since the last one, a collection runs between forms (now 20 MiB of heap there); below,
  // one that is due waits for the next allocation that needs memory, as before (a nested
  // derivative's first call leaves one due, and it is cheaper later, W4). After a form that
  // failed too: 300,000 failing lines at the REPL, or failing eval_string calls, grew the heap
  // to 490-650 MiB for 0.7 MiB live.
  auto collect_if_due = [] {
    if (GC_get_bytes_since_gc() >= std::max<size_t>(size_t(32) << 20, GC_get_heap_size() / 2)) GC_collect_a_little();
  };
  for (const TopForm& f : forms) {
    try {
      run_form(in, f.form, opt, on_value);
    } catch (...) {
      collect_if_due();
      throw;
    }
    jit_between_forms();  // (dead bodies' machine code released: jit.cpp)
    collect_if_due();
  }
}

// ---- primitives' forward and reverse versions, from their rules ----

namespace {

// The lambda a rule's body makes (its backpropagator), marked raw: it takes ȳ and returns (f̄ . x̄).
// Named for the primitive (`name`), as a transformed body's backpropagators are: an error in it (a
// program's sensitivity that does not conform, given to a backpropagator) names it in the trace.
bool mark_raw_in(Body* b, const char* name) {
  for (Binding& bd : b->binds) {
    if (bd.op == Op::Lambda) {
      bd.lam->raw_bp = true;
      bd.lam->name = name;
      return true;
    }
    if (bd.op == Op::If && (mark_raw_in(bd.then_, name) || mark_raw_in(bd.else_, name))) return true;
  }
  return false;
}

Value eval_rule_text(Prim* p, const char* src, char kind) {
  AnalysisScope analysis;
  Interp& in = *current;
  gc_vector<TopForm> forms = read_program(src, intern("<rules>"));
  auto tops = expand_toplevel(in, forms[0].form, true, "");
  Value v = run_toplevel(in, tops[0]);
  Lambda* lam = static_cast<Closure*>(v.as_obj())->lambda;
  lam->rule_of = p;
  lam->rule_kind = kind;
  if (kind == 'R') mark_raw_in(lam->body, intern(std::string("backpropagator of ") + p->name));
  std::string name = std::string(kind == 'F' ? "forward " : "reverse ") + p->name;
  lam->name = intern(name);
  install_native(p, lam, kind);
  return v;
}

Value eval_rule(Prim* p, const char* src, char kind) {
  try {
    return eval_rule_text(p, src, kind);
  } catch (const std::bad_alloc&) {
    // (a container of the expander's past the heap limit: the Error gets the position of the
    // call whose rule this is, as any error of a primitive's does)
    throw memory_error();
  }
}

}  // namespace

Value prim_forward(Prim* p) {
  if (p->cls == PrimClass::Host) host_prim_check(p);  // (destroyed, or another interpreter's)
  if (!p->fwd.is_unbound()) return p->fwd;
  if (!p->fwd_rule) {
    if (p->cls == PrimClass::Host)
      throw Error(std::string(p->name) + ": this host primitive was registered without derivatives");
    return p->fwd = Value::obj(p);
  }
  return p->fwd = eval_rule(p, p->fwd_rule, 'F');
}

Value prim_reverse(Prim* p) {
  if (p->cls == PrimClass::Host) host_prim_check(p);  // (destroyed, or another interpreter's)
  if (!p->rev.is_unbound()) return p->rev;
  if (!p->rev_rule) {
    if (p->cls == PrimClass::Host)
      throw Error(std::string(p->name) + ": this host primitive was registered without derivatives");
    return p->rev = Value::obj(p);
  }
  return p->rev = eval_rule(p, p->rev_rule, 'R');
}

}  // namespace vlad
