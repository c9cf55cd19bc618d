// asmjit_study.cpp — compile latency and code speed of a template JIT built with asmjit, on the
// shape of code vlad's native tier would emit: straight-line instructions over a frame of
// NaN-boxed values (reals are raw doubles), each `fr[x] = fr[a] op fr[b]` with a guard that both
// operands are reals (else: leave, the interpreter resumes at that instruction). The operations
// are - and * on values near 1, so that no NaN makes the guard leave early.
#include <asmjit/x86.h>

#include "study.hpp"

using namespace asmjit;

int main() {
  for (int n : {100, 1000, 36000}) {
    std::vector<Ins> p = program(n);
    JitRuntime rt;
    auto t0 = Clock::now();
    CodeHolder code;
    code.init(rt.environment());
    x86::Assembler a(&code);
    Label bail = a.newLabel();
    // rdi = frame. A NaN-boxed non-real has its top 13 bits set (>= 0xFFF8 << 48).
    a.mov(x86::rax, uint64_t(0xFFF8000000000000ull));
    for (size_t i = 0; i < p.size(); i++) {
      const Ins& in = p[i];
      a.mov(x86::rcx, x86::qword_ptr(x86::rdi, in.a * 8));
      a.cmp(x86::rcx, x86::rax);
      a.jae(bail);
      a.mov(x86::rdx, x86::qword_ptr(x86::rdi, in.b * 8));
      a.cmp(x86::rdx, x86::rax);
      a.jae(bail);
      a.movq(x86::xmm0, x86::rcx);
      a.movq(x86::xmm1, x86::rdx);
      if (in.op == 0) a.addsd(x86::xmm0, x86::xmm1);
      else if (in.op == 1) a.subsd(x86::xmm0, x86::xmm1);
      else a.mulsd(x86::xmm0, x86::xmm1);
      a.movsd(x86::qword_ptr(x86::rdi, in.x * 8), x86::xmm0);
    }
    a.xor_(x86::eax, x86::eax);
    a.ret();
    a.bind(bail);
    a.mov(x86::eax, 1);
    a.ret();
    Fn fn;
    if (rt.add(&fn, &code) != kErrorOk) { std::printf("asmjit: add failed\n"); return 1; }
    report("asmjit", n, t0, fn);
  }
  return 0;
}
