// bench/api_call.cpp — the embedding API's cost a call: Interpreter::call of a one-operation
// function and Interpreter::gradient of one, each a whole evaluation (on the kept evaluation thread, the
// value handed back); prints microseconds per call (best of 5 rounds of 400).
#include <vlad/vlad.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

int main() {
  vlad::Interpreter vm;
  vm.eval_string("(define (sq x) (* x x)) (define (sq-first l) (* (car l) (car l)))");
  vlad::Value sq = vm.global("sq"), sq_first = vm.global("sq-first");
  double best_call = 1e9, best_gradient = 1e9, sum = 0;
  for (int round = 0; round < 5; round++) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 400; i++) sum += vlad::to_real(vm.call(sq, vlad::Value((double)i)));
    auto t1 = std::chrono::steady_clock::now();
    for (int i = 0; i < 400; i++) sum += vm.gradient(sq_first, std::vector<double>{(double)i})[0];
    auto t2 = std::chrono::steady_clock::now();
    best_call = std::min(best_call, std::chrono::duration<double, std::micro>(t1 - t0).count() / 400);
    best_gradient = std::min(best_gradient, std::chrono::duration<double, std::micro>(t2 - t1).count() / 400);
  }
  std::printf("%.1f %.1f %.0f\n", best_call, best_gradient, sum);
}
