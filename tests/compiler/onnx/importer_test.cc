// ONNX importer tests: small ModelProtos built with the protobuf API, serialized, imported.
#include "compiler/onnx/importer.h"
#include "tests/temp_dir.h"
#include "tests/text_util.h"
#include "tests/compiler/onnx_model_builder.h"

#include <doctest/doctest.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using kiln::testing::TempDir;
using kiln::testing::WriteBytes;
using namespace kiln::testing;  // NOLINT: the model-building helpers
using kiln::DType;
using kiln::StatusCode;
using kiln::ir::kNoValue;
using kiln::ir::Node;
using kiln::ir::Trace;
using kiln::ir::Value;
using kiln::ir::ValueId;
using kiln::onnx_import::ImportOnnxBytes;
using kiln::onnx_import::ImportOnnxFile;
using kiln::onnx_import::ImportOptions;

namespace {


ValueId FindValue(const Trace& t, const std::string& name) {
  for (size_t i = 0; i < t.values.size(); ++i)
    if (t.values[i].name == name) return static_cast<ValueId>(i);
  return kNoValue;
}

std::vector<int64_t> IntsOf(const Value& v) {
  REQUIRE(v.is_const());
  std::vector<int64_t> out;
  for (int64_t i = 0; i < v.data->num_elements(); ++i) out.push_back(v.data->IntAt(i));
  return out;
}

// x[N,4] -> Relu -> y, the smallest model.
onnx::ModelProto ReluModel(int64_t opset = 13) {
  auto m = MakeModel(opset);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"N", "4"});
  AddNode(g, "Relu", {"x"}, {"y"});
  AddOutput(g, "y");
  return m;
}

}  // namespace

TEST_CASE("onnx import: a minimal model, provenance, names and Print") {
  auto r = Import(ReluModel());
  REQUIRE(r.ok());
  const Trace& t = *r;
  CHECK(t.stage == "import");
  CHECK(t.provenance == "imported from ONNX model bytes (opset 13, IR 8, producer kiln-test 1.0)");
  REQUIRE(t.inputs.size() == 1);
  REQUIRE(t.outputs.size() == 1);
  REQUIRE(t.body.nodes.size() == 1);
  const Node& n = t.body.nodes[0];
  CHECK(n.op == "Relu");
  CHECK(n.name == "Relu_0");  // generated from op type and index
  CHECK(t.value(n.outputs[0]).name == "y");
  CHECK(t.value(n.outputs[0]).dtype == DType::kUndefined);  // no value_info: left to inference
  CHECK(t.outputs[0] == n.outputs[0]);
  const std::string text = t.Print();
  CHECK(Contains(text, "# stage: import\n"));
  CHECK(Contains(text, "# inputs: x: float32[N, 4]\n"));
  CHECK(Contains(text, "y = Relu(x)"));
  CHECK(Contains(text, "return y\n"));
}

TEST_CASE("onnx import: initializers listed as graph inputs are frozen constants") {
  auto m = MakeModel(9);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"1", "2"});
  AddInput(g, "w", {"2", "2"});  // old exporters list every weight as an input
  AddFloatInit(g, "w", {2, 2}, {1, 2, 3, 4});
  AddNode(g, "MatMul", {"x", "w"}, {"y"}, "mm");
  AddOutput(g, "y");
  auto r = Import(m);
  REQUIRE(r.ok());
  REQUIRE(r->inputs.size() == 1);
  CHECK(r->value(r->inputs[0]).name == "x");
  const ValueId w = FindValue(*r, "w");
  REQUIRE(w != kNoValue);
  const Value& wv = r->value(w);
  CHECK(wv.is_const());
  CHECK(wv.dtype == DType::kFloat32);
  CHECK(wv.data->dims == std::vector<int64_t>{2, 2});
  CHECK(wv.data->FloatAt(3) == 4.0);
  CHECK(r->body.nodes[0].inputs[1] == w);
  CHECK(Contains(r->Print(), "# const w: float32[2, 2]\n"));

  // input_shapes may not name a frozen initializer.
  ImportOptions opts;
  opts.input_shapes["w"] = {2, 2};
  auto bad = Import(m, opts);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == StatusCode::kInvalidArgument);
  CHECK(Contains(bad.status().message(), "'w'"));
}

TEST_CASE("onnx import: Constant nodes become constants, no node emitted") {
  auto m = MakeModel(13);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"3"});
  auto* c = AddNode(g, "Constant", {}, {"c"}, "const_c");
  auto* a = c->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  a->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
  a->mutable_t()->add_dims(3);
  const float raw[3] = {1.5f, -2.0f, 3.0f};
  a->mutable_t()->set_raw_data(std::string(reinterpret_cast<const char*>(raw), sizeof(raw)));
  auto* ci = AddNode(g, "Constant", {}, {"k"});
  AttrInts(ci, "value_ints", {7, 8});
  auto* cf = AddNode(g, "Constant", {}, {"f"});
  AttrFloat(cf, "value_float", 0.25f);
  AddNode(g, "Add", {"x", "c"}, {"y"});
  AddOutput(g, "y");
  auto r = Import(m);
  REQUIRE(r.ok());
  REQUIRE(r->body.nodes.size() == 1);
  CHECK(r->body.nodes[0].op == "Add");
  const Value& cv = r->value(r->body.nodes[0].inputs[1]);
  CHECK(cv.name == "c");
  REQUIRE(cv.is_const());
  CHECK(cv.data->FloatAt(1) == -2.0);
  const Value& kv = r->value(FindValue(*r, "k"));
  CHECK(kv.dtype == DType::kInt64);
  CHECK(IntsOf(kv) == std::vector<int64_t>{7, 8});
  const Value& fv = r->value(FindValue(*r, "f"));
  CHECK(fv.dtype == DType::kFloat32);
  CHECK(fv.shape.empty());
  CHECK(fv.data->FloatAt(0) == 0.25);

  // value_string is Unimplemented.
  auto m2 = MakeModel(13);
  auto* s = AddNode(m2.mutable_graph(), "Constant", {}, {"s"}, "strc");
  auto* sa = s->add_attribute();
  sa->set_name("value_string");
  sa->set_type(onnx::AttributeProto::STRING);
  sa->set_s("hi");
  auto r2 = Import(m2);
  REQUIRE_FALSE(r2.ok());
  CHECK(r2.status().code() == StatusCode::kUnimplemented);
  CHECK(Contains(r2.status().message(), "strc"));
}

