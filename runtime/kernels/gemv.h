// A matrix-vector product y += A x as an AVX-512 loop, for the CPUs that have it: the recurrent
// product of LSTM and GRU at batch 1 (runtime/kernels/recurrent.cc), R h_{t-1} once per step. At
// that size dnnl_sgemm (1 x 1024 x 256: a bidirectional LSTM of hidden 256) packs R on every
// call; this reads A's rows where they are, four at a time. Measured on this project's 2-core
// AMD EPYC (Zen 5), 200 steps over two 1 MiB R: 1.60-1.69 ms against dnnl_sgemm's 1.97-2.13 and
// OpenBLAS cblas_sgemv's 2.16 (benchmarks/results/2026-12-05-attention-3.md).
//
// y[j] is a sum over e in a fixed order (16 lanes, then the lanes in a tree), the same for
// every call: the bits do not depend on the thread count.
#pragma once

#include <cstdint>

namespace kiln::cpu {

// y[j] += sum_e a[j * lda + e] * x[e], for j < rows, e < cols. float32; no alignment required.
using GemvFn = void (*)(const float* a, int64_t lda, const float* x, int64_t rows, int64_t cols, float* y);

// The AVX-512 build when ActiveCpuIsa() is AVX-512, else null (callers run Sgemm). Null in a
// selective runtime (runtime/kernels/selective.h), built for size.
GemvFn ActiveGemv();

}  // namespace kiln::cpu
