// The precision stage: which nodes it lowers, where it puts Casts, what it does to constants,
// integer paths, --keep-fp32 and --io-precision, and (through the driver and the CPU backend)
// that an fp16 artifact computes what the hand-rounded arithmetic says.
#include "compiler/passes/precision.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/half.h"
#include "runtime/op_table.h"
#include "tests/compiler/compile_util.h"
#include "tests/compiler/onnx_model_builder.h"
#include "tests/runtime/artifact_builder_test_util.h"

using namespace kiln::testing;  // NOLINT: the model-building helpers
using kiln::ArtifactHeader;
using kiln::DType;
using kiln::ir::Node;
using kiln::passes::LowerPrecision;
using kiln::passes::Precision;
using kiln::passes::PrecisionOptions;

namespace {

struct Lowered {
  Trace trace;
  std::vector<std::string> log;
};

Lowered Lower(const onnx::ModelProto& m, const PrecisionOptions& options) {
  auto c = Canonical(m);
  REQUIRE_MESSAGE(c.ok(), c.status().ToString());
  Lowered l;
  auto t = LowerPrecision(c->trace, options, &l.log);
  REQUIRE_MESSAGE(t.ok(), t.status().ToString());
  l.trace = std::move(*t);
  return l;
}

PrecisionOptions Fp16() {
  PrecisionOptions o;
  o.precision = Precision::kFp16;
  return o;
}

const Node& NodeNamed(const Trace& t, const std::string& name) {
  for (const Node& n : t.body.nodes)
    if (n.name == name) return n;
  FAIL("no node '" << name << "'");
  return t.body.nodes.front();
}

DType InDType(const Trace& t, const Node& n, size_t i) { return t.value(n.inputs[i]).dtype; }
DType OutDType(const Trace& t, const Node& n, size_t i = 0) { return t.value(n.outputs[i]).dtype; }
std::string InName(const Trace& t, const Node& n, size_t i) { return t.value(n.inputs[i]).name; }

// x[2,3] @ W[3,2] -> Relu -> Softmax -> Exp -> y: a low GEMM, a following activation, a low
// Softmax and a float32 Exp.
onnx::ModelProto GemmChain() {
  auto m = MakeModel(17);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"2", "3"});
  AddFloatInit(g, "W", {3, 2}, {0.1f, 0.2f, 0.3f, 1.0f / 3.0f, 0.5f, 0.6f});
  AddNode(g, "MatMul", {"x", "W"}, {"mm"}, "matmul");
  AddNode(g, "Relu", {"mm"}, {"r"}, "relu");
  AddNode(g, "Softmax", {"r"}, {"s"}, "softmax");
  AddNode(g, "Exp", {"s"}, {"y"}, "exp");
  AddOutput(g, "y");
  return m;
}

}  // namespace

TEST_CASE("precision: float32 in and out is the canonical trace unchanged") {
  auto c = Canonical(GemmChain());
  REQUIRE(c.ok());
  auto t = LowerPrecision(c->trace, {}, nullptr);
  REQUIRE(t.ok());
  CHECK(t->Print() == c->trace.Print());
}

TEST_CASE("precision: GEMM and Softmax lowered, Exp kept in float32, one Cast at each edge") {
  const Lowered l = Lower(GemmChain(), Fp16());
  const Trace& t = l.trace;
  CHECK(Ops(t) == std::vector<std::string>{"Cast", "MatMul", "Relu", "Softmax", "Cast", "Exp"});
  CHECK(t.stage == "precision");
  const Node& mm = NodeNamed(t, "matmul");
  CHECK(InName(t, mm, 0) == "x.to_fp16");
  CHECK(InDType(t, mm, 0) == DType::kFloat16);
  // The weight is converted at compile time, rounded to nearest even.
  const auto& w = t.value(mm.inputs[1]);
  REQUIRE(w.is_const());
  CHECK(w.name == "W.fp16");
  CHECK(w.dtype == DType::kFloat16);
  CHECK(w.data->bytes.size() == 6 * 2);
  CHECK(w.data->FloatAt(3) == kiln::HalfToFloat(kiln::FloatToHalf(1.0f / 3.0f)));
  CHECK(w.data->FloatAt(3) != static_cast<float>(1.0f / 3.0f));
  CHECK(OutDType(t, mm) == DType::kFloat16);
  CHECK(t.value(mm.outputs[0]).name == "mm.fp16");
  CHECK(OutDType(t, NodeNamed(t, "relu")) == DType::kFloat16);
  CHECK(OutDType(t, NodeNamed(t, "softmax")) == DType::kFloat16);
  // Exp reads the declared float32 value, made by a Cast named for it.
  const Node& back = NodeNamed(t, "s.to_fp32");
  CHECK(back.attrs.GetInt("to", 0) == static_cast<int64_t>(DType::kFloat32));
  CHECK(t.value(back.outputs[0]).name == "s");
  const Node& exp = NodeNamed(t, "exp");
  CHECK(InDType(t, exp, 0) == DType::kFloat32);
  CHECK(OutDType(t, exp) == DType::kFloat32);
  // The model's input and output keep their declared float32 values.
  CHECK(t.value(t.inputs[0]).dtype == DType::kFloat32);
  CHECK(t.value(t.outputs[0]).dtype == DType::kFloat32);
  CHECK(t.value(t.outputs[0]).name == "y");
  REQUIRE(!l.log.empty());
  CHECK(l.log.back().find("3 of 4 ops in fp16") != std::string::npos);
}

