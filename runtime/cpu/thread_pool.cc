#include "runtime/cpu/thread_pool.h"

#include <sched.h>

#include <chrono>
#include <string>
#include <system_error>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace kiln::cpu {
namespace {

// How long a waiting thread spins, then yields, before it sleeps. Within a Run, the next
// parallel loop usually starts a few microseconds after the last one ended (one small
// instruction in between), and a futex wake-up costs about as much as that; but an OpenBLAS
// GEMM or a serial kernel can run for milliseconds, during which a spinning worker would
// hold a core that OpenBLAS's threads want. Yielding first lets them have it.
constexpr int kPauseSpins = 2000;       // about 10-50 us of pause instructions
constexpr int64_t kYieldNs = 100'000;   // then sched_yield for up to 0.1 ms

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Waits until `a` no longer holds `old` and returns what it holds then.
template <typename T>
T WaitWhileEqual(const std::atomic<T>& a, T old) {
  T v;
  for (int i = 0; i < kPauseSpins; ++i) {
    if ((v = a.load(std::memory_order_acquire)) != old) return v;
    CpuRelax();
  }
  const int64_t deadline = NowNs() + kYieldNs;
  do {
    if ((v = a.load(std::memory_order_acquire)) != old) return v;
    std::this_thread::yield();
  } while (NowNs() < deadline);
  while ((v = a.load(std::memory_order_acquire)) == old) a.wait(old, std::memory_order_acquire);
  return v;
}

}  // namespace

Result<std::unique_ptr<ThreadPool>> ThreadPool::Create(int threads) {
  if (threads < 1 || threads > kMaxThreads)
    return InvalidArgument("thread count " + std::to_string(threads) + " is outside [1, " +
                           std::to_string(kMaxThreads) + "]");
  std::unique_ptr<ThreadPool> pool(new ThreadPool());
  pool->workers_.reserve(static_cast<size_t>(threads - 1));
  for (int w = 1; w < threads; ++w) {
    try {
      pool->workers_.emplace_back([p = pool.get(), w] { p->WorkerLoop(w); });
    } catch (const std::system_error& e) {
      // The destructor stops and joins the workers started so far.
      return ResourceExhausted("cannot start CPU worker thread " + std::to_string(w) + " of " +
                               std::to_string(threads) + ": " + e.what());
    }
  }
  return pool;
}

ThreadPool::~ThreadPool() {
  stop_ = true;
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::RunPart(int part) const {
  int64_t begin = 0, end = 0;
  PartRange(n_, parts_, part, &begin, &end);
  fn_(body_, begin, end, part);
}

void ThreadPool::Run(int64_t n, int parts, PartFn fn, void* body) {
  busy_.store(true, std::memory_order_relaxed);
  fn_ = fn;
  body_ = body;
  n_ = n;
  parts_ = std::clamp(parts, 1, size());
  // Every worker acknowledges every job, those without a part too: then none of them can
  // still be reading the job's fields when the next Run writes them.
  pending_.store(static_cast<int32_t>(workers_.size()), std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();  // a futex wake only when some worker sleeps
  RunPart(0);
  for (int32_t left; (left = pending_.load(std::memory_order_acquire)) != 0;) WaitWhileEqual(pending_, left);
  busy_.store(false, std::memory_order_relaxed);
}

void ThreadPool::WorkerLoop(int index) {
  uint32_t seen = 0;
  for (;;) {
    seen = WaitWhileEqual(generation_, seen);
    if (stop_) return;
    if (index < parts_) RunPart(index);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
  }
}

int DefaultThreadCount() {
  cpu_set_t set;
  int n = 0;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) n = CPU_COUNT(&set);
  if (n <= 0) n = static_cast<int>(std::thread::hardware_concurrency());
  return std::clamp(n, 1, ThreadPool::kMaxThreads);
}

}  // namespace kiln::cpu
