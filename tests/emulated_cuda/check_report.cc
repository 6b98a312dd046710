#include "tests/emulated_cuda/check_report.h"

#include <cstdio>

namespace {
int g_failures = 0;
}  // namespace

void Report(const std::string& name, bool ok, const std::string& detail) {
  std::printf("%s %s%s%s\n", ok ? "PASS" : "FAIL", name.c_str(), detail.empty() ? "" : ": ", detail.c_str());
  std::fflush(stdout);
  if (!ok) ++g_failures;
}

int ReportSummary() {
  std::printf("%s: %d failure(s)\n", g_failures ? "FAILED" : "PASSED", g_failures);
  return g_failures ? 1 : 0;
}
