// The epilogue pass: which chains fold into MatMul, Gemm and Conv and which do not, the
// annotated form it writes, and (end to end through the runtime) that the folded trace
// computes what the unfolded one does.
#include "compiler/passes/epilogue.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "compiler/passes/executors.h"
#include "compiler/passes/memory_plan.h"
#include "compiler/serialize/artifact_writer.h"
#include "kiln/runtime.h"
#include "tests/compiler/onnx_model_builder.h"
#include "tests/random_floats.h"

using namespace kiln::testing;  // NOLINT: the model-building helpers
using kiln::ir::Node;
using kiln::passes::FoldEpilogues;

namespace {

struct Folded {
  Trace canonical;
  Trace trace;
  std::vector<std::string> log;
};

Folded Fold(const onnx::ModelProto& m) {
  auto c = Canonical(m);
  REQUIRE_MESSAGE(c.ok(), c.status().ToString());
  Folded f;
  f.canonical = c->trace;
  auto t = FoldEpilogues(f.canonical, &f.log);
  REQUIRE_MESSAGE(t.ok(), t.status().ToString());
  f.trace = std::move(*t);
  return f;
}

// Names of a node's inputs ("" for an absent one).
std::vector<std::string> Inputs(const Trace& t, const Node& n) {
  std::vector<std::string> names;
  for (auto id : n.inputs) names.push_back(id == kiln::ir::kNoValue ? "" : t.value(id).name);
  return names;
}

std::vector<double> ConstValues(const Trace& t, kiln::ir::ValueId id) {
  REQUIRE(t.value(id).is_const());
  std::vector<double> v;
  for (int64_t i = 0; i < t.value(id).data->num_elements(); ++i) v.push_back(t.value(id).data->FloatAt(i));
  return v;
}

// Runs `trace` through the remaining stages and the runtime on float32 inputs (static
// shapes); returns each output's elements.
std::vector<std::vector<float>> Execute(const Trace& trace, const std::vector<std::vector<float>>& inputs) {
  auto executors = kiln::passes::AssignExecutors(trace);
  REQUIRE_MESSAGE(executors.ok(), executors.status().ToString());
  auto plan = kiln::passes::PlanMemory(*executors);
  REQUIRE_MESSAGE(plan.ok(), plan.status().ToString());
  kiln::serialize::ArtifactRecord record;
  record.source = "epilogue_test.onnx";
  kiln::serialize::EntryRecord entry;
  entry.name = "default";
  entry.stages = {{"epilogue", trace.Print(), 0}};
  entry.plan = std::move(*plan);
  record.entries.push_back(std::move(entry));
  auto bytes = kiln::serialize::WriteArtifact(record);
  REQUIRE_MESSAGE(bytes.ok(), bytes.status().ToString());
  auto model = kiln::Model::Load(std::span<const uint8_t>(bytes->data(), bytes->size()));
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  auto ctx = kiln::ExecutionContext::Create(*model, {});
  REQUIRE(ctx.ok());
  std::vector<std::vector<int64_t>> dims(inputs.size());
  std::vector<kiln::TensorView> in;
  for (size_t i = 0; i < inputs.size(); ++i) {
    for (const auto& d : trace.value(trace.inputs[i]).shape) dims[i].push_back(*d.value());
    in.push_back(kiln::TensorView::Host(inputs[i].data(), kiln::DType::kFloat32, dims[i].data(),
                                        static_cast<int32_t>(dims[i].size())));
  }
  std::vector<kiln::TensorView> out;
  kiln::Status st = ctx->Run(in, out);
  REQUIRE_MESSAGE(st.ok(), st.ToString());
  std::vector<std::vector<float>> result;
  for (const auto& o : out) {
    int64_t n = 1;
    for (int i = 0; i < o.rank; ++i) n *= o.dims[i];
    const float* p = static_cast<const float*>(o.data);
    result.emplace_back(p, p + n);
  }
  return result;
}

// The folded and the canonical trace give the same outputs on random inputs (to an ulp or
// so: a folded bias is summed in another order).
void CheckSameResults(const Folded& f) {
  std::vector<std::vector<float>> inputs;
  uint32_t seed = 7;
  for (auto id : f.canonical.inputs) {
    int64_t n = 1;
    for (const auto& d : f.canonical.value(id).shape) n *= *d.value();
    inputs.push_back(RandomFloats(static_cast<size_t>(n), seed++));
  }
  const auto expected = Execute(f.canonical, inputs);
  const auto actual = Execute(f.trace, inputs);
  REQUIRE(actual.size() == expected.size());
  for (size_t o = 0; o < actual.size(); ++o) {
    REQUIRE(actual[o].size() == expected[o].size());
    for (size_t i = 0; i < actual[o].size(); ++i) {
      INFO("output " << o << " index " << i);
      CHECK(std::fabs(actual[o][i] - expected[o][i]) <= 1e-5f * (1 + std::fabs(expected[o][i])));
    }
  }
}

// x[2,3] -> MatMul(W[3,4]) -> Add(bias[4]) -> Relu -> Add(r[2,4]) -> y
onnx::ModelProto MatMulChain() {
  auto m = MakeModel(17);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"2", "3"});
  AddInput(g, "r", {"2", "4"});
  AddFloatInit(g, "W", {3, 4}, RandomFloats(12, 1));
  AddFloatInit(g, "bias", {4}, {0.5f, -1, 2, 0});
  AddNode(g, "MatMul", {"x", "W"}, {"m"}, "mm");
  AddNode(g, "Add", {"m", "bias"}, {"mb"}, "add_bias");
  AddNode(g, "Relu", {"mb"}, {"a"}, "relu1");
  AddNode(g, "Add", {"a", "r"}, {"y"}, "add_res");
  AddOutput(g, "y");
  return m;
}

