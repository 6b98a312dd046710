// ONNX corner cases that engines are known to get wrong, each through the whole pipeline:
// a one-op (or few-op) model compiled with fusion and without, run on the CPU backend, and
// compared with values computed by hand from the ONNX operator spec. Both compiles must give
// the expected values, so the fused programs and the unfused kernels are each checked.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "kiln/tensor_files.h"
#include "tests/compiler/compile_util.h"
#include "tests/compiler/onnx_model_builder.h"
#include "tests/special_floats.h"

namespace kiln::testing {
namespace {

using io::HostTensor;

template <typename T>
HostTensor HostTensorOf(DType dtype, std::vector<int64_t> dims, std::vector<T> values) {
  HostTensor t;
  t.dtype = dtype;
  t.dims = std::move(dims);
  REQUIRE(static_cast<int64_t>(values.size()) == t.num_elements());
  t.bytes.resize(values.size() * sizeof(T));
  std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}
HostTensor F32(std::vector<int64_t> dims, std::vector<float> v) {
  return HostTensorOf(DType::kFloat32, std::move(dims), v);
}
HostTensor I32(std::vector<int64_t> dims, std::vector<int32_t> v) {
  return HostTensorOf(DType::kInt32, std::move(dims), v);
}

// The elements as T (unlike Values, compile_util.h, no check on the byte count: no assertion).
template <typename T>
std::vector<T> ElementsOf(const HostTensor& t) {
  std::vector<T> v(t.bytes.size() / sizeof(T));
  std::memcpy(v.data(), t.bytes.data(), t.bytes.size());
  return v;
}

// Compiles `m` with fusion and without, runs both on `inputs`, and returns output `k` of
// each; the two runs must agree on dtype and shape.
std::vector<HostTensor> RunBoth(const onnx::ModelProto& m, const std::vector<HostTensor>& inputs, size_t k = 0) {
  std::vector<HostTensor> results;
  for (bool fuse : {true, false}) {
    compiler::CompileOptions o = CpuOnly();
    o.fuse = fuse;
    auto model = Model::Load(CompileModel(m, o));
    REQUIRE(model.ok());
    auto ctx = ExecutionContext::Create(*model, {});
    REQUIRE(ctx.ok());
    std::vector<TensorView> views, out;
    for (const HostTensor& t : inputs) views.push_back(t.view());
    Status st = ctx->Run(views, out);
    REQUIRE_MESSAGE(st.ok(), (fuse ? "fused: " : "unfused: ") << st.ToString());
    REQUIRE(out.size() > k);
    results.push_back(HostTensor::FromView("", out[k]));
  }
  CHECK(results[0].dtype == results[1].dtype);
  CHECK(results[0].dims == results[1].dims);
  return results;
}

// Both runs give exactly `want` (NaN where NaN).
void ExpectFloats(const onnx::ModelProto& m, const std::vector<HostTensor>& inputs, std::vector<int64_t> dims,
                  std::vector<float> want, float tol = 0.0f) {
  for (const HostTensor& got : RunBoth(m, inputs)) {
    REQUIRE(got.dtype == DType::kFloat32);
    CHECK(got.dims == dims);
    const std::vector<float> v = ElementsOf<float>(got);
    REQUIRE(v.size() == want.size());
    for (size_t i = 0; i < v.size(); ++i) {
      if (std::isnan(want[i])) CHECK_MESSAGE(std::isnan(v[i]), "element ", i, " = ", v[i], ", expected NaN");
      else CHECK_MESSAGE(std::fabs(v[i] - want[i]) <= tol, "element ", i, " = ", v[i], ", expected ", want[i]);
    }
  }
}

template <typename T>
void ExpectExact(const onnx::ModelProto& m, const std::vector<HostTensor>& inputs, DType dtype, std::vector<int64_t> dims,
                 std::vector<T> want) {
  for (const HostTensor& got : RunBoth(m, inputs)) {
    CHECK(got.dtype == dtype);
    CHECK(got.dims == dims);
    CHECK(ElementsOf<T>(got) == want);
  }
}

// One node `op` over graph inputs x (and y), output z, at `opset`.
onnx::ModelProto OneNode(int64_t opset, const std::string& op, std::vector<std::vector<std::string>> input_dims,
                         int elem = onnx::TensorProto::FLOAT, onnx::NodeProto** node = nullptr) {
  auto m = MakeModel(opset);
  auto* g = m.mutable_graph();
  std::vector<std::string> names;
  for (size_t i = 0; i < input_dims.size(); ++i) {
    names.push_back(i == 0 ? "x" : "y");
    AddInput(g, names.back(), input_dims[i], elem);
  }
  auto* n = AddNode(g, op, names, {"z"}, op + "_node");
  if (node) *node = n;
  AddOutput(g, "z");
  return m;
}

}  // namespace

TEST_CASE("corner: integer Div truncates toward zero, Mod follows the divisor (fmod 0) or the dividend (fmod 1)") {
  const HostTensor a = I32({4}, {-7, 7, -7, 7}), b = I32({4}, {2, -2, -2, 2});
  ExpectExact<int32_t>(OneNode(13, "Div", {{"4"}, {"4"}}, onnx::TensorProto::INT32), {a, b}, DType::kInt32, {4},
                       {-3, -3, 3, 3});
  ExpectExact<int32_t>(OneNode(13, "Mod", {{"4"}, {"4"}}, onnx::TensorProto::INT32), {a, b}, DType::kInt32, {4},
                       {1, -1, -1, 1});
  onnx::NodeProto* n = nullptr;
  auto fmod = OneNode(13, "Mod", {{"4"}, {"4"}}, onnx::TensorProto::INT32, &n);
  AttrInt(n, "fmod", 1);
  ExpectExact<int32_t>(fmod, {a, b}, DType::kInt32, {4}, {-1, 1, -1, 1});
  auto ffmod = OneNode(13, "Mod", {{"4"}, {"4"}}, onnx::TensorProto::FLOAT, &n);
  AttrInt(n, "fmod", 1);
  ExpectFloats(ffmod, {F32({4}, {-7.5f, 7.5f, -7.5f, 7.5f}), F32({4}, {2, -2, -2, 2})}, {4}, {-1.5f, 1.5f, -1.5f, 1.5f});
}

TEST_CASE("corner: Resize nearest rounding at exact .5 ties and the coordinate modes") {
  // x = [1, 2, 3] resized to 2: asymmetric maps output 1 to input 1.5 exactly.
  auto resize = [](const std::string& coord, const std::string& mode, const std::string& nearest) {
    auto m = MakeModel(13);
    auto* g = m.mutable_graph();
    AddInput(g, "x", {"1", "3"});
    AddInt64Init(g, "sizes", {2}, {1, 2});
    auto* n = AddNode(g, "Resize", {"x", "", "", "sizes"}, {"z"}, "resize");
    AttrString(n, "coordinate_transformation_mode", coord);
    AttrString(n, "mode", mode);
    if (!nearest.empty()) AttrString(n, "nearest_mode", nearest);
    AddOutput(g, "z");
    return m;
  };
  const HostTensor x = F32({1, 3}, {1, 2, 3});
  ExpectFloats(resize("asymmetric", "nearest", "round_prefer_floor"), {x}, {1, 2}, {1, 2});  // 1.5 -> 1
  ExpectFloats(resize("asymmetric", "nearest", "round_prefer_ceil"), {x}, {1, 2}, {1, 3});   // 1.5 -> 2
  ExpectFloats(resize("asymmetric", "nearest", "floor"), {x}, {1, 2}, {1, 2});
  ExpectFloats(resize("asymmetric", "nearest", "ceil"), {x}, {1, 2}, {1, 3});
  // half_pixel: (0 + 0.5) * 1.5 - 0.5 = 0.25 and 1.75; align_corners: 0 and 2.
  ExpectFloats(resize("half_pixel", "nearest", "round_prefer_floor"), {x}, {1, 2}, {1, 3});
  ExpectFloats(resize("align_corners", "linear", ""), {x}, {1, 2}, {1, 3});
  ExpectFloats(resize("half_pixel", "linear", ""), {x}, {1, 2}, {1.25f, 2.75f}, 1e-6f);
  ExpectFloats(resize("asymmetric", "linear", ""), {x}, {1, 2}, {1, 2.5f}, 1e-6f);
}

TEST_CASE("corner: Slice with INT64_MAX / INT64_MIN ends, negative steps and out-of-range starts") {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max(), kMin = std::numeric_limits<int64_t>::min();
  auto slice = [](int64_t start, int64_t end, int64_t step) {
    auto m = MakeModel(13);
    auto* g = m.mutable_graph();
    AddInput(g, "x", {"6"});
    AddInt64Init(g, "starts", {1}, {start});
    AddInt64Init(g, "ends", {1}, {end});
    AddInt64Init(g, "axes", {1}, {0});
    AddInt64Init(g, "steps", {1}, {step});
    AddNode(g, "Slice", {"x", "starts", "ends", "axes", "steps"}, {"z"}, "slice");
    AddOutput(g, "z");
    return m;
  };
  const HostTensor x = F32({6}, {0, 1, 2, 3, 4, 5});
  ExpectFloats(slice(-1, kMin, -1), {x}, {6}, {5, 4, 3, 2, 1, 0});
  ExpectFloats(slice(kMax, kMin, -2), {x}, {3}, {5, 3, 1});
  ExpectFloats(slice(1, kMax, 2), {x}, {3}, {1, 3, 5});
  ExpectFloats(slice(-100, 3, 1), {x}, {3}, {0, 1, 2});
  ExpectFloats(slice(4, -100, -3), {x}, {2}, {4, 1});
}

TEST_CASE("corner: Gather with negative indices counts from the end") {
  auto m = MakeModel(13);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"3", "2"});
  AddInt64Init(g, "idx", {3}, {-1, 0, -3});
  AddNode(g, "Gather", {"x", "idx"}, {"z"}, "gather");
  AddOutput(g, "z");
  ExpectFloats(m, {F32({3, 2}, {10, 11, 20, 21, 30, 31})}, {3, 2}, {30, 31, 10, 11, 10, 11});
}

