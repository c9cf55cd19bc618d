// value.hpp — the representation of every VLAD value.
// A Value is one 64-bit word: reals are unboxed doubles (NaN-boxed), heap objects are raw pointers.
#pragma once
#include <csignal>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#define GC_THREADS 1
#include <gc/gc.h>
#include <gc/gc_allocator.h>

namespace vlad {

struct Obj;
struct Lambda;

// Encoding (after JavaScriptCore): a heap pointer is stored as is (top 16 bits zero), so
// the conservative collector sees it; a double is stored as its bits plus 2^49, which
// puts every double above 2^48; small constants live below 16.
struct Value {
  uint64_t bits;
  static constexpr uint64_t kDoubleOffset = 1ull << 49;
  static constexpr uint64_t kNil = 2, kFalse = 6, kTrue = 7, kUnbound = 10, kZeroSens = 14;

  Value() : bits(kNil) {}
  constexpr explicit Value(uint64_t b, int) : bits(b) {}
  static Value real(double d) {
    uint64_t b;
    if (d != d) b = 0x7ff8000000000000ull;  // canonical NaN keeps the offset from overflowing
    else std::memcpy(&b, &d, 8);
    return Value(b + kDoubleOffset, 0);
  }
  static Value obj(const Obj* p) { return Value(reinterpret_cast<uint64_t>(p), 0); }
  static Value nil() { return Value(kNil, 0); }
  static Value boolean(bool b) { return Value(b ? kTrue : kFalse, 0); }
  static Value unbound() { return Value(kUnbound, 0); }
  // The placeholder zero of backpropagator code: the zero of whatever shape is expected there.
  // It never leaves a backpropagator (ad.hpp).
  static Value zero_sens() { return Value(kZeroSens, 0); }

