// `kiln compile --validate` (compiler/validate/precision_report.h): the report's figures on
// small models whose float16 results are known exactly, the overflow warning, and the errors.
#include "compiler/validate/precision_report.h"

#include <doctest/doctest.h>

#include <cstring>
#include <limits>

#include "kiln/tensor_files.h"
#include "runtime/half.h"
#include "tests/compiler/compile_util.h"
#include "tests/compiler/onnx_model_builder.h"
#include "tests/temp_dir.h"

namespace kiln::validate {
namespace {

using testing::AddFloatInit;
using testing::AddInput;
using testing::AddNode;
using testing::AddOutput;
using testing::TempDir;

// out[4] = in[4] * k as a low op of the precision table: in reshaped to [4, 1], a MatMul by
// [[k]] named `name` (one product per element, so an inf stays in its element), reshaped back.
void AddLowScale(onnx::GraphProto* g, const std::string& in, float k, const std::string& name,
                 const std::string& out) {
  testing::AddInt64Init(g, name + "_column", {2}, {4, 1});
  testing::AddInt64Init(g, name + "_row", {1}, {4});
  AddFloatInit(g, name + "_k", {1, 1}, {k});
  AddNode(g, "Reshape", {in, name + "_column"}, {name + "_in"});
  AddNode(g, "MatMul", {name + "_in", name + "_k"}, {name + "_out"}, name);
  AddNode(g, "Reshape", {name + "_out", name + "_row"}, {out});
}

// y = x * 2 ('scale', a low MatMul): exact in every precision, so the output's error is the
// input's rounding.
onnx::ModelProto ScaleModel() {
  onnx::ModelProto m = testing::MakeModel(17);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"4"});
  AddLowScale(g, "x", 2.0f, "scale", "y");
  AddOutput(g, "y");
  return m;
}

// y = ((x * 1) * 1000) * 0.001, nodes 'id' (a low MatMul), 'big' and 'small': the Muls follow
// the low MatMul in the precision type, and h = x * 1000 leaves float16's range (65504) for
// x = 100 while float32 and bfloat16 hold it.
onnx::ModelProto OverflowModel() {
  onnx::ModelProto m = testing::MakeModel(17);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"4"});
  AddFloatInit(g, "k_big", {}, {1000.0f});
  AddFloatInit(g, "k_small", {}, {0.001f});
  AddLowScale(g, "x", 1.0f, "id", "x1");
  AddNode(g, "Mul", {"x1", "k_big"}, {"h"}, "big");
  AddNode(g, "Mul", {"h", "k_small"}, {"y"}, "small");
  AddOutput(g, "y");
  return m;
}

std::string WriteModel(const TempDir& dir, const onnx::ModelProto& m) {
  std::string bytes;
  REQUIRE(m.SerializeToString(&bytes));
  testing::WriteBytes(dir / "model.onnx", bytes);
  return dir / "model.onnx";
}

void WriteInput(const std::string& path, const std::string& name, const std::vector<float>& values) {
  io::HostTensor t;
  t.name = name;
  t.dtype = DType::kFloat32;
  t.dims = {static_cast<int64_t>(values.size())};
  t.bytes.resize(values.size() * sizeof(float));
  std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  REQUIRE(io::WriteTensorProtoFile(path, t).ok());
}

compiler::CompileOptions Options(passes::Precision p, bool fuse = true, DType io = DType::kFloat32) {
  compiler::CompileOptions o = testing::CpuOnly();
  o.precision.precision = p;
  o.precision.io_dtype = io;
  o.fuse = fuse;
  return o;
}

Result<PrecisionReport> Validate(const std::string& model, const compiler::CompileOptions& options,
                                 const std::string& inputs) {
  auto artifact = compiler::CompileOnnxFile(model, options, nullptr);
  REQUIRE_MESSAGE(artifact.ok(), artifact.status().ToString());
  return ValidatePrecision(model, options, *artifact, inputs);
}

const float kThird = 1.0f / 3.0f;
// float32(1/3) = 11184811 / 2^25, float16(1/3) = 1365 / 2^12.
const double kThirdError = 11184811.0 / 33554432.0 - 1365.0 / 4096.0;

