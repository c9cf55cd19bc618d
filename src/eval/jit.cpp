// jit.cpp — the native tier: a lambda's body, once hot, compiled to x86-64 machine code with
// asmjit (docs/native-tier.md says why asmjit).
//
// The code is a template over the instruction stream (code.hpp). It runs over the interpreter's
// own frame and environment (exec.hpp), so it needs no state of its own: each instruction is
// either emitted inline — its common case, behind a guard (a value is a real, a pair; a callee
// is the primitive seen when compiling) — or, and on any failed guard, run by the interpreter's
// own code for that one instruction (Exec::step), after which native code carries on. Branches
// are compiled inline. The interpreter thus stays the reference semantics: native code only
// skips its dispatch and does the arithmetic of reals in registers.
//
// Runtime calls never let an error unwind through native frames: they catch it and return
// kThrown, which native code passes up to Exec::run_native, which rethrows it.
//
// Counts are the interpreter's: steps are added per block as it is entered, applications and
// the primitive meter as the interpreter's paths add them.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstddef>
#include <functional>
#include <mutex>
#include <string>
#include <unistd.h>
#include <vector>

#include "../ad/ad.hpp"
#include "exec.hpp"
#include "interp.hpp"

#if defined(__x86_64__) && defined(VLAD_HAVE_ASMJIT)
#include <asmjit/x86.h>
#define VLAD_JIT_X64 1
#endif

namespace vlad {

#ifndef VLAD_JIT_X64

bool jit_supported() { return false; }
void jit_compile(Code* c) { c->jit_failed = true; }
JitEntry jit_entry = nullptr;  // (no code is native)
void jit_evaluation_begins() {}
void jit_evaluation_ends() {}
void jit_between_forms() {}
size_t jit_code_bytes() { return 0; }
uint64_t jit_released_bodies() { return 0; }

#else

bool jit_supported() { return true; }

namespace {

using namespace asmjit;
namespace xr = asmjit::x86;

// Registers that live across the whole body (callee-saved).
const xr::Gp kEx = xr::rbx;     // Exec*
const xr::Gp kFr = xr::r12;     // the frame
const xr::Gp kEnv = xr::r13;    // the closure's environment
const xr::Gp kWork = xr::r14;   // WorkCounters* of this thread
const xr::Gp kMeter = xr::r15;  // the interpreter's meter: a count per primitive id

constexpr uint64_t kOffset = Value::kDoubleOffset;

// Field offsets of objects with a base (offsetof is for standard-layout types only).
template <class T, class F>
int32_t field_offset(const T& probe, const F& field) {
  return (int32_t)((const char*)&field - (const char*)&probe);
}
const Pair pair_probe{};
const int32_t pair_car = field_offset(pair_probe, pair_probe.car), pair_cdr = field_offset(pair_probe, pair_probe.cdr);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winvalid-offsetof"
const int32_t lambda_split2 = (int32_t)offsetof(Lambda, native_split2), lambda_prim = (int32_t)offsetof(Lambda, native_prim);
const int32_t binding_cache_in = (int32_t)offsetof(Binding, cache_in), binding_cache_out = (int32_t)offsetof(Binding, cache_out);
const int32_t lambda_raw_direct = (int32_t)offsetof(Lambda, raw_direct), lambda_raw_chain = (int32_t)offsetof(Lambda, raw_chain);
const int32_t lambda_raw_variant = (int32_t)offsetof(Lambda, raw_variant);
const int32_t lambda_native_back = (int32_t)offsetof(Lambda, native_back);
const int32_t lambda_structural = (int32_t)offsetof(Lambda, structural);
const int32_t lambda_direct = (int32_t)offsetof(Lambda, direct), lambda_split1 = (int32_t)offsetof(Lambda, native_split1);
const int32_t lambda_native2 = (int32_t)offsetof(Lambda, native2), lambda_native1 = (int32_t)offsetof(Lambda, native1);
const int32_t bundle_primal = (int32_t)offsetof(Bundle, primal), bundle_tangent = (int32_t)offsetof(Bundle, tangent);
const int32_t prim_arity = (int32_t)offsetof(Prim, arity), prim_cls = (int32_t)offsetof(Prim, cls),
              prim_fn2 = (int32_t)offsetof(Prim, fn2);
const int32_t exec_tail_pos = (int32_t)offsetof(Exec, tail_pos);
const int32_t code_entry = (int32_t)offsetof(Code, entries);
const int32_t code_native = (int32_t)offsetof(Code, native), code_frame_bytes = (int32_t)offsetof(Code, frame_bytes),
              code_arg_x = (int32_t)offsetof(Code, arg_x), code_arg_x2 = (int32_t)offsetof(Code, arg_x2),
              code_arg_x3 = (int32_t)offsetof(Code, arg_x3), code_arg_x4 = (int32_t)offsetof(Code, arg_x4);
const int32_t exec_fr = (int32_t)offsetof(Exec, fr), exec_env = (int32_t)offsetof(Exec, env),
              exec_self = (int32_t)offsetof(Exec, self), exec_r1 = (int32_t)offsetof(Exec, r1),
              exec_r2 = (int32_t)offsetof(Exec, r2), exec_pend_first = (int32_t)offsetof(Exec, pend_first),
              exec_pend_last = (int32_t)offsetof(Exec, pend_last), exec_pend_hole = (int32_t)offsetof(Exec, pend_hole),
              exec_f = (int32_t)offsetof(Exec, f), exec_arg = (int32_t)offsetof(Exec, arg),
              exec_chain = (int32_t)offsetof(Exec, chain), exec_hole = (int32_t)offsetof(Exec, hole),
              exec_want3 = (int32_t)offsetof(Exec, want3), exec_r3 = (int32_t)offsetof(Exec, r3),
              exec_arg2 = (int32_t)offsetof(Exec, arg2);
#pragma GCC diagnostic pop
// A direct call's callee Exec and then its frame, below the caller's native frame.
constexpr int32_t kExecBytes = (int32_t)((sizeof(Exec) + 15) & ~size_t(15));
// rsp - rbp in a body (its prologue pushes rbp, three registers and 8 bytes of padding).
constexpr int32_t kFrameBytes = 32;
const RevNode node_probe{};
const int32_t node_v = field_offset(node_probe, node_probe.v), node_x1 = field_offset(node_probe, node_probe.x1),
              node_x2 = field_offset(node_probe, node_probe.x2);
const Tagged tagged_probe{};
const int32_t tagged_v = field_offset(tagged_probe, tagged_probe.v);
const Closure closure_probe{};
const int32_t closure_lambda = field_offset(closure_probe, closure_probe.lambda),
              closure_env = field_offset(closure_probe, closure_probe.env);
constexpr uint64_t kCanonicalNaN = 0x7ff8000000000000ull;

enum class Inline : uint8_t {
  None, Add, Sub, Mul, Div, Eq, Lt, Gt, Le, Ge, Call2, Call1, NullP, PairP, RealP, Car, Cdr, Plus, RZero, StarJ, StarJInv,
  ZeroSens2,
  // the tag primitives of forward and reverse code: zero of a real, primal and tangent of a bundle,
  // tags made and taken off (tags.cpp: zero_of, forward_part, perturb, unperturb, ...)
  Zero, Primal, Tangent, Perturb, Unperturb, Sensitize, Unsensitize
};

// + - * / as one instruction each (Add ... Div), or None.
Inline arith_form(Prim* p) {
  if (p->cls != PrimClass::Arith || p->arity != 2) return Inline::None;
  const char* n = p->name;
  return n == intern("+") ? Inline::Add : n == intern("-") ? Inline::Sub : n == intern("*") ? Inline::Mul
       : n == intern("/") ? Inline::Div : Inline::None;
}

// Which inline form a primitive gets, if any.
Inline inline_form(Prim* p, bool pair_arg) {
  if (pair_arg) {
    if (p->arity != 2 || !p->fn2) return Inline::None;
    const char* n = p->name;
    if (p->cls == PrimClass::Arith) {
      Inline f = arith_form(p);
      return f != Inline::None ? f : Inline::Call2;
    }
    if (p->cls == PrimClass::Compare) {
      if (n == intern("=")) return Inline::Eq;
      if (n == intern("<")) return Inline::Lt;
      if (n == intern(">")) return Inline::Gt;
      if (n == intern("<=")) return Inline::Le;
      if (n == intern(">=")) return Inline::Ge;
    }
    if (p->cls == PrimClass::AD && n == intern("plus")) return Inline::Plus;
    if (p == current->p_zero_sens2) return Inline::ZeroSens2;
    return Inline::None;
  }
  if (p->arity != 1 || !p->fn1) return Inline::None;
  if (p->cls == PrimClass::Arith || p->cls == PrimClass::Compare) return Inline::Call1;
  if (p->name == intern("null?")) return Inline::NullP;
  if (p->name == intern("pair?")) return Inline::PairP;
  if (p->name == intern("real?")) return Inline::RealP;
  if (p->cls == PrimClass::Structural && p->name == intern("car")) return Inline::Car;
  if (p->cls == PrimClass::Structural && p->name == intern("cdr")) return Inline::Cdr;
  if (p == current->p_rzero) return Inline::RZero;
  if (p == current->p_star_j) return Inline::StarJ;
  if (p == current->p_star_j_inverse) return Inline::StarJInv;
  if (p == current->p_zero) return Inline::Zero;
  if (p == current->p_sensitize) return Inline::Sensitize;
  if (p == current->p_unsensitize) return Inline::Unsensitize;
  if (p->cls == PrimClass::AD) {
    if (p->name == intern("primal")) return Inline::Primal;
    if (p->name == intern("tangent")) return Inline::Tangent;
    if (p->name == intern("perturb")) return Inline::Perturb;
    if (p->name == intern("unperturb")) return Inline::Unperturb;
  }
  return Inline::None;
}

// gc_alloc_atomic's slow path: the object, or 0 with the error kept (the heap limit).
extern "C" uint64_t vlad_jit_alloc_atomic(size_t bytes) {
  try {
    return (uint64_t)gc_alloc_atomic(bytes);
  } catch (...) {
    jit_keep_error();
    return 0;
  }
}

// The constant leaf of the small whole number i (small_leaf), made: its bits, or 0 with the error
// kept (the heap limit).
extern "C" uint64_t vlad_jit_small_leaf(int64_t i) {
  try {
    return small_leaf((int)i).bits;
  } catch (...) {
    jit_keep_error();
    return 0;
  }
}

// gc_alloc's, the same.
extern "C" uint64_t vlad_jit_alloc(size_t bytes) {
  try {
    return (uint64_t)gc_alloc(bytes);
  } catch (...) {
    jit_keep_error();
    return 0;
  }
}

// A callee's native forward phase (Lambda::native_split1/2) into out: 1, 0 when it declined (the
// interpreter then runs the call), or kThrown with the error kept.
// (An error without a position gets the call's, as op_app gives it.)
extern "C" int vlad_jit_split2(bool (*fn)(Closure*, Value, Value, Value*), Closure* cl, uint64_t a, uint64_t b, Value* out,
                               const Instr* ip) {
  try {
    return fn(cl, Value(a, 0), Value(b, 0), out) ? 1 : 0;
  } catch (Error& e) {
    if (!e.pos.file) e.pos = ip->site();  // (ip may be a chain call: site(), eval.cpp native_split)
    jit_keep_error();
    return kThrown;
  } catch (...) {
    jit_keep_error();
    return kThrown;
  }
}
// Whether the chain from backpropagator c (a closure whose lambda starts one, Lambda::raw_chain)
// ends within 16 links at one that starts none and is not left to run_raw: native code then
// enters c at its first instruction, the recursion short (emit_back_raw).
extern "C" int vlad_jit_short_chain(Closure* c) {
  for (int n = 16; n > 0; n--) {
    Value hole = c->env[c->lambda->raw_chain->chain_hole];
    if (!is(hole, Kind::Closure)) return 1;  // a view, (), a primitive: the end
    c = static_cast<Closure*>(hole.as_obj());
    if (!c->lambda->raw_chain) return 1;
  }
  return 0;
}

// A callee's native implementation of two arguments (Lambda::native2: a primitive's forward rule
// at the first level, say): its value, Value::kUnbound when it declined, 0 when it threw (the
// error kept).
extern "C" uint64_t vlad_jit_native2(Value (*fn)(Closure*, Value, Value), Closure* cl, uint64_t a, uint64_t b,
                                     const Instr* ip) {
  try {
    return fn(cl, Value(a, 0), Value(b, 0)).bits;
  } catch (Error& e) {  // (the call's position, as op_app gives it)
    if (!e.pos.file) e.pos = ip->site();  // (ip may be a chain call: site(), eval.cpp native_split)
    jit_keep_error();
    return 0;
  } catch (...) {
    jit_keep_error();
    return 0;
  }
}
// The same for a native implementation of one argument (Lambda::native1).
extern "C" uint64_t vlad_jit_native1(Value (*fn)(Closure*, Value), Closure* cl, uint64_t a) {
  try {
    return fn(cl, Value(a, 0)).bits;
  } catch (...) {
    jit_keep_error();
    return 0;
  }
}
extern "C" int vlad_jit_split1(bool (*fn)(Closure*, Value, Value*), Closure* cl, uint64_t a, Value* out, const Instr* ip) {
  try {
    return fn(cl, Value(a, 0), out) ? 1 : 0;
  } catch (Error& e) {
    if (!e.pos.file) e.pos = ip->site();  // (ip may be a chain call: site(), eval.cpp native_split)
    jit_keep_error();
    return kThrown;
  } catch (...) {
    jit_keep_error();
    return kThrown;
  }
}

// The shared stub of plus (Emitter::emit_plus_body): r10 ⊕ r11 in rax, or 0 (the primitive's
// call then). Made once, when a body first needs it (under jit_mutex); no calls, no frame.
// Null if it could not be made.
const void* plus_stub(int32_t free_lists_offset);

// The shared stubs of car and cdr of a view (Emitter::j_part_of_view): rcx = the value (a view)
// gives r9 = the part, or 0 when it is not (*j P) of a pair P. Null if they could not be made.
const void* j_part_stub(bool cdr);
const void* sens_zero_stub();
const void* zero_view_stub();

struct Emitter {
  xr::Assembler& a;
  Label ret;                                // returns eax
  std::vector<const Instr*> scope;          // the instructions before this one, branches' parents too
  const Code* top;
  std::vector<Label> top_labels;            // a label per instruction of the lambda's body
  uint64_t instructions = 0;
  // Values whose addresses the code compares with (Code::pins): gathered here while compiling,
  // when the binding caching each still holds it (in memory the collector scans, as every
  // container of values).
  gc_vector<Value> pins;

  explicit Emitter(xr::Assembler& as) : a(as) {}

  // Code that runs only when a guard fails (the interpreter's step, the collector's allocation)
  // is placed in a section of its own after the body, so the path taken is dense: a body that is
  // mostly runtime calls would otherwise bring 3–5 times as many bytes into the instruction
  // cache as it runs. `cold(f)` emits f there (inline when there is no such section, or when
  // already in it); f ends by jumping back.
  Section* cold_section = nullptr;
  bool in_cold = false;

  // A split backpropagator call whose sensitivity is a zero: every part the placeholder zero,
  // as back_call gives it (the call counted), then on to `done`.
  void zero_split_result(const Instr* ip, Label done) {
    a.mov(xr::eax, (int32_t)Value::kZeroSens);
    store(ip->x, xr::rax);
    store(ip->x2, xr::rax);
    if (ip->split3) store(ip->x3, xr::rax);
    count(offsetof(WorkCounters, applications));
    a.jmp(done);
  }

  // Whether the interpreter met at ip a callee of one of `kinds` (Instr::seen), or has not run
  // it yet (then every way of calling is emitted).
  static bool met(const Instr* ip, uint8_t kinds) { return ip->seen == 0 || (ip->seen & kinds); }
  template <class F>
  void cold(F f) {
    if (!cold_section || in_cold) {  // inline, jumped over
      Label over = a.newLabel();
      a.jmp(over);
      f();
      a.bind(over);
      return;
    }
    in_cold = true;
    a.section(cold_section);
    f();
    a.section(a.code()->textSection());
    in_cold = false;
  }

  xr::Mem slot(int r) { return r >= 0 ? xr::qword_ptr(kFr, r * 8) : xr::qword_ptr(kEnv, (-r - 1) * 8); }
  void load(const xr::Gp& g, int r) { a.mov(g, slot(r)); }
  void store(int x, const xr::Gp& g) { a.mov(xr::qword_ptr(kFr, x * 8), g); }
  // The two halves of a split call's outcome: into its slots x and x2, or, for a tail call of
  // a reverse rule computed at once (`to_exit`), into the Exec's r1 and r2, the body ending with
  // Exit::Pair (its value is that pair, delivered as two halves: whoever keeps it whole conses
  // it, its backpropagator made a closure, as op_app's native2 / apply_core's native1 make it).
  // For a chain call (`exit_chain`, the instruction being emitted), r2 becomes its way out's
  // backpropagator first (emit_chain_way_out).
  bool to_exit = false;
  const Instr* exit_chain = nullptr;
  void put(const Instr* ip, int half, const xr::Gp& g) {
    if (to_exit) a.mov(xr::qword_ptr(kEx, half == 1 ? exec_r1 : exec_r2), g);
    else store(half == 1 ? ip->x : ip->x2, g);
  }
  void end_put() {
    if (!to_exit) return;
    if (exit_chain) emit_chain_way_out(exit_chain);
    a.mov(xr::eax, (int32_t)Exit::Pair);
    a.jmp(ret);
  }
  // Exec r2 = the backpropagator of the way out of a chain call whose callee gave r1 and the
  // backpropagator r2 at once (Exec::way_out_bp): the closure of ip->chain with r2 in its hole,
  // or, for a value that holds no real ((), #t, #f, a string), the zero backpropagator of the
  // running closure and its argument (rebuilt first when the body took it apart).
  // rax = the zero backpropagator of the running closure and its argument (rebuilt first when the
  // body took it apart), as Exec::zero_backpropagator makes it: for a way out whose value holds no
  // real. Clobbers rcx, rdx.
  void emit_zero_backpropagator(bool rebuilt = false) {
    if (rebuild_arg && !rebuilt) emit_rebuild_arg();
    emit_alloc(sizeof(Closure) + sizeof(Value));
    write_header(Kind::Closure, 2);
    a.mov(xr::rcx, (uint64_t)zero_backpropagator_lambda());
    a.mov(xr::qword_ptr(xr::rax, closure_lambda), xr::rcx);
    a.mov(xr::rcx, xr::qword_ptr(kEx, offsetof(Exec, self)));
    a.mov(xr::qword_ptr(xr::rax, closure_env), xr::rcx);
    load(xr::rcx, 0);
    a.mov(xr::qword_ptr(xr::rax, closure_env + 8), xr::rcx);
  }

  void emit_chain_way_out(const Instr* ip) {
    Label inert = a.newLabel(), made = a.newLabel();
    // (the way out's backpropagator may hold the argument itself, and the zero one does: a body
    // that took it apart rebuilds it first)
    bool rebuilt = rebuild_arg && chain_captures_argument(ip);
    if (rebuilt) emit_rebuild_arg();
    a.mov(xr::rax, xr::qword_ptr(kEx, exec_r1));
    inert_to(inert);
    emit_closure(ip->chain, ip->ncaps, ip->caps, ip->hole, [&] { a.mov(xr::rcx, xr::qword_ptr(kEx, exec_r2)); });
    a.jmp(made);
    a.bind(inert);
    emit_zero_backpropagator(rebuilt);
    a.bind(made);
    a.mov(xr::qword_ptr(kEx, exec_r2), xr::rax);
  }

  void call(const void* fn) {
    a.mov(xr::rax, (uint64_t)fn);
    a.call(xr::rax);
  }
  // A runtime call that returns kContinue or how the body ends.
  // A tail call taken in native code: to `slow` when Ctrl-C is pending; else rcx = the call
  // record of this depth, its callee set to rax (note_tail_call's first half). Clobbers rdi.
  void record_callee(Label slow) {
    a.mov(xr::rdi, xr::qword_ptr(kWork, enter.current));
    a.cmp(xr::byte_ptr(xr::rdi, enter.interrupt), 0);
    a.jne(slow);
    a.mov(xr::rcx, xr::qword_ptr(kWork, depth_offset));
    a.imul(xr::rcx, xr::rcx, enter.record_bytes);
    a.add(xr::rcx, xr::qword_ptr(kWork, enter.records));
    a.mov(xr::qword_ptr(xr::rcx), xr::rax);
  }
  void check_continue() {
    a.cmp(xr::eax, Exec::kContinue);
    a.jne(ret);
  }
  // The interpreter runs this one instruction (its own case, without dispatch).
  void step(const Instr* ip) {
    if (rebuild_arg && (ip->chain_call || ip->inert_guard || captures_argument(ip))) emit_rebuild_arg();
    Label stepped = a.newLabel();
    if (ip->op == Op::BackCall && ip->split) {
      // ȳ a zero view ((zero P), (%rzero P) of a pair: back_call's zero_sensitivity), which the
      // native paths leave to this one: all zero, as back_call gives it (W7: the backpropagators
      // of cadr-of and caddr-of given the zeros of subtrees)
      Label call_it = a.newLabel();
      const void* stub = zero_view_stub();
      if (stub) {
        load(xr::rcx, ip->b);
        call(stub);  // (shared: r9 = 1 for a zero view)
        a.test(xr::r9, xr::r9);
        a.jz(call_it);
        zero_split_result(ip, stepped);
      }
      a.bind(call_it);
    }
    const void* fn = (const void*)&vlad_jit_step;
    switch (ip->op) {
      case Op::Sens: fn = (const void*)&vlad_jit_sens; break;
      case Op::App: fn = (const void*)&vlad_jit_app; break;
      case Op::Lambda: fn = (const void*)&vlad_jit_lambda; break;
      case Op::Cons: fn = (const void*)&vlad_jit_cons; break;
      case Op::Car:
      case Op::Cdr: fn = (const void*)&vlad_jit_car_cdr; break;
      case Op::Check: fn = (const void*)&vlad_jit_check; break;
      case Op::BackCall: fn = (const void*)&vlad_jit_backcall; break;
      case Op::EnvRef: fn = (const void*)&vlad_jit_envref; break;
      case Op::Global: fn = (const void*)&vlad_jit_global; break;
      default: break;
    }
    a.mov(xr::rdi, kEx);
    a.mov(xr::rsi, (uint64_t)ip);
    call(fn);
    check_continue();
    a.bind(stepped);
  }
  // Register g: to `fail` unless it holds an object (falls through) or a view of one (to
  // `view`): not a real, not a small constant, not an immediate view. Clobbers t.
  void object_or_view(const xr::Gp& g, const xr::Gp& t, Label fail, Label view) {
    a.mov(t, g);
    a.shr(t, 48);
    a.jnz(fail);
    a.cmp(g, 0xff);
    a.jbe(fail);
    a.test(g.r8(), 15);
    a.jnz(view);
  }
  // eax = #t where code jumps to `yes`, #f where it jumps to `no` (both bound here; the code
  // before does not fall through).
  void bool_result(Label yes, Label no) {
    Label out = a.newLabel();
    a.bind(yes);
    a.mov(xr::eax, (int32_t)Value::kTrue);
    a.jmp(out);
    a.bind(no);
    a.mov(xr::eax, (int32_t)Value::kFalse);
    a.bind(out);
  }
  // To `fail` unless the callee's lambda, in rdx, is a rule of the primitive p
  // (Lambda::native_prim). Clobbers r8.
  void rule_guard(Prim* p, Label fail) {
    a.mov(xr::r8, (uint64_t)p);
    a.cmp(xr::qword_ptr(xr::rdx, lambda_prim), xr::r8);
    a.jne(fail);
  }
  void count(size_t field_offset, int64_t n = 1) {
    if (n == 0) return;
    a.add(xr::qword_ptr(kWork, (int32_t)field_offset), (int32_t)n);
  }
  // Jumps to `fail` unless g holds a real; leaves it unboxed in xmm.
  // (r8_set: r8 holds kOffset already)
  void unbox(const xr::Gp& g, const xr::Xmm& x, Label fail, bool r8_set = false) {
    if (!r8_set) a.mov(xr::r8, kOffset);
    a.cmp(g, xr::r8);
    a.jb(fail);
    a.sub(g, xr::r8);
    a.movq(x, g);
  }
  // x = x op y for an arithmetic form (Add ... Div); nothing for the others.
  void arith(Inline form, const xr::Xmm& x, const xr::Xmm& y) {
    switch (form) {
      case Inline::Add: a.addsd(x, y); break;
      case Inline::Sub: a.subsd(x, y); break;
      case Inline::Mul: a.mulsd(x, y); break;
      case Inline::Div: a.divsd(x, y); break;
      default: break;
    }
  }
  // rax = the boxed real in xmm0 (or x) (NaNs canonical, as Value::real makes them). Clobbers r8
  // (r8_set: it holds kOffset already).
  void box(const xr::Xmm& x = xr::xmm0, bool r8_set = false) {
    Label ok = a.newLabel();
    a.movq(xr::rax, x);
    a.ucomisd(x, x);
    a.jnp(ok);
    a.mov(xr::rax, kCanonicalNaN);
    a.bind(ok);
    if (!r8_set) a.mov(xr::r8, kOffset);
    a.add(xr::rax, xr::r8);
  }
  // Jumps to `fail` unless rax holds an object (Value::is_obj) of kind k. Clobbers rdx.
  void kind_guard(Kind k, Label fail) { kind_guard_of(xr::rax, xr::rdx, k, fail); }
  // The same for register v, with t as scratch.
  void kind_guard_of(const xr::Gp& v, const xr::Gp& t, Kind k, Label fail, bool low_bits_checked = false) {
    if (!low_bits_checked) {
      a.test(v.r8(), 15);
      a.jnz(fail);
    }
    object_range_guard(v, t, fail);
    a.cmp(xr::dword_ptr(v, (int32_t)offsetof(Obj, kind)), (int32_t)k);
    a.jne(fail);
  }
  // v, whose four low bits are zero, is an object's address: in [0x100, 2^48) (Value::is_obj).
  // v - 0x100 is below 2^48 exactly then, but for v in [2^48, 2^48 + 0x100): the immediate views
  // there all have the tag kViewBpConst, so no value with four low zero bits is there.
  void object_range_guard(const xr::Gp& v, const xr::Gp& t, Label fail) {
    a.lea(t, xr::ptr(v, -0x100));
    a.shr(t, 48);
    a.jnz(fail);
  }
  void pair_guard(Label fail) { kind_guard(Kind::Pair, fail); }
  // To `to` when register v holds (), #f or #t (their own zero, their own *j).
  void atom_to(const xr::Gp& v, Label to) {
    a.cmp(v, (int32_t)Value::kNil);
    a.je(to);
    a.cmp(v, (int32_t)Value::kFalse);
    a.je(to);
    a.cmp(v, (int32_t)Value::kTrue);
    a.je(to);
  }
  // rax = an object's address or a view of one (a tag in the low four bits), else `fail`:
  // rdx = the tag (0 for the object itself), rax = the object.
  void object_view(Label fail) {
    a.mov(xr::rdx, xr::rax);
    a.shr(xr::rdx, 48);
    a.jnz(fail);
    a.cmp(xr::rax, 0xff);
    a.jbe(fail);
    a.mov(xr::rdx, xr::rax);
    a.and_(xr::rdx, 15);
    a.and_(xr::rax, -16);
  }

