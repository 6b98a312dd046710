// Native code for a CPU target: every kernel's program emitted into one LLVM module
// (llvm_emitter.h), optimised at O3 for the target (the loop vectorizer widens the loops to its
// vectors), compiled to an ELF relocatable object, and linked into one flat image that needs
// no relocation where it is mapped (flat_image.h).
//
//   std::vector<NativeSkip> skipped;
//   bool cached = false;
//   Result<NativeImage> image = CompileNativeImage(programs, target, cache, &skipped, &cached);
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/codegen/cpu/targets.h"
#include "compiler/codegen/kernel_cache.h"
#include "kiln/status.h"
#include "runtime/fused/program.h"

namespace kiln::codegen::cpu {

struct NativeImage {
  std::string target;                  // CpuTarget::name
  std::vector<uint8_t> code;           // the image
  std::vector<uint32_t> kernels;       // kernel indices with native code, ascending
  std::vector<uint32_t> offsets;       // each one's function offset in `code`
};

// A kernel left to the interpreter on a target, and why (the emitter's kUnimplemented message).
struct NativeSkip {
  uint32_t kernel;
  std::string reason;
};

// Registers LLVM's x86-64 and aarch64 code generators, once per process (later calls return at
// once). CompileNativeImage calls it; so do tests that compile IR themselves. Thread-safe.
void InitLlvmTargets();

// Compiles programs[k] (nullptr: no program) as kernel k's function for `target`. Kernels the
// emitter does not cover are left out and listed in `skipped`. The object (before linking) is
// kept in `cache`, keyed by the emitted IR, the target machine and LLVM's version; `cached` says
// whether it came from there (the emission and the link run either way). Thread-safe (each call
// has its own LLVM context). Errors: kInternal when LLVM fails or the object holds something
// the image cannot (the message names it).
Result<NativeImage> CompileNativeImage(const std::vector<const fused::Program*>& programs, const CpuTarget& target,
                                       const KernelCache& cache, std::vector<NativeSkip>* skipped, bool* cached);

}  // namespace kiln::codegen::cpu
