// GPU tests: how they are named, how they skip, and how they find their data.
//
// Convention:
//   - A test case that needs an NVIDIA GPU is named with the prefix "[gpu] ", e.g.
//     TEST_CASE("[gpu] generated kernels match the CPU interpreter"). scripts/gpu-check runs
//     exactly these (`kiln_tests -tc="[gpu]*"`), and a CPU machine can leave them out with
//     `-tce="[gpu]*"`.
//   - Its first statement is KILN_REQUIRE_GPU(). Without a usable GPU the macro prints one line
//     starting "GPU test skipped: " (with the reason) and returns from the test case.
//   - doctest 2.4.9 can only skip through a decorator fixed at compile time, so the skip is
//     reported through ctest instead: tests/CMakeLists.txt gives every discovered test the
//     property SKIP_REGULAR_EXPRESSION "GPU test skipped: ", and ctest then counts the test as
//     "Skipped", not "Passed". Only these macros print that text. Run by hand, the doctest
//     binary shows the line and counts the case as passed (it made no assertion);
//     scripts/gpu-check counts such a line as a failure, since it runs where a GPU must be.
//
//   TEST_CASE("[gpu] cuBLASLt MatMul matches the CPU kernel") {
//     KILN_REQUIRE_GPU();
//     ...
//   }
//
//   - A test case that needs the emulated CUDA device (tests/emulated_cuda/: its fault
//     injection, counters or call log through EmulatedCuda()) is named "[emulated] ..." and
//     starts with KILN_REQUIRE_EMULATED_CUDA(): KILN_REQUIRE_GPU(), then the same skip when
//     the driver is a real one. scripts/gpu-check --emulated runs these cases too.
#pragma once

#include <cstdlib>
#include <iostream>
#include <string>

#ifdef KILN_HAVE_CUDA
#include "runtime/cuda/driver.h"
#endif
#include "tests/emulated_cuda/control.h"

namespace kiln::testing {

// Why no GPU test can run here: empty when the CUDA driver loads and device 0 answers.
// Computed once per process (loading the driver is not free, and its answer does not change).
inline const std::string& GpuUnavailableReason() {
  static const std::string reason = [] {
#ifdef KILN_HAVE_CUDA
    auto drv = cuda::LoadDriver();
    if (!drv.ok()) return drv.status().ToString();
    auto dev = cuda::QueryDevice(**drv, 0);
    if (!dev.ok()) return dev.status().ToString();
    return std::string();
#else
    return std::string("this build has no CUDA backend (the CUDA toolkit's headers were not found at configure time)");
#endif
  }();
  return reason;
}

// True when the CUDA driver loads and reports device 0.
inline bool GpuAvailable() { return GpuUnavailableReason().empty(); }

// Where the real models' test data is: $KILN_TEST_DATA_DIR when set (scripts/gpu-check sets it,
// since a build carried to another machine lives under another path), else the build's
// testdata folder compiled in.
inline std::string TestDataDir() {
  if (const char* dir = std::getenv("KILN_TEST_DATA_DIR"); dir != nullptr && *dir != '\0') return dir;
  return KILN_TEST_DATA_DIR;
}

}  // namespace kiln::testing

// Returns from the enclosing TEST_CASE, after printing the line ctest's skip pattern matches,
// when no GPU is usable. The text "GPU test skipped: " must stay in step with
// tests/CMakeLists.txt and scripts/gpu-check.
#define KILN_REQUIRE_GPU()                                                                       \
  do {                                                                                           \
    if (!::kiln::testing::GpuAvailable()) {                                                      \
      std::cout << "GPU test skipped: " << ::kiln::testing::GpuUnavailableReason() << std::endl; \
      return;                                                                                    \
    }                                                                                            \
  } while (0)

// KILN_REQUIRE_GPU(), and then also returns, printing the same skip line, when the CUDA driver
// is not the emulated one (EmulatedCuda() is null: a real GPU's driver).
#define KILN_REQUIRE_EMULATED_CUDA()                                                                        \
  do {                                                                                                     \
    KILN_REQUIRE_GPU();                                                                                    \
    if (::kiln::testing::EmulatedCuda() == nullptr) {                                                      \
      std::cout << "GPU test skipped: not the emulated CUDA device (tests/emulated_cuda/)" << std::endl; \
      return;                                                                                              \
    }                                                                                                      \
  } while (0)
