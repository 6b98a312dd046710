// The CPU backend's worker threads: a fixed team an ExecutionContext owns, over which the
// kernels split their outer loops (fused-program blocks of rows, depthwise-conv, im2col and
// col2im channels, pooling planes).
//
//   ParallelFor(call.threads, planes, MinItemsPerPart(plane_work), [&](int64_t begin, int64_t end) {
//     for (int64_t pl = begin; pl < end; ++pl) PoolPlane(...);
//   });
//
// ParallelFor splits [0, n) into parts of equal size (static chunking: the same n and pool
// always give the same parts, so what a part computes never depends on timing), wakes the
// workers, and the calling thread and the workers take parts until none is left; it returns
// when every part is done. A part no worker has taken yet is run by the caller, so a worker
// the OS has not scheduled (a busy machine) costs nothing but its own claimed part.
// A body that needs per-part scratch takes a third argument, the part's index in
// [0, pool->size()), which is also the scratch's index: two parts never run at once on one
// index. A null pool, or too little work (fewer than 2 * min_per_part iterations), runs the
// body once on the calling thread over all of [0, n).
//
// Why a pool of our own rather than OpenMP (libgomp): libgomp's idle workers busy-wait for
// GOMP_SPINCOUNT (300000 spins, about 0.1-1 ms) after each parallel region unless
// OMP_WAIT_POLICY=passive is set in the environment before the process starts, which a
// library cannot do; they then hold cores that the caller's other threads (other contexts,
// the application) want between Runs. libgomp's team is also per calling thread and sized
// by per-thread ICVs, and whether a parallel region allocates is an implementation detail,
// where Run must allocate nothing (tests/runtime/run_allocations_test.cc). OpenBLAS's own
// thread pool has the same idle spinning (sched_yield for about 0.1 s), which is why the
// CPU backend keeps OpenBLAS at one thread and splits GEMMs over this pool instead
// (runtime/kernels/gemm.h). This pool spins for a few microseconds, then yields the core for up
// to 0.1 ms, then sleeps on a futex (std::atomic::wait); it allocates only in Create, and it
// adds no runtime dependency. Where oneDNN runs (runtime/cpu/onednn/onednn.h), its OpenMP threads
// are there anyway: the pool is then made with Create's `team` and runs its parts on them,
// since two teams on the same cores would compete.
//
// Thread safety: one ParallelFor at a time per pool (a context is used from one thread at a
// time). A ParallelFor from inside a body (nested) runs serially on the thread that makes it.
// Bodies must not throw.
#pragma once

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <type_traits>
#include <vector>

#include "kiln/status.h"
#include "kiln/runtime.h"

namespace kiln::cpu {

class ThreadPool {
 public:
  // Most threads a pool may have (CpuOptions::threads is checked against it).
  static constexpr int kMaxThreads = CpuOptions::kMaxThreads;

  // A team of threads that runs fn(data) once on each of `threads` threads, the caller's
  // included, and returns when all have returned: OpenMP's parallel region (OpenMpTeam,
  // runtime/cpu/onednn/onednn.h).
  using TeamFn = void (*)(void (*fn)(void* data), void* data, int threads);

  // A pool of `threads` threads, the caller's included: starts threads - 1 workers. With a
  // `team`, it starts none and runs each job's parts on that team instead: the CPU backend
  // passes OpenMP's when oneDNN runs on it, so that oneDNN and Kiln's kernels share one team
  // of threads rather than two teams competing for the cores (libgomp's idle threads spin
  // after each oneDNN call, when Kiln's workers would want those cores).
  // Errors: kInvalidArgument unless 1 <= threads <= kMaxThreads; kResourceExhausted when the
  // system refuses a thread.
  static Result<std::unique_ptr<ThreadPool>> Create(int threads, TeamFn team = nullptr);
  ~ThreadPool();  // stops and joins the workers
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return threads_; }

