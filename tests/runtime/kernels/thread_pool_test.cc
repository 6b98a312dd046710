// The CPU backend's thread pool: every index of a ParallelFor is visited exactly once, by
// equal contiguous parts, whatever n and the pool size; parts run concurrently; small loops
// stay on the caller.
#include "runtime/kernels/thread_pool.h"

#include "runtime/cpu/onednn/onednn.h"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace kiln::cpu {
namespace {

std::unique_ptr<ThreadPool> MakePool(int threads, ThreadPool::TeamFn team = nullptr) {
  auto pool = ThreadPool::Create(threads, team);
  REQUIRE_MESSAGE(pool.ok(), pool.status().ToString());
  REQUIRE((*pool)->size() == threads);
  return std::move(*pool);
}

// Visits [0, n) on `pool` and checks each index was seen once and each part is the
// expected contiguous range.
void CheckCoverage(ThreadPool* pool, int64_t n, int64_t min_per_part = 1) {
  INFO("n = " << n << ", threads = " << (pool ? pool->size() : 0) << ", min_per_part = " << min_per_part);
  std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
  const int parts = ParallelParts(pool, n, min_per_part);
  std::vector<std::pair<int64_t, int64_t>> ranges(static_cast<size_t>(parts), {-1, -1});
  std::atomic<int> calls{0};
  ParallelFor(pool, n, min_per_part, [&](int64_t begin, int64_t end, int part) {
    ++calls;
    ranges[static_cast<size_t>(part)] = {begin, end};
    for (int64_t i = begin; i < end; ++i) ++seen[static_cast<size_t>(i)];
  });
  for (int64_t i = 0; i < n; ++i) REQUIRE(seen[static_cast<size_t>(i)] == 1);
  CHECK(calls == (n > 0 ? parts : 0));
  if (n == 0) return;
  // Parts in order, contiguous, sizes differing by at most one, larger ones first.
  int64_t next = 0;
  for (int k = 0; k < parts; ++k) {
    CHECK(ranges[k].first == next);
    CHECK(ranges[k].second - ranges[k].first >= n / parts);
    CHECK(ranges[k].second - ranges[k].first <= n / parts + 1);
    next = ranges[k].second;
  }
  CHECK(next == n);
}

TEST_CASE("ParallelFor covers every index exactly once, in contiguous parts") {
  for (int threads : {1, 2, 3, 4, 7}) {
    auto pool = MakePool(threads);
    for (int64_t n : {0, 1, 2, 3, 5, 6, 7, 8, 13, 1000, 100003}) CheckCoverage(pool.get(), n);
  }
  CheckCoverage(nullptr, 17);  // no pool: one part on the caller
}

TEST_CASE("a pool on OpenMP's team (with oneDNN) covers every index once, in the same parts, concurrently") {
  const ThreadPool::TeamFn team = OpenMpTeam();
  if (team == nullptr) return;  // no oneDNN, or ThreadSanitizer: the pool's own workers only
  for (int threads : {1, 2, 3, 4, 7}) {
    auto pool = MakePool(threads, team);
    for (int64_t n : {0, 1, 2, 3, 5, 6, 7, 8, 13, 1000, 100003}) CheckCoverage(pool.get(), n);
  }
  // Two parts run at once: each waits (bounded) until the other has started.
  auto pool = MakePool(2, team);
  std::atomic<int> started{0};
  std::atomic<bool> overlapped{true};
  ParallelFor(pool.get(), 2, 1, [&](int64_t, int64_t) {
    ++started;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (started.load() < 2)
      if (std::chrono::steady_clock::now() > deadline) {
        overlapped = false;
        break;
      }
  });
  CHECK(overlapped.load());
  // A ParallelFor inside a part runs on that part's thread (the pool is busy), as without a team.
  std::atomic<int> inner{0};
  ParallelFor(pool.get(), 4, 1, [&](int64_t begin, int64_t end) {
    ParallelFor(pool.get(), 8, 1, [&](int64_t b, int64_t e) { inner += static_cast<int>(e - b); });
    (void)begin;
    (void)end;
  });
  CHECK(inner.load() == 16);
}

TEST_CASE("ParallelFor uses min(threads, n / min_per_part) parts, at least one") {
  auto pool = MakePool(4);
  CHECK(ParallelParts(pool.get(), 0, 1) == 1);
  CHECK(ParallelParts(pool.get(), 3, 1) == 3);
  CHECK(ParallelParts(pool.get(), 100, 1) == 4);
  CHECK(ParallelParts(pool.get(), 100, 30) == 3);
  CHECK(ParallelParts(pool.get(), 100, 1000) == 1);
  CHECK(ParallelParts(pool.get(), 100, 0) == 4);
  CHECK(ParallelParts(nullptr, 100, 1) == 1);
  CheckCoverage(pool.get(), 100, 30);
  CheckCoverage(pool.get(), 100, 1000);
}

TEST_CASE("ParallelFor's parts run concurrently on the pool's threads") {
  // Each part waits until all have started, which only distinct threads can do (the caller
  // takes a part first; the workers take the others). A 10 s bound keeps a bug from hanging.
  auto pool = MakePool(3);
  std::mutex mu;
  std::set<std::thread::id> ids;
  std::atomic<int> started{0};
  bool all_met = true;
  ParallelFor(pool.get(), 3, 1, [&](int64_t, int64_t, int) {
    {
      std::lock_guard<std::mutex> lock(mu);
      ids.insert(std::this_thread::get_id());
    }
    ++started;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (started < 3 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    if (started < 3) all_met = false;
  });
  CHECK(all_met);
  CHECK(ids.size() == 3);
  CHECK(ids.count(std::this_thread::get_id()) == 1);
}

TEST_CASE("a ParallelFor inside a part runs serially on that part's thread") {
  auto pool = MakePool(2);
  std::vector<std::atomic<int>> seen(2 * 50);
  ParallelFor(pool.get(), 2, 1, [&](int64_t begin, int64_t end) {
    for (int64_t outer = begin; outer < end; ++outer) {
      const std::thread::id self = std::this_thread::get_id();
      ParallelFor(pool.get(), 50, 1, [&](int64_t b, int64_t e, int part) {
        CHECK(part == 0);
        CHECK(std::this_thread::get_id() == self);
        for (int64_t i = b; i < e; ++i) ++seen[static_cast<size_t>(outer * 50 + i)];
      });
    }
  });
  for (auto& s : seen) CHECK(s == 1);
}

TEST_CASE("a pool serves many consecutive loops, with sleeping workers woken") {
  auto pool = MakePool(3);
  int64_t total = 0;
  for (int round = 0; round < 2000; ++round) {
    std::atomic<int64_t> sum{0};
    ParallelFor(pool.get(), 30, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) sum += i;
    });
    total += sum;
    if (round % 500 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));  // past the spin: workers sleep
  }
  CHECK(total == 2000 * (29 * 30 / 2));
}

TEST_CASE("ThreadPool::Create refuses counts outside [1, kMaxThreads]") {
  CHECK(ThreadPool::Create(0).status().code() == StatusCode::kInvalidArgument);
  CHECK(ThreadPool::Create(-1).status().code() == StatusCode::kInvalidArgument);
  CHECK(ThreadPool::Create(ThreadPool::kMaxThreads + 1).status().code() == StatusCode::kInvalidArgument);
  CHECK(DefaultThreadCount() >= 1);
  CHECK(DefaultThreadCount() <= ThreadPool::kMaxThreads);
}

}  // namespace
}  // namespace kiln::cpu
