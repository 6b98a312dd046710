#include "compiler/codegen/cpu/llvm_image.h"

#include <llvm-c/Analysis.h>
#include <llvm-c/Core.h>
#include <llvm-c/Support.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include <memory>
#include <mutex>

#include "compiler/codegen/cpu/flat_image.h"
#include "compiler/codegen/cpu/llvm_emitter.h"

namespace kiln::codegen::cpu {
void InitLlvmTargets() {
  static std::once_flag once;
  std::call_once(once, [] {
    // The loop vectorizer picks its width by the widest type in a loop, so a float row summed
    // in double (as the interpreter sums) ran at half the float width; with this it weighs the
    // narrower widths too. An option of the process's LLVM (libLLVM-19.so), set once, before
    // any compile.
    const char* argv[] = {"kiln", "-vectorizer-maximize-bandwidth"};
    LLVMParseCommandLineOptions(2, argv, nullptr);
    LLVMInitializeX86TargetInfo();
    LLVMInitializeX86Target();
    LLVMInitializeX86TargetMC();
    LLVMInitializeX86AsmPrinter();
    LLVMInitializeAArch64TargetInfo();
    LLVMInitializeAArch64Target();
    LLVMInitializeAArch64TargetMC();
    LLVMInitializeAArch64AsmPrinter();
  });
}

namespace {

// LLVM's error message, disposed.
std::string Take(char* message) {
  std::string s = message ? message : "";
  LLVMDisposeMessage(message);
  return s;
}

std::string TakeError(LLVMErrorRef err) { return Take(LLVMGetErrorMessage(err)); }

struct ContextDeleter {
  void operator()(LLVMOpaqueContext* c) const { LLVMContextDispose(c); }
};
struct ModuleDeleter {
  void operator()(LLVMOpaqueModule* m) const { LLVMDisposeModule(m); }
};
struct MachineDeleter {
  void operator()(LLVMOpaqueTargetMachine* t) const { LLVMDisposeTargetMachine(t); }
};

// What decides the object's bytes besides the IR: the target machine, the options set in
// InitLlvmTargets and LLVM's version.
std::string MachineKey(const CpuTarget& target) {
  unsigned major = 0, minor = 0, patch = 0;
  LLVMGetVersion(&major, &minor, &patch);
  return std::string("llvm ") + std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch) +
         '\0' + target.triple + '\0' + target.cpu + '\0' + target.features + '\0' + "O3 pic small maximize-bandwidth";
}

}  // namespace

Result<NativeImage> CompileNativeImage(const std::vector<const fused::Program*>& programs, const CpuTarget& target,
                                       const KernelCache& cache, std::vector<NativeSkip>* skipped, bool* cached) {
  *cached = false;
  InitLlvmTargets();
  NativeImage out;
  out.target = target.name;
  std::unique_ptr<LLVMOpaqueContext, ContextDeleter> ctx(LLVMContextCreate());
  // The module before the context: declared after it, destroyed first.
  std::unique_ptr<LLVMOpaqueModule, ModuleDeleter> mod(LLVMModuleCreateWithNameInContext("kiln", ctx.get()));
  std::vector<std::string> names;
  for (size_t k = 0; k < programs.size(); ++k) {
    if (programs[k] == nullptr) continue;
    const std::string name = "kiln_kernel_" + std::to_string(k);
    Status st = EmitKernel(mod.get(), *programs[k], name, target);
    if (!st.ok()) {
      if (st.code() != StatusCode::kUnimplemented) return st;
      skipped->push_back({static_cast<uint32_t>(k), st.message()});
      continue;
    }
    out.kernels.push_back(static_cast<uint32_t>(k));
    names.push_back(name);
  }
  if (names.empty()) return out;
  char* message = nullptr;
  if (LLVMVerifyModule(mod.get(), LLVMReturnStatusAction, &message)) {
    return Internal(std::string("native code for ") + target.name + ": the emitted IR is invalid: " + Take(message));
  }
  LLVMDisposeMessage(message);

  LLVMTargetRef llvm_target = nullptr;
  if (LLVMGetTargetFromTriple(target.triple, &llvm_target, &message)) {
    return Internal(std::string("native code for ") + target.name + ": " + Take(message));
  }
  std::unique_ptr<LLVMOpaqueTargetMachine, MachineDeleter> tm(
      LLVMCreateTargetMachine(llvm_target, target.triple, target.cpu, target.features, LLVMCodeGenLevelAggressive,
                              LLVMRelocPIC, LLVMCodeModelSmall));
  LLVMSetTarget(mod.get(), target.triple);
  LLVMTargetDataRef layout = LLVMCreateTargetDataLayout(tm.get());
  char* layout_text = LLVMCopyStringRepOfTargetData(layout);
  LLVMSetDataLayout(mod.get(), layout_text);
  LLVMDisposeMessage(layout_text);
  LLVMDisposeTargetData(layout);

  // The IR with its triple and layout, before optimisation, keys the object in the cache.
  char* ir = LLVMPrintModuleToString(mod.get());
  const uint64_t key = KernelCache::Key(Take(ir) + '\0' + MachineKey(target));
  std::vector<uint8_t> object;
  *cached = cache.Read(key, ".o", &object);
  if (!*cached) {
    LLVMPassBuilderOptionsRef options = LLVMCreatePassBuilderOptions();
    LLVMErrorRef err = LLVMRunPasses(mod.get(), "default<O3>", tm.get(), options);
    LLVMDisposePassBuilderOptions(options);
    if (err) return Internal(std::string("native code for ") + target.name + ": optimisation failed: " + TakeError(err));

    LLVMMemoryBufferRef buffer = nullptr;
    if (LLVMTargetMachineEmitToMemoryBuffer(tm.get(), mod.get(), LLVMObjectFile, &message, &buffer)) {
      return Internal(std::string("native code for ") + target.name + ": " + Take(message));
    }
    const auto* start = reinterpret_cast<const uint8_t*>(LLVMGetBufferStart(buffer));
    object.assign(start, start + LLVMGetBufferSize(buffer));
    LLVMDisposeMemoryBuffer(buffer);
    cache.Write(key, ".o", object);
  }
  Result<std::vector<uint8_t>> image = LinkFlatImage(object, names, &out.offsets);
  if (!image.ok()) return Internal(std::string("native code for ") + target.name + ": " + image.status().message());
  out.code = std::move(*image);
  return out;
}

}  // namespace kiln::codegen::cpu
