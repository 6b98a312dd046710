// Invalid and unsupported models get a precise compile error, never a crash: the op, the node
// name and what is wrong or missing (an op, a dtype, an attribute value or type, an input).
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <limits>

#include "compiler/compile.h"
#include "tests/compiler/compile_util.h"
#include "tests/compiler/onnx_model_builder.h"
#include "tests/native_target.h"

namespace kiln::testing {
namespace {

Status CompileFileStatus(const onnx::ModelProto& m) {
  auto path = std::filesystem::temp_directory_path() / ("kiln_invalid_" + std::to_string(::getpid()) + ".onnx");
  std::string bytes;
  REQUIRE(m.SerializeToString(&bytes));
  std::ofstream(path, std::ios::binary) << bytes;
  compiler::CompileOptions o;
  o.archs.clear();
  o.cpu_targets = kiln::testing::NativeTargetForThisCpu();
  auto r = compiler::CompileOnnxFile(path.string(), o, nullptr);
  std::filesystem::remove(path);
  REQUIRE_FALSE(r.ok());
  return r.status();
}

// y = op(x[, x2]) with x float32[2, 3].
onnx::ModelProto OpModel(const std::string& op, std::vector<std::string> inputs, onnx::NodeProto** node) {
  auto m = MakeModel(18);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"2", "3"});
  AddInput(g, "x2", {"2", "3"});
  *node = AddNode(g, op, std::move(inputs), {"y"}, "bad_node");
  AddOutput(g, "y");
  return m;
}

bool Says(const Status& st, const std::string& text) {
  const bool ok = st.message().find(text) != std::string::npos;
  if (!ok) MESSAGE("message: " << st.ToString());
  return ok;
}

// fill_<name> = ConstantOfShape(value 1.0f, shape <name>) with the shape an initializer.
void AddFill(onnx::GraphProto* g, const std::string& name, std::vector<int64_t> shape) {
  AddInt64Init(g, name, {static_cast<int64_t>(shape.size())}, shape);
  auto* a = AddNode(g, "ConstantOfShape", {name}, {"fill_" + name}, "fill_" + name)->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  a->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
  a->mutable_t()->add_dims(1);
  a->mutable_t()->add_float_data(1.0f);
}

}  // namespace

TEST_CASE("invalid models: an attribute of the wrong type names the node, op and attribute") {
  onnx::NodeProto* n = nullptr;
  auto m = OpModel("Softmax", {"x"}, &n);
  AttrString(n, "axis", "last");  // an INT attribute given as a STRING: not silently the default
  Status st = CompileFileStatus(m);
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(Says(st, "bad_node"));
  CHECK(Says(st, "Softmax"));
  CHECK(Says(st, "attribute 'axis' is STRING, expected INT (ONNX Softmax-13)"));

  auto m2 = OpModel("Transpose", {"x"}, &n);
  AttrFloat(n, "perm", 1.0f);  // INTS given as FLOAT
  st = CompileFileStatus(m2);
  CHECK(Says(st, "bad_node"));
  CHECK(Says(st, "perm"));
}

TEST_CASE("invalid models: an attribute the op's version at the model's opset does not define is refused") {
  // ReduceSum-13 takes its axes as an input; Shape's 'start' came with Shape-15.
  auto m = MakeModel(13);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"2", "3"});
  AttrInts(AddNode(g, "ReduceSum", {"x"}, {"y"}, "sum"), "axes", {1});
  AddOutput(g, "y");
  Status st = CompileFileStatus(m);
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK_MESSAGE(Says(st, "node 'sum' (ReduceSum) attribute 'axes': ReduceSum-13 (the version at opset 13) has no such "
                         "attribute (it has 'keepdims', 'noop_with_empty_axes')"),
                st.ToString());
  auto shape = MakeModel(13);
  g = shape.mutable_graph();
  AddInput(g, "x", {"2", "3"});
  AttrInt(AddNode(g, "Shape", {"x"}, {"y"}, "shape"), "start", 1);
  AddOutput(g, "y");
  st = CompileFileStatus(shape);
  CHECK_MESSAGE(Says(st, "attribute 'start': Shape-13 (the version at opset 13) has no such attribute (it has none)"),
                st.ToString());
  // At opset 15 it is Shape-15's attribute.
  shape.mutable_opset_import(0)->set_version(15);
  auto r = testing::TryCompileModel(shape, testing::CpuOnly());
  REQUIRE_MESSAGE(r.ok(), r.status().ToString());
}