TEST_CASE("precision: bf16 converts constants with bfloat16 rounding") {
  PrecisionOptions o;
  o.precision = Precision::kBf16;
  const Trace t = Lower(GemmChain(), o).trace;
  const auto& w = t.value(NodeNamed(t, "matmul").inputs[1]);
  CHECK(w.name == "W.bf16");
  CHECK(w.dtype == DType::kBFloat16);
  CHECK(w.data->FloatAt(3) == kiln::BF16ToFloat(kiln::FloatToBF16(1.0f / 3.0f)));
}

TEST_CASE("precision: --keep-fp32 by op type and by node name") {
  PrecisionOptions o = Fp16();
  o.keep_fp32 = {"Softmax"};
  Lowered l = Lower(GemmChain(), o);
  CHECK(OutDType(l.trace, NodeNamed(l.trace, "softmax")) == DType::kFloat32);
  CHECK(InDType(l.trace, NodeNamed(l.trace, "softmax"), 0) == DType::kFloat32);
  CHECK(OutDType(l.trace, NodeNamed(l.trace, "relu")) == DType::kFloat16);
  CHECK(std::count(l.log.begin(), l.log.end(), "node 'softmax' (Softmax) kept in float32 (--keep-fp32)") == 1);

  o.keep_fp32 = {"matmul"};
  l = Lower(GemmChain(), o);
  CHECK(OutDType(l.trace, NodeNamed(l.trace, "matmul")) == DType::kFloat32);
  // Relu follows its float32 input; Softmax is low by the table, so the Cast comes before it.
  CHECK(OutDType(l.trace, NodeNamed(l.trace, "relu")) == DType::kFloat32);
  CHECK(OutDType(l.trace, NodeNamed(l.trace, "softmax")) == DType::kFloat16);
  CHECK(Ops(l.trace) == std::vector<std::string>{"MatMul", "Relu", "Cast", "Softmax", "Cast", "Exp"});

  // A name no node of this trace has is the driver's to reject (tests/compiler/keep_fp32_test.cc).
  o.keep_fp32 = {"SoftMax"};
  l = Lower(GemmChain(), o);
  CHECK(OutDType(l.trace, NodeNamed(l.trace, "softmax")) == DType::kFloat16);
}

TEST_CASE("precision: integer and shape paths are untouched, Resize keeps float32 scales") {
  auto m = MakeModel(17);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"1", "2", "2", "2"});
  AddInput(g, "idx", {"2"}, onnx::TensorProto::INT64);
  AddFloatInit(g, "scales", {4}, {1, 1, 2, 2});
  AddFloatInit(g, "k", {1}, {2.0f});
  AddNode(g, "Conv", {"x", "w"}, {"c"}, "conv");
  AddFloatInit(g, "w", {2, 2, 1, 1}, {1, 0, 0, 1});
  AddNode(g, "Resize", {"c", "", "scales"}, {"r"}, "resize");
  AddNode(g, "Mul", {"r", "k"}, {"y"}, "mul");
  AttrInt(AddNode(g, "ArgMax", {"y"}, {"am"}, "argmax"), "axis", 1);
  AttrInt(AddNode(g, "Gather", {"am", "idx"}, {"picked"}, "gather"), "axis", 0);
  AddOutput(g, "y");
  AddOutput(g, "picked");
  const Trace t = Lower(m, Fp16()).trace;
  const Node& resize = NodeNamed(t, "resize");
  CHECK(InDType(t, resize, 0) == DType::kFloat16);
  CHECK(InDType(t, resize, 2) == DType::kFloat32);
  CHECK(InName(t, resize, 2) == "scales");
  CHECK(OutDType(t, resize) == DType::kFloat16);
  // Mul by a constant follows its low input; the constant is converted.
  CHECK(InName(t, NodeNamed(t, "mul"), 1) == "k.fp16");
  const Node& argmax = NodeNamed(t, "argmax");
  CHECK(InDType(t, argmax, 0) == DType::kFloat16);
  CHECK(OutDType(t, argmax) == DType::kInt64);
  CHECK(t.value(argmax.outputs[0]).name == "am");
  const Node& gather = NodeNamed(t, "gather");
  CHECK(InDType(t, gather, 0) == DType::kInt64);
  CHECK(InName(t, gather, 1) == "idx");
  CHECK(t.value(t.outputs[1]).dtype == DType::kInt64);
  CHECK(t.value(t.outputs[0]).dtype == DType::kFloat32);
}

