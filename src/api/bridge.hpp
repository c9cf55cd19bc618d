// bridge.hpp — the narrow interface between the public API (api.cpp, which sees only vlad.hpp)
// and the interpreter (bridge.cpp, which sees only the internal headers).
// Both sides define a vlad::Value and a vlad::Error of their own, so no translation unit may see
// both; this header mentions neither: values cross as GC roots, errors as an ErrorInfo.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace vlad {
namespace detail {

struct Session;

// A GC root: a cell in uncollectable memory (so the collector scans it) holding one value's bits,
// shared by every copy of a public vlad::Value. Functions returning Root* hand the caller one
// reference; nullptr stands for '().
struct Root {
  std::atomic<long> refs;
  uint64_t bits;
};
void retain(Root* r);
void release(Root* r);

// An error on its way to the host, with everything the public vlad::Error carries.
struct FrameInfo {
  std::string name, file;
  int line, col;
};
struct ErrorInfo {
  std::string message, file, located, report;
  int line = 0, col = 0;
  std::vector<FrameInfo> trace;
  size_t omitted = 0;
};
// Throws the public vlad::Error (defined in api.cpp, called by bridge.cpp).
[[noreturn]] void raise(const ErrorInfo& e);

// Values.
Root* root_real(double x);
Root* root_boolean(bool b);
Root* root_string(const std::string& s);
Root* root_pair(const Root* a, const Root* b);
// The proper list of xs.
Root* root_reals(const std::vector<double>& xs);
// The proper list of items, or with `tuple` their tuple: (), x, (x . y), (x . (y . z)) ...
Root* root_list(const std::vector<const Root*>& items, bool tuple);
enum class Type { Null, Boolean, Real, Pair, String, Procedure, Other };
Type type_of(const Root* r);
// These raise (with a message naming `what`, e.g. "to_real") unless the value has the right type.
double real_of(const Root* r, const char* what);
bool boolean_of(const Root* r, const char* what);
std::string text_of(const Root* r, const char* what);
Root* car_of(const Root* r, const char* what);
Root* cdr_of(const Root* r, const char* what);
std::vector<double> reals_of(const Root* r, const char* what);  // a proper list of reals
std::vector<Root*> items_of(const Root* r, const char* what);   // a proper list
std::string write_of(const Root* r);
// Raises an error with this message (for misuse of the API detected on the host's side).
[[noreturn]] void fail(const std::string& message);

// Interpreters.
Session* open_session();
void close_session(Session* s);
// Runs a program text; `dir` is where includes are looked up. Returns the last expression's value.
Root* eval_text(Session* s, const std::string& text, const std::string& name, const std::string& dir);
Root* eval_file(Session* s, const std::string& path);
Root* read_global(Session* s, const std::string& name);
void write_global(Session* s, const std::string& name, const Root* v);
Root* call(Session* s, const Root* f, const Root* arg);
// ((OP f) arg) with OP taken from the prelude's namespace, so user redefinitions do not affect it.
Root* call_library(Session* s, const char* op, const Root* f, const Root* arg);
// Raises the error define_host would for this name, arity and function (given or not), if any:
// an invalid name, syntax, a builtin primitive's name, no function, an arity below 1.
void check_host(Session* s, const std::string& name, int arity, bool has_function);
// Registers a host primitive whose partials (if any) are already registered under `partials`.
void define_host(Session* s, const std::string& name, int arity,
                 std::function<double(const std::vector<double>&)> f, std::vector<std::string> partials);
uint64_t session_meter(Session* s);
void session_meter_reset(Session* s);
// The meter's counts: operations, steps, applications, objects, bytes, retained peak, analysis
// objects, analysis bytes, transformed bindings.
std::vector<uint64_t> session_meter_all(Session* s);
void session_measure_retained(Session* s, bool on);
void set_heap_limit_bytes(size_t bytes);
void session_set_depth_limit(Session* s, long calls);
long session_depth_limit(Session* s);
// The native tier: on or off, and (when runs > 0) its threshold.
void session_set_jit(Session* s, bool on, unsigned runs);
bool session_jit(Session* s);
bool jit_available();
size_t heap_limit_bytes();

}  // namespace detail
}  // namespace vlad