TEST_CASE("precision report: float16 error of y = 2x at x = 1/3 is twice fp16(1/3)'s rounding") {
  TempDir dir;
  const std::string model = WriteModel(dir, ScaleModel());
  WriteInput(dir / "input_0.pb", "x", {kThird, kThird, -kThird, kThird});
  for (DType io : {DType::kFloat32, DType::kFloat16}) {
    CAPTURE(DTypeName(io));
    auto r = Validate(model, Options(passes::Precision::kFp16, true, io), dir.path.string());
    REQUIRE_MESSAGE(r.ok(), r.status().ToString());
    CHECK(r->precision == "fp16");
    REQUIRE(r->sets.size() == 1);
    REQUIRE(r->outputs.size() == 1);
    const OutputReport& o = r->outputs[0];
    CHECK(o.output == "y");
    CHECK(o.dtype == io);
    CHECK(o.metrics.elements == 4);
    CHECK(o.metrics.max_abs == 2 * kThirdError);
    CHECK(o.metrics.max_rel == doctest::Approx(kThirdError / (11184811.0 / 33554432.0)).epsilon(1e-12));
    CHECK(o.metrics.cosine == doctest::Approx(1.0).epsilon(1e-12));
    CHECK(o.metrics.nonfinite == 0);
    CHECK(r->overflows.empty());
    const std::string text = FormatPrecisionReport(*r);
    CHECK(text.find("accuracy of the fp16 artifact against float32") != std::string::npos);
    CHECK(text.find("warning") == std::string::npos);
  }
}

TEST_CASE("precision report: a float32 artifact matches the reference") {
  TempDir dir;
  const std::string model = WriteModel(dir, OverflowModel());
  WriteInput(dir / "input_0.pb", "x", {100, -100, 3, 0.5f});
  auto r = Validate(model, Options(passes::Precision::kFp32), dir.path.string());
  REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  CHECK(r->precision == "fp32");
  REQUIRE(r->outputs.size() == 1);
  CHECK(r->outputs[0].metrics.max_rel < 1e-6);  // fusion's float32 rounding at most
  CHECK(r->outputs[0].metrics.cosine == doctest::Approx(1.0).epsilon(1e-12));
  CHECK(r->overflows.empty());
}

TEST_CASE("precision report: x * 1000 overflows float16 at x = 100, the warning names the value and node") {
  TempDir dir;
  const std::string model = WriteModel(dir, OverflowModel());
  WriteInput(dir / "input_0.pb", "x", {100, -100, 3, 0.5f});
  auto r = Validate(model, Options(passes::Precision::kFp16, /*fuse=*/false), dir.path.string());
  REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  REQUIRE(r->overflows.size() == 1);
  const Overflow& o = r->overflows[0];
  CHECK(o.value == "h.fp16");  // h, written in float16 (passes/precision.h)
  CHECK(o.instruction.find("'big' (Mul)") != std::string::npos);
  CHECK(o.dtype == DType::kFloat16);
  CHECK(o.nonfinite == 2);  // +-1e5; 3000 and 500 fit
  CHECK(o.elements == 4);
  CHECK(o.downstream >= 1);  // y, and its Cast back to float32
  REQUIRE(r->outputs.size() == 1);
  CHECK(r->outputs[0].metrics.nonfinite == 2);
  CHECK(r->outputs[0].metrics.compared == 2);
  const std::string text = FormatPrecisionReport(*r);
  CHECK(text.find("warning: " + r->sets[0] + ": fp16 overflow: value 'h.fp16' (float16) at instruction") !=
        std::string::npos);
  CHECK(text.find("'big' (Mul): 2 of 4 elements inf or NaN where float32 has none") != std::string::npos);
  CHECK(text.find("warning: " + r->sets[0] + ": output 'y' has 2 of 4 elements inf or NaN") != std::string::npos);
}

TEST_CASE("precision report: a fused kernel keeps x * 1000 in float32 registers, so its artifact does not overflow") {
  // The check covers what the artifact stores: fused, 'big' and 'small' are one generated
  // kernel that stores only y.
  TempDir dir;
  const std::string model = WriteModel(dir, OverflowModel());
  WriteInput(dir / "input_0.pb", "x", {100, -100, 3, 0.5f});
  auto r = Validate(model, Options(passes::Precision::kFp16, /*fuse=*/true), dir.path.string());
  REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  CHECK(r->overflows.empty());
  REQUIRE(r->outputs.size() == 1);
  CHECK(r->outputs[0].metrics.nonfinite == 0);
  CHECK(r->outputs[0].metrics.max_rel < 0.00048828125);  // 0.001 rounded to float16: 2^-11 at most
}