TEST_CASE("precision: a constant read by a low and a float32 node is stored in both types") {
  auto m = MakeModel(17);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"2"});
  AddFloatInit(g, "c", {2}, {0.1f, 3.0f});
  AddNode(g, "MatMul", {"x", "c"}, {"a"}, "dot");
  AddNode(g, "Pow", {"x", "c"}, {"b"}, "pow");
  AddOutput(g, "a");
  AddOutput(g, "b");
  const Trace t = Lower(m, Fp16()).trace;
  CHECK(InName(t, NodeNamed(t, "dot"), 1) == "c.fp16");
  CHECK(InName(t, NodeNamed(t, "pow"), 1) == "c");
  CHECK(InDType(t, NodeNamed(t, "pow"), 1) == DType::kFloat32);
}

TEST_CASE("precision: --io-precision makes float32 inputs and outputs fp16 under their own names") {
  PrecisionOptions o = Fp16();
  o.io_dtype = DType::kFloat16;
  const Trace t = Lower(GemmChain(), o).trace;
  REQUIRE(t.inputs.size() == 1);
  CHECK(t.value(t.inputs[0]).name == "x");
  CHECK(t.value(t.inputs[0]).dtype == DType::kFloat16);
  CHECK(InName(t, NodeNamed(t, "matmul"), 0) == "x");  // no Cast at the input
  REQUIRE(t.outputs.size() == 1);
  CHECK(t.value(t.outputs[0]).name == "y");
  CHECK(t.value(t.outputs[0]).dtype == DType::kFloat16);
  // Exp runs in float32, so the output is Cast down to the io type at the end.
  CHECK(Ops(t) == std::vector<std::string>{"MatMul", "Relu", "Softmax", "Cast", "Exp", "Cast"});
}

TEST_CASE("precision: an fp16 artifact on the CPU backend computes the fp16-rounded result") {
  // y = (x @ W) * k with x = [1/3, 1/7], W = [[3], [7]], k = 1/3: the inputs and constants are
  // rounded to fp16, the product accumulates in float32 and is rounded to fp16 once.
  auto m = MakeModel(17);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"1", "2"});
  AddFloatInit(g, "W", {2, 1}, {3.0f, 7.0f});
  AddFloatInit(g, "k", {1}, {1.0f / 3.0f});
  AddNode(g, "MatMul", {"x", "W"}, {"p"}, "matmul");
  AddNode(g, "Mul", {"p", "k"}, {"y"}, "scale");
  AddOutput(g, "y");
  auto h = [](float f) { return kiln::HalfToFloat(kiln::FloatToHalf(f)); };
  const float x[2] = {1.0f / 3.0f, 1.0f / 7.0f};
  const float p = h(h(x[0]) * 3.0f + h(x[1]) * 7.0f);
  const float want = h(p * h(1.0f / 3.0f));
  for (bool fuse : {true, false}) {
    CAPTURE(fuse);
    auto options = CpuOnly();
    options.fuse = fuse;
    options.precision.precision = Precision::kFp16;
    const int64_t dims[2] = {1, 2};
    const kiln::TensorView in = kiln::TensorView::Host(const_cast<float*>(x), DType::kFloat32, dims, 2);
    auto out = RunFloat(CompileModel(m, options), {&in, 1});
    REQUIRE(out.size() == 1);
    REQUIRE(out[0].size() == 1);
    CHECK(out[0][0] == want);
    CHECK(out[0][0] != static_cast<float>((x[0] * 3.0f + x[1] * 7.0f) / 3.0f));
  }
}

