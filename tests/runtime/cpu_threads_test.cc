// CpuOptions::threads end to end: a model gives the same bits at 1, 2 and 3 threads,
// and those match an independent reference (the unfused compile of the same model, whose
// kernels are not the fused programs; for the real models, onnxruntime's stored outputs);
// bad counts are refused at Create.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "kiln/tensor_files.h"
#include "kiln/runtime.h"
#include "tests/compiler/compile_util.h"
#include "tests/runtime/cpu_note.h"
#include "tests/runtime/threaded_model_test_util.h"

namespace kiln {
namespace {

// Outputs of `model` on `inputs` with cpu_threads = `threads`, as float vectors.
std::vector<std::vector<float>> RunWithThreads(const Model& model, std::span<const TensorView> inputs, int threads) {
  ContextOptions o;
  o.device = Device::kCpu;
  o.cpu.threads = threads;
  auto ctx = ExecutionContext::Create(model, o);
  REQUIRE_MESSAGE(ctx.ok(), ctx.status().ToString());
  // The unfused compile has no generated kernel, hence no native code.
  CHECK(ctx->device_note() == kiln::testing::CpuNote(threads, true, !model.native_code().empty()));
  std::vector<TensorView> out;
  for (int call = 0; call < 2; ++call) {  // the second Run reuses the bound entry
    const Status st = ctx->Run(inputs, out);
    REQUIRE_MESSAGE(st.ok(), st.ToString());
  }
  return testing::FloatCopies(out);
}

// Same outputs at 1, 2 and 3 threads, bit for bit; returns them.
std::vector<std::vector<float>> SameAtEveryThreadCount(const Model& model, std::span<const TensorView> inputs) {
  const auto one = RunWithThreads(model, inputs, 1);
  for (int threads : {2, 3}) {
    INFO(threads << " threads");
    const auto got = RunWithThreads(model, inputs, threads);
    REQUIRE(got.size() == one.size());
    for (size_t o = 0; o < got.size(); ++o) {
      REQUIRE(got[o].size() == one[o].size());
      CHECK_MESSAGE(std::memcmp(got[o].data(), one[o].data(), got[o].size() * sizeof(float)) == 0, "output ", o);
    }
  }
  return one;
}

// |got - want| <= atol + rtol * |want| everywhere; returns the count of elements that are not.
size_t CountFar(const std::vector<float>& got, const std::vector<float>& want, double atol, double rtol) {
  REQUIRE(got.size() == want.size());
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) bad += !(std::fabs(got[i] - want[i]) <= atol + rtol * std::fabs(want[i]));
  return bad;
}

TEST_CASE("cpu_threads: a model's outputs are the same bits at 1, 2 and 3 threads, and match the unfused model") {
  const onnx::ModelProto proto = testing::ThreadedModel();
  auto fused = Model::Load(testing::CompileModel(proto));
  compiler::CompileOptions unfused_options = testing::CpuOnly();
  unfused_options.fuse = false;
  auto unfused = Model::Load(testing::CompileModel(proto, unfused_options));
  REQUIRE(fused.ok());
  REQUIRE(unfused.ok());
  constexpr int64_t c = testing::kThreadedModelChannels, side = testing::kThreadedModelSide;
  const std::vector<float> x = testing::SeededFloats(c * side * side, 3, 2.0f);
  const TensorView in[] = {TensorView::Host(x.data(), DType::kFloat32, {1, c, side, side})};
  const auto got = SameAtEveryThreadCount(*fused, in);
  const auto want = RunWithThreads(*unfused, in, 1);
  REQUIRE(got.size() == 2);
  for (size_t o = 0; o < got.size(); ++o) CHECK_MESSAGE(CountFar(got[o], want[o], 1e-5, 1e-4) == 0, "output ", o);
}

TEST_CASE("cpu_threads: the real models give the same bits at 1, 2 and 3 threads, close to onnxruntime's") {
  for (const char* name : {"ch_ppocr_mobile_v2.0_cls", "ch_PP-OCRv4_det"}) {
    INFO(name);
    const std::string dir = std::string(KILN_TEST_DATA_DIR) + "/" + name;
    if (!std::filesystem::exists(dir + "/model.onnx")) {
      MESSAGE("skipped: " << dir << " is missing (run tests/e2e/make_package_testdata.py)");
      continue;
    }
    auto bytes = compiler::CompileOnnxFile(dir + "/model.onnx", testing::CpuOnly(), nullptr);
    REQUIRE_MESSAGE(bytes.ok(), bytes.status().ToString());
    auto model = Model::Load(*bytes);
    REQUIRE(model.ok());
    auto input = io::ReadTensorProtoFile(dir + "/test_data_set_0/input_0.pb");
    auto expected = io::ReadTensorProtoFile(dir + "/test_data_set_0/output_0.pb");
    REQUIRE(input.ok());
    REQUIRE(expected.ok());
    const TensorView in[] = {input->view()};
    const auto got = SameAtEveryThreadCount(*model, in);
    const TensorView want_view = expected->view();
    const auto want = testing::FloatCopies(std::span<const TensorView>(&want_view, 1));
    CHECK(CountFar(got[0], want[0], 1e-4, 1e-3) == 0);  // the e2e tests' tolerance against onnxruntime
  }
}

TEST_CASE("cpu_threads outside [0, 256] is refused at Create - 0 means one per CPU") {
  auto model = Model::Load(testing::CompileModel(testing::ThreadedModel()));
  REQUIRE(model.ok());
  for (int bad : {-1, -100, 257}) {
    ContextOptions o;
    o.device = Device::kCpu;
    o.cpu.threads = bad;
    auto ctx = ExecutionContext::Create(*model, o);
    CHECK(ctx.status().code() == StatusCode::kInvalidArgument);
    CHECK(ctx.status().message() == "cpu.threads is " + std::to_string(bad) + ", expected 0 (one per core) to 256");
  }
  ContextOptions o;
  o.device = Device::kCpu;
  auto ctx = ExecutionContext::Create(*model, o);
  REQUIRE(ctx.ok());
  CHECK(ctx->device_note().rfind("CPU backend, ", 0) == 0);
}

}  // namespace
}  // namespace kiln