  // An instruction's inline fast path, `fast(slow)`, which jumps to `slow` when a guard fails
  // and otherwise falls through; the interpreter runs the instruction at `slow`.
  template <class F>
  void guarded(const Instr* ip, F fast) {
    Label slow = a.newLabel(), done = a.newLabel();
    fast(slow);
    a.bind(done);
    cold([&] {
      a.bind(slow);
      if (ip == pair_deferred) step(ip - 1);  // the argument's inner pair, for the interpreter
      step(ip);
      a.jmp(done);
    });
  }

  // The primitive slot r holds when it was set by a Global of an untransformed builtin in view.
  // (or by a constant: the transforms put primitives such as `plus` into code as constants).
  // The search looks back a bounded way, so that compiling stays linear in the code's size.
  // The instruction in view that last wrote frame slot r (none for the environment, or when it
  // is further back than the search goes).
  const Instr* writer(int r) {
    if (r < 0) return nullptr;
    for (size_t k = scope.size(), seen = 0; k-- > 0 && seen < 64; seen++) {
      const Instr* w = scope[k];
      if (w->x == r || (w->split && (w->x2 == r || (w->split3 && w->x3 == r)))) return w;
    }
    return nullptr;
  }

  // Whether slot r holds the constant v here: its last writer in scope is a Const of v (the
  // callee of `(k x)` in A-normal form, k a primitive), so a guard on it would always pass.
  bool holds_const(int r, Value v) {
    const Instr* w = writer(r);
    return w && w->op == Op::Const && w->k() == v;
  }

  // The lambda of the closure slot r holds here, when known when compiling: a constant
  // (holds_const: no guard at all), or a transformed global's cached value (the user's `sin` in
  // reverse-transformed code, say: *expect is that closure, and the slot holding that very closure
  // is the one guard needed). (A rule lambda's native forms are set when its rules are made,
  // before any code calls it, and never change.)
  Lambda* known_closure(int r, Value* expect) {
    *expect = Value::unbound();
    const Instr* w = writer(r);
    if (!w) return nullptr;
    Value v;
    if (w->op == Op::Const) {
      v = w->k();
    } else if (w->op == Op::Global && *w->src->xf && w->src->cache_in == w->src->cell->value) {
      v = w->src->cache_out;
      *expect = v;
      // The guard compares with this closure's address: kept alive with the code (Code::pins),
      // or, once the global's cache moved on (the global redefined) and it was collected, a
      // closure made at the same address would pass the guard and enter its lambda's code.
      if (std::find(pins.begin(), pins.end(), v) == pins.end()) pins.push_back(v);
    } else {
      return nullptr;
    }
    return is(v, Kind::Closure) ? static_cast<Closure*>(v.as_obj())->lambda : nullptr;
  }
  // To `fail` unless rax holds `expect` (nothing when it is unbound: a constant).
  void expect_guard(Value expect, Label fail) {
    if (expect.is_unbound()) return;
    a.mov(xr::rdx, expect.bits);
    a.cmp(xr::rax, xr::rdx);
    a.jne(fail);
  }

  Prim* known_prim(int r) {
    if (const Instr* w = writer(r)) {
      Value v;
      if (w->op == Op::Const) v = w->k();
      else if (w->op == Op::Global && !*w->src->xf) v = w->src->cell->value;
      // a transformed global whose transform is a primitive: car, cdr, null? ... are their own
      // forward versions (forward-transformed list code called them through op_app: a JVP of
      // W3's f took 8 such calls an element). Primitives are never collected: the guard's
      // comparison needs no pin.
      else if (w->op == Op::Global && w->src->cache_in == w->src->cell->value) v = w->src->cache_out;
      else return nullptr;
      if (!is(v, Kind::Prim)) return nullptr;
      return static_cast<Prim*>(v.as_obj());
    }
    return nullptr;
  }

  // Whether operand r is read by an instruction of c (branches included) other than `skip`s, or by c's value.
  // (With `own` false, the instructions that read the argument (fr[0]) themselves — a chain
  // call's way out, an inert-guarded lambda, for a value that holds no real — are not counted.)
  static bool reads(const Code* c, int r, const Instr* skip1, const Instr* skip2, bool own = true) {
    if (c->pair_result ? (c->r1 == r || c->r2 == r || (c->triple_result && c->r3 == r)) : c->result == r) return true;
    for (int i = 0; i < c->n; i++) {
      const Instr* ip = &c->ins[i];
      if (ip != skip1 && ip != skip2 && reads_instr(ip, r, own)) return true;
    }
    return false;
  }
  // The same for one instruction (its branches included).
  static bool reads_instr(const Instr* ip, int r, bool own) {
    if (own && (ip->inert_guard || ip->chain_call)) return true;
    switch (ip->op) {
      case Op::Const:
      case Op::Global: return false;
      case Op::Copy:
      case Op::Car:
      case Op::Cdr:
      case Op::Check:
      case Op::EnvRef: return ip->a == r;
      case Op::If:
        return ip->a == r || reads(ip->then_, r, nullptr, nullptr, own) || reads(ip->else_, r, nullptr, nullptr, own);
      case Op::Lambda:  // (a closure over the argument itself reads it so too: captures_argument)
        for (int k = 0; k < ip->ncaps; k++)
          if (ip->caps[k] == r) return own || r != 0;
        return false;
      default:  // App, Cons, Sens, BackCall
        return ip->a == r || ip->b == r || (ip->op == Op::App && ip->op2 == AppPair && ip->b2 == r);
    }
  }
  // A closure over the argument (slot 0) itself: R:map2's backpropagator at the end of its lists,
  // which keeps the argument for its zero; it gets the argument rebuilt, as a chain call's way out.
  static bool captures_argument(const Instr* ip) {
    if (ip->op != Op::Lambda || ip->self_ref) return false;
    for (int k = 0; k < ip->ncaps; k++)
      if (ip->caps[k] == 0) return true;
    return false;
  }
  // Whether a chain call's backpropagator (ip->chain over ip->caps) holds the argument itself.
  static bool chain_captures_argument(const Instr* ip) {
    for (int k = 0; k < ip->ncaps; k++)
      if (k != ip->hole && ip->caps[k] == 0) return true;
    return false;
  }

  // How a tail call of the body's own lambda can loop here: whether it may (as apply_core would
  // run the body again over the callee's environment), and whether the body starts by taking its
  // argument apart and reads it nowhere else (then a pair argument is never made).
  bool self_loop = false;
  const Instr* arg_car = nullptr;
  const Instr* arg_cdr = nullptr;
  // And when the argument's cdr is taken apart too (Code::arg_x3): instructions 2 and 3.
  const Instr* arg3_car = nullptr;
  const Instr* arg3_cdr = nullptr;
  // The call being emitted whose argument's inner pair (the Cons before it) is not made yet
  // (Instr::parts3), and the instruction after the one being emitted.
  const Instr* pair_deferred = nullptr;
  const Instr* next_ip = nullptr;
  // Whether an instruction of c (branches included) other than the `skip`s writes slot r, and
  // whether one reads the argument itself (a chain call, an inert-guarded lambda).
  // (From instruction `from` of c on, its branches whole.)
  static bool writes(const Code* c, int r, const Instr* skip1, const Instr* skip2, int from = 0) {
    for (int i = from; i < c->n; i++) {
      const Instr* ip = &c->ins[i];
      if (ip == skip1 || ip == skip2) continue;
      if (ip->tail && ip->op != Op::If) continue;  // (the last on its path: nothing reads after it)
      if (ip->x == r || (ip->split && (ip->x2 == r || (ip->split3 && ip->x3 == r)))) return true;
      if (ip->op == Op::If && (writes(ip->then_, r, nullptr, nullptr) || writes(ip->else_, r, nullptr, nullptr)))
        return true;
    }
    return false;
  }
  static bool reads_argument_itself(const Code* c) {
    for (int i = 0; i < c->n; i++) {
      const Instr* ip = &c->ins[i];
      if (ip->inert_guard || ip->chain_call || captures_argument(ip)) return true;
      if (ip->op == Op::If && (reads_argument_itself(ip->then_) || reads_argument_itself(ip->else_))) return true;
    }
    return false;
  }

  // With the argument taken apart without a pair, the instructions that read it themselves
  // (reads_argument_itself) get it rebuilt from its parts first, when their slots keep them to
  // the end: `rebuild_arg`. (A new pair of the same parts: they only take its zero.) When the
  // argument's cdr is taken apart too and its slot reused (a loop of three variables), from the
  // three parts: `rebuild_arg3`.
  bool rebuild_arg = false;
  bool rebuild_arg3 = false;
  // When the parts' slots are reused before the end (a loop over three variables whose first
  // part dies early: dot's under a reverse transform), an entry with the parts (a self tail
  // call's, or a direct caller's at instruction 2 or 4) keeps them in the Exec instead — f, arg,
  // and arg2 (unbound for two parts), which a body writes only as it leaves — and marks slot 0
  // unbound; the rebuild reads them there (`stash_arg`). An entry with the argument whole
  // keeps it in slot 0, which the body never writes.
  bool stash_arg = false;
  void emit_stash_parts(const xr::Gp& car, const xr::Gp& cdr, const xr::Gp* cddr) {
    a.mov(xr::qword_ptr(kEx, exec_f), car);
    a.mov(xr::qword_ptr(kEx, exec_arg), cdr);
    if (cddr) a.mov(xr::qword_ptr(kEx, exec_arg2), *cddr);
    else a.mov(xr::qword_ptr(kEx, exec_arg2), (int32_t)Value::kUnbound);
    a.mov(xr::qword_ptr(kFr), (int32_t)Value::kUnbound);
  }
  // rax = a new pair of the Exec's fields at offsets car_at and cdr_at (cdr_at < 0: of the
  // field car_at and rdx).
  void emit_pair_of_fields(int32_t car_at, int32_t cdr_at) {
    if (cdr_at < 0) a.mov(xr::qword_ptr(kFr), xr::rdx);  // (kept where the collector sees it)
    emit_alloc(sizeof(Pair));
    write_header(Kind::Pair, 0);
    a.mov(xr::rcx, xr::qword_ptr(kEx, car_at));
    a.mov(xr::qword_ptr(xr::rax, pair_car), xr::rcx);
    if (cdr_at < 0) a.mov(xr::rcx, xr::qword_ptr(kFr));
    else a.mov(xr::rcx, xr::qword_ptr(kEx, cdr_at));
    a.mov(xr::qword_ptr(xr::rax, pair_cdr), xr::rcx);
  }
  void emit_rebuild_arg() {
    if (stash_arg) {
      Label whole = a.newLabel(), two = a.newLabel();
      a.cmp(xr::qword_ptr(kFr), (int32_t)Value::kUnbound);
      a.jne(whole);
      a.cmp(xr::qword_ptr(kEx, exec_arg2), (int32_t)Value::kUnbound);
      a.je(two);
      emit_pair_of_fields(exec_arg, exec_arg2);
      a.mov(xr::rdx, xr::rax);
      emit_pair_of_fields(exec_f, -1);
      store(0, xr::rax);
      a.jmp(whole);
      a.bind(two);
      emit_pair_of_fields(exec_f, exec_arg);
      store(0, xr::rax);
      a.bind(whole);
      return;
    }
    if (rebuild_arg3) {
      emit_pair(arg3_car->x, arg3_cdr->x);
      store(0, xr::rax);  // (slot 0 is read only here: it keeps the inner pair over the allocation)
      emit_pair(arg_car->x, 0);
    } else {
      emit_pair(arg_car->x, arg_cdr->x);
    }
    store(0, xr::rax);
  }

  void plan_self_loop(const Code* c) {
    Lambda* lam = c->lam;
    self_loop = lam && !lam->native1 && !lam->native2 && !lam->native_split1 && !lam->native_split2 && !lam->raw_bp &&
                !lam->raw_variant && lam->code == c;
    if (!self_loop || c->n < 2) return;
    const Instr* i0 = &c->ins[0];
    const Instr* i1 = &c->ins[1];
    if (i0->op == Op::Cdr) std::swap(i0, i1);
    if (i0->op != Op::Car || i1->op != Op::Cdr || i0->a != 0 || i1->a != 0) return;
    // the argument is dead once the second one has written over its slot; else, unread after
    if (c->ins[0].x == 0) return;
    bool rebuild = false, itself_only = false;
    if (c->ins[1].x != 0 && reads(c, 0, i0, i1)) {
      // read only by instructions that read it themselves, and its parts kept: rebuilt for them
      // (from three parts, below, when the cdr's slot is not kept)
      itself_only = alloc_ok && !reads(c, 0, i0, i1, false) && reads_argument_itself(c) && !writes(c, 0, i0, i1);
      if (!itself_only) return;
      rebuild = !writes(c, i0->x, i0, i1) && !writes(c, i1->x, i0, i1) && i0->x != i1->x;
    }
    // (read so, with its parts' slots reused: the parts kept in the Exec, stash_arg — read from
    // their slots at an entry with them, so those must be distinct: a body that ignores both
    // parts writes them to one, which the second overwrites)
    if (itself_only && !rebuild && i0->x == i1->x) return;
    arg_car = i0;
    arg_cdr = i1;
    rebuild_arg = itself_only;
    stash_arg = itself_only && !rebuild;
    // three parts: the cdr taken apart at once (instructions 2 and 3), and read nowhere else
    int r = i1->x;
    if (rebuild || c->n < 5 || r < 0) return;
    const Instr* i2 = &c->ins[2];
    const Instr* i3 = &c->ins[3];
    if (i2->op == Op::Cdr) std::swap(i2, i3);
    if (i2->op != Op::Car || i3->op != Op::Cdr || i2->a != r || i3->a != r) return;
    // (nothing reads slot r before an instruction writes over it, if one does)
    bool overwritten = i2->x == r || i3->x == r;
    for (int i = 4; i < c->n && !overwritten; i++) {
      const Instr* ip = &c->ins[i];
      if (reads_instr(ip, r, r == 0)) return;
      overwritten = ip->op != Op::If && (ip->x == r || (ip->split && (ip->x2 == r || (ip->split3 && ip->x3 == r))));
    }
    if (!overwritten &&
        (c->pair_result ? (c->r1 == r || c->r2 == r || (c->triple_result && c->r3 == r)) : c->result == r))
      return;
    if (itself_only && (i0->x == i2->x || i0->x == i3->x || i2->x == i3->x)) return;  // (as above)
    if (itself_only) rebuild_arg3 = true;  // (from the stash)
    arg3_car = i2;
    arg3_cdr = i3;
  }

  static const char* prelude_file() {
    static const char* const f = intern("<prelude>");
    return f;
  }
  static const char* rules_file() {
    static const char* const f = intern("<rules>");
    return f;
  }
  // note_tail_call's rule for a call site inside the prelude or the rules: it replaces the
  // record's position (rcx: the record) only when that is none or such a site too: to `write`
  // then, else to `keep`. Clobbers t and rdx.
  void internal_site_replaces(const xr::Gp& t, Label write, Label keep) {
    a.mov(t, xr::qword_ptr(xr::rcx, enter.record_pos));
    a.test(t, t);
    a.jz(write);
    a.mov(xr::rdx, (uint64_t)prelude_file());
    a.cmp(t, xr::rdx);
    a.je(write);
    a.mov(xr::rdx, (uint64_t)rules_file());
    a.cmp(t, xr::rdx);
    a.jne(keep);
  }

  // The frame's record for a self tail call, as vlad_jit_self_tail makes it (Ctrl-C checked, the
  // callee in rax and the call site noted as note_tail_call notes it): inline, the call only when
  // an interrupt is pending (or the layout is out of reach).
  void emit_self_tail_frame(const Instr* ip) {
    Label slow_tail = a.newLabel(), noted = a.newLabel();
    auto call_tail = [&] {
      a.bind(slow_tail);
      a.mov(xr::rdi, kEx);
      a.mov(xr::rsi, (uint64_t)ip);
      call((const void*)&vlad_jit_self_tail);
      check_continue();
    };
    if (!enter.ok || !depth_offset_ok) {
      call_tail();
      return;
    }
    record_callee(slow_tail);
    const Pos& pos = ip->src->pos;
    if (pos.file == prelude_file() || pos.file == rules_file()) {
      // a site inside the prelude or the rules replaces only such a site, or none
      Label write = a.newLabel();
      internal_site_replaces(xr::rdi, write, noted);
      a.bind(write);
    }
    uint64_t line_col = (uint64_t)(uint32_t)pos.line | (uint64_t)(uint32_t)pos.col << 32;
    a.mov(xr::rdi, (uint64_t)pos.file);
    a.mov(xr::qword_ptr(xr::rcx, enter.record_pos), xr::rdi);
    a.mov(xr::rdi, line_col);
    a.mov(xr::qword_ptr(xr::rcx, enter.record_pos + 8), xr::rdi);
    a.bind(noted);
    cold([&] {
      call_tail();
      a.jmp(noted);
    });
  }

  void emit_self_tail(const Instr* ip) {
    Label slow = a.newLabel();
    bool three = ip == pair_deferred && arg3_car;  // the argument's three parts, no pair
    if (!three) make_deferred_pair(ip);
    // the callee a self_ref lambda made: the running closure itself (Exec::self, its environment
    // in kEnv already), no guard
    const Instr* w = writer(ip->a);
    bool known_self = w && w->op == Op::Lambda && w->self_ref;
    load(xr::rax, ip->a);
    if (!known_self) {
      kind_guard(Kind::Closure, slow);
      a.mov(xr::rcx, (uint64_t)top->lam);
      a.cmp(xr::qword_ptr(xr::rax, closure_lambda), xr::rcx);
      a.jne(slow);
      a.mov(xr::qword_ptr(kEx, offsetof(Exec, self)), xr::rax);
    }
    count(offsetof(WorkCounters, applications));
    emit_self_tail_frame(ip);
    if (ip->chain_call) {
      // op_app's chain call: the backpropagator with a hole (made first), linked here to the
      // chain this loop makes (Exec::pend_first), as apply_core links a ChainTail's
      Label has_last = a.newLabel(), linked = a.newLabel();
      if (rebuild_arg && chain_captures_argument(ip)) emit_rebuild_arg();  // (it holds the argument)
      emit_closure(ip->chain, ip->ncaps, ip->caps, ip->hole, [&] { a.mov(xr::ecx, (int32_t)Value::kNil); });
      a.mov(xr::rcx, xr::qword_ptr(kEx, exec_pend_last));
      a.test(xr::rcx, xr::rcx);
      a.jnz(has_last);
      a.mov(xr::qword_ptr(kEx, exec_pend_first), xr::rax);
      a.jmp(linked);
      a.bind(has_last);
      a.movsxd(xr::rdx, xr::dword_ptr(kEx, exec_pend_hole));
      a.mov(xr::qword_ptr(xr::rcx, xr::rdx, 3, closure_env), xr::rax);
      a.bind(linked);
      a.mov(xr::qword_ptr(kEx, exec_pend_last), xr::rax);
      a.mov(xr::dword_ptr(kEx, exec_pend_hole), ip->hole);
    }
    bool parts = arg_car && ip->op2 == AppPair;
    if (three) {  // (all read before any is written: the frame is the same)
      load(xr::rax, ip->b);
      load(xr::rcx, (ip - 1)->a);
      load(xr::r8, (ip - 1)->b);
    } else if (parts) {
      load(xr::rax, ip->b);
      load(xr::rcx, ip->b2);
    } else if (ip->op2 != AppPair) {
      load(xr::rax, ip->b);
    } else if (alloc_ok) {  // the argument pair, made inline (arg_of)
      emit_pair(ip->b, ip->b2);
    } else {
      a.mov(xr::rdi, kEx);
      a.mov(xr::rsi, (uint64_t)ip);
      call((const void*)&vlad_jit_arg_pair);
      check_continue();
      a.mov(xr::rax, xr::qword_ptr(kEx, offsetof(Exec, arg)));
    }
    // the callee's environment (its arguments were read from the caller's)
    if (!known_self) {
      a.mov(xr::rdx, xr::qword_ptr(kEx, offsetof(Exec, self)));
      a.lea(kEnv, xr::qword_ptr(xr::rdx, closure_env));
      a.mov(xr::qword_ptr(kEx, offsetof(Exec, env)), kEnv);
    }
    count(offsetof(WorkCounters, steps), top->n);
    if (three) {  // (in the order instructions 0-3 write them)
      if (stash_arg) emit_stash_parts(xr::rax, xr::rcx, &xr::r8);
      store(arg_car->x, xr::rax);
      store(arg3_car->x, xr::rcx);
      store(arg3_cdr->x, xr::r8);
      a.jmp(top_labels[4]);
    } else if (parts) {
      if (stash_arg) emit_stash_parts(xr::rax, xr::rcx, nullptr);
      store(arg_car->x, xr::rax);
      store(arg_cdr->x, xr::rcx);
      a.jmp(top_labels[2]);
    } else {
      store(0, xr::rax);
      a.jmp(top_labels[0]);
    }
    a.bind(slow);  // another callee: a tail call as any other
    make_deferred_pair(ip);
    if (!ip->chain_call && !ip->split && !ip->raw_call && (alloc_ok || ip->op2 != AppPair)) emit_tail_call(ip);
    else if (ip->chain_call && !ip->split && !ip->raw_call && alloc_ok) emit_chain_tail(ip);
    else step(ip);
  }

  const void* rule_split2 = nullptr;
  // The reverse version of a binary arithmetic primitive that slot r holds, when a transformed
  // global in view set it (its cached value: the interpreter has run it), else null.
  // The rule lambda of the primitive's reverse version that slot r holds when a constant in
  // view set it (the prelude's code, closed over the builtins, holds them so), or a transformed
  // global in view whose cached value is the transform of the cell's value (the interpreter has
  // run it); else null. Native code still checks the callee's lambda at run time.
  Lambda* known_rev_lambda(int r) {
    const Instr* w = writer(r);
    if (!w) return nullptr;
    Value v;
    if (w->op == Op::Const) v = w->k();
    else if (w->op == Op::Global && *w->src->xf && w->src->cache_in == w->src->cell->value) v = w->src->cache_out;
    else return nullptr;
    if (!is(v, Kind::Closure)) return nullptr;
    Lambda* lam = static_cast<Closure*>(v.as_obj())->lambda;
    return lam->native_prim ? lam : nullptr;
  }

  // The binary arithmetic primitive whose reverse version slot r holds (known_rev_lambda).
  Prim* known_rev_rule(int r) {
    Lambda* lam = known_rev_lambda(r);
    if (!lam || !is_rev_binary_rule(lam) || lam->native_prim->cls != PrimClass::Arith) return nullptr;
    rule_split2 = (const void*)lam->native_split2;
    return arith_form(lam->native_prim) != Inline::None ? lam->native_prim : nullptr;
  }

  // The unary arithmetic primitive whose reverse version slot r holds (known_rev_lambda).
  Prim* known_rev_unary(int r) {
    Lambda* lam = known_rev_lambda(r);
    if (!lam || lam->native_split1 != rev_unary_split()) return nullptr;
    Prim* p = lam->native_prim;
    return p->cls == PrimClass::Arith && p->arity == 1 && p->fn1 ? p : nullptr;
  }

  // zero?, positive?, negative?, null? or pair?, whose reverse version slot r holds
  // (known_rev_lambda).
  Prim* known_rev_test(int r) {
    Lambda* lam = known_rev_lambda(r);
    if (!lam || lam->native_split1 != rev_const_split()) return nullptr;
    Prim* p = lam->native_prim;
    bool sign = p->name == intern("zero?") || p->name == intern("positive?") || p->name == intern("negative?");
    bool shape = p->name == intern("null?") || p->name == intern("pair?");
    return ((sign && p->cls == PrimClass::Compare) || (shape && p->cls == PrimClass::Predicate)) && p->arity == 1 ? p
                                                                                                                   : nullptr;
  }

  // xmm = the real of a plain first-level reverse value in g (a Reverse object holding a real,
  // or a view of (*j r) for a real r in a pair), `leaf` = whether it is a constant leaf;
  // anything else jumps to `fail`. Clobbers rdx.
  void rev_real(const xr::Gp& g, const xr::Xmm& x, const xr::Gp& leaf, Label fail) {
    Label view = a.newLabel(), have = a.newLabel();
    a.xor_(leaf.r32(), leaf.r32());
    object_or_view(g, xr::rdx, fail, view);
    a.cmp(xr::dword_ptr(g, (int32_t)offsetof(Obj, kind)), (int32_t)Kind::Reverse);
    a.jne(fail);
    a.cmp(xr::dword_ptr(g, (int32_t)offsetof(Obj, aux)), (int32_t)kConstLeafAux);
    a.sete(leaf.r8());
    a.mov(g, xr::qword_ptr(g, node_v));
    a.jmp(have);
    a.bind(view);
    a.mov(xr::rdx, g);
    a.and_(xr::rdx, 15);
    a.and_(g, -16);
    j_view_part(g, xr::rdx, fail);
    a.bind(have);
    unbox(g, x, fail);
  }
  // g = P, t = the tag of a view of it: for kViewJCar / kViewJCdr ((*j (car P)), (*j (cdr P)),
  // a part that is not a pair) g = that part; any other tag to `fail`.
  void j_view_part(const xr::Gp& g, const xr::Gp& t, Label fail) {
    Label cdr_side = a.newLabel(), have = a.newLabel();
    a.cmp(t, (int32_t)kViewJCar);
    a.jne(cdr_side);
    a.mov(g, xr::qword_ptr(g, pair_car));
    a.jmp(have);
    a.bind(cdr_side);
    a.cmp(t, (int32_t)kViewJCdr);
    a.jne(fail);
    a.mov(g, xr::qword_ptr(g, pair_cdr));
    a.bind(have);
  }

  // The callee (slot a) a closure of p's reverse rule whose forward phase of two arguments is
  // `split2`, and its operands b, b2 two plain reverse reals: x1, x2 = them, r10 / r11 = whether
  // each is a constant leaf; anything else jumps to `fail`.
  void rev_rule_args(const Instr* ip, Prim* p, const void* split2, const xr::Xmm& x1, const xr::Xmm& x2, Label fail) {
    Value expect;
    Lambda* kl = known_closure(ip->a, &expect);
    if (kl && kl->native_prim == p && (const void*)kl->native_split2 == split2) {
      if (!expect.is_unbound()) {
        load(xr::rax, ip->a);
        expect_guard(expect, fail);
      }
    } else {
      load(xr::rax, ip->a);
      kind_guard(Kind::Closure, fail);
      a.mov(xr::rdx, xr::qword_ptr(xr::rax, closure_lambda));
      rule_guard(p, fail);
      a.mov(xr::rcx, (uint64_t)split2);
      a.cmp(xr::qword_ptr(xr::rdx, lambda_split2), xr::rcx);
      a.jne(fail);
    }
    load(xr::rax, ip->b);
    rev_real(xr::rax, x1, xr::r10, fail);
    load(xr::rcx, ip->b2);
    rev_real(xr::rcx, x2, xr::r11, fail);
  }

