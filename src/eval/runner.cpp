// runner.cpp — evaluation threads with large stacks, the `--check` driver and the meter report.
#include "runner.hpp"

#include "exec.hpp"

#include <pthread.h>
#include <sys/resource.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <exception>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>

#include "../ad/ad.hpp"

namespace vlad {

size_t eval_stack_bytes = size_t(4) << 30;
extern __thread char* stack_limit;

namespace {

struct ThreadJob {
  Interp* in;
  const std::function<void()>* fn;
  std::exception_ptr error;
  const char* heap_knob;  // the poster's heap_limit_knob, for the evaluation's heap-limit error
};

// How many evaluations are running on this thread: more than one when a host function that an
// evaluation called starts another (run_on_big_stack).
thread_local int evaluations_here = 0;
struct EvaluationHere {
  EvaluationHere() { evaluations_here++; }
  ~EvaluationHere() { evaluations_here--; }
};

// Runs a job on this (evaluation) thread, from its top level, and leaves the thread as it found it.
void run_job(ThreadJob* job) {
  EvaluationHere here;
  collect_after_heap_limit();  // (an earlier evaluation's garbage, if it stopped at the limit)
  current = job->in;
  heap_limit_knob = job->heap_knob;
  work = WorkCounters();
  eval_depth = 0;
  forget_retained_note();
  jit_evaluation_begins();  // (while any evaluation runs, no dead body's code is released: jit.cpp)
  try {
    (*job->fn)();
  } catch (Error& e) {
    attach_trace(e);
    job->error = std::current_exception();
  } catch (const std::bad_alloc&) {  // a C++ container the interpreter uses
    job->error = std::make_exception_ptr(memory_error());
  } catch (...) {
    job->error = std::current_exception();
  }
  release_call_records();
  release_ad_tables();
  release_binding_pool();
  release_free_lists();
  if (job->in) job->in->work_total.add(work);
  current = nullptr;
  heap_limit_knob = kHeapLimitOption;
  jit_evaluation_ends();
}

// The depth limit's guard: 4 MiB above the end of this thread's stack (a quarter of a small one).
void set_stack_limit() {
  pthread_attr_t attr;
  void* base = nullptr;
  size_t size = 0;
  if (pthread_getattr_np(pthread_self(), &attr) == 0) {
    pthread_attr_getstack(&attr, &base, &size);
    pthread_attr_destroy(&attr);
  }
  stack_limit = static_cast<char*>(base) + (size > (8u << 20) ? (4u << 20) : size / 4);
  set_evaluation_stack_top(static_cast<char*>(base) + size);
}

// Evaluation stacks are mapped here so that they can use transparent huge pages: deep recursion
// then costs one page fault per 2 MiB instead of one per 4 KiB.
// They are mapped far below where the collector's heap grows (the kernel maps top-down from just
// below the shared libraries): a stack between two heap sections lies in the range the collector
// takes for plausible heap addresses, and the words of a deep recursion that point into the stack
// itself (frame links, addresses of locals: a page of the stack per few frames) were each taken
// for a pointer to memory the heap might grow into and black-listed. The black list is a hashed
// bit table, and a stack of hundreds of thousands of pages filled it: every new heap section was
// then black-listed as a whole, the heap grew to its limit, and a recursion 10^6 deep with
// almost nothing live failed with "heap limit exceeded". Stacks below the heap are outside that
// range. The first of 64 slots from 16 TiB that is free (a stack unmapped frees its slot for the
// next); when none is, where the kernel chooses, as before.
#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0  // (older headers: a hint, checked below)
#endif
void* map_low(size_t n) {
  const int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK;
  for (uintptr_t k = 0; k < 64; k++) {
    void* want = reinterpret_cast<void*>((uintptr_t(1) << 44) + k * (n + (uintptr_t(64) << 20)));
    void* p = mmap(want, n, PROT_READ | PROT_WRITE, flags | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == want) return p;
    if (p != MAP_FAILED) munmap(p, n);  // (a kernel that took the flag for a hint, elsewhere)
  }
  return mmap(nullptr, n, PROT_READ | PROT_WRITE, flags, -1, 0);
}
void* map_stack(size_t* size) {
  void* stack = MAP_FAILED;
  size_t n = eval_stack_bytes;
  for (; n >= (64u << 20); n /= 2) {
    stack = map_low(n);
    if (stack != MAP_FAILED) break;
  }
  if (stack == MAP_FAILED) return nullptr;
  madvise(stack, n, MADV_HUGEPAGE);
  *size = n;
  return stack;
}

// Only the top kKeptStack of a kept stack stays resident: a deep recursion's pages below are
// given back (when the page just below that was touched at all: mincore, not a madvise of
// gigabytes each time).
constexpr size_t kKeptStack = 8u << 20;
void trim_stack(void* stack, size_t size) {
  if (size <= kKeptStack) return;
  char* below = static_cast<char*>(stack) + (size - kKeptStack) - 4096;  // (the stack grows down)
  unsigned char resident = 1;
  if (mincore(below, 4096, &resident) == 0 && !(resident & 1)) return;
  madvise(stack, size - kKeptStack, MADV_DONTNEED);
}

// One evaluation thread kept between evaluations (most run one after another: a REPL's lines, a
// host's calls), waiting for the next job: an API call of a small function was ~150 us with a
// fresh thread and stack each time, ~45 us with the stack kept and a fresh thread; creating and
// ending the thread was most of the rest. While it waits, and while the caller waits for it,
// each is "blocked" for the collector (GC_do_blocking): a collection scans their stacks as they
// are at the wait instead of stopping them with signals and waking them to answer (on two cores
// that was a third of a collection of a small heap, 0.60 -> 0.37 ms each). A second evaluation
// started while the kept thread is busy on another host thread gets a thread of its own; one
// started from inside a host function runs where it is (run_on_big_stack).
struct Worker {
  pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t posted = PTHREAD_COND_INITIALIZER, finished = PTHREAD_COND_INITIALIZER;
  ThreadJob* job = nullptr;  // the job to run
  std::atomic<bool> has_job{false}, done{false};
  bool quit = false;  // (with has_job: end the thread)
  pthread_t thread;
  void* stack = nullptr;
  size_t size = 0;
};
std::atomic<Worker*> idle_worker{nullptr};

// Waits for flag to be set, and clears it: first spinning for up to kSpin (a host's next call
// or a short job's end usually comes sooner, and sleeping and being woken cost ~5 us each way),
// then asleep on cv.
// (With one core, spinning only keeps the other thread from running: no spin.)
const auto kSpin = std::chrono::microseconds(sysconf(_SC_NPROCESSORS_ONLN) > 1 ? 20 : 0);
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}
void await(Worker* w, std::atomic<bool>& flag, pthread_cond_t* cv) {
  auto until = std::chrono::steady_clock::now() + kSpin;
  for (int i = 0; !flag.load(std::memory_order_acquire); i++) {
    cpu_relax();
    if ((i & 63) == 63 && std::chrono::steady_clock::now() > until) break;
  }
  pthread_mutex_lock(&w->mutex);
  while (!flag.load(std::memory_order_acquire)) pthread_cond_wait(cv, &w->mutex);
  flag.store(false, std::memory_order_relaxed);
  pthread_mutex_unlock(&w->mutex);
}

void* wait_for_job(void* arg) {  // (collector-blocked: touches no heap value)
  Worker* w = static_cast<Worker*>(arg);
  await(w, w->has_job, &w->posted);
  return nullptr;
}

void* wait_until_done(void* arg) {  // (collector-blocked)
  Worker* w = static_cast<Worker*>(arg);
  await(w, w->done, &w->finished);
  return nullptr;
}

void* join_thread(void* t) {
  pthread_join(*static_cast<pthread_t*>(t), nullptr);
  return nullptr;
}

// Runs f(arg) as collector-blocked when this thread is registered with the collector.
void blocking(void* (*f)(void*), void* arg) {
  if (GC_thread_is_registered()) GC_do_blocking(f, arg);
  else f(arg);
}

void* worker_main(void* arg) {
  Worker* w = static_cast<Worker*>(arg);
  set_stack_limit();
  for (;;) {
    GC_do_blocking(wait_for_job, w);
    if (w->quit) return nullptr;
    run_job(w->job);
    trim_stack(w->stack, w->size);
    pthread_mutex_lock(&w->mutex);
    w->done.store(true, std::memory_order_release);
    pthread_cond_signal(&w->finished);
    pthread_mutex_unlock(&w->mutex);
  }
}

Worker* start_worker() {
  Worker* w = new Worker;
  w->stack = map_stack(&w->size);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  int rc = -1;
  if (w->stack) {
    pthread_attr_setstack(&attr, w->stack, w->size);
    SigintBlocked quiet;  // (Ctrl-C during its evaluation: the waiting thread's handler sets the flag)
    rc = pthread_create(&w->thread, &attr, worker_main, w);  // GC_pthread_create via gc.h
  }
  pthread_attr_destroy(&attr);
  if (rc == 0) {
    pthread_setname_np(w->thread, "vlad-eval");  // (as perf and top -H show it)
    return w;
  }
  if (w->stack) munmap(w->stack, w->size);
  delete w;
  return nullptr;
}

void post(Worker* w, ThreadJob* job, bool quit) {
  pthread_mutex_lock(&w->mutex);
  w->job = job;
  w->quit = quit;
  w->has_job.store(true, std::memory_order_release);
  pthread_cond_signal(&w->posted);
  pthread_mutex_unlock(&w->mutex);
}

// Keeps w for the next evaluation, or (one is kept already) ends its thread and frees its stack.
void keep_or_end(Worker* w) {
  Worker* none = nullptr;
  if (idle_worker.compare_exchange_strong(none, w)) return;
  post(w, nullptr, true);
  blocking(join_thread, &w->thread);
  munmap(w->stack, w->size);
  delete w;
}
}  // namespace