TEST_CASE("corner: Reshape copies a 0 dim and infers -1, allowzero=1 keeps shape values literal") {
  auto reshape = [](std::vector<int64_t> shape, int64_t allowzero) {
    auto m = MakeModel(14);
    auto* g = m.mutable_graph();
    AddInput(g, "x", {"2", "3", "4"});
    AddInt64Init(g, "shape", {static_cast<int64_t>(shape.size())}, shape);
    auto* n = AddNode(g, "Reshape", {"x", "shape"}, {"z"}, "reshape");
    if (allowzero) AttrInt(n, "allowzero", 1);
    AddOutput(g, "z");
    return m;
  };
  std::vector<float> v(24);
  for (int i = 0; i < 24; ++i) v[i] = static_cast<float>(i);
  const HostTensor x = F32({2, 3, 4}, v);
  ExpectFloats(reshape({0, -1}, 0), {x}, {2, 12}, v);
  ExpectFloats(reshape({0, 4, -1}, 0), {x}, {2, 4, 3}, v);
  ExpectFloats(reshape({-1, 6}, 1), {x}, {4, 6}, v);
}

TEST_CASE("corner: NaN propagates through Max, Min, Relu, Clip and ReduceMax") {
  const HostTensor a = F32({3}, {kNaN, 1, 2}), b = F32({3}, {0, kNaN, 1});
  ExpectFloats(OneNode(13, "Max", {{"3"}, {"3"}}), {a, b}, {3}, {kNaN, kNaN, 2});
  ExpectFloats(OneNode(13, "Min", {{"3"}, {"3"}}), {a, b}, {3}, {kNaN, kNaN, 1});
  ExpectFloats(OneNode(14, "Relu", {{"3"}}), {a}, {3}, {kNaN, 1, 2});
  auto clip = MakeModel(13);
  AddInput(clip.mutable_graph(), "x", {"3"});
  AddFloatInit(clip.mutable_graph(), "lo", {}, {0.5f});
  AddFloatInit(clip.mutable_graph(), "hi", {}, {1.5f});
  AddNode(clip.mutable_graph(), "Clip", {"x", "lo", "hi"}, {"z"}, "clip");
  AddOutput(clip.mutable_graph(), "z");
  ExpectFloats(clip, {a}, {3}, {kNaN, 1, 1.5f});
  onnx::NodeProto* n = nullptr;
  auto reduce = OneNode(18, "ReduceMax", {{"3"}}, onnx::TensorProto::FLOAT, &n);
  AttrInt(n, "keepdims", 0);
  ExpectFloats(reduce, {F32({3}, {1, kNaN, 3})}, {}, {kNaN});
}