  // x, x2 = (value . backpropagator) of a binary arithmetic primitive's reverse version applied
  // to two plain reverse reals: the node is made here (rev_binary_s2's work).
  void emit_rev_binary(const Instr* ip, Prim* p) {
    guarded(ip, [&](Label slow) {
      rev_rule_args(ip, p, rule_split2, xr::xmm1, xr::xmm2, slow);  // (rev_binary_s2)
      Label constants = a.newLabel(), out = a.newLabel();
      count(offsetof(WorkCounters, applications));
      a.add(xr::qword_ptr(kMeter, p->id * 8), 1);
      a.movsd(xr::xmm0, xr::xmm1);
      arith(arith_form(p), xr::xmm0, xr::xmm2);
      a.and_(xr::r10d, xr::r11d);
      a.jnz(constants);  // two constants: nothing is recorded (a constant leaf, the zero backpropagator)
      emit_rev_node(p);
      put(ip, 1, xr::rax);
      Value shared = rev_node_args(p) == 0 ? shared_bp_view(p) : Value::unbound();
      if (shared.is_unbound()) a.or_(xr::rax, (int32_t)kViewBpNode);  // the node's own view
      else a.mov(xr::rax, shared.bits);  // + and -: the one node's (rev_binary_s2)
      put(ip, 2, xr::rax);
      end_put();
      a.jmp(out);
      a.bind(constants);
      emit_const_leaf();
      put(ip, 1, xr::rax);
      a.mov(xr::rax, const_pair_view().bits);
      put(ip, 2, xr::rax);
      end_put();
      a.bind(out);
    });
  }

  // x, x2 = (value . backpropagator) of the reverse version of a comparison applied to two plain
  // reverse reals, as rev_compare_s2 makes them: #t or #f and the zero backpropagator
  // (kConstPairView); anything else: the interpreter.
  void emit_rev_compare(const Instr* ip, Prim* p) {
    guarded(ip, [&](Label slow) {
      rev_rule_args(ip, p, (const void*)rev_compare_split2(), xr::xmm0, xr::xmm1, slow);
      count(offsetof(WorkCounters, applications));
      a.add(xr::qword_ptr(kMeter, p->id * 8), 1);
      compare(inline_form(p, true));
      put(ip, 1, xr::rax);
      a.mov(xr::rax, const_pair_view().bits);
      put(ip, 2, xr::rax);
      end_put();
    });
  }

  // The comparison whose reverse version slot r holds (known_rev_lambda).
  Prim* known_rev_compare(int r) {
    Lambda* lam = known_rev_lambda(r);
    if (!lam || lam->native_split2 != rev_compare_split2() || lam->native_prim->cls != PrimClass::Compare) return nullptr;
    Inline f = inline_form(lam->native_prim, true);
    return f >= Inline::Eq && f <= Inline::Ge ? lam->native_prim : nullptr;
  }

  // A tail call of a reverse rule that native code computes at once (+ - * / and comparisons on
  // two plain reverse reals, sqrt, exp, log, sin, cos and the other unary ones of a plain reverse
  // real, car and cdr of a pair or of (*j P)): the body ends with its value
  // and backpropagator as two halves (Exit::Pair), where op_app would make the pair and a
  // closure of the backpropagator; for a chain call (a tail call of a body with a way out), with
  // the value and the way out's backpropagator, as op_app's chain call does it.
  void emit_tail_rule(const Instr* ip) {
    to_exit = true;
    exit_chain = ip->chain_call ? ip : nullptr;
    if (ip->op2 == AppPair) {
      if (Prim* p = known_rev_rule(ip->a)) emit_rev_binary(ip, p);
      else emit_rev_compare(ip, known_rev_compare(ip->a));
    } else {
      guarded(ip, [&](Label slow) {
        load(xr::rax, ip->a);
        kind_guard(Kind::Closure, slow);
        a.mov(xr::rdx, xr::qword_ptr(xr::rax, closure_lambda));
        a.mov(xr::rdi, xr::qword_ptr(xr::rdx, lambda_split1));
        // (each ends the body when it applies)
        if (Prim* p = known_rev_unary(ip->a)) emit_unary_split(ip, p, slow);
        else emit_projection_split(ip, slow);
        a.jmp(slow);
      });
    }
    to_exit = false;
    exit_chain = nullptr;
  }

  // (f̄ . x̄), taken apart at once, of the backpropagator of car or cdr of (*j P) (the views
  // kViewBpCarJ / kViewBpCdrJ) called on a real or a pair ȳ, as back_view makes it: f̄ = () and
  // x̄ = (ȳ . zero of (cdr P)) or (zero of (car P) . ȳ), a new pair, for a part that is a real
  // (its zero 0), (), #t, #f (their own) or a pair (the view of its zero); anything else: the
  // interpreter.
  void emit_back_proj(const Instr* ip) {
    // (only the kinds of backpropagator the interpreter met here, Instr::seen)
    bool node = met(ip, kSeenBackNode), proj = met(ip, kSeenBackProj);
    guarded(ip, [&](Label slow) {
      if (!proj) {
        if (node) back_node_code(ip, slow);
        else a.jmp(slow);
        return;
      }
      // the backpropagator of a primitive's node (its view kViewBpNode) or of a comparison of
      // two constant reals (kConstPairView) on a real ȳ: back_node_code
      Label node_path = a.newLabel(), node_done = a.newLabel();
      load(xr::rax, ip->a);
      if (node) {
        a.mov(xr::rdx, const_pair_view().bits);
        a.cmp(xr::rax, xr::rdx);
        a.je(node_path);
        a.mov(xr::rdx, xr::rax);
        a.and_(xr::rdx, 15);
        a.cmp(xr::rdx, (int32_t)kViewBpNode);
        a.je(node_path);
      }
      // r9 = the zero of the other part, r10 = 1 on the cdr side; jumps to `fail` outside the case
      auto other_zero = [&](Label fail) {
        Label is_car = a.newLabel(), got = a.newLabel(), real_part = a.newLabel(), done = a.newLabel();
        load(xr::rax, ip->a);
        object_view(fail);  // rax = P
        a.cmp(xr::rdx, (int32_t)kViewBpCarJ);
        a.je(is_car);
        a.cmp(xr::rdx, (int32_t)kViewBpCdrJ);
        a.jne(fail);
        a.mov(xr::r9, xr::qword_ptr(xr::rax, pair_car));
        a.mov(xr::r10d, 1);
        a.jmp(got);
        a.bind(is_car);
        a.mov(xr::r9, xr::qword_ptr(xr::rax, pair_cdr));
        a.xor_(xr::r10d, xr::r10d);
        a.bind(got);
        a.mov(xr::r8, kOffset);
        a.cmp(xr::r9, xr::r8);
        a.jae(real_part);
        atom_to(xr::r9, done);
        kind_guard_of(xr::r9, xr::rdx, Kind::Pair, fail);
        a.or_(xr::r9, (int32_t)kViewZero);
        a.jmp(done);
        a.bind(real_part);
        a.mov(xr::r9, xr::r8);  // 0
        a.bind(done);
      };
      other_zero(slow);
      Label y_ok = a.newLabel();
      load(xr::rcx, ip->b);  // ȳ: a real or a pair (not a zero, which back_call would skip)
      a.mov(xr::r8, kOffset);
      a.cmp(xr::rcx, xr::r8);
      a.jae(y_ok);
      kind_guard_of(xr::rcx, xr::rdx, Kind::Pair, slow);
      a.bind(y_ok);
      emit_alloc(sizeof(Pair));  // (the registers above are not kept across it)
      write_header(Kind::Pair, 0);
      a.mov(xr::r11, xr::rax);
      other_zero(slow);  // the same again: it cannot fail now
      load(xr::rcx, ip->b);
      Label cdr_side = a.newLabel(), built = a.newLabel();
      a.test(xr::r10d, xr::r10d);
      a.jnz(cdr_side);
      a.mov(xr::qword_ptr(xr::r11, pair_car), xr::rcx);
      a.mov(xr::qword_ptr(xr::r11, pair_cdr), xr::r9);
      a.jmp(built);
      a.bind(cdr_side);
      a.mov(xr::qword_ptr(xr::r11, pair_car), xr::r9);
      a.mov(xr::qword_ptr(xr::r11, pair_cdr), xr::rcx);
      a.bind(built);
      count(offsetof(WorkCounters, applications));
      a.mov(xr::edx, (int32_t)Value::kNil);
      store(ip->x, xr::rdx);
      store(ip->x2, xr::r11);
      if (node) {
        a.jmp(node_done);
        a.bind(node_path);
        back_node_code(ip, slow);
        a.bind(node_done);
      }
    });
  }

  // (f̄ car-x̄ cdr-x̄) = the backpropagator of a +, - or * node called on a real ȳ (back_node's
  // work, with its counts), or for a call that keeps x̄ whole (split, not split3), (f̄ . x̄) with
  // x̄ a new pair; anything else: the interpreter.
  void emit_back_node(const Instr* ip) {
    guarded(ip, [&](Label slow) { back_node_code(ip, slow); });
  }
  void back_node_code(const Instr* ip, Label slow) {
    Label add = a.newLabel(), sub = a.newLabel(), mul = a.newLabel(), out = a.newLabel(), done_label = a.newLabel();
    {
      // the zero backpropagator of a comparison of two constant reals (kConstPairView: a loop's
      // counter, say), on a real: (() 0 0), as back_view gives it
      // (a node's view first; the constant view, out of line)
      Label other = a.newLabel();
      load(xr::rax, ip->a);
      a.mov(xr::edx, xr::eax);
      a.and_(xr::edx, 15);
      a.cmp(xr::edx, (int32_t)kViewBpNode);
      a.jne(other);
      // an object's address plus the tag 1: in [0x101, 2^48) (no immediate view has the tag 1)
      a.lea(xr::rdx, xr::ptr(xr::rax, -0x101));
      a.shr(xr::rdx, 48);
      a.jnz(slow);
      cold([&] {
        a.bind(other);
        a.mov(xr::rdx, const_pair_view().bits);
        a.cmp(xr::rax, xr::rdx);
        a.jne(slow);
        load(xr::rcx, ip->b);
        a.mov(xr::r8, kOffset);
        a.cmp(xr::rcx, xr::r8);
        a.jb(slow);
        a.mov(xr::rax, xr::r8);  // 0
        a.mov(xr::rcx, xr::r8);
        a.jmp(out);
      });
      a.and_(xr::rax, -16);  // the node
      load(xr::rcx, ip->b);  // ȳ, boxed
      a.mov(xr::r8, kOffset);
      a.cmp(xr::rcx, xr::r8);
      a.jb(slow);
      a.mov(xr::rdx, xr::rcx);
      a.sub(xr::rdx, xr::r8);
      a.movq(xr::xmm0, xr::rdx);  // ȳ
      a.mov(xr::edx, xr::dword_ptr(xr::rax, (int32_t)offsetof(Obj, aux)));
      a.cmp(xr::edx, current->prim("+")->id + 1);
      a.je(add);
      a.cmp(xr::edx, current->prim("-")->id + 1);
      a.je(sub);
      a.cmp(xr::edx, current->prim("*")->id + 1);
      a.je(mul);
      if (ip->split3) {
        a.cmp(xr::edx, current->prim("/")->id + 1);
        a.jne(slow);
        // (ȳ d1, ȳ d2), d1 = 1 / x2, d2 = -(x1 / (x2 x2)), counted as binary_partials and
        // back_node_op count them (two /, a * and a - for the partials, two * for the products)
        a.add(xr::qword_ptr(kMeter, current->prim("/")->id * 8), 2);
        a.add(xr::qword_ptr(kMeter, current->prim("*")->id * 8), 3);
        a.add(xr::qword_ptr(kMeter, current->prim("-")->id * 8), 1);
        a.mov(xr::rdx, xr::qword_ptr(xr::rax, node_x1));
        a.mov(xr::r9, xr::qword_ptr(xr::rax, node_x2));
        a.sub(xr::rdx, xr::r8);
        a.sub(xr::r9, xr::r8);
        a.movq(xr::xmm1, xr::rdx);  // x1
        a.movq(xr::xmm2, xr::r9);   // x2
        a.mov(xr::rdx, 0x3ff0000000000000ull);  // 1.0
        a.movq(xr::xmm3, xr::rdx);
        a.divsd(xr::xmm3, xr::xmm2);  // d1
        a.mulsd(xr::xmm2, xr::xmm2);  // x2 x2
        a.divsd(xr::xmm1, xr::xmm2);  // x1 / (x2 x2)
        a.mov(xr::rdx, 0x8000000000000000ull);
        a.movq(xr::xmm2, xr::rdx);
        a.xorpd(xr::xmm1, xr::xmm2);  // d2
        a.mulsd(xr::xmm3, xr::xmm0);  // d1 ȳ
        a.mulsd(xr::xmm1, xr::xmm0);  // d2 ȳ
        a.movsd(xr::xmm0, xr::xmm3);
        box();
        a.mov(xr::rcx, xr::rax);  // car x̄
        a.movsd(xr::xmm0, xr::xmm1);
        box();  // cdr x̄
        a.jmp(out);
      } else {  // a unary primitive's node: (() . ȳ f'(x)) (unary_node_bar); else the interpreter
        a.mov(xr::rdi, xr::rax);
        call((const void*)&unary_node_bar);
        a.test(xr::rax, xr::rax);
        a.jz(slow);
        store(ip->x2, xr::rax);
        a.mov(xr::eax, (int32_t)Value::kNil);
        store(ip->x, xr::rax);
        count(offsetof(WorkCounters, applications));
        a.jmp(done_label);
      }
      a.bind(add);  // (ȳ, ȳ)
      a.mov(xr::rax, xr::rcx);
      a.jmp(out);
      a.bind(sub);  // (ȳ, 0 - ȳ)
      a.add(xr::qword_ptr(kMeter, current->prim("-")->id * 8), 1);
      a.xorpd(xr::xmm1, xr::xmm1);
      a.subsd(xr::xmm1, xr::xmm0);
      a.movsd(xr::xmm0, xr::xmm1);
      box();
      a.jmp(out);
      a.bind(mul);  // (x2 ȳ, x1 ȳ)
      a.add(xr::qword_ptr(kMeter, current->prim("*")->id * 8), 2);
      a.mov(xr::rdx, xr::qword_ptr(xr::rax, node_x1));
      a.mov(xr::r9, xr::qword_ptr(xr::rax, node_x2));
      a.sub(xr::rdx, xr::r8);
      a.sub(xr::r9, xr::r8);
      a.movq(xr::xmm1, xr::rdx);
      a.movq(xr::xmm2, xr::r9);
      a.mulsd(xr::xmm1, xr::xmm0);  // x1 ȳ
      a.mulsd(xr::xmm2, xr::xmm0);  // x2 ȳ
      a.movsd(xr::xmm0, xr::xmm2);
      box();
      a.mov(xr::rcx, xr::rax);  // car x̄ = x2 ȳ
      a.movsd(xr::xmm0, xr::xmm1);
      box();  // cdr x̄ = x1 ȳ
      a.bind(out);  // rcx: car x̄, rax: cdr x̄
      count(offsetof(WorkCounters, applications));
      if (!ip->split3) {  // x̄ whole: the pair (car x̄ . cdr x̄), as back_view makes it
        a.sub(xr::rsp, 16);
        a.mov(xr::qword_ptr(xr::rsp), xr::rcx);
        a.mov(xr::qword_ptr(xr::rsp, 8), xr::rax);
        emit_alloc(sizeof(Pair), 16);
        write_header(Kind::Pair, 0);
        a.mov(xr::rcx, xr::qword_ptr(xr::rsp));
        a.mov(xr::qword_ptr(xr::rax, pair_car), xr::rcx);
        a.mov(xr::rcx, xr::qword_ptr(xr::rsp, 8));
        a.mov(xr::qword_ptr(xr::rax, pair_cdr), xr::rcx);
        a.add(xr::rsp, 16);
        a.mov(xr::edx, (int32_t)Value::kNil);
        store(ip->x, xr::rdx);
        store(ip->x2, xr::rax);
      } else {
        a.mov(xr::edx, (int32_t)Value::kNil);
        store(ip->x, xr::rdx);
        store(ip->x2, xr::rcx);
        store(ip->x3, xr::rax);
      }
    }
    a.bind(done_label);
  }

  // rax, rcx = the two arguments of a binary primitive: the instruction's two operands, or the
  // parts of its one operand, a pair (else `fail`).
  void load_pair_args(const Instr* ip, Label fail) {
    if (ip->op2 == AppPair) {
      load(xr::rax, ip->b);
      load(xr::rcx, ip->b2);
      return;
    }
    load(xr::rax, ip->b);
    pair_guard(fail);
    a.mov(xr::rcx, xr::qword_ptr(xr::rax, pair_cdr));
    a.mov(xr::rax, xr::qword_ptr(xr::rax, pair_car));
  }

  void emit_app(const Instr* ip) {
    // An argument (b c . d) whose inner pair the Cons before did not make (emit's Cons case):
    // made here, except by the direct call and the loop, which pass its three parts when the
    // callee takes them; the interpreter's step (guarded's slow path) gets it made first.
    pair_deferred = defers_pair(ip) ? ip : nullptr;
    emit_app_parts(ip);
    pair_deferred = nullptr;
  }
  // Whether call ip's inner argument pair, the Cons just before it, is left for it to make.
  bool defers_pair(const Instr* ip) const { return ip->parts3 && alloc_ok; }
  // The deferred inner pair of ip's argument, made.
  void make_deferred_pair(const Instr* ip) {
    if (ip != pair_deferred) return;
    emit_cons(ip - 1);
    pair_deferred = nullptr;
  }
  void emit_app_parts(const Instr* ip) {
    if (ip->split && ip->op2 == AppPair && !ip->tail && !ip->raw_call && !ip->chain_call) {
      // (the inner pair of an argument of three parts stays unmade for a direct call, which
      // passes the parts to a callee that takes them: R:map2's own)
      if (Prim* p = known_rev_rule(ip->a)) {
        make_deferred_pair(ip);
        emit_rev_binary(ip, p);
        return;
      }
      if (Prim* p = known_rev_compare(ip->a)) {
        make_deferred_pair(ip);
        emit_rev_compare(ip, p);
        return;
      }
    }
    if (ip->tail && !ip->split && !ip->raw_call && alloc_ok &&
        (!ip->chain_call || (ip->ncaps > 0 && free_list_index(sizeof(Closure) + sizeof(Value) * (ip->ncaps - 1)) >= 0))) {
      Lambda* rule = known_rev_lambda(ip->a);
      bool projection = rule && ip->op2 != AppPair &&
                        (rule->native_split1 == rev_car_split() || rule->native_split1 == rev_cdr_split() ||
                         known_rev_unary(ip->a));
      if ((ip->op2 == AppPair && (known_rev_rule(ip->a) || known_rev_compare(ip->a))) || projection) {
        make_deferred_pair(ip);
        emit_tail_rule(ip);
        return;
      }
    }
    Prim* p = nullptr;
    Inline form = Inline::None;
    // (A primitive called in tail position is inlined too: the interpreter computes a binary
    // primitive at once there, and a unary one through apply_core's loop, which does no more
    // than call it; the body's value is then the result, as native code's finish gives.)
    if (!ip->split && !ip->raw_call && !ip->chain_call && (p = known_prim(ip->a)))
      form = inline_form(p, ip->op2 == AppPair || p->arity == 2);  // (a pair built before, taken apart)
    if (form == Inline::None) {
      bool chain_ok = !ip->chain_call || (alloc_ok && ip->ncaps > 0 &&
                                          free_list_index(sizeof(Closure) + sizeof(Value) * (ip->ncaps - 1)) >= 0);
      if (self_loop && ip->tail && !ip->split && !ip->raw_call && chain_ok && !p) {
        emit_self_tail(ip);
        return;
      }
      if (!ip->tail && (!ip->raw_call || ip->op2 != AppPair) && !ip->chain_call && !p && depth_offset_ok) {
        emit_direct_call(ip);
        return;
      }
      make_deferred_pair(ip);
      if ((!ip->tail || !ip->split) && !ip->raw_call && !ip->chain_call && p) emit_prim_call(ip, p);
      else if (ip->tail && !ip->split && !ip->raw_call && !ip->chain_call && !p && (alloc_ok || ip->op2 != AppPair))
        emit_tail_call(ip);
      else if (ip->tail && !ip->split && !ip->raw_call && ip->chain_call && !p && chain_ok && alloc_ok)
        emit_chain_tail(ip);
      else step(ip);
      return;
    }
    make_deferred_pair(ip);
    Label slow = a.newLabel(), prim_slow = a.newLabel(), done = a.newLabel();
    if (!holds_const(ip->a, Value::obj(p))) {
      load(xr::rax, ip->a);
      a.mov(xr::rdx, (uint64_t)p);
      a.cmp(xr::rax, xr::rdx);
      a.jne(slow);
    }
    // (in tail position, the tag primitives' other arguments too go to the primitive in this frame,
    // as emit_prim_call calls it, not to the interpreter: `zero` of a pair ends many bodies)
    bool tail_prim = ip->tail && form >= Inline::Zero;
    emit_prim(ip, p, form, ip->tail && !tail_prim ? slow : prim_slow);  // its value in rax
    store(ip->x, xr::rax);
    count(offsetof(WorkCounters, applications));
    a.bind(done);
    cold([&] {
      if (!ip->tail || tail_prim) {  // arguments outside the inline form: the primitive itself, called
        a.bind(prim_slow);
        a.mov(xr::rdi, kEx);
        a.mov(xr::rsi, (uint64_t)ip);
        call(tail_prim ? (const void*)&vlad_jit_tail_prim : (const void*)&vlad_jit_prim);
        check_continue();
        a.jmp(done);
      }
      a.bind(slow);
      step(ip);
      a.jmp(done);
    });
  }

  bool alloc_ok = false;
  int32_t free_lists_offset = 0;
  // rax = an object of `bytes` popped from this thread's free list as emit_alloc does, or, when
  // the list is empty, `fail` (nothing called). Clobbers rcx, rdx.
  void emit_alloc_from_list(size_t bytes, Label fail) {
    if (gc_stress_period()) a.jmp(fail);  // (GC stress, value.hpp: every allocation by a call)
    int32_t head = free_list_index(bytes) * 8;
    a.mov(xr::rcx, xr::qword_ptr(kWork, free_lists_offset));
    a.test(xr::rcx, xr::rcx);
    a.jz(fail);
    a.mov(xr::rax, xr::qword_ptr(xr::rcx, head));
    a.cmp(xr::rax, (int32_t)free_list_counter_max());
    a.jbe(fail);
    a.mov(xr::rdx, xr::qword_ptr(xr::rax));
    a.mov(xr::qword_ptr(xr::rcx, head), xr::rdx);
    count(offsetof(WorkCounters, objects));
    count(offsetof(WorkCounters, bytes), (int64_t)bytes);
  }

  // rax = a new scanned object of `bytes` (a free_list_index), counted as gc_alloc counts: taken
  // from this thread's free list as gc_alloc takes it, else from gc_alloc. Clobbers rcx, rdx and,
  // on the slow path, every caller-saved register.
  // (`pushed`: bytes the caller has pushed on the machine stack, dropped before leaving on an error.)
  void emit_alloc(size_t bytes, int32_t pushed = 0) {
    Label slow = a.newLabel(), have = a.newLabel();
    emit_alloc_from_list(bytes, slow);
    a.bind(have);
    cold([&] {
      a.bind(slow);
      a.mov(xr::edi, (uint32_t)bytes);
      call((const void*)&vlad_jit_alloc);
      a.test(xr::rax, xr::rax);
      a.jnz(have);
      if (pushed) a.add(xr::rsp, pushed);
      a.mov(xr::eax, kThrown);
      a.jmp(ret);
    });
  }
  // rax = a pointer-free object of `bytes` (one or two granules) taken from this thread's batch
  // as gc_alloc_atomic takes it, which is the slow path (an empty batch, the heap limit).
  // Clobbers rcx, rdx, r8; keeps xmm0–xmm2.
  void emit_alloc_atomic(size_t bytes) {
    size_t g = (bytes + 15) / 16;
    int32_t batch = atomic_batch_offset(g), n = atomic_count_offset(g);
    Label slow = a.newLabel(), have = a.newLabel();
    if (gc_stress_period()) a.jmp(slow);  // (GC stress, as emit_alloc_from_list)
    a.mov(xr::rcx, xr::qword_ptr(kWork, free_lists_offset));
    a.test(xr::rcx, xr::rcx);
    a.jz(slow);
    a.mov(xr::edx, xr::dword_ptr(xr::rcx, n));
    a.test(xr::edx, xr::edx);
    a.jz(slow);
    a.sub(xr::edx, 1);
    a.mov(xr::dword_ptr(xr::rcx, n), xr::edx);
    a.lea(xr::r8, xr::ptr(xr::rcx, xr::rdx, 3, batch));
    a.mov(xr::rax, xr::qword_ptr(xr::r8));
    a.mov(xr::qword_ptr(xr::r8), 0);  // held by its user from now on
    count(offsetof(WorkCounters, objects));
    count(offsetof(WorkCounters, bytes), (int64_t)bytes);
    a.bind(have);
    cold([&] {
      a.bind(slow);
      a.mov(xr::edi, (uint32_t)bytes);
      call_keeping_xmm((const void*)&vlad_jit_alloc_atomic, have);
    });
  }

  // Calls fn (its argument already in rdi) with xmm0-xmm2 kept across the call; on to `ok` when
  // it returns an object, out (thrown) when it returns null.
  void call_keeping_xmm(const void* fn, Label ok) {
    a.sub(xr::rsp, 32);
    a.movsd(xr::qword_ptr(xr::rsp), xr::xmm0);
    a.movsd(xr::qword_ptr(xr::rsp, 8), xr::xmm1);
    a.movsd(xr::qword_ptr(xr::rsp, 16), xr::xmm2);
    call((const void*)fn);
    a.movsd(xr::xmm0, xr::qword_ptr(xr::rsp));
    a.movsd(xr::xmm1, xr::qword_ptr(xr::rsp, 8));
    a.movsd(xr::xmm2, xr::qword_ptr(xr::rsp, 16));
    a.add(xr::rsp, 32);
    a.test(xr::rax, xr::rax);
    a.jnz(ok);
    a.mov(xr::eax, kThrown);
    a.jmp(ret);
  }