  using PartFn = void (*)(void* body, int64_t begin, int64_t end, int part);
  // Runs fn(body, begin_k, end_k, k) for the `parts` equal parts k of [0, n);
  // 2 <= parts <= size(). Use ParallelFor below.
  void Run(int64_t n, int parts, PartFn fn, void* body);
  bool busy() const { return busy_.load(std::memory_order_relaxed); }

 private:
  ThreadPool() = default;
  void WorkerLoop();
  // Claims and runs parts of job `generation` until none is left.
  void TakeParts(uint32_t generation);

  std::vector<pthread_t> workers_;
  int threads_ = 1;
  TeamFn team_ = nullptr;
  // The current job. Written by Run before it publishes the job in claim_ and generation_
  // (release); a worker reads them after it sees the new generation (acquire) and uses them
  // only once it has claimed a part of that generation, which proves they were not yet
  // overwritten by the next job.
  std::atomic<PartFn> fn_{nullptr};
  std::atomic<void*> body_{nullptr};
  std::atomic<int64_t> n_{0};
  // Generation (32 bits), part count (16 bits), next part to hand out (16 bits).
  alignas(64) std::atomic<uint64_t> claim_{0};
  alignas(64) std::atomic<uint32_t> generation_{0};  // what sleeping workers wait on
  alignas(64) std::atomic<int32_t> finished_{0};     // parts of the current job done
  std::atomic<bool> stop_{false};
  std::atomic<bool> busy_{false};
};

// The part count ParallelFor uses for n iterations of at least min_per_part each.
inline int ParallelParts(const ThreadPool* pool, int64_t n, int64_t min_per_part) {
  if (pool == nullptr || n <= 0) return 1;
  const int64_t by_work = n / std::max<int64_t>(min_per_part, 1);
  return static_cast<int>(std::clamp<int64_t>(by_work, 1, pool->size()));
}

// [begin, end) of part k of [0, n) split into `parts`: the first n % parts parts are one
// longer.
inline void PartRange(int64_t n, int parts, int k, int64_t* begin, int64_t* end) {
  const int64_t base = n / parts, extra = n % parts;
  *begin = k * base + std::min<int64_t>(k, extra);
  *end = *begin + base + (k < extra ? 1 : 0);
}

// Work (multiply-adds, element loads or stores, fused-program node evaluations) below which
// a part of a ParallelFor is not worth a thread: waking a worker and joining it costs a few
// microseconds, about what 64K such operations take.
inline constexpr int64_t kMinPartWork = int64_t{1} << 16;

// ParallelFor's min_per_part for items of `work_per_item` each.
inline int64_t MinItemsPerPart(int64_t work_per_item) {
  return work_per_item >= kMinPartWork ? 1 : (kMinPartWork + work_per_item - 1) / std::max<int64_t>(work_per_item, 1);
}

// fn(begin, end) or fn(begin, end, part) over the parts of [0, n); see the file comment.
template <typename F>
void ParallelFor(ThreadPool* pool, int64_t n, int64_t min_per_part, F&& fn) {
  constexpr bool kWithPart = std::is_invocable_v<F&, int64_t, int64_t, int>;
  auto call = [&fn](int64_t begin, int64_t end, int part) {
    if constexpr (kWithPart) {
      fn(begin, end, part);
    } else {
      fn(begin, end);
    }
  };
  if (n <= 0) return;
  const int parts = ParallelParts(pool, n, min_per_part);
  if (parts <= 1 || pool->busy()) {
    call(0, n, 0);
    return;
  }
  using Call = decltype(call);
  pool->Run(n, parts, [](void* body, int64_t begin, int64_t end, int part) {
    (*static_cast<Call*>(body))(begin, end, part);
  }, &call);
}

// The thread count CpuOptions::threads = 0 stands for: the CPUs this process may run on (its
// affinity mask), at least 1 and at most ThreadPool::kMaxThreads.
int DefaultThreadCount();

}  // namespace kiln::cpu
