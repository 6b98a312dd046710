// CUDA C++ emission for fused programs (runtime/fused/program.h has their semantics).
//
//   Result<EmittedKernel> k = EmitCuda(program);   // k->source goes to NVRTC (nvrtc_compiler.h)
//
// The kernel's entry point is `extern "C" __global__ void <name>(...)` with, in order:
//   - one `const T* __restrict__ in<k>` per program input (T: the dtype's storage type:
//     float, double, signed char, unsigned char (also bool), short, unsigned short (also
//     float16 and bfloat16, as raw bits), int, unsigned int, long long, unsigned long long);
//   - one `T* __restrict__ out<k>` per program output;
//   - one `long long s<k>` per size argument (Program::num_sizes);
//   - `unsigned int* __restrict__ err`: kErrorWords zero-initialised words. A failed
//     kCheckIndex stores (check index + 1) in err[0] (first failure wins, by atomicCAS) and
//     the index found in err[1] (low 32 bits) and err[2] (high 32 bits).
//
// Launch rules (the schema's Launch table):
//   - kElementwise (no reduced axes): any grid and block; each thread walks the domain in a
//     grid-stride loop, `vector` consecutive elements per step on the vectorised path (taken
//     at run time when the element count is a multiple of 4 and the vector pointers are
//     16-byte aligned; otherwise the scalar loop does it all). A good grid is
//     ceil(n / (block * vector)), capped (e.g. at 65535 or a multiple of the SM count).
//   - kRowReduction: blockDim.x = `block` (32..256, a power of two; any multiple of 32 up
//     to `block` also works); blocks stride over the rows (grid.x = min(rows, cap) is
//     fine), the block's threads over the columns. Static shared memory only (<= 768 B).
//   - index_bits 32: every dim is constant and every element count is below 2^31, so the
//     kernel decomposes indices in 32-bit arithmetic; 64 otherwise.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/status.h"
#include "runtime/fused/program.h"

namespace kiln::codegen {

// The schema's LaunchKind values.
enum class LaunchKind : int8_t { kElementwise = 0, kRowReduction = 1 };

inline constexpr int kErrorWords = 3;

struct EmittedKernel {
  // "kiln_" + 16 hex digits of the XXH64 of the kernel body and the printed program: two
  // programs that emit the same body (they differ only where the code does not look, such
  // as the full shape of an input read at the linear index) still get distinct kernels, as
  // the artifact stores each kernel's program for the CPU backend and for validation.
  std::string name;
  std::string source;  // the complete NVRTC input: prelude sections, then the kernel
  LaunchKind kind = LaunchKind::kElementwise;
  int block = 256;     // threads per block
  int vector = 1;      // elements per thread on the vectorised path (1: none)
  int index_bits = 64;
  // Counts of the entry's argument groups, in argument order (see above).
  int num_inputs = 0;
  int num_outputs = 0;
  int num_sizes = 0;
  // The C type of each pointer argument (inputs, then outputs), without const.
  std::vector<std::string> pointer_types;
};

// Emits the kernel of a program. Validates it first (fused::Validate); returns
// kInvalidArgument for an invalid program and kUnimplemented for one the emitter does not
// support (none known). Identical programs give identical kernels (same name and source).
Result<EmittedKernel> EmitCuda(const fused::Program& program);

// The kernel's source as host C++: the host shim (host_shim.h), then `kernel.source`.
// Several kernels' host sources can be concatenated into one translation unit (the prelude
// sections have include guards; kernels with the same name are the same kernel).
std::string HostSource(const EmittedKernel& kernel);

// A host launcher for the kernel, to append after its HostSource:
//   extern "C" void <name>_host(void* const* inputs, void* const* outputs,
//                               const long long* sizes, unsigned* err,
//                               unsigned grid, unsigned block);
// It runs the blocks one after another, each block's threads at once as host threads
// (host_shim.h; RowReduction kernels need block 1 or a multiple of 32).
std::string HostLauncher(const EmittedKernel& kernel);

}  // namespace kiln::codegen