  // rax = (reverse y), y in xmm0, of `aux` (a node: its primitive's id + 1; a constant leaf:
  // kConstLeafAux) holding `nargs` arguments from xmm1, xmm2 (make_node's object).
  void emit_reverse_object(uint32_t aux, int nargs) {
    emit_alloc_atomic(nargs == 0 ? sizeof(Tagged) : nargs == 1 ? sizeof(Tagged) + sizeof(Value) : sizeof(RevNode));
    a.mov(xr::r9, xr::rax);
    a.mov(xr::rcx, header(Kind::Reverse, aux));
    a.mov(xr::qword_ptr(xr::r9), xr::rcx);
    box(xr::xmm0);  // (r8 = kOffset from here)
    a.mov(xr::qword_ptr(xr::r9, node_v), xr::rax);
    // the operands, unboxed from reals: boxed again as they were (no NaN to make canonical)
    if (nargs >= 1) {
      a.movq(xr::rax, xr::xmm1);
      a.add(xr::rax, xr::r8);
      a.mov(xr::qword_ptr(xr::r9, node_x1), xr::rax);
    }
    if (nargs >= 2) {
      a.movq(xr::rax, xr::xmm2);
      a.add(xr::rax, xr::r8);
      a.mov(xr::qword_ptr(xr::r9, node_x2), xr::rax);
    }
    a.mov(xr::rax, xr::r9);
  }
  // rax = the constant leaf of y in xmm0, as const_leaf gives it: a small whole number's from the
  // table (made there the first time), any other a new one. Keeps xmm0-xmm2; clobbers rcx, rdx,
  // r8, r9, xmm3 (and, allocating from the collector, every caller-saved register).
  void emit_const_leaf() {
    Label other = a.newLabel(), fill = a.newLabel(), done = a.newLabel();
    a.cvttsd2si(xr::rdx, xr::xmm0);  // (NaN and out of range: INT64_MIN)
    a.lea(xr::rcx, xr::ptr(xr::rdx, -kSmallLeafMin));
    a.cmp(xr::rcx, (int32_t)(kSmallLeafMax - kSmallLeafMin));
    a.jae(other);
    a.cvtsi2sd(xr::xmm3, xr::rdx);  // y whole: the same bits (so not -0)
    a.movq(xr::r8, xr::xmm0);
    a.movq(xr::r9, xr::xmm3);
    a.cmp(xr::r8, xr::r9);
    a.jne(other);
    a.mov(xr::r8, (uint64_t)small_leaves());
    a.mov(xr::rax, xr::qword_ptr(xr::r8, xr::rcx, 3));
    a.test(xr::rax, xr::rax);
    a.jz(fill);
    a.bind(done);
    cold([&] {
      a.bind(fill);
      a.mov(xr::rdi, xr::rdx);
      call_keeping_xmm((const void*)&vlad_jit_small_leaf, done);
      a.bind(other);
      emit_reverse_object(kConstLeafAux, 0);
      a.jmp(done);
    });
  }

  // The node of a binary primitive p's first-level forward phase (native.cpp's make_node).
  void emit_rev_node(Prim* p) { emit_reverse_object(p->id + 1, rev_node_args(p)); }

  // rax = a new pair of operands car_op and cdr_op (op_cons). Clobbers rcx, rdx (and, allocating
  // from the collector, every caller-saved register).
  void emit_pair(int car_op, int cdr_op) {
    emit_alloc(sizeof(Pair));
    write_header(Kind::Pair, 0);
    load(xr::rcx, car_op);
    a.mov(xr::qword_ptr(xr::rax, pair_car), xr::rcx);
    load(xr::rcx, cdr_op);
    a.mov(xr::qword_ptr(xr::rax, pair_cdr), xr::rcx);
  }

  // rax = a new closure of lam over n captured operands (caps), the one at `hole` (if any)
  // written from rcx as fill_hole sets it. Clobbers rcx, rdx (and, allocating from the
  // collector, every caller-saved register).
  template <class F>
  void emit_closure(Lambda* lam, int n, const int* caps, int hole, F fill_hole) {
    emit_alloc(sizeof(Closure) + sizeof(Value) * (n - 1));
    write_header(Kind::Closure, n);
    a.mov(xr::rcx, (uint64_t)lam);
    a.mov(xr::qword_ptr(xr::rax, closure_lambda), xr::rcx);
    for (int k = 0; k < n; k++) {
      if (k == hole) fill_hole();
      else load(xr::rcx, caps[k]);
      a.mov(xr::qword_ptr(xr::rax, closure_env + 8 * k), xr::rcx);
    }
  }

  // To `inert` when rax holds a value without a real (Exec's inert_value: (), #t, #f, a string);
  // falls through otherwise. Clobbers rdx.
  void inert_to(Label inert) {
    Label other = a.newLabel();
    atom_to(xr::rax, inert);
    object_or_view(xr::rax, xr::rdx, other, other);
    a.cmp(xr::dword_ptr(xr::rax, (int32_t)offsetof(Obj, kind)), (int32_t)Kind::String);
    a.je(inert);
    a.bind(other);
  }

  // The object header of kind k with aux n, as one word.
  static uint64_t header(Kind k, uint32_t n) { return (uint64_t)(uint32_t)k | ((uint64_t)n << 32); }
  void write_header(Kind k, uint32_t n) {
    a.mov(xr::rcx, header(k, n));
    a.mov(xr::qword_ptr(xr::rax), xr::rcx);
  }

  void emit_cons(const Instr* ip) {
    if (!alloc_ok) return step(ip);
    emit_pair(ip->a, ip->b);
    store(ip->x, xr::rax);
  }

  // A closure over captured values (op_lambda's general case).
  void emit_lambda(const Instr* ip) {
    size_t bytes = sizeof(Closure) + sizeof(Value) * (ip->ncaps - 1);
    if (ip->self_ref) {  // a closure of the running lambda over the same environment: itself
      a.mov(xr::rax, xr::qword_ptr(kEx, offsetof(Exec, self)));
      store(ip->x, xr::rax);
      return;
    }
    bool empty = ip->ncaps == 0 && ip->lam->free.empty();  // closure_of's one closure, once made
    if (!empty && (!alloc_ok || ip->ncaps <= 0 || free_list_index(bytes) < 0)) return step(ip);
    if (rebuild_arg && captures_argument(ip)) emit_rebuild_arg();
    Label slow = a.newLabel(), done = a.newLabel(), inert = a.newLabel();
    if (ip->inert_guard) {  // a way out whose value holds no real (inert_value): the zero
      load(xr::rax, ip->b);   // backpropagator of the running closure and its argument
      inert_to(inert);
    }
    if (empty) {
      a.mov(xr::rax, (uint64_t)&ip->lam->empty_closure);
      a.mov(xr::rax, xr::qword_ptr(xr::rax));
      a.cmp(xr::rax, (int32_t)Value::kUnbound);
      a.je(slow);
    } else {
      emit_closure(ip->lam, ip->ncaps, ip->caps, -1, [] {});
    }
    store(ip->x, xr::rax);
    a.bind(done);
    cold([&] {
      if (ip->inert_guard) {  // (Exec::op_lambda's zero_backpropagator)
        a.bind(inert);
        emit_zero_backpropagator();
        store(ip->x, xr::rax);
        a.jmp(done);
      }
      a.bind(slow);
      step(ip);
      a.jmp(done);
    });
  }

  // A call of a closure whose lambda has native code (Lambda::direct; exec.hpp): its frame and
  // Exec are made here on the machine stack and its code called, without apply_core.
  bool depth_offset_ok = false;
  int32_t depth_offset = 0;
  EnterLayout enter;
  // vlad_jit_enter for the closure in rax called at ip: inline when nothing but entering the frame
  // is to be done (within the depth limit and the stack, the call records' capacity, no Ctrl-C
  // pending: the call record gets the closure and ip's position); otherwise the call, which
  // checks and does it all. Clobbers rcx, rdi, rsi and what a call does.
  // (after_slow: emitted after the slow path's call, which clobbers the registers the hot path
  // keeps: the callee and its Code, say)
  void emit_enter_frame(const Instr* ip, const std::function<void()>& after_slow = nullptr) {
    Label slow_enter = a.newLabel(), entered = a.newLabel();
    if (enter.ok) {
      a.mov(xr::rcx, xr::qword_ptr(kWork, depth_offset));
      a.add(xr::rcx, 1);
      a.mov(xr::rdi, xr::qword_ptr(kWork, enter.current));
      a.cmp(xr::rcx, xr::qword_ptr(xr::rdi, enter.depth_limit));
      a.jg(slow_enter);
      a.cmp(xr::rsp, xr::qword_ptr(kWork, enter.stack_limit));
      a.jb(slow_enter);
      a.cmp(xr::rcx, xr::qword_ptr(kWork, enter.capacity));
      a.jge(slow_enter);
      a.cmp(xr::byte_ptr(xr::rdi, enter.interrupt), 0);
      a.jne(slow_enter);
      a.mov(xr::qword_ptr(kWork, depth_offset), xr::rcx);
      a.imul(xr::rcx, xr::rcx, enter.record_bytes);
      a.add(xr::rcx, xr::qword_ptr(kWork, enter.records));
      a.mov(xr::qword_ptr(xr::rcx), xr::rax);
      const Pos& pos = ip->src->pos;
      uint64_t line_col = (uint64_t)(uint32_t)pos.line | (uint64_t)(uint32_t)pos.col << 32;
      a.mov(xr::rdi, (uint64_t)pos.file);
      a.mov(xr::qword_ptr(xr::rcx, enter.record_pos), xr::rdi);
      a.mov(xr::rdi, line_col);
      a.mov(xr::qword_ptr(xr::rcx, enter.record_pos + 8), xr::rdi);
    }
    auto call_enter = [&] {
      a.bind(slow_enter);
      a.mov(xr::rdi, xr::rax);
      a.mov(xr::rsi, (uint64_t)ip);
      call((const void*)&vlad_jit_enter);
      a.test(xr::eax, xr::eax);
      a.jnz(ret);  // kThrown
      if (after_slow) after_slow();
    };
    if (!enter.ok) call_enter();
    a.bind(entered);
    if (enter.ok)
      cold([&] {
        call_enter();
        a.jmp(entered);
      });
  }
  void leave_frame(bool record = true) {
    a.lea(xr::rsp, xr::ptr(xr::rbp, -kFrameBytes));
    if (record) a.dec(xr::qword_ptr(kWork, depth_offset));
  }
  // car's or cdr's reverse rule at the first level (rdi: the callee's native_split1) applied to a
  // pair or to a view of *j of a pair, as rev_car_s / rev_cdr_s do it (ad/native.cpp): the part,
  // or a view of *j of it, and a view for the backpropagator; no call, no allocation. Falls
  // through for any other callee or argument.
  // rcx = a view (low bits nonzero, below 2^48): unless it is (*j P) of a pair P (kViewJ), `fail`;
  // else rcx = P and r9 = (*j (car P)) or (*j (cdr P)) as j_part makes it, lazily: a view of *j
  // of a part that is a pair, (), #t and #f themselves, else the view kViewJCar / kViewJCdr of P.
  // Clobbers r8.
  void j_part_of_view(bool cdr, Label fail) {
    Label own = a.newLabel(), not_pair = a.newLabel();
    a.mov(xr::r8, xr::rcx);
    a.and_(xr::r8, 15);
    a.cmp(xr::r8, (int32_t)kViewJ);
    a.jne(fail);
    a.and_(xr::rcx, -16);  // P
    a.mov(xr::r9, xr::qword_ptr(xr::rcx, cdr ? pair_cdr : pair_car));
    kind_guard_of(xr::r9, xr::r8, Kind::Pair, not_pair);
    a.or_(xr::r9, (int32_t)kViewJ);
    a.jmp(own);
    a.bind(not_pair);
    atom_to(xr::r9, own);
    a.mov(xr::r9, xr::rcx);
    a.or_(xr::r9, (int32_t)(cdr ? kViewJCdr : kViewJCar));
    a.bind(own);
  }

  // (known: the callee's native_split1 when known when compiling, which is car's or cdr's)
  void emit_projection_split(const Instr* ip, Label done, const void* known = nullptr) {
    Label other = a.newLabel(), is_car = a.newLabel();
    if (known == (const void*)rev_car_split()) {
      a.jmp(is_car);
    } else if (!known) {
      a.mov(xr::r8, (uint64_t)rev_car_split());
      a.cmp(xr::rdi, xr::r8);
      a.je(is_car);
      a.mov(xr::r8, (uint64_t)rev_cdr_split());
      a.cmp(xr::rdi, xr::r8);
      a.jne(other);
    }
    for (int cdr = 1; cdr >= 0; cdr--) {
      if (!cdr) a.bind(is_car);
      Label j_view = a.newLabel(), part_done = a.newLabel();
      int32_t part = cdr ? pair_cdr : pair_car;
      load(xr::rcx, ip->b);
      object_or_view(xr::rcx, xr::r8, other, j_view);
      // a pair: its part, and the view of the pair (kViewBpCar / kViewBpCdr)
      a.cmp(xr::dword_ptr(xr::rcx, (int32_t)offsetof(Obj, kind)), (int32_t)Kind::Pair);
      a.jne(other);
      a.mov(xr::r9, xr::qword_ptr(xr::rcx, part));
      put(ip, 1, xr::r9);
      a.or_(xr::rcx, (int32_t)(cdr ? kViewBpCdr : kViewBpCar));
      put(ip, 2, xr::rcx);
      a.jmp(part_done);
      // (*j P): j_part of P, and the view kViewBpCarJ / kViewBpCdrJ of P
      a.bind(j_view);
      j_part_of_view(cdr, other);
      put(ip, 1, xr::r9);
      a.or_(xr::rcx, (int32_t)(cdr ? kViewBpCdrJ : kViewBpCarJ));
      put(ip, 2, xr::rcx);
      a.bind(part_done);
      count(offsetof(WorkCounters, applications));
      end_put();
      a.jmp(done);
    }
    a.bind(other);
  }

  // x, x2 = (value . backpropagator) of the reverse version of a unary arithmetic primitive p
  // (sin, exp, ...) applied to a plain reverse real, as rev_unary_s makes them: y computed (and
  // metered) by emit_arith1, or by the primitive's function, goes into a node holding x (its backpropagator its
  // view kViewBpNode) or, for a constant leaf, a constant leaf (the zero backpropagator).
  // rax = the callee, rdx = its lambda, rdi = its native_split1; else falls through, unchanged.
  void emit_unary_split(const Instr* ip, Prim* p, Label done, Lambda* known = nullptr) {
    Label other = a.newLabel(), leaf = a.newLabel(), made = a.newLabel();
    if (!known || known->native_prim != p || known->native_split1 != rev_unary_split()) {
      rule_guard(p, other);
      a.mov(xr::r8, (uint64_t)rev_unary_split());
      a.cmp(xr::rdi, xr::r8);
      a.jne(other);
    }
    load(xr::rcx, ip->b);
    rev_real(xr::rcx, xr::xmm0, xr::r10, other);  // (clobbers rdx: the lambda is not needed now)
    if (UnaryDFn fd = unary_with_derivative_fn(p)) {
      // sin, cos: the node also holds the derivative, as x2 (rev_unary_s); a constant leaf not
      a.sub(xr::rsp, 32);
      a.movsd(xr::qword_ptr(xr::rsp), xr::xmm0);
      a.mov(xr::qword_ptr(xr::rsp, 8), xr::r10);
      a.lea(xr::rdi, xr::qword_ptr(xr::rsp, 16));
      call((const void*)fd);
      a.add(xr::qword_ptr(kMeter, p->id * 8), 1);
      a.movsd(xr::xmm1, xr::qword_ptr(xr::rsp));
      a.movsd(xr::xmm2, xr::qword_ptr(xr::rsp, 16));
      a.mov(xr::r10, xr::qword_ptr(xr::rsp, 8));
      a.add(xr::rsp, 32);
      a.test(xr::r10d, xr::r10d);
      a.jnz(leaf);
      emit_reverse_object(p->id + 1, 2);
    } else {
    a.sub(xr::rsp, 16);
    a.movsd(xr::qword_ptr(xr::rsp), xr::xmm0);
    a.mov(xr::qword_ptr(xr::rsp, 8), xr::r10);
    if (!emit_arith1(p)) {
      box();
      a.mov(xr::rsi, xr::rax);
      a.mov(xr::rdi, (uint64_t)p);
      call((const void*)p->fn1);  // a real: it cannot fail
      a.mov(xr::r8, kOffset);
      a.sub(xr::rax, xr::r8);
      a.movq(xr::xmm0, xr::rax);
    }
    a.movsd(xr::xmm1, xr::qword_ptr(xr::rsp));
    a.mov(xr::r10, xr::qword_ptr(xr::rsp, 8));
    a.add(xr::rsp, 16);
    a.test(xr::r10d, xr::r10d);
    a.jnz(leaf);
    emit_reverse_object(p->id + 1, 1);
    }
    put(ip, 1, xr::rax);
    a.or_(xr::rax, (int32_t)kViewBpNode);
    put(ip, 2, xr::rax);
    a.jmp(made);
    a.bind(leaf);
    emit_const_leaf();
    put(ip, 1, xr::rax);
    a.mov(xr::rax, const_real_view().bits);
    put(ip, 2, xr::rax);
    a.bind(made);
    count(offsetof(WorkCounters, applications));
    end_put();  // (in a tail call, the body's end)
    a.jmp(done);
    a.bind(other);
  }

  // xmm0 = (p x) for x in xmm0, counted as p's own function counts it, when p is a unary
  // arithmetic primitive computed here (unary_arith_fn): sqrt and abs inline, exp, log, sin, cos,
  // tan and tanh by the C library's functions, which p's function calls (the same doubles); no
  // boxing, no checks. False for any other (nothing emitted). Clobbers the caller-saved registers.
  bool emit_arith1(Prim* p) {
    UnaryFn f = unary_arith_fn(p);
    if (!f) return false;
    if (p->name == intern("sqrt")) {
      a.sqrtsd(xr::xmm0, xr::xmm0);
    } else if (p->name == intern("abs")) {
      a.mov(xr::rax, 0x7fffffffffffffffull);
      a.movq(xr::xmm1, xr::rax);
      a.andpd(xr::xmm0, xr::xmm1);
    } else {
      call((const void*)f);
    }
    a.add(xr::qword_ptr(kMeter, p->id * 8), 1);
    return true;
  }

  // x, x2 = (value . backpropagator) of the reverse version of p, as rev_const_s makes them:
  // zero?, positive? or negative? of a reverse real (a node or a constant leaf holding a real),
  // #t or #f and the view kViewBpConst of the argument; null? or pair? of a pair (the same view)
  // or of (*j P) of a pair P (the view kViewBpConstJ of P), or of () (const_nil_view()). rax = the callee (a closure), rdx =
  // its lambda, rdi = its native_split1; anything else falls through, registers unchanged.
  void emit_test_split(const Instr* ip, Prim* p, Label done, Lambda* known = nullptr) {
    Label other = a.newLabel();
    if (!known || known->native_prim != p || known->native_split1 != rev_const_split()) rule_guard(p, other);
    load(xr::rcx, ip->b);
    if (p->name == intern("null?") || p->name == intern("pair?")) {
      Label view = a.newLabel(), stored = a.newLabel(), not_nil = a.newLabel();
      // () (a walk's end): the other truth value and the static view const_nil_view()
      a.cmp(xr::rcx, (int32_t)Value::kNil);
      a.jne(not_nil);
      a.mov(xr::r9d, (int32_t)(p->name == intern("pair?") ? Value::kFalse : Value::kTrue));
      a.mov(xr::rcx, const_nil_view().bits);
      a.jmp(stored);
      a.bind(not_nil);
      a.mov(xr::r9d, (int32_t)(p->name == intern("pair?") ? Value::kTrue : Value::kFalse));
      object_or_view(xr::rcx, xr::r8, other, view);
      a.cmp(xr::dword_ptr(xr::rcx, (int32_t)offsetof(Obj, kind)), (int32_t)Kind::Pair);
      a.jne(other);
      a.or_(xr::rcx, (int32_t)kViewBpConst);
      a.jmp(stored);
      a.bind(view);
      a.mov(xr::r8, xr::rcx);
      a.and_(xr::r8, 15);
      a.cmp(xr::r8, (int32_t)kViewJ);
      a.jne(other);
      a.and_(xr::rcx, -16);
      a.or_(xr::rcx, (int32_t)kViewBpConstJ);
      a.bind(stored);
      store(ip->x, xr::r9);
      store(ip->x2, xr::rcx);
      count(offsetof(WorkCounters, applications));
      a.jmp(done);
      a.bind(other);
      return;
    }
    kind_guard_of(xr::rcx, xr::r8, Kind::Reverse, other);
    a.mov(xr::r9, xr::qword_ptr(xr::rcx, node_v));
    unbox(xr::r9, xr::xmm0, other);
    a.xorpd(xr::xmm1, xr::xmm1);
    a.xor_(xr::r9d, xr::r9d);
    if (p->name == intern("zero?")) {  // x == 0 (false when unordered: ZF and PF are both set)
      a.xor_(xr::r10d, xr::r10d);
      a.ucomisd(xr::xmm0, xr::xmm1);
      a.sete(xr::r9b);
      a.setnp(xr::r10b);
      a.and_(xr::r9d, xr::r10d);
    } else if (p->name == intern("positive?")) {  // x > 0
      a.ucomisd(xr::xmm0, xr::xmm1);
      a.seta(xr::r9b);
    } else {  // x < 0
      a.ucomisd(xr::xmm1, xr::xmm0);
      a.seta(xr::r9b);
    }
    a.add(xr::r9d, (int32_t)Value::kFalse);  // kTrue = kFalse + 1
    store(ip->x, xr::r9);
    a.or_(xr::rcx, (int32_t)kViewBpConst);
    store(ip->x2, xr::rcx);
    a.add(xr::qword_ptr(kMeter, p->id * 8), 1);
    count(offsetof(WorkCounters, applications));
    a.jmp(done);
    a.bind(other);
  }

  // A call of the closure in slot ip->a whose lambda holds at `code_field` the Code to run (its
  // `direct` or `raw_direct`): counted, the frame entered (emit_enter_frame), and the callee's
  // Exec at rsp with its frame after it (make_callee_frame): rax = the closure, rdx = the Code,
  // rcx = the callee's frame.
  // The call record of callee ip->a made (emit_enter_frame), then rax = the callee, rdx = its Code
  // (code_field of its lambda, or of that lambda's raw variant) and its frame (make_callee_frame).
  // `loaded`: rax and rdx are those already (reloaded only after the record's slow path); `known`:
  // the Code, when the caller knows it (a constant); `record` false: no call record (a chain's
  // link, BackChainLink: the callee runs in the chain's record, as the interpreter's walk runs it;
  // leave_frame(false) then).
  void enter_callee(const Instr* ip, int32_t code_field, bool raw = false, bool loaded = false, const Code* known = nullptr,
                    bool record = true) {
    count(offsetof(WorkCounters, applications));
    auto reload = [&] {
      load(xr::rax, ip->a);
      if (known) {
        a.mov(xr::rdx, (uint64_t)known);
        return;
      }
      a.mov(xr::rdx, xr::qword_ptr(xr::rax, closure_lambda));
      if (raw) a.mov(xr::rdx, xr::qword_ptr(xr::rdx, lambda_raw_variant));  // (checked by the caller)
      a.mov(xr::rdx, xr::qword_ptr(xr::rdx, code_field));
    };
    if (!record) {
      if (!loaded) reload();
    } else if (loaded) {
      emit_enter_frame(ip, reload);
    } else {
      emit_enter_frame(ip);
      reload();
    }
    make_callee_frame(known);
  }
  // rax = a closure, rdx = its Code (Lambda::direct): its Exec and frame made below rsp (the
  // Exec at rsp, rcx = the frame).
  void make_callee_frame(const Code* known = nullptr) {
    if (known) a.sub(xr::rsp, (int32_t)known->frame_bytes);
    else a.sub(xr::rsp, xr::qword_ptr(xr::rdx, code_frame_bytes));
    a.lea(xr::rcx, xr::ptr(xr::rsp, kExecBytes));
    a.mov(xr::qword_ptr(xr::rsp, exec_fr), xr::rcx);
    a.lea(xr::r8, xr::ptr(xr::rax, closure_env));
    a.mov(xr::qword_ptr(xr::rsp, exec_env), xr::r8);
    a.mov(xr::qword_ptr(xr::rsp, exec_self), xr::rax);
    a.xor_(xr::r8d, xr::r8d);
    a.mov(xr::qword_ptr(xr::rsp, exec_pend_first), xr::r8);
    a.mov(xr::qword_ptr(xr::rsp, exec_pend_last), xr::r8);
    a.mov(xr::byte_ptr(xr::rsp, exec_want3), xr::r8b);
  }

  // A split BackCall (not split3) of a closure whose lambda has a native body (Lambda::
  // native_back: an AD primitive's rule's backpropagator, say): called here as back_call calls
  // it (vlad_jit_back_native), its halves stored, then to `end`; anything else (another callee,
  // a zero ȳ, the native body declining) goes on to what follows.
  void emit_back_native(const Instr* ip, Label end) {
    Label next = a.newLabel();
    load(xr::rax, ip->a);
    object_or_view(xr::rax, xr::rdx, next, next);
    a.cmp(xr::dword_ptr(xr::rax, (int32_t)offsetof(Obj, kind)), (int32_t)Kind::Closure);
    a.jne(next);
    a.mov(xr::rdx, xr::qword_ptr(xr::rax, closure_lambda));
    a.mov(xr::rdi, xr::qword_ptr(xr::rdx, lambda_native_back));
    a.test(xr::rdi, xr::rdi);
    a.jz(next);
    a.sub(xr::rsp, 16);  // out[2]
    a.mov(xr::rsi, xr::rax);
    load(xr::rdx, ip->b);
    a.mov(xr::rcx, xr::rsp);
    call((const void*)&vlad_jit_back_native);
    halves_or_fall_through(ip, end);
    a.bind(next);
  }

  // The same for a split3 BackCall (vlad_jit_back_native3): its three parts stored.
  void emit_back_native3(const Instr* ip, Label end) {
    Label next = a.newLabel(), declined = a.newLabel();
    load(xr::rax, ip->a);
    object_or_view(xr::rax, xr::rdx, next, next);
    a.cmp(xr::dword_ptr(xr::rax, (int32_t)offsetof(Obj, kind)), (int32_t)Kind::Closure);
    a.jne(next);
    a.mov(xr::rdx, xr::qword_ptr(xr::rax, closure_lambda));
    a.cmp(xr::qword_ptr(xr::rdx, lambda_native_back), 0);
    a.je(next);
    a.sub(xr::rsp, 32);  // out[3]
    a.mov(xr::rdi, kEx);
    a.mov(xr::rsi, (uint64_t)ip);
    a.mov(xr::rdx, xr::rax);
    a.mov(xr::rcx, xr::rsp);
    call((const void*)&vlad_jit_back_native3);
    a.cmp(xr::eax, 1);
    a.jne(declined);
    a.mov(xr::rax, xr::qword_ptr(xr::rsp));
    store(ip->x, xr::rax);
    a.mov(xr::rax, xr::qword_ptr(xr::rsp, 8));
    store(ip->x2, xr::rax);
    a.mov(xr::rax, xr::qword_ptr(xr::rsp, 16));
    store(ip->x3, xr::rax);
    a.add(xr::rsp, 32);
    count(offsetof(WorkCounters, applications));
    a.jmp(end);
    a.bind(declined);
    a.add(xr::rsp, 32);
    a.cmp(xr::eax, kThrown);
    a.je(ret);
    a.bind(next);
  }

  // After a call that filled out[2] at rsp (lowered by 16 for it) and returned 1 (done), 0
  // (declined) or kThrown: on 1, the halves into ip->x and ip->x2 and on to `done`; on kThrown,
  // out; on 0, on to what follows (rsp restored).
  void halves_or_fall_through(const Instr* ip, Label done) {
    Label declined = a.newLabel();
    a.cmp(xr::eax, 1);
    a.jne(declined);
    a.mov(xr::rax, xr::qword_ptr(xr::rsp));
    a.mov(xr::rcx, xr::qword_ptr(xr::rsp, 8));
    a.add(xr::rsp, 16);
    store(ip->x, xr::rax);
    store(ip->x2, xr::rcx);
    count(offsetof(WorkCounters, applications));
    a.jmp(done);
    a.bind(declined);
    a.add(xr::rsp, 16);
    a.cmp(xr::eax, kThrown);
    a.je(ret);
  }

