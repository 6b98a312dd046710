// Runs generated CUDA kernels on the host: their source, behind the host shim
// (compiler/codegen/host_shim.h), is compiled by the host C++ compiler into a shared
// object, loaded with dlopen, and launched block by block, thread by thread.
//
//   auto lib = HostKernels::Build(kernels, dir.path.string());    // one compile for all kernels
//   Status st = RunHostKernel(**lib, kernel, program, inputs, outputs, sizes);
//
// The compiler is $CXX if set, else `c++`, run with codegen::kHostShimFlags
// (compiler/codegen/host_shim.h).
// Blocks run one after another; the threads of a block run at once as host threads, so
// __syncthreads and warp shuffles in block reductions really synchronise (host_shim.h).
// SmallLaunch picks a small grid so the grid-stride loops take several steps.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "compiler/codegen/cuda_source.h"
#include "kiln/status.h"
#include "runtime/kernels/kernel.h"
#include "runtime/fused/program.h"

namespace kiln::testing {

struct HostLaunch {
  unsigned grid = 1;
  unsigned block = 1;
};

class HostKernels {
 public:
  // Writes every kernel's host source and launcher (kernels with the same name once) into
  // `dir`/host_kernels.cc, compiles it to host_kernels.so and loads it. kInternal with the
  // compiler's output when the source does not compile.
  static Result<std::unique_ptr<HostKernels>> Build(const std::vector<codegen::EmittedKernel>& kernels,
                                                    const std::string& dir);
  ~HostKernels();
  HostKernels(const HostKernels&) = delete;
  HostKernels& operator=(const HostKernels&) = delete;

  // Launches `kernel` on raw buffers (inputs and outputs in the program's order, sizes as
  // the size arguments). `err` must hold codegen::kErrorWords words; it is zeroed first.
  // A RowReduction launch needs block 1 or a multiple of 32.
  Status Launch(const codegen::EmittedKernel& kernel, std::span<const void* const> inputs,
                std::span<void* const> outputs, std::span<const int64_t> sizes, HostLaunch launch,
                uint32_t* err) const;

 private:
  HostKernels() = default;
  void* handle_ = nullptr;
};

// A small launch: for elementwise kernels 4 threads per block and at most 5 blocks, for
// row reductions 64 threads (two warps) per block and at most 3 blocks.
HostLaunch SmallLaunch(const codegen::EmittedKernel& kernel, const fused::Program& program,
                       std::span<const int64_t> sizes);

// Runs `kernel` (emitted from `program`) on tensors, like cpu::RunFused: checks the
// tensors' dtypes and element counts against the program first (so a wrong buffer fails
// instead of being overrun), and turns a recorded kCheckIndex failure into
// kInvalidArgument "<check>: index N is out of range". `launch` defaults to SmallLaunch.
Status RunHostKernel(const HostKernels& lib, const codegen::EmittedKernel& kernel, const fused::Program& program,
                     std::span<const cpu::TensorRef> inputs, std::span<const cpu::TensorRef> outputs,
                     std::span<const int64_t> sizes, std::optional<HostLaunch> launch = std::nullopt);

}  // namespace kiln::testing
