// Run-time dims (schema/kiln.fbs RuntimeDim): a size an instruction reports once it has run,
// here NonZero's count, read by the instructions after it, on the CPU backend and the CUDA
// one (the emulated device in CI). Expected values are computed by hand.
#include <doctest/doctest.h>

#include <vector>

#include "kiln/runtime.h"
#include "tests/compiler/compile_util.h"
#include "tests/compiler/onnx_model_builder.h"
#include "tests/gpu_test_util.h"

namespace kiln {
namespace {

// x float32[N]: y = 2 * x[x > 0] (Greater, NonZero, Reshape to 1-D, Gather, Mul), and
// count = Shape(y), whose element is the run-time dim itself.
onnx::ModelProto PositiveModel() {
  auto m = testing::MakeModel(13);
  auto* g = m.mutable_graph();
  testing::AddInput(g, "x", {"N"});
  testing::AddFloatInit(g, "zero", {}, {0.0f});
  testing::AddFloatInit(g, "two", {}, {2.0f});
  testing::AddInt64Init(g, "flat", {1}, {-1});
  testing::AddNode(g, "Greater", {"x", "zero"}, {"mask"}, "positive");
  testing::AddNode(g, "NonZero", {"mask"}, {"where"}, "nonzero");
  testing::AddNode(g, "Reshape", {"where", "flat"}, {"index"}, "flatten");
  testing::AddNode(g, "Gather", {"x", "index"}, {"picked"}, "gather");
  testing::AddNode(g, "Mul", {"picked", "two"}, {"y"}, "double");
  testing::AddNode(g, "Shape", {"y"}, {"count"}, "shape");
  testing::AddOutput(g, "y");
  testing::AddOutput(g, "count");
  return m;
}

struct Result2 {
  std::vector<float> y;
  std::vector<int64_t> y_dims;
  int64_t count = -1;
};

Result2 RunPositive(ExecutionContext& ctx, const std::vector<float>& x) {
  TensorView in[] = {TensorView::Host(x.data(), DType::kFloat32, {static_cast<int64_t>(x.size())})};
  std::vector<TensorView> out;
  Status st = ctx.Run(in, out);
  REQUIRE_MESSAGE(st.ok(), st.ToString());
  REQUIRE(ctx.Synchronize().ok());
  REQUIRE(out.size() == 2);
  Result2 r;
  r.y_dims.assign(out[0].dims, out[0].dims + out[0].rank);
  std::vector<int64_t> count(1, -1);
  std::vector<float> y(static_cast<size_t>(out[0].num_elements()));
  if (out[0].memory == MemoryKind::kDevice) {
    // Copies the device outputs to the host through a second Run into host views.
    std::vector<TensorView> host = {TensorView::Host(y.data(), DType::kFloat32, out[0].dims, out[0].rank),
                                    TensorView::Host(count.data(), DType::kInt64, {1})};
    st = ctx.Run(in, host);
    REQUIRE_MESSAGE(st.ok(), st.ToString());
    REQUIRE(ctx.Synchronize().ok());
  } else {
    const float* p = static_cast<const float*>(out[0].data);
    y.assign(p, p + out[0].num_elements());
    count[0] = *static_cast<const int64_t*>(out[1].data);
  }
  r.y = y;
  r.count = count[0];
  return r;
}

void CheckPositive(Device device) {
  compiler::CompileOptions options = device == Device::kCuda ? compiler::CompileOptions{} : testing::CpuOnly();
  auto model = Model::Load(testing::CompileModel(PositiveModel(), options));
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  CHECK(model->format_version() == kFormatVersion);  // run-time dims need format 5
  auto ctx = ExecutionContext::Create(*model, {device});
  REQUIRE(ctx.ok());
  // Fewer than the bound, none, all of them (the bound itself), and a longer input again.
  Result2 r = RunPositive(*ctx, {1, -2, 3, -4, 5});
  CHECK(r.y == std::vector<float>{2, 6, 10});
  CHECK(r.y_dims == std::vector<int64_t>{3});
  CHECK(r.count == 3);
  r = RunPositive(*ctx, {-1, -1});
  CHECK(r.y.empty());
  CHECK(r.y_dims == std::vector<int64_t>{0});
  CHECK(r.count == 0);
  r = RunPositive(*ctx, {1, 2});
  CHECK(r.y == std::vector<float>{2, 4});
  CHECK(r.count == 2);
  r = RunPositive(*ctx, {-7, 0.5f, 0, 8, 9, -1});
  CHECK(r.y == std::vector<float>{1, 16, 18});
  CHECK(r.count == 3);
}

}  // namespace

TEST_CASE("run-time dims: NonZero's count sizes the instructions after it, call by call") {
  CheckPositive(Device::kCpu);
}

TEST_CASE("[gpu] run-time dims on the CUDA backend: the fallback region ends at NonZero and its size reaches the device") {
  KILN_REQUIRE_GPU();
  CheckPositive(Device::kCuda);
}

TEST_CASE("run-time dims: caller output views are checked against the size found, before anything is written") {
  auto model = Model::Load(testing::CompileModel(PositiveModel()));
  REQUIRE(model.ok());
  auto ctx = ExecutionContext::Create(*model, {Device::kCpu});
  REQUIRE(ctx.ok());
  const std::vector<float> x = {1, -2, 3};
  TensorView in[] = {TensorView::Host(x.data(), DType::kFloat32, {3})};
  std::vector<float> y(2, -1.0f), wrong(3, -1.0f);
  int64_t count = -1;
  std::vector<TensorView> out = {TensorView::Host(wrong.data(), DType::kFloat32, {3}),
                                 TensorView::Host(&count, DType::kInt64, {1})};
  CHECK(ctx->Run(in, out).message() == "output 0 'y' shape [3], expected [2]");
  CHECK(wrong == std::vector<float>{-1, -1, -1});
  out[0] = TensorView::Host(y.data(), DType::kFloat32, {2});
  REQUIRE(ctx->Run(in, out).ok());
  CHECK(y == std::vector<float>{2, 6});
  CHECK(count == 2);
}

TEST_CASE("run-time dims: the compile trace names each with its bound and the node that sets it") {
  compiler::CompileSummary summary;
  auto model = Model::Load(testing::CompileModel(PositiveModel(), testing::CpuOnly(), &summary));
  REQUIRE(model.ok());
  const EntryInfo& entry = model->entries()[0];
  std::string trace;
  for (size_t k = 0; k < entry.stage_traces.size(); ++k)
    if (entry.compile.stage_names[k] == "plan") trace = entry.stage_traces[k];
  CHECK(trace.find("# run-time dim: where.count <= N, set by node 'nonzero' (NonZero)'s count of nonzero elements") !=
        std::string::npos);
}

}  // namespace kiln