TEST_CASE("epilogue: MatMul + bias + Relu + residual folds into one annotated MatMul") {
  Folded f = Fold(MatMulChain());
  REQUIRE(Ops(f.trace) == std::vector<std::string>{"MatMul"});
  const Node& n = f.trace.body.nodes[0];
  CHECK(n.name == "mm");
  CHECK(Inputs(f.trace, n) == std::vector<std::string>{"x", "W", "bias", "r"});
  CHECK(n.attrs.GetString("epilogue_activation", "") == "Relu");
  CHECK(n.attrs.GetInt("epilogue_residual", 0) == 1);
  CHECK(n.attrs.GetString("epilogue_order", "") == "bias,act,residual");
  CHECK(f.trace.value(n.outputs[0]).name == "y");
  CHECK(f.trace.stage == "epilogue");
  CHECK(f.log ==
        std::vector<std::string>{"mm (MatMul): folded bias 'bias', Relu 'relu1', residual 'r' "
                                 "into the epilogue"});
  CheckSameResults(f);
  // Running the pass again changes nothing.
  std::vector<std::string> log;
  auto again = FoldEpilogues(f.trace, &log);
  REQUIRE(again.ok());
  again->provenance = f.trace.provenance;  // which counts the nodes folded by each run
  CHECK(again->Print() == f.trace.Print());
  CHECK(log.empty());
}

TEST_CASE("epilogue: ResNet's Conv -> Add(bias) -> Add(shortcut) -> Relu keeps its order") {
  auto m = MakeModel(17);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"1", "2", "5", "5"});
  AddInput(g, "r", {"1", "3", "5", "5"});
  AddFloatInit(g, "W", {3, 2, 3, 3}, RandomFloats(54, 2));
  AddFloatInit(g, "b", {1, 3, 1, 1}, {0.25f, -0.5f, 1});
  AttrInts(AddNode(g, "Conv", {"x", "W"}, {"c"}, "conv1"), "pads", {1, 1, 1, 1});
  AddNode(g, "Add", {"c", "b"}, {"cb"}, "bias_add");
  AddNode(g, "Add", {"r", "cb"}, {"s"}, "res_add");  // the shortcut as the first operand
  AddNode(g, "Relu", {"s"}, {"y"}, "relu");
  AddOutput(g, "y");
  Folded f = Fold(m);
  REQUIRE(Ops(f.trace) == std::vector<std::string>{"Conv"});
  const Node& n = f.trace.body.nodes[0];
  REQUIRE(n.inputs.size() == 4);
  CHECK(Inputs(f.trace, n)[3] == "r");
  CHECK(f.trace.value(n.inputs[2]).data->dims == std::vector<int64_t>{3});  // [1,3,1,1] as B: [3]
  CHECK(ConstValues(f.trace, n.inputs[2]) == std::vector<double>{0.25, -0.5, 1});
  CHECK(n.attrs.GetString("epilogue_activation", "") == "Relu");
  CHECK(n.attrs.GetString("epilogue_order", "") == "bias,residual,act");
  CHECK(f.log ==
        std::vector<std::string>{"conv1 (Conv): folded bias 'b', residual 'r', Relu 'relu' "
                                 "into the epilogue"});
  CheckSameResults(f);
}

