// The canonical stage: shape-arithmetic folding, constant folding, guards, BatchNormalization
// folding, DCE (control flow: tests/compiler/passes/control_flow/).
#include "compiler/passes/canonicalize.h"
#include "compiler/passes/constant_fold.h"

#include <doctest/doctest.h>

#include "tests/compiler/onnx_model_builder.h"

using namespace kiln::testing;  // NOLINT: the model-building helpers

namespace {

// x[N, 4, 4] -> Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), [16])): the exporter's way
// of writing x.view(x.size(0), -1).
onnx::ModelProto ShapeChainModel() {
  auto m = MakeModel(13);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"N", "4", "4"});
  AddInt64Init(g, "zero", {}, {0});
  AddInt64Init(g, "axes0", {1}, {0});
  AddInt64Init(g, "sixteen", {1}, {16});
  AddNode(g, "Shape", {"x"}, {"s"});
  AttrInt(AddNode(g, "Gather", {"s", "zero"}, {"n"}), "axis", 0);
  AddNode(g, "Unsqueeze", {"n", "axes0"}, {"n1"});
  AttrInt(AddNode(g, "Concat", {"n1", "sixteen"}, {"shape"}), "axis", 0);
  AddNode(g, "Reshape", {"x", "shape"}, {"y"});
  AddOutput(g, "y");
  return m;
}

}  // namespace

TEST_CASE("canonical: a Shape->Gather->Unsqueeze->Concat->Reshape chain needs no instruction but the Reshape") {
  auto r = Canonical(ShapeChainModel());
  REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  const kiln::ir::Trace& t = r->trace;
  CHECK(Ops(t) == std::vector<std::string>{"Reshape"});
  const auto& y = t.value(t.outputs[0]);
  CHECK(kiln::ir::ShapeToString(y.shape) == "[N, 16]");
  // The shape operand is known element-wise as Syms: [N, 16].
  const auto& shape = t.value(t.body.nodes[0].inputs[1]);
  REQUIRE(shape.sym.has_value());
  CHECK((*shape.sym)[0].ToString() == "N");
  CHECK((*shape.sym)[1].value() == 16);
}

TEST_CASE("canonical: with the shape fixed, the chain folds to a constant shape") {
  ImportOptions options;
  options.input_shapes["x"] = {2, 4, 4};
  auto r = Canonical(ShapeChainModel(), options);
  REQUIRE(r.ok());
  const kiln::ir::Trace& t = r->trace;
  CHECK(Ops(t) == std::vector<std::string>{"Reshape"});
  const auto& shape = t.value(t.body.nodes[0].inputs[1]);
  REQUIRE(shape.is_const());
  CHECK(shape.data->IntAt(0) == 2);
  CHECK(shape.data->IntAt(1) == 16);
  CHECK(kiln::ir::ShapeToString(t.value(t.outputs[0]).shape) == "[2, 16]");
}

TEST_CASE("canonical: constant subgraphs fold through the CPU kernels, dead nodes go") {
  auto m = MakeModel(13);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"3"});
  AddFloatInit(g, "a", {3}, {1, 2, 3});
  AddFloatInit(g, "b", {3}, {10, 20, 30});
  AddNode(g, "Add", {"a", "b"}, {"ab"});          // folds to [11, 22, 33]
  AddNode(g, "Mul", {"x", "ab"}, {"y"});
  AddNode(g, "Relu", {"x"}, {"unused"});          // nobody reads it
  AddOutput(g, "y");
  auto r = Canonical(m);
  REQUIRE(r.ok());
  const kiln::ir::Trace& t = r->trace;
  CHECK(Ops(t) == std::vector<std::string>{"Mul"});
  const auto& ab = t.value(t.body.nodes[0].inputs[1]);
  REQUIRE(ab.is_const());
  CHECK(ab.data->FloatAt(0) == 11.0);
  CHECK(ab.data->FloatAt(2) == 33.0);
}

TEST_CASE("canonical: a symbolic output extent gets a guard that it is at least 1") {
  auto m = MakeModel(13);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"1", "1", "H", "4"});
  auto* pool = AddNode(g, "MaxPool", {"x"}, {"y"}, "pool");
  AttrInts(pool, "kernel_shape", {2, 2});
  AttrInts(pool, "strides", {2, 2});
  AddOutput(g, "y");
  auto r = Canonical(m);
  REQUIRE(r.ok());
  REQUIRE(r->trace.guards.size() == 1);
  CHECK(r->trace.guards[0].condition.ToString() == "(0 < (H floordiv 2))");
  CHECK(r->trace.guards[0].origin == "node 'pool' (MaxPool), whose output 'y' dim 2 must be >= 1");
}