TEST_CASE("invalid models: a wrong number of inputs names the node and op") {
  onnx::NodeProto* n = nullptr;
  Status one = CompileFileStatus(OpModel("Add", {"x"}, &n));
  CHECK(one.code() != StatusCode::kOk);
  CHECK(Says(one, "bad_node"));
  CHECK(Says(one, "Add"));
  Status three = CompileFileStatus(OpModel("MatMul", {"x", "x2", "x"}, &n));
  CHECK(Says(three, "bad_node"));
  CHECK(Says(three, "MatMul"));
}

TEST_CASE("invalid models: an ill-formed graph (an undefined input, a missing output) is a precise error") {
  onnx::NodeProto* n = nullptr;
  Status undefined = CompileFileStatus(OpModel("Relu", {"nowhere"}, &n));
  CHECK(undefined.code() == StatusCode::kDataLoss);
  CHECK(Says(undefined, "nowhere"));

  auto m = MakeModel(18);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"2"});
  AddNode(g, "Relu", {"x"}, {"y"}, "relu");
  AddOutput(g, "z");  // produced by no node
  Status missing = CompileFileStatus(m);
  CHECK(Says(missing, "z"));
}

TEST_CASE("invalid models: an unsupported op, dtype or attribute value names what is missing") {
  onnx::NodeProto* n = nullptr;
  Status op = CompileFileStatus(OpModel("NoSuchOp", {"x"}, &n));
  CHECK(op.code() == StatusCode::kUnimplemented);
  CHECK(Says(op, "bad_node"));
  CHECK(Says(op, "NoSuchOp"));

  auto m = OpModel("Gelu", {"x"}, &n);
  AttrString(n, "approximate", "cubic");
  Status value = CompileFileStatus(m);
  CHECK(Says(value, "bad_node"));
  CHECK(Says(value, "approximate"));
  CHECK(Says(value, "cubic"));

  auto s = MakeModel(18);
  AddInput(s.mutable_graph(), "x", {"2"}, onnx::TensorProto::STRING);
  AddNode(s.mutable_graph(), "Identity", {"x"}, {"y"}, "id");
  AddOutput(s.mutable_graph(), "y");
  Status dtype = CompileFileStatus(s);
  CHECK(dtype.code() == StatusCode::kUnimplemented);
  CHECK(Says(dtype, "'x'"));
  CHECK(Says(dtype, "element type string is not supported"));

  // float8 (a QuantizeLinear to FLOAT8E4M3FN) and other ONNX types by name.
  for (const auto& [type, text] :
       {std::pair{17,  // FLOAT8E4M3FN
                  "input 'x': element type FLOAT8E4M3FN (float8) is not supported: Kiln has no FP8 kernels on any "
                  "backend yet"},
        std::pair{21,  // UINT4
                  "input 'x': element type UINT4 (21) is not supported (known: float32/16/64, bfloat16, "
                  "[u]int8..64, bool)"}}) {
    auto f = MakeModel(21);
    AddInput(f.mutable_graph(), "x", {"2"}, type);
    AddNode(f.mutable_graph(), "Identity", {"x"}, {"y"}, "id");
    AddOutput(f.mutable_graph(), "y");
    const Status st = CompileFileStatus(f);
    CHECK(st.code() == StatusCode::kUnimplemented);
    CHECK_MESSAGE(Says(st, text), st.ToString());
  }
}

TEST_CASE("invalid models: an attribute whose arithmetic overflows is an error, not a crash") {
  // DepthToSpace blocksize 2^40: blocksize^2 wrapped to 0 and the channel check divided by it.
  auto m = MakeModel(13);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"1", "8", "2", "2"});
  AttrInt(AddNode(g, "DepthToSpace", {"x"}, {"y"}, "d2s"), "blocksize", int64_t{1} << 40);
  AddOutput(g, "y");
  Status st = CompileFileStatus(m);
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(Says(st, "d2s"));
  CHECK(Says(st, "blocksize: expected blocksize^2 to fit int64, found blocksize 1099511627776"));
}