TEST_CASE("onnx import: dim_param becomes a symbol, unknown dims get named symbols") {
  auto m = MakeModel(13);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"N", "3", "?"});
  AddNode(g, "Relu", {"x"}, {"y"});
  AddOutput(g, "y");
  auto r = Import(m);
  REQUIRE(r.ok());
  const Value& x = r->value(r->inputs[0]);
  REQUIRE(x.shape.size() == 3);
  CHECK(x.shape[0].op() == kiln::ir::SymOp::kVar);
  CHECK(x.shape[0].name() == "N");
  CHECK(x.shape[1].value() == 3);
  CHECK(x.shape[2].name() == "x_dim2");
}

TEST_CASE("onnx import: a graph input dim_value of -1 (Paddle exports) is a symbol, -2 is an error") {
  auto m = MakeModel(11);
  AddInput(m.mutable_graph(), "x", {"-1", "3", "?"});
  AddNode(m.mutable_graph(), "Relu", {"x"}, {"y"});
  AddOutput(m.mutable_graph(), "y");
  auto r = Import(m);
  REQUIRE(r.ok());
  CHECK(r->value(r->inputs[0]).shape[0].name() == "x_dim0");

  auto bad = MakeModel(11);
  AddInput(bad.mutable_graph(), "x", {"-2"});
  AddNode(bad.mutable_graph(), "Relu", {"x"}, {"y"});
  AddOutput(bad.mutable_graph(), "y");
  auto e = Import(bad);
  REQUIRE_FALSE(e.ok());
  CHECK(e.status().message() == "graph input 'x': dim 0 is -2, expected >= 0 (or -1 for a dynamic dim)");
}

TEST_CASE("onnx import: a graph input whose fixed dims overflow int64 bytes is refused") {
  auto m = ReluModel();
  m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(1)->set_dim_value(
      int64_t{1} << 61);
  auto r = Import(m);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kDataLoss);
  CHECK(r.status().message() == "graph input 'x': float32[N, 2305843009213693952] has more bytes than int64 can count");
  // The declared shape fits; the one input_shapes asks for does not.
  ImportOptions opts;
  opts.input_shapes["x"] = {int64_t{1} << 62, 4};
  auto fixed = Import(ReluModel(), opts);
  REQUIRE_FALSE(fixed.ok());
  CHECK(fixed.status().code() == StatusCode::kInvalidArgument);
  CHECK(fixed.status().message() ==
        "graph input 'x': float32[4611686018427387904, 4] has more bytes than int64 can count (dims fixed by input_shapes)");
}

TEST_CASE("onnx import: input_shapes fixes dims and rejects mismatches") {
  auto m = MakeModel(13);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"N", "3", "H", "W"});
  AddNode(g, "Relu", {"x"}, {"y"});
  AddOutput(g, "y");
  {
    ImportOptions opts;
    opts.input_shapes["x"] = {1, -1, 224, -1};
    auto r = Import(m, opts);
    REQUIRE(r.ok());
    const Value& x = r->value(r->inputs[0]);
    CHECK(x.shape[0].value() == 1);
    CHECK(x.shape[1].value() == 3);
    CHECK(x.shape[2].value() == 224);
    CHECK(x.shape[3].name() == "W");
  }
  {
    ImportOptions opts;
    opts.input_shapes["x"] = {1, 3, 224};
    auto r = Import(m, opts);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kInvalidArgument);
    CHECK(Contains(r.status().message(), "'x'"));
    CHECK(Contains(r.status().message(), "rank 3"));
    CHECK(Contains(r.status().message(), "rank 4"));
  }
  {
    ImportOptions opts;
    opts.input_shapes["x"] = {1, 4, 224, 224};  // dim 1 is fixed to 3 by the model
    auto r = Import(m, opts);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kInvalidArgument);
    CHECK(Contains(r.status().message(), "input_shapes['x'] dim 1 = 4, but the model fixes it to 3"));
  }
  {
    ImportOptions opts;
    opts.input_shapes["nope"] = {1};
    auto r = Import(m, opts);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kInvalidArgument);
    CHECK(Contains(r.status().message(), "'nope'"));
  }
}

