// heap.cpp — allocation on the Boehm collector (one entry point each for scanned and atomic memory),
// constructors for heap values, and the symbol table.
#include <alloca.h>
#include <atomic>
#include <cstring>
#include <chrono>
#include <mutex>
#include <cstdio>
#include <unistd.h>
#include <cstdlib>
#include <new>
#include <unordered_map>
#include <unordered_set>
#include <vector>
#include <string>

#ifndef NDEBUG
#define NDEBUG  // gc_inline.h's assertions call GC_size on every allocation
#include <gc/gc_inline.h>
#undef NDEBUG
#else
#include <gc/gc_inline.h>
#endif

#include "error.hpp"
#include "value.hpp"

namespace vlad {

namespace {
size_t heap_limit_bytes = 0;

void quiet_warning(char*, GC_word) {}  // the collector's "out of memory" warnings: we raise an Error

std::string size_text(size_t bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  double v = (double)bytes;
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    u++;
  }
  char buf[64];
  snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.3g %s", v, units[u]);
  return buf;
}
}  // namespace

void set_heap_limit(size_t bytes) {
  gc_init();
  heap_limit_bytes = bytes;
  GC_set_max_heap_size(bytes);
}

size_t heap_limit() { return heap_limit_bytes; }

namespace {
// Set when an allocation failed at the heap limit: the failed evaluation's garbage is then
// collected before the next one (below). The collector, having failed, would not collect again
// before its next failed attempt to grow the heap: the next evaluation failed at once.
std::atomic<bool> heap_was_exhausted{false};
}  // namespace

const char* const kHeapLimitOption = "--heap-limit";
__thread const char* heap_limit_knob = kHeapLimitOption;

Error heap_limit_error() {
  heap_was_exhausted.store(true, std::memory_order_relaxed);
  return Error("heap limit exceeded (" + size_text(heap_limit_bytes) + "); raise it with " + heap_limit_knob);
}

[[noreturn]] void heap_exhausted() { throw heap_limit_error(); }

// The heap's size as the collector's limit counts it: with the blocks it has given back to the
// system (GC_get_heap_size leaves them out), which it maps again before it grows.
static size_t mapped_heap_size() { return GC_get_heap_size() + GC_get_unmapped_bytes(); }

Error memory_error() {
  // (a C++ container on the collector's heap, gc_allocator, throws std::bad_alloc at the limit)
  if (mapped_heap_size() + (64u << 20) >= heap_limit_bytes) return heap_limit_error();
  return Error("out of memory");
}

// Zeroes `bytes` of this thread's stack below the caller's frame: a failed evaluation's frames
// left its values there, and the collection's own frames, reaching as deep and leaving slots
// unwritten, would be scanned with them (a tail loop's list, its frames near the stack's top,
// stayed reachable: every later evaluation failed at the heap limit too).
__attribute__((noinline)) static void clear_stack_below(size_t bytes) {
  void* p = alloca(bytes);
  memset(p, 0, bytes);
  asm volatile("" : : "r"(p) : "memory");
}

// And the collector keeps some object of a full heap reachable through roots of its own (a
// plain C program shows it: a 16 MB list, dropped, stays 75% live) until its heap grows: when a
// long list filled the heap, that cell held all the cells before it, and every evaluation after
// failed at the limit too. So the heap grows once more, past the limit (by a sixteenth of it, at
// least 4 MiB, and to at most a quarter over it in all), before the collection.
void collect_after_heap_limit() {
  if (!heap_was_exhausted.exchange(false, std::memory_order_relaxed)) return;
  clear_stack_below(size_t(256) << 10);
  size_t limit = heap_limit_bytes;
  if (limit) {
    // (to at most a quarter over the limit: under 16 MiB, less than 4 MiB, but never nothing)
    size_t heap = mapped_heap_size(), top = limit + limit / 4;
    size_t slack = std::min(std::max(limit / 16, size_t(4) << 20), top > heap ? top - heap : 0);
    if (slack >= (size_t(1) << 20)) {
      GC_set_max_heap_size(heap + slack);
      GC_expand_hp(slack);
    }
  }
  GC_gcollect();
  if (limit) GC_set_max_heap_size(limit);
}