  // A split BackCall of a closure of a raw backpropagator with native code (Lambda::raw_direct)
  // on a real or an object ȳ that is not a zero (the caller has skipped the immediate ones): its body entered here as
  // run_raw enters it (a frame, fr[0] = ȳ), its halves stored as op_backcall stores them — a
  // pair for x̄ taken apart when split3, anything else by vlad_jit_back_done — then to `end`.
  // A structural one (Lambda::structural) given ȳ = +0 is not entered: to `zero`, as back_call
  // skips it. Any other backpropagator: to `next`.
  // One that starts a chain (Lambda::raw_chain) is entered so too, at its first instruction (the
  // call of the backpropagator in its hole), when the chain from it ends within 16
  // links: the recursion run_raw makes a loop of is then short. Its first instruction's step and
  // application are not counted, as run_raw, which starts each link after it, counts neither.
  void emit_back_raw(const Instr* ip, Label next, Label zero, Label end) {
    // (a chain head's first instruction: the next link runs in the chain's call record)
    const bool record = ip->op2 != BackChainLink;
    Label y_ok = a.newLabel(), thrown = a.newLabel(), general = a.newLabel(), called = a.newLabel();
    Label chain = a.newLabel(), direct_ok = a.newLabel(), chain_enter = a.newLabel(), entered = a.newLabel();
    load(xr::rax, ip->a);
    object_or_view(xr::rax, xr::rdx, next, next);
    a.cmp(xr::dword_ptr(xr::rax, (int32_t)offsetof(Obj, kind)), (int32_t)Kind::Closure);
    a.jne(next);
    a.mov(xr::rdx, xr::qword_ptr(xr::rax, closure_lambda));
    // ȳ = +0.0 for a structural one: all zero, as back_call skips it (whether or not its body
    // has native code: one that is always skipped never runs, so never gets any — W7's lookup)
    load(xr::rcx, ip->b);
    a.cmp(xr::byte_ptr(xr::rdx, lambda_structural), 0);
    a.je(called);
    a.mov(xr::r8, Value::real(0.0).bits);
    a.cmp(xr::rcx, xr::r8);
    a.je(zero);
    a.bind(called);
    a.cmp(xr::qword_ptr(xr::rdx, lambda_raw_direct), 0);
    a.je(chain);
    a.bind(direct_ok);
    cold([&] {
      // a chain's head whose chain is short (vlad_jit_short_chain); else to `next` (run_raw)
      a.bind(chain);
      a.cmp(xr::qword_ptr(xr::rdx, lambda_raw_chain), 0);
      a.je(next);
      a.mov(xr::rdi, xr::rax);
      call((const void*)&vlad_jit_short_chain);
      a.test(xr::eax, xr::eax);
      a.jz(next);
      load(xr::rax, ip->a);
      a.mov(xr::rdx, xr::qword_ptr(xr::rax, closure_lambda));
      a.jmp(direct_ok);
      a.bind(chain_enter);
      count(offsetof(WorkCounters, steps), -1);
      count(offsetof(WorkCounters, applications), -1);
      enter_callee(ip, lambda_raw_chain, false, false, nullptr, record);
      a.jmp(entered);
    });
    load(xr::rcx, ip->b);
    a.mov(xr::r8, kOffset);
    a.cmp(xr::rcx, xr::r8);
    a.jae(y_ok);
    // an object but a lazy zero or a string (back_call's zero_sensitivity): a pair, a closure
    // (the sensitivity of a procedure value), a bundle (a backward pass under a forward
    // derivative), a tagged value
    object_or_view(xr::rcx, xr::r8, next, next);
    a.cmp(xr::dword_ptr(xr::rcx, (int32_t)offsetof(Obj, kind)), (int32_t)Kind::Zero);
    a.je(next);
    a.cmp(xr::dword_ptr(xr::rcx, (int32_t)offsetof(Obj, kind)), (int32_t)Kind::String);
    a.je(next);
    a.bind(y_ok);
    a.mov(xr::rdx, xr::qword_ptr(xr::rdx, lambda_raw_direct));  // (rax = the callee still)
    a.test(xr::rdx, xr::rdx);
    a.jz(chain_enter);
    enter_callee(ip, lambda_raw_direct, false, true, nullptr, record);
    a.bind(entered);
    if (ip->split3) a.mov(xr::byte_ptr(xr::rsp, exec_want3), 1);  // x̄'s parts: Exit::Triple
    load(xr::r9, ip->b);
    a.mov(xr::qword_ptr(xr::rcx), xr::r9);  // fr[0] = ȳ
    a.xor_(xr::esi, xr::esi);
    a.mov(xr::rdi, xr::rsp);
    a.call(xr::qword_ptr(xr::rdx, code_native));
    a.cmp(xr::eax, kThrown);
    a.je(thrown);
    a.mov(xr::rsi, xr::qword_ptr(xr::rsp, exec_r1));
    a.mov(xr::rdx, xr::qword_ptr(xr::rsp, exec_r2));
    if (ip->split3) a.mov(xr::r9, xr::qword_ptr(xr::rsp, exec_r3));
    leave_frame(record);  // (the halves in rsi, rdx (and r9): nothing runs before they are stored)
    if (ip->split3) {  // f̄ and x̄'s parts, no x̄ made
      Label not3 = a.newLabel();
      a.cmp(xr::eax, (int32_t)Exit::Triple);
      a.jne(not3);
      store(ip->x, xr::rsi);
      store(ip->x2, xr::rdx);
      store(ip->x3, xr::r9);
      a.jmp(end);
      a.bind(not3);
    }
    a.cmp(xr::eax, (int32_t)Exit::Pair);
    a.jne(general);
    if (ip->split3) {  // x̄ a pair: its parts (split_sensitivity)
      kind_guard_of(xr::rdx, xr::r8, Kind::Pair, general);
      store(ip->x, xr::rsi);
      a.mov(xr::r8, xr::qword_ptr(xr::rdx, pair_car));
      store(ip->x2, xr::r8);
      a.mov(xr::r8, xr::qword_ptr(xr::rdx, pair_cdr));
      store(ip->x3, xr::r8);
    } else {
      store(ip->x, xr::rsi);
      store(ip->x2, xr::rdx);
    }
    a.jmp(end);
    cold([&] {
      a.bind(general);
      a.mov(xr::r8, xr::rdx);
      a.mov(xr::rcx, xr::rsi);
      a.mov(xr::edx, xr::eax);
      a.mov(xr::rsi, (uint64_t)ip);
      a.mov(xr::rdi, kEx);
      call((const void*)&vlad_jit_back_done);
      check_continue();
      a.jmp(end);
      a.bind(thrown);
      leave_frame(record);
      a.mov(xr::eax, kThrown);
      a.jmp(ret);
    });
  }

  // In a direct call, its callee's frame entered (enter_callee): rax = a new pair of the caller's
  // operands (vlad_jit_pair; to `thrown` at the heap limit), then rcx = the callee's frame and
  // rdx = its Code again (the call clobbered them).
  void pair_for_callee(int car_op, int cdr_op, Label thrown) {
    load(xr::rdi, car_op);
    load(xr::rsi, cdr_op);
    callee_pair(thrown);
  }
  // rax = (rdi . rsi) for a callee whose frame is entered (to `thrown` at the heap limit), then
  // rcx = its frame and rdx = its Code again.
  void callee_pair(Label thrown) {
    call((const void*)&vlad_jit_pair);
    a.test(xr::rax, xr::rax);
    a.jz(thrown);
    a.mov(xr::rcx, xr::qword_ptr(xr::rsp, exec_fr));
    a.mov(xr::rdx, xr::qword_ptr(xr::rsp, exec_self));
    a.mov(xr::rdx, xr::qword_ptr(xr::rdx, closure_lambda));
    a.mov(xr::rdx, xr::qword_ptr(xr::rdx, lambda_direct));
  }

  // v = (*j-inverse v) when v is a reverse-tagged object (its value) or a view of *j of data
  // (the pair, or the part of it, that it stands for): star_j_inverse_parts's parts; anything
  // else jumps to `fail`. Clobbers rdx.
  void j_inverse_part(const xr::Gp& v, Label fail) {
    Label view = a.newLabel(), out = a.newLabel(), car_side = a.newLabel();
    object_or_view(v, xr::rdx, fail, view);
    a.cmp(xr::dword_ptr(v, (int32_t)offsetof(Obj, kind)), (int32_t)Kind::Reverse);
    a.jne(fail);
    a.mov(v, xr::qword_ptr(v, node_v));
    a.jmp(out);
    a.bind(view);
    a.mov(xr::rdx, v);
    a.and_(xr::rdx, 15);
    a.and_(v, -16);
    a.cmp(xr::rdx, (int32_t)kViewJ);
    a.je(out);
    a.cmp(xr::rdx, (int32_t)kViewJCar);
    a.je(car_side);
    a.cmp(xr::rdx, (int32_t)kViewJCdr);
    a.jne(fail);
    a.mov(v, xr::qword_ptr(v, pair_cdr));
    a.jmp(out);
    a.bind(car_side);
    a.mov(v, xr::qword_ptr(v, pair_car));
    a.bind(out);
  }

  // The callee's outcome eax that native code does not take: vlad_jit_return (or, with `chain`,
  // vlad_jit_return_chain, the chain backpropagator and hole pushed by tail_callee_frame), which
  // leaves the frame.
  void runtime_return(const Instr* ip, bool chain) {
    a.mov(xr::rdi, kEx);
    a.mov(xr::rsi, (uint64_t)ip);
    a.mov(xr::rdx, xr::rsp);
    a.mov(xr::ecx, xr::eax);
    if (chain) {
      a.mov(xr::r8, xr::qword_ptr(xr::rbp, -kFrameBytes - 8));
      a.mov(xr::r9d, xr::dword_ptr(xr::rbp, -kFrameBytes - 16));
    }
    call(chain ? (const void*)&vlad_jit_return_chain : (const void*)&vlad_jit_return);
    a.lea(xr::rsp, xr::ptr(xr::rbp, -kFrameBytes));
    check_continue();
  }
  // The callee's code (rdx: its Code) run on its Exec at rsp; eax: how it ended. (kWork and
  // kMeter, the same in every body of the thread, are passed as they are: body's prologue.)
  void call_callee_code() {
    a.mov(xr::rdi, xr::rsp);
    // entries[start / 2]: start (esi, so rsi zero-extended) is 0, 2 or 4 here, 4 bytes a step
    a.call(xr::qword_ptr(xr::rdx, xr::rsi, 2, code_entry));
  }
  // After a callee's exit `e` (a tail call, or a chain tail call): to `go_on` when its new callee
  // is a closure with native code and no chain is pending (vlad_jit_tail: Ctrl-C checked, the
  // call record updated), else to `general` with eax = e.
  // (Inline, as vlad_jit_tail does it, when the layout is in reach: the call only for Ctrl-C.)
  void tail_check(Exit e, Label go_on, Label general, Label thrown) {
    Label slow = a.newLabel(), not_direct = a.newLabel();
    a.cmp(xr::qword_ptr(xr::rsp, exec_pend_first), 0);
    a.jne(general);
    if (enter.ok && depth_offset_ok) {
      Label write = a.newLabel(), internal_pos = a.newLabel();
      a.mov(xr::rax, xr::qword_ptr(xr::rsp, exec_f));
      kind_guard(Kind::Closure, not_direct);
      a.mov(xr::rdx, xr::qword_ptr(xr::rax, closure_lambda));
      a.cmp(xr::qword_ptr(xr::rdx, lambda_direct), 0);
      a.je(not_direct);
      // note_tail_call: the record's callee; its position the call site's, unless the site is
      // in the prelude or the rules and the record's is not
      record_callee(slow);
      a.mov(xr::rdi, xr::qword_ptr(xr::rsp, exec_tail_pos));
      a.mov(xr::rdx, (uint64_t)prelude_file());
      a.cmp(xr::rdi, xr::rdx);
      a.je(internal_pos);
      a.mov(xr::rdx, (uint64_t)rules_file());
      a.cmp(xr::rdi, xr::rdx);
      a.jne(write);
      a.bind(internal_pos);
      internal_site_replaces(xr::r8, write, go_on);
      a.bind(write);
      a.mov(xr::qword_ptr(xr::rcx, enter.record_pos), xr::rdi);
      a.mov(xr::rdi, xr::qword_ptr(xr::rsp, exec_tail_pos + 8));
      a.mov(xr::qword_ptr(xr::rcx, enter.record_pos + 8), xr::rdi);
      a.jmp(go_on);
    }
    a.bind(slow);
    a.mov(xr::rdi, xr::rsp);
    call((const void*)&vlad_jit_tail);
    a.cmp(xr::eax, kThrown);
    a.je(thrown);
    a.test(xr::eax, xr::eax);
    a.jnz(go_on);
    a.bind(not_direct);
    a.mov(xr::eax, (int32_t)e);
    a.jmp(general);
  }
  // The new callee's Exec and frame in place of the old one's, its argument in fr[0], esi = 0;
  // with `chain`, the old callee's chain backpropagator and hole pushed first, below the frame's
  // base ([rbp - kFrameBytes - 8], - 16).
  // An argument left in two parts (Exec::arg2) goes into the slots where the new callee takes
  // it apart (Code::arg_x, entered at its instruction 2, as a direct call passes an AppPair's),
  // or becomes a pair (to `thrown` at the heap limit).
  void tail_callee_frame(bool chain, Label thrown) {
    Label whole = a.newLabel(), entered = a.newLabel(), make_pair = a.newLabel();
    a.mov(xr::rax, xr::qword_ptr(xr::rsp, exec_f));
    a.mov(xr::r9, xr::qword_ptr(xr::rsp, exec_arg));
    a.mov(xr::rdi, xr::qword_ptr(xr::rsp, exec_arg2));
    if (chain) {
      a.mov(xr::r10, xr::qword_ptr(xr::rsp, exec_chain));
      a.movsxd(xr::r11, xr::dword_ptr(xr::rsp, exec_hole));
    }
    a.lea(xr::rsp, xr::ptr(xr::rbp, -kFrameBytes));
    if (chain) {
      a.push(xr::r10);
      a.push(xr::r11);
    }
    a.mov(xr::rdx, xr::qword_ptr(xr::rax, closure_lambda));
    a.mov(xr::rdx, xr::qword_ptr(xr::rdx, lambda_direct));
    make_callee_frame();
    a.cmp(xr::rdi, (int32_t)Value::kUnbound);
    a.je(whole);
    a.movsxd(xr::r8, xr::dword_ptr(xr::rdx, code_arg_x));
    a.test(xr::r8, xr::r8);
    a.js(make_pair);
    a.mov(xr::qword_ptr(xr::rcx, xr::r8, 3), xr::r9);
    a.movsxd(xr::r8, xr::dword_ptr(xr::rdx, code_arg_x2));
    a.mov(xr::qword_ptr(xr::rcx, xr::r8, 3), xr::rdi);
    a.mov(xr::esi, 2);
    a.jmp(entered);
    cold([&] {
      a.bind(make_pair);
      a.mov(xr::rsi, xr::rdi);
      a.mov(xr::rdi, xr::r9);
      callee_pair(thrown);
      a.mov(xr::r9, xr::rax);
      a.jmp(whole);
    });
    a.bind(whole);
    a.mov(xr::qword_ptr(xr::rcx), xr::r9);  // fr[0]: the argument
    a.xor_(xr::esi, xr::esi);
    a.bind(entered);
  }

  void emit_direct_call(const Instr* ip) {
    // Only the ways of calling the kinds of callee the interpreter met here (all, before it has
    // run the call); any other goes to the interpreter's step.
    guarded(ip, [&](Label slow) {
      Label go = a.newLabel(), other = a.newLabel(), thrown = a.newLabel(),
            done = a.newLabel(), tail_go = a.newLabel();
      // A transformed backpropagator call (raw_apply): the raw variant of the closure's lambda
      // over its environment, entered directly when it has native code; nothing else here.
      bool raw = ip->raw_call;
      // an argument of three parts passed as three when only closures were met here
      bool three = !raw && ip == pair_deferred && !met(ip, kSeenPrim) && !met(ip, kSeenNative);
      if (!three) make_deferred_pair(ip);
      load(xr::rax, ip->a);
      if (!raw && ip->split && met(ip, kSeenPrim)) {
        // (*j-inverse xr) taken apart, xr a pair of reverse values (a primitive's reverse rule
        // under a further transform): the parts' *j-inverse as split_star_j_inverse gives them
        Label not_jinv = a.newLabel();
        a.mov(xr::rdx, (uint64_t)current->p_star_j_inverse);
        a.cmp(xr::rax, xr::rdx);
        a.jne(not_jinv);
        if (ip->op2 == AppPair) {
          load(xr::rsi, ip->b);
          load(xr::rdi, ip->b2);
        } else {
          load(xr::rcx, ip->b);
          kind_guard_of(xr::rcx, xr::rdx, Kind::Pair, slow);
          a.mov(xr::rsi, xr::qword_ptr(xr::rcx, pair_car));
          a.mov(xr::rdi, xr::qword_ptr(xr::rcx, pair_cdr));
        }
        j_inverse_part(xr::rsi, slow);
        j_inverse_part(xr::rdi, slow);
        store(ip->x, xr::rsi);
        store(ip->x2, xr::rdi);
        count(offsetof(WorkCounters, applications));
        a.jmp(done);
        a.bind(not_jinv);
      }
      if (!raw && !ip->split && ip->op2 == AppPair && met(ip, kSeenPrim)) {
        // a primitive of real arithmetic or comparison on two reals (the callee a variable:
        // (map2 + u v), say): its own function, which cannot fail on reals (op_app's fn2 case)
        Label not_prim = a.newLabel(), arith = a.newLabel();
        object_or_view(xr::rax, xr::rdx, not_prim, not_prim);
        a.cmp(xr::dword_ptr(xr::rax, (int32_t)offsetof(Obj, kind)), (int32_t)Kind::Prim);
        a.jne(not_prim);
        a.cmp(xr::dword_ptr(xr::rax, prim_arity), 2);
        a.jne(slow);
        a.cmp(xr::qword_ptr(xr::rax, prim_fn2), 0);
        a.je(slow);
        a.movzx(xr::edx, xr::byte_ptr(xr::rax, prim_cls));
        a.cmp(xr::edx, (int32_t)PrimClass::Arith);
        a.je(arith);
        a.cmp(xr::edx, (int32_t)PrimClass::Compare);
        a.jne(slow);
        a.bind(arith);
        load(xr::rsi, ip->b);
        load(xr::rdx, ip->b2);
        a.mov(xr::r8, kOffset);
        a.cmp(xr::rsi, xr::r8);
        a.jb(slow);
        a.cmp(xr::rdx, xr::r8);
        a.jb(slow);
        a.mov(xr::rdi, xr::rax);
        a.call(xr::qword_ptr(xr::rdi, prim_fn2));
        store(ip->x, xr::rax);
        count(offsetof(WorkCounters, applications));
        a.jmp(done);
        a.bind(not_prim);
      }
      Value expect;
      Lambda* kl = raw ? nullptr : known_closure(ip->a, &expect);
      if (kl) {
        expect_guard(expect, slow);
        a.mov(xr::rdx, (uint64_t)kl);
      } else {
        kind_guard(Kind::Closure, slow);
        a.mov(xr::rdx, xr::qword_ptr(xr::rax, closure_lambda));
      }
      if (raw) {
        a.mov(xr::rdx, xr::qword_ptr(xr::rdx, lambda_raw_variant));
        a.test(xr::rdx, xr::rdx);
        a.jz(slow);
      }
      if (!raw && !ip->split && ip->op2 == AppPair && met(ip, kSeenNative)) {  // a callee with a native form of two arguments (op_app's case)
        Label no_native = a.newLabel();
        emit_native2(ip, no_native, slow, done, kl);
        a.bind(no_native);
      }
      if (!raw && !ip->split && ip->op2 != AppPair && met(ip, kSeenClosure) && known_fwd_unary(ip->a)) emit_fwd_unary(ip, done, slow);  // (apply_core's native1 case)
      if (!raw && ip->split && met(ip, kSeenNative)) {  // a callee with a native forward phase: called here (run_split's first case)
        Label no_split = a.newLabel();
        bool two = ip->op2 == AppPair;
        const void* ks = kl ? (two ? (const void*)kl->native_split2 : (const void*)kl->native_split1) : nullptr;
        if (ks) {
          a.mov(xr::rdi, (uint64_t)ks);
        } else {
          a.mov(xr::rdi, xr::qword_ptr(xr::rdx, two ? lambda_split2 : lambda_split1));
          a.test(xr::rdi, xr::rdi);
          a.jz(no_split);
        }
        if (!two) {
          // (with the callee known, only the form that applies)
          if (!ks || ks == (const void*)rev_car_split() || ks == (const void*)rev_cdr_split())
            emit_projection_split(ip, done, ks);
          if (Prim* p = known_rev_test(ip->a)) emit_test_split(ip, p, done, kl);
          if (Prim* p = known_rev_unary(ip->a)) emit_unary_split(ip, p, done, kl);
        }
        a.sub(xr::rsp, 16);  // out[2]
        a.mov(xr::rsi, xr::rax);
        load(xr::rdx, ip->b);
        if (two) {
          load(xr::rcx, ip->b2);
          a.mov(xr::r8, xr::rsp);
          a.mov(xr::r9, (uint64_t)ip);
        } else {
          a.mov(xr::rcx, xr::rsp);
          a.mov(xr::r8, (uint64_t)ip);
        }
        call(two ? (const void*)&vlad_jit_split2 : (const void*)&vlad_jit_split1);
        halves_or_fall_through(ip, done);
        a.jmp(slow);
        a.bind(no_split);
      }
      if (!met(ip, kSeenClosure)) {
        a.jmp(slow);
        a.bind(done);
        return;
      }
      // (rax = the callee, rdx = its lambda; a known closure's native code, once made, is its
      // for good: Lambda::direct is set once)
      const Code* kc = kl ? kl->direct : nullptr;
      if (kl && !kc && kl == top->lam && self_loop) kc = top;  // (this body: its Lambda::direct once compiled)
      if (kc) {
        a.mov(xr::rdx, (uint64_t)kc);
      } else {
        a.mov(xr::rdx, xr::qword_ptr(xr::rdx, lambda_direct));
        a.test(xr::rdx, xr::rdx);
        a.jz(slow);
      }
      enter_callee(ip, lambda_direct, raw, true, kc);
      // The callee's argument slots (Code::arg_x ...), when known here: a compiled callee's, or
      // this body's own, decided before its instructions (plan_self_loop); -2: read them at run time.
      int ks[4] = {-2, -2, -2, -2};
      if (kc == top) {
        ks[0] = arg_car ? arg_car->x : -1;
        ks[1] = arg_car ? arg_cdr->x : -1;
        ks[2] = arg3_car ? arg3_car->x : -1;
        ks[3] = arg3_car ? arg3_cdr->x : -1;
      } else if (kc) {
        ks[0] = kc->arg_x, ks[1] = kc->arg_x2, ks[2] = kc->arg_x3, ks[3] = kc->arg_x4;
      }
      // argument slot k of the callee's frame (rcx) = r9: at its known index, or at the index in
      // register t, read from the callee's Code
      auto to_slot = [&](int k, const xr::Gp& t) {
        if (ks[k] >= 0) a.mov(xr::qword_ptr(xr::rcx, ks[k] * 8), xr::r9);
        else a.mov(xr::qword_ptr(xr::rcx, t, 3), xr::r9);
      };
      if (three && ks[2] != -1) {
        Label two = a.newLabel();
        if (ks[2] == -2) {
          a.movsxd(xr::r8, xr::dword_ptr(xr::rdx, code_arg_x3));
          a.test(xr::r8, xr::r8);
          a.js(two);
          a.movsxd(xr::r10, xr::dword_ptr(xr::rdx, code_arg_x));  // (in the order its first four write them)
        }
        load(xr::r9, ip->b);
        to_slot(0, xr::r10);
        load(xr::r9, (ip - 1)->a);
        to_slot(2, xr::r8);
        if (ks[3] == -2) a.movsxd(xr::r8, xr::dword_ptr(xr::rdx, code_arg_x4));
        load(xr::r9, (ip - 1)->b);
        to_slot(3, xr::r8);
        a.mov(xr::esi, 4);
        a.jmp(go);
        a.bind(two);  // a callee that takes the argument otherwise: the inner pair made now
        pair_for_callee((ip - 1)->a, (ip - 1)->b, thrown);
        store((ip - 1)->x, xr::rax);
      } else if (three) {
        pair_for_callee((ip - 1)->a, (ip - 1)->b, thrown);
        store((ip - 1)->x, xr::rax);
      }
      if (ip->op2 == AppPair && ks[0] != -1) {
        Label make_pair = a.newLabel();
        if (ks[0] == -2) {
          a.movsxd(xr::r8, xr::dword_ptr(xr::rdx, code_arg_x));
          a.test(xr::r8, xr::r8);
          a.js(make_pair);
        }
        load(xr::r9, ip->b);
        to_slot(0, xr::r8);
        if (ks[1] == -2) a.movsxd(xr::r8, xr::dword_ptr(xr::rdx, code_arg_x2));
        load(xr::r9, ip->b2);
        to_slot(1, xr::r8);
        a.mov(xr::esi, 2);
        a.jmp(go);
        a.bind(make_pair);
        pair_for_callee(ip->b, ip->b2, thrown);
        a.mov(xr::qword_ptr(xr::rcx), xr::rax);
      } else if (ip->op2 == AppPair) {
        pair_for_callee(ip->b, ip->b2, thrown);
        a.mov(xr::qword_ptr(xr::rcx), xr::rax);
      } else {
        load(xr::r9, ip->b);
        a.mov(xr::qword_ptr(xr::rcx), xr::r9);
      }
      a.xor_(xr::esi, xr::esi);
      a.bind(go);
      call_callee_code();
      Label pend = a.newLabel();
      a.cmp(xr::qword_ptr(xr::rsp, exec_pend_first), 0);
      a.jne(ip->split ? pend : other);  // (with eax, the exit, kept)
      if (ip->split) {
        // The callee's native loop made chain links (pend_first ... pend_last) before its way out
        // gave (value . b̃): b̃ fills the last link's hole and the first link is this call's
        // backpropagator, as vlad_jit_return links them; other exits, the runtime.
        cold([&] {
          a.bind(pend);
          a.cmp(xr::eax, (int32_t)Exit::Pair);
          a.jne(other);
          a.mov(xr::r8, xr::qword_ptr(xr::rsp, exec_pend_last));
          a.movsxd(xr::r9, xr::dword_ptr(xr::rsp, exec_pend_hole));
          a.mov(xr::rcx, xr::qword_ptr(xr::rsp, exec_r2));
          a.mov(xr::qword_ptr(xr::r8, xr::r9, 3, closure_env), xr::rcx);
          a.mov(xr::rax, xr::qword_ptr(xr::rsp, exec_r1));
          a.mov(xr::rcx, xr::qword_ptr(xr::rsp, exec_pend_first));
          leave_frame();
          store(ip->x, xr::rax);
          store(ip->x2, xr::rcx);
          a.jmp(done);
        });
      }
      if (!ip->split) {
        Label pair_exit = a.newLabel();
        a.cmp(xr::eax, (int32_t)Exit::Value);
        a.jne(pair_exit);
        a.mov(xr::rax, xr::qword_ptr(xr::rsp, exec_r1));
        leave_frame();
        store(ip->x, xr::rax);
        a.jmp(done);
        // a pair (its last binding a cons, delivered as two halves) for a caller that keeps it
        // whole: the pair made here, as vlad_jit_return makes it, when its cdr is not a view
        // (which it would materialise) and the free list has one; eax (the exit) kept otherwise
        a.bind(pair_exit);
        if (alloc_ok) {
          Label pair_other = a.newLabel(), plain = a.newLabel();
          a.cmp(xr::eax, (int32_t)Exit::Pair);
          a.jne(other);
          a.mov(xr::r9, xr::qword_ptr(xr::rsp, exec_r2));
          a.mov(xr::r8, xr::r9);
          a.shr(xr::r8, 48);
          a.cmp(xr::r8, 1);
          a.je(other);  // an immediate view
          a.ja(plain);  // a real
          a.cmp(xr::r9, 0xff);
          a.jbe(plain);
          a.test(xr::r9b, 15);
          a.jnz(other);  // a view of an object
          a.bind(plain);
          emit_alloc_from_list(sizeof(Pair), pair_other);
          write_header(Kind::Pair, 0);
          a.mov(xr::rcx, xr::qword_ptr(xr::rsp, exec_r1));
          a.mov(xr::qword_ptr(xr::rax, pair_car), xr::rcx);
          a.mov(xr::qword_ptr(xr::rax, pair_cdr), xr::r9);
          leave_frame();
          store(ip->x, xr::rax);
          a.jmp(done);
          a.bind(pair_other);
          a.mov(xr::eax, (int32_t)Exit::Pair);
        }
        a.jmp(other);
      } else {
        a.cmp(xr::eax, (int32_t)Exit::Pair);
        a.jne(other);
        a.mov(xr::rax, xr::qword_ptr(xr::rsp, exec_r1));
        a.mov(xr::rcx, xr::qword_ptr(xr::rsp, exec_r2));
        leave_frame();
        store(ip->x, xr::rax);
        store(ip->x2, xr::rcx);
        a.jmp(done);
      }
      a.bind(other);
      a.cmp(xr::eax, kThrown);
      a.je(thrown);
      // A tail call to another closure with native code: the frame goes on with it here, as
      // apply_core's loop goes on (the callee's Exec and frame replaced, the depth kept).
      Label general = a.newLabel(), chain_tail = a.newLabel();
      if (ip->split) {
        a.cmp(xr::eax, (int32_t)Exit::ChainTail);
        a.je(chain_tail);
      }
      a.cmp(xr::eax, (int32_t)Exit::Tail);
      a.jne(general);
      tail_check(Exit::Tail, tail_go, general, thrown);
      a.bind(tail_go);
      tail_callee_frame(false, thrown);
      a.jmp(go);
      if (ip->split) {
        // A chain tail call (the callee's way out a tail call, its backpropagator B made with a
        // hole): to another closure with native code, the frame goes on with it here, B kept on
        // the stack below the frame's base ([rbp - kFrameBytes - 8], its hole at - 16); when the
        // new callee gives (value . b̃), b̃ fills B's hole and this call's halves are the value
        // and B, as apply_core and vlad_jit_return link them; any other outcome, the runtime.
        Label chain_go = a.newLabel(), chain_general = a.newLabel();
        a.bind(chain_tail);
        tail_check(Exit::ChainTail, chain_go, general, thrown);
        a.bind(chain_go);
        tail_callee_frame(true, thrown);
        call_callee_code();
        a.cmp(xr::eax, kThrown);
        a.je(thrown);
        a.cmp(xr::eax, (int32_t)Exit::Pair);
        a.jne(chain_general);
        Label chain_pend = a.newLabel(), chain_pair = a.newLabel();
        a.mov(xr::r8, xr::qword_ptr(xr::rbp, -kFrameBytes - 8));   // B
        a.mov(xr::r9, xr::qword_ptr(xr::rbp, -kFrameBytes - 16));  // its hole
        a.mov(xr::rcx, xr::qword_ptr(xr::rsp, exec_pend_first));
        a.test(xr::rcx, xr::rcx);
        a.jnz(chain_pend);
        a.mov(xr::rcx, xr::qword_ptr(xr::rsp, exec_r2));
        a.bind(chain_pair);
        a.mov(xr::qword_ptr(xr::r8, xr::r9, 3, closure_env), xr::rcx);
        a.mov(xr::rax, xr::qword_ptr(xr::rsp, exec_r1));
        leave_frame();
        store(ip->x, xr::rax);
        store(ip->x2, xr::r8);
        a.jmp(done);
        cold([&] {
          // the new callee's native loop made chain links (pend_first ... pend_last) first: B's
          // hole gets the first, the last's hole b̃, as vlad_jit_return_chain links them
          a.bind(chain_pend);
          a.mov(xr::r10, xr::qword_ptr(xr::rsp, exec_pend_last));
          a.movsxd(xr::r11, xr::dword_ptr(xr::rsp, exec_pend_hole));
          a.mov(xr::rdx, xr::qword_ptr(xr::rsp, exec_r2));
          a.mov(xr::qword_ptr(xr::r10, xr::r11, 3, closure_env), xr::rdx);
          a.jmp(chain_pair);
        });
        a.bind(chain_general);
        runtime_return(ip, true);
        a.jmp(done);
      }
      a.bind(general);
      runtime_return(ip, false);
      a.jmp(done);
      a.bind(thrown);
      leave_frame();
      a.mov(xr::eax, kThrown);
      a.jmp(ret);
      a.bind(done);
    });
  }