TEST_CASE("epilogue: a two-input Sum is a residual add") {
  auto m = MakeModel(17);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"1", "2", "5", "5"});
  AddInput(g, "r", {"1", "3", "5", "5"});
  AddFloatInit(g, "W", {3, 2, 3, 3}, RandomFloats(54, 3));
  AttrInts(AddNode(g, "Conv", {"x", "W"}, {"c"}, "conv1"), "pads", {1, 1, 1, 1});
  AddNode(g, "Sum", {"c", "r"}, {"s"}, "res_sum");
  AddNode(g, "Relu", {"s"}, {"y"}, "relu");
  AddOutput(g, "y");
  Folded f = Fold(m);
  REQUIRE(Ops(f.trace) == std::vector<std::string>{"Conv"});
  const Node& n = f.trace.body.nodes[0];
  CHECK(Inputs(f.trace, n)[3] == "r");
  CHECK(n.attrs.GetString("epilogue_order", "") == "bias,residual,act");
  CheckSameResults(f);
}

TEST_CASE("epilogue: a Conv's own bias and an added constant are summed, Sigmoid+Mul is SiLU") {
  auto m = MakeModel(17);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"2", "2", "4", "4"});
  AddFloatInit(g, "W", {3, 2, 1, 1}, RandomFloats(6, 3));
  AddFloatInit(g, "B", {3}, {1, 2, 3});
  AddFloatInit(g, "k", {3, 1, 1}, {0.5f, 0.25f, -4});
  AddNode(g, "Conv", {"x", "W", "B"}, {"c"}, "conv");
  AddNode(g, "Add", {"k", "c"}, {"cb"}, "add");
  AddNode(g, "Sigmoid", {"cb"}, {"s"}, "sig");
  AddNode(g, "Mul", {"s", "cb"}, {"y"}, "mul");
  AddOutput(g, "y");
  Folded f = Fold(m);
  REQUIRE(Ops(f.trace) == std::vector<std::string>{"Conv"});
  const Node& n = f.trace.body.nodes[0];
  CHECK(n.inputs.size() == 3);
  CHECK(ConstValues(f.trace, n.inputs[2]) == std::vector<double>{1.5, 2.25, -1});
  CHECK(n.attrs.GetString("epilogue_activation", "") == "SiLU");
  CHECK(!n.attrs.Has("epilogue_residual"));
  CHECK(f.log ==
        std::vector<std::string>{"conv (Conv): folded bias 'k', SiLU (Sigmoid 'sig', Mul 'mul') "
                                 "into the epilogue"});
  CheckSameResults(f);
}

// x[1,2,5,5] -> Conv(W, B) -> c; y = Div(Mul(c, Clip(Add(c, three), lo, hi)), six): HardSwish
// written out as PaddlePaddle exports it, with the constants given (3, 0, 6, 6 for HardSwish).
// `also_out` makes c a model output too (a second reader).
onnx::ModelProto WrittenOutHardSwish(float three, float lo, float hi, float six, bool also_out = false) {
  auto m = MakeModel(17);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"1", "2", "5", "5"});
  AddFloatInit(g, "W", {3, 2, 3, 3}, RandomFloats(54, 21));
  AddFloatInit(g, "B", {3}, {0.5f, -1, 3});
  AddFloatInit(g, "three", {}, {three});
  AddFloatInit(g, "lo", {}, {lo});
  AddFloatInit(g, "hi", {}, {hi});
  AddFloatInit(g, "six", {1}, {six});
  AttrInts(AddNode(g, "Conv", {"x", "W", "B"}, {"c"}, "conv"), "pads", {1, 1, 1, 1});
  AddNode(g, "Add", {"three", "c"}, {"a"}, "add3");
  AddNode(g, "Clip", {"a", "lo", "hi"}, {"k"}, "clip");
  AddNode(g, "Mul", {"c", "k"}, {"p"}, "mul");
  AddNode(g, "Div", {"p", "six"}, {"y"}, "div6");
  AddOutput(g, "y");
  if (also_out) AddOutput(g, "c");
  return m;
}

