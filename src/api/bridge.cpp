// bridge.cpp — the interpreter's side of the embedding API: GC roots for values the host holds,
// registration of host threads with the collector, sessions (one Interp each) and the conversion
// of errors into the host's vlad::Error. Everything that evaluates runs through run_on_big_stack.
#include "bridge.hpp"

#include <mutex>

#include "../ad/ad.hpp"
#include "../eval/exec.hpp"
#include "../eval/runner.hpp"

namespace vlad {
namespace detail {

struct Session {
  Interp* in;
};

namespace {

// ---- the collector and host threads ----
// Boehm must be initialised from the main thread before other threads register: done when the
// library is loaded (static initialisation runs on the main thread), and again lazily in case the
// API is used from another static initialiser first.
void init_collector() {
  static std::once_flag once;
  std::call_once(once, [] {
    gc_init();
    GC_allow_register_threads();
  });
}
const bool collector_initialised = (init_collector(), true);

// A host thread registered by the API; unregistered when the thread exits, since the collector
// would otherwise try to stop a thread that no longer exists.
struct ThreadRegistration {
  bool registered = false;
  ~ThreadRegistration() {
    if (registered) GC_unregister_my_thread();
  }
};

// Every entry point that allocates or reads GC memory starts here: host threads are not created
// through the collector, so it would neither scan their stacks nor stop them during a collection.
void enter() {
  thread_local bool ready = false;
  if (ready) return;
  init_collector();
  if (!GC_thread_is_registered()) {
    static thread_local ThreadRegistration registration;
    GC_stack_base base;
    if (GC_get_stack_base(&base) != GC_SUCCESS) throw std::runtime_error("vlad: cannot find this thread's stack");
    GC_register_my_thread(&base);
    registration.registered = true;
  }
  ready = true;
}

ErrorInfo info_of(const vlad::Error& e) {
  ErrorInfo info;
  info.message = e.what();
  info.file = e.pos.file ? e.pos.file : "";
  info.line = e.pos.line;
  info.col = e.pos.col;
  info.located = e.located();
  info.report = e.report();
  info.omitted = e.trace_dropped;
  for (const TraceEntry& t : e.trace) {  // (a recursion's repeated calls, each: at most 20 in all)
    long shown = std::min<long>(t.repeats, 20 - (long)info.trace.size());
    for (long k = 0; k < shown; k++) info.trace.push_back({t.name, t.pos.file ? t.pos.file : "", t.pos.line, t.pos.col});
    info.omitted += t.repeats - shown;
  }
  return info;
}

// What the heap-limit error tells an embedder to use (heap_limit_knob, while the API works).
struct HeapKnob {
  const char* saved = heap_limit_knob;
  HeapKnob() { heap_limit_knob = "Interpreter::set_heap_limit"; }
  ~HeapKnob() { heap_limit_knob = saved; }
};

// Runs f on this (registered) thread; an interpreter error leaves as the host's vlad::Error.
template <class F>
auto guarded(F&& f) -> decltype(f()) {
  enter();
  HeapKnob knob;
  try {
    return f();
  } catch (const vlad::Error& e) {
    raise(info_of(e));
  }
}

// ---- roots ----
Root* new_root(vlad::Value v) {
  if (v.is_nil()) return nullptr;
  Root* r = static_cast<Root*>(gc_alloc_uncollectable(sizeof(Root)));
  if (!r) throw std::bad_alloc();
  new (&r->refs) std::atomic<long>(1);
  r->bits = v.bits;
  return r;
}

vlad::Value value_of(const Root* r) { return r ? vlad::Value(r->bits, 0) : vlad::Value::nil(); }

// The value with lazy zeros materialised at the root (so it can be inspected).
vlad::Value forced(vlad::Value v) {
  v = force(v);
  return v;
}
vlad::Value forced(const Root* r) { return forced(value_of(r)); }

[[noreturn]] void type_error(const char* what, const char* expected, const Root* r) {
  throw vlad::Error(std::string(what) + ": expected " + expected + ", got " + write_brief(value_of(r)));
}

// True when `name` reads back as exactly that symbol (host names are spliced into rule source).
bool is_symbol_name(const std::string& name) {
  // no delimiters at all (and so no nesting for the reader, which runs on the host's stack)
  if (name.empty() || name.find_first_of("()[]\";' \t\n\r\f|") != std::string::npos) return false;
  try {
    gc_vector<TopForm> forms = read_program(name, intern("<name>"));
    return forms.size() == 1 && forms[0].form->type == Sx::Sym && !forms[0].expected && name == forms[0].form->text;
  } catch (const vlad::Error&) {
    return false;
  }
}

// Runs fn on a big stack with s's interpreter current; fn returns the value to root.
// From inside a host function (an evaluation is current on this thread), an error is also kept
// as nested_error, so that the host primitive passes it on as it is when the host's error leaves
// the host function (call_host).
Root* evaluate(Session* s, const std::function<vlad::Value()>& fn) {
  Root* out = nullptr;
  bool nested = current != nullptr;
  if (nested) nested_error = NestedError();
  try {
    run_on_big_stack(s->in, [&] { out = new_root(fn()); });
  } catch (const vlad::Error& e) {
    if (nested) nested_error = NestedError{std::current_exception(), e.what()};
    throw;
  }
  return out;
}

// Raises an error unless procedure f (if it is one) was made by s's interpreter: another's
// closure runs code whose globals, primitives and transforms are that interpreter's (its
// gradient here came out 0), and another's host primitive has that one's partials.
void check_owner(Session* s, vlad::Value f, const std::string& what) {
  Interp& in = *s->in;
  const char* why = ": a procedure of another interpreter (a procedure may be used only by the interpreter that made it)";
  if (is(f, Kind::Closure)) {
    Interp* owner = static_cast<Closure*>(f.as_obj())->lambda->owner;
    if (owner && owner != &in) throw vlad::Error(what + why);
  } else if (is(f, Kind::Prim)) {
    Prim* p = static_cast<Prim*>(f.as_obj());
    if (p->cls == PrimClass::Host) {
      if (p->host && p->host->owner != &in) throw vlad::Error(what + why);
    } else if (p->id < 0 || (size_t)p->id >= in.prims.size() || in.prims[p->id] != p) {
      throw vlad::Error(what + why);
    }
  }
}

}  // namespace

void retain(Root* r) { r->refs.fetch_add(1, std::memory_order_relaxed); }

void release(Root* r) {
  if (r->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) GC_FREE(r);
}

Root* root_real(double x) {
  return guarded([&] { return new_root(vlad::Value::real(x)); });
}
Root* root_boolean(bool b) {
  return guarded([&] { return new_root(vlad::Value::boolean(b)); });
}
Root* root_string(const std::string& s) {
  return guarded([&] { return new_root(vlad::make_string(s)); });
}
Root* root_pair(const Root* a, const Root* b) {
  return guarded([&] { return new_root(cons(value_of(a), value_of(b))); });
}
Root* root_reals(const std::vector<double>& xs) {
  return guarded([&] {
    vlad::Value l = vlad::Value::nil();
    for (size_t i = xs.size(); i-- > 0;) l = cons(vlad::Value::real(xs[i]), l);
    return new_root(l);
  });
}
Root* root_list(const std::vector<const Root*>& items, bool tuple) {
  return guarded([&] {
    size_t n = items.size();
    if (tuple && n == 0) return new_root(vlad::Value::nil());
    vlad::Value l = tuple ? value_of(items[n - 1]) : vlad::Value::nil();
    for (size_t i = tuple ? n - 1 : n; i-- > 0;) l = cons(value_of(items[i]), l);
    return new_root(l);
  });
}

Type type_of(const Root* r) {
  return guarded([&] {
    vlad::Value v = forced(r);
    if (v.is_nil()) return Type::Null;
    if (v.is_bool()) return Type::Boolean;
    if (v.is_real()) return Type::Real;
    if (is_pair(v)) return Type::Pair;
    if (is(v, Kind::String)) return Type::String;
    if (is(v, Kind::Closure) || is(v, Kind::Prim)) return Type::Procedure;
    return Type::Other;
  });
}

double real_of(const Root* r, const char* what) {
  return guarded([&] {
    vlad::Value v = forced(r);
    if (!v.is_real()) type_error(what, "a real", r);
    return v.as_real();
  });
}
bool boolean_of(const Root* r, const char* what) {
  return guarded([&] {
    vlad::Value v = forced(r);
    if (!v.is_bool()) type_error(what, "a boolean", r);
    return !v.is_false();
  });
}
std::string text_of(const Root* r, const char* what) {
  return guarded([&] {
    vlad::Value v = forced(r);
    if (!is(v, Kind::String)) type_error(what, "a string", r);
    return vlad::string_of(v);
  });
}
Root* car_of(const Root* r, const char* what) {
  return guarded([&] {
    vlad::Value v = forced(r);
    if (!is_pair(v)) type_error(what, "a pair", r);
    return new_root(car(v));
  });
}
Root* cdr_of(const Root* r, const char* what) {
  return guarded([&] {
    vlad::Value v = forced(r);
    if (!is_pair(v)) type_error(what, "a pair", r);
    return new_root(cdr(v));
  });
}
std::vector<double> reals_of(const Root* r, const char* what) {
  return guarded([&] {
    std::vector<double> out;
    vlad::Value v = forced(r);
    for (; is_pair(v); v = forced(cdr(v))) {
      vlad::Value x = forced(car(v));
      if (!x.is_real()) type_error(what, "a list of reals", r);
      out.push_back(x.as_real());
    }
    if (!v.is_nil()) type_error(what, "a list of reals", r);
    return out;
  });
}
std::vector<Root*> items_of(const Root* r, const char* what) {
  return guarded([&] {
    std::vector<Root*> out;
    vlad::Value v = forced(r);
    for (; is_pair(v); v = forced(cdr(v))) out.push_back(new_root(car(v)));
    if (!v.is_nil()) {
      for (Root* x : out)
        if (x) release(x);
      type_error(what, "a proper list", r);
    }
    return out;
  });
}
std::string write_of(const Root* r) {
  return guarded([&] {
    std::string out;
    run_on_big_stack(nullptr, [&] { out = write_string(value_of(r)); });
    return out;
  });
}
void fail(const std::string& message) { raise(info_of(vlad::Error(message))); }

Session* open_session() {
  return guarded([&] {
    Session* s = new Session{nullptr};
    try {
      run_on_big_stack(nullptr, [&] { s->in = new Interp(); });
      s->in->depth_limit_knob = "Interpreter::set_depth_limit";
    } catch (...) {
      delete s;
      throw;
    }
    return s;
  });
}

void close_session(Session* s) {
  enter();
  destroy_interp(s->in);
  delete s;
}

Root* eval_text(Session* s, const std::string& text, const std::string& name, const std::string& dir) {
  return guarded([&] {
    return evaluate(s, [&] {
      vlad::Value last = vlad::Value::nil();
      RunOptions opt;
      opt.dir = dir;
      run_text(*s->in, text, intern(name), opt, [&](vlad::Value v, Pos) { last = v; });
      return last;
    });
  });
}

Root* eval_file(Session* s, const std::string& path) {
  std::string text = guarded([&] {
    std::string t = read_file(path);
    begin_program(*s->in, path);
    return t;
  });
  size_t slash = path.rfind('/');
  return eval_text(s, text, path, slash == std::string::npos ? "." : path.substr(0, slash));
}

Root* read_global(Session* s, const std::string& name) {
  return guarded([&] {
    auto it = s->in->user_cells.find(intern(name));
    if (it == s->in->user_cells.end()) throw vlad::Error("unbound variable " + name);
    Cell* c = it->second;
    // a prelude name not read yet: its definition read and run now, as an evaluation
    if (c->value.is_unbound() && s->in->lazy_user.count(c)) return evaluate(s, [&] { return s->in->force_cell(c); });
    if (c->value.is_unbound()) throw vlad::Error("unbound variable " + name);
    return new_root(c->value);
  });
}

void write_global(Session* s, const std::string& name, const Root* v) {
  guarded([&] {
    if (!is_symbol_name(name)) throw vlad::Error("define: " + name + " is not a valid name");
    if (is_syntax_keyword(intern(name))) throw vlad::Error(syntax_definition_message(intern(name)));
    check_owner(s, value_of(v), "define " + name);
    Cell* c = s->in->cell(intern(name), false);
    c->value = value_of(v);
    s->in->user_cell_written(c);
  });
}

Root* call(Session* s, const Root* f, const Root* arg) {
  return guarded([&] {
    check_owner(s, value_of(f), "call");
    return evaluate(s, [&] { return apply(value_of(f), value_of(arg)); });
  });
}

Root* call_library(Session* s, const char* op, const Root* f, const Root* arg) {
  return guarded([&] {
    check_owner(s, value_of(f), op);
    return evaluate(s, [&] {
      vlad::Value library = s->in->prelude_value(op);
      return apply(apply(library, value_of(f)), value_of(arg));
    });
  });
}

namespace {
void check_host_here(Interp& in, const std::string& name, int arity, bool has_function) {
  std::string where = "define_primitive " + name;
  if (!is_symbol_name(name)) throw vlad::Error(where + ": not a valid name");
  if (is_syntax_keyword(intern(name)))
    throw vlad::Error(where + ": " + name + " is syntax; it cannot be defined at top level");
  if (!has_function) throw vlad::Error(where + ": no function given");
  if (arity < 1) throw vlad::Error(where + ": the arity must be at least 1");
  auto old = in.prim_by_name.find(intern(name));
  if (old != in.prim_by_name.end() && old->second->cls != PrimClass::Host)
    throw vlad::Error(where + ": cannot replace a builtin primitive");
}
}  // namespace

void check_host(Session* s, const std::string& name, int arity, bool has_function) {
  guarded([&] { check_host_here(*s->in, name, arity, has_function); });
}

void define_host(Session* s, const std::string& name, int arity,
                 std::function<double(const std::vector<double>&)> f, std::vector<std::string> partials) {
  guarded([&] {
    Interp& in = *s->in;
    std::string where = "define_primitive " + name;
    check_host_here(in, name, arity, static_cast<bool>(f));
    if (!partials.empty() && (int)partials.size() != arity) throw vlad::Error(where + ": one partial per argument");
    std::vector<std::string> rule_names;
    for (const std::string& d : partials) {
      auto p = in.prim_by_name.find(intern(d));
      if (p == in.prim_by_name.end()) throw vlad::Error(where + ": no primitive " + d);
      rule_names.push_back(p->second->cls == PrimClass::Host ? host_alias(d) : d);
    }
    in.add_prim(make_host_prim(name, new Host{std::move(f), arity, std::move(partials), &in}, rule_names));
  });
}

uint64_t session_meter(Session* s) {
  return guarded([&] { return meter_total(*s->in); });
}

void session_meter_reset(Session* s) {
  guarded([&] { meter_reset(*s->in); });
}

std::vector<uint64_t> session_meter_all(Session* s) {
  return guarded([&] {
    const WorkCounters& w = s->in->work_total;
    return std::vector<uint64_t>{meter_total(*s->in), w.steps, w.applications, w.objects, w.bytes, w.retained_peak,
                                 w.analysis_objects, w.analysis_bytes, w.transformed_bindings, w.native_bodies,
                                 w.analysis_ns};
  });
}

void session_measure_retained(Session* s, bool on) { s->in->meter_retained = on; }

void session_set_jit(Session* s, bool on, unsigned runs) {
  s->in->jit = on && jit_supported();
  if (runs) s->in->jit_threshold = runs;
}

bool session_jit(Session* s) { return s->in->jit; }

void session_set_depth_limit(Session* s, long calls) { s->in->depth_limit = calls < 1 ? 1 : calls; }
long session_depth_limit(Session* s) { return s->in->depth_limit; }

bool jit_available() { return jit_supported(); }

void set_heap_limit_bytes(size_t bytes) {
  init_collector();
  vlad::set_heap_limit(bytes);
}

size_t heap_limit_bytes() {
  init_collector();
  return vlad::heap_limit();
}

}  // namespace detail
}  // namespace vlad
