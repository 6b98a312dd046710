// Seeded uniform float32 test data, the same sequence for the same (n, seed, lo, hi) on every
// platform run with libstdc++ (std::mt19937 and uniform_real_distribution).
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace kiln::testing {

// n values uniform in [lo, hi), from std::mt19937 seeded with `seed`.
inline std::vector<float> RandomFloats(size_t n, uint32_t seed, float lo = -2.0f, float hi = 2.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

}  // namespace kiln::testing
