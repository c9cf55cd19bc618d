// prims.hpp — the primitive table: one row per primitive, with its implementation and the VLAD
// source of its forward and reverse versions (its derivative rules), from which AD builds them.
#pragma once
#include <atomic>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "../values/value.hpp"

namespace vlad {

struct Interp;

// Whether what the program printed on standard output ends inside a line (display "x = "
// without a newline): an error report then starts a line of its own (repl/main.cpp).
extern std::atomic<bool> stdout_mid_line;

// Standard input, through one buffer: read-real's numerals and the lines of a REPL reading a pipe
// come from the same stream (two buffers over fd 0 each took what the other was to read).
bool stdin_line(std::string& line);   // the next line, without its newline; false at the end
bool stdin_token(std::string& token);  // the next whitespace-separated word; false at the end
std::string stdin_rest();              // all that is left

// What a primitive is, for metering and for how its derivative rules are built.
enum class PrimClass : uint8_t {
  Arith,      // real arithmetic; metered; rules from partial derivatives
  Compare,    // real comparison; metered; tag-transparent; zero sensitivity
  Predicate,  // type predicate; tag-transparent; zero sensitivity
  Structural, // car, cdr, if-procedure, real, I/O: act on transformed values directly
  AD,         // zero, plus, perturb, ... : rules written out in the prelude
  Host,       // registered by an embedding host
};

struct Prim : Obj {
  const char* name;
  int id;
  int arity;  // 1: takes its argument; 2: takes a pair
  PrimClass cls;
  uint8_t native_op = 0;  // what its native rules compute (native.cpp)
  uint64_t shared_bp_bits = 0;  // + and -: its nodes' one backpropagator, once made (shared_bp_view)
  Value (*fn1)(Prim*, Value) = nullptr;
  Value (*fn2)(Prim*, Value, Value) = nullptr;
  // Derivative rules, VLAD source of a one-argument lambda (see prelude.cpp for their shapes).
  const char* fwd_rule = nullptr;
  const char* rev_rule = nullptr;
  Value fwd;  // the forward version, built on first use (a closure of a rule lambda)
  Value rev;  // the reverse version
  // Host primitives (embedding): the function and its partial derivatives.
  struct Host* host = nullptr;
};

// A host primitive of `arity` reals (arity 1 takes a real, more take a tuple). Its partial
// derivatives are themselves primitives, named in `partials` (empty: not differentiable), so the
// rules can call them and AD can nest through them as through a builtin's.
struct Host {
  std::function<double(const std::vector<double>&)> f;
  int arity = 1;
  std::vector<std::string> partials;
  // The interpreter it was registered in: its rules name the partials there, so neither calling
  // it nor differentiating it means anything in another (host_prim_check).
  Interp* owner = nullptr;
};

// Raises an Error unless host primitive p (p->host set) belongs to this thread's interpreter.
void host_prim_check(Prim* p);

// An error that left an evaluation a host function had started (host -> VLAD -> host ...): the
// embedding API keeps it here, on this thread, before it reaches the host as the API's own
// error, so that when that error leaves the host function the primitive rethrows the original
// as it is (call_host) rather than one "NAME: <message>" per level of host calls, each copying
// the whole message (an error deep in such a recursion took quadratic time to come back).
struct NestedError {
  std::exception_ptr error;  // the interpreter's Error, or null
  std::string message;       // its what(), which the API's error carries
};
extern thread_local NestedError nested_error;

// Whether a and b are strings of the same characters (equal? of strings: %string=?, and the
// reverse transform's native comparison).
bool string_equal(Value a, Value b);

// Applies a primitive to its argument (checking it is a pair when binary).
Value apply_prim(Prim* p, Value arg);

// The builtin table, instantiated per interpreter.
// (the collector's objects: the table keeps them alive until the interpreter's takes over)
std::vector<Prim*, traceable_allocator<Prim*>> make_builtin_prims();
// A primitive calling host->f (which it owns); its rules call the primitives host->partials,
// which must be registered under those names too. `rule_names` are what its rules call them:
// host_alias(d) for a host primitive d, d itself for a builtin.
Prim* make_host_prim(const std::string& name, Host* host, const std::vector<std::string>& rule_names);
// The name of host primitive NAME in the prelude's namespace, where its rules (and its partials'
// rules) refer to it: not NAME, which would shadow a library function of that name, and would
// be captured by the rules' own variables (x, p, b, ...) if NAME were one of theirs.
std::string host_alias(const std::string& name);

// Metering: primitive operation counts of the current thread's interpreter.
void meter_count(Prim* p);

// Printing.
std::string write_string(Value v);
// The same, at most `limit` characters (then " ..."), the work bounded too: for messages.
std::string write_brief(Value v, size_t limit = 240);
std::string display_string(Value v);
std::string format_real(double d);

}  // namespace vlad