TEST_CASE("epilogue: x * Clip(x + 3, 0, 6) / 6 after a Conv is a HardSwish epilogue") {
  Folded f = Fold(WrittenOutHardSwish(3, 0, 6, 6));
  REQUIRE(Ops(f.trace) == std::vector<std::string>{"Conv"});
  const Node& n = f.trace.body.nodes[0];
  CHECK(Inputs(f.trace, n) == std::vector<std::string>{"x", "W", "B"});
  CHECK(n.attrs.GetString("epilogue_activation", "") == "HardSwish");
  CHECK(f.trace.value(n.outputs[0]).name == "y");
  CHECK(f.log == std::vector<std::string>{"conv (Conv): folded HardSwish (Add 'add3', Clip 'clip', Mul "
                                          "'mul', Div 'div6') into the epilogue"});
  // The inputs reach beyond -3 and 3, so both clamps and the curve between are compared.
  const std::vector<float> y = Execute(f.canonical, {RandomFloats(50, 7)})[0];
  CHECK(std::count(y.begin(), y.end(), 0.0f) > 0);       // Clip(x + 3, 0, 6) at 0: y = x * 0
  CHECK(*std::max_element(y.begin(), y.end()) > 3.0f);  // at 6: y = x
  CheckSameResults(f);
}

// The forms of Gelu written out with Erf: torch.nn.GELU's TorchScript export
// Mul(h, Add(Erf(Div(h, sqrt2)), 1)) * 0.5; transformers' Mul(h * 0.5, 1 + Erf(h * (1/sqrt2)))
// with the operands swapped about; torch.onnx.export(dynamo=True)'s
// Mul(h, Mul(0.5, Add(Erf(Div(h, sqrt2)), 1))).
enum class GeluForm { kTorchScript, kTransformers, kDynamo };

// x[4,6] -> MatMul(W) -> Add(b) -> h; then Gelu with Erf written out in `form`.
onnx::ModelProto WrittenOutGelu(GeluForm form, float sqrt2 = 1.41421356f) {
  auto m = MakeModel(13);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"4", "6"});
  AddFloatInit(g, "W", {6, 5}, RandomFloats(30, 3));
  AddFloatInit(g, "b", {5}, {0.5f, -1, 3, 0, 2});
  AddFloatInit(g, "one", {}, {1.0f});
  AddFloatInit(g, "half", {}, {0.5f});
  AddNode(g, "MatMul", {"x", "W"}, {"mm"}, "mm");
  AddNode(g, "Add", {"mm", "b"}, {"h"}, "bias");
  if (form == GeluForm::kTorchScript) {
    AddFloatInit(g, "sqrt2", {}, {sqrt2});
    AddNode(g, "Div", {"h", "sqrt2"}, {"d"}, "div");
    AddNode(g, "Erf", {"d"}, {"e"}, "erf");
    AddNode(g, "Add", {"e", "one"}, {"a"}, "add1");
    AddNode(g, "Mul", {"h", "a"}, {"p"}, "mul");
    AddNode(g, "Mul", {"p", "half"}, {"y"}, "mul_half");
  } else if (form == GeluForm::kDynamo) {
    AddFloatInit(g, "sqrt2", {}, {sqrt2});
    AddNode(g, "Div", {"h", "sqrt2"}, {"d"}, "div");
    AddNode(g, "Erf", {"d"}, {"e"}, "erf");
    AddNode(g, "Add", {"e", "one"}, {"a"}, "add1");
    AddNode(g, "Mul", {"half", "a"}, {"p"}, "mul_half");
    AddNode(g, "Mul", {"h", "p"}, {"y"}, "mul");
  } else {
    AddFloatInit(g, "rsqrt2", {}, {1.0f / sqrt2});
    AddNode(g, "Mul", {"half", "h"}, {"hh"}, "mul_half");
    AddNode(g, "Mul", {"rsqrt2", "h"}, {"d"}, "scale");
    AddNode(g, "Erf", {"d"}, {"e"}, "erf");
    AddNode(g, "Add", {"one", "e"}, {"a"}, "add1");
    AddNode(g, "Mul", {"a", "hh"}, {"y"}, "mul");
  }
  AddOutput(g, "y");
  return m;
}