  // rax = the callee, a closure, rdx = its lambda: its native2 called with the instruction's two
  // arguments, the value stored, then on to `done`; to `none` (rax, rdx kept) when it has none,
  // to `slow` when it declines.
  void emit_native2(const Instr* ip, Label none, Label slow, Label done, Lambda* known = nullptr) {
    Label thrown = a.newLabel();
    if (Prim* p = known_fwd_binary(ip->a)) {
      emit_fwd_binary(ip, p, done, known);
    } else if (!known && top && top->lam && top->lam->transform == 'F') {
      // a callee not known in forward-transformed code (map2's f): the forward rules of + - *
      // tried in turn, each behind its guard
      for (const char* n : {"+", "-", "*"}) emit_fwd_binary(ip, current->prim(n), done);
    }
    a.mov(xr::rdi, xr::qword_ptr(xr::rdx, lambda_native2));
    a.test(xr::rdi, xr::rdi);
    a.jz(none);
    a.mov(xr::rsi, xr::rax);
    load(xr::rdx, ip->b);
    load(xr::rcx, ip->b2);
    a.mov(xr::r8, (uint64_t)ip);
    call((const void*)&vlad_jit_native2);
    a.test(xr::rax, xr::rax);
    a.jz(thrown);
    a.cmp(xr::rax, (int32_t)Value::kUnbound);
    a.je(slow);  // declined: the interpreter's call
    native_value(ip, thrown, done);
  }

  // After a runtime call of a native form that answered: x = its value in rax, on to `done`;
  // at `thrown` (bound here), the body leaves with the error kept.
  void native_value(const Instr* ip, Label thrown, Label done) {
    store(ip->x, xr::rax);
    count(offsetof(WorkCounters, applications));
    a.jmp(done);
    a.bind(thrown);
    a.mov(xr::eax, kThrown);
    a.jmp(ret);
  }

  // out = the boxed real under v when v is a reverse real: an object of kind Reverse (a tagged
  // real, a primitive's record) holding a real, or a view of *j of a real in a data pair
  // (kViewJCar / kViewJCdr); else jumps to `fail`. r8 = kOffset. Clobbers rdx.
  void reverse_real_of(const xr::Gp& v, const xr::Gp& out, Label fail) {
    Label view = a.newLabel(), have = a.newLabel();
    object_or_view(v, xr::rdx, fail, view);
    a.cmp(xr::dword_ptr(v, (int32_t)offsetof(Obj, kind)), (int32_t)Kind::Reverse);
    a.jne(fail);
    a.mov(out, xr::qword_ptr(v, node_v));
    a.jmp(have);
    a.bind(view);
    a.mov(xr::rdx, v);
    a.and_(xr::rdx, 15);
    a.cmp(xr::rdx, (int32_t)kViewJCar);
    a.jb(fail);
    a.cmp(xr::rdx, (int32_t)kViewJCdr);
    a.ja(fail);
    a.mov(out, v);
    a.and_(out, -16);
    Label cdr_side = a.newLabel();
    a.cmp(xr::rdx, (int32_t)kViewJCdr);
    a.je(cdr_side);
    a.mov(out, xr::qword_ptr(out, pair_car));
    a.jmp(have);
    a.bind(cdr_side);
    a.mov(out, xr::qword_ptr(out, pair_cdr));
    a.bind(have);
    a.cmp(out, xr::r8);
    a.jb(fail);
  }

  // rax = r10 ⊕ r11 (plus of sensitivities) when plus gives it at once (emit_plus_now: no
  // operation is counted, as in `plus`), or for two pairs whose parts it gives at once (the
  // cdrs may be two such pairs again), a new pair of their sums taken from the free list
  // (plus_pairs's pair), or for two reverse reals (plus_rest's first case) a new (reverse (+ x
  // y)); anything else, and an empty free list: `fail`. Allocation must be on.
  // Emitted once, as a stub every body calls (plus_stub): inline, it made code too large.
  void emit_plus_body(Label fail) {
    Label pairs = a.newLabel(), out = a.newLabel();
    emit_plus_now(xr::r10, xr::r11, pairs);
    a.jmp(out);
    a.bind(pairs);
    // two reverse reals (a tagged real or a primitive's record on each side: sensitivities of
    // first-level reverse values under a further reverse transform): (reverse (+ x y)), a new
    // tagged real, as plus_rest makes it
    Label not_reverse = a.newLabel();
    a.mov(xr::r8, kOffset);
    reverse_real_of(xr::r10, xr::rsi, not_reverse);
    reverse_real_of(xr::r11, xr::rdi, not_reverse);
    a.sub(xr::rsi, xr::r8);
    a.movq(xr::xmm0, xr::rsi);
    a.sub(xr::rdi, xr::r8);
    a.movq(xr::xmm1, xr::rdi);
    a.addsd(xr::xmm0, xr::xmm1);
    box();
    a.mov(xr::rsi, xr::rax);
    emit_alloc_from_list(sizeof(Tagged), fail);
    write_header(Kind::Reverse, 0);
    a.mov(xr::qword_ptr(xr::rax, node_v), xr::rsi);
    a.jmp(out);
    a.bind(not_reverse);
    kind_guard_of(xr::r10, xr::rdx, Kind::Pair, fail);
    kind_guard_of(xr::r11, xr::rdx, Kind::Pair, fail);
    a.mov(xr::rsi, xr::qword_ptr(xr::r10, pair_car));
    a.mov(xr::rdi, xr::qword_ptr(xr::r11, pair_car));
    emit_plus_now(xr::rsi, xr::rdi, fail);
    a.mov(xr::r9, xr::rax);
    Label cdr_pairs = a.newLabel(), cdr_done = a.newLabel();
    a.mov(xr::rsi, xr::qword_ptr(xr::r10, pair_cdr));
    a.mov(xr::rdi, xr::qword_ptr(xr::r11, pair_cdr));
    emit_plus_now(xr::rsi, xr::rdi, cdr_pairs);
    a.mov(xr::rsi, xr::rax);
    a.jmp(cdr_done);
    // the cdrs two pairs whose parts it gives at once (a list's sensitivity, one more element):
    // that pair first
    a.bind(cdr_pairs);
    kind_guard_of(xr::rsi, xr::rdx, Kind::Pair, fail);
    kind_guard_of(xr::rdi, xr::rdx, Kind::Pair, fail);
    a.mov(xr::r10, xr::rsi);
    a.mov(xr::r11, xr::rdi);
    a.mov(xr::rsi, xr::qword_ptr(xr::r10, pair_car));
    a.mov(xr::rdi, xr::qword_ptr(xr::r11, pair_car));
    emit_plus_now(xr::rsi, xr::rdi, fail);
    a.mov(xr::rcx, xr::rax);
    a.mov(xr::rsi, xr::qword_ptr(xr::r10, pair_cdr));
    a.mov(xr::rdi, xr::qword_ptr(xr::r11, pair_cdr));
    emit_plus_now(xr::rsi, xr::rdi, fail);
    a.mov(xr::rsi, xr::rax);
    a.mov(xr::rdi, xr::rcx);
    emit_alloc_from_list(sizeof(Pair), fail);
    write_header(Kind::Pair, 0);
    a.mov(xr::qword_ptr(xr::rax, pair_car), xr::rdi);
    a.mov(xr::qword_ptr(xr::rax, pair_cdr), xr::rsi);
    a.mov(xr::rsi, xr::rax);
    a.bind(cdr_done);  // rsi: the cdr's sum, r9: the car's
    emit_alloc_from_list(sizeof(Pair), fail);
    write_header(Kind::Pair, 0);
    a.mov(xr::qword_ptr(xr::rax, pair_car), xr::r9);
    a.mov(xr::qword_ptr(xr::rax, pair_cdr), xr::rsi);
    a.bind(out);
  }

  // rax = x ⊕ y when plus gives it at once, in plus's order of cases: two reals (their sum),
  // the placeholder zero on either side, a lazy zero or zero view on the left, two of (), #t
  // and #f (the one that is not ()), a zero view on the right, or a lazy zero on the right of a
  // value that is not a view (the other value); anything else jumps to `fail`. Keeps x, y, r9–r11; clobbers rdx, r8, xmm0, xmm1.
  void emit_plus_now(const xr::Gp& x, const xr::Gp& y, Label fail) {
    Label not_reals = a.newLabel(), give_x = a.newLabel(), give_y = a.newLabel(), done = a.newLabel();
    a.mov(xr::r8, kOffset);
    a.cmp(x, xr::r8);
    a.jb(not_reals);
    a.cmp(y, xr::r8);
    a.jb(not_reals);
    a.mov(xr::rdx, x);
    a.sub(xr::rdx, xr::r8);
    a.movq(xr::xmm0, xr::rdx);
    a.mov(xr::rdx, y);
    a.sub(xr::rdx, xr::r8);
    a.movq(xr::xmm1, xr::rdx);
    a.addsd(xr::xmm0, xr::xmm1);
    box();
    a.jmp(done);
    a.bind(not_reals);
    a.cmp(x, (int32_t)Value::kZeroSens);
    a.je(give_y);
    a.cmp(y, (int32_t)Value::kZeroSens);
    a.je(give_x);
    Label x_not_zero = a.newLabel(), x_view = a.newLabel();
    // x a lazy zero (an object of kind Zero) or a zero view: y
    object_or_view(x, xr::rdx, x_not_zero, x_view);
    a.cmp(xr::dword_ptr(x, (int32_t)offsetof(Obj, kind)), (int32_t)Kind::Zero);
    a.je(give_y);
    a.jmp(x_not_zero);
    a.bind(x_view);
    a.mov(xr::rdx, x);
    a.and_(xr::rdx, 15);
    a.cmp(xr::rdx, (int32_t)kViewZero);
    a.je(give_y);
    a.cmp(xr::rdx, (int32_t)kViewRZero);
    a.je(give_y);
    a.bind(x_not_zero);
    // (), #t or #f on both sides (values without a real: plus_rest's inert case): the one that
    // is not () (either, when both are)
    Label not_atoms = a.newLabel(), x_atom = a.newLabel(), y_atom = a.newLabel();
    for (const xr::Gp* r : {&x, &y}) {
      Label& to = r == &x ? x_atom : y_atom;
      a.cmp(*r, (int32_t)Value::kNil);
      a.je(to);
      a.cmp(*r, (int32_t)Value::kFalse);
      a.je(to);
      a.cmp(*r, (int32_t)Value::kTrue);
      a.jne(not_atoms);
      a.bind(to);
    }
    a.cmp(x, (int32_t)Value::kNil);
    a.je(give_y);
    a.cmp(y, (int32_t)Value::kNil);
    a.je(give_x);
    a.cmp(x, y);  // (two different booleans do not conform: the primitive says so)
    a.jne(fail);
    a.jmp(give_x);
    a.bind(not_atoms);
    // y a zero view, or a lazy zero with x no view: x
    a.cmp(y, 0xff);
    a.jbe(fail);
    a.mov(xr::rdx, y);
    a.shr(xr::rdx, 48);
    a.jnz(fail);
    a.mov(xr::rdx, y);
    a.and_(xr::rdx, 15);
    Label y_obj = a.newLabel();
    a.jz(y_obj);
    a.cmp(xr::rdx, (int32_t)kViewZero);
    a.je(give_x);
    a.cmp(xr::rdx, (int32_t)kViewRZero);
    a.je(give_x);
    a.jmp(fail);
    a.bind(y_obj);
    a.cmp(xr::dword_ptr(y, (int32_t)offsetof(Obj, kind)), (int32_t)Kind::Zero);
    a.jne(fail);
    a.mov(xr::rdx, x);  // x must not be a view (plus would give the value it stands for)
    a.shr(xr::rdx, 48);
    a.cmp(xr::rdx, 1);
    a.je(fail);      // an immediate view
    a.ja(give_x);    // a real
    a.cmp(x, 0xff);  // a constant
    a.jbe(give_x);
    a.test(x.r8(), 15);
    a.jnz(fail);  // a view of an object
    a.bind(give_x);
    a.mov(xr::rax, x);
    a.jmp(done);
    a.bind(give_y);
    a.mov(xr::rax, y);
    a.bind(done);
  }

  // A tail call of a closure (not one op_app computes at once: a native form of two arguments):
  // the body ends with Exit::Tail, the callee and its argument (a new pair for two) in the
  // Exec, as op_app leaves them; whoever ran the body makes the call.
  void emit_tail_call(const Instr* ip) {
    guarded(ip, [&](Label slow) {
      Label value = a.newLabel(), exit = a.newLabel(), other = a.newLabel();
      load(xr::rax, ip->a);
      kind_guard(Kind::Closure, other);
      cold([&] {  // a primitive: its value now, in this body's frame (apply_core's loop would)
        a.bind(other);
        kind_guard(Kind::Prim, slow);
        a.mov(xr::rdi, kEx);
        a.mov(xr::rsi, (uint64_t)ip);
        call((const void*)&vlad_jit_tail_prim);
        check_continue();
        a.jmp(value);
      });
      a.mov(xr::rdx, xr::qword_ptr(xr::rax, closure_lambda));
      if (ip->op2 == AppPair) {
        if (Prim* p = known_fwd_binary(ip->a)) emit_fwd_binary(ip, p, value);  // op_app's native2 case
        a.cmp(xr::qword_ptr(xr::rdx, lambda_native2), 0);
        a.jne(slow);
      } else if (known_fwd_unary(ip->a)) {
        emit_fwd_unary(ip, value, exit);  // apply_core's native1 case, for fwd_unary
      }
      a.bind(exit);
      a.mov(xr::qword_ptr(kEx, exec_f), xr::rax);
      emit_tail_exit(ip, Exit::Tail);
      a.bind(value);  // a value at once, in the call's slot: the body's value
    });
  }

  // The body ends with a tail call of the callee in Exec::f on ip's argument: the argument (a
  // pair of b and b2 made here, or b) and the call's position in the Exec, the call counted,
  // the exit e (Tail, or ChainTail with the Exec's chain and hole set).
  void emit_tail_exit(const Instr* ip, Exit e) {
    // (an AppPair's two parts left apart: the new callee's frame takes them apart, or makes
    // the pair; Exec::tail_arg)
    if (ip->op2 == AppPair) {
      load(xr::rax, ip->b2);
      a.mov(xr::qword_ptr(kEx, exec_arg2), xr::rax);
    } else {
      a.mov(xr::qword_ptr(kEx, exec_arg2), (int32_t)Value::kUnbound);
    }
    load(xr::rax, ip->b);
    a.mov(xr::qword_ptr(kEx, exec_arg), xr::rax);
    uint64_t pos[2];
    static_assert(sizeof(Pos) == sizeof pos, "a position is two words");
    memcpy(pos, &ip->src->pos, sizeof pos);
    a.mov(xr::rax, pos[0]);
    a.mov(xr::qword_ptr(kEx, exec_tail_pos), xr::rax);
    a.mov(xr::rax, pos[1]);
    a.mov(xr::qword_ptr(kEx, exec_tail_pos + 8), xr::rax);
    count(offsetof(WorkCounters, applications));
    a.mov(xr::eax, (int32_t)e);
    a.jmp(ret);
  }

  // A chain call (Instr::chain_call) of a closure with no native forward phase for it, as op_app
  // makes it: the backpropagator with a hole (ip->chain over ip->caps, () in the hole) becomes the
  // Exec's `chain`, the callee and its argument its tail call, and the body ends with ChainTail.
  // Any other callee (a reverse rule not known here, a primitive): the interpreter's step.
  void emit_chain_tail(const Instr* ip) {
    guarded(ip, [&](Label slow) {
      Label general = a.newLabel(), declined = a.newLabel();
      bool two = ip->op2 == AppPair;
      load(xr::rax, ip->a);
      kind_guard(Kind::Closure, slow);
      a.mov(xr::rdx, xr::qword_ptr(xr::rax, closure_lambda));
      a.mov(xr::rdi, xr::qword_ptr(xr::rdx, two ? lambda_split2 : lambda_split1));
      a.test(xr::rdi, xr::rdi);
      a.jz(general);
      // a callee with a native forward phase (list-ref's reverse version, a rule's): called at
      // once, its value and backpropagator the body's, the way out's backpropagator made
      // around the latter, as op_app's chain call does it (W6's (list-ref w k) in tail position)
      a.sub(xr::rsp, 16);  // out[2]
      a.mov(xr::rsi, xr::rax);
      load(xr::rdx, ip->b);
      if (two) {
        load(xr::rcx, ip->b2);
        a.mov(xr::r8, xr::rsp);
        a.mov(xr::r9, (uint64_t)ip);
      } else {
        a.mov(xr::rcx, xr::rsp);
        a.mov(xr::r8, (uint64_t)ip);
      }
      call(two ? (const void*)&vlad_jit_split2 : (const void*)&vlad_jit_split1);
      a.cmp(xr::eax, 1);
      a.jne(declined);
      a.mov(xr::rax, xr::qword_ptr(xr::rsp));
      a.mov(xr::qword_ptr(kEx, exec_r1), xr::rax);
      a.mov(xr::rax, xr::qword_ptr(xr::rsp, 8));
      a.mov(xr::qword_ptr(kEx, exec_r2), xr::rax);
      a.add(xr::rsp, 16);
      count(offsetof(WorkCounters, applications));
      emit_chain_way_out(ip);
      a.mov(xr::eax, (int32_t)Exit::Pair);
      a.jmp(ret);
      a.bind(declined);  // (declined: the interpreter's step, which asks it again, then calls it)
      a.add(xr::rsp, 16);
      a.cmp(xr::eax, kThrown);
      a.je(ret);
      a.jmp(slow);
      a.bind(general);
      if (rebuild_arg) emit_rebuild_arg();  // (the backpropagator may hold the argument)
      emit_closure(ip->chain, ip->ncaps, ip->caps, ip->hole, [&] { a.mov(xr::ecx, (int32_t)Value::kNil); });
      a.mov(xr::qword_ptr(kEx, exec_chain), xr::rax);
      a.mov(xr::dword_ptr(kEx, exec_hole), ip->hole);
      load(xr::rax, ip->a);
      a.mov(xr::qword_ptr(kEx, exec_f), xr::rax);
      emit_tail_exit(ip, Exit::ChainTail);
    });
  }

  // x = the forward version of a unary arithmetic primitive (its native1 fwd_unary) applied to
  // a bundle of reals, computed by fwd_unary (a pure function of the bundle: no call of the
  // interpreter, so no frame is missed), then to `done`; when it declines, to `declined`. rax =
  // the callee, rdx = its lambda; anything else falls through (rax, rdx kept).
  void emit_fwd_unary(const Instr* ip, Label done, Label declined) {
    Label other = a.newLabel(), thrown = a.newLabel();
    a.mov(xr::rdi, (uint64_t)fwd_unary_form());
    a.cmp(xr::qword_ptr(xr::rdx, lambda_native1), xr::rdi);
    a.jne(other);
    a.mov(xr::rsi, xr::rax);
    load(xr::rdx, ip->b);
    call((const void*)&vlad_jit_native1);
    a.test(xr::rax, xr::rax);
    a.jz(thrown);
    a.cmp(xr::rax, (int32_t)Value::kUnbound);
    Label ok = a.newLabel();
    a.jne(ok);
    load(xr::rax, ip->a);  // (declined: the registers as they were)
    a.mov(xr::rdx, xr::qword_ptr(xr::rax, closure_lambda));
    a.jmp(declined);
    a.bind(ok);
    native_value(ip, thrown, done);
    a.bind(other);
  }