TEST_CASE("invalid models: shapes whose byte size overflows int64 are refused before anything is allocated") {
  // Range(0, 2^62, 1) of int64: 2^62 elements fit int64, 2^65 bytes do not. The size wrapped
  // to 0, folding allocated nothing and the kernel wrote 2^62 values into it (a segfault).
  auto range = MakeModel(13);
  auto* g = range.mutable_graph();
  AddInt64Init(g, "start", {}, {0});
  AddInt64Init(g, "limit", {}, {int64_t{1} << 62});
  AddInt64Init(g, "delta", {}, {1});
  AddNode(g, "Range", {"start", "limit", "delta"}, {"r"}, "range");
  AddOutput(g, "r");
  Status st = CompileFileStatus(range);
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(st.message() == "node 'range' (Range): output 'r' int64[4611686018427387904] has more bytes than int64 can count");

  // Range(INT64_MIN, INT64_MAX, INT64_MAX): limit - start overflows (it was wrapped while
  // folding the offsets).
  auto limits = MakeModel(13);
  g = limits.mutable_graph();
  AddInt64Init(g, "start", {}, {std::numeric_limits<int64_t>::min()});
  AddInt64Init(g, "limit", {}, {std::numeric_limits<int64_t>::max()});
  AddInt64Init(g, "delta", {}, {std::numeric_limits<int64_t>::max()});
  AddNode(g, "Range", {"start", "limit", "delta"}, {"r"}, "range");
  AddOutput(g, "r");
  st = CompileFileStatus(limits);
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(st.message() == "node 'range' (Range): output 'r' dim 0 is max(((9223372036854775807--9223372036854775808) "
                        "ceildiv 9223372036854775807), 0) (negative or overflowing int64)");

  // Resize by 1e30: floor(2 * 1e30) converted to int64 was undefined behaviour (INT64_MIN here).
  auto resize = MakeModel(13);
  g = resize.mutable_graph();
  AddFloatInit(g, "w", {1, 2}, {1, 2});
  AddFloatInit(g, "scales", {2}, {1.0f, 1e30f});
  AddNode(g, "Resize", {"w", "", "scales"}, {"y"}, "resize");
  AddOutput(g, "y");
  st = CompileFileStatus(resize);
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(Says(st, "node 'resize' (Resize): scales: 1.0000000150474662e+30 times dim 2 does not fit int64"));

  // Each tensor fits, the arena does not. 2^61 - 1 floats (the fill fused into the Relu): rounded up to 64 bytes, they overflow.
  auto rounded = MakeModel(13);
  g = rounded.mutable_graph();
  AddFill(g, "n", {(int64_t{1} << 61) - 1});
  AddNode(g, "Relu", {"fill_n"}, {"y"}, "relu");
  AddOutput(g, "y");
  st = CompileFileStatus(rounded);
  CHECK(st.code() == StatusCode::kResourceExhausted);
  CHECK(Says(st, "plan: tensor 'y' float32[2305843009213693951] has more bytes (rounded up to 64) than int64 can count"));
  // Two 2^62-byte tensors live at once: their offsets overflow.
  auto two = MakeModel(13);
  g = two.mutable_graph();
  AddFill(g, "a", {int64_t{1} << 60});
  AddFill(g, "b", {int64_t{1} << 60});
  AddNode(g, "MatMul", {"fill_a", "fill_b"}, {"y"}, "dot");
  AddOutput(g, "y");
  st = CompileFileStatus(two);
  CHECK(st.code() == StatusCode::kResourceExhausted);
  CHECK(st.message() == "plan: the arena for 3 tensors has more bytes than int64 can count");
}

TEST_CASE("invalid models: subgraphs nested deeper than the limit are a compile error naming the path") {
  auto m = MakeModel(13);
  onnx::GraphProto* g = m.mutable_graph();
  for (int level = 0; level < 40; ++level) {
    auto* a = AddNode(g, "If", {}, {}, "if" + std::to_string(level))->add_attribute();
    a->set_name("else_branch");
    a->set_type(onnx::AttributeProto::GRAPH);
    g = a->mutable_g();
  }
  Status st = CompileFileStatus(m);
  CHECK(st.code() == StatusCode::kResourceExhausted);
  CHECK(Says(st, "subgraphs (If/Loop/Scan bodies) nest deeper than max_subgraph_depth 32: level 33 at main graph > "
                 "node 'if0' (If) attribute 'else_branch'"));
  CHECK(Says(st, "> node 'if32' (If) attribute 'else_branch'"));
}

}  // namespace kiln::testing