TEST_CASE("epilogue: Gelu written out with Erf, in PyTorch's, transformers' and dynamo's forms, folds after MatMul + bias") {
  for (GeluForm form : {GeluForm::kTorchScript, GeluForm::kTransformers, GeluForm::kDynamo}) {
    CAPTURE(static_cast<int>(form));
    Folded f = Fold(WrittenOutGelu(form));
    REQUIRE(Ops(f.trace) == std::vector<std::string>{"MatMul"});
    const Node& n = f.trace.body.nodes[0];
    CHECK(n.attrs.GetString("epilogue_activation", "") == "Gelu");
    CHECK(f.trace.value(n.outputs[0]).name == "y");
    REQUIRE(f.log.size() == 1);
    CHECK(f.log[0] == "mm (MatMul): folded bias 'b', Gelu (Erf 'erf' and 4 more ops) into the epilogue");
    CheckSameResults(f);
  }
  // Another constant than sqrt(2) is no Gelu: nothing past the bias folds.
  for (GeluForm form : {GeluForm::kTorchScript, GeluForm::kDynamo}) {
    Folded other = Fold(WrittenOutGelu(form, 1.5f));
    CHECK(Ops(other.trace) == std::vector<std::string>{"MatMul", "Div", "Erf", "Add", "Mul", "Mul"});
  }
}

TEST_CASE("epilogue: for the GPU libraries only the activations cuDNN and cuBLASLt apply fold") {
  using kiln::passes::EpilogueActivations;
  auto fold_gpu = [](const onnx::ModelProto& m) {
    auto c = Canonical(m);
    REQUIRE_MESSAGE(c.ok(), c.status().ToString());
    auto t = FoldEpilogues(c->trace, nullptr, EpilogueActivations::kGpuLibraries);
    REQUIRE_MESSAGE(t.ok(), t.status().ToString());
    return std::move(*t);
  };
  // Conv + written-out HardSwish: cuDNN's fused convolution takes Relu only, so the four ops
  // stay (for fusion) and the Conv keeps no activation.
  Trace hs = fold_gpu(WrittenOutHardSwish(3, 0, 6, 6));
  CHECK(Ops(hs) == std::vector<std::string>{"Conv", "Add", "Clip", "Mul", "Div"});
  CHECK(!hs.body.nodes[0].attrs.Has("epilogue_activation"));
  // Conv + bias + SiLU: the bias folds, Sigmoid and Mul stay.
  auto m = MakeModel(17);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"2", "2", "4", "4"});
  AddFloatInit(g, "W", {3, 2, 1, 1}, RandomFloats(6, 3));
  AddFloatInit(g, "k", {3, 1, 1}, {0.5f, 0.25f, -4});
  AddNode(g, "Conv", {"x", "W"}, {"c"}, "conv");
  AddNode(g, "Add", {"k", "c"}, {"cb"}, "add");
  AddNode(g, "Sigmoid", {"cb"}, {"s"}, "sig");
  AddNode(g, "Mul", {"s", "cb"}, {"y"}, "mul");
  AddOutput(g, "y");
  Trace silu = fold_gpu(m);
  CHECK(Ops(silu) == std::vector<std::string>{"Conv", "Sigmoid", "Mul"});
  CHECK(!silu.body.nodes[0].attrs.Has("epilogue_activation"));
  CHECK(silu.body.nodes[0].inputs.size() == 3);  // the bias
  // MatMul + bias + Relu + residual: the bias folds; Relu does not (cuBLASLt's ReLU epilogue
  // has no NaN rule, and Relu(NaN) is NaN: docs/semantics.md), so it and the residual Add stay
  // for fusion; with kAny all three fold (the first test case).
  Trace mm = fold_gpu(MatMulChain());
  CHECK(Ops(mm) == std::vector<std::string>{"MatMul", "Relu", "Add"});
  CHECK(!mm.body.nodes[0].attrs.Has("epilogue_activation"));
  CHECK(!mm.body.nodes[0].attrs.Has("epilogue_residual"));
  CHECK(mm.body.nodes[0].inputs.size() == 3);  // the bias
  // Conv + Relu folds for cuDNN as for the CPU.
  auto r = MakeModel(17);
  g = r.mutable_graph();
  AddInput(g, "x", {"1", "2", "4", "4"});
  AddFloatInit(g, "W", {3, 2, 1, 1}, RandomFloats(6, 4));
  AddNode(g, "Conv", {"x", "W"}, {"c"}, "conv");
  AddNode(g, "Relu", {"c"}, {"y"}, "relu");
  AddOutput(g, "y");
  Trace relu = fold_gpu(r);
  CHECK(Ops(relu) == std::vector<std::string>{"Conv"});
  CHECK(relu.body.nodes[0].attrs.GetString("epilogue_activation", "") == "Relu");
}