  // x = the forward version of +, -, * or / (fwd_binary2: a native2 form) applied to two
  // bundles of reals: (bundle y t) with y = x1 op x2 and t its tangent, computed and metered as
  // fwd_binary2 computes and meters them. rax = the callee, rdx = its lambda; anything else
  // falls through (rax, rdx kept).
  void emit_fwd_binary(const Instr* ip, Prim* p, Label done, Lambda* known = nullptr) {
    Label other = a.newLabel();
    if (!known || known->native_prim != p || known->native2 != fwd_binary_form()) {
      rule_guard(p, other);
      a.mov(xr::r8, (uint64_t)fwd_binary_form());
      a.cmp(xr::qword_ptr(xr::rdx, lambda_native2), xr::r8);
      a.jne(other);
    }
    // both bundles of two reals (checked before allocating, which may call the collector)
    for (int r : {ip->b, ip->b2}) bundle_of_reals_guard(r, other);
    emit_alloc(sizeof(Bundle));
    write_header(Kind::Bundle, 0);
    a.mov(xr::r9, xr::rax);
    a.mov(xr::r8, kOffset);
    bundle_parts(ip->b, xr::xmm0, xr::xmm2);   // x1, dx1
    bundle_parts(ip->b2, xr::xmm1, xr::xmm3);  // x2, dx2
    fwd_rule_arith(p);
    box_bundle_result(ip->x);
    count(offsetof(WorkCounters, applications));
    a.jmp(done);
    a.bind(other);
  }
  // To `fail` unless slot r holds a bundle of two reals. Clobbers rcx, r8.
  void bundle_of_reals_guard(int r, Label fail) {
    load(xr::rcx, r);
    kind_guard_of(xr::rcx, xr::r8, Kind::Bundle, fail);
    a.mov(xr::r8, kOffset);
    a.cmp(xr::qword_ptr(xr::rcx, bundle_primal), xr::r8);
    a.jb(fail);
    a.cmp(xr::qword_ptr(xr::rcx, bundle_tangent), xr::r8);
    a.jb(fail);
  }
  // x, dx = the primal and tangent of the bundle of reals in slot r (r8 = kOffset). Clobbers rcx.
  void bundle_parts(int r, const xr::Xmm& x, const xr::Xmm& dx) {
    for (auto [field, reg] : {std::pair<int32_t, xr::Xmm>{bundle_primal, x}, {bundle_tangent, dx}}) {
      load(xr::rcx, r);
      a.mov(xr::rcx, xr::qword_ptr(xr::rcx, field));
      a.sub(xr::rcx, xr::r8);
      a.movq(reg, xr::rcx);
    }
  }
  // p's forward rule on (x1, dx1) in xmm0, xmm2 and (x2, dx2) in xmm1, xmm3: y in xmm0, its tangent
  // in xmm2, the rule's operations counted as it counts them (xmm4-7 clobbered for /).
  void fwd_rule_arith(Prim* p) {
    Inline form = arith_form(p);
    a.add(xr::qword_ptr(kMeter, p->id * 8), 1);
    if (form == Inline::Mul) {  // t = x2 dx1 + x1 dx2
      a.mulsd(xr::xmm2, xr::xmm1);
      a.mulsd(xr::xmm3, xr::xmm0);
      a.addsd(xr::xmm2, xr::xmm3);
      a.add(xr::qword_ptr(kMeter, p->id * 8), 2);
      a.add(xr::qword_ptr(kMeter, current->prim("+")->id * 8), 1);
    } else if (form == Inline::Div) {  // t = d1 dx1 + d2 dx2, d1 = 1 / x2, d2 = -(x1 / (x2 x2))
      a.mov(xr::rax, 0x3ff0000000000000ull);  // 1.0
      a.movq(xr::xmm4, xr::rax);
      a.divsd(xr::xmm4, xr::xmm1);
      a.movsd(xr::xmm5, xr::xmm1);
      a.mulsd(xr::xmm5, xr::xmm1);
      a.movsd(xr::xmm6, xr::xmm0);
      a.divsd(xr::xmm6, xr::xmm5);
      a.mov(xr::rax, 0x8000000000000000ull);  // the sign
      a.movq(xr::xmm7, xr::rax);
      a.xorpd(xr::xmm6, xr::xmm7);
      a.mulsd(xr::xmm4, xr::xmm2);
      a.mulsd(xr::xmm6, xr::xmm3);
      a.addsd(xr::xmm4, xr::xmm6);
      a.movsd(xr::xmm2, xr::xmm4);
      a.add(xr::qword_ptr(kMeter, p->id * 8), 2);  // binary_partials's counts, then two * and a +
      a.add(xr::qword_ptr(kMeter, current->prim("*")->id * 8), 3);
      a.add(xr::qword_ptr(kMeter, current->prim("-")->id * 8), 1);
      a.add(xr::qword_ptr(kMeter, current->prim("+")->id * 8), 1);
    } else {  // t = dx1 ± dx2
      arith(form, xr::xmm2, xr::xmm3);
      a.add(xr::qword_ptr(kMeter, p->id * 8), 1);
    }
    arith(form, xr::xmm0, xr::xmm1);  // y
  }
  // The bundle at r9 (allocated) gets y (xmm0) and its tangent (xmm2), boxed; slot x = it.
  void box_bundle_result(int x) {
    box(xr::xmm0);
    a.mov(xr::qword_ptr(xr::r9, bundle_primal), xr::rax);
    box(xr::xmm2);
    a.mov(xr::qword_ptr(xr::r9, bundle_tangent), xr::rax);
    store(x, xr::r9);
  }

  // Two forward arithmetic rules in a row where the first one's bundle is read only by the second
  // ((+ acc (* a b)) in forward-transformed code, both callees known): computed together, the
  // intermediate bundle never made — one allocation, two boxings and the second's guard and
  // unboxing of it fewer. The same values, operation counts and applications as the two
  // calls; to `unfused` (where each is emitted as usual) when any guard fails.
  struct FwdPair {
    Prim* p1;
    Prim* p2;
    bool first_is_b;  // the intermediate is ip2's first operand (else its second)
  };
  bool fusable_fwd(const Instr* ip, const Instr* ip2, FwdPair* f) {
    auto plain = [&](const Instr* i) {
      return i->op == Op::App && i->op2 == AppPair && !i->split && !i->tail && !i->raw_call && !i->chain_call &&
             !i->parts3 && i != pair_deferred && met(i, kSeenNative);
    };
    if (!alloc_ok || !ip2 || !plain(ip) || !plain(ip2) || ip->x < 0) return false;
    if (!(f->p1 = known_fwd_binary(ip->a)) || !(f->p2 = known_fwd_binary(ip2->a))) return false;
    int x = ip->x;
    if (ip2->a == x || (ip2->b == x) == (ip2->b2 == x)) return false;
    // (the first may write over one of its own operands, read before anything is written)
    f->first_is_b = ip2->b == x;
    // the intermediate read nowhere else: the second writes over its slot, or the slot is read
    // nowhere else in the body at all
    return ip2->x == x || !reads(top, x, ip, ip2);
  }
  void emit_fwd_pair(const Instr* ip, const Instr* ip2, const FwdPair& f, Label unfused, Label after) {
    for (const Instr* i : {ip, ip2}) {  // the callees: their closures, when held in a global's cache
      Value expect;
      if (known_closure(i->a, &expect) && !expect.is_unbound()) {
        load(xr::rax, i->a);
        expect_guard(expect, unfused);
      }
    }
    int other = f.first_is_b ? ip2->b2 : ip2->b;
    for (int r : {ip->b, ip->b2, other}) bundle_of_reals_guard(r, unfused);
    emit_alloc(sizeof(Bundle));  // (first, as emit_fwd_binary: its slow path is a call, which keeps no xmm)
    write_header(Kind::Bundle, 0);
    a.mov(xr::r9, xr::rax);
    a.mov(xr::r8, kOffset);
    bundle_parts(ip->b, xr::xmm0, xr::xmm2);
    bundle_parts(ip->b2, xr::xmm1, xr::xmm3);
    fwd_rule_arith(f.p1);  // the intermediate (y, t) in xmm0, xmm2
    if (f.first_is_b) {
      bundle_parts(other, xr::xmm1, xr::xmm3);
    } else {
      a.movsd(xr::xmm1, xr::xmm0);
      a.movsd(xr::xmm3, xr::xmm2);
      bundle_parts(other, xr::xmm0, xr::xmm2);
    }
    fwd_rule_arith(f.p2);
    box_bundle_result(ip2->x);
    count(offsetof(WorkCounters, applications), 2);
    a.jmp(after);
  }

  // Whether slot r holds a unary primitive's forward version (known_rev_lambda's way) whose
  // native1 form is fwd_unary.
  bool known_fwd_unary(int r) {
    Lambda* lam = known_rev_lambda(r);
    return lam && lam->native1 == fwd_unary_form();
  }

  // The +, -, * or / whose forward version slot r holds (known_rev_lambda's way: a constant, or a
  // transformed global whose cached value is current), with its native2 form fwd_binary2.
  Prim* known_fwd_binary(int r) {
    Lambda* lam = known_rev_lambda(r);
    if (!lam || lam->native2 != fwd_binary_form() || lam->native_prim->cls != PrimClass::Arith) return nullptr;
    Inline f = arith_form(lam->native_prim);
    return f == Inline::Add || f == Inline::Sub || f == Inline::Mul || f == Inline::Div ? lam->native_prim : nullptr;
  }

  // A primitive known when compiling, with no inline form: called without op_app's dispatch.
  // (In tail position, the body's value: vlad_jit_tail_prim.)
  void emit_prim_call(const Instr* ip, Prim* p) {
    guarded(ip, [&](Label slow) {
      if (!holds_const(ip->a, Value::obj(p))) {
        load(xr::rax, ip->a);
        a.mov(xr::rdx, (uint64_t)p);
        a.cmp(xr::rax, xr::rdx);
        a.jne(slow);
      }
      a.mov(xr::rdi, kEx);
      a.mov(xr::rsi, (uint64_t)ip);
      bool one = !ip->split && ip->op2 != AppPair && p->arity == 1 && p->fn1;  // (apply_prim's case)
      call(ip->tail ? (const void*)&vlad_jit_tail_prim : one ? (const void*)&vlad_jit_prim1 : (const void*)&vlad_jit_prim);
      check_continue();
    });
  }

  // rax = the value of the primitive p (the callee, checked) applied as ip says, in the given
  // inline form; anything outside the form's fast case jumps to `slow`.
  void emit_prim(const Instr* ip, Prim* p, Inline form, Label slow) {
    switch (form) {
      case Inline::Car:
      case Inline::Cdr:
        load(xr::rax, ip->b);
        load_part(form == Inline::Car, slow);
        return;
      case Inline::RZero: {
        // (%rzero v), the zero of (*j-inverse v) (tags.cpp: lazy_zero with one strip), for the
        // values backpropagators mostly give it: (), #t, #f (their own), (reverse r) of a real
        // (0), a pair P (the view kViewRZero of P), a view of *j of a pair P (the view of P's
        // zero) or of a part of P that is a real (0) or (), #t, #f; anything else: the primitive
        Label own = a.newLabel(), out = a.newLabel(), part = a.newLabel(), view = a.newLabel();
        Label pair = a.newLabel();
        load(xr::rax, ip->b);
        atom_to(xr::rax, out);
        object_view(slow);  // rax = P
        a.test(xr::rdx, xr::rdx);
        a.jnz(view);
        // an object: (reverse r) of a real r (a node, a constant leaf) has the zero 0
        a.cmp(xr::dword_ptr(xr::rax, (int32_t)offsetof(Obj, kind)), (int32_t)Kind::Pair);
        a.je(pair);
        a.cmp(xr::dword_ptr(xr::rax, (int32_t)offsetof(Obj, kind)), (int32_t)Kind::Reverse);
        a.jne(slow);
        a.mov(xr::r8, kOffset);
        a.cmp(xr::qword_ptr(xr::rax, node_v), xr::r8);
        Label nested = a.newLabel();
        a.jb(nested);
        a.mov(xr::rax, xr::r8);
        a.jmp(out);
        // (reverse (reverse r)) of a real r (a first-level reverse real under a further
        // transform): (reverse 0), the shared one zero_shallow gives (reverse_zero)
        a.bind(nested);
        a.mov(xr::rax, xr::qword_ptr(xr::rax, node_v));
        kind_guard(Kind::Reverse, slow);
        a.cmp(xr::qword_ptr(xr::rax, node_v), xr::r8);
        a.jb(slow);
        a.mov(xr::rax, reverse_zero(1).bits);
        a.jmp(out);
        a.bind(pair);
        a.or_(xr::rax, (int32_t)kViewRZero);
        a.jmp(out);
        a.bind(view);
        a.cmp(xr::rdx, (int32_t)kViewJ);
        a.jne(part);
        a.or_(xr::rax, (int32_t)kViewZero);
        a.jmp(out);
        a.bind(part);
        a.cmp(xr::rdx, (int32_t)kViewJCar);
        Label cdr_part = a.newLabel(), got = a.newLabel();
        a.jne(cdr_part);
        a.mov(xr::rax, xr::qword_ptr(xr::rax, pair_car));
        a.jmp(got);
        a.bind(cdr_part);
        a.cmp(xr::rdx, (int32_t)kViewJCdr);
        a.jne(slow);
        a.mov(xr::rax, xr::qword_ptr(xr::rax, pair_cdr));
        a.bind(got);
        a.mov(xr::r8, kOffset);
        a.cmp(xr::rax, xr::r8);
        a.jb(own);
        a.mov(xr::rax, xr::r8);  // a real's zero
        a.jmp(out);
        a.bind(own);
        atom_to(xr::rax, out);
        a.jmp(slow);
        a.bind(out);
        return;
      }
      case Inline::NullP:
      case Inline::PairP: {
        // nil and pairs are answered here; anything else (lazy values, views): the interpreter
        Label yes = a.newLabel(), no = a.newLabel();
        load(xr::rax, ip->b);
        a.cmp(xr::rax, (int32_t)Value::kNil);
        a.je(form == Inline::NullP ? yes : no);
        pair_guard(slow);
        a.jmp(form == Inline::NullP ? no : yes);
        bool_result(yes, no);
        return;
      }
      case Inline::Zero: {  // (zero v) of a real: 0; of (), #t, #f: itself (zero_shallow)
        Label out = a.newLabel();
        load(xr::rax, ip->b);
        atom_to(xr::rax, out);
        a.mov(xr::rcx, kOffset);
        a.cmp(xr::rax, xr::rcx);
        a.jb(slow);
        a.mov(xr::rax, xr::rcx);  // (+0.0)
        a.bind(out);
        return;
      }
      case Inline::Primal:  // a bundle's primal, a tag's value (forward_part, unperturb, unsensitize)
      case Inline::Unperturb:
      case Inline::Unsensitize: {
        load(xr::rax, ip->b);
        kind_guard(form == Inline::Primal      ? Kind::Bundle
                   : form == Inline::Unperturb ? Kind::Perturbation
                                               : Kind::Sensitivity,
                   slow);
        a.mov(xr::rax, xr::qword_ptr(xr::rax, form == Inline::Primal ? bundle_primal : tagged_v));
        return;
      }
      case Inline::Tangent:  // (perturb (tangent part)) of a bundle; a value tagged (make_tagged)
      case Inline::Perturb:
      case Inline::Sensitize: {
        if (!alloc_ok) {
          a.jmp(slow);
          return;
        }
        if (form == Inline::Tangent) {
          load(xr::rax, ip->b);
          kind_guard(Kind::Bundle, slow);
        }
        // (what goes in is read after the allocation, from its slot: a collection sees it there)
        emit_alloc(sizeof(Tagged));
        write_header(form == Inline::Sensitize ? Kind::Sensitivity : Kind::Perturbation, 0);
        load(xr::rcx, ip->b);
        if (form == Inline::Tangent) a.mov(xr::rcx, xr::qword_ptr(xr::rcx, bundle_tangent));
        a.mov(xr::qword_ptr(xr::rax, tagged_v), xr::rcx);
        return;
      }
      case Inline::Call1:
        load(xr::rsi, ip->b);
        a.mov(xr::r8, kOffset);
        a.cmp(xr::rsi, xr::r8);
        a.jb(slow);
        if (unary_arith_fn(p)) {  // (sqrt, abs, exp, log, sin, cos, tan, tanh)
          a.sub(xr::rsi, xr::r8);
          a.movq(xr::xmm0, xr::rsi);
          emit_arith1(p);
          box();
          return;
        }
        a.mov(xr::rdi, (uint64_t)p);
        call((const void*)p->fn1);  // a real: it cannot fail
        return;
      case Inline::RealP: {
        // (real? v) of a real: #t; of (), #t, #f or a pair: #f; a tagged value: the primitive's
        // call (it looks under the tags)
        Label yes = a.newLabel(), no = a.newLabel();
        load(xr::rax, ip->b);
        a.mov(xr::r8, kOffset);
        a.cmp(xr::rax, xr::r8);
        a.jae(yes);
        atom_to(xr::rax, no);
        kind_guard(Kind::Pair, slow);
        a.jmp(no);
        bool_result(yes, no);
        return;
      }
      case Inline::StarJ: {
        // (*j v) as star_j makes it: (), #t, #f themselves; a pair P: the view (*j P), lazily;
        // a real or a tagged value (a bundle, a reverse, a perturbation or a sensitivity):
        // (reverse v), a new object; anything else: the primitive's call
        Label tag = a.newLabel(), out = a.newLabel(), obj = a.newLabel();
        load(xr::rax, ip->b);
        a.mov(xr::r8, kOffset);
        a.cmp(xr::rax, xr::r8);
        a.jae(tag);
        atom_to(xr::rax, out);
        a.mov(xr::rdx, xr::rax);
        a.shr(xr::rdx, 48);
        a.jnz(slow);
        a.cmp(xr::rax, 0xff);
        a.jbe(slow);
        a.test(xr::al, 15);
        a.jnz(slow);  // a view
        a.mov(xr::edx, xr::dword_ptr(xr::rax, (int32_t)offsetof(Obj, kind)));
        a.cmp(xr::edx, (int32_t)Kind::Pair);
        a.jne(obj);
        a.or_(xr::rax, (int32_t)kViewJ);
        a.jmp(out);
        a.bind(obj);
        a.cmp(xr::edx, (int32_t)Kind::Bundle);
        a.jb(slow);
        a.cmp(xr::edx, (int32_t)Kind::Sensitivity);
        a.ja(slow);
        static_assert((int)Kind::Reverse > (int)Kind::Bundle && (int)Kind::Perturbation > (int)Kind::Reverse &&
                          (int)Kind::Sensitivity > (int)Kind::Perturbation,
                      "the tagged kinds are Bundle ... Sensitivity");
        a.bind(tag);
        a.sub(xr::rsp, 16);
        a.mov(xr::qword_ptr(xr::rsp), xr::rax);
        emit_alloc(sizeof(Tagged), 16);
        write_header(Kind::Reverse, 0);
        a.mov(xr::rcx, xr::qword_ptr(xr::rsp));
        a.add(xr::rsp, 16);
        a.mov(xr::qword_ptr(xr::rax, node_v), xr::rcx);
        a.bind(out);
        return;
      }
      case Inline::StarJInv: {
        // (*j-inverse v) as star_j_inverse gives it at once: of (*j P) (a view), P, or the part
        // of P it stands for; of (reverse x), x; (), #t, #f themselves; else the primitive's call
        Label view = a.newLabel(), out = a.newLabel(), car_side = a.newLabel();
        load(xr::rax, ip->b);
        atom_to(xr::rax, out);
        object_or_view(xr::rax, xr::rdx, slow, view);
        a.cmp(xr::dword_ptr(xr::rax, (int32_t)offsetof(Obj, kind)), (int32_t)Kind::Reverse);
        a.jne(slow);
        a.mov(xr::rax, xr::qword_ptr(xr::rax, node_v));
        a.jmp(out);
        a.bind(view);
        a.mov(xr::rdx, xr::rax);
        a.and_(xr::rdx, 15);
        a.and_(xr::rax, -16);
        a.cmp(xr::rdx, (int32_t)kViewJ);
        a.je(out);
        a.cmp(xr::rdx, (int32_t)kViewJCar);
        a.je(car_side);
        a.cmp(xr::rdx, (int32_t)kViewJCdr);
        a.jne(slow);
        a.mov(xr::rax, xr::qword_ptr(xr::rax, pair_cdr));
        a.jmp(out);
        a.bind(car_side);
        a.mov(xr::rax, xr::qword_ptr(xr::rax, pair_car));
        a.bind(out);
        return;
      }
      case Inline::Plus:
        // sums of sensitivities, when plus gives them at once: the shared stub (emit_plus_body);
        // anything else, and an empty free list: the primitive's call
        load_pair_args(ip, slow);
        a.mov(xr::r10, xr::rax);
        a.mov(xr::r11, xr::rcx);
        if (!alloc_ok || !plus_stub(free_lists_offset)) {
          emit_plus_now(xr::r10, xr::r11, slow);
          return;
        }
        call(plus_stub(free_lists_offset));
        a.test(xr::rax, xr::rax);
        a.jz(slow);
        return;
      case Inline::ZeroSens2: {  // (%zero-sensitivities? a b): both the placeholder zero
        Label yes = a.newLabel(), no = a.newLabel();
        load_pair_args(ip, slow);
        a.mov(xr::r8, (int32_t)Value::kZeroSens);
        a.cmp(xr::rax, xr::r8);
        a.jne(no);
        a.cmp(xr::rcx, xr::r8);
        a.jne(no);
        a.jmp(yes);
        bool_result(yes, no);
        return;
      }
      case Inline::Call2:
        load_pair_args(ip, slow);
        a.mov(xr::r8, kOffset);
        a.cmp(xr::rax, xr::r8);
        a.jb(slow);
        a.cmp(xr::rcx, xr::r8);
        a.jb(slow);
        a.mov(xr::rdi, (uint64_t)p);
        a.mov(xr::rsi, xr::rax);
        a.mov(xr::rdx, xr::rcx);
        call((const void*)p->fn2);  // reals: it cannot fail
        return;
      default:  // + - * / and the comparisons, on unboxed reals
        load_pair_args(ip, slow);
        unbox(xr::rax, xr::xmm0, slow);
        unbox(xr::rcx, xr::xmm1, slow, true);
        a.add(xr::qword_ptr(kMeter, p->id * 8), 1);
        if (form <= Inline::Div) {
          arith(form, xr::xmm0, xr::xmm1);
          box(xr::xmm0, true);
          return;
        }
        compare(form);
        return;
    }
  }

  // eax = #t or #f: xmm0 compared with xmm1 by a comparison form; false when unordered (a NaN),
  // as in C++. Clobbers edx.
  void compare(Inline form) {
    a.xor_(xr::eax, xr::eax);
    switch (form) {
      case Inline::Eq:
        a.ucomisd(xr::xmm0, xr::xmm1);
        a.mov(xr::edx, 0);
        a.setnp(xr::dl);
        a.sete(xr::al);
        a.and_(xr::eax, xr::edx);
        break;
      case Inline::Lt: a.ucomisd(xr::xmm1, xr::xmm0); a.seta(xr::al); break;
      case Inline::Gt: a.ucomisd(xr::xmm0, xr::xmm1); a.seta(xr::al); break;
      case Inline::Le: a.ucomisd(xr::xmm1, xr::xmm0); a.setae(xr::al); break;
      case Inline::Ge: a.ucomisd(xr::xmm0, xr::xmm1); a.setae(xr::al); break;
      default: break;
    }
    a.add(xr::eax, (int32_t)Value::kFalse);
  }

  // rax = car or cdr of the pair in rax (else `fail`).
  void load_part(bool car_side, Label fail, bool low_bits_checked = false) {
    kind_guard_of(xr::rax, xr::rdx, Kind::Pair, fail, low_bits_checked);
    a.mov(xr::rax, xr::qword_ptr(xr::rax, car_side ? pair_car : pair_cdr));
  }

  // A car and a cdr (or two of either) of one slot in a row (A-normal form's taking apart):
  // when the first finds a pair, it stores both parts and jumps over the second (fuse_after,
  // bound after the second's own code, which every other way in runs).
  const Instr* fuse_next = nullptr;
  Label fuse_after;

  void emit_car_cdr(const Instr* ip) {
    const Instr* nx = next_ip;
    bool fuse = !fuse_next && nx && (nx->op == Op::Car || nx->op == Op::Cdr) && nx->a == ip->a && ip->x != ip->a;
    guarded(ip, [&](Label slow) {
      Label view = a.newLabel(), done = a.newLabel();
      bool car_side = ip->op == Op::Car;
      load(xr::rax, ip->a);
      a.test(xr::al, 15);
      a.jnz(view);
      if (fuse) {
        kind_guard_of(xr::rax, xr::rdx, Kind::Pair, slow, true);
        a.mov(xr::rcx, xr::qword_ptr(xr::rax, nx->op == Op::Car ? pair_car : pair_cdr));
        a.mov(xr::rax, xr::qword_ptr(xr::rax, car_side ? pair_car : pair_cdr));
        store(ip->x, xr::rax);
        store(nx->x, xr::rcx);
        fuse_next = nx;
        fuse_after = a.newLabel();
        a.jmp(fuse_after);
      } else {
        load_part(car_side, slow, true);
        store(ip->x, xr::rax);
      }
      a.bind(done);
      // a part of (*j P), lazily (op_car_cdr's second case): the shared stub, out of line; a
      // part of the placeholder zero, itself (its fourth)
      cold([&] {
        a.bind(view);
        Label not_zero = a.newLabel();
        a.cmp(xr::rax, (int32_t)Value::kZeroSens);
        a.jne(not_zero);
        store(ip->x, xr::rax);
        a.jmp(done);
        a.bind(not_zero);
        a.mov(xr::rcx, xr::rax);
        const void* stub = j_part_stub(!car_side);
        if (stub) {
          call(stub);
          a.test(xr::r9, xr::r9);
          a.jz(slow);
        } else {
          a.shr(xr::rax, 48);
          a.jnz(slow);
          j_part_of_view(!car_side, slow);
        }
        store(ip->x, xr::r9);
        a.jmp(done);
      });
    });
  }

  void emit_global(const Instr* ip) {
    guarded(ip, [&](Label slow) {  // (the interpreter raises the error of an unbound variable)
      a.mov(xr::rax, (uint64_t)&ip->src->cell->value);
      a.mov(xr::rax, xr::qword_ptr(xr::rax));
      a.cmp(xr::rax, (int32_t)Value::kUnbound);
      a.je(slow);
      if (*ip->src->xf) {  // a transformed global: its transform, cached for the cell's value
        a.mov(xr::rdx, (uint64_t)ip->src);
        a.cmp(xr::rax, xr::qword_ptr(xr::rdx, binding_cache_in));
        a.jne(slow);
        a.mov(xr::rax, xr::qword_ptr(xr::rdx, binding_cache_out));
      }
      store(ip->x, xr::rax);
    });
  }

  // Leaves the body with its value or pair (Exec::finish).
  // (last: the epilogue follows at once, so no jump to it)
  void emit_finish(const Code* c, bool last = false) {
    if (c->triple_result) {  // the three parts when asked for them, else x̄ made here (Exec::finish)
      Label pair = a.newLabel();
      load(xr::rax, c->r1);
      a.mov(xr::qword_ptr(kEx, exec_r1), xr::rax);
      a.cmp(xr::byte_ptr(kEx, exec_want3), 0);
      a.je(pair);
      load(xr::rax, c->r2);
      a.mov(xr::qword_ptr(kEx, exec_r2), xr::rax);
      load(xr::rax, c->r3);
      a.mov(xr::qword_ptr(kEx, exec_r3), xr::rax);
      a.mov(xr::eax, (int32_t)Exit::Triple);
      a.jmp(ret);
      a.bind(pair);
      load(xr::rdi, c->r2);
      load(xr::rsi, c->r3);
      call((const void*)&vlad_jit_pair);
      Label made = a.newLabel();
      a.test(xr::rax, xr::rax);
      a.jnz(made);
      a.mov(xr::eax, kThrown);
      a.jmp(ret);
      a.bind(made);
      a.mov(xr::qword_ptr(kEx, exec_r2), xr::rax);
      a.mov(xr::eax, (int32_t)Exit::Pair);
    } else if (c->pair_result) {
      load(xr::rax, c->r1);
      a.mov(xr::qword_ptr(kEx, offsetof(Exec, r1)), xr::rax);
      load(xr::rax, c->r2);
      a.mov(xr::qword_ptr(kEx, offsetof(Exec, r2)), xr::rax);
      a.mov(xr::eax, (int32_t)Exit::Pair);
    } else {
      load(xr::rax, c->result);
      a.mov(xr::qword_ptr(kEx, offsetof(Exec, r1)), xr::rax);
      a.mov(xr::eax, (int32_t)Exit::Value);
    }
    if (!last) a.jmp(ret);
  }

  // A branch of a non-tail If: its outcome into the If's slots (Exec::store).
  void emit_store(const Instr* ip, const Code* c) {
    if (c->pair_result && ip->split) {  // both read before either is written: slots are reused
      load(xr::rax, c->r1);
      load(xr::rcx, c->r2);
      store(ip->x, xr::rax);
      store(ip->x2, xr::rcx);
      return;
    }
    if (!c->pair_result && !ip->split) {
      load(xr::rax, c->result);
      store(ip->x, xr::rax);
      return;
    }
    load(xr::rax, c->pair_result ? c->r1 : c->result);
    a.mov(xr::qword_ptr(kEx, offsetof(Exec, r1)), xr::rax);
    if (c->pair_result) {
      load(xr::rax, c->r2);
      a.mov(xr::qword_ptr(kEx, offsetof(Exec, r2)), xr::rax);
    }
    a.mov(xr::rdi, kEx);
    a.mov(xr::rsi, (uint64_t)ip);
    a.mov(xr::edx, (int32_t)(c->pair_result ? Exit::Pair : Exit::Value));
    call((const void*)&vlad_jit_store);
    check_continue();
  }

