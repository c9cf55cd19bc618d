// code.hpp — the compiled form of a lambda body: instructions over frame slots and env indices.
#pragma once
#include "ast.hpp"

namespace vlad {

enum : uint8_t { AppPlain = 0, AppPair = 1 };

struct Code;

// Operand references: r >= 0 is frame slot r; r < 0 is env[-r-1].
struct Instr {
  Op op;
  uint8_t op2;  // AppPair: argument is (cons b b2), not allocated for binary primitives
  bool tail;
  bool split;   // App, BackCall or If whose result pair is taken apart at once: car to slot x,
                // cdr to slot x2
  // App in tail position of a reverse-transformed body that returns
  // (cons (car p) (closure of `chain` with (cdr p) at env[hole])) for its call's result p: the
  // closure (caps) is made first, and the call is a tail call whose backpropagator fills the hole
  // when it is known (eval.cpp: chains).
  bool chain_call;
  int hole;
  Lambda* chain;
  bool raw_call;     // App: Binding::raw_call
  int index;         // EnvRef: the slot
  Lambda* lam;       // Lambda, EnvRef: Binding::lam (copied here: the Binding is cold in memory)
  bool self_ref;     // Lambda: the running closure itself (a letrec member naming itself)
  bool inert_guard;  // Lambda of a way out's backpropagator: a zero one when the value (b) holds no real
  bool split3;  // BackCall split, its x̄ split again: f̄ to x, car x̄ to x2, cdr x̄ to x3
  int x, a, b, b2, x2, x3;
  int ncaps;
  int* caps;
  Value k;
  Binding* src;
  Code* then_;
  Code* else_;
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
  // A backpropagator whose first instruction calls the backpropagator at env[chain_hole] with its
  // argument (the callee of a chain call): run iteratively along the chain (eval.cpp).
  bool chain_head = false;
  int chain_hole = 0;
};

}  // namespace vlad