namespace {
// Runs fn on this thread as an evaluation of `in` (the current interpreter, its own counters),
// leaving the thread's state as it found it. `nested`: inside another evaluation on this thread,
// whose calls stay below it (an error's trace shows its own calls only).
void run_here(Interp* in, const std::function<void()>& fn, bool nested) {
  EvaluationHere here;
  Interp* saved = current;
  WorkCounters saved_work = work;
  long base = eval_depth;
  current = in;
  work = WorkCounters();
  jit_evaluation_begins();
  auto finish = [&] {
    if (in) in->work_total.add(work);
    work = saved_work;
    current = saved;
    eval_depth = base;
    jit_evaluation_ends();
  };
  try {
    fn();
  } catch (Error& e) {
    if (nested) attach_trace(e, base);
    finish();
    throw;
  } catch (const std::bad_alloc&) {
    // (a C++ container past the heap limit, e.g. compiling a lambda's code: the error gets its
    // position and trace as any other, where the evaluation's call records are)
    Error e = memory_error();
    if (nested) attach_trace(e, base);
    finish();
    throw e;
  } catch (...) {
    finish();
    throw;
  }
  finish();
}
}  // namespace

void run_on_big_stack(Interp* in, const std::function<void()>& fn) {
  // The collector is set up (all-interior-pointers off) before its first use, which creating a
  // thread through it would be: changed after, its size tables no longer fit.
  gc_init();
  // From inside an evaluation on this thread (a host function calling the interpreter): here,
  // on the same stack, above the caller's calls, which count with its own against the depth
  // limit. (A thread and a stack of its own each time was 2 MiB a level: a huge page each.)
  if (evaluations_here > 0) {
    run_here(in, fn, true);
    return;
  }
  ThreadJob job{in, &fn, nullptr, heap_limit_knob};
  Worker* w = idle_worker.exchange(nullptr);
  if (!w) w = start_worker();
  if (w) {
    collect_after_heap_limit();  // (from here: the worker's stack, waiting, is scanned shallow)
    post(w, &job, false);
    blocking(wait_until_done, w);
    keep_or_end(w);
    if (job.error) std::rethrow_exception(job.error);
    return;
  }
  run_here(in, fn, false);  // no thread: here, with the limit at this thread's stack
}

