#include "tools/io/memcpy_bandwidth.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>

namespace kiln::io {

double MemcpyGBps() {
  constexpr size_t kBytes = size_t{64} << 20;
  std::unique_ptr<char[]> from(new (std::nothrow) char[kBytes]), to(new (std::nothrow) char[kBytes]);
  if (!from || !to) return 0;
  std::memset(from.get(), 1, kBytes);  // every page present before the timed copies
  std::memset(to.get(), 2, kBytes);
  int64_t best_ns = INT64_MAX;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    std::memcpy(to.get(), from.get(), kBytes);
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
    best_ns = std::min<int64_t>(best_ns, ns);
    from.swap(to);
  }
  return best_ns > 0 ? 2.0 * static_cast<double>(kBytes) / static_cast<double>(best_ns) : 0;
}

}  // namespace kiln::io