TEST_CASE("canonical: BatchNormalization after a Conv folds into its weights and bias") {
  // x [1,1,1,2] -> Conv (2 output channels, 1x1, W = [2, 3], b = [1, -1]) -> BN.
  auto m = MakeModel(15);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"1", "1", "1", "2"});
  AddFloatInit(g, "W", {2, 1, 1, 1}, {2.0f, 3.0f});
  AddFloatInit(g, "b", {2}, {1.0f, -1.0f});
  AddFloatInit(g, "scale", {2}, {0.5f, 2.0f});
  AddFloatInit(g, "shift", {2}, {0.25f, 0.0f});
  AddFloatInit(g, "mean", {2}, {1.0f, 2.0f});
  AddFloatInit(g, "var", {2}, {4.0f, 0.25f});
  AddNode(g, "Conv", {"x", "W", "b"}, {"c"}, "conv");
  AttrFloat(AddNode(g, "BatchNormalization", {"c", "scale", "shift", "mean", "var"}, {"y"}, "bn"), "epsilon", 0.0f);
  AddOutput(g, "y");
  auto r = Canonical(m);
  REQUIRE(r.ok());
  const kiln::ir::Trace& t = r->trace;
  REQUIRE(Ops(t) == std::vector<std::string>{"Conv"});
  CHECK(t.value(t.body.nodes[0].outputs[0]).name == "y");
  // s = scale / sqrt(var) = [0.25, 4]; W' = W * s = [0.5, 12]; b' = (b - mean) * s + shift = [0.25, -12].
  const auto& w = *t.value(t.body.nodes[0].inputs[1]).data;
  const auto& b = *t.value(t.body.nodes[0].inputs[2]).data;
  CHECK(w.FloatAt(0) == doctest::Approx(0.5));
  CHECK(w.FloatAt(1) == doctest::Approx(12.0));
  CHECK(b.FloatAt(0) == doctest::Approx(0.25));
  CHECK(b.FloatAt(1) == doctest::Approx(-12.0));
}

TEST_CASE("canonical: a Conv output read by more than the BatchNormalization is not folded") {
  auto m = MakeModel(15);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"1", "1", "1", "2"});
  AddFloatInit(g, "W", {1, 1, 1, 1}, {2.0f});
  for (const char* n : {"scale", "shift", "mean", "var"}) AddFloatInit(g, n, {1}, {1.0f});
  AddNode(g, "Conv", {"x", "W"}, {"c"});
  AddNode(g, "BatchNormalization", {"c", "scale", "shift", "mean", "var"}, {"y"});
  AddNode(g, "Relu", {"c"}, {"z"});
  AddOutput(g, "y");
  AddOutput(g, "z");
  auto r = Canonical(m);
  REQUIRE(r.ok());
  CHECK(Ops(r->trace) == std::vector<std::string>{"Conv", "BatchNormalization", "Relu"});
}

TEST_CASE("canonical: a constant result over kMaxFoldBytes stays an instruction, one whose size overflows is refused") {
  // ConstantOfShape(value 1.0f, shape) -> y: folding would allocate the whole result at compile time.
  auto model = [](std::vector<int64_t> shape) {
    auto m = MakeModel(13);
    auto* g = m.mutable_graph();
    AddInt64Init(g, "shape", {static_cast<int64_t>(shape.size())}, shape);
    auto* n = AddNode(g, "ConstantOfShape", {"shape"}, {"y"}, "fill");
    auto* a = n->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    a->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
    a->mutable_t()->add_dims(1);
    a->mutable_t()->add_float_data(1.0f);
    AddOutput(g, "y");
    return m;
  };
  static_assert(kiln::passes::kMaxFoldBytes == 4 << 20);
  auto small = Canonical(model({1 << 10, 1 << 10}));  // 4 MiB: folded
  REQUIRE(small.ok());
  CHECK(Ops(small->trace).empty());
  CHECK(small->trace.value(small->trace.outputs[0]).is_const());
  auto big = Canonical(model({1 << 20, 1 << 20}));  // 4 TiB: a runtime instruction, nothing allocated
  REQUIRE(big.ok());
  CHECK(Ops(big->trace) == std::vector<std::string>{"ConstantOfShape"});
  // 2^61 elements of 4 bytes: the element count fits int64, the byte size does not (it
  // wrapped negative and folding threw std::length_error).
  auto wraps = Canonical(model({1 << 30, 1 << 30, 2}));
  REQUIRE_FALSE(wraps.ok());
  CHECK(wraps.status().code() == kiln::StatusCode::kInvalidArgument);
  CHECK(wraps.status().message() ==
        "node 'fill' (ConstantOfShape): output 'y' float32[1073741824, 1073741824, 2] has more bytes than int64 can count");
}

