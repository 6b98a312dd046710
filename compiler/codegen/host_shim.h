// The host shim: text that, placed before a generated kernel's source, lets the host C++
// compiler (g++/clang++, -std=c++20) compile that source unchanged, so generated kernels
// are checked on machines without a GPU (HostSource in cuda_source.h puts it in front, and
// HostLauncher's wrapper calls kiln_host_launch), and run on the emulated CUDA device
// (tests/emulated_cuda/).
//
// What it provides:
//  - the CUDA qualifiers as nothing (__global__, __device__, __launch_bounds__), plain
//    `inline` (__forceinline__), and `static` (__shared__: one array for the block that is
//    running; blocks run one after another);
//  - threadIdx/blockIdx/blockDim/gridDim as thread_local variables (x, y and z), set before
//    each thread runs;
//  - block execution. kiln_host_launch(grid, block, kernel) runs the blocks one after another
//    on the calling host thread. A block's threads are fibers (ucontext), so barriers behave
//    as on a GPU: __syncthreads waits until every thread of the block that has not returned
//    reaches a __syncthreads, and __shfl_xor_sync exchanges values through a per-warp buffer
//    between two barriers of the warp's threads (every lane of the warp must call it, as the
//    full mask promises). A barrier no thread can complete (threads of one warp waiting at
//    different kinds of barrier) aborts with a message. When the first block of a launch
//    reaches no barrier, the later blocks run their threads as plain calls, one after another
//    (then a barrier reached aborts with a message: Kiln's kernels reach barriers in every
//    thread or in none);
//  - the vector types (float4, int4, uint4, make_*), the bit casts (__float_as_uint,
//    __uint_as_float), atomicCAS (a real atomic) and the C math functions (<math.h> gives
//    expf, erff, ... in the global namespace, as CUDA has them).
// It includes C headers only, so that a kernel compiles in a fraction of a second.
#pragma once

