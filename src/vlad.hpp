// vlad.hpp — the embedding API (SPEC §7): the one header a C++17 host includes, as <vlad/vlad.hpp>.
// Link with libvlad.a (`pkg-config --cflags --libs vlad`). Nothing else of the project is visible.
//
//   vlad::Interpreter vm;
//   vm.eval_string("(define (f x y) (* x (sin y)))");
//   vlad::Value g = vm.eval_string("((gradient f) 2 3)");     // (0.1411200080598672 . -1.9799849932008908)
//   double dx = vlad::to_real(vlad::car(g));
//   double y = vlad::to_real(vm.call(vm.global("f"), 2.0, 3.0));
//
// The public types live in the inline namespace vlad::embed, so that they are spelled vlad::Value,
// vlad::Error, ... in host code while staying distinct (for the linker and for exception matching)
// from the interpreter's internal types of the same names.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace vlad {

namespace detail {
struct Root;     // a GC root holding one value (defined by the implementation)
struct Session;  // an interpreter instance (defined by the implementation)
}  // namespace detail

inline namespace embed {

// A VLAD value held by the host. While any copy of it exists the value stays alive: each Value
// refers to a reference-counted GC root. Copying is cheap and does not copy the VLAD value (VLAD
// values are immutable anyway). A default-constructed Value is the empty list '().
// A Value may be inspected, copied and destroyed on any thread that uses the API, even after its
// interpreter is gone; it may be passed only to the interpreter that produced it (or to any, for
// data: reals, booleans, '(), pairs and strings).
class Value {
 public:
  // The empty list '().
  Value() noexcept : root_(nullptr) {}
  // A real.
  Value(double x);
  // A real, from any other arithmetic type except bool (so that `vm.call(f, 2)` works).
  template <class T, std::enable_if_t<std::is_arithmetic<T>::value && !std::is_same<T, bool>::value &&
                                          !std::is_same<T, double>::value,
                                      int> = 0>
  Value(T x) : Value(static_cast<double>(x)) {}
  // #t or #f (explicit, so that pointers do not silently become booleans).
  explicit Value(bool b);
  // No Value from a pointer: a string literal or a char* would otherwise become #t (by the
  // pointer-to-bool conversion), silently. A VLAD string is made with string_value.
  template <class T>
  Value(T*) = delete;
  Value(std::nullptr_t) = delete;
  // A proper list of reals, e.g. {1.0, 2.0} is (1 2).
  Value(const std::vector<double>& xs);
  // Another reference to the same value (a new reference on the same root).
  Value(const Value& other) noexcept;
  // Takes over other's reference; other becomes '().
  Value(Value&& other) noexcept : root_(other.root_) { other.root_ = nullptr; }
  // Refers to other's value, releasing the value held before.
  Value& operator=(const Value& other) noexcept;
  // Takes over other's reference, releasing the value held before.
  Value& operator=(Value&& other) noexcept;
  // Releases the reference; the value may be collected when no other reference remains.
  ~Value();

  // The root (implementation detail; null for '()).
  detail::Root* root() const noexcept { return root_; }
  // Wraps a root the caller owns one reference to (implementation detail).
  static Value adopt(detail::Root* r) noexcept {
    Value v;
    v.root_ = r;
    return v;
  }

 private:
  detail::Root* root_;
};

// One active call at the time of an error, most recent first.
struct Frame {
  std::string name;  // the procedure's name, or "lambda"
  std::string file;  // where it was called from ("" if unknown)
  int line = 0, col = 0;
};

// The exception every API function throws for an error in VLAD code or a misuse of a value:
// a syntax error, a run-time error, a type mismatch in a conversion such as to_real, or an
// exception thrown by a host primitive (whose message it carries). what() is the message alone.
// The interpreter stays usable after an Error.
class Error : public std::runtime_error {
 public:
  // Builds an error (the implementation fills every field).
  Error(const std::string& message_, std::string file_, int line_, int col_, std::vector<Frame> trace_,
        std::size_t frames_omitted_, std::string located_text, std::string report_text)
      : std::runtime_error(message_), file(std::move(file_)), line(line_), col(col_), trace(std::move(trace_)),
        frames_omitted(frames_omitted_), located_(std::move(located_text)), report_(std::move(report_text)) {}
  // The message, without location (same as what()).
  std::string message() const { return what(); }
  // Where the error was raised: the file (or "<string>" for eval_string), "" if unknown.
  std::string file;
  // The line and column (1-based) of the error, 0 if unknown.
  int line = 0, col = 0;
  // The active calls, most recent first (at most 20).
  std::vector<Frame> trace;
  // How many further active calls were not recorded in trace.
  std::size_t frames_omitted = 0;
  // "file:line:col: error: message", as the vlad program prints it.
  const std::string& located() const noexcept { return located_; }
  // located() followed by one "  in NAME at file:line:col" line per active call.
  const std::string& report() const noexcept { return report_; }

 private:
  std::string located_, report_;
};

// A C++ function of n reals (the argument vector has n elements) returning a real.
using RealFunction = std::function<double(const std::vector<double>&)>;

// A host function with (optionally) its partial derivatives, each itself a HostFunction so that
// derivatives of derivatives can be given for nested (second- and higher-order) AD:
//   partials[i] computes ∂f/∂x_i at the same arguments. Either no partials (the primitive then
//   works in ordinary code and raises an Error when differentiated) or one per argument.
struct HostFunction {
  // The function itself.
  RealFunction f;
  // Its partial derivatives, one per argument (or none).
  std::vector<HostFunction> partials;

  // A function without derivatives.
  HostFunction() = default;
  // A function with its partials (from any callable taking const std::vector<double>&).
  template <class F, std::enable_if_t<std::is_convertible<F, RealFunction>::value, int> = 0>
  HostFunction(F fn, std::vector<HostFunction> d = {}) : f(std::move(fn)), partials(std::move(d)) {}
};

// ---- building values (no interpreter needed) ----

// The real x.
Value real(double x);
// #t or #f.
Value boolean(bool b);
// The empty list '().
inline Value nil() { return Value(); }
// A VLAD string (for `display` and `error`).
Value string_value(const std::string& s);
// The pair (a . b).
Value cons(const Value& a, const Value& b);
// The proper list of the given values.
Value list_of(const std::vector<Value>& items);
// The tuple of the given values: () for none, the value itself for one, (a . (b . c)) for three
// (an improper chain, which is how VLAD passes several arguments: SPEC §2).
Value tuple_of(const std::vector<Value>& items);
}  // namespace embed
namespace detail {
// Whether every A makes a Value: a Value, a number, a bool or a std::vector<double> (not a
// pointer, not a string: see Value(T*)).
template <class... A>
constexpr bool values_of = (std::is_constructible<embed::Value, const A&>::value && ...);
}  // namespace detail
inline namespace embed {
// (list a b ...): each argument is a Value, a number, a bool or a std::vector<double>.
template <class... A, std::enable_if_t<detail::values_of<A...>, int> = 0>
Value list(const A&... a) {
  return list_of(std::vector<Value>{Value(a)...});
}
// (cons* a b ...), the tuple of the arguments (see tuple_of); the same arguments as list.
template <class... A, std::enable_if_t<detail::values_of<A...>, int> = 0>
Value tuple(const A&... a) {
  return tuple_of(std::vector<Value>{Value(a)...});
}

// ---- inspecting values (lazy zeros are looked through) ----

// True for a real.
bool is_real(const Value& v);
// True for #t or #f.
bool is_bool(const Value& v);
// True for '().
bool is_null(const Value& v);
// True for a pair.
bool is_pair(const Value& v);
// True for a string.
bool is_string(const Value& v);
// True for a primitive or a closure.
bool is_procedure(const Value& v);
// The real v; throws Error unless v is a real.
double to_real(const Value& v);
// The boolean v; throws Error unless v is #t or #f.
bool to_bool(const Value& v);
// The contents of a string; throws Error unless v is a string.
std::string to_std_string(const Value& v);
// The elements of a proper list of reals; throws Error otherwise.
std::vector<double> to_vector(const Value& v);
// The elements of a proper list; throws Error otherwise.
std::vector<Value> to_list(const Value& v);
// The first part of a pair; throws Error unless v is a pair.
Value car(const Value& v);
// The second part of a pair; throws Error unless v is a pair.
Value cdr(const Value& v);
// The printed (write) form of v, as the REPL shows it: "(1 . 2)", "#t", "(forward 1 (perturbation 1))".
std::string to_string(const Value& v);

// ---- interpreters ----

// An independent VLAD interpreter: its own global definitions (starting with the builtins and the
// prelude), primitives and meter. Several may live in one process and run concurrently on
// different threads; each must be used from one thread at a time. Evaluation runs on a large
// dedicated stack, so deep recursion in VLAD code does not depend on the host thread's stack.
class Interpreter {
 public:
  // A fresh interpreter (loads the prelude).
  Interpreter();
  // Destroys the interpreter. Values it produced may still be inspected and destroyed.
  ~Interpreter();
  // Not copyable (an interpreter owns its state); hold it by pointer to share or move it.
  Interpreter(const Interpreter&) = delete;
  // Not assignable, for the same reason.
  Interpreter& operator=(const Interpreter&) = delete;

  // Runs every form of a program text, as `vlad FILE` would but without printing top-level values
  // (output of `write`, `display` ... still goes to standard output). Definitions persist.
  // Returns the value of the last non-definition form, or '() if there is none.
  // `name` names the text in error locations; includes are looked up from the current directory.
  Value eval_string(const std::string& text, const std::string& name = "<string>");
  // Like eval_string, for the program in a file; includes are looked up from its directory.
  Value eval_file(const std::string& path);
  // The value of a top-level (user) definition; throws Error if it is unbound.
  Value global(const std::string& name) const;
  // Defines (or redefines) a top-level name, as (define name v) would.
  void define(const std::string& name, const Value& v);
  // Applies the procedure f to one argument (SPEC §2: every procedure takes exactly one).
  Value call(const Value& f, const Value& arg);
  // Applies f to the tuple of several arguments: call(f, a, b) is (f a b). call(f) is (f).
  template <class... A, std::enable_if_t<detail::values_of<A...>, int> = 0>
  Value call(const Value& f, const A&... args) {
    return call(f, vlad::embed::tuple(args...));
  }
  // (tuple a b ...): the same as vlad::tuple, for symmetry with call.
  template <class... A, std::enable_if_t<detail::values_of<A...>, int> = 0>
  Value tuple(const A&... a) const {
    return vlad::embed::tuple(a...);
  }
  // (list a b ...): the same as vlad::list.
  template <class... A, std::enable_if_t<detail::values_of<A...>, int> = 0>
  Value list(const A&... a) const {
    return vlad::embed::list(a...);
  }

  // Registers a primitive NAME of `arity` reals (arity 1 takes a real; more take a tuple, as in
  // (NAME x y z)) computed by fn.f. If fn.partials is not empty (it must then have `arity`
  // entries), each partial i is itself registered as the primitive "NAME/d<i>" (recursively:
  // "NAME/d0/d1" ...), and NAME gets forward and reverse versions built from them exactly as a
  // builtin's, so it works under j*, *j and the AD library at any nesting depth — as long as the
  // partials needed at that depth have been given. An exception thrown by a function becomes an
  // Error "NAME: <its message>" (an Error out of an evaluation the function started passes through
  // as it is). The name must be a plain symbol, not syntax nor a builtin primitive's; it is defined
  // in the user's namespace, replacing any earlier definition there (the library keeps its own
  // definitions; the rules refer to the primitive and its partials by aliases). Everything is
  // checked before anything is registered: a call that throws changes nothing.
  void define_primitive(const std::string& name, int arity, const HostFunction& fn);

  // ((gradient f) x) for f : R -> R.
  double gradient(const Value& f, double x);
  // ((gradient f) x) for f : R^n -> R with x a list of reals.
  std::vector<double> gradient(const Value& f, const std::vector<double>& x);
  // The same for a braced list, so that gradient(f, {3.0}) is the gradient at the list (3), not
  // the scalar overload's at 3.
  std::vector<double> gradient(const Value& f, std::initializer_list<double> x);
  // ((derivative f) x) (forward mode) for f : R -> anything; the result has the shape of f's value.
  Value derivative(const Value& f, double x);
  // ((hessian-vector-product f) x v): H(x)·v for f : R^n -> R (forward over reverse).
  std::vector<double> hessian_vector_product(const Value& f, const std::vector<double>& x,
                                             const std::vector<double>& v);

  // The number of primitive arithmetic operations performed since creation or meter_reset()
  // (SPEC §6, metering).
  std::uint64_t meter_total() const;
  // Everything the meter counts since creation or meter_reset(): arithmetic, and the work around
  // it. `retained_peak` is measured only after measure_retained(true) (it walks each
  // backpropagator a program calls).
  struct Meter {
    std::uint64_t operations = 0;        // primitive arithmetic operations (meter_total())
    std::uint64_t steps = 0;             // instructions the interpreter executed
    std::uint64_t applications = 0;      // procedure applications
    std::uint64_t objects = 0;           // heap objects allocated by running code
    std::uint64_t bytes = 0;             // heap bytes allocated by running code
    std::uint64_t retained_peak = 0;     // most bytes a backpropagator held when a program called it
    std::uint64_t analysis_objects = 0;  // heap objects of expansion, transforms and compilation
    std::uint64_t analysis_bytes = 0;    // their bytes
    std::uint64_t transformed_bindings = 0;  // bindings the forward and reverse transforms emitted
    std::uint64_t native_bodies = 0;         // bodies the native tier compiled
    std::uint64_t analysis_ns = 0;           // the wall time analysis took, in nanoseconds
  };
  Meter meter() const;
  // Sets every count to zero.
  void meter_reset();
  // Whether meter() measures what backpropagators retain (off by default: it costs a walk).
  void measure_retained(bool on);
  // The most the collected heap may grow to, for the whole process (shared by every
  // interpreter; default 3/4 of physical memory). Past it an evaluation raises Error
  // "heap limit exceeded" and the interpreter stays usable.
  // (0: no limit.)
  static void set_heap_limit(std::size_t bytes);
  static std::size_t heap_limit();
  // The most nested non-tail calls an evaluation may make (default 4,000,000, as `vlad
  // --depth-limit`; at least 1), counting those of the evaluations a host function starts from
  // inside one: past it, Error "recursion depth limit exceeded" and the interpreter stays usable.
  void set_depth_limit(long calls);
  long depth_limit() const;
  // The native tier: hot bodies compiled to machine code (on by default where supported;
  // the environment variable VLAD_JIT=off turns the default off). Results are the same either
  // way; set_jit(true) where it is not supported leaves it off.
  void set_jit(bool on);
  bool jit() const;
  static bool jit_supported();
  // How many runs of a body before it is compiled (default 30; at least 1), counted within a
  // window of 65,536 steps and halved for each window gone by: code run rarely stays interpreted.
  void set_jit_threshold(unsigned runs);

 private:
  detail::Session* impl_;
};

}  // namespace embed
}  // namespace vlad
