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
//    on the calling host thread. A block's threads are fibers (on x86-64 a context switch of a
//    few instructions, kiln_switch; elsewhere ucontext), so barriers behave
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

// The host compiler's flags for a translation unit of the shim and generated kernels (after
// the compiler's name; then -o LIB SRC): a shared library, no FMA contraction (as NVRTC
// -fmad=false), and -nostdinc++, so that <math.h> is the C library's header and not
// libstdc++'s, which brings <cmath>'s templates: those were 0.13 of a small kernel's 0.21 s
// compile. Without libstdc++'s overloads a float argument to exp() would widen to double;
// generated code never relies on them: it names expf or exp by the value's type.
inline constexpr const char* kHostShimFlags =
    "-O1 -shared -fPIC -std=c++20 -pthread -w -ffp-contract=off -nostdinc++";

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
#if defined(__x86_64__)
// kiln_switch(save, load): saves the callee-saved registers and the SSE/x87 control words on this
// stack, stores the stack pointer in *save, and resumes the context whose stack pointer is
// `load` (System V x86-64 ABI). No system call, unlike swapcontext's signal-mask save.
extern "C" void kiln_switch(void** save, void* load);
__asm__(
    ".text\n.p2align 4\n.globl kiln_switch\n.hidden kiln_switch\n.type kiln_switch,@function\n"
    "kiln_switch:\n"
    "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
    "  subq $8, %rsp\n  stmxcsr (%rsp)\n  fnstcw 4(%rsp)\n"
    "  movq %rsp, (%rdi)\n  movq %rsi, %rsp\n"
    "  ldmxcsr (%rsp)\n  fldcw 4(%rsp)\n  addq $8, %rsp\n"
    "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n  ret\n"
    ".size kiln_switch, .-kiln_switch\n");
struct kiln_context {
  void* sp;
};
static inline void kiln_swap(kiln_context* save, kiln_context* load) { kiln_switch(&save->sp, load->sp); }
// A fresh context on [stack, stack + bytes) that starts in entry(), which must never return.
static void kiln_make(kiln_context* c, char* stack, size_t bytes, void (*entry)()) {
  unsigned long long* top = (unsigned long long*)(((unsigned long long)(stack + bytes)) & ~15ull);
  *--top = 0;                             // entry's return address: it never returns
  *--top = (unsigned long long)entry;     // kiln_switch's `ret` goes here, as a call would
  for (int r = 0; r < 6; ++r) *--top = 0;  // rbp, rbx, r12-r15
  unsigned int control[2];
  __asm__ volatile("stmxcsr %0\n fnstcw %1" : "=m"(control[0]), "=m"(control[1]));
  *--top = (unsigned long long)control[0] | (unsigned long long)(control[1] & 0xffffu) << 32;
  c->sp = top;
}
#else
struct kiln_context {
  ucontext_t uc;
};
static inline void kiln_swap(kiln_context* save, kiln_context* load) { swapcontext(&save->uc, &load->uc); }
static void kiln_make(kiln_context* c, char* stack, size_t bytes, void (*entry)()) {
  getcontext(&c->uc);
  c->uc.uc_stack.ss_sp = stack;
  c->uc.uc_stack.ss_size = bytes;
  c->uc.uc_link = 0;
  makecontext(&c->uc, entry, 0);
}
#endif
struct kiln_fiber {
  kiln_context ctx;
  int state;
};
struct kiln_block_state {
  kiln_context scheduler;
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
  kiln_swap(&f->ctx, &b->scheduler);
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
// A fiber's entry: runs the kernel as the current thread, then returns to the scheduler for good.
static void kiln_fiber_main() {
  kiln_block_state* b = kiln_block;
  b->call(b->arg);
  kiln_fiber* f = &b->fibers[b->current];
  f->state = KILN_DONE;
  kiln_swap(&f->ctx, &b->scheduler);
  kiln_fail("a finished fiber was resumed");
}
// Runs one block's threads as fibers until all return; the barrier rules are above.
static void kiln_run_fibers(kiln_block_state* b, char* stacks, size_t stack_bytes) {
  for (unsigned t = 0; t < b->n; ++t) {
    kiln_fiber* f = &b->fibers[t];
    kiln_make(&f->ctx, stacks + (size_t)t * stack_bytes, stack_bytes, kiln_fiber_main);
    f->state = KILN_RUNNABLE;
  }
  for (;;) {
    for (unsigned t = 0; t < b->n; ++t) {
      if (b->fibers[t].state != KILN_RUNNABLE) continue;
      b->current = t;
      kiln_set_thread(t);
      kiln_swap(&b->scheduler, &b->fibers[t].ctx);
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
  char* stacks = 0;  // the fibers' stacks, for this launch (untouched pages cost nothing)
  kiln_block_state b;
  memset(&b, 0, sizeof b);
  b.n = n;
  b.call = &kiln_call<F>;
  b.arg = &kernel;
  if (n > 1) {
    stacks = (char*)malloc((size_t)n * stack_bytes);
    if (!stacks) kiln_fail("out of memory for fiber stacks");
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
  free(stacks);
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