TEST_CASE("onnx import: opset-11 Unsqueeze/Squeeze/ReduceSum axes attrs become inputs") {
  auto m = MakeModel(11);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"2", "3"});
  AttrInts(AddNode(g, "Unsqueeze", {"x"}, {"u"}, "unsq"), "axes", {0, 3});
  AttrInts(AddNode(g, "Squeeze", {"u"}, {"s"}, "sq"), "axes", {0});
  auto* rs = AddNode(g, "ReduceSum", {"s"}, {"y"}, "rsum");
  AttrInts(rs, "axes", {1});
  AttrInt(rs, "keepdims", 0);
  AddOutput(g, "y");
  auto r = Import(m);
  REQUIRE(r.ok());
  REQUIRE(r->body.nodes.size() == 3);
  for (const Node& n : r->body.nodes) {
    REQUIRE(n.inputs.size() == 2);
    CHECK_FALSE(n.attrs.Has("axes"));
    CHECK(r->value(n.inputs[1]).dtype == DType::kInt64);
  }
  CHECK(IntsOf(r->value(r->body.nodes[0].inputs[1])) == std::vector<int64_t>{0, 3});
  CHECK(r->value(r->body.nodes[0].inputs[1]).name == "unsq_axes");
  CHECK(IntsOf(r->value(r->body.nodes[2].inputs[1])) == std::vector<int64_t>{1});
  CHECK(r->body.nodes[2].attrs.GetInt("keepdims", 1) == 0);

  // At opset 13 Unsqueeze already takes axes as an input: nothing to rewrite.
  auto m13 = MakeModel(13);
  auto* g13 = m13.mutable_graph();
  AddInput(g13, "x", {"2"});
  auto* c = AddNode(g13, "Constant", {}, {"ax"});
  AttrInts(c, "value_ints", {0});
  AddNode(g13, "Unsqueeze", {"x", "ax"}, {"y"});
  AddOutput(g13, "y");
  auto r13 = Import(m13);
  REQUIRE(r13.ok());
  CHECK(r13->value(r13->body.nodes[0].inputs[1]).name == "ax");
}

TEST_CASE("onnx import: Softmax before opset 13 gets coerce_2d and an explicit axis") {
  auto m = MakeModel(11);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"2", "3", "4"});
  AddNode(g, "Softmax", {"x"}, {"a"});
  AttrInt(AddNode(g, "LogSoftmax", {"a"}, {"y"}), "axis", 2);
  AddOutput(g, "y");
  auto r = Import(m);
  REQUIRE(r.ok());
  CHECK(r->body.nodes[0].attrs.GetInt("coerce_2d", 0) == 1);
  CHECK(r->body.nodes[0].attrs.GetInt("axis", -7) == 1);
  CHECK(r->body.nodes[1].attrs.GetInt("coerce_2d", 0) == 1);
  CHECK(r->body.nodes[1].attrs.GetInt("axis", -7) == 2);

  auto m13 = MakeModel(13);
  AddInput(m13.mutable_graph(), "x", {"2", "3"});
  AddNode(m13.mutable_graph(), "Softmax", {"x"}, {"y"});
  AddOutput(m13.mutable_graph(), "y");
  auto r13 = Import(m13);
  REQUIRE(r13.ok());
  CHECK_FALSE(r13->body.nodes[0].attrs.Has("coerce_2d"));
}

TEST_CASE("onnx import: other older-opset rewrites") {
  auto m = MakeModel(9);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"1", "1", "4", "4"});
  auto* sl = AddNode(g, "Slice", {"x"}, {"s"}, "slice");
  AttrInts(sl, "starts", {1});
  AttrInts(sl, "ends", {3});
  AttrInts(sl, "axes", {2});
  auto* up = AddNode(g, "Upsample", {"s", "sc"}, {"u"}, "up");
  auto* sc = g->add_initializer();
  sc->set_name("sc");
  sc->set_data_type(onnx::TensorProto::FLOAT);
  sc->add_dims(4);
  for (float f : {1.f, 1.f, 2.f, 2.f}) sc->add_float_data(f);
  auto* ma = up->add_attribute();
  ma->set_name("mode");
  ma->set_type(onnx::AttributeProto::STRING);
  ma->set_s("nearest");
  auto* cl = AddNode(g, "Clip", {"u"}, {"c"}, "clip");
  AttrFloat(cl, "min", 0.0f);
  AttrFloat(cl, "max", 6.0f);
  auto* pad = AddNode(g, "Pad", {"c"}, {"p"}, "pad");
  AttrInts(pad, "pads", {0, 0, 1, 1, 0, 0, 1, 1});
  AttrFloat(pad, "value", 0.5f);
  auto* d = AddNode(g, "Dropout", {"p"}, {"dr", "mask_unused"}, "drop");
  AttrFloat(d, "ratio", 0.3f);
  auto* cos = AddNode(g, "ConstantOfShape", {"shp"}, {"z"}, "cos");
  auto* shp = g->add_initializer();
  shp->set_name("shp");
  shp->set_data_type(onnx::TensorProto::INT64);
  shp->add_dims(1);
  shp->add_int64_data(3);
  auto* va = cos->add_attribute();
  va->set_name("value");
  va->set_type(onnx::AttributeProto::TENSOR);
  va->mutable_t()->set_data_type(onnx::TensorProto::INT32);
  va->mutable_t()->add_dims(1);
  va->mutable_t()->add_int32_data(5);
  AddOutput(g, "dr");
  AddOutput(g, "z");
  auto r = Import(m);
  REQUIRE(r.ok());
  const auto& nodes = r->body.nodes;
  REQUIRE(nodes.size() == 6);

  CHECK(nodes[0].op == "Slice");
  REQUIRE(nodes[0].inputs.size() == 4);
  CHECK(IntsOf(r->value(nodes[0].inputs[1])) == std::vector<int64_t>{1});
  CHECK(IntsOf(r->value(nodes[0].inputs[3])) == std::vector<int64_t>{2});
  CHECK(nodes[0].attrs.items().empty());

  CHECK(nodes[1].op == "Resize");
  REQUIRE(nodes[1].inputs.size() == 3);
  CHECK(nodes[1].inputs[1] == kNoValue);
  CHECK(r->value(nodes[1].inputs[2]).name == "sc");
  CHECK(nodes[1].attrs.GetString("mode", "") == "nearest");
  CHECK(nodes[1].attrs.GetString("coordinate_transformation_mode", "") == "asymmetric");
  CHECK(nodes[1].attrs.GetString("nearest_mode", "") == "floor");

  CHECK(nodes[2].op == "Clip");
  REQUIRE(nodes[2].inputs.size() == 3);
  CHECK(r->value(nodes[2].inputs[2]).data->FloatAt(0) == 6.0);
  CHECK_FALSE(nodes[2].attrs.Has("max"));

  CHECK(nodes[3].op == "Pad");
  REQUIRE(nodes[3].inputs.size() == 3);
  CHECK(IntsOf(r->value(nodes[3].inputs[1])) == std::vector<int64_t>{0, 0, 1, 1, 0, 0, 1, 1});
  CHECK(r->value(nodes[3].inputs[2]).data->FloatAt(0) == 0.5);

  CHECK(nodes[4].op == "Identity");
  CHECK(nodes[4].inputs.size() == 1);
  CHECK(nodes[4].outputs.size() == 1);
  CHECK(nodes[4].attrs.items().empty());

  CHECK(nodes[5].op == "ConstantOfShape");
  CHECK(nodes[5].attrs.GetInt("dtype", 0) == static_cast<int64_t>(DType::kInt32));
  CHECK(nodes[5].attrs.GetInt("value_int", 0) == 5);

  const std::string text = r->Print();
  CHECK(Contains(text, "u = Resize(s, _, sc, mode='nearest', coordinate_transformation_mode='asymmetric', nearest_mode='floor')"));
}