  bool is_real() const { return bits >= kDoubleOffset; }
  bool is_obj() const { return bits < (1ull << 48) && bits > 0xff && (bits & 15) == 0; }
  // A view (ad.hpp): a value not made until it is needed, encoded as an object's address with a
  // tag in its four low bits (objects are 16-byte aligned), or as an immediate in [2^48, 2^49).
  bool is_view() const { return (bits < (1ull << 48) && bits > 0xff && (bits & 15) != 0) || (bits >> 48) == 1; }
  bool is_nil() const { return bits == kNil; }
  bool is_bool() const { return bits == kFalse || bits == kTrue; }
  bool is_false() const { return bits == kFalse; }
  bool is_unbound() const { return bits == kUnbound; }
  bool is_zero_sens() const { return bits == kZeroSens; }
  double as_real() const {
    uint64_t b = bits - kDoubleOffset;
    double d;
    std::memcpy(&d, &b, 8);
    return d;
  }
  Obj* as_obj() const { return reinterpret_cast<Obj*>(bits); }
  bool operator==(Value o) const { return bits == o.bits; }
  bool operator!=(Value o) const { return bits != o.bits; }
};

enum class Kind : uint32_t {
  Pair,
  String,
  Prim,
  Closure,
  Bundle,       // forward-mode primal/tangent pair of a non-pair value (paper §2, SPEC §4)
  Reverse,      // reverse-tagged value (paper §4, J←)
  Perturbation, // forward-mode tangent tag
  Sensitivity,  // reverse-mode cotangent tag
  Zero,         // a lazy zero: the zero of a value not yet materialised (paper, end of §4)
  LazyJ,        // *j of a pair, not yet walked (paper, end of §4: J← is lazy)
  OneHot,       // list-ref's sensitivity of a data list, not yet built (ad.hpp)
  HotSum,       // a sum of those, not yet built
};

struct Obj {
  Kind kind;
  uint32_t aux;  // kind-specific small data
};

struct Pos {
  const char* file = nullptr;  // interned, never freed
  int line = 0, col = 0;
};

// Run-time pairs carry no position: source positions live on the reader's syntax objects.
// cdr comes first: the collector pushes an object's fields in address order and pops the last
// first, so a long list is marked with a shallow mark stack (car, then on down the cdr).
struct Pair : Obj {
  Value cdr, car;
};

struct String : Obj {
  size_t len;
  char chars[1];
};

struct Prim;

// A closure is flat: the values of its lambda's free variables, in the lambda's order.
struct Closure : Obj {
  Lambda* lambda;
  Value env[1];
};

// Tag objects. Bundles wrap reals (and tagged reals); pairs of bundles stand for a bundle of a pair.
struct Bundle : Obj { Value primal, tangent; };
struct Tagged : Obj { Value v; };  // Reverse, Perturbation, Sensitivity
// The reverse value (reverse y) made by a builtin primitive's reverse version at the first level
// of transformation, holding what its backpropagator needs: the primitive (aux = its id + 1) and
// its real arguments. A view of it is that backpropagator (native.cpp), so one recorded
// operation is one object. A plain Tagged has aux = 0.
struct RevNode : Obj { Value v; Value x1, x2; };
// Zero{src, strip}: the zero of (*j-inverse^strip src), materialised only when inspected.
struct LazyZero : Obj { Value src; };  // aux = strip
// LazyJ{src, n}: (*j^n src) for a pair src; `built` caches the pair of *j^n's once made.
struct LazyJ : Obj { Value src; Value built; };  // aux = n
// OneHot{src, y}: the sensitivity bp_list_ref gives a data list src (a pair) for its element k = aux,
// (0 ... 0 y . the zero of the rest), the zeros those of src's first k elements; `built` caches
// the list once made. ⊕ adds it into a list without making it first.
struct OneHot : Obj { Value src; Value y; Value built; };
// HotSum{a, b}: a ⊕ b of two OneHots or HotSums of one data list, made only if looked at; aux =
// the last element either gives a value (below 2^24) | the number of OneHots under it << 24.
struct HotSum : Obj { Value a, b, built; };

// ---- allocation: everything goes through gc_alloc ----
// Initialises the collector (idempotent; call on the main thread first, before any other use of
// the collector, creating threads included): only pointers to the start
// of an object keep it alive, so a 16-byte pair takes 16 bytes (all-interior-pointers would add a
// byte to every object, doubling the small ones).
void gc_init();
// Whether the collector scans the data segment of the loaded library at `path` for roots: not those
// of the system's libraries (libc, libstdc++, libedit ...), which hold no pointer into our heap.
bool gc_scans_library_data(const char* path);
void* gc_alloc(size_t bytes);
void* gc_alloc_atomic(size_t bytes);
// Memory the collector scans but never frees (roots: global cells, primitives, host handles).
void* gc_alloc_uncollectable(size_t bytes);
void gc_free_uncollectable(void* p);  // what gc_alloc_uncollectable gave
// Gives this thread's free lists back (when an evaluation thread ends).
void release_free_lists();
// Starts the thread that faults in the collector's new heap sections on another core (prefault.cpp).
void start_prefaulter();
// Faults in the whole pages of [p, p + bytes) for writing, in one call on this thread
// (MADV_POPULATE_WRITE; nothing where the kernel lacks it).
void populate_pages(void* p, size_t bytes);
// While one lives, SIGINT is blocked on this thread, so that a helper thread created meanwhile
// starts with it blocked and keeps it so: a Ctrl-C then always reaches the thread that waits for
// input or for an evaluation. (libedit's handler passes the signal on by kill(0, SIGINT) with SIGINT
// blocked in its own thread; a helper that took it set the REPL's flag only once it was scheduled,
// which could be after readline had returned: the input Ctrl-C dropped was evaluated.)
class SigintBlocked {
  sigset_t saved_;
 public:
  SigintBlocked();
  ~SigintBlocked();
  SigintBlocked(const SigintBlocked&) = delete;
  SigintBlocked& operator=(const SigintBlocked&) = delete;
};
// (its look for new mappings: the parts of the sorted ranges `now` that `before` does not cover)
using Range = std::pair<uintptr_t, uintptr_t>;
void uncovered_ranges(const std::vector<Range>& before, const std::vector<Range>& now, std::vector<Range>& out);
// The most the collected heap may grow to, for the whole process (default: 3/4 of physical
// memory). An allocation past it raises the error "heap limit exceeded".
void set_heap_limit(size_t bytes);
size_t heap_limit();
[[noreturn]] void heap_exhausted();
// Between a REPL's inputs: once the heap has grown by kReleaseStep or more since the last time,
// a full collection that gives the free blocks' pages back to the system (they stay reserved and
// are mapped again when needed). True when it collected.
constexpr size_t kReleaseStep = size_t(64) << 20;
bool release_grown_heap();
// A collection that meets an evaluation thread's stack deep (a recursion of 10^6 calls: hundreds
// of MiB) makes the collector wait for about twice that much allocation before the next, however
// shallow the stack is by then (it paces collections by the live heap plus twice the stacks it
// last marked): after one deep recursion, loops of garbage grew the heap to 905 MiB (peak
// resident 1.46 GB) for 1 MiB live. note_collection_stack (called as a collection starts, by
// the collector's event hook) remembers that one did; the next refill of a free list on a stack
// that is shallow again then collects once, and the pace is the live heap's again.
// set_evaluation_stack_top: the highest address of this thread's stack (an evaluation thread's).
void set_evaluation_stack_top(char* top);
void note_collection_stack();

// The work an evaluation does beyond primitive operations (SPEC §6 metering, extended): counted
// per thread while it evaluates, and added to its interpreter's totals when the evaluation ends.
struct WorkCounters {
  uint64_t steps;         // instructions executed by the interpreter
  uint64_t applications;  // procedure applications (calls, tail calls, backpropagator calls)
  uint64_t objects;       // heap objects allocated
  uint64_t bytes;         // heap bytes requested
  // The same work done once per lambda: expansion, transforms, compilation (and the steps of
  // building a primitive's rule closure), kept apart so that the counts above measure running code.
  uint64_t analysis_steps, analysis_objects, analysis_bytes;
  uint64_t analysis_ns;  // the wall time of analysis (outermost scopes)
  uint64_t transformed_bindings;  // bindings emitted by the forward and reverse transforms
  uint64_t retained_peak;  // reachable_bytes of a backpropagator a program called, the most seen
  // The native tier: bodies compiled, their instructions (branches included) and the time taken.
  uint64_t native_bodies, native_instructions, native_ns;
  void add(const WorkCounters& o) {
    native_bodies += o.native_bodies;
    native_instructions += o.native_instructions;
    native_ns += o.native_ns;
    steps += o.steps;
    applications += o.applications;
    objects += o.objects;
    bytes += o.bytes;
    analysis_steps += o.analysis_steps;
    analysis_objects += o.analysis_objects;
    analysis_bytes += o.analysis_bytes;
    analysis_ns += o.analysis_ns;
    transformed_bindings += o.transformed_bindings;
    if (o.retained_peak > retained_peak) retained_peak = o.retained_peak;
  }
};
WorkCounters* work_address();  // this thread's `work`
// gc_alloc's fast path, for the native tier to do inline (heap.cpp): the address of this thread's
// pointer to its free lists (an array of heads, null until the first allocation), the list
// index for an object of `bytes` (-1: not from a list), and the largest head value that is not
// an object (an empty list, or a count).
void* free_lists_address();
int free_list_index(size_t bytes);
uintptr_t free_list_counter_max();
// For native code that takes a pointer-free object of g granules (1 or 2) as gc_alloc_atomic
// does: where, in the block at free_lists_address(), its batch of objects and their count lie.
int32_t atomic_batch_offset(size_t g);
int32_t atomic_count_offset(size_t g);
// GC stress (a debugging build: make gc-stress, i.e. -DVLAD_GC_STRESS): with VLAD_GC_STRESS=N
// (N > 0) in the environment, every Nth allocation through gc_alloc / gc_alloc_atomic on a thread
// first runs a full collection, analysis does not hold collections off, and native code takes
// its allocations through those functions rather than inline (each collection also drops this
// thread's free lists, so freed memory is soon reused). VLAD_GC_STRESS_THREAD=US adds a thread
// collecting every US microseconds. gc_stress_period() is 0 without the first, and in normal builds.
long gc_stress_period();
extern __thread WorkCounters work;  // (__thread: no initialisation check at each use)

// The bytes of the heap objects reachable from v (each counted once, at the size the collector
// gave it): what a backpropagator retains when its backward pass begins (the meter).
uint64_t reachable_bytes(Value v);

// While one of these is alive on this thread (outermost only), steps and allocation count as
// analysis, and no collection starts until it has allocated kAnalysisNoCollect bytes (heap.cpp).
// Keeps p alive until the outermost AnalysisScope on this thread ends (nothing outside one):
// for what an analysis holds only in memory the collector does not scan.
void keep_while_analysing(void* p);
class AnalysisScope {
 public:
  AnalysisScope();
  ~AnalysisScope();
  AnalysisScope(const AnalysisScope&) = delete;
  AnalysisScope& operator=(const AnalysisScope&) = delete;

