// error.hpp — vlad::Error, the one exception type: a message, a source position and a call trace.
#pragma once
#include <stdexcept>
#include <string>
#include <vector>
#include "value.hpp"

namespace vlad {

struct TraceEntry {
  std::string name;
  Pos pos;
  long repeats = 1;  // the same call this many times in a row (a recursion)
};

// The depth of nested calls on this thread's evaluation (eval.cpp): an Error remembers where
// it was raised, and the call trace is read from the call records down from there.
extern __thread long eval_depth;

struct Error : std::runtime_error {
  Pos pos;
  std::vector<TraceEntry> trace;
  size_t trace_dropped = 0;
  long depth = 0;            // eval_depth when raised
  bool traced = false;       // trace already attached
  bool interrupt = false;    // an interrupt (Ctrl-C): it stops the evaluation, never caught on the way
  Error(const std::string& msg, Pos p = Pos()) : std::runtime_error(msg), pos(p), depth(eval_depth) {}
  // "file:line:col: error: message"
  std::string located() const;
  // located() plus the "  in NAME at file:line:col" lines.
  std::string report() const;
};

std::string pos_string(Pos p);

// The error of an allocation past the heap limit (heap_exhausted throws it); memory_error(), that
// of a std::bad_alloc: the same near the limit, else "out of memory". After either, call
// collect_after_heap_limit() before evaluating anything more: it collects the failed evaluation's
// garbage (once it is unreachable) when the limit was reached.
Error heap_limit_error();
// How the user of this thread's evaluation raises the heap limit, which heap_limit_error names:
// the program's option (kHeapLimitOption, the default) or, for an evaluation the embedding API
// started, its setter. Carried over to the thread that runs an evaluation (run_on_big_stack).
extern const char* const kHeapLimitOption;
extern __thread const char* heap_limit_knob;
Error memory_error();
void collect_after_heap_limit();

}  // namespace vlad
