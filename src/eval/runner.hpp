// runner.hpp — running evaluations on a large dedicated stack, `--check` and `--meter`.
#pragma once
#include <functional>
#include <string>

#include "interp.hpp"

namespace vlad {

// Runs `fn` on a thread with a large stack (registered with the collector), with `in` as the
// current interpreter, and waits for it. Exceptions thrown by `fn` are rethrown here.
void run_on_big_stack(Interp* in, const std::function<void()>& fn);

// Stack size used for evaluation threads, in bytes.
extern size_t eval_stack_bytes;

// SPEC §6 --check: evaluates every form; annotated ones are compared with their answer.
// Each failure's text (one line, or a located error; no final newline) goes to `report` as it
// happens; returns the counts of checks passed and failed.
struct CheckResult {
  int passed = 0, failed = 0;
};
CheckResult check_text(Interp& in, const std::string& text, const char* file, const std::string& dir,
                       const std::function<void(const std::string&)>& report);

// Compares a value with an expected answer written in the printed notation (reals within 1e-10).
bool answer_matches(Value v, const std::string& expected);

// The meter report: one line per primitive used, then the total.
std::string meter_report(const Interp& in);
void meter_reset(Interp& in);
uint64_t meter_total(const Interp& in);

}  // namespace vlad