  void emit_if(const Instr* ip) {
    Label other = a.newLabel(), done = a.newLabel();
    load(xr::rax, ip->a);
    a.cmp(xr::rax, (int32_t)Value::kFalse);
    a.je(other);
    emit_branch(ip, ip->then_);
    a.jmp(done);
    a.bind(other);
    emit_branch(ip, ip->else_);
    a.bind(done);
  }

  // Instruction i of block c (and i + 1 with it, when the two are forward rules emit_fwd_pair
  // computes together: their usual code then follows, for when a guard fails, the label of
  // instruction i + 1 on its own); the index of the last instruction emitted.
  int emit_at(const Code* c, int i, std::vector<Label>* labels) {
    FwdPair fp;
    if (i + 1 < c->n && fusable_fwd(&c->ins[i], &c->ins[i + 1], &fp)) {
      Label unfused = a.newLabel(), after = a.newLabel();
      emit_fwd_pair(&c->ins[i], &c->ins[i + 1], fp, unfused, after);
      a.bind(unfused);
      next_ip = &c->ins[i + 1];
      emit(&c->ins[i]);
      i++;
      if (labels) a.bind((*labels)[i]);
      next_ip = i + 1 < c->n ? &c->ins[i + 1] : nullptr;
      emit(&c->ins[i]);
      a.bind(after);
      return i;
    }
    next_ip = i + 1 < c->n ? &c->ins[i + 1] : nullptr;
    emit(&c->ins[i]);
    return i;
  }

  void emit_branch(const Instr* ip, const Code* c) {
    count(offsetof(WorkCounters, steps), c->n);
    size_t mark = scope.size();
    for (int i = 0; i < c->n; i++) i = emit_at(c, i, nullptr);
    scope.resize(mark);
    if (ip->tail) emit_finish(c);
    else emit_store(ip, c);
  }

  void emit(const Instr* ip) {
    instructions++;
    switch (ip->op) {
      case Op::Const:
        a.mov(xr::rax, ip->kbits);
        store(ip->x, xr::rax);
        break;
      case Op::Copy:
        load(xr::rax, ip->a);
        store(ip->x, xr::rax);
        break;
      case Op::Global: emit_global(ip); break;
      case Op::App: emit_app(ip); break;
      case Op::Car:
      case Op::Cdr: emit_car_cdr(ip); break;
      case Op::EnvRef:  // a closure sensitivity's environment slot (op_envref, env_ref), for a
                        // closure holding it (not a view), or the placeholder zero itself
        guarded(ip, [&](Label slow) {
          Label have = a.newLabel();
          load(xr::rax, ip->a);
          a.cmp(xr::rax, (int32_t)Value::kZeroSens);
          a.je(have);
          kind_guard(Kind::Closure, slow);
          a.cmp(xr::dword_ptr(xr::rax, (int32_t)offsetof(Obj, aux)), ip->index);
          a.jbe(slow);
          a.mov(xr::rax, xr::qword_ptr(xr::rax, closure_env + 8 * ip->index));
          a.mov(xr::rdx, xr::rax);  // a view: env_ref gives the closure it stands for ...
          a.shr(xr::rdx, 48);
          a.cmp(xr::rdx, 1);
          a.je(slow);
          a.ja(have);
          a.cmp(xr::rax, 0xff);
          a.jbe(have);
          a.mov(xr::edx, xr::eax);  // ... but a zero view (kViewZero, kViewRZero) as it is
          a.and_(xr::edx, 15);
          a.jz(have);
          a.sub(xr::edx, (int32_t)kViewZero);
          a.cmp(xr::edx, (int32_t)(kViewRZero - kViewZero));
          a.ja(slow);
          a.bind(have);
          store(ip->x, xr::rax);
        });
        break;
      case Op::Check:  // a constant pattern of (), #t or #f met by itself (op_check)
        if (ip->kbits != Value::kNil && ip->kbits != Value::kTrue && ip->kbits != Value::kFalse) {
          step(ip);
          break;
        }
        guarded(ip, [&](Label slow) {
          load(xr::rax, ip->a);
          a.cmp(xr::rax, (int32_t)ip->kbits);
          a.jne(slow);
          a.mov(xr::eax, (int32_t)Value::kNil);
          store(ip->x, xr::rax);
        });
        break;
      case Op::Sens:  // a sensitivity that is not the placeholder zero is itself (op_sens)
        guarded(ip, [&](Label slow) {
          Label zero = a.newLabel(), done = a.newLabel();
          load(xr::rax, ip->a);
          a.cmp(xr::rax, (int32_t)Value::kZeroSens);
          a.je(ip->src->index == 0 ? zero : slow);
          store(ip->x, xr::rax);
          a.bind(done);
          if (ip->src->index != 0) return;
          // the placeholder's zero of a first-level reverse real (a node, a constant leaf, or a
          // real in a pair under *j): 0, as rzero gives it; of (), #t or #f, itself; of a pair
          // or of (*j P), its view of zeros (sens_zero_stub, shared); anything else, op_sens
          cold([&] {
            a.bind(zero);
            const void* stub = sens_zero_stub();
            if (!stub) {
              a.jmp(slow);
              return;
            }
            load(xr::rcx, ip->b);
            call(stub);
            a.test(xr::r9, xr::r9);
            a.jz(slow);
            store(ip->x, xr::r9);
            a.jmp(done);
          });
        });
        break;
      case Op::If: emit_if(ip); break;
      case Op::Cons:
        // the inner pair of the next call's argument: made by that call when needed (parts3)
        if (!(next_ip && next_ip->op == Op::App && defers_pair(next_ip))) emit_cons(ip);
        break;
      case Op::Lambda: emit_lambda(ip); break;
      case Op::BackCall: {
        Label zero = a.newLabel(), nonzero = a.newLabel(), end = a.newLabel();
        if (ip->split) {  // ȳ an immediate zero (back_call's zero_sensitivity): all zero
          load(xr::rax, ip->b);
          // (all four are below 16: anything above, a real or an object, goes on at once)
          a.cmp(xr::rax, 15);
          a.ja(nonzero);
          for (uint64_t z : {Value::kZeroSens, Value::kNil, Value::kFalse, Value::kTrue}) {
            a.cmp(xr::rax, (int32_t)z);
            a.je(zero);
          }
          a.jmp(nonzero);
          a.bind(zero);
          zero_split_result(ip, end);
          a.bind(nonzero);
        }
        if (ip->split && depth_offset_ok && met(ip, kSeenBackOther)) {
          Label next = a.newLabel();
          emit_back_raw(ip, next, zero, end);
          a.bind(next);
        }
        if (ip->split && !ip->split3 && met(ip, kSeenBackOther)) emit_back_native(ip, end);
        if (ip->split3 && met(ip, kSeenBackOther)) emit_back_native3(ip, end);
        if (ip->split3) emit_back_node(ip);
        else if (ip->split && alloc_ok) emit_back_proj(ip);
        else step(ip);
        a.bind(end);
        break;
      }
      default: step(ip); break;
    }
    scope.push_back(ip);
    if (ip == fuse_next) {  // (the second of a fused car/cdr pair: emit_car_cdr)
      a.bind(fuse_after);
      fuse_next = nullptr;
    }
  }

  void dump(const Code* c) {
    std::string name = c->lam && c->lam->name ? c->lam->name : "lambda";  // (with the transforms that made it)
    for (const Lambda* l = c->lam; l && l->transform; l = l->source) name = std::string(1, l->transform) + ":" + name;
    fprintf(stderr, "native: %s, %d instructions, self loop %s%s\n", name.c_str(), c->n, self_loop ? "yes" : "no",
            !arg_car         ? ""
            : rebuild_arg3 ? ", argument taken apart without a pair (in three parts too, rebuilt where read)"
            : rebuild_arg  ? ", argument taken apart without a pair (rebuilt where read)"
                          : arg3_car ? ", argument taken apart without a pair (in three parts too)"
                                     : ", argument taken apart without a pair");
    dump_code(c, 2);
    if (c->lam && getenv("VLAD_JIT_DUMP")[0] == '2') fputs(lambda_to_string(c->lam).c_str(), stderr);  // and its analysed form
  }
  static void dump_code(const Code* c, int indent) {
    static const char* names[] = {"const", "copy", "global", "app", "lambda", "cons", "car", "cdr",
                                  "check", "if", "envref", "backcall", "sens"};
    for (int i = 0; i < c->n; i++) {
      const Instr& in = c->ins[i];
      fprintf(stderr, "%*s%2d %-8s x=%d a=%d b=%d%s%s%s%s\n", indent, "", i, names[(int)in.op], in.x, in.a, in.b,
              in.parts3 ? " (three-part arg)" : in.op2 == AppPair ? " (pair arg)" : "", in.tail ? " tail" : "", in.split ? " split" : "",
              in.op == Op::Global && *in.src->xf ? " (transformed)" : "");
      if (in.op == Op::If) {
        dump_code(in.then_, indent + 4);
        fprintf(stderr, "%*selse\n", indent + 2, "");
        dump_code(in.else_, indent + 4);
      }
    }
  }

  void body(const Code* c) {
    top = c;
    plan_self_loop(c);
    if (getenv("VLAD_JIT_DUMP")) dump(c);  // a developer's view of what is compiled (docs/native-tier.md)
    for (int i = 0; i <= c->n; i++) top_labels.push_back(a.newLabel());
    // Prologue: the callee-saved registers of the body's own (kEx, kFr, kEnv), the stack 16-byte
    // aligned at calls (kFrameBytes below rbp). kWork and kMeter are the thread's, set by the
    // entry stub (jit_entry) and the same in every body: not saved, not reloaded.
    auto prologue = [&] {
      a.push(xr::rbp);
      a.mov(xr::rbp, xr::rsp);
      a.push(kEx);
      a.push(kFr);
      a.push(kEnv);
      a.sub(xr::rsp, 8);
      a.mov(kEx, xr::rdi);
      a.mov(kFr, xr::qword_ptr(xr::rdi, offsetof(Exec, fr)));
      a.mov(kEnv, xr::qword_ptr(xr::rdi, offsetof(Exec, env)));
    };
    prologue();
    // steps: the block from `start` to its end, as the interpreter counts; instruction 0 the
    // usual start, 1 (a chain's rest) out of line. (Starts 2 and 4 have entries of their own,
    // Code::entries, emitted after the body.)
    Label other_start = a.newLabel();
    a.test(xr::esi, xr::esi);
    a.jnz(other_start);
    count(offsetof(WorkCounters, steps), c->n);
    cold([&] {
      a.bind(other_start);
      a.movsxd(xr::rsi, xr::esi);
      a.mov(xr::rax, (int64_t)c->n);
      a.sub(xr::rax, xr::rsi);
      a.add(xr::qword_ptr(kWork, offsetof(WorkCounters, steps)), xr::rax);
      if (c->n >= 1) {
        a.cmp(xr::esi, 1);
        a.je(top_labels[1]);
      }
      a.jmp(top_labels[0]);
    });
    for (int i = 0; i < c->n; i++) {
      a.bind(top_labels[i]);
      i = emit_at(c, i, &top_labels);
    }
    a.bind(top_labels[c->n]);
    emit_finish(c, true);
    a.bind(ret);
    a.add(xr::rsp, 8);
    a.pop(kEnv);
    a.pop(kFr);
    a.pop(kEx);
    a.pop(xr::rbp);
    a.ret();
    // The entries of a direct caller that wrote the argument's parts (Code::entries, start 2 or
    // 4): the prologue again, the steps of the whole body (the first k, taking the argument apart,
    // done by the caller), the parts kept (stash_arg), then instruction k.
    for (int k : {2, 4}) {
      if (!(k == 2 ? arg_car : arg3_car)) continue;
      entry_labels[k] = a.newLabel();
      a.bind(entry_labels[k]);
      prologue();
      count(offsetof(WorkCounters, steps), c->n);
      if (stash_arg) {
        load(xr::rax, arg_car->x);
        load(xr::rcx, k == 4 ? arg3_car->x : arg_cdr->x);
        if (k == 4) load(xr::r8, arg3_cdr->x);
        emit_stash_parts(xr::rax, xr::rcx, k == 4 ? &xr::r8 : nullptr);
      }
      a.jmp(top_labels[k]);
    }
  }
  Label entry_labels[5];  // (by start: 2 and 4 used)
};

JitRuntime* runtime() {
  // Released code is overwritten (int3 on x86): a call into a released body stops at once
  // instead of running whatever was compiled there next.
  static JitRuntime* rt = [] {
    JitAllocator::CreateParams params{};
    params.options = JitAllocatorOptions::kFillUnusedMemory;
    return new JitRuntime(&params);
  }();
  return rt;
}

std::mutex jit_mutex;

// ---- releasing the machine code of dead bodies ----
// A compiled Code's native_owner has a finalizer. When the collector finds the Code unreachable,
// no value, Lambda or other body's code can lead to it any more: callers enter a body through
// its Code (Lambda::direct, raw_direct, raw_chain: fields of live lambdas), and a caller that
// knows its callee in advance holds that callee's closure among its own pins (Code::pins), hence
// its lambda and Code. But the body may still be running at that moment (a frame of native code
// needs no reference to its Code once entered), so its machine code is only queued, and released
// when no evaluation is running at all — every evaluation runs through run_on_big_stack, whose
// job brackets it with jit_evaluation_begins / _ends on the thread that runs it, and an
// evaluation that was running when the collector found the Code dead has then ended — or
// between two top-level forms of the only evaluation running (jit_between_forms), where no frame
// of native code is on any stack. A queued body's finalizer ran after that collection, so the
// queue is taken under the same lock as the count.
std::mutex dead_mutex;  // (never held while allocating from the collector: a finalizer takes it)
int evaluations = 0;
std::vector<void*>* dead_code = nullptr;
uint64_t released_bodies = 0;

void on_dead_code(void* obj, void*) {  // (obj: the Code's native_owner)
  void* fn = *static_cast<void**>(obj);
  std::lock_guard<std::mutex> lock(dead_mutex);
  if (!dead_code) dead_code = new std::vector<void*>;
  dead_code->push_back(fn);
}

// Assembles a stub shared by every body: `body(em, fail)` emits code that returns (`ret`) with
// its result, or jumps to `fail`, where `on_fail` makes the "no" answer before returning. Null
// if it could not be made.
template <class B, class F>
const void* make_stub(int32_t free_lists_offset, B body, F on_fail) {
  CodeHolder code;
  code.init(runtime()->environment());
  xr::Assembler a(&code);
  Emitter em(a);
  em.ret = a.newLabel();
  em.alloc_ok = true;
  em.free_lists_offset = free_lists_offset;
  Label fail = a.newLabel();
  body(em, fail);
  a.ret();
  a.bind(fail);
  on_fail(a);
  a.ret();
  void* fn = nullptr;
  if (runtime()->add(&fn, &code) != kErrorOk) return nullptr;
  return fn;
}

// A stub made once whose answer is in r9, or 0 where its body jumps to `fail`.
template <class B>
const void* make_r9_stub(B body) {
  return make_stub(0, body, [](xr::Assembler& a) { a.xor_(xr::r9d, xr::r9d); });
}

// The placeholder's zero of the value in rcx as Sens makes it (rzero), for the cases native code
// takes: a first-level reverse real (0), (), #t, #f (themselves), a pair or (*j P) (their zero
// views); r9 = it, or 0 for anything else (op_sens then). Clobbers rcx, rdx.
const void* sens_zero_stub() {
  static const void* stub = nullptr;
  if (!stub)
    stub = make_r9_stub(
        [&](Emitter& em, Label fail) {
          xr::Assembler& a = em.a;
          Label view = a.newLabel(), real = a.newLabel(), atom = a.newLabel(), not_pair = a.newLabel(),
                not_j = a.newLabel(), out = a.newLabel();
          em.atom_to(xr::rcx, atom);
          em.object_or_view(xr::rcx, xr::rdx, fail, view);
          a.cmp(xr::dword_ptr(xr::rcx, (int32_t)offsetof(Obj, kind)), (int32_t)Kind::Pair);
          a.jne(not_pair);
          a.mov(xr::r9, xr::rcx);
          a.or_(xr::r9, (int32_t)kViewRZero);  // (a pair's: its view, lazily)
          a.jmp(out);
          a.bind(not_pair);
          a.cmp(xr::dword_ptr(xr::rcx, (int32_t)offsetof(Obj, kind)), (int32_t)Kind::Reverse);
          a.jne(fail);
          a.mov(xr::rcx, xr::qword_ptr(xr::rcx, node_v));
          a.jmp(real);
          a.bind(view);
          a.mov(xr::rdx, xr::rcx);
          a.and_(xr::rdx, 15);
          a.and_(xr::rcx, -16);
          a.cmp(xr::rdx, (int32_t)kViewJ);  // (*j P): the zero of P, a view of it
          a.jne(not_j);
          a.mov(xr::r9, xr::rcx);
          a.or_(xr::r9, (int32_t)kViewZero);
          a.jmp(out);
          a.bind(not_j);
          em.j_view_part(xr::rcx, xr::rdx, fail);
          a.bind(real);
          a.mov(xr::r9, kOffset);  // (0)
          a.cmp(xr::rcx, xr::r9);
          a.jb(fail);
          a.jmp(out);
          a.bind(atom);
          a.mov(xr::r9, xr::rcx);
          a.bind(out);
        });
  return stub;
}

// r9 = 1 when rcx is a zero view ((zero P), (%rzero P) of a pair: back_call's zero sensitivity),
// else 0. Clobbers rdx.
const void* zero_view_stub() {
  static const void* stub = nullptr;
  if (!stub)
    stub = make_r9_stub(
        [&](Emitter& em, Label fail) {
          xr::Assembler& a = em.a;
          Label yes = a.newLabel();
          a.mov(xr::rdx, xr::rcx);
          a.shr(xr::rdx, 48);
          a.jnz(fail);
          a.cmp(xr::rcx, 0xff);
          a.jbe(fail);
          a.mov(xr::rdx, xr::rcx);
          a.and_(xr::rdx, 15);
          a.cmp(xr::rdx, (int32_t)kViewZero);
          a.je(yes);
          a.cmp(xr::rdx, (int32_t)kViewRZero);
          a.jne(fail);
          a.bind(yes);
          a.mov(xr::r9d, 1);
        });
  return stub;
}

const void* j_part_stub(bool cdr) {
  static const void* stubs[2] = {nullptr, nullptr};
  if (!stubs[cdr])
    stubs[cdr] = make_stub(
        0,
        [&](Emitter& em, Label fail) {
          em.a.mov(xr::r8, xr::rcx);
          em.a.shr(xr::r8, 48);
          em.a.jnz(fail);
          em.j_part_of_view(cdr, fail);
        },
        [](xr::Assembler& a) { a.xor_(xr::r9d, xr::r9d); });
  return stubs[cdr];
}

// The entry from C++ into a body: kWork and kMeter (callee-saved registers, which bodies share
// without saving) kept for the C++ caller and set, then the body called. Made at first use.
JitEntry make_enter_stub() {
  CodeHolder code;
  code.init(runtime()->environment());
  xr::Assembler a(&code);
  a.push(kWork);
  a.push(kMeter);
  a.sub(xr::rsp, 8);  // (the body entered with the stack as a call leaves it)
  a.mov(kWork, xr::rdx);
  a.mov(kMeter, xr::rcx);
  a.call(xr::r8);
  a.add(xr::rsp, 8);
  a.pop(kMeter);
  a.pop(kWork);
  a.ret();
  void* fn = nullptr;
  if (runtime()->add(&fn, &code) != kErrorOk) {
    fputs("vlad: native tier: the entry stub could not be made\n", stderr);
    abort();
  }
  return reinterpret_cast<JitEntry>(fn);
}
JitEntry enter_stub() {
  static const JitEntry stub = make_enter_stub();
  return stub;
}

const void* plus_stub(int32_t free_lists_offset) {
  static const void* stub = nullptr;  // (if it cannot be made, the sums are done without it)
  if (!stub)
    stub = make_stub(
        free_lists_offset, [](Emitter& em, Label fail) { em.emit_plus_body(fail); },
        [](xr::Assembler& a) { a.xor_(xr::eax, xr::eax); });
  return stub;
}

// A line of /tmp/perf-PID.map for the body at fn: `perf report` then names native code by its
// lambda (its name, the transforms that made it, its position), a developer's aid.
void perf_map(void* fn, size_t size, const Lambda* lam) {
  static FILE* f = fopen(("/tmp/perf-" + std::to_string(getpid()) + ".map").c_str(), "w");
  if (!f) return;
  std::string name = lam && lam->name ? lam->name : "lambda";
  for (const Lambda* l = lam; l && l->transform; l = l->source) name = std::string(1, l->transform) + ":" + name;
  if (lam && lam->pos.file) name += "@" + pos_string(lam->pos);
  if (lam && lam->raw_bp) name += "(bp)";
  fprintf(f, "%lx %zx %s\n", (unsigned long)(uintptr_t)fn, size, name.c_str());
  fflush(f);
  // VLAD_PERF_MAP=2: the code's bytes too, /tmp/vlad-jit-PID-ADDRESS.bin (objdump -b binary)
  if (getenv("VLAD_PERF_MAP")[0] == '2') {
    char path[96];
    snprintf(path, sizeof path, "/tmp/vlad-jit-%d-%lx.bin", (int)getpid(), (unsigned long)(uintptr_t)fn);
    if (FILE* b = fopen(path, "wb")) {
      fwrite(fn, 1, size, b);
      fclose(b);
    }
  }
}

// Whether every label a jump of the body refers to was bound. (asmjit does not check: a jump to a
// label never bound, an emitter's mistake, made code that crashed.) Otherwise the body is left to
// the interpreter, and standard error says so once, which the tests comparing tiers would see.
bool all_jumps_bound(const CodeHolder& code) {
  for (const LabelEntry* le : code.labelEntries()) {
    if (le && !le->isBound() && le->links()) {
      static bool said = false;
      if (!said) fputs("vlad: native tier: a body left to the interpreter (a jump to no label)\n", stderr);
      said = true;
      return false;
    }
  }
  return true;
}

}  // namespace

JitEntry jit_entry = nullptr;

namespace {
thread_local int evaluations_here = 0;  // evaluations running on this thread (nested: a fallback)

// Releases the queued code if at most `running` evaluations run.
void release_dead_code(int running) {
  // (finalizers due from a collection in this evaluation, run here rather than in a later one;
  // not when a host runs them itself: docs/embedding.md)
  if (!GC_get_finalize_on_demand() && GC_should_invoke_finalizers()) GC_invoke_finalizers();
  std::vector<void*>* dead = nullptr;
  {
    std::lock_guard<std::mutex> lock(dead_mutex);
    if (evaluations > running || !dead_code || dead_code->empty()) return;
    dead = dead_code;
    dead_code = nullptr;
  }
  {
    std::lock_guard<std::mutex> lock(jit_mutex);
    for (void* fn : *dead) runtime()->release(fn);
    released_bodies += dead->size();
  }
  delete dead;
}
}  // namespace

void jit_evaluation_begins() {
  std::lock_guard<std::mutex> lock(dead_mutex);
  evaluations++;
  evaluations_here++;
}

void jit_evaluation_ends() {
  {
    std::lock_guard<std::mutex> lock(dead_mutex);
    evaluations--;
    evaluations_here--;
  }
  release_dead_code(0);
}

void jit_between_forms() {
  // (this thread's one evaluation, at its top level, is the only one running: no frame of
  // native code is on any stack)
  if (evaluations_here == 1) release_dead_code(1);
}

size_t jit_code_bytes() {
  std::lock_guard<std::mutex> lock(jit_mutex);
  return runtime()->allocator()->statistics().usedSize();
}

uint64_t jit_released_bodies() {
  std::lock_guard<std::mutex> lock(jit_mutex);
  return released_bodies;
}

void jit_compile(Code* c) {
  std::lock_guard<std::mutex> lock(jit_mutex);
  if (c->native || c->jit_failed) return;
  if (!jit_entry) jit_entry = enter_stub();  // (made before any body can be entered)
  c->frame_bytes = (kExecBytes + 8 * (int64_t)c->nslots + 15) & ~(int64_t)15;
  CodeHolder code;
  code.init(runtime()->environment());
  xr::Assembler a(&code);
  auto t0 = std::chrono::steady_clock::now();
  Emitter em(a);
  em.ret = a.newLabel();
  Section* cold = nullptr;
  if (code.newSection(&cold, ".cold", SIZE_MAX, SectionFlags::kExecutable, 1) == kErrorOk) em.cold_section = cold;
  ptrdiff_t d = depth_offset_from_work();
  em.depth_offset_ok = d == (int32_t)d;
  em.depth_offset = (int32_t)d;
  em.enter = enter_layout();
  ptrdiff_t f = (char*)free_lists_address() - (char*)work_address();
  em.alloc_ok = f == (int32_t)f && free_list_index(sizeof(Pair)) >= 0;
  em.free_lists_offset = (int32_t)f;
  em.body(c);
  void* fn = nullptr;
  if (!all_jumps_bound(code) || runtime()->add(&fn, &code) != kErrorOk) {
    c->jit_failed = true;  // (interpreted from now on)
    return;
  }
  if (!em.pins.empty()) {  // (before the code can run)
    Value* pins = static_cast<Value*>(gc_alloc(sizeof(Value) * em.pins.size()));
    std::copy(em.pins.begin(), em.pins.end(), pins);
    c->pins = pins;
    c->npins = (int)em.pins.size();
  }
  for (int k = 0; k <= 4; k += 2)  // (before `native`, which tells callers the code is there)
    c->entries[k / 2] = em.entry_labels[k].isValid() ? (char*)fn + code.labelOffsetFromBase(em.entry_labels[k]) : fn;
  c->native = reinterpret_cast<int (*)(Exec*, int, WorkCounters*, uint64_t*)>(fn);
  void** owner = static_cast<void**>(gc_alloc_atomic(sizeof(void*)));
  *owner = fn;
  c->native_owner = owner;
  GC_register_finalizer_no_order(owner, on_dead_code, nullptr, nullptr, nullptr);  // (above)
  if (getenv("VLAD_PERF_MAP")) perf_map(fn, code.codeSize(), c->lam);
  if (em.arg_car) {
    c->arg_x = em.arg_car->x;
    c->arg_x2 = em.arg_cdr->x;
  }
  if (em.arg3_car) {
    c->arg_x3 = em.arg3_car->x;
    c->arg_x4 = em.arg3_cdr->x;
  }
  if (Lambda* lam = c->lam) {
    if (lam->code == c && !lam->native1 && !lam->native2 && !lam->native_split1 && !lam->native_split2 && !lam->raw_bp)
      lam->direct = c;
    if (lam->code == c && lam->raw_bp && !c->chain_head && !lam->native_back) lam->raw_direct = c;
    if (lam->code == c && lam->raw_bp && c->chain_head && !lam->native_back) lam->raw_chain = c;
  }
  work.native_bodies++;
  work.native_instructions += em.instructions;
  work.native_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
}

#endif

}  // namespace vlad
