// kiln/library.h: what runs an instruction on a backend (docs/architecture.md, "Vocabulary"):
// Kiln's own code (a CPU kernel, a generated kernel, the executor's control) or a vendor library
// the backend calls. InstructionInfo::placements says what the compiler chose per backend, and
// Stats::last_instruction_library what ran.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string_view>

namespace kiln {

enum class Library : uint8_t {
  kCpuKernel = 0,  // Kiln's CPU kernel for the op (runtime/kernels/); on a device backend, on the
                   // host, in a CPU fallback region
  kGenerated = 1,  // a generated kernel: a fused region's cubin or PTX on CUDA, its portable
                   // program (interpreted) on the CPU
  kOneDnn = 2,     // oneDNN, on the CPU backend (CpuOptions::onednn)
  kCublasLt = 3,   // cuBLASLt, on the CUDA backend
  kCudnn = 4,      // cuDNN, on the CUDA backend
  kControl = 5,    // the executor itself: a run-time Loop's kiln.LoopBegin or kiln.LoopEnd
  kOpenBlas = 6,   // OpenBLAS, on the CPU backend: what ran a MatMul or Gemm placed on Kiln's CPU
                   // kernel whose products are below oneDNN's sgemm threshold (Stats only; an
                   // artifact never names it, and such a MatMul above it reads kOneDnn)
};
// "cpu", "generated", "onednn", "cublaslt", "cudnn", "control" ("openblas"): as the artifact, the
// compiler's traces, `kiln inspect` and the tools' JSON write it.
constexpr std::string_view LibraryName(Library library) {
  constexpr std::string_view kNames[] = {"cpu", "generated", "onednn", "cublaslt", "cudnn", "control", "openblas"};
  return static_cast<size_t>(library) < std::size(kNames) ? kNames[static_cast<size_t>(library)] : "?";
}
// "CPU kernel", "generated kernel", "oneDNN", "cuBLASLt", "cuDNN", "control", "OpenBLAS": for
// reports.
constexpr std::string_view LibraryTitle(Library library) {
  constexpr std::string_view kTitles[] = {"CPU kernel", "generated kernel", "oneDNN", "cuBLASLt",
                                          "cuDNN",      "control",          "OpenBLAS"};
  return static_cast<size_t>(library) < std::size(kTitles) ? kTitles[static_cast<size_t>(library)] : "?";
}

}  // namespace kiln