TEST_CASE("canonical: shape arithmetic that doubles an expression per node stays small through derived symbols") {
  // s_{i+1} = s_i + s_i from Shape(x): 40 nodes would make an expression of 2^41 terms, and
  // printing or walking it took exponential time (a hang). Past kDeriveAbove terms a dim or
  // element becomes a derived symbol named after its value, so each stays a few terms long.
  auto m = MakeModel(13);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"N"});
  AddNode(g, "Shape", {"x"}, {"s0"});
  for (int i = 0; i < 40; ++i)
    AddNode(g, "Add", {"s" + std::to_string(i), "s" + std::to_string(i)}, {"s" + std::to_string(i + 1)},
            "add" + std::to_string(i));
  AddNode(g, "Reshape", {"x", "s40"}, {"y"});
  AddOutput(g, "y");
  static_assert(kiln::passes::kDeriveAbove == 48);
  auto r = Canonical(m);
  REQUIRE(r.ok());
  const kiln::ir::Sym& y = r->trace.value(r->trace.outputs[0]).shape[0];
  CHECK(y.ToString() == "s40.element0");
  const std::string text = r->trace.Print();
  CHECK(text.find("# derived: s5.element0 = ") != std::string::npos);
  CHECK(text.size() < 4096);
  // 2^40 * N as the definitions compute it, without walking 2^41 terms.
  CHECK(y.Eval({{"N", 3}}) == (int64_t{3} << 40));
}

TEST_CASE("canonical: Expand, Tile and Range with constant inputs and terabyte results stay instructions") {
  // Each would fold by running its CPU kernel on a buffer of the whole result.
  struct Case {
    const char* op;
    std::vector<std::string> inputs;
  };
  for (const Case& c : {Case{"Expand", {"w", "big_shape"}}, Case{"Tile", {"w", "big_repeats"}},
                        Case{"Range", {"zero", "big_limit", "one"}}}) {
    const std::string op = c.op;
    CAPTURE(op);
    auto m = MakeModel(13);
    auto* g = m.mutable_graph();
    AddFloatInit(g, "w", {1, 2}, {1, 2});
    AddInt64Init(g, "big_shape", {3}, {int64_t{1} << 20, int64_t{1} << 20, 2});
    AddInt64Init(g, "big_repeats", {2}, {int64_t{1} << 20, int64_t{1} << 19});
    AddInt64Init(g, "zero", {}, {0});
    AddInt64Init(g, "big_limit", {}, {int64_t{1} << 40});
    AddInt64Init(g, "one", {}, {1});
    AddNode(g, c.op, c.inputs, {"y"}, "huge");
    AddOutput(g, "y");
    auto r = Canonical(m);
    REQUIRE_MESSAGE(r.ok(), r.status().ToString());
    CHECK(Ops(r->trace) == std::vector<std::string>{op});
    CHECK_FALSE(r->trace.value(r->trace.outputs[0]).is_const());
  }
}

TEST_CASE("canonical: a Cast or CastLike to its own dtype and a one-input Concat go, except a half Cast") {
  // x (float32) -> Cast(to float32) -> CastLike(like x) -> Concat(one input) -> Relu -> y;
  // h (float16) -> Cast(to float16) -> Relu -> z: the half Cast is a fused region's rounding point.
  auto m = MakeModel(18);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"N", "4"});
  AddInput(g, "h", {"N", "4"}, onnx::TensorProto::FLOAT16);
  AttrInt(AddNode(g, "Cast", {"x"}, {"x1"}, "same_cast"), "to", onnx::TensorProto::FLOAT);
  AddNode(g, "CastLike", {"x1", "x"}, {"x2"}, "same_cast_like");
  AttrInt(AddNode(g, "Concat", {"x2"}, {"x3"}, "one_input"), "axis", 0);
  AddNode(g, "Relu", {"x3"}, {"y"}, "relu");
  AttrInt(AddNode(g, "Cast", {"h"}, {"h1"}, "half_cast"), "to", onnx::TensorProto::FLOAT16);
  AddNode(g, "Relu", {"h1"}, {"z"}, "relu_half");
  AddOutput(g, "y");
  AddOutput(g, "z");
  auto r = Canonical(m);
  REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  CHECK(Ops(r->trace) == std::vector<std::string>{"Relu", "Cast", "Relu"});
  CHECK(r->trace.body.nodes[0].inputs[0] == r->trace.inputs[0]);  // Relu reads x itself
}