// ---- --check ----

namespace {

std::vector<std::string> tokens(const std::string& s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    char c = s[i];
    if (c == ' ' || c == '\n' || c == '\t') { i++; continue; }
    if (c == '(' || c == ')') { out.push_back(std::string(1, c)); i++; continue; }
    if (c == '"') {
      size_t j = i + 1;
      while (j < s.size() && s[j] != '"') j += s[j] == '\\' ? 2 : 1;
      out.push_back(s.substr(i, j + 1 - i));
      i = j + 1;
      continue;
    }
    size_t j = i;
    while (j < s.size() && s[j] != ' ' && s[j] != '(' && s[j] != ')' && s[j] != '\n') j++;
    out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

bool as_number(const std::string& t, double& d) {
  if (t == "+nan") { d = NAN; return true; }
  if (t == "+inf") { d = INFINITY; return true; }
  if (t == "-inf") { d = -INFINITY; return true; }
  char* end;
  d = strtod(t.c_str(), &end);
  return !t.empty() && *end == 0 && (isdigit((unsigned char)t[0]) || t[0] == '-' || t[0] == '+' || t[0] == '.');
}

bool close(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  if (a == b) return true;
  if (std::isinf(a) || std::isinf(b)) return false;  // (an infinity agrees only with itself)
  double d = std::fabs(a - b);
  return d <= 1e-10 || d <= 1e-10 * std::max(std::fabs(a), std::fabs(b));
}

// Tokens of a datum in one spelling: `(a . (b c))` as `(a b c)` and `(a . ())` as `(a)`, as the
// reader takes them (a value prints a tagged cdr dotted, `(1 . (forward 2 (perturbation 3)))`,
// which an answer can only be read back as the list `(1 forward 2 (perturbation 3))`).
std::vector<std::string> normalized_tokens(const std::string& s) {
  std::vector<std::string> t = tokens(s);
  for (size_t i = 0; i + 1 < t.size();) {
    if (t[i] != "." || t[i + 1] != "(") { i++; continue; }
    size_t j = i + 1;  // its matching ")", which the dotted list's own ")" must follow
    long depth = 0;
    for (; j < t.size(); j++) {
      if (t[j] == "(") depth++;
      else if (t[j] == ")" && --depth == 0) break;
    }
    if (j + 1 >= t.size() || t[j + 1] != ")") { i++; continue; }
    t.erase(t.begin() + j);
    t.erase(t.begin() + i, t.begin() + i + 2);
  }
  return t;
}

}  // namespace

bool answer_matches(Value v, const std::string& expected) {
  auto a = normalized_tokens(write_string(v));
  auto e = normalized_tokens(expected);
  if (a.size() != e.size()) return false;
  for (size_t i = 0; i < a.size(); i++) {
    if (a[i] == e[i]) continue;
    double x, y;
    if (as_number(a[i], x) && as_number(e[i], y) && close(x, y)) continue;
    return false;
  }
  return true;
}

CheckResult check_text(Interp& in, const std::string& text, const char* file, const std::string& dir,
                       const std::function<void(const std::string&)>& report) {
  CheckResult res;
  gc_vector<TopForm> forms;
  try {
    forms = read_program(text, intern(file), true);
  } catch (const Error& e) {
    report(e.located());
    res.failed++;
    return res;
  }
  {
    RunOptions opt;
    opt.dir = dir;
    predefine_procedures(in, forms, opt);
  }
  const char* error_sym = intern("error");
  for (const TopForm& f : forms) {
    if (f.error) {  // a form, or its answer, that could not be read: that check fails alone
      res.failed++;
      report(Error(f.error, f.error_pos).located());
      continue;
    }
    Pos at = f.form->pos;
    bool expect_error = f.expected && f.expected->type == Sx::Pair && sx_is_sym(f.expected->car, error_sym);
    std::string want_text;
    // (error "text") and nothing else: (error), (error 5) or (error car) matched any error
    std::string bad_answer;
    if (expect_error) {
      Sx* rest = f.expected->cdr;
      Sx* m = rest->type == Sx::Pair ? rest->car : nullptr;
      if (m && m->type == Sx::Str && rest->cdr->type == Sx::Nil) want_text = std::string(m->text, m->len);
      else bad_answer = Error("malformed expected answer " + sx_to_string(f.expected) + ": write (error \"text\"), with text that the error's message contains", f.expected->pos).located();
    }
    bool is_define = f.form->type == Sx::Pair && sx_is_sym(f.form->car, intern("define"));
    if (!f.expected) {  // (include "name"): its forms in place, their annotations checked too
      std::string path, sub;
      bool included = false;
      try {
        RunOptions opt;
        opt.dir = dir;
        included = include_target(in, f.form, opt, path);
        if (included && !path.empty()) sub = read_file(path);
      } catch (const Error& e) {
        res.failed++;
        report(pos_string(at) + ": FAIL: " + sx_to_string(f.form) + ": " + e.what());
        continue;
      }
      if (included) {
        if (path.empty()) continue;  // (included before)
        CheckResult r = check_text(in, sub, intern(path), dir_of(path), report);
        res.passed += r.passed;
        res.failed += r.failed;
        continue;
      }
    }
    gc_vector<Value> values;
    std::unique_ptr<Error> failure;
    try {
      RunOptions opt;
      opt.dir = dir;
      run_form(in, f.form, opt, [&](Value v, Pos) { values.push_back(v); });
    } catch (Error& e) {
      attach_trace(e);
      failure.reset(new Error(e));
    } catch (const std::bad_alloc&) {
      failure.reset(new Error(memory_error()));
    }
    if (!bad_answer.empty()) {  // (the form ran, as in the program; its answer cannot be compared)
      if (failure) collect_after_heap_limit();
      res.failed++;
      report(bad_answer);
      continue;
    }
    if (failure) {
      collect_after_heap_limit();
      const Error& e = *failure;
      if (expect_error && std::string(e.what()).find(want_text) != std::string::npos) {
        res.passed++;
      } else {
        res.failed++;
        std::string raised = e.located();
        raised = raised.substr(0, raised.find('\n'));
        report(pos_string(at) + ": FAIL: " + sx_to_string(f.form) +
               (f.expected ? ": expected " + sx_to_string(f.expected) + "," : ":") + " raised " + raised);
      }
      continue;
    }
    if (expect_error) {
      res.failed++;
      report(pos_string(at) + ": FAIL: " + sx_to_string(f.form) + ": expected an error containing \"" +
             want_text + "\", got " + (values.empty() ? std::string("no value") : write_brief(values.back())));
      continue;
    }
    if (f.expected) {
      std::string want = sx_to_string(f.expected);
      if (!values.empty() && answer_matches(values.back(), want)) {
        res.passed++;
      } else {
        res.failed++;
        report(pos_string(at) + ": FAIL: " + sx_to_string(f.form) + ": expected " + want + ", got " +
               (values.empty() ? std::string("no value") : write_brief(values.back())));
      }
      continue;
    }
    if (is_define) continue;
    if (!values.empty() && values.back() == Value::boolean(true)) {
      res.passed++;
    } else {
      res.failed++;
      report(pos_string(at) + ": FAIL: " + sx_to_string(f.form) + ": expected #t, got " +
             (values.empty() ? std::string("no value") : write_brief(values.back())));
    }
  }
  return res;
}

// ---- meter ----

std::string meter_report(const Interp& in) {
  std::string out;
  uint64_t total = 0;
  for (size_t i = 0; i < in.prims.size(); i++) {
    if (!in.meter[i]) continue;
    out += std::string(in.prims[i]->name) + " " + std::to_string(in.meter[i]) + "\n";
    total += in.meter[i];
  }
  const WorkCounters& w = in.work_total;
  out += "# interpreted steps: " + std::to_string(w.steps) + "\n";
  out += "# applications: " + std::to_string(w.applications) + "\n";
  out += "# heap objects allocated: " + std::to_string(w.objects) + "\n";
  out += "# heap bytes allocated: " + std::to_string(w.bytes) + "\n";
  out += "# analysis (expansion, transforms, compilation): " + std::to_string(w.analysis_steps) + " steps, " +
         std::to_string(w.analysis_objects) + " objects, " + std::to_string(w.analysis_bytes) + " bytes, " +
         std::to_string(w.transformed_bindings) + " transformed bindings, " +
         std::to_string(w.analysis_ns / 1000) + " us\n";
  out += std::string("# native tier: ") + (in.jit ? "on" : "off") + ", " + std::to_string(w.native_bodies) +
         " bodies compiled (" + std::to_string(w.native_instructions) + " instructions, " +
         std::to_string(w.native_ns / 1000) + " us)" +
         (jit_supported() ? "; machine code held " + std::to_string((jit_code_bytes() + 1023) >> 10) + " KiB, " +
                                std::to_string(jit_released_bodies()) + " dead bodies' code released"
                          : std::string()) +
         "\n";
  if (in.meter_retained)
    out += "# backpropagator bytes retained (peak): " + std::to_string(w.retained_peak) + "\n";
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  out += "# collections: " + std::to_string(GC_get_gc_no() - in.gc_no_at_reset) + " (" +
         std::to_string(GC_get_full_gc_total_time() - in.gc_ms_at_reset) + " ms), heap " +
         std::to_string(GC_get_heap_size() >> 20) + " MiB, peak resident " + std::to_string(ru.ru_maxrss >> 10) +
         " MiB\n";
  out += "total primitive operations: " + std::to_string(total) + "\n";
  return out;
}

void meter_reset(Interp& in) {
  for (auto& m : in.meter) m = 0;
  in.work_total = WorkCounters();
  in.gc_no_at_reset = GC_get_gc_no();
  in.gc_ms_at_reset = GC_get_full_gc_total_time();
}

uint64_t meter_total(const Interp& in) {
  uint64_t t = 0;
  for (auto m : in.meter) t += m;
  return t;
}

}  // namespace vlad