 private:
  uint64_t steps_, objects_, bytes_, start_ns_ = 0;
  bool outer_;
};

inline Kind kind_of(Value v) { return v.as_obj()->kind; }
inline bool is(Value v, Kind k) { return v.is_obj() && v.as_obj()->kind == k; }
inline bool is_pair(Value v) { return is(v, Kind::Pair); }
inline Pair* as_pair(Value v) { return static_cast<Pair*>(v.as_obj()); }
inline Value car(Value v) { return as_pair(v)->car; }
inline Value cdr(Value v) { return as_pair(v)->cdr; }

Value cons(Value a, Value b);
Value make_string(const std::string& s);
std::string string_of(Value v);
Value make_closure(Lambda* lam, const Value* env, int n);
Value make_bundle(Value primal, Value tangent);
Value make_tagged(Kind k, Value v);
Value make_lazy_zero(Value src, int strip);
Value make_lazy_j(Value src, int n);
Value make_one_hot(Value src, uint32_t k, Value y);
Value make_hot_sum(Value a, Value b, uint32_t aux);

template <class T>
using gc_vector = std::vector<T, gc_allocator<T>>;

// Interned symbols for the reader and expander (not VLAD values).
const char* intern(const std::string& s);
const char* intern(const char* s);
const char* intern(const char* s, size_t n);

}  // namespace vlad