TEST_CASE("epilogue: Gemm without C takes a [1,N] bias as C with beta 1 - Gelu tanh") {
  auto m = MakeModel(20);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"2", "3"});
  AddFloatInit(g, "W", {4, 3}, RandomFloats(12, 4));
  AddFloatInit(g, "bias", {1, 4}, {1, -1, 0.5f, 0});
  auto* gemm = AddNode(g, "Gemm", {"x", "W"}, {"t"}, "fc");
  AttrInt(gemm, "transB", 1);
  AttrFloat(gemm, "alpha", 0.5f);
  AttrFloat(gemm, "beta", 3.0f);  // no C: beta does not matter, and becomes 1
  AddNode(g, "Add", {"t", "bias"}, {"tb"}, "add");
  auto* gelu = AddNode(g, "Gelu", {"tb"}, {"y"}, "gelu");
  auto* a = gelu->add_attribute();
  a->set_name("approximate");
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s("tanh");
  AddOutput(g, "y");
  Folded f = Fold(m);
  REQUIRE(Ops(f.trace) == std::vector<std::string>{"Gemm"});
  const Node& n = f.trace.body.nodes[0];
  REQUIRE(n.inputs.size() == 3);
  CHECK(f.trace.value(n.inputs[2]).data->dims == std::vector<int64_t>{4});
  CHECK(ConstValues(f.trace, n.inputs[2]) == std::vector<double>{1, -1, 0.5, 0});
  CHECK(n.attrs.GetFloat("beta", 0) == 1.0f);
  CHECK(n.attrs.GetFloat("alpha", 0) == 0.5f);
  CHECK(n.attrs.GetString("epilogue_activation", "") == "GeluTanh");
  CheckSameResults(f);
}

TEST_CASE("epilogue: a constant Gemm C is merged with the bias as beta * C + bias, HardSwish") {
  auto m = MakeModel(17);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"3", "2"});
  AddFloatInit(g, "W", {2, 4}, RandomFloats(8, 5));
  AddFloatInit(g, "C", {3, 1}, {1, 2, 3});
  AddFloatInit(g, "bias", {4}, {0, 10, 20, 30});
  AttrFloat(AddNode(g, "Gemm", {"x", "W", "C"}, {"t"}, "fc"), "beta", 2.0f);
  AddNode(g, "Add", {"t", "bias"}, {"tb"}, "add");
  AddNode(g, "HardSwish", {"tb"}, {"y"}, "hs");
  AddOutput(g, "y");
  Folded f = Fold(m);
  REQUIRE(Ops(f.trace) == std::vector<std::string>{"Gemm"});
  const Node& n = f.trace.body.nodes[0];
  CHECK(f.trace.value(n.inputs[2]).data->dims == std::vector<int64_t>{3, 4});
  CHECK(ConstValues(f.trace, n.inputs[2]) ==
        std::vector<double>{2, 12, 22, 32, 4, 14, 24, 34, 6, 16, 26, 36});
  CHECK(n.attrs.GetFloat("beta", 0) == 1.0f);
  CHECK(n.attrs.GetString("epilogue_activation", "") == "HardSwish");
  CheckSameResults(f);
}

TEST_CASE("epilogue: the Add of two Convs folds into the first only, which moves after the second") {
  auto m = MakeModel(17);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"1", "2", "3", "3"});
  AddFloatInit(g, "W1", {2, 2, 1, 1}, RandomFloats(4, 6));
  AddFloatInit(g, "W2", {2, 2, 1, 1}, RandomFloats(4, 7));
  AddNode(g, "Conv", {"x", "W1"}, {"c1"}, "conv1");
  AddNode(g, "Conv", {"x", "W2"}, {"c2"}, "conv2");
  AddNode(g, "Add", {"c1", "c2"}, {"s"}, "sum");
  AddNode(g, "Sigmoid", {"s"}, {"y"}, "sig");
  AddOutput(g, "y");
  Folded f = Fold(m);
  REQUIRE(Ops(f.trace) == std::vector<std::string>{"Conv", "Conv"});
  CHECK(f.trace.body.nodes[0].name == "conv2");
  CHECK(f.trace.body.nodes[0].attrs.items().empty());
  const Node& n = f.trace.body.nodes[1];
  CHECK(n.name == "conv1");
  CHECK(Inputs(f.trace, n) == std::vector<std::string>{"x", "W1", "", "c2"});
  CHECK(n.attrs.GetString("epilogue_order", "") == "bias,residual,act");
  CHECK(f.log.size() == 1);
  CheckSameResults(f);
}

