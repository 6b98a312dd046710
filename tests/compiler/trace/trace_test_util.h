// Helpers the tracing API's tests (tests/compiler/trace/) share.
#pragma once

#include <string>
#include <vector>

#include "kiln/trace.h"

namespace kiln::testing {

// Options that compile a trace for the CPU alone (no CUDA arch).
inline trace::CompileOptions TraceCpuOptions() {
  trace::CompileOptions o;
  o.archs = std::vector<std::string>{};
  return o;
}

}  // namespace kiln::testing