TEST_CASE("onnx import: Upsample-7 scales attribute becomes a Resize scales input") {
  auto m = MakeModel(7);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"1", "1", "2", "2"});
  auto* up = AddNode(g, "Upsample", {"x"}, {"y"}, "up");
  AttrFloats(up, "scales", {1, 1, 2, 3});
  auto* ma = up->add_attribute();
  ma->set_name("mode");
  ma->set_type(onnx::AttributeProto::STRING);
  ma->set_s("linear");
  AddOutput(g, "y");
  auto r = Import(m);
  REQUIRE(r.ok());
  const Node& n = r->body.nodes[0];
  CHECK(n.op == "Resize");
  REQUIRE(n.inputs.size() == 3);
  const Value& sc = r->value(n.inputs[2]);
  REQUIRE(sc.is_const());
  CHECK(sc.dtype == DType::kFloat32);
  CHECK(sc.data->FloatAt(3) == 3.0);
  CHECK(n.attrs.GetString("mode", "") == "linear");
  CHECK(n.attrs.GetString("coordinate_transformation_mode", "") == "asymmetric");
}

TEST_CASE("onnx import: a Dropout mask in use stays a Dropout from opset 10 - before, and BatchNormalization training "
          "outputs in use, are Unimplemented") {
  for (int opset : {12, 9}) {
    auto m = MakeModel(opset);
    auto* g = m.mutable_graph();
    AddInput(g, "x", {"2"});
    AddNode(g, "Dropout", {"x"}, {"y", "mask"}, "drop");
    AddOutput(g, "y");
    AddOutput(g, "mask");
    auto r = Import(m);
    if (opset == 12) {
      REQUIRE(r.ok());
      REQUIRE(r->body.nodes.size() == 1);
      CHECK(r->body.nodes[0].op == "Dropout");
      CHECK(r->body.nodes[0].inputs.size() == 1);
      CHECK(r->body.nodes[0].outputs.size() == 2);
      continue;
    }
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kUnimplemented);
    CHECK(Contains(r.status().message(), "node 'drop' (Dropout)"));
    CHECK(Contains(r.status().message(), "'mask'"));
    CHECK(Contains(r.status().message(), "opset 9"));
  }

  auto mb = MakeModel(9);
  auto* gb = mb.mutable_graph();
  AddInput(gb, "x", {"1", "2", "3"});
  for (const char* n : {"s", "b", "mu", "var"}) AddFloatInit(gb, n, {2}, {1, 1});
  AddNode(gb, "BatchNormalization", {"x", "s", "b", "mu", "var"}, {"y", "rm"}, "bn");
  AddNode(gb, "Relu", {"rm"}, {"z"});
  AddOutput(gb, "y");
  AddOutput(gb, "z");
  auto rb = Import(mb);
  REQUIRE_FALSE(rb.ok());
  CHECK(rb.status().code() == StatusCode::kUnimplemented);
  CHECK(Contains(rb.status().message(), "'bn'"));
}

