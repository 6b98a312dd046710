#include "runtime/kernels/thread_pool.h"

#include <pthread.h>
#include <sched.h>

#include <cerrno>
#include <string>
#include <system_error>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "runtime/clock.h"
#include "runtime/fault_injection.h"

namespace kiln::cpu {
namespace {

// How long a waiting thread spins, then yields, before it sleeps. Within a Run, the next
// parallel loop usually starts a few microseconds after the last one ended (one small
// instruction in between), and a futex wake-up costs about as much as that; but an OpenBLAS
// GEMM or a serial kernel can run for milliseconds, during which a spinning worker would
// hold a core that OpenBLAS's threads want. So after a short spin the waiter yields (the OS
// runs any other ready thread on its core first), and after 0.1 ms it sleeps.
constexpr int kPauseSpins = 256;        // a few microseconds of pause instructions
constexpr int64_t kYieldNs = 100'000;   // then sched_yield for up to 0.1 ms

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
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

Result<std::unique_ptr<ThreadPool>> ThreadPool::Create(int threads, TeamFn team) {
  if (threads < 1 || threads > kMaxThreads)
    return InvalidArgument("thread count " + std::to_string(threads) + " is outside [1, " +
                           std::to_string(kMaxThreads) + "]");
  std::unique_ptr<ThreadPool> pool(new ThreadPool());
  pool->threads_ = threads;
  pool->team_ = team;
  if (team != nullptr) return pool;
  pool->workers_.reserve(static_cast<size_t>(threads - 1));
  for (int w = 1; w < threads; ++w) {
    // pthread_create rather than std::thread, whose failure is an exception (std::system_error):
    // a selective runtime is built without exceptions (docs/edge.md), and this reports it either way.
    pthread_t t;
    const int err = fault::Inject("thread") ? EAGAIN : pthread_create(
        &t, nullptr,
        [](void* p) -> void* {
          static_cast<ThreadPool*>(p)->WorkerLoop();
          return nullptr;
        },
        pool.get());
    if (err != 0)  // the destructor stops and joins the workers started so far
      return ResourceExhausted("cannot start CPU worker thread " + std::to_string(w) + " of " +
                               std::to_string(threads) + ": " + std::system_category().message(err));
    pool->workers_.push_back(t);
  }
  return pool;
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  for (pthread_t t : workers_) pthread_join(t, nullptr);
}

void ThreadPool::TakeParts(uint32_t generation) {
  const PartFn fn = fn_.load(std::memory_order_relaxed);
  void* const body = body_.load(std::memory_order_relaxed);
  const int64_t n = n_.load(std::memory_order_relaxed);
  uint64_t c = claim_.load(std::memory_order_acquire);
  for (;;) {
    const int parts = static_cast<int>((c >> 16) & 0xffff), k = static_cast<int>(c & 0xffff);
    if (static_cast<uint32_t>(c >> 32) != generation || k >= parts) return;
    if (!claim_.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
    int64_t begin = 0, end = 0;
    PartRange(n, parts, k, &begin, &end);
    fn(body, begin, end, k);
    // Release: the caller, seeing every part finished, may then overwrite the job.
    if (finished_.fetch_add(1, std::memory_order_acq_rel) + 1 == parts) finished_.notify_one();
    c = claim_.load(std::memory_order_acquire);
  }
}

void ThreadPool::Run(int64_t n, int parts, PartFn fn, void* body) {
  busy_.store(true, std::memory_order_relaxed);
  parts = std::clamp(parts, 1, size());
  if (team_ != nullptr) {
    // Each thread of the team claims parts until none is left; the team returns when all are
    // done, having synchronised with the caller (the end of an OpenMP parallel region).
    struct Job {
      PartFn fn;
      void* body;
      int64_t n;
      int parts;
      std::atomic<int> next{0};
    } job{fn, body, n, parts};
    team_(
        [](void* data) {
          Job& j = *static_cast<Job*>(data);
          for (int k; (k = j.next.fetch_add(1, std::memory_order_relaxed)) < j.parts;) {
            int64_t begin = 0, end = 0;
            PartRange(j.n, j.parts, k, &begin, &end);
            j.fn(j.body, begin, end, k);
          }
        },
        &job, parts);
    busy_.store(false, std::memory_order_relaxed);
    return;
  }
  fn_.store(fn, std::memory_order_relaxed);
  body_.store(body, std::memory_order_relaxed);
  n_.store(n, std::memory_order_relaxed);
  finished_.store(0, std::memory_order_relaxed);
  const uint32_t generation = generation_.load(std::memory_order_relaxed) + 1;
  claim_.store(uint64_t{generation} << 32 | static_cast<uint64_t>(parts) << 16, std::memory_order_release);
  generation_.store(generation, std::memory_order_release);
  generation_.notify_all();  // a futex wake only when some worker sleeps
  TakeParts(generation);
  for (int32_t done; (done = finished_.load(std::memory_order_acquire)) != parts;) WaitWhileEqual(finished_, done);
  busy_.store(false, std::memory_order_relaxed);
}

void ThreadPool::WorkerLoop() {
  uint32_t seen = 0;
  for (;;) {
    seen = WaitWhileEqual(generation_, seen);
    if (stop_.load(std::memory_order_relaxed)) return;
    TakeParts(seen);
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
