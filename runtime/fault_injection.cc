#include "runtime/fault_injection.h"

#if KILN_FAULT_INJECTION
#include <mutex>

namespace kiln::fault {
namespace {

struct State {
  std::mutex mu;
  int64_t fail_at = -1;
  std::vector<std::string> sites;  // of each request since FailAt
};

State& Get() {
  static State state;
  return state;
}

}  // namespace

bool Inject(const char* site) {
  State& s = Get();
  std::lock_guard<std::mutex> lock(s.mu);
  s.sites.emplace_back(site);
  return static_cast<int64_t>(s.sites.size()) - 1 == s.fail_at;
}

void FailAt(int64_t n) {
  State& s = Get();
  std::lock_guard<std::mutex> lock(s.mu);
  s.fail_at = n;
  s.sites.clear();
}

int64_t Requests() {
  State& s = Get();
  std::lock_guard<std::mutex> lock(s.mu);
  return static_cast<int64_t>(s.sites.size());
}

std::vector<std::string> RequestSites() {
  State& s = Get();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.sites;
}

}  // namespace kiln::fault
#endif