TEST_CASE("onnx import: If branches become blocks that read outer values") {
  auto m = MakeModel(13);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"2"});
  AddInput(g, "cond", {}, onnx::TensorProto::BOOL);
  auto* iff = AddNode(g, "If", {"cond"}, {"y"}, "if");
  for (const char* branch : {"then_branch", "else_branch"}) {
    auto* a = iff->add_attribute();
    a->set_name(branch);
    a->set_type(onnx::AttributeProto::GRAPH);
    auto* sg = a->mutable_g();
    sg->set_name(branch);
    AddNode(sg, std::string(branch) == "then_branch" ? "Relu" : "Neg", {"x"},
            {std::string(branch) + "_out"});
    AddOutput(sg, std::string(branch) + "_out");
  }
  AddOutput(g, "y");
  auto r = Import(m);
  REQUIRE(r.ok());
  REQUIRE(r->body.nodes.size() == 1);
  const Node& n = r->body.nodes[0];
  REQUIRE(n.blocks.size() == 2);
  CHECK(n.blocks[0].first == "then_branch");
  REQUIRE(n.blocks[0].second->nodes.size() == 1);
  CHECK(n.blocks[0].second->nodes[0].inputs[0] == r->inputs[0]);
  CHECK(r->value(n.blocks[1].second->outputs[0]).name == "else_branch_out");
  CHECK(Contains(r->Print(), "  then_branch:\n    then_branch_out = Relu(x) # ?\n    return then_branch_out\n"));
}

TEST_CASE("onnx import: subgraphs nested deeper than max_subgraph_depth are refused before parsing") {
  auto import = [](const std::string& bytes, const ImportOptions& opts = {}) {
    return ImportOnnxBytes({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}, "", opts);
  };
  // The wire-level builder writes what protobuf would.
  onnx::ModelProto three;
  REQUIRE(three.ParseFromString(NestedIfModelBytes(3)));
  CHECK(three.graph().node(0).name() == "if_0");
  CHECK(three.graph().node(0).attribute(0).g().node(0).attribute(0).g().node(0).name() == "if_2");
  CHECK(three.graph().node(0).attribute(0).g().node(0).attribute(0).g().node(0).attribute(0).g().node_size() == 0);

  // At the limit: parsed (the parser's recursion limit allows it) and imported.
  auto at = import(NestedIfModelBytes(kiln::onnx_import::kDefaultMaxSubgraphDepth));
  CHECK_MESSAGE(at.ok(), at.status().ToString());
  for (int levels : {kiln::onnx_import::kDefaultMaxSubgraphDepth + 1, 10000}) {
    auto r = import(NestedIfModelBytes(levels));
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kResourceExhausted);
    CHECK(r.status().message() ==
          "ONNX model bytes: subgraphs (If/Loop/Scan bodies) nest deeper than max_subgraph_depth 32: level 33 at "
          "main graph > node 'if_0' (If) attribute 'then_branch' > node 'if_1' (If) attribute 'then_branch' > "
          "node 'if_2' (If) attribute 'then_branch' > ... (27 levels) ... > node 'if_30' (If) attribute "
          "'then_branch' > node 'if_31' (If) attribute 'then_branch' > node 'if_32' (If) attribute 'then_branch'");
  }
  // The option moves the limit, within what the stack allows.
  ImportOptions deep;
  deep.max_subgraph_depth = kiln::onnx_import::kMaxSubgraphDepthLimit;
  CHECK(import(NestedIfModelBytes(kiln::onnx_import::kMaxSubgraphDepthLimit), deep).ok());
  ImportOptions shallow;
  shallow.max_subgraph_depth = 0;
  auto flat = import(NestedIfModelBytes(1), shallow);
  CHECK(flat.status().code() == StatusCode::kResourceExhausted);
  CHECK(Contains(flat.status().message(), "level 1 at main graph > node 'if_0' (If) attribute 'then_branch'"));
  ImportOptions bad;
  bad.max_subgraph_depth = kiln::onnx_import::kMaxSubgraphDepthLimit + 1;
  auto refused = import(NestedIfModelBytes(1), bad);
  CHECK(refused.status().code() == StatusCode::kInvalidArgument);
  CHECK(refused.status().message() == "max_subgraph_depth is 257, expected 0..256");

  // Unnamed nodes are named by index; a Loop body counts like an If branch.
  auto m = MakeModel(13);
  onnx::GraphProto* g = m.mutable_graph();
  for (int level = 0; level < 2; ++level) {
    auto* loop = AddNode(g, "Loop", {}, {});
    auto* a = loop->add_attribute();
    a->set_name("body");
    a->set_type(onnx::AttributeProto::GRAPH);
    g = a->mutable_g();
  }
  ImportOptions one;
  one.max_subgraph_depth = 1;
  auto loops = Import(m, one);
  CHECK(loops.status().code() == StatusCode::kResourceExhausted);
  CHECK(Contains(loops.status().message(),
                 "level 2 at main graph > node #0 (Loop) attribute 'body' > node #0 (Loop) attribute 'body'"));

  // Model-local functions nest the same way (the parser recursed through them too).
  auto f = ReluModel();
  auto* fn = f.add_functions();
  fn->set_name("f");
  onnx::NodeProto* node = fn->add_node();
  for (int level = 0; level < 2; ++level) {
    node->set_op_type("If");
    node->set_name("fif" + std::to_string(level));
    auto* a = node->add_attribute();
    a->set_name("then_branch");
    a->set_type(onnx::AttributeProto::GRAPH);
    node = a->mutable_g()->add_node();
  }
  auto functions = Import(f, one);
  CHECK(functions.status().code() == StatusCode::kResourceExhausted);
  CHECK(Contains(functions.status().message(), "level 2 at function 'f' > node 'fif0' (If) attribute 'then_branch' > "
                                               "node 'fif1' (If) attribute 'then_branch'"));
}

