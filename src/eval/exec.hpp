// exec.hpp — the state of one running body (eval.cpp), shared with the native tier (jit.cpp),
// whose code runs over the same frame and environment and calls back into it.
#pragma once
#include "code.hpp"

namespace vlad {

// How a body's run ends: with a value (r1), a pair (r1, r2), or a tail call (f, arg; ChainTail:
// the callee's backpropagator fills env[hole] of `chain`).
enum class Exit : uint8_t { Value, Pair, Tail, ChainTail };

struct Exec {
  Value* fr;
  Value* env;
  Value self;  // the closure whose body runs
  // What run() left: Value: r1; Pair: r1, r2; Tail: f, arg; ChainTail: f, arg and the closure
  // whose env[hole] the callee's backpropagator fills.
  Value r1, r2, f, arg;
  Closure* chain;
  int hole;
  Pos tail_pos;  // the call site of a tail call

  Value get(int r) const { return r >= 0 ? fr[r] : env[-r - 1]; }
  Value arg_of(const Instr* ip) const;
  void run_split(const Instr* ip);
  Value way_out_bp(const Instr* ip, Value v, Value bp);
  void store(const Instr* ip, Exit e, const char* shape_text);
  // Runs a body from instruction `start` (0, or 1 for a chain's rest): natively when it has
  // native code, else interpreted.
  Exit run(const Code* c, int start = 0);
  Exit interpret(const Code* c, int start);
  Exit run_native(const Code* c, int start);
  // One instruction, interpreted: kContinue, or how the body ends (an Exit).
  static constexpr int kContinue = -1;
  int step(const Instr* ip);
  Exit finish(const Code* c);
};

// ---- the native tier (jit.cpp) ----
// Native code returns an Exit, or kThrown when a runtime call raised an error, which is then
// rethrown by `run` (errors do not unwind through native frames).
constexpr int kThrown = 4;
// Compiles c (a lambda's body) to native code: sets c->native, or c->jit_failed.
void jit_compile(Code* c);
// Whether the tier is available on this machine (x86-64 with asmjit).
bool jit_supported();
// The runtime calls native code makes (eval.cpp): each runs one piece of the interpreter and
// returns Exec::kContinue, an Exit, or kThrown with the error kept for `run`.
extern "C" {
int vlad_jit_step(Exec* ex, const Instr* ip);
int vlad_jit_store(Exec* ex, const Instr* ip, int e);  // Exec::store of a branch's outcome
}

}  // namespace vlad
