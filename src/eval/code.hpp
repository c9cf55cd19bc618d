// code.hpp — the compiled form of a lambda body: instructions over frame slots and env indices.
#pragma once
#include <cstddef>
#include <cstring>

#include "ast.hpp"

namespace vlad {

// Instr::op2: App's argument (AppPlain, AppPair); BackChainLink marks the first instruction of a
// chain head (Code::chain_head), the BackCall of its hole, which only native code runs: the
// interpreter walks a chain instead, with one call record for it (eval.cpp: chains).
enum : uint8_t { AppPlain = 0, AppPair = 1, BackChainLink = 2 };
// Instr::seen: a primitive; a closure whose lambda has the native form the call would use
// (native2 for a call of two arguments, native_split1/2 for a split call); another closure;
// anything else.
enum : uint8_t { kSeenPrim = 1, kSeenNative = 2, kSeenClosure = 4, kSeenOther = 8 };
// BackCall (split): the backpropagator of a primitive's node or of a constant comparison (a view:
// back_node); of car or cdr on a list that is *j of data (kViewBpCarJ / kViewBpCdrJ); another.
enum : uint8_t { kSeenBackNode = 1, kSeenBackProj = 2, kSeenBackOther = 4 };

struct Code;
struct Exec;

// Operand references: r >= 0 is frame slot r; r < 0 is env[-r-1].
// 64 bytes, one cache line: transformed code is large, and instructions are read once per step.
struct Instr {
  Op op;
  uint8_t op2;  // AppPair: argument is (cons b b2), not allocated for binary primitives
  bool tail : 1;
  bool split : 1;   // App, BackCall or If whose result pair is taken apart at once: car to slot x,
                    // cdr to slot x2
  bool split3 : 1;  // BackCall split, its x̄ split again: f̄ to x, car x̄ to x2, cdr x̄ to x3
  // App in tail position of a reverse-transformed body that returns
  // (cons (car p) (closure of `chain` with (cdr p) at env[hole])) for its call's result p: the
  // closure (caps) is made first, and the call is a tail call whose backpropagator fills the hole
  // when it is known (eval.cpp: chains).
  bool chain_call : 1;
  bool raw_call : 1;     // App: Binding::raw_call
  bool self_ref : 1;     // Lambda: the running closure itself (a letrec member naming itself)
  bool inert_guard : 1;  // Lambda of a way out's backpropagator: a zero one when the value (b) holds no real
  // App (AppPair) whose b2 is the pair (c . d) that the Cons just before it makes, read only
  // here: an argument (b c . d) of three parts. Native code makes that pair only when the callee
  // does not take the three parts (Code::arg_x3); the interpreter runs the Cons as any other.
  bool parts3 : 1;
  // App, BackCall: the kinds of callee the interpreter has met here (kSeen*, note_callee), so
  // that native code inlines only the ways of calling them (none seen yet: all of them).
  uint8_t seen = 0;
  int x, a, b, b2, x2, x3;
  int ncaps;  // Lambda, chain call
  union {
    int hole;   // chain call
    int index;  // EnvRef: the slot
  };
  Binding* src;  // where it came from (positions, patterns, a Global's cache): cold in memory
  union {
    uint64_t kbits;         // Const, Check: the constant's bits
    Code* then_;            // If
    Lambda* lam;            // Lambda, EnvRef
    Lambda* chain;          // chain call
    const char* site_file;  // App (not a chain call), BackCall: site()
  };
  union {
    int* caps;    // Lambda, chain call: one operand per captured variable
    Code* else_;  // If
    struct {
      int site_line, site_col;  // App (not a chain call), BackCall: site()
    };
  };
  Value k() const { return Value(kbits, 0); }
  // An App's or a BackCall's position (src->pos), kept here too: every call's record takes it, and
  // src lies elsewhere in memory (in code run once a pass, as under nested transforms, a cache
  // miss each call).
  Pos site() const { return chain_call || (op != Op::App && op != Op::BackCall) ? src->pos : call_site(); }
  // The same where the instruction is known to be such a call (two loads, as src->pos was).
  Pos call_site() const {
    Pos p;
    std::memcpy(&p, reinterpret_cast<const char*>(this) + kSiteOffset, sizeof p);
    return p;
  }
  static const size_t kSiteOffset;
};

struct Code {
  Instr* ins = nullptr;
  int n = 0;
  int result = 0;
  int nslots = 0;
  // The body's value is (cons r1 r2), its last binding, which a caller that takes it apart at
  // once receives as two values (no pair is made).
  bool pair_result = false;
  int r1 = 0, r2 = 0;
  // A raw backpropagator's body whose value is (cons f̄ (cons a b)), its last two bindings, the
  // inner pair used only there: r1 = f̄, r2 = a, r3 = b, and the pair x̄ = (a . b) is made at the
  // end only when the runner did not ask for the parts (Exec::want3; Exec::finish).
  bool triple_result = false;
  int r3 = 0;
  // A backpropagator whose first instruction calls the backpropagator at env[chain_hole] with its
  // argument (the callee of a chain call): run iteratively along the chain (eval.cpp).
  bool chain_head = false;
  int chain_hole = 0;
  // A lambda's own body (not a branch): what the native tier compiles, once `runs` passes the
  // threshold (jit.cpp). `native` is its machine code, entered at instruction 0 or 1 (a chain's
  // rest, eval.cpp), or null; native callers enter through `entries` below.
  bool entry = false;
  Lambda* lam = nullptr;  // whose body it is (entry)
  bool jit_failed = false;
  // Runs counted within a window of the thread's steps (jit_window_bits), halved for each window
  // gone by: only a body run often compared with the rest is compiled (Exec::run).
  uint32_t runs = 0;
  uint32_t runs_window = 0;
  // When the native code's first two instructions take the argument apart (car to slot arg_x,
  // cdr to slot arg_x2) and nothing else reads it, a native caller passing two values writes
  // them there and enters at instruction 2, making no pair; -1 otherwise.
  int arg_x = -1, arg_x2 = -1;
  // The same for an argument of three parts (a b . c): instructions 0-3 take it apart (car and
  // cdr, then car and cdr of that cdr, which nothing else reads), and a native caller passing
  // the three writes them to slots arg_x, arg_x3, arg_x4 and enters at instruction 4.
  int arg_x3 = -1, arg_x4 = -1;
  // Native code is entered from C++ through jit.cpp's entry stub (jit_entry), which sets the
  // registers every body shares (the thread's WorkCounters and meter); a native caller calls
  // `native` directly, with its Exec and frame below its stack pointer, `frame_bytes` of them
  // (the Exec and nslots slots, 16-byte aligned).
  int (*native)(Exec*, int start, WorkCounters* w, uint64_t* meter) = nullptr;
  // A native caller enters at entries[start / 2] (its start, 0, 2 or 4, in rsi as for `native`):
  // `native` itself, or for start 2 and 4 (arg_x, arg_x3 below) an entry of their own that goes
  // straight to that instruction, without `native`'s dispatch on the start out of line.
  void* entries[3] = {};
  int64_t frame_bytes = 0;
  // Values the native code compares with by address (a transformed global's cached closure,
  // known when compiling): held here, in memory the collector scans, since the machine code's
  // copies of them are not seen by it.
  Value* pins = nullptr;
  int npins = 0;
  // A pointer-free object of the collector's holding `native`'s address, referenced from here
  // only: its finalizer queues the machine code for release when this Code dies (jit.cpp). (On a
  // small object of its own, not on the Code: a finalizable object's whole graph is marked again
  // when it dies.)
  void* native_owner = nullptr;
};

}  // namespace vlad
static_assert(sizeof(vlad::Instr) <= 64, "an instruction is one cache line");
inline const size_t vlad::Instr::kSiteOffset = offsetof(vlad::Instr, site_file);
static_assert(offsetof(vlad::Instr, site_line) == offsetof(vlad::Instr, site_file) + 8 &&
                  offsetof(vlad::Instr, site_col) == offsetof(vlad::Instr, site_file) + 12 &&
                  offsetof(vlad::Pos, line) == 8 && offsetof(vlad::Pos, col) == 12 && sizeof(vlad::Pos) == 16,
              "Instr::call_site reads a Pos at site_file");
