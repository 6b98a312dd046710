// The CPU backend's interpreter of fused programs (runtime/fused/program.h). It evaluates
// the program over blocks of consecutive domain elements, one node at a time across the
// block, so the per-node dispatch cost is paid once per block rather than per element.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "kiln/status.h"
#include "runtime/cpu/arch/x86/cpu_isa.h"
#include "runtime/kernels/kernel.h"
#include "runtime/fused/program.h"

namespace kiln::cpu {

// Bytes of scratch RunFused needs for `program` on a pool of `threads` threads (1 without a
// pool): one slice per thread, independent of the sizes.
size_t FusedWorkspaceBytes(const fused::Program& program, int threads = 1);

// Runs a validated program. `inputs`/`outputs` are dense row-major host tensors matching
// program.inputs/outputs (dtype and, once `sizes` are substituted, element counts);
// `sizes` holds the size arguments. `workspace` must hold FusedWorkspaceBytes(program,
// threads ? threads->size() : 1). With a pool, large launches split their blocks of rows
// (or their rows, when a row spans several blocks) over its threads; a row's reductions stay
// on one thread, so the results are the same bits whatever the pool.
// Errors: kInvalidArgument when a kCheckIndex fails (the message quotes the check and the
// index found; the first failing element in domain order), when counts or dtypes do not
// match, or when a size argument is negative; kInternal when a load index is out of range (a
// compiler bug) or the workspace is too small. Never allocates.
// `isa`: the interpreter's build to run (cpu_isa.h): baseline x86-64, or on x86-64 also ones
// compiled for AVX2 and for AVX-512, 1.5x and 1.6x faster on ppocr-det-v3's programs, giving
// the same bits (interpreter.inc says why). An instruction set the CPU lacks is
// undefined (an illegal instruction); the default is what the CPU has, capped by
// KILN_MAX_CPU_ISA.
Status RunFused(const fused::Program& program, std::span<const TensorRef> inputs,
                std::span<const TensorRef> outputs, std::span<const int64_t> sizes, void* workspace,
                size_t workspace_bytes, ThreadPool* threads = nullptr, CpuIsa isa = ActiveCpuIsa());

}  // namespace kiln::cpu