TEST_CASE("precision report: values that are inf in float32 too are no overflow") {
  // x = 1e36 overflows float16 in the Cast before the MatMul; its product by 1 and that
  // reshaped (x1) are finite in float32, so they count downstream; h = x * 1000 and y are inf
  // in float32 as well, so h.fp16 and y, though inf, are neither overflows nor downstream.
  TempDir dir;
  const std::string model = WriteModel(dir, OverflowModel());
  WriteInput(dir / "input_0.pb", "x", {1e36f, 1, 2, 3});
  auto r = Validate(model, Options(passes::Precision::kFp16, /*fuse=*/false), dir.path.string());
  REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  REQUIRE(r->overflows.size() == 1);
  CHECK(r->overflows[0].value == "id_in.to_fp16");
  CHECK(r->overflows[0].nonfinite == 1);
  CHECK(r->overflows[0].downstream == 2);  // id_out.fp16 and x1.fp16
  REQUIRE(r->outputs.size() == 1);
  CHECK(r->outputs[0].metrics.ref_nonfinite == 1);
  CHECK(r->outputs[0].metrics.nonfinite == 0);
}

TEST_CASE("precision report: an inf in the input itself is no overflow") {
  TempDir dir;
  const std::string model = WriteModel(dir, OverflowModel());
  WriteInput(dir / "input_0.pb", "x", {std::numeric_limits<float>::infinity(), 1, 2, 3});
  for (DType io : {DType::kFloat32, DType::kFloat16}) {
    CAPTURE(DTypeName(io));
    auto r = Validate(model, Options(passes::Precision::kFp16, /*fuse=*/false, io), dir.path.string());
    REQUIRE_MESSAGE(r.ok(), r.status().ToString());
    CHECK(r->overflows.empty());
    REQUIRE(r->outputs.size() == 1);
    CHECK(r->outputs[0].metrics.ref_nonfinite == 1);
    CHECK(r->outputs[0].metrics.nonfinite == 0);
  }
}

TEST_CASE("precision report: bfloat16 keeps float32's range, so x * 1000 does not overflow") {
  TempDir dir;
  const std::string model = WriteModel(dir, OverflowModel());
  WriteInput(dir / "input_0.pb", "x", {100, -100, 3, 0.5f});
  auto r = Validate(model, Options(passes::Precision::kBf16, /*fuse=*/false), dir.path.string());
  REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  CHECK(r->overflows.empty());
  REQUIRE(r->outputs.size() == 1);
  CHECK(r->outputs[0].metrics.nonfinite == 0);
  CHECK(r->outputs[0].metrics.max_rel < 3 * 0.00390625);  // three roundings of 2^-8 at most
  CHECK(FormatPrecisionReport(*r).find("warning") == std::string::npos);
}

TEST_CASE("precision report: an input that overflows float16 in its conversion (--io-precision fp16)") {
  TempDir dir;
  const std::string model = WriteModel(dir, ScaleModel());
  WriteInput(dir / "input_0.pb", "x", {1e5f, 1, 2, 3});
  auto r = Validate(model, Options(passes::Precision::kFp16, true, DType::kFloat16), dir.path.string());
  REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  REQUIRE(r->overflows.size() == 1);
  CHECK(r->overflows[0].value == "x");
  CHECK(r->overflows[0].instruction == "input conversion");
  CHECK(r->overflows[0].nonfinite == 1);
  CHECK(r->overflows[0].downstream >= 1);
}

TEST_CASE("precision report: a model folder's test_data_set_* are each run") {
  TempDir dir;
  const std::string model = WriteModel(dir, ScaleModel());
  std::filesystem::create_directories(dir / "test_data_set_1");
  std::filesystem::create_directories(dir / "test_data_set_0");
  WriteInput(dir / "test_data_set_0/input_0.pb", "x", {kThird, 1, 1, 1});
  WriteInput(dir / "test_data_set_1/input_0.pb", "x", {1, 2, 3, 4});
  auto r = Validate(model, Options(passes::Precision::kFp16), dir.path.string());
  REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  CHECK(r->sets == std::vector<std::string>{"test_data_set_0", "test_data_set_1"});
  REQUIRE(r->outputs.size() == 2);
  CHECK(r->outputs[0].set == "test_data_set_0");
  CHECK(r->outputs[0].metrics.max_abs == 2 * kThirdError);
  CHECK(r->outputs[1].set == "test_data_set_1");
  CHECK(r->outputs[1].metrics.max_abs == 0.0);  // small integers are exact in float16
}

