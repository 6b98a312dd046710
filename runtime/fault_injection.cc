#include "runtime/fault_injection.h"

#if KILN_FAULT_INJECTION
#include <atomic>
#include <mutex>

namespace kiln::fault {
namespace {

struct State {
  // Off until the first FailAt: a process that never calls it (every test but the fault
  // injection test) counts nothing and allocates nothing here, so tests of allocation-free
  // calls hold in this build too.
  std::atomic<bool> armed{false};
  std::mutex mu;
  int64_t fail_at = -1;
  std::vector<const char*> sites;  // of each request since FailAt (static strings)
};

State& Get() {
  static State state;
  return state;
}

}  // namespace

bool Inject(const char* site) {
  State& s = Get();
  if (!s.armed.load(std::memory_order_acquire)) return false;
  std::lock_guard<std::mutex> lock(s.mu);
  s.sites.push_back(site);
  return static_cast<int64_t>(s.sites.size()) - 1 == s.fail_at;
}

void FailAt(int64_t n) {
  State& s = Get();
  std::lock_guard<std::mutex> lock(s.mu);
  s.fail_at = n;
  s.sites.clear();
  s.armed.store(true, std::memory_order_release);
}

void Stop() {
  State& s = Get();
  std::lock_guard<std::mutex> lock(s.mu);
  s.armed.store(false, std::memory_order_release);
  s.fail_at = -1;
  s.sites.clear();
  s.sites.shrink_to_fit();
}

int64_t Requests() {
  State& s = Get();
  std::lock_guard<std::mutex> lock(s.mu);
  return static_cast<int64_t>(s.sites.size());
}

std::vector<std::string> RequestSites() {
  State& s = Get();
  std::lock_guard<std::mutex> lock(s.mu);
  return {s.sites.begin(), s.sites.end()};
}

}  // namespace kiln::fault
#endif