TEST_CASE("precision: the artifact records its precision, load rejects an unknown one") {
  auto options = CpuOnly();
  options.precision.precision = Precision::kBf16;
  std::vector<uint8_t> bytes = CompileModel(GemmChain(), options);
  auto model = kiln::Model::Load(bytes);
  REQUIRE(model.ok());
  CHECK(model->precision() == "bf16");
  auto fp32 = kiln::Model::Load(CompileModel(GemmChain()));
  REQUIRE(fp32.ok());
  CHECK(fp32->precision() == "fp32");
  // Every "bf16" in the FlatBuffer (the field and value names) becomes "bx16".
  int patched = 0;
  for (size_t i = 0; i + 4 <= bytes.size(); ++i)
    if (std::memcmp(&bytes[i], "bf16", 4) == 0) bytes[i + 1] = 'x', ++patched;
  REQUIRE(patched > 0);
  ArtifactHeader h = ReadHeader(bytes);
  h.flatbuffer_checksum = kiln::ArtifactChecksum(h.format_version, bytes.data() + h.flatbuffer_offset, h.flatbuffer_size);
  WriteHeader(bytes, h);
  auto bad = kiln::Model::Load(bytes);
  REQUIRE(!bad.ok());
  CHECK(bad.status().code() == kiln::StatusCode::kDataLoss);
  CHECK(bad.status().message().find("artifact precision 'bx16': expected fp32, fp16 or bf16") != std::string::npos);
}

TEST_CASE("precision: the artifact's stages show the precision trace, and the executors trace shows every Cast") {
  for (bool fuse : {true, false}) {
    CAPTURE(fuse);
    auto options = CpuOnly();
    options.fuse = fuse;
    options.precision.precision = Precision::kFp16;
    auto model = kiln::Model::Load(CompileModel(GemmChain(), options));
    REQUIRE(model.ok());
    const kiln::EntryInfo& e = model->entries().at(0);
    const auto& names = e.compile.stage_names;
    const auto at = [&](const std::string& stage) {
      const size_t i = std::find(names.begin(), names.end(), stage) - names.begin();
      REQUIRE(i < e.stage_traces.size());
      return e.stage_traces[i];
    };
    CHECK(names.at(2) == "precision");
    CHECK(at("precision").find("# stage: precision") != std::string::npos);
    const std::string executors = at("executors");
    // Fused: the Casts are members of the generated kernels; unfused: instructions.
    const std::string to16 = fuse ? "Cast 'x.to_fp16'" : "x.to_fp16 = Cast(x, to=10)";
    const std::string to32 = fuse ? "Cast 's.to_fp32'" : "s = Cast(s.fp16, to=1)";
    CHECK(executors.find(to16) != std::string::npos);
    CHECK(executors.find(to32) != std::string::npos);
    // The float32 weight every reader now reads converted is gone from the trace.
    CHECK(executors.find("# const W:") == std::string::npos);
    CHECK(executors.find("# const W.fp16: float16[3, 2]") != std::string::npos);
  }
}

TEST_CASE("precision: docs/precision.md's policy table is the one the stage uses") {
  std::ifstream readme(std::string(KILN_SOURCE_DIR) + "/docs/precision.md");
  REQUIRE(readme.good());
  std::map<std::string, std::set<std::string>> documented;
  for (std::string line; std::getline(readme, line);) {
    for (const std::string cls : {"low", "follow"}) {
      const std::string prefix = "  | " + cls + " | ";
      if (line.rfind(prefix, 0) != 0) continue;
      const std::string ops = line.substr(line.rfind(" | ", line.size() - 3) + 3);
      std::stringstream list(ops.substr(0, ops.size() - 2));  // without the closing " |"
      for (std::string op; std::getline(list, op, ',');) documented[cls].insert(op.substr(op.find_first_not_of(' ')));
    }
  }
  std::map<std::string, std::set<std::string>> table;
  for (const kiln::OpInfo& info : kiln::AllOpInfo()) {
    const kiln::PrecisionClass cls = info.precision.cls;
    table[cls == kiln::PrecisionClass::kLow ? "low" : cls == kiln::PrecisionClass::kFollow ? "follow" : "float32"].insert(
        std::string(info.op));
  }
  table.erase("float32");  // the page names the float32 ops by kind, in prose
  CHECK(table.at("low").count("Softmax") == 1);
  CHECK(table.at("follow").count("Add") == 1);
  CHECK(documented == table);
}