// An evaluation that built a large structure and let it go (a reverse pass over 10^6 steps:
// ~600 MiB of heap) left the REPL's process that large for the rest of the session, since the
// collector keeps a grown heap. Called while no evaluation runs; at most one collection per
// kReleaseStep of growth, so that a session holding a large value does not collect at every line.
bool release_grown_heap() {
  static std::atomic<size_t> baseline{0};  // the heap after the last release (unmapped pages not counted)
  static std::atomic<bool> again{false};
  size_t base = baseline.load(std::memory_order_relaxed);
  bool retry = again.load(std::memory_order_relaxed);
  if (!retry && GC_get_heap_size() < base + kReleaseStep) return false;
  // After an evaluation stopped at the heap limit, the next one's collect_after_heap_limit grows
  // the heap a little and collects first (the failed evaluation's stale words then gone); a
  // release now collected while they held its data (the next input then failed at the limit
  // too, 1 time in 10). The release comes after that input instead.
  if (heap_was_exhausted.load(std::memory_order_relaxed)) return false;
  // (the collector unmaps a block only once it has stayed free since the collection before
  // last: two collections first, then the one that unmaps)
  GC_gcollect();
  GC_gcollect();
  GC_gcollect_and_unmap();
  size_t now = GC_get_heap_size();
  // Still grown: stale words of the evaluation just ended can hold its data until the next one
  // runs on the same thread (docs/embedding.md); once more after the next input, then not.
  again.store(!retry && now >= base + kReleaseStep, std::memory_order_relaxed);
  baseline.store(now, std::memory_order_relaxed);
  return true;
}

static void start_gc_stress_thread();

// The data segments of the system's libraries, which hold no pointer into our heap (the values
// live in collected or uncollectable memory, and our own statics are the executable's): libgc
// scans every loaded library's data at each collection otherwise: ~200 KiB, ~100,000 instructions
// of each collection's fixed cost, which W3's gradient pays ~150 times a run. libgc's own data and
// any other library's (a host's, libvlad's) are still scanned. (Called by libgc with its lock
// held: no allocation here.)
bool gc_scans_library_data(const char* path) {
  static const char* const system_libraries[] = {"libc.so", "libm.so", "libstdc++.so", "libgcc_s.so", "libedit.so",
                                                 "libtinfo.so", "libbsd.so", "libmd.so", "ld-linux"};
  const char* name = path ? strrchr(path, '/') : nullptr;
  name = name ? name + 1 : path;
  if (!name) return true;
  for (const char* lib : system_libraries)
    if (strncmp(name, lib, strlen(lib)) == 0) return false;
  return true;
}
static int GC_CALLBACK scan_library_data(const char* path, void*, size_t) { return gc_scans_library_data(path); }

void gc_init() {
  static std::once_flag once;
  std::call_once(once, [] {
    // (if the host initialised the collector already, its setting stays: it cannot change now)
    if (!GC_is_init_called()) {
      GC_set_all_interior_pointers(0);
      // One marker (unless GC_MARKERS says otherwise): with parallel marking, a long chain of
      // wide objects (reverse over reverse through a 2*10^5-deep recursion) overflows the
      // markers' fixed local mark stacks again and again, each overflow a rescan of the heap
      // (3,500 of them: 4.9 s of a 7.6 s run; 25 s at 8*10^5), where one marker's stack grows
      // (0.35 s). On the benchmarks' heaps the two are alike (make bench).
      if (!getenv("GC_MARKERS") && !getenv("GC_NPROCS")) GC_set_markers_count(1);
      // (a host that set the collector up keeps its own filter, or none)
      GC_register_has_static_roots_callback(scan_library_data);
    }
    GC_INIT();
    GC_set_warn_proc(quiet_warning);
    GC_start_performance_measurement();  // the meter reports the time spent collecting
    // at the heap limit, collect before giving up (the garbage of a failed evaluation is there)
    GC_set_max_retries(2);
    // the default heap limit: three quarters of physical memory
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    if (pages > 0 && page > 0) {
      heap_limit_bytes = (size_t)pages / 4 * 3 * (size_t)page;
      GC_set_max_heap_size(heap_limit_bytes);
    }
    // views (value.hpp) point at an object plus a tag of 1..15
    for (size_t k = 1; k < 16; k++) GC_register_displacement(k);
    start_prefaulter();
    start_gc_stress_thread();
  });
}

