// Invalid and unsupported models get a precise compile error, never a crash: the op, the node
// name and what is wrong or missing (an op, a dtype, an attribute value or type, an input).
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "compiler/compile.h"
#include "tests/compiler/onnx_model_builder.h"

namespace kiln::testing {
namespace {

Status CompileStatus(const onnx::ModelProto& m) {
  auto path = std::filesystem::temp_directory_path() / ("kiln_invalid_" + std::to_string(::getpid()) + ".onnx");
  std::string bytes;
  REQUIRE(m.SerializeToString(&bytes));
  std::ofstream(path, std::ios::binary) << bytes;
  compiler::CompileOptions o;
  o.archs.clear();
  auto r = compiler::CompileOnnxFile(path.string(), o, nullptr);
  std::filesystem::remove(path);
  REQUIRE_FALSE(r.ok());
  return r.status();
}

// y = op(x[, x2]) with x float32[2, 3].
onnx::ModelProto Model(const std::string& op, std::vector<std::string> inputs, onnx::NodeProto** node) {
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

}  // namespace

TEST_CASE("invalid models: an attribute of the wrong type names the node, op and attribute") {
  onnx::NodeProto* n = nullptr;
  auto m = Model("Softmax", {"x"}, &n);
  AttrString(n, "axis", "last");  // an INT attribute given as a STRING: not silently the default
  Status st = CompileStatus(m);
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(Says(st, "bad_node"));
  CHECK(Says(st, "Softmax"));
  CHECK(Says(st, "attribute 'axis' is STRING, expected INT (ONNX Softmax-13)"));

  auto m2 = Model("Transpose", {"x"}, &n);
  AttrFloat(n, "perm", 1.0f);  // INTS given as FLOAT
  st = CompileStatus(m2);
  CHECK(Says(st, "bad_node"));
  CHECK(Says(st, "perm"));
}

TEST_CASE("invalid models: a wrong number of inputs names the node and op") {
  onnx::NodeProto* n = nullptr;
  Status one = CompileStatus(Model("Add", {"x"}, &n));
  CHECK(one.code() != StatusCode::kOk);
  CHECK(Says(one, "bad_node"));
  CHECK(Says(one, "Add"));
  Status three = CompileStatus(Model("MatMul", {"x", "x2", "x"}, &n));
  CHECK(Says(three, "bad_node"));
  CHECK(Says(three, "MatMul"));
}

TEST_CASE("invalid models: an ill-formed graph (an undefined input, a missing output) is a precise error") {
  onnx::NodeProto* n = nullptr;
  Status undefined = CompileStatus(Model("Relu", {"nowhere"}, &n));
  CHECK(undefined.code() == StatusCode::kDataLoss);
  CHECK(Says(undefined, "nowhere"));

  auto m = MakeModel(18);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"2"});
  AddNode(g, "Relu", {"x"}, {"y"}, "relu");
  AddOutput(g, "z");  // produced by no node
  Status missing = CompileStatus(m);
  CHECK(Says(missing, "z"));
}

TEST_CASE("invalid models: an unsupported op, dtype or attribute value names what is missing") {
  onnx::NodeProto* n = nullptr;
  Status op = CompileStatus(Model("NoSuchOp", {"x"}, &n));
  CHECK(op.code() == StatusCode::kUnimplemented);
  CHECK(Says(op, "bad_node"));
  CHECK(Says(op, "NoSuchOp"));

  auto m = Model("Gelu", {"x"}, &n);
  AttrString(n, "approximate", "cubic");
  Status value = CompileStatus(m);
  CHECK(Says(value, "bad_node"));
  CHECK(Says(value, "approximate"));
  CHECK(Says(value, "cubic"));

  auto s = MakeModel(18);
  AddInput(s.mutable_graph(), "x", {"2"}, onnx::TensorProto::STRING);
  AddNode(s.mutable_graph(), "Identity", {"x"}, {"y"}, "id");
  AddOutput(s.mutable_graph(), "y");
  Status dtype = CompileStatus(s);
  CHECK(dtype.code() == StatusCode::kUnimplemented);
  CHECK(Says(dtype, "'x'"));
  CHECK(Says(dtype, "element type string is not supported"));
}

TEST_CASE("invalid models: an attribute whose arithmetic overflows is an error, not a crash") {
  // DepthToSpace blocksize 2^40: blocksize^2 wrapped to 0 and the channel check divided by it.
  auto m = MakeModel(13);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"1", "8", "2", "2"});
  AttrInt(AddNode(g, "DepthToSpace", {"x"}, {"y"}, "d2s"), "blocksize", int64_t{1} << 40);
  AddOutput(g, "y");
  Status st = CompileStatus(m);
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(Says(st, "d2s"));
  CHECK(Says(st, "blocksize: expected blocksize^2 to fit int64, found blocksize 1099511627776"));
}

}  // namespace kiln::testing
