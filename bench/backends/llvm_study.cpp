// llvm_study.cpp — the same measurement as asmjit_study.cpp with LLVM 15's ORC JIT (LLJIT): IR
// built with IRBuilder, compiled without optimisation passes (-O0 codegen) and with the O2 pipeline.
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/TargetSelect.h>

#include "study.hpp"

using namespace llvm;

int main() {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  InitializeNativeTarget();
  InitializeNativeTargetAsmPrinter();
  for (bool opt : {false, true}) {
    for (int n : {100, 1000, 4000}) {
      std::vector<Ins> p = program(n);
      auto t0 = Clock::now();
      auto ctx = std::make_unique<LLVMContext>();
      auto mod = std::make_unique<Module>("m", *ctx);
      IRBuilder<> b(*ctx);
      Type* i64 = b.getInt64Ty();
      Type* dbl = b.getDoubleTy();
      FunctionType* ft = FunctionType::get(b.getInt32Ty(), {PointerType::getUnqual(*ctx)}, false);
      Function* f = Function::Create(ft, Function::ExternalLinkage, "f", mod.get());
      BasicBlock* entry = BasicBlock::Create(*ctx, "entry", f);
      BasicBlock* bail = BasicBlock::Create(*ctx, "bail", f);
      b.SetInsertPoint(bail);
      b.CreateRet(b.getInt32(1));
      b.SetInsertPoint(entry);
      Value* fr = f->getArg(0);
      Value* lim = b.getInt64(0xFFF8000000000000ull);
      for (const Ins& in : p) {
        Value* pa = b.CreateGEP(i64, fr, b.getInt64(in.a));
        Value* pb = b.CreateGEP(i64, fr, b.getInt64(in.b));
        Value* va = b.CreateLoad(i64, pa);
        Value* vb = b.CreateLoad(i64, pb);
        Value* bad = b.CreateOr(b.CreateICmpUGE(va, lim), b.CreateICmpUGE(vb, lim));
        BasicBlock* next = BasicBlock::Create(*ctx, "", f);
        b.CreateCondBr(bad, bail, next);
        b.SetInsertPoint(next);
        Value* da = b.CreateBitCast(va, dbl);
        Value* db = b.CreateBitCast(vb, dbl);
        Value* r = in.op == 1 ? b.CreateFSub(da, db) : b.CreateFMul(da, db);
        b.CreateStore(r, b.CreateGEP(dbl, fr, b.getInt64(in.x)));
      }
      b.CreateRet(b.getInt32(0));
      if (opt) {
        LoopAnalysisManager lam;
        FunctionAnalysisManager fam;
        CGSCCAnalysisManager cam;
        ModuleAnalysisManager mam;
        PassBuilder pb;
        pb.registerModuleAnalyses(mam);
        pb.registerCGSCCAnalyses(cam);
        pb.registerFunctionAnalyses(fam);
        pb.registerLoopAnalyses(lam);
        pb.crossRegisterProxies(lam, fam, cam, mam);
        pb.buildPerModuleDefaultPipeline(OptimizationLevel::O2).run(*mod, mam);
      }
      auto jtmb = orc::JITTargetMachineBuilder::detectHost();
      jtmb->setCodeGenOptLevel(opt ? CodeGenOpt::Default : CodeGenOpt::None);
      auto jit = orc::LLJITBuilder().setJITTargetMachineBuilder(std::move(*jtmb)).create();
      if (!jit) { std::printf("llvm: no jit\n"); return 1; }
      cantFail((*jit)->addIRModule(orc::ThreadSafeModule(std::move(mod), std::move(ctx))));
      auto sym = cantFail((*jit)->lookup("f"));
      Fn fn = sym.toPtr<Fn>();
      report(opt ? "llvm O2" : "llvm O0", n, t0, fn);
    }
  }
  return 0;
}
