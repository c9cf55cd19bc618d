// exec.hpp — the state of one running body (eval.cpp), shared with the native tier (jit.cpp),
// whose code runs over the same frame and environment and calls back into it.
#pragma once
#include "code.hpp"

namespace vlad {

// How a body's run ends: with a value (r1), a pair (r1, r2), or a tail call (f, arg; ChainTail:
// the callee's backpropagator fills env[hole] of `chain`); or, only when its runner asked for it
// (want3) and it is a backpropagator whose value is (cons f̄ (cons a b)) (Code::triple_result),
// with the three parts (r1, r2, r3): Triple. (5: kThrown below is 4.)
enum class Exit : uint8_t { Value, Pair, Tail, ChainTail, Triple = 5 };

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
  // Links a native self loop made by chain calls (jit.cpp) before the body's exit: its first
  // and last backpropagators and the last one's hole, which whoever ran the body links in
  // before its exit, as it links a ChainTail's `chain` (null: none).
  Closure* pend_first = nullptr;
  Closure* pend_last = nullptr;
  int pend_hole = 0;
  // Set by whoever runs a raw backpropagator's body and takes its x̄ apart at once (run_raw, a
  // split3 BackCall's native code): a body with Code::triple_result then ends with Exit::Triple,
  // x̄'s parts in r2 and r3, and makes no pair for x̄.
  bool want3 = false;
  Value r3 = Value();
  // A tail call's argument left in two parts by native code (its call an AppPair): the pair
  // (arg . arg2), made only by whoever needs it whole (tail_arg); unbound: `arg` is whole.
  Value arg2 = Value::unbound();
  Value tail_arg() const;

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
  // The instructions, one each (step's cases).
  int op_const(const Instr* ip);
  int op_copy(const Instr* ip);
  int op_sens(const Instr* ip);
  int op_global(const Instr* ip);
  int op_app(const Instr* ip);
  int op_lambda(const Instr* ip);
  int op_cons(const Instr* ip);
  int op_car_cdr(const Instr* ip);
  int op_car_cdr_other(const Instr* ip, Value v);  // (not a pair)
  Value sens_part(Value v, int path, const Instr* ip);  // (op_sens with a path)
  int op_check(const Instr* ip);
  int op_if(const Instr* ip);
  int op_backcall(const Instr* ip);
  int op_envref(const Instr* ip);
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
// Every evaluation runs between these two, on the thread that runs it (run_on_big_stack): the
// machine code of bodies the collector found dead is released when the last running evaluation
// ends, or between two top-level forms of the only one running (jit.cpp).
void jit_evaluation_begins();
void jit_evaluation_ends();
void jit_between_forms();  // (run_text: at the top level of an evaluation)
// The bytes of machine code held now, and how many bodies' code has been released.
size_t jit_code_bytes();
uint64_t jit_released_bodies();
// The stub through which C++ runs a body's native code (Exec::run_native): it keeps the C++
// caller's registers that native bodies share without saving them (the WorkCounters and meter),
// sets them and calls the body. Made (jit.cpp) before any body is compiled.
using JitEntry = int (*)(Exec*, int start, WorkCounters* w, uint64_t* meter, void* body);
extern JitEntry jit_entry;
// Keeps the error being handled for run_native (a runtime call's catch clause calls it).
void jit_keep_error();
// The runtime calls native code makes (eval.cpp): each runs one piece of the interpreter and
// returns Exec::kContinue, an Exit, or kThrown with the error kept for `run`.
extern "C" {
int vlad_jit_step(Exec* ex, const Instr* ip);
// The same for one kind of instruction (no dispatch): Exec::op_sens ... op_global.
int vlad_jit_sens(Exec* ex, const Instr* ip);
int vlad_jit_app(Exec* ex, const Instr* ip);
int vlad_jit_lambda(Exec* ex, const Instr* ip);
int vlad_jit_cons(Exec* ex, const Instr* ip);
int vlad_jit_car_cdr(Exec* ex, const Instr* ip);
int vlad_jit_check(Exec* ex, const Instr* ip);
int vlad_jit_backcall(Exec* ex, const Instr* ip);
int vlad_jit_envref(Exec* ex, const Instr* ip);
int vlad_jit_global(Exec* ex, const Instr* ip);
int vlad_jit_store(Exec* ex, const Instr* ip, int e);  // Exec::store of a branch's outcome
// A tail call of the running body's own lambda (ex->self is the callee), about to loop in native
// code: what apply_core's loop does first (Ctrl-C, the call record).
int vlad_jit_self_tail(Exec* ex, const Instr* ip);
// ex->arg = (cons b b2) of an AppPair instruction.
int vlad_jit_arg_pair(Exec* ex, const Instr* ip);
// A direct call of a closure f whose lambda has native code (Lambda::direct), made by native code
// as apply_core would make it: vlad_jit_enter enters the callee's frame (the depth limit, the
// stack, the call record, Ctrl-C): 0, or kThrown with the frame not entered. Native code then
// runs the callee over a frame of its own and, for a value (or, when ip splits, a pair), stores
// it and leaves the frame itself (eval_depth, at a fixed distance from `work`); any other outcome
// goes to vlad_jit_return, which does what apply_core and op_app do with it and leaves the frame.
int vlad_jit_enter(uint64_t f, const Instr* ip);
int vlad_jit_return(Exec* ex, const Instr* ip, Exec* callee, int e);
// The same after native code went on with a chain tail call in the frame (its backpropagator
// `chain`, its hole `hole`, made by the first callee): the chain linked first.
int vlad_jit_return_chain(Exec* ex, const Instr* ip, Exec* callee, int e, uint64_t chain, int hole);
// After a raw backpropagator's body entered by native code for a split BackCall (its frame left):
// its halves r1, r2 (exit e Pair) or its value r1, stored in ip's slots.
int vlad_jit_back_done(Exec* ex, const Instr* ip, int e, uint64_t r1, uint64_t r2);
// A split BackCall (not split3) of a closure whose lambda has a native body (Lambda::native_back,
// fn): back_call's case for it on ȳ — 1 with (f̄ . x̄) in out[0], out[1]; 0 when ȳ is a zero
// (back_call's skip) or fn declines (the instruction is then run as before); kThrown on an error.
int vlad_jit_back_native(bool (*fn)(Closure*, Value, Value*), Closure* cl, uint64_t y, Value* out);
// The same for a split3 BackCall (ip) of such a closure cl, as back_call's three-part case gives
// it (run_raw: the callee's call record unless ip is a chain's link): (f̄, car x̄, cdr x̄) in
// out[0..2].
int vlad_jit_back_native3(Exec* ex, const Instr* ip, Closure* cl, Value* out);
// The callee's exit was a tail call (callee->f, callee->arg) to a closure with native code: the
// frame goes on with it (1: Ctrl-C checked, the call record updated as apply_core's loop does),
// or 0 for vlad_jit_return to finish, or kThrown.
int vlad_jit_tail(Exec* callee);
// A call, not in tail position, of the primitive slot ip->a holds (native code checked which):
// op_app's paths for a primitive without the rest of its dispatch.
int vlad_jit_prim(Exec* ex, const Instr* ip);
int vlad_jit_prim1(Exec* ex, const Instr* ip);  // (a primitive of one argument, not split)
// A tail call of a primitive, made in the body's own frame as apply_core's loop makes it: the
// primitive's value into the call's slot (the body's value).
int vlad_jit_tail_prim(Exec* ex, const Instr* ip);
// (cons a b) for an argument, or 0 with the error kept (the heap limit).
uint64_t vlad_jit_pair(uint64_t a, uint64_t b);
}
// The distance from `work` to `eval_depth` (both thread-local in one module: the same in every
// thread), which native code decrements when a direct call returns.
ptrdiff_t depth_offset_from_work();
// Where vlad_jit_enter's fast path finds what it reads, for native code to do it inline: the
// thread's variables as offsets from its WorkCounters (the same in every thread), the current
// interpreter's fields as offsets into it, a call record's size and the offset of its position.
struct EnterLayout {
  bool ok = false;  // every offset fits 32 bits
  int32_t current, stack_limit, records, capacity;  // from `work`
  int32_t depth_limit, interrupt;                     // in Interp
  int32_t record_bytes, record_pos;
};
EnterLayout enter_layout();

}  // namespace vlad