TEST_CASE("onnx import: external data is read relative to the model folder") {
  TempDir dir;
  // 8 bytes of padding, then 4 floats.
  std::string blob(8, '\x7f');
  const float w[4] = {1, 2, 3, 4};
  blob.append(reinterpret_cast<const char*>(w), sizeof(w));
  fs::create_directories(dir.path / "data");
  WriteBytes(dir / "data/w.bin", blob);

  auto make = [](const std::string& location, const std::string& offset,
                 const std::optional<std::string>& length = "16") {
    auto m = MakeModel(13);
    auto* g = m.mutable_graph();
    AddInput(g, "x", {"4"});
    auto* t = g->add_initializer();
    t->set_name("w");
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_dims(4);
    t->set_data_location(onnx::TensorProto::EXTERNAL);
    auto* e = t->add_external_data();
    e->set_key("location");
    e->set_value(location);
    e = t->add_external_data();
    e->set_key("offset");
    e->set_value(offset);
    if (length) {
      e = t->add_external_data();
      e->set_key("length");
      e->set_value(*length);
    }
    AddNode(g, "Add", {"x", "w"}, {"y"});
    AddOutput(g, "y");
    return m;
  };
  auto save = [&](const onnx::ModelProto& m) {
    std::string bytes;
    REQUIRE(m.SerializeToString(&bytes));
    WriteBytes(dir / "model.onnx", bytes);
    return dir / "model.onnx";
  };

  auto ok = ImportOnnxFile(save(make("data/w.bin", "8")), {});
  REQUIRE(ok.ok());
  const Value& wv = ok->value(FindValue(*ok, "w"));
  REQUIRE(wv.is_const());
  CHECK(wv.data->FloatAt(0) == 1.0);
  CHECK(wv.data->FloatAt(3) == 4.0);
  CHECK(Contains(ok->provenance, "imported from model.onnx (opset 13"));

  auto escape = ImportOnnxFile(save(make("../w.bin", "0")), {});
  REQUIRE_FALSE(escape.ok());
  CHECK(escape.status().code() == StatusCode::kDataLoss);
  CHECK(Contains(escape.status().message(), "initializer 'w'"));
  CHECK(Contains(escape.status().message(), "'../w.bin'"));
  CHECK(Contains(escape.status().message(), "escapes the model folder"));

  auto absolute = ImportOnnxFile(save(make((dir.path / "data/w.bin").string(), "8")), {});
  REQUIRE_FALSE(absolute.ok());
  CHECK(absolute.status().code() == StatusCode::kDataLoss);
  CHECK(Contains(absolute.status().message(), "absolute path"));

  auto range = ImportOnnxFile(save(make("data/w.bin", "16")), {});
  REQUIRE_FALSE(range.ok());
  CHECK(range.status().code() == StatusCode::kDataLoss);
  CHECK(Contains(range.status().message(), "initializer 'w'"));
  CHECK(Contains(range.status().message(), "w.bin"));
  CHECK(Contains(range.status().message(), "outside file"));

  auto missing = ImportOnnxFile(save(make("data/nope.bin", "0")), {});
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == StatusCode::kNotFound);
  CHECK(missing.status().message() == "initializer 'w': external data file '" + (dir / "data/nope.bin") + "' does not exist");

  // Offsets and lengths: negative, not a number, over int64; a length the dims do not need.
  struct BadNumber {
    const char* offset;
    const char* length;
    const char* named;  // as the message quotes it
  };
  for (const BadNumber& b : {BadNumber{"-8", "16", "offset '-8'"}, BadNumber{"8x", "16", "offset '8x'"},
                             BadNumber{"99999999999999999999", "16", "offset '99999999999999999999'"},
                             BadNumber{"8", "-16", "length '-16'"}, BadNumber{"8", "", "length ''"}}) {
    auto r = ImportOnnxFile(save(make("data/w.bin", b.offset, b.length)), {});
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kDataLoss);
    CHECK(r.status().message() == std::string("initializer 'w': external data ") + b.named +
                                      " (file 'data/w.bin') is not an integer in 0..9223372036854775807");
  }
  auto length = ImportOnnxFile(save(make("data/w.bin", "8", "12")), {});
  CHECK(length.status().code() == StatusCode::kDataLoss);
  CHECK(length.status().message() == "initializer 'w': external data length is 12 bytes, expected 16 for float32[4] (file '" +
                                         (dir / "data/w.bin") + "')");
  // No 'length': the data runs to the end of the file (onnx's external_data_helper reads it so),
  // which must then be the tensor's 16 bytes exactly.
  auto to_end = ImportOnnxFile(save(make("data/w.bin", "8", std::nullopt)), {});
  REQUIRE_MESSAGE(to_end.ok(), to_end.status().ToString());
  CHECK(to_end->value(FindValue(*to_end, "w")).data->FloatAt(3) == 4.0);
  for (const auto& [offset, left] : {std::pair{"4", "20"}, std::pair{"12", "12"}}) {
    auto r = ImportOnnxFile(save(make("data/w.bin", offset, std::nullopt)), {});
    CHECK(r.status().code() == StatusCode::kDataLoss);
    CHECK(r.status().message() == std::string("initializer 'w': external data has no 'length', so it is the ") + left +
                                      " bytes from offset " + offset + " to the end of file '" + (dir / "data/w.bin") +
                                      "', but float32[4] needs 16");
  }
  auto past_end = ImportOnnxFile(save(make("data/w.bin", "9223372036854775807")), {});
  CHECK(past_end.status().code() == StatusCode::kDataLoss);
  CHECK(Contains(past_end.status().message(), "range [9223372036854775807, 9223372036854775823) is outside file"));

  // A folder, a NUL byte, symlinks out of the folder (to a file, through a folder).
  auto folder = ImportOnnxFile(save(make("data", "0")), {});
  CHECK(folder.status().code() == StatusCode::kDataLoss);
  CHECK(folder.status().message() == "initializer 'w': external data file '" + (dir / "data") +
                                         "' is a directory, expected a file");
  auto nul = ImportOnnxFile(save(make(std::string("data/w.bin\0../../x", 18), "8")), {});
  CHECK(nul.status().code() == StatusCode::kDataLoss);
  CHECK(Contains(nul.status().message(), "contains a NUL byte"));
  TempDir outside;
  WriteBytes(outside / "w.bin", blob);
  fs::create_symlink(outside.path / "w.bin", dir.path / "data/link.bin");
  fs::create_directory_symlink(outside.path, dir.path / "data/out");
  for (const char* location : {"data/link.bin", "data/out/w.bin"}) {
    auto r = ImportOnnxFile(save(make(location, "8")), {});
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kDataLoss);
    CHECK(Contains(r.status().message(), "initializer 'w': external data file '" + std::string(location) + "' resolves to '" +
                                             fs::canonical(outside.path / "w.bin").string() + "', outside the model folder"));
  }
  // A symlink that stays inside the folder is fine.
  fs::create_symlink("w.bin", dir.path / "data/alias.bin");
  CHECK(ImportOnnxFile(save(make("data/alias.bin", "8")), {}).ok());

  // Given as bytes without a folder, external data cannot be resolved.
  auto nobase = Import(make("data/w.bin", "8"));
  REQUIRE_FALSE(nobase.ok());
  CHECK(nobase.status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("onnx import: malformed files are DataLoss, never a crash") {
  const std::string garbage = "\xff\xff\xff\xff this is not protobuf \x01\x02";
  auto r = ImportOnnxBytes({reinterpret_cast<const uint8_t*>(garbage.data()), garbage.size()}, "", {});
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kDataLoss);
  CHECK(r.status().message().rfind("not an ONNX ModelProto: ", 0) == 0);

  auto empty = ImportOnnxBytes({}, "", {});
  REQUIRE_FALSE(empty.ok());
  CHECK(empty.status().code() == StatusCode::kDataLoss);
  CHECK(empty.status().message().rfind("not an ONNX ModelProto: ", 0) == 0);

  // Truncations of a valid model: each is an error or a valid import, never a crash.
  std::string bytes;
  REQUIRE(ReluModel().SerializeToString(&bytes));
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto t = ImportOnnxBytes({reinterpret_cast<const uint8_t*>(bytes.data()), n}, "", {});
    if (!t.ok()) CHECK(t.status().code() != StatusCode::kInternal);
  }

  auto missing_file = ImportOnnxFile("/nonexistent/kiln/model.onnx", {});
  CHECK(missing_file.status().code() == StatusCode::kNotFound);

  ImportOptions small;
  small.max_file_bytes = 4;
  auto big = ImportOnnxBytes({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}, "", small);
  CHECK(big.status().code() == StatusCode::kResourceExhausted);
}

