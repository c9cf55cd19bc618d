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
  bool split;   // App whose result pair is taken apart at once: car to slot x, cdr to slot x2
  int x, a, b, b2, x2;
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
};

}  // namespace vlad