// GC stress (value.hpp): a full collection every gc_stress_period() allocations of this thread, so
// that a collectable object held only by memory the collector does not scan is freed at once.
#ifdef VLAD_GC_STRESS
long gc_stress_period() {
  static const long n = [] {
    const char* e = getenv("VLAD_GC_STRESS");
    return e ? std::max(0L, atol(e)) : 0L;
  }();
  return n;
}
// VLAD_GC_STRESS_THREAD=US: a thread that collects every US microseconds as well, stopping the
// others wherever they are (between allocations too: in native code, in a gc_allocator's growth).
static long gc_stress_thread_us() {
  static const long n = [] {
    const char* e = getenv("VLAD_GC_STRESS_THREAD");
    return e ? std::max(0L, atol(e)) : 0L;
  }();
  return n;
}
static void* gc_stress_thread(void*) {
  for (;;) {
    usleep((useconds_t)gc_stress_thread_us());
    GC_gcollect();
  }
  return nullptr;
}
static void start_gc_stress_thread() {
  if (!gc_stress_thread_us()) return;
  pthread_t t;
  SigintBlocked quiet;
  if (pthread_create(&t, nullptr, gc_stress_thread, nullptr) == 0) pthread_detach(t);  // (GC_pthread_create)
}
static bool gc_stress_on() { return gc_stress_period() || gc_stress_thread_us(); }
static thread_local long gc_stress_count = 0;
static void drop_free_lists();
static inline void gc_stress_tick() {
  long n = gc_stress_period();
  if (n > 0 && ++gc_stress_count >= n) {
    gc_stress_count = 0;
    GC_gcollect();
    // (and this thread's lists dropped, so that what the collection freed is soon handed out
    // again: an object freed too early is then overwritten, not left intact)
    drop_free_lists();
  }
}
#else
long gc_stress_period() { return 0; }
static inline void gc_stress_tick() {}
static void start_gc_stress_thread() {}
static bool gc_stress_on() { return false; }
#endif

__thread WorkCounters work;
WorkCounters* work_address() { return &work; }
static thread_local int analysis_depth = 0;
// Analysis (expansion, transforms, compilation to instructions) holds collections off: what it
// makes is mostly kept (a lambda's transforms and code are cached on it), and a collection in the
// middle of it marks the whole program's code for little garbage. W4's first call, six levels
// of reverse transforms (36,000 bindings, 3.9 MB), ran three collections that cost a quarter of
// its instructions. Up to this many bytes of one analysis; past them collections run as usual.
constexpr uint64_t kAnalysisNoCollect = 32u << 20;
static thread_local bool analysis_gc_off = false;
static thread_local uint64_t analysis_start = 0;

