// The host shim: text that, placed before a generated kernel's source, lets the host C++
// compiler (g++/clang++, -std=c++20) compile that source unchanged, so generated kernels
// are checked on machines without a GPU (HostSource in cuda_source.h puts it in front, and
// HostLauncher's wrapper calls kiln_host_launch).
//
// What it provides:
//  - the CUDA qualifiers as nothing (__global__, __device__, __launch_bounds__), plain
//    `inline` (__forceinline__), and `static` (__shared__: one array for the block that is
//    running; blocks run one after another);
//  - threadIdx/blockIdx/blockDim/gridDim as thread_local variables, set by
//    kiln_host_launch before it calls the kernel function for each thread;
//  - block execution. kiln_host_launch runs the blocks one after another. A block of one
//    thread is a plain call: its __syncthreads is a no-op and its block reduction the
//    identity (kiln_block_reduce shuffles only for offsets below blockDim.x, so
//    __shfl_xor_sync is never reached; it traps if it is). A block of several threads runs
//    them as host threads at once, so barriers behave as on a GPU: __syncthreads is a
//    block-wide std::barrier and __shfl_xor_sync exchanges values through a per-warp
//    buffer between two per-warp barriers (every lane of the warp must call it, as the
//    full mask promises). RowReduction kernels need 1 or a multiple of 32 threads;
//  - the vector types (float4, int4, uint4, make_*), the bit casts (__float_as_uint,
//    __uint_as_float), atomicCAS (a real atomic) and the C math functions (<math.h> gives
//    expf, erff, ... in the global namespace, as CUDA has them).
#pragma once

namespace kiln::codegen {

inline constexpr const char* kHostShim = R"KILN(#ifndef KILN_HOST_SHIM
#define KILN_HOST_SHIM 1
#include <math.h>
#include <string.h>
#include <barrier>
#include <memory>
#include <thread>
#include <vector>
#define __global__
#define __device__
#define __host__
#define __shared__ static
#define __forceinline__ inline
#define __launch_bounds__(...)
struct kiln_dim3 { unsigned x = 1, y = 1, z = 1; };
static thread_local kiln_dim3 threadIdx, blockIdx, blockDim, gridDim;
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(16) int4 { int x, y, z, w; };
struct alignas(16) uint4 { unsigned x, y, z, w; };
static inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
static inline int4 make_int4(int x, int y, int z, int w) { return {x, y, z, w}; }
static inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
static inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
static inline unsigned atomicCAS(unsigned* p, unsigned compare, unsigned value) {
  __atomic_compare_exchange_n(p, &compare, value, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return compare;
}
// The block running now (several threads): its barriers and the warps' shuffle buffers.
struct kiln_block_state {
  std::unique_ptr<std::barrier<>> block;
  std::vector<std::unique_ptr<std::barrier<>>> warps;
  std::vector<unsigned long long> lanes;
};
static kiln_block_state* kiln_block = nullptr;
static inline void __syncthreads() {
  if (blockDim.x > 1) kiln_block->block->arrive_and_wait();
}
template <typename T>
static inline T __shfl_xor_sync(unsigned, T v, int offset) {
  static_assert(sizeof(T) <= 8, "shuffle of a value wider than 8 bytes");
  if (blockDim.x == 1) __builtin_trap();
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  unsigned long long* lanes = kiln_block->lanes.data() + 32 * warp;
  unsigned long long bits = 0;
  memcpy(&bits, &v, sizeof(T));
  lanes[lane] = bits;
  kiln_block->warps[warp]->arrive_and_wait();
  bits = lanes[lane ^ (unsigned)offset];
  kiln_block->warps[warp]->arrive_and_wait();
  memcpy(&v, &bits, sizeof(T));
  return v;
}
template <typename F>
static void kiln_host_launch(unsigned grid, unsigned block, F kernel) {
  for (unsigned b = 0; b < grid; ++b) {
    auto run = [&, b](unsigned t) {
      gridDim.x = grid;
      blockDim.x = block;
      blockIdx.x = b;
      threadIdx.x = t;
      blockIdx.y = blockIdx.z = threadIdx.y = threadIdx.z = 0;
      kernel();
    };
    if (block == 1) {
      run(0);
      continue;
    }
    kiln_block_state state;
    state.block = std::make_unique<std::barrier<>>(block);
    for (unsigned w = 0; w * 32 < block; ++w) {
      state.warps.push_back(std::make_unique<std::barrier<>>(block - w * 32 < 32 ? block - w * 32 : 32));
    }
    state.lanes.assign(32 * state.warps.size(), 0);
    kiln_block = &state;
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < block; ++t) threads.emplace_back(run, t);
    for (std::thread& t : threads) t.join();
    kiln_block = nullptr;
  }
}
#endif
)KILN";

}  // namespace kiln::codegen
