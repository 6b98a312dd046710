// Fault injection (runtime/fault_injection.h), in a build with -DKILN_FAULT_INJECTION=ON (the
// sanitizer tier's, where LeakSanitizer also checks that no failure path leaks): Silero VAD from
// the test data is loaded from its file, a 2-thread CPU context made and one call run, once with
// no fault to count the resource requests, then once per request with that request refused.
// Each refusal must fail the step it is in with a Status that names the resource (what was
// asked: the file, its mapping, bytes, a thread, oneDNN's call), never crash; a context made
// before the refused request must then run again, cleanly, with the clean run's outputs.
#if KILN_FAULT_INJECTION

#include "runtime/fault_injection.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "compiler/compile.h"
#include "kiln/runtime.h"
#include "tests/e2e/silero_call.h"
#include "tests/native_target.h"
#include "tests/temp_dir.h"

namespace {

// What each site's Status says, as it says it.
const std::map<std::string, std::string> kNamed = {
    {"open", "cannot open '"},
    {"mmap", "cannot map '"},
    {"host memory", "cannot allocate"},
    {"native code mapping", "cannot map"},
    {"thread", "cannot start CPU worker thread"},
    {"oneDNN primitive execution", "oneDNN"},
};

std::vector<std::vector<float>> OutputFloats(const std::vector<kiln::TensorView>& outputs) {
  std::vector<std::vector<float>> out;
  for (const kiln::TensorView& o : outputs) {
    const float* p = static_cast<const float*>(o.data);
    out.emplace_back(p, p + o.num_elements());
  }
  return out;
}

}  // namespace

TEST_CASE("fault injection: every resource request of Load, Create and Run on Silero VAD, refused in turn, gives a Status naming it") {
  const std::string onnx = std::string(KILN_TEST_DATA_DIR) + "/silero_vad_16k_op15/model.onnx";
  if (!std::filesystem::exists(onnx)) {
    std::cout << "skipped: no " << onnx << " (run scripts/test.sh)\n";
    return;
  }
  kiln::compiler::CompileOptions options;
  options.archs.clear();
  options.cpu_targets = kiln::testing::NativeTargetForThisCpu();
  kiln::fault::FailAt(-1);
  auto bytes = kiln::compiler::CompileOnnxFile(onnx, options, nullptr);
  REQUIRE_MESSAGE(bytes.ok(), bytes.status().ToString());
  kiln::testing::TempDir dir;
  const std::string path = dir / "silero.kiln";
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes->data()), bytes->size());
  kiln::ContextOptions context_options;
  context_options.device = kiln::Device::kCpu;
  context_options.cpu.threads = 2;

  // Load, Create and Run; `ctx` keeps the context when Create succeeded.
  auto attempt = [&](std::optional<kiln::ExecutionContext>& ctx, std::vector<kiln::TensorView>& out) -> kiln::Status {
    auto model = kiln::Model::Load(path);
    if (!model.ok()) return model.status();
    auto created = kiln::ExecutionContext::Create(*model, context_options);
    if (!created.ok()) return created.status();
    ctx.emplace(std::move(*created));
    kiln::testing::SileroCall call(0.25f);
    return ctx->Run(call.views(), out);
  };
  std::optional<kiln::ExecutionContext> clean_ctx;
  std::vector<kiln::TensorView> clean_out;
  REQUIRE(attempt(clean_ctx, clean_out).ok());
  const int64_t requests = kiln::fault::Requests();
  const std::vector<std::string> sites = kiln::fault::RequestSites();
  const std::vector<std::vector<float>> want = OutputFloats(clean_out);
  REQUIRE(requests > 0);

  int64_t fired = 0;
  for (int64_t n = 0; n < requests; ++n) {
    INFO("request " << n << " of " << requests << ": " << sites[static_cast<size_t>(n)]);
    kiln::fault::FailAt(n);
    std::optional<kiln::ExecutionContext> ctx;
    std::vector<kiln::TensorView> out;
    const kiln::Status st = attempt(ctx, out);
    const bool hit = kiln::fault::Requests() > n;
    kiln::fault::FailAt(-1);
    REQUIRE(hit);  // the same requests in the same order: the run is deterministic
    ++fired;
    CHECK_FALSE(st.ok());
    const auto named = kNamed.find(sites[static_cast<size_t>(n)]);
    REQUIRE_MESSAGE(named != kNamed.end(), "a site the test does not know: add it to kNamed");
    CHECK_MESSAGE(std::string(st.message()).find(named->second) != std::string::npos, st.ToString());
    if (ctx) {  // a refused call leaves the context usable: the next call is the clean one's
      kiln::testing::SileroCall call(0.25f);
      std::vector<kiln::TensorView> again;
      const kiln::Status retry = ctx->Run(call.views(), again);
      REQUIRE_MESSAGE(retry.ok(), retry.ToString());
      CHECK(OutputFloats(again) == want);
    }
  }
  const std::set<std::string> distinct(sites.begin(), sites.end());
  std::cout << "fault injection on Silero VAD: " << requests << " resource requests at " << distinct.size()
            << " sites of " << kNamed.size() << " known, " << fired << " refused in turn\n";
  CHECK(fired == requests);
}

#endif  // KILN_FAULT_INJECTION