namespace kiln::codegen {

inline constexpr const char* kHostShim = R"KILN(#ifndef KILN_HOST_SHIM
#define KILN_HOST_SHIM 1
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>
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
// ---- block execution -------------------------------------------------------------------
enum { KILN_RUNNABLE, KILN_AT_BLOCK, KILN_AT_WARP, KILN_DONE };
struct kiln_fiber {
  ucontext_t ctx;
  int state;
};
struct kiln_block_state {
  ucontext_t scheduler;
  kiln_fiber* fibers;
  unsigned n;              // threads per block
  unsigned current;        // the fiber running now
  unsigned long long* lanes;  // 32 shuffle slots per warp
  void (*call)(void*);     // runs the kernel for the current thread
  void* arg;
  int direct;              // threads run as plain calls: reaching a barrier is an error
  int waited;              // some thread of this launch reached a barrier
};
static thread_local kiln_block_state* kiln_block = 0;
static inline unsigned kiln_linear_thread() {
  return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}
static void kiln_fail(const char* what) {
  fprintf(stderr, "host shim: %s\n", what);
  abort();
}
static void kiln_wait(int state) {
  kiln_block_state* b = kiln_block;
  if (b->direct) kiln_fail("a thread reached a barrier in a launch whose first block reached none");
  b->waited = 1;
  kiln_fiber* f = &b->fibers[b->current];
  f->state = state;
  swapcontext(&f->ctx, &b->scheduler);
}
static inline void __syncthreads() {
  if (kiln_block->n > 1) kiln_wait(KILN_AT_BLOCK);
}
template <typename T>
static inline T __shfl_xor_sync(unsigned, T v, int offset) {
  static_assert(sizeof(T) <= 8, "shuffle of a value wider than 8 bytes");
  kiln_block_state* b = kiln_block;
  if (b->n == 1) __builtin_trap();
  const unsigned t = kiln_linear_thread(), lane = t & 31u, warp = t >> 5;
  unsigned long long* lanes = b->lanes + 32 * warp;
  unsigned long long bits = 0;
  memcpy(&bits, &v, sizeof(T));
  lanes[lane] = bits;
  kiln_wait(KILN_AT_WARP);
  bits = lanes[lane ^ (unsigned)offset];
  kiln_wait(KILN_AT_WARP);
  memcpy(&v, &bits, sizeof(T));
  return v;
}
static void kiln_set_thread(unsigned t) {
  threadIdx.x = t % blockDim.x;
  threadIdx.y = t / blockDim.x % blockDim.y;
  threadIdx.z = t / (blockDim.x * blockDim.y);
}
static void kiln_fiber_main() {
  kiln_block_state* b = kiln_block;
  b->call(b->arg);
  b->fibers[b->current].state = KILN_DONE;
}  // returns to uc_link, the scheduler
// Runs one block's threads as fibers until all return; the barrier rules are above.
static void kiln_run_fibers(kiln_block_state* b, char* stacks, size_t stack_bytes) {
  for (unsigned t = 0; t < b->n; ++t) {
    kiln_fiber* f = &b->fibers[t];
    getcontext(&f->ctx);
    f->ctx.uc_stack.ss_sp = stacks + (size_t)t * stack_bytes;
    f->ctx.uc_stack.ss_size = stack_bytes;
    f->ctx.uc_link = &b->scheduler;
    makecontext(&f->ctx, kiln_fiber_main, 0);
    f->state = KILN_RUNNABLE;
  }
  for (;;) {
    for (unsigned t = 0; t < b->n; ++t) {
      if (b->fibers[t].state != KILN_RUNNABLE) continue;
      b->current = t;
      kiln_set_thread(t);
      swapcontext(&b->scheduler, &b->fibers[t].ctx);
    }
    unsigned done = 0, at_block = 0;
    for (unsigned t = 0; t < b->n; ++t) {
      done += b->fibers[t].state == KILN_DONE;
      at_block += b->fibers[t].state == KILN_AT_BLOCK;
    }
    if (done == b->n) return;
    int released = 0;
    if (at_block + done == b->n) {
      for (unsigned t = 0; t < b->n; ++t)
        if (b->fibers[t].state == KILN_AT_BLOCK) b->fibers[t].state = KILN_RUNNABLE;
      continue;
    }
    for (unsigned w = 0; w * 32 < b->n; ++w) {
      const unsigned lo = w * 32, hi = lo + 32 < b->n ? lo + 32 : b->n;
      unsigned waiting = 0, live = 0;
      for (unsigned t = lo; t < hi; ++t) {
        live += b->fibers[t].state != KILN_DONE;
        waiting += b->fibers[t].state == KILN_AT_WARP;
      }
      if (waiting == 0 || waiting != live) continue;
      for (unsigned t = lo; t < hi; ++t)
        if (b->fibers[t].state == KILN_AT_WARP) b->fibers[t].state = KILN_RUNNABLE;
      released = 1;
    }
    if (!released) kiln_fail("threads of a block wait at barriers no thread can complete (barrier divergence)");
  }
}
template <typename F>
static void kiln_call(void* kernel) {
  (*static_cast<F*>(kernel))();
}
template <typename F>
static void kiln_host_launch(kiln_dim3 grid, kiln_dim3 block, F kernel) {
  const unsigned n = block.x * block.y * block.z;
  const size_t stack_bytes = 64 * 1024;
  static thread_local char* stacks = 0;
  static thread_local unsigned capacity = 0;  // fibers whose stacks are allocated
  kiln_block_state b;
  memset(&b, 0, sizeof b);
  b.n = n;
  b.call = &kiln_call<F>;
  b.arg = &kernel;
  if (n > 1) {
    if (capacity < n) {
      free(stacks);
      stacks = (char*)malloc((size_t)n * stack_bytes);
      if (!stacks) kiln_fail("out of memory for fiber stacks");
      capacity = n;
    }
    b.fibers = (kiln_fiber*)malloc(n * sizeof(kiln_fiber));
    b.lanes = (unsigned long long*)calloc(32 * ((n + 31) / 32), sizeof(unsigned long long));
    if (!b.fibers || !b.lanes) kiln_fail("out of memory for a block");
  }
  kiln_block_state* outer = kiln_block;
  kiln_block = &b;
  gridDim = grid;
  blockDim = block;
  for (unsigned bz = 0; bz < grid.z; ++bz) {
    for (unsigned by = 0; by < grid.y; ++by) {
      for (unsigned bx = 0; bx < grid.x; ++bx) {
        blockIdx.x = bx;
        blockIdx.y = by;
        blockIdx.z = bz;
        if (n == 1 || b.direct) {
          for (unsigned t = 0; t < n; ++t) {
            kiln_set_thread(t);
            kernel();
          }
          continue;
        }
        kiln_run_fibers(&b, stacks, stack_bytes);
        b.direct = !b.waited;
      }
    }
  }
  kiln_block = outer;
  free(b.fibers);
  free(b.lanes);
}
template <typename F>
static void kiln_host_launch(unsigned grid, unsigned block, F kernel) {
  kiln_dim3 g, t;
  g.x = grid;
  t.x = block;
  kiln_host_launch(g, t, kernel);
}
#endif
)KILN";

}  // namespace kiln::codegen