TEST_CASE("precision report: errors name the folder and the input") {
  TempDir dir;
  onnx::ModelProto m = ScaleModel();
  auto* g = m.mutable_graph();
  AddInput(g, "z", {"4"});
  AddNode(g, "Add", {"y", "z"}, {"w"}, "add");
  AddOutput(g, "w");
  const std::string model = WriteModel(dir, m);
  const auto options = Options(passes::Precision::kFp16);
  auto artifact = compiler::CompileOnnxFile(model, options, nullptr);
  REQUIRE(artifact.ok());

  auto missing_dir = ValidatePrecision(model, options, *artifact, dir / "nope");
  REQUIRE(!missing_dir.ok());
  CHECK(missing_dir.status().code() == StatusCode::kNotFound);
  CHECK(missing_dir.status().message() == dir / "nope" + ": no such input folder");

  WriteInput(dir / "input_0.pb", "x", {1, 2, 3, 4});
  auto missing_input = ValidatePrecision(model, options, *artifact, dir.path.string());
  REQUIRE(!missing_input.ok());
  CHECK(missing_input.status().code() == StatusCode::kNotFound);
  CHECK(missing_input.status().message().find("input_1.pb: missing; the model has 2 inputs and input 1 is 'z'") !=
        std::string::npos);

  io::HostTensor ints;
  ints.name = "z";
  ints.dtype = DType::kInt64;
  ints.dims = {4};
  ints.bytes.assign(32, 0);
  REQUIRE(io::WriteTensorProtoFile(dir / "input_1.pb", ints).ok());
  auto wrong_dtype = ValidatePrecision(model, options, *artifact, dir.path.string());
  REQUIRE(!wrong_dtype.ok());
  CHECK(wrong_dtype.status().code() == StatusCode::kInvalidArgument);
  CHECK(wrong_dtype.status().message() == dir.path.string() + ": input 1 'z' is int64[4], the model takes float32");

  WriteInput(dir / "input_1.pb", "z", {1, 2, 3});
  auto wrong_shape = ValidatePrecision(model, options, *artifact, dir.path.string());
  REQUIRE(!wrong_shape.ok());
  CHECK(wrong_shape.status().code() == StatusCode::kInvalidArgument);
  CHECK(wrong_shape.status().message().find(dir.path.string() + ": float32 reference: ") == 0);
}

TEST_CASE("precision report: an output with no element finite in both shows '-', not max abs 0 and cosine 1") {
  // Before: compared == 0 printed the metrics' initial values (0, 0, 1.000000000), as if the
  // outputs matched exactly.
  TempDir dir;
  const std::string model = WriteModel(dir, OverflowModel());
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  WriteInput(dir / "input_0.pb", "x", {nan, inf, -inf, nan});
  auto r = Validate(model, Options(passes::Precision::kFp16), dir.path.string());
  REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  REQUIRE(r->outputs.size() == 1);
  CHECK(r->outputs[0].metrics.compared == 0);
  CHECK(r->outputs[0].metrics.ref_nonfinite == 4);
  const std::string text = FormatPrecisionReport(*r);
  CHECK(text.find("1.000000000") == std::string::npos);
  CHECK(text.find("  y                4            -            -             -           0\n") != std::string::npos);
  CHECK(text.find("note: " + r->sets[0] + ": output 'y': errors and cosine over the 0 of 4 elements finite in both "
                  "(4 inf or NaN in float32)\n") != std::string::npos);
}

TEST_CASE("precision report: an output partly inf or NaN notes how many elements the figures cover") {
  TempDir dir;
  const std::string model = WriteModel(dir, OverflowModel());
  WriteInput(dir / "input_0.pb", "x", {100, -100, 3, 0.5f});
  auto r = Validate(model, Options(passes::Precision::kFp16, /*fuse=*/false), dir.path.string());
  REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  const std::string text = FormatPrecisionReport(*r);
  CHECK(text.find("note: " + r->sets[0] + ": output 'y': errors and cosine over the 2 of 4 elements finite in both "
                  "(0 inf or NaN in float32)\n") != std::string::npos);
  // An output compared in full has no note.
  WriteInput(dir / "input_0.pb", "x", {1, 2, 3, 4});
  r = Validate(model, Options(passes::Precision::kFp16, /*fuse=*/false), dir.path.string());
  REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  CHECK(FormatPrecisionReport(*r).find("note:") == std::string::npos);
}