TEST_CASE("epilogue: a model output inside the chain stops it there") {
  auto m = MakeModel(17);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"2", "3"});
  AddInput(g, "r", {"2", "4"});
  AddFloatInit(g, "W", {3, 4}, RandomFloats(12, 8));
  AddNode(g, "MatMul", {"x", "W"}, {"m"}, "mm");
  AddNode(g, "Relu", {"m"}, {"a"}, "relu");
  AddNode(g, "Add", {"a", "r"}, {"y"}, "add");
  AddOutput(g, "a");
  AddOutput(g, "y");
  Folded f = Fold(m);
  REQUIRE(Ops(f.trace) == std::vector<std::string>{"MatMul", "Add"});
  CHECK(f.trace.value(f.trace.body.nodes[0].outputs[0]).name == "a");
  CHECK(f.trace.body.nodes[0].inputs.size() == 2);
  CHECK(f.log == std::vector<std::string>{"mm (MatMul): folded Relu 'relu' into the epilogue"});
  CheckSameResults(f);

  // The product itself a model output: nothing folds.
  auto m2 = MakeModel(17);
  g = m2.mutable_graph();
  AddInput(g, "x", {"2", "3"});
  AddFloatInit(g, "W", {3, 4}, RandomFloats(12, 9));
  AddNode(g, "MatMul", {"x", "W"}, {"m"}, "mm");
  AddNode(g, "Relu", {"m"}, {"a"}, "relu");
  AddOutput(g, "m");
  AddOutput(g, "a");
  Folded f2 = Fold(m2);
  CHECK(Ops(f2.trace) == std::vector<std::string>{"MatMul", "Relu"});
  CHECK(f2.log.empty());
}