TEST_CASE("corner: Cast from float truncates toward zero to int, and is true for any nonzero (and NaN) to bool") {
  onnx::NodeProto* n = nullptr;
  auto to_int = OneNode(13, "Cast", {{"4"}}, onnx::TensorProto::FLOAT, &n);
  AttrInt(n, "to", onnx::TensorProto::INT32);
  const HostTensor x = F32({4}, {-1.7f, 1.7f, 2.5f, -0.5f});
  ExpectExact<int32_t>(to_int, {x}, DType::kInt32, {4}, {-1, 1, 2, 0});
  auto to_bool = OneNode(13, "Cast", {{"4"}}, onnx::TensorProto::FLOAT, &n);
  AttrInt(n, "to", onnx::TensorProto::BOOL);
  ExpectExact<uint8_t>(to_bool, {F32({4}, {0.0f, -0.0f, 0.1f, kNaN})}, DType::kBool, {4}, {0, 0, 1, 1});
}

TEST_CASE("corner: reductions with empty axes reduce everything, or nothing with noop_with_empty_axes") {
  const HostTensor x = F32({2, 2}, {1, 2, 3, 4});
  onnx::NodeProto* n = nullptr;
  auto all = OneNode(18, "ReduceSum", {{"2", "2"}}, onnx::TensorProto::FLOAT, &n);
  ExpectFloats(all, {x}, {1, 1}, {10});
  auto noop = OneNode(18, "ReduceSum", {{"2", "2"}}, onnx::TensorProto::FLOAT, &n);
  AttrInt(n, "noop_with_empty_axes", 1);
  ExpectFloats(noop, {x}, {2, 2}, {1, 2, 3, 4});
}

