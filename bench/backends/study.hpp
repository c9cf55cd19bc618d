// study.hpp — what asmjit_study.cpp and llvm_study.cpp share: the generated program (straight-line
// `fr[x] = fr[a] op fr[b]`, op 1 = -, 2 = *, on values near 1 so that no NaN makes a guard leave)
// and the measurement of the compiled function.
#pragma once
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

using Fn = int (*)(double*);
using Clock = std::chrono::steady_clock;

struct Ins { int op, x, a, b; };
constexpr int kSlots = 64;

inline std::vector<Ins> program(int n) {
  std::mt19937 rng(1);
  std::vector<Ins> p;
  for (int i = 0; i < n; i++) p.push_back({int(rng() % 2) + 1, int(rng() % kSlots), int(rng() % kSlots), int(rng() % kSlots)});
  return p;
}

// Runs fn over ~2*10^7 instructions and prints compile time (since t0) and run time per instruction.
inline void report(const char* name, int n, Clock::time_point t0, Fn fn) {
  auto t1 = Clock::now();
  std::vector<double> fr(kSlots);
  int reps = 20000000 / n, bails = 0;
  auto t2 = Clock::now();
  for (int r = 0; r < reps; r++) {
    for (int s = 0; s < kSlots; s++) fr[s] = 1.0 + 1e-9 * s;
    bails += fn(fr.data());
  }
  auto t3 = Clock::now();
  double ct = std::chrono::duration<double, std::micro>(t1 - t0).count();
  double rn = std::chrono::duration<double, std::nano>(t3 - t2).count() / (double(reps) * n);
  std::printf("%-8s n=%6d  compile %10.1f us (%9.1f ns/instr)  run %5.2f ns/instr  (bails %d)\n", name, n, ct,
              ct * 1000 / n, rn, bails);
}