TEST_CASE("epilogue: what does not fold") {
  SUBCASE("a bias that is not a constant") {
    auto m = MakeModel(17);
    auto* g = m.mutable_graph();
    AddInput(g, "x", {"2", "3"});
    AddInput(g, "b", {"4"});
    AddFloatInit(g, "W", {3, 4}, RandomFloats(12, 10));
    AddNode(g, "MatMul", {"x", "W"}, {"m"}, "mm");
    AddNode(g, "Add", {"m", "b"}, {"y"}, "add");
    AddOutput(g, "y");
    Folded f = Fold(m);
    CHECK(Ops(f.trace) == std::vector<std::string>{"MatMul", "Add"});
    CHECK(f.log.empty());
  }
  SUBCASE("a product with two readers") {
    auto m = MakeModel(17);
    auto* g = m.mutable_graph();
    AddInput(g, "x", {"2", "3"});
    AddFloatInit(g, "W", {3, 4}, RandomFloats(12, 11));
    AddNode(g, "MatMul", {"x", "W"}, {"m"}, "mm");
    AddNode(g, "Relu", {"m"}, {"a"}, "relu");
    AddNode(g, "Sigmoid", {"m"}, {"s"}, "sig");
    AddOutput(g, "a");
    AddOutput(g, "s");
    Folded f = Fold(m);
    CHECK(Ops(f.trace) == std::vector<std::string>{"MatMul", "Relu", "Sigmoid"});
  }
  SUBCASE("a residual that broadcasts") {
    auto m = MakeModel(17);
    auto* g = m.mutable_graph();
    AddInput(g, "x", {"2", "3"});
    AddInput(g, "r", {"1", "4"});
    AddFloatInit(g, "W", {3, 4}, RandomFloats(12, 12));
    AddNode(g, "MatMul", {"x", "W"}, {"m"}, "mm");
    AddNode(g, "Add", {"m", "r"}, {"y"}, "add");
    AddOutput(g, "y");
    Folded f = Fold(m);
    CHECK(Ops(f.trace) == std::vector<std::string>{"MatMul", "Add"});
  }
  SUBCASE("an integer MatMul") {
    auto m = MakeModel(17);
    auto* g = m.mutable_graph();
    AddInput(g, "x", {"2", "3"}, onnx::TensorProto::INT64);
    AddInt64Init(g, "W", {3, 4}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
    AddInt64Init(g, "b", {4}, {1, -1, 1, -1});
    AddNode(g, "MatMul", {"x", "W"}, {"m"}, "mm");
    AddNode(g, "Add", {"m", "b"}, {"mb"}, "add");
    AddNode(g, "Relu", {"mb"}, {"y"}, "relu");
    AddOutput(g, "y");
    Folded f = Fold(m);
    CHECK(Ops(f.trace) == std::vector<std::string>{"MatMul", "Add", "Relu"});
  }
  SUBCASE("a Conv bias of shape [C] runs along the last axis, not the channels") {
    auto m = MakeModel(17);
    auto* g = m.mutable_graph();
    AddInput(g, "x", {"1", "2", "2", "2"});
    AddFloatInit(g, "W", {2, 2, 1, 1}, RandomFloats(4, 13));
    AddFloatInit(g, "k", {2}, {1, 2});
    AddNode(g, "Conv", {"x", "W"}, {"c"}, "conv");
    AddNode(g, "Add", {"c", "k"}, {"y"}, "add");
    AddOutput(g, "y");
    Folded f = Fold(m);
    CHECK(Ops(f.trace) == std::vector<std::string>{"Conv", "Add"});
  }
  SUBCASE("a written-out HardSwish with other constants, or whose pre-activation is read elsewhere") {
    for (const std::array<float, 4>& c : std::vector<std::array<float, 4>>{
             {2, 0, 6, 6}, {3, -1, 6, 6}, {3, 0, 5, 6}, {3, 0, 6, 5}}) {
      const float three = c[0], lo = c[1], hi = c[2], six = c[3];
      INFO("constants " << three << " " << lo << " " << hi << " " << six);
      Folded f = Fold(WrittenOutHardSwish(three, lo, hi, six));
      CHECK(Ops(f.trace) == std::vector<std::string>{"Conv", "Add", "Clip", "Mul", "Div"});
    }
    Folded f = Fold(WrittenOutHardSwish(3, 0, 6, 6, /*also_out=*/true));
    CHECK(Ops(f.trace) == std::vector<std::string>{"Conv", "Add", "Clip", "Mul", "Div"});
  }
  SUBCASE("a Sigmoid whose output is also read elsewhere is no SiLU") {
    auto m = MakeModel(17);
    auto* g = m.mutable_graph();
    AddInput(g, "x", {"2", "3"});
    AddFloatInit(g, "W", {3, 4}, RandomFloats(12, 14));
    AddNode(g, "MatMul", {"x", "W"}, {"m"}, "mm");
    AddNode(g, "Sigmoid", {"m"}, {"s"}, "sig");
    AddNode(g, "Mul", {"m", "s"}, {"y"}, "mul");
    AddOutput(g, "y");
    AddOutput(g, "s");
    Folded f = Fold(m);
    CHECK(Ops(f.trace) == std::vector<std::string>{"MatMul", "Sigmoid", "Mul"});
  }
}

TEST_CASE("epilogue: symbolic batch dims fold when the residual has the same symbols") {
  auto m = MakeModel(17);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"N", "3"});
  AddInput(g, "r", {"N", "4"});
  AddInput(g, "q", {"M", "4"});
  AddFloatInit(g, "W", {3, 4}, RandomFloats(12, 15));
  AddFloatInit(g, "W2", {3, 4}, RandomFloats(12, 16));
  AddNode(g, "MatMul", {"x", "W"}, {"m"}, "mm");
  AddNode(g, "Add", {"m", "r"}, {"y"}, "add");
  AddNode(g, "MatMul", {"x", "W2"}, {"m2"}, "mm2");
  AddNode(g, "Add", {"m2", "q"}, {"z"}, "add2");  // N vs M: equal only by a guard, not folded
  AddOutput(g, "y");
  AddOutput(g, "z");
  Folded f = Fold(m);
  CHECK(Ops(f.trace) == std::vector<std::string>{"MatMul", "MatMul", "Add"});
  CHECK(f.log == std::vector<std::string>{"mm (MatMul): folded residual 'r' into the epilogue"});
}

}  // namespace