TEST_CASE("corner: MatMul with 1-D operands drops the added dims") {
  const HostTensor v = F32({3}, {1, 2, 3}), m23 = F32({2, 3}, {1, 0, 1, 0, 1, 0}), m32 = F32({3, 2}, {1, 0, 0, 1, 1, 1});
  ExpectFloats(OneNode(13, "MatMul", {{"3"}, {"3"}}), {v, v}, {}, {14});
  ExpectFloats(OneNode(13, "MatMul", {{"2", "3"}, {"3"}}), {m23, v}, {2}, {4, 2});
  ExpectFloats(OneNode(13, "MatMul", {{"3"}, {"3", "2"}}), {v, m32}, {2}, {4, 5});
}

TEST_CASE("corner: Conv auto_pad=SAME_UPPER with stride 2 puts the odd padding at the end") {
  // x: 1..16 in 4x4; 3x3 ones; output ceil(4 / 2) = 2; total padding 1: 0 before, 1 after.
  auto m = MakeModel(13);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"1", "1", "4", "4"});
  AddFloatInit(g, "w", {1, 1, 3, 3}, std::vector<float>(9, 1.0f));
  auto* n = AddNode(g, "Conv", {"x", "w"}, {"z"}, "conv");
  AttrString(n, "auto_pad", "SAME_UPPER");
  AttrInts(n, "strides", {2, 2});
  AddOutput(g, "z");
  std::vector<float> x(16);
  for (int i = 0; i < 16; ++i) x[i] = static_cast<float>(i + 1);
  ExpectFloats(m, {F32({1, 1, 4, 4}, x)}, {1, 1, 2, 2}, {54, 45, 72, 54});
}

TEST_CASE("corner: ConvTranspose output_padding and output_shape") {
  // x = [1, 2, 3], 3 ones, stride 2: full output [1, 1, 3, 2, 5, 3, 3] (7 values).
  auto convt = [](const std::string& attr, int64_t value) {
    auto m = MakeModel(13);
    auto* g = m.mutable_graph();
    AddInput(g, "x", {"1", "1", "3"});
    AddFloatInit(g, "w", {1, 1, 3}, {1, 1, 1});
    auto* n = AddNode(g, "ConvTranspose", {"x", "w"}, {"z"}, "convt");
    AttrInts(n, "strides", {2});
    AttrInts(n, attr, {value});
    AddOutput(g, "z");
    return m;
  };
  const HostTensor x = F32({1, 1, 3}, {1, 2, 3});
  ExpectFloats(convt("output_padding", 1), {x}, {1, 1, 8}, {1, 1, 3, 2, 5, 3, 3, 0});
  // output_shape 5: total padding 2 * 2 + 3 - 5 = 2, split 1 and 1.
  ExpectFloats(convt("output_shape", 5), {x}, {1, 1, 5}, {1, 3, 2, 5, 3});
}