// y = DQ(Q(Conv(DQ(Q(x)), DQ(W)))), as onnxruntime's quantize_static writes it: x uint8 (scale
// 0.05, zero point 128), W int8 (scale 0.01), the Conv's output uint8 (scale 0.02, zero point
// 100), which is output `yq`; `y` is its DequantizeLinear.
onnx::ModelProto QdqConvModel() {
  onnx::ModelProto m = testing::MakeModel(19);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"1", "4", "6", "6"});
  AddFloatInit(g, "xs", {}, {0.05f});
  testing::AddRawInit<uint8_t>(g, "xz", onnx::TensorProto::UINT8, {}, {128});
  AddNode(g, "QuantizeLinear", {"x", "xs", "xz"}, {"xq"}, "qx");
  AddNode(g, "DequantizeLinear", {"xq", "xs", "xz"}, {"xf"}, "dqx");
  std::vector<int8_t> w(8 * 4 * 3 * 3);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<int8_t>(static_cast<int>(i * 37 % 255) - 127);
  testing::AddRawInit(g, "w", onnx::TensorProto::INT8, {8, 4, 3, 3}, w);
  AddFloatInit(g, "ws", {}, {0.01f});
  testing::AddRawInit<int8_t>(g, "wz", onnx::TensorProto::INT8, {}, {0});
  AddNode(g, "DequantizeLinear", {"w", "ws", "wz"}, {"wf"}, "dqw");
  testing::AttrInts(AddNode(g, "Conv", {"xf", "wf"}, {"c"}, "conv"), "pads", {1, 1, 1, 1});
  AddFloatInit(g, "ys", {}, {0.02f});
  testing::AddRawInit<uint8_t>(g, "yz", onnx::TensorProto::UINT8, {}, {100});
  AddNode(g, "QuantizeLinear", {"c", "ys", "yz"}, {"yq"}, "qy");
  AddNode(g, "DequantizeLinear", {"yq", "ys", "yz"}, {"y"}, "dqy");
  AddOutput(g, "yq");
  AddOutput(g, "y");
  return m;
}

TEST_CASE("precision report: a quantized model's outputs get their error in quantization steps") {
  TempDir dir;
  const std::string model = WriteModel(dir, QdqConvModel());
  std::vector<float> x(4 * 6 * 6);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(static_cast<int>(i * 29 % 101) - 50) * 0.11f;
  io::HostTensor t;
  t.name = "x";
  t.dtype = DType::kFloat32;
  t.dims = {1, 4, 6, 6};
  t.bytes.resize(x.size() * sizeof(float));
  std::memcpy(t.bytes.data(), x.data(), t.bytes.size());
  REQUIRE(io::WriteTensorProtoFile(dir / "input_0.pb", t).ok());
  auto r = Validate(model, Options(passes::Precision::kFp32), dir.path.string());
  REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  REQUIRE(r->outputs.size() == 2);
  CHECK(r->outputs[0].output == "yq");
  CHECK(r->outputs[0].step == 1);
  CHECK(r->outputs[1].step == doctest::Approx(0.02));
  // The artifact's QLinearConv against the graph's float Conv between Q and DQ: a rounding, at
  // most one step apart, in the integer output and its dequantized twin alike.
  CHECK(r->outputs[0].metrics.max_abs <= 1);
  CHECK(r->outputs[1].metrics.max_abs <= 0.02 * 1.0001);
  CHECK(r->outputs[0].metrics.max_abs * 0.02 == doctest::Approx(r->outputs[1].metrics.max_abs));
  const std::string text = FormatPrecisionReport(*r);
  CHECK(text.find("max err (steps)") != std::string::npos);
  CHECK(text.find("one step is rounding") != std::string::npos);
  // A float model's report has no steps column.
  const std::string float_model = WriteModel(dir, ScaleModel());
  WriteInput(dir / "input_0.pb", "x", {1, 2, 3, 4});
  auto f = Validate(float_model, Options(passes::Precision::kFp32), dir.path.string());
  REQUIRE_MESSAGE(f.ok(), f.status().ToString());
  CHECK(f->outputs[0].step == 0);
  CHECK(FormatPrecisionReport(*f).find("steps") == std::string::npos);
}

}  // namespace
}  // namespace kiln::validate