static uint64_t now_ns() {
  return (uint64_t)std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Objects an analysis makes that only its tables in memory the collector does not scan may hold
// for a while (the reverse transform's maps of variables live in arenas): kept until the
// outermost analysis ends, by when what it made is in place (bodies, lambdas) or garbage. Under
// GC stress, or past kAnalysisNoCollect, a collection in between freed a variable still in those
// maps, and a later one took its address: "internal error: transform lost variable car".
// (A vector of new, its block uncollectable and scanned.)
static thread_local std::vector<void*, traceable_allocator<void*>>* analysis_keep = nullptr;
void keep_while_analysing(void* p) {
  if (analysis_depth == 0) return;
  if (!analysis_keep) analysis_keep = new std::vector<void*, traceable_allocator<void*>>();
  analysis_keep->push_back(p);
}

AnalysisScope::AnalysisScope()
    : steps_(work.steps), objects_(work.objects), bytes_(work.bytes), outer_(analysis_depth++ == 0) {
  if (outer_) {
    start_ns_ = now_ns();
    if (!gc_stress_on()) {  // (under GC stress, analysis collects too)
      GC_disable();
      analysis_gc_off = true;
    }
    analysis_start = work.bytes;
  } else if (analysis_gc_off && work.bytes - analysis_start > kAnalysisNoCollect) {
    GC_enable();
    analysis_gc_off = false;
  }
}

AnalysisScope::~AnalysisScope() {
  analysis_depth--;
  if (!outer_) return;
  if (analysis_keep) {
    if (analysis_keep->capacity() > (1u << 16)) {  // (a large analysis's: not kept for good)
      delete analysis_keep;
      analysis_keep = nullptr;
    } else {  // (the words zeroed too: the collector scans the whole block, not the size)
      std::fill(analysis_keep->begin(), analysis_keep->end(), nullptr);
      analysis_keep->clear();
    }
  }
  if (analysis_gc_off) {
    GC_enable();
    analysis_gc_off = false;
  }
  uint64_t s = work.steps - steps_, o = work.objects - objects_, b = work.bytes - bytes_;
  work.steps -= s;
  work.objects -= o;
  work.bytes -= b;
  work.analysis_steps += s;
  work.analysis_objects += o;
  work.analysis_bytes += b;
  work.analysis_ns += now_ns() - start_ns_;
}

void* gc_alloc_uncollectable(size_t bytes) {
  void* p = GC_MALLOC_UNCOLLECTABLE(bytes);
  if (!p) heap_exhausted();
  return p;
}

void gc_free_uncollectable(void* p) { GC_FREE(p); }

// Small objects come from this thread's own free lists, refilled in batches by the collector
// (gc_inline.h): no call into the collector, no lock, no lookup of its thread-local data. The
// lists' heads live in an uncollectable block, so the collector sees the objects on them.
namespace {
// (Lists only of scanned kinds: the links of a list of pointer-free objects are not scanned, so
// the collector would not see the list beyond its head; those are held one pointer each below.)
constexpr int kAtomicBatch = 256;  // a heap block's worth of 16-byte objects
constexpr size_t kBlockBytes = 4096;  // the collector's heap block (HBLKSIZE)
struct FreeLists {
  void* normal[GC_TINY_FREELISTS];
  // Pointer-free objects of one and two granules (a reverse real, a primitive's record of its
  // arguments), taken from the collector a batch at a time and held here, one pointer each in
  // this scanned block, until handed out: a list linked through them would not be traced.
  void* atomic[3][kAtomicBatch];  // by granules: [1] and [2]
  int atomic_n[3];
};
thread_local FreeLists* free_lists = nullptr;

FreeLists* my_free_lists() {
  if (!free_lists) free_lists = static_cast<FreeLists*>(gc_alloc_uncollectable(sizeof(FreeLists)));
  return free_lists;
}

[[noreturn]] void out_of_memory() { heap_exhausted(); }
}  // namespace

void* free_lists_address() { return &free_lists; }

#ifdef VLAD_GC_STRESS
static void drop_free_lists() {
  if (!free_lists) return;
  for (void*& head : free_lists->normal) head = nullptr;
  for (int g = 1; g <= 2; g++) {
    for (void*& p : free_lists->atomic[g]) p = nullptr;
    free_lists->atomic_n[g] = 0;
  }
}
#endif

int free_list_index(size_t bytes) {
  size_t granules = GC_WORDS_TO_WHOLE_GRANULES((bytes + 7) / 8);
  return granules < GC_TINY_FREELISTS ? (int)granules : -1;
}

uintptr_t free_list_counter_max() { return GC_TINY_FREELISTS + 1; }

void release_free_lists() {
  if (!free_lists) return;
  GC_FREE(free_lists);  // what is left on the lists is garbage now
  free_lists = nullptr;
}

// ---- the pace after a collection that met a deep stack (value.hpp) ----
namespace {
thread_local char* evaluation_stack_top = nullptr;
// A stack this deep adds twice as much to the allocation the collector waits for; one this
// shallow, about nothing.
constexpr size_t kDeepStack = size_t(32) << 20;
constexpr size_t kShallowStack = size_t(4) << 20;
std::atomic<bool> deep_stack_collected{false};

__attribute__((noinline)) size_t stack_used() {
  char here;
  return evaluation_stack_top ? (size_t)(evaluation_stack_top - &here) : 0;
}

__attribute__((noinline)) void collect_after_deep_stack() {
  // (collections held off, an analysis running: the next refill after it)
  if (!evaluation_stack_top || stack_used() > kShallowStack || GC_is_disabled()) return;
  deep_stack_collected.store(false, std::memory_order_relaxed);
  GC_gcollect();
}

inline void check_deep_stack() {
  if (__builtin_expect(deep_stack_collected.load(std::memory_order_relaxed), 0)) collect_after_deep_stack();
}
}  // namespace

void set_evaluation_stack_top(char* top) { evaluation_stack_top = top; }

void note_collection_stack() {
  if (stack_used() >= kDeepStack) deep_stack_collected.store(true, std::memory_order_relaxed);
}

namespace {
// gc_alloc when this thread's list for the size is empty (or holds a count, or there is none
// yet): gc_inline.h's allocation, which refills it from the collector.
__attribute__((noinline)) void* gc_alloc_slow(size_t bytes) {
  check_deep_stack();
  void* p;
  GC_MALLOC_WORDS_KIND(p, (bytes + 7) / 8, my_free_lists()->normal, GC_I_NORMAL, *(void**)p = 0);
  if (!p) out_of_memory();
  return p;
}
}  // namespace

// The object at the head of this thread's free list, as the native tier pops it (gc_inline.h's
// fast path without GC_end_stubborn_change, which only incremental collection with manual dirty
// bits needs, a mode this program never enables).
void* gc_alloc(size_t bytes) {
  gc_stress_tick();
  work.objects++;
  work.bytes += bytes;
  size_t g = GC_WORDS_TO_WHOLE_GRANULES((bytes + 7) / 8);
  FreeLists* fl = free_lists;
  if (__builtin_expect(fl != nullptr && g < GC_TINY_FREELISTS, 1)) {
    void** head = &fl->normal[g];
    void* p = *head;
    if (__builtin_expect((uintptr_t)p > GC_TINY_FREELISTS + 1, 1)) {
      *head = *static_cast<void**>(p);
      *static_cast<void**>(p) = nullptr;
      return p;
    }
  }
  return gc_alloc_slow(bytes);
}

namespace {
// A batch of pointer-free objects of g granules into fl->atomic[g]. No collection may run between
// the collector handing out the list and its objects being stored in the scanned block (another
// thread's allocation could start one), so collections are held off meanwhile.
// Held off, the collector cannot collect when the heap has no free block for the batch: it grows
// the heap instead (by all of it, up to 8 MiB), whatever its policy says. Every heap growth in a
// W3 gradient's steady state came from there: n = 10^4, 200 passes, a live heap of 4 MB grew to
// 90 MB, and to 180-380 MB with the prefaulter growing it further ahead (a collection came only
// once the grown heap was used up; now: 16 MB, 25-32 MB resident, the same time). So when fewer
// than two free blocks are left, a block is first taken (and given back) with collections
// allowed: the collector then collects or grows the heap as its policy says, before the batch.
void refill_atomic(FreeLists* fl, size_t g) {
  check_deep_stack();
  if (GC_get_free_bytes() < 2 * kBlockBytes) {
    void* block = GC_MALLOC_ATOMIC(kBlockBytes);
    if (!block) out_of_memory();
    GC_FREE(block);
  }
  void* list = nullptr;
  GC_disable();
  GC_generic_malloc_many(g * GC_GRANULE_BYTES, GC_I_PTRFREE, &list);
  int n = 0;
  for (; list && n < kAtomicBatch; n++) {
    fl->atomic[g][n] = list;
    list = *static_cast<void**>(list);
  }
  GC_enable();
  fl->atomic_n[g] = n;  // (objects past the batch are garbage)
}
}  // namespace

int32_t atomic_batch_offset(size_t g) { return (int32_t)(offsetof(FreeLists, atomic) + g * kAtomicBatch * sizeof(void*)); }
int32_t atomic_count_offset(size_t g) { return (int32_t)(offsetof(FreeLists, atomic_n) + g * sizeof(int)); }

void* gc_alloc_atomic(size_t bytes) {
  gc_stress_tick();
  work.objects++;
  work.bytes += bytes;
  size_t g = GC_WORDS_TO_WHOLE_GRANULES((bytes + 7) / 8);
  if (g >= 1 && g <= 2) {
    FreeLists* fl = my_free_lists();
    if (fl->atomic_n[g] == 0) refill_atomic(fl, g);
    int n = fl->atomic_n[g];
    if (n > 0) {
      void** slot = &fl->atomic[g][n - 1];
      void* p = *slot;
      *slot = nullptr;  // held by its user from now on
      fl->atomic_n[g] = n - 1;
      return p;
    }
  }
  void* p = GC_MALLOC_ATOMIC(bytes);
  if (!p) heap_exhausted();
  return p;
}

Value cons(Value a, Value b) {
  Pair* p = static_cast<Pair*>(gc_alloc(sizeof(Pair)));
  p->kind = Kind::Pair;
  p->car = a;
  p->cdr = b;
  return Value::obj(p);
}

Value make_string(const std::string& s) {
  String* o = static_cast<String*>(gc_alloc_atomic(sizeof(String) + s.size()));
  o->kind = Kind::String;
  o->len = s.size();
  memcpy(o->chars, s.data(), s.size());
  o->chars[s.size()] = 0;
  return Value::obj(o);
}

std::string string_of(Value v) {
  String* s = static_cast<String*>(v.as_obj());
  return std::string(s->chars, s->len);
}

Value make_closure(Lambda* lam, const Value* env, int n) {
  Closure* c = static_cast<Closure*>(gc_alloc(sizeof(Closure) + sizeof(Value) * (n > 0 ? n - 1 : 0)));
  c->kind = Kind::Closure;
  c->aux = n;
  c->lambda = lam;
  for (int i = 0; i < n; i++) c->env[i] = env ? env[i] : Value::nil();
  return Value::obj(c);
}

Value make_bundle(Value primal, Value tangent) {
  Bundle* b = static_cast<Bundle*>(gc_alloc(sizeof(Bundle)));
  b->kind = Kind::Bundle;
  b->primal = primal;
  b->tangent = tangent;
  return Value::obj(b);
}

Value make_tagged(Kind k, Value v) {
  Tagged* t = static_cast<Tagged*>(gc_alloc(sizeof(Tagged)));
  t->kind = k;
  t->v = v;
  return Value::obj(t);
}

Value make_lazy_zero(Value src, int strip) {
  LazyZero* z = static_cast<LazyZero*>(gc_alloc(sizeof(LazyZero)));
  z->kind = Kind::Zero;
  z->aux = strip;
  z->src = src;
  return Value::obj(z);
}

Value make_lazy_j(Value src, int n) {
  LazyJ* z = static_cast<LazyJ*>(gc_alloc(sizeof(LazyJ)));
  z->kind = Kind::LazyJ;
  z->aux = n;
  z->src = src;
  z->built = Value::unbound();
  return Value::obj(z);
}

Value make_one_hot(Value src, uint32_t k, Value y) {
  OneHot* h = static_cast<OneHot*>(gc_alloc(sizeof(OneHot)));
  h->kind = Kind::OneHot;
  h->aux = k;
  h->src = src;
  h->y = y;
  h->built = Value::unbound();
  return Value::obj(h);
}

Value make_hot_sum(Value a, Value b, uint32_t aux) {
  HotSum* h = static_cast<HotSum*>(gc_alloc(sizeof(HotSum)));
  h->kind = Kind::HotSum;
  h->aux = aux;
  h->a = a;
  h->b = b;
  h->built = Value::unbound();
  return Value::obj(h);
}

namespace {
// The objects a walk has seen: a bit per 16 bytes of address space (objects are 16-byte
// aligned), in bitmaps of 1 MiB of it each, found by a small table with the last one used at
// hand (a tape is allocated in order, so most lookups hit it). A tape of 3 * 10^6 records is
// ~9 * 10^6 objects: an open-addressing set of their addresses took 144-430 MiB (its growth
// copying it) and most of --meter's time; the bitmaps of a 330 MiB heap take 2.6 MiB.
// std::unordered_set's nodes and rehashes were worse still (~60% of --meter's time on W3's
// gradient at n = 10^6). Memory from malloc: it holds no reference to an object (the walk's
// root holds them all).
class AddressSet {
  static constexpr int kChunkBits = 20;
  static constexpr size_t kWords = (size_t(1) << kChunkBits) / 16 / 64;
  std::unordered_map<uintptr_t, uint64_t*> chunks_;
  uintptr_t last_key_ = ~uintptr_t(0);
  uint64_t* last_ = nullptr;

 public:
  AddressSet() = default;
  AddressSet(const AddressSet&) = delete;
  AddressSet& operator=(const AddressSet&) = delete;
  ~AddressSet() {
    for (auto& c : chunks_) free(c.second);
  }
  bool insert(const void* p) {  // false when seen before
    uintptr_t a = (uintptr_t)p, key = a >> kChunkBits;
    if (key != last_key_) {
      uint64_t*& bits = chunks_[key];
      if (!bits && !(bits = static_cast<uint64_t*>(calloc(kWords, sizeof(uint64_t))))) {
        chunks_.erase(key);
        throw std::bad_alloc();
      }
      last_key_ = key;
      last_ = bits;
    }
    size_t i = (a & ((uintptr_t(1) << kChunkBits) - 1)) >> 4;
    uint64_t m = uint64_t(1) << (i & 63), &w = last_[i >> 6];
    if (w & m) return false;
    w |= m;
    return true;
  }
};
}  // namespace

uint64_t reachable_bytes(Value root) {
  AddressSet seen;
  std::vector<Value> todo{root};
  uint64_t bytes = 0;
  auto push = [&](Value v) {
    if (v.is_view() && !(v.bits >> 48)) v = Value(v.bits & ~uint64_t(15), 0);
    if (v.is_obj()) todo.push_back(v);
  };
  while (!todo.empty()) {
    Value v = todo.back();
    todo.pop_back();
    const Obj* o = v.as_obj();
    if (!seen.insert(o)) continue;
    bytes += GC_size(o);
    switch (o->kind) {
      case Kind::Pair: push(static_cast<const Pair*>(o)->car); push(static_cast<const Pair*>(o)->cdr); break;
      case Kind::Closure: {
        const Closure* c = static_cast<const Closure*>(o);
        for (uint32_t i = 0; i < c->aux; i++) push(c->env[i]);
        break;
      }
      case Kind::Bundle: push(static_cast<const Bundle*>(o)->primal); push(static_cast<const Bundle*>(o)->tangent); break;
      case Kind::Reverse:
      case Kind::Perturbation:
      case Kind::Sensitivity: push(static_cast<const Tagged*>(o)->v); break;
      case Kind::Zero: push(static_cast<const LazyZero*>(o)->src); break;
      case Kind::LazyJ: push(static_cast<const LazyJ*>(o)->src); push(static_cast<const LazyJ*>(o)->built); break;
      case Kind::OneHot: {
        const OneHot* h = static_cast<const OneHot*>(o);
        push(h->src);
        push(h->y);
        push(h->built);
        break;
      }
      case Kind::HotSum: {
        const HotSum* h = static_cast<const HotSum*>(o);
        push(h->a);
        push(h->b);
        push(h->built);
        break;
      }
      case Kind::String:
      case Kind::Prim: break;
    }
  }
  return bytes;
}

// The intern table: open addressing over pointers to the strings, each kept once (its length in
// the four bytes before it) in blocks that are never freed, outside the collector's heap. Looked
// up by pointer and length: no std::string is made for a name already there (the reader interns
// every symbol it reads, and the transforms every variable they rename).
namespace {
struct InternTable {
  std::mutex mu;
  const char** slots = nullptr;
  size_t mask = 0, count = 0;
  char* block = nullptr;
  size_t block_left = 0;

  static uint64_t hash(const char* s, size_t n) {
    uint64_t h = 1469598103934665603ull ^ n;  // (FNV-1a)
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h ^ (h >> 29);
  }
  static uint32_t length(const char* p) {
    uint32_t n;
    memcpy(&n, p - 4, 4);
    return n;
  }
  const char* keep(const char* s, size_t n) {
    size_t need = (n + 4 + 1 + 7) & ~size_t(7);
    if (need > block_left) {
      size_t size = std::max(need, size_t(64) << 10);
      block = static_cast<char*>(malloc(size));
      if (!block) throw std::bad_alloc();
      block_left = size;
    }
    uint32_t n32 = (uint32_t)n;
    memcpy(block, &n32, 4);
    memcpy(block + 4, s, n);
    block[4 + n] = 0;
    const char* p = block + 4;
    block += need;
    block_left -= need;
    return p;
  }
  void grow() {
    size_t size = slots ? (mask + 1) * 2 : 4096;
    const char** fresh = static_cast<const char**>(calloc(size, sizeof(const char*)));
    if (!fresh) throw std::bad_alloc();
    for (size_t i = 0; slots && i <= mask; i++)
      if (const char* p = slots[i]) {
        size_t j = hash(p, length(p)) & (size - 1);
        while (fresh[j]) j = (j + 1) & (size - 1);
        fresh[j] = p;
      }
    free(slots);
    slots = fresh;
    mask = size - 1;
  }
  const char* intern(const char* s, size_t n) {
    if (n > UINT32_MAX) throw std::bad_alloc();
    uint64_t h = hash(s, n);
    std::lock_guard<std::mutex> lock(mu);
    if ((count + 1) * 2 > mask + 1) grow();
    size_t i = h & mask;
    for (const char* p; (p = slots[i]); i = (i + 1) & mask)
      if (length(p) == n && memcmp(p, s, n) == 0) return p;
    slots[i] = keep(s, n);
    count++;
    return slots[i];
  }
};
InternTable* intern_table() {
  static InternTable* table = new InternTable();  // (never destroyed: names outlive everything)
  return table;
}
}  // namespace

const char* intern(const char* s, size_t n) { return intern_table()->intern(s, n); }
const char* intern(const char* s) { return intern_table()->intern(s, strlen(s)); }
const char* intern(const std::string& s) { return intern_table()->intern(s.data(), s.size()); }

std::string pos_string(Pos p) {
  if (!p.file) return "?";
  return std::string(p.file) + ":" + std::to_string(p.line) + ":" + std::to_string(p.col);
}

std::string Error::located() const {
  if (!pos.file) return std::string("error: ") + what();
  return pos_string(pos) + ": error: " + what();
}

std::string Error::report() const {
  std::string out = located();
  for (size_t i = 0; i < trace.size(); i++) {
    const TraceEntry& t = trace[i];
    // a call the library made (gradient-R calling the user's f): its position in the prelude
    // says nothing to the user; the caller does
    bool library = t.pos.file && (!std::strcmp(t.pos.file, "<prelude>") || !std::strcmp(t.pos.file, "<rules>"));
    if (!library) out += "\n  in " + t.name + " at " + pos_string(t.pos);
    else out += "\n  in " + t.name + ", called by " + (i + 1 < trace.size() ? trace[i + 1].name : "the prelude");
    if (t.repeats > 1) out += " (" + std::to_string(t.repeats) + " times)";
  }
  if (trace_dropped) out += "\n  ... and " + std::to_string(trace_dropped) + " more";
  return out;
}

}  // namespace vlad