TEST_CASE("onnx import: bad tensors are precise DataLoss errors") {
  {
    auto m = ReluModel();
    auto* t = AddFloatInit(m.mutable_graph(), "w", {2, 3}, {1, 2, 3});
    (void)t;
    auto r = Import(m);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kDataLoss);
    CHECK(r.status().message() == "initializer 'w': float_data has 3 values, expected 6 for float32[2, 3]");
  }
  {
    auto m = ReluModel();
    auto* t = AddFloatInit(m.mutable_graph(), "w", {2}, {});
    t->set_raw_data(std::string(7, '\0'));
    auto r = Import(m);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message() == "initializer 'w': raw_data has 7 bytes, expected 8 for float32[2]");
  }
  {
    auto m = ReluModel();
    AddFloatInit(m.mutable_graph(), "w", {-1}, {});
    auto r = Import(m);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kDataLoss);
    CHECK(Contains(r.status().message(), "dim 0 is -1"));
  }
  {
    auto m = ReluModel();
    AddFloatInit(m.mutable_graph(), "w", {1ll << 40, 1ll << 40}, {});
    auto r = Import(m);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kDataLoss);
    CHECK(Contains(r.status().message(), "overflows int64"));
  }
  {
    // Huge dims with (almost) no data: an error, never a huge allocation.
    auto m = ReluModel();
    AddFloatInit(m.mutable_graph(), "w", {1ll << 30, 1ll << 30}, {1.0f});
    auto r = Import(m);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kDataLoss);
    CHECK(Contains(r.status().message(), "float_data has 1 values"));
  }
  {
    // The same with raw_data, in a Constant node: the size check comes before any copy.
    auto m = ReluModel();
    auto* c = AddNode(m.mutable_graph(), "Constant", {}, {"k"}, "huge");
    auto* a = c->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    a->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
    a->mutable_t()->add_dims(1ll << 30);
    a->mutable_t()->add_dims(1ll << 30);
    a->mutable_t()->set_raw_data(std::string(8, '\0'));
    auto r = Import(m);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kDataLoss);
    CHECK(r.status().message() == "node 'huge' (Constant) attribute 'value': raw_data has 8 bytes, expected "
                                  "4611686018427387904 for float32[1073741824, 1073741824]");
  }
}