TEST_CASE("corner: pooling with ceil_mode drops a last window that would start in the right padding") {
  // x = 1..5, kernel 2, stride 2, pads 1 and 1: windows start at -1, 1, 3; a 4th would start
  // at 5, inside the right padding, so ceil_mode still gives 3 outputs.
  auto pool = [](const std::string& op) {
    auto m = MakeModel(19);
    auto* g = m.mutable_graph();
    AddInput(g, "x", {"1", "1", "5"});
    auto* n = AddNode(g, op, {"x"}, {"z"}, "pool");
    AttrInts(n, "kernel_shape", {2});
    AttrInts(n, "strides", {2});
    AttrInts(n, "pads", {1, 1});
    AttrInt(n, "ceil_mode", 1);
    AddOutput(g, "z");
    return m;
  };
  const HostTensor x = F32({1, 1, 5}, {1, 2, 3, 4, 5});
  ExpectFloats(pool("MaxPool"), {x}, {1, 1, 3}, {1, 3, 5});
  ExpectFloats(pool("AveragePool"), {x}, {1, 1, 3}, {1, 2.5f, 4.5f});  // count_include_pad = 0
}

TEST_CASE("corner: LayerNormalization of inputs with a large mean does not cancel") {
  // 10000 + [1, 2, 3, 4]: deviations +-0.5, +-1.5, variance 1.25. A one-pass E[x^2] - E[x]^2
  // in float32 loses every digit here (E[x^2] ~ 1e8).
  auto m = MakeModel(17);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"1", "4"});
  AddFloatInit(g, "scale", {4}, {1, 1, 1, 1});
  auto* n = AddNode(g, "LayerNormalization", {"x", "scale"}, {"z"}, "ln");
  AttrInt(n, "axis", -1);
  AddOutput(g, "z");
  const float s = 1.0f / std::sqrt(1.25f + 1e-5f);
  ExpectFloats(m, {F32({1, 4}, {10001, 10002, 10003, 10004})}, {1, 4}, {-1.5f * s, -0.5f * s, 0.5f * s, 1.5f * s},
               1e-4f);
}

TEST_CASE("corner: Softmax at opset 11 flattens from axis on, at opset 13 it normalises along axis alone") {
  std::vector<float> x = {0, 1, 2, 3, 4, 5, 6, 7};
  onnx::NodeProto* n = nullptr;
  auto v11 = OneNode(11, "Softmax", {{"2", "2", "2"}}, onnx::TensorProto::FLOAT, &n);
  AttrInt(n, "axis", 1);
  auto v13 = OneNode(13, "Softmax", {{"2", "2", "2"}}, onnx::TensorProto::FLOAT, &n);
  AttrInt(n, "axis", 1);
  // Opset 11: each batch's 4 values together; opset 13: pairs (0, 2), (1, 3) along axis 1.
  const float e0 = 1.0f, e1 = std::exp(1.0f), e2 = std::exp(2.0f), e3 = std::exp(3.0f), s4 = e0 + e1 + e2 + e3;
  ExpectFloats(v11, {F32({2, 2, 2}, x)}, {2, 2, 2},
               {e0 / s4, e1 / s4, e2 / s4, e3 / s4, e0 / s4, e1 / s4, e2 / s4, e3 / s4}, 1e-6f);
  const float lo = 1.0f / (1.0f + e2), hi = e2 / (1.0f + e2);
  ExpectFloats(v13, {F32({2, 2, 2}, x)}, {2, 2, 2}, {lo, lo, hi, hi, lo, lo, hi, hi}, 1e-6f);
}

TEST_CASE("corner: Shape-15 start and end, negative and clamped") {
  auto shape = [](int64_t start, int64_t end) {
    onnx::NodeProto* n = nullptr;
    auto m = OneNode(15, "Shape", {{"2", "3", "4", "5"}}, onnx::TensorProto::FLOAT, &n);
    AttrInt(n, "start", start);
    AttrInt(n, "end", end);
    return m;
  };
  const HostTensor x = F32({2, 3, 4, 5}, std::vector<float>(120, 0.0f));
  ExpectExact<int64_t>(shape(1, -1), {x}, DType::kInt64, {2}, {3, 4});
  ExpectExact<int64_t>(shape(-10, 10), {x}, DType::kInt64, {4}, {2, 3, 4, 5});
  ExpectExact<int64_t>(shape(-2, 4), {x}, DType::kInt64, {2}, {4, 5});
}

}  // namespace kiln::testing
