// NaN and infinity as float32 constants, for the tests that need them (shared rather than copied:
// the test files are compiled in batches, tests/unity/check_names.py).
#pragma once

#include <limits>

namespace kiln::testing {

inline constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
inline constexpr float kInf = std::numeric_limits<float>::infinity();

}  // namespace kiln::testing