TEST_CASE("onnx import: constants over max_constant_bytes in total are refused before they are copied") {
  // Many initializers may name the same external bytes: a small model could ask for terabytes.
  auto m = ReluModel();
  AddFloatInit(m.mutable_graph(), "w1", {4}, {1, 2, 3, 4});
  AddFloatInit(m.mutable_graph(), "w2", {4}, {1, 2, 3, 4});
  ImportOptions opts;
  opts.max_constant_bytes = 24;
  auto r = Import(m, opts);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kResourceExhausted);
  CHECK(r.status().message() ==
        "initializer 'w2': 16 bytes bring the model's constants to 32 bytes, over max_constant_bytes 24");
  opts.max_constant_bytes = 32;
  CHECK(Import(m, opts).ok());
}

TEST_CASE("onnx import: unknown input names, domains and old opsets") {
  auto m = ReluModel();
  AddNode(m.mutable_graph(), "Add", {"y", "ghost"}, {"z"}, "adder");
  auto r = Import(m);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kDataLoss);
  CHECK(r.status().message() ==
        "node 'adder' (Add): input #1 'ghost' is not defined by any earlier node, initializer or graph input");

  auto md = ReluModel();
  auto* n = AddNode(md.mutable_graph(), "FusedGelu", {"y"}, {"z"}, "fg");
  n->set_domain("com.microsoft");
  auto rd = Import(md);
  REQUIRE_FALSE(rd.ok());
  CHECK(rd.status().code() == StatusCode::kUnimplemented);
  CHECK(Contains(rd.status().message(), "'fg'"));
  CHECK(Contains(rd.status().message(), "'com.microsoft'"));
  CHECK(Contains(rd.status().message(), "'FusedGelu'"));

  auto r0 = Import(ReluModel(0));
  REQUIRE_FALSE(r0.ok());
  CHECK(r0.status().code() == StatusCode::kUnimplemented);
  CHECK(Contains(r0.status().message(), "opset 0 is not supported; Kiln supports opsets 1 to 27"));
}

TEST_CASE("onnx import: duplicate and empty node names are made unique, empty inputs are absent") {
  auto m = MakeModel(13);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"4"});
  AddNode(g, "Relu", {"x"}, {"a"}, "same");
  AddNode(g, "Relu", {"a"}, {"b"}, "same");
  AddNode(g, "Clip", {"b", "", "hi"}, {"c"});
  AddFloatInit(g, "hi", {}, {6.0f});
  AddOutput(g, "c");
  auto r = Import(m);
  REQUIRE(r.ok());
  CHECK(r->body.nodes[0].name == "same");
  CHECK(r->body.nodes[1].name == "same_1");
  CHECK(r->body.nodes[2].name == "Clip_2");
  CHECK(r->body.nodes[2].inputs[1] == kNoValue);
  CHECK(Contains(r->Print(), "c = Clip(b, _, hi)"));
}

TEST_CASE("onnx import: value_info dtype and shape are kept for intermediate values") {
  auto m = ReluModel();
  AddValueInfo(m.mutable_graph()->mutable_value_info(), "y", onnx::TensorProto::FLOAT, {"N", "4"});
  auto r = Import(m);
  REQUIRE(r.ok());
  const Value& y = r->value(r->outputs[0]);
  CHECK(y.dtype == DType::kFloat32);
  REQUIRE(y.shape.size() == 2);
  CHECK(y.shape[0].name() == "N");
  CHECK(Contains(r->Print(), "y = Relu(x) # float32[N, 4]"));
}

// The real models, when this machine has them (a development checkout; CI may not).
TEST_CASE("onnx import: the shared real models import") {
  const fs::path root = "/work/shared/models";
  if (!fs::is_directory(root)) return;
  int count = 0;
  for (const auto& entry : fs::directory_iterator(root)) {
    const fs::path model = entry.path() / "model.onnx";
    if (!fs::is_regular_file(model)) continue;
    CAPTURE(model.string());
    auto r = ImportOnnxFile(model.string(), {});
    REQUIRE(r.ok());
    CHECK_FALSE(r->Print().empty());
    CHECK_FALSE(r->outputs.empty());
    ++count;
  }
}

TEST_CASE("onnx import: RoiAlign before opset 16 gets RoiAlign-10's output_half_pixel coordinates") {
  for (int64_t opset : {10, 16}) {
    auto m = MakeModel(opset);
    auto* g = m.mutable_graph();
    AddInput(g, "x", {"1", "1", "4", "4"});
    AddInput(g, "rois", {"1", "4"});
    AddInput(g, "idx", {"1"}, onnx::TensorProto::INT64);
    AddNode(g, "RoiAlign", {"x", "rois", "idx"}, {"y"}, "roi");
    AddOutput(g, "y");
    auto t = Import(m);
    REQUIRE_MESSAGE(t.ok(), t.status().ToString());
    REQUIRE(t->body.nodes.size() == 1);
    CHECK(t->body.nodes[0].attrs.GetString("coordinate_transformation_mode", "") ==
          (opset == 10 ? "output_half_pixel" : ""));
  }
}
