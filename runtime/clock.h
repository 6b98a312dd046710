// The clock of every time Kiln records (Stats' start/stop pairs, profiles, compile and bench
// timings): std::chrono::steady_clock, in ns since its epoch. One reading costs about 20 ns.
#pragma once

#include <chrono>
#include <cstdint>

namespace kiln {

inline int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace kiln
