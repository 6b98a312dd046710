// GPU tests of the driver table (runtime/cuda/driver.h) on a real device. They skip, and ctest
// counts them as skipped, on machines without an NVIDIA GPU (tests/gpu_test_util.h).
//
// Reference: nvidia-smi, a separate program over NVML, when it is installed: the device's
// name, compute capability and memory size must agree with what the driver API reports.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tests/gpu_test_util.h"

#ifdef KILN_HAVE_CUDA
namespace {

// Lines printed by a command, or nothing when it cannot run or fails.
std::vector<std::string> CommandLines(const std::string& command) {
  std::vector<std::string> lines;
  FILE* pipe = ::popen((command + " 2>/dev/null").c_str(), "r");
  if (pipe == nullptr) return lines;
  std::string line;
  char buf[512];
  while (std::fgets(buf, sizeof buf, pipe) != nullptr) {
    line += buf;
    if (!line.empty() && line.back() == '\n') {
      line.pop_back();
      lines.push_back(line);
      line.clear();
    }
  }
  if (!line.empty()) lines.push_back(line);
  if (::pclose(pipe) != 0) lines.clear();
  return lines;
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\r')) s.pop_back();
  size_t start = s.find_first_not_of(' ');
  return start == std::string::npos ? std::string() : s.substr(start);
}

}  // namespace
#endif

TEST_CASE("[gpu] the CUDA driver reports a device") {
  KILN_REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  auto drv = kiln::cuda::LoadDriver();
  REQUIRE_MESSAGE(drv.ok(), drv.status().ToString());
  CHECK((*drv)->version >= 12000);  // the table is resolved for the CUDA 12 ABI or newer
  int count = 0;
  REQUIRE(kiln::cuda::Check(**drv, (*drv)->DeviceGetCount(&count), "cuDeviceGetCount").ok());
  CHECK(count >= 1);

  auto dev = kiln::cuda::QueryDevice(**drv, 0);
  REQUIRE_MESSAGE(dev.ok(), dev.status().ToString());
  CHECK(dev->ordinal == 0);
  CHECK_FALSE(dev->name.empty());
  CHECK(dev->cc_major >= 5);  // nothing older runs CUDA 12 or newer
  CHECK(dev->sm_count > 0);
  CHECK(dev->total_bytes > (uint64_t{1} << 30));
  CHECK(dev->arch() == "sm_" + std::to_string(dev->cc_major) + std::to_string(dev->cc_minor));

  auto past_end = kiln::cuda::QueryDevice(**drv, count);
  CHECK(past_end.status().code() == kiln::StatusCode::kOutOfRange);

  // nvidia-smi's view of GPU 0 (CUDA and nvidia-smi number devices the same way unless
  // CUDA_VISIBLE_DEVICES reorders them).
  std::vector<std::string> smi = CommandLines(
      "nvidia-smi --id=0 --query-gpu=name,compute_cap,memory.total --format=csv,noheader,nounits");
  if (smi.empty() || std::getenv("CUDA_VISIBLE_DEVICES") != nullptr) {
    MESSAGE("nvidia-smi not usable here; checked the driver API alone");
    return;
  }
  std::string row = smi[0];
  size_t c1 = row.find(','), c2 = row.find(',', c1 + 1);
  REQUIRE_MESSAGE(c2 != std::string::npos, "unexpected nvidia-smi output: " << row);
  CHECK(Trim(row.substr(0, c1)) == dev->name);
  CHECK(Trim(row.substr(c1 + 1, c2 - c1 - 1)) ==
        std::to_string(dev->cc_major) + "." + std::to_string(dev->cc_minor));
  // nvidia-smi gives MiB; the driver's figure is bytes. NVML and the driver may differ by a
  // reserved region, never by more than a few hundred MiB.
  double smi_mib = std::stod(Trim(row.substr(c2 + 1)));
  double drv_mib = static_cast<double>(dev->total_bytes) / (1 << 20);
  CHECK(std::abs(smi_mib - drv_mib) <= 512.0);
#endif
}
