// The precision stage and Casts from integers to float32: positions and indices computed in
// float (Cast(int64 -> float) ... Floor -> Cast(int64), or Sin of a position) must keep
// float32's exact integers up to 2^24, not float16's 2048 or bfloat16's 256.
// A Cast to float32 goes low only from a half type, and the follower after it does not go
// low for its constant operand (Mul(f, 0.5)).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "compiler/passes/precision.h"
#include "tests/compiler/compile_util.h"
#include "tests/compiler/onnx_model_builder.h"

using namespace kiln::testing;  // NOLINT: the model-building helpers

TEST_CASE("precision: int64 -> float -> Floor(x * 0.5) -> int64 and Sin(position) keep float32's integers") {
  auto m = MakeModel(13);
  auto* g = m.mutable_graph();
  AddInput(g, "ids", {"4"}, onnx::TensorProto::INT64);
  AddFloatInit(g, "half", {}, {0.5f});
  AttrInt(AddNode(g, "Cast", {"ids"}, {"f"}, "to_float"), "to", onnx::TensorProto::FLOAT);
  AddNode(g, "Mul", {"f", "half"}, {"h"}, "halve");
  AddNode(g, "Floor", {"h"}, {"fl"}, "floor");
  AttrInt(AddNode(g, "Cast", {"fl"}, {"y"}, "to_int"), "to", onnx::TensorProto::INT64);
  AttrInt(AddNode(g, "Cast", {"ids"}, {"pos"}, "position"), "to", onnx::TensorProto::FLOAT);
  AddNode(g, "Sin", {"pos"}, {"s"}, "sin");
  AddOutput(g, "y");
  AddOutput(g, "s");
  const int64_t ids[4] = {257, 1001, 2051, 4097};
  const kiln::TensorView in[] = {kiln::TensorView::Host(ids, kiln::DType::kInt64, {4})};
  for (auto precision : {kiln::passes::Precision::kFp16, kiln::passes::Precision::kBf16}) {
    for (bool fuse : {true, false}) {
      CAPTURE(kiln::passes::PrecisionName(precision));
      CAPTURE(fuse);
      kiln::compiler::CompileOptions o = CpuOnly();
      o.precision.precision = precision;
      o.fuse = fuse;
      auto model = kiln::Model::Load(CompileModel(m, o));
      REQUIRE(model.ok());
      auto ctx = kiln::ExecutionContext::Create(*model, {.device = kiln::Device::kCpu});
      REQUIRE(ctx.ok());
      std::vector<kiln::TensorView> out;
      REQUIRE(ctx->Run(in, out).ok());
      REQUIRE(out[0].dtype == kiln::DType::kInt64);
      REQUIRE(out[1].dtype == kiln::DType::kFloat32);
      const auto* y = static_cast<const int64_t*>(out[0].data);
      const auto* s = static_cast<const float*>(out[1].data);
      for (int i = 0; i < 4; ++i) {
        CAPTURE(ids[i]);
        CHECK(y[i] == ids[i] / 2);
        // Sin of an exact float32 position; its result rounded to the precision type at most.
        CHECK(s[i] == doctest::Approx(std::sin(static_cast<double>(ids[i]))).epsilon(0.01));
      }
    }
  }
}
