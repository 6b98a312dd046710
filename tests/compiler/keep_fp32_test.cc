// `--keep-fp32` through the compile driver (compiler/compile.cc): names are checked against
// the model as imported, If branches included, and each entry's precision stage keeps what its
// own canonical trace still has. An entry of a shape-dependent If is never dropped for a name
// that only the other branch has.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "tests/compiler/compile_util.h"
#include "tests/compiler/onnx_model_builder.h"
#include "tests/temp_dir.h"

using namespace kiln::testing;  // NOLINT: the model-building helpers

namespace {

// y = If(Shape(x)[0] == 1, then: x * ten ('then_mul'), else: x @ W ('else_mm')), x: [N, 2].
onnx::ModelProto ShapeIfModel() {
  auto m = MakeModel(13);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"N", "2"});
  AddFirstDimIsOne(g, "x", "is_one");
  auto* node = AddNode(g, "If", {"is_one"}, {"y"}, "if");
  auto* then_g = AddBranch(node, "then_branch");
  AddFloatInit(then_g, "ten", {}, {10.0f});
  AddNode(then_g, "Mul", {"x", "ten"}, {"times_ten"}, "then_mul");
  AddOutput(then_g, "times_ten");
  auto* else_g = AddBranch(node, "else_branch");
  AddFloatInit(else_g, "W", {2, 2}, {1.0f / 3.0f, 0, 0, 1.0f / 3.0f});
  AddNode(else_g, "MatMul", {"x", "W"}, {"mm"}, "else_mm");
  AddOutput(else_g, "mm");
  AddOutput(g, "y");
  return m;
}

kiln::compiler::CompileOptions Fp16Keeping(std::vector<std::string> keep) {
  kiln::compiler::CompileOptions o = CpuOnly();
  o.precision.precision = kiln::passes::Precision::kFp16;
  o.precision.keep_fp32 = std::move(keep);
  return o;
}

// The 'precision' stage trace of `entry`.
std::string PrecisionTrace(const kiln::EntryInfo& entry) {
  const auto& names = entry.compile.stage_names;
  const auto it = std::find(names.begin(), names.end(), "precision");
  REQUIRE(it != names.end());
  return entry.stage_traces[static_cast<size_t>(it - names.begin())];
}

}  // namespace

TEST_CASE("--keep-fp32: a node of one If branch keeps both entries of a shape-dependent If") {
  // Before: the entry '(N == 1)', whose trace has no 'else_mm', failed its precision stage and
  // was dropped as if its assumption made the model invalid; the artifact then rejected N == 1.
  auto model = kiln::Model::Load(CompileModel(ShapeIfModel(), Fp16Keeping({"else_mm"})));
  REQUIRE(model.ok());
  REQUIRE(model->entries().size() == 2);
  CHECK(model->entries()[0].name == "(N == 1)");
  CHECK(model->entries()[1].name == "not (N == 1)");
  CHECK(PrecisionTrace(model->entries()[0]).find("kept in float32") == std::string::npos);
  CHECK(PrecisionTrace(model->entries()[1]).find("# node 'else_mm' (MatMul) kept in float32 (--keep-fp32)") !=
        std::string::npos);

  auto ctx = kiln::ExecutionContext::Create(*model, {});
  REQUIRE(ctx.ok());
  float x[4] = {3, 6, 9, 12};
  std::vector<kiln::TensorView> out;
  kiln::TensorView one[] = {kiln::TensorView::Host(x, kiln::DType::kFloat32, {1, 2})};
  REQUIRE(ctx->Run(one, out).ok());
  CHECK(static_cast<const float*>(out[0].data)[1] == 60.0f);  // 6 * 10, exact in float16
  out.clear();
  // The kept MatMul computes in float32: 12 / 3 = 4 within float32 rounding (float16's 1/3,
  // 0.33325, would give 3.999).
  kiln::TensorView two[] = {kiln::TensorView::Host(x, kiln::DType::kFloat32, {2, 2})};
  REQUIRE(ctx->Run(two, out).ok());
  CHECK(static_cast<const float*>(out[0].data)[3] == doctest::Approx(4.0f).epsilon(1e-6));
}

TEST_CASE("--keep-fp32: a node the canonical stage folds away is a name of the model") {
  // 'shape_of_w' (Reshape of a constant) is folded before the precision stage runs; before, the
  // name was rejected as "no node ... in the model".
  auto m = MakeModel(13);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"2", "2"});
  AddFloatInit(g, "w_flat", {4}, {1, 2, 3, 4});
  AddInt64Init(g, "w_shape", {2}, {2, 2});
  AddNode(g, "Reshape", {"w_flat", "w_shape"}, {"W"}, "shape_of_w");
  AddNode(g, "MatMul", {"x", "W"}, {"y"}, "mm");
  AddOutput(g, "y");
  auto model = kiln::Model::Load(CompileModel(m, Fp16Keeping({"shape_of_w"})));
  REQUIRE(model.ok());
  CHECK(model->precision() == "fp16");
}

TEST_CASE("--keep-fp32: a name in no node and no op type of the model, branches included, is an error") {
  for (const char* bad : {"else_MM", "Matmul", ""}) {
    CAPTURE(bad);
    TempDir dir;
    std::string bytes;
    REQUIRE(ShapeIfModel().SerializeToString(&bytes));
    WriteBytes(dir / "model.onnx", bytes);
    auto r = kiln::compiler::CompileOnnxFile(dir / "model.onnx", Fp16Keeping({"else_mm", bad}), nullptr);
    REQUIRE(!r.ok());
    CHECK(r.status().code() == kiln::StatusCode::kInvalidArgument);
    CHECK(r.status().message() == std::string("--keep-fp32 '") + bad +
                                      "': no node and no op type of that name in the model (names are ONNX node "
                                      "names or op types such as Softmax)");
  }
}
