// The op-version table (compiler/onnx/op_versions.cc) and the importer's per-node guard.
#include "compiler/onnx/op_versions.h"

#include <doctest/doctest.h>
#include <onnx/onnx_pb.h>

#include <string>

#include "tests/compiler/onnx_model_builder.h"

using kiln::StatusCode;
using kiln::onnx_import::CheckOpVersion;
using kiln::onnx_import::OpVersionRows;
using kiln::onnx_import::OpVersionTable;
using kiln::onnx_import::VersionSupport;
using namespace kiln::testing;  // NOLINT: the model-building helpers

namespace {

// x[2,4] -> OP -> y at `opset`, the node named "n".
onnx::ModelProto OneOp(int64_t opset, const std::string& op, std::vector<std::string> ins = {"x"}) {
  auto m = MakeModel(opset);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"2", "4"});
  AddNode(g, op, ins, {"y"}, "n");
  AddOutput(g, "y");
  return m;
}

std::string ImportError(const onnx::ModelProto& m) {
  auto r = Import(m);
  if (r.ok()) return "ok";
  CHECK(r.status().code() == StatusCode::kUnimplemented);
  return r.status().message();
}

}  // namespace

TEST_CASE("op versions: the table is sorted by op then version, rows unique, refusals say why") {
  const auto table = OpVersionTable();
  REQUIRE(!table.empty());
  for (size_t i = 1; i < table.size(); ++i) {
    const auto &a = table[i - 1], &b = table[i];
    const std::string order = std::string(a.op) + "-" + std::to_string(a.since) + " then " + std::string(b.op);
    CHECK_MESSAGE((a.op < b.op || (a.op == b.op && (a.since < b.since || (a.since == b.since && a.attr < b.attr)))),
                  order);
  }
  for (const auto& row : table) {
    CHECK(!row.note.empty());
    CHECK((row.support == VersionSupport::kRefusedIfAttr) == !row.attr.empty());
  }
}

TEST_CASE("op versions: the rows in effect are the op's newest version at or below the opset") {
  CHECK(OpVersionRows("Add", 6).size() == 1);
  CHECK(OpVersionRows("Add", 6)[0].since == 1);
  CHECK(OpVersionRows("Add", 7)[0].since == 7);
  CHECK(OpVersionRows("Add", 27)[0].since == 7);
  CHECK(OpVersionRows("Attention", 24).empty());
  CHECK(OpVersionRows("Attention", 27).size() == 2);  // one row per guarded attribute
  CHECK(OpVersionRows("Reshape", 24)[0].since == 5);
  CHECK(OpVersionRows("Reshape", 25)[0].since == 25);
  CHECK(OpVersionRows("Relu", 27).empty());
  CHECK(OpVersionRows("Abs", 1).empty());

  kiln::AttrMap attrs;
  CHECK(CheckOpVersion("Attention", 27, attrs, "node 'a' (Attention)").ok());
  attrs.SetInt("left_window_size", -1);  // the default: no window
  CHECK(CheckOpVersion("Attention", 27, attrs, "node 'a' (Attention)").ok());
  attrs.SetInt("right_window_size", 0);
  auto st = CheckOpVersion("Attention", 27, attrs, "node 'a' (Attention)");
  CHECK(st.code() == StatusCode::kUnimplemented);
  CHECK(st.message() == "node 'a' (Attention): Attention-25 (opset 27) with attribute 'right_window_size' = 0: "
                        "sliding-window masks are not implemented");
  CHECK(CheckOpVersion("Attention", 24, attrs, "node 'a' (Attention)").ok());  // before the attribute existed
}

TEST_CASE("op versions: at opset 27 a changed op is refused precisely, unchanged ones import") {
  auto m = OneOp(25, "Attention", {"x", "x", "x"});
  AttrInt(m.mutable_graph()->mutable_node(0), "left_window_size", 2);
  CHECK(ImportError(m) == "node 'n' (Attention): Attention-25 (opset 25) with attribute 'left_window_size' = 2: "
                          "sliding-window masks are not implemented");
  // Reshape-25 and Transpose-25 only add int2/uint2; Relu has not changed since 14.
  for (const char* op : {"Transpose", "Relu", "Identity"}) CHECK(ImportError(OneOp(27, op)) == "ok");
  auto r = OneOp(27, "Reshape", {"x", "s"});
  AddInt64Init(r.mutable_graph(), "s", {1}, {8});
  CHECK(ImportError(r) == "ok");
  CHECK(ImportError(OneOp(28, "Relu")) == "ONNX model bytes: opset 28 is not supported; Kiln supports opsets 1 to 27");
}

TEST_CASE("op versions: opsets below 7 import the unchanged ops and rewrite or refuse the legacy forms") {
  CHECK(ImportError(OneOp(1, "Not")) == "ok");
  CHECK(ImportError(OneOp(1, "Tile", {"x", "x", "x"})) ==
        "node 'n' (Tile): Tile-1 (opset 1): Tile-1's (tiles, axis) inputs are not implemented; Kiln implements "
        "Tile-6's per-axis 'repeats'");
  CHECK(ImportError(OneOp(6, "Tile", {"x", "x"})) == "ok");

  // Legacy broadcasting: aligned at an axis is refused; the flag alone is dropped.
  auto add = OneOp(6, "Add", {"x", "x"});
  AttrInt(add.mutable_graph()->mutable_node(0), "broadcast", 1);
  auto ok = Import(add);
  REQUIRE(ok.ok());
  CHECK(ok->body.nodes[0].attrs.items().empty());
  AttrInt(add.mutable_graph()->mutable_node(0), "axis", 1);
  CHECK(ImportError(add) == "node 'n' (Add): Add-1 (opset 6) with attribute 'axis' = 1: legacy broadcasting "
                            "aligned at 'axis' is not implemented (Kiln broadcasts as numpy, the opset-7 form)");
  add.mutable_opset_import(0)->set_version(7);  // Add-7 has neither attribute: an invalid model
  auto seven = Import(add);
  CHECK(seven.status().code() == StatusCode::kInvalidArgument);
  CHECK(seven.status().message() ==
        "node 'n' (Add) attribute 'broadcast': Add-7 (the version at opset 7) has no such attribute (it has none)");

  // Rewritten forms: Cast-1's type name, Concat-1's default axis, Reshape-1's shape attribute,
  // Relu-1's consumed_inputs hint.
  auto cast = OneOp(1, "Cast");
  AttrString(cast.mutable_graph()->mutable_node(0), "to", "INT64");
  auto c = Import(cast);
  REQUIRE(c.ok());
  CHECK(c->body.nodes[0].attrs.GetInt("to", 0) == onnx::TensorProto::INT64);
  auto concat = Import(OneOp(3, "Concat", {"x", "x"}));
  REQUIRE(concat.ok());
  CHECK(concat->body.nodes[0].attrs.GetInt("axis", 0) == 1);
  auto reshape = OneOp(4, "Reshape");
  AttrInts(reshape.mutable_graph()->mutable_node(0), "shape", {4, 2});
  auto rs = Import(reshape);
  REQUIRE(rs.ok());
  REQUIRE(rs->body.nodes[0].inputs.size() == 2);
  const auto& shape = rs->value(rs->body.nodes[0].inputs[1]);
  REQUIRE(shape.is_const());
  CHECK(shape.data->IntAt(0) == 4);
  CHECK(shape.data->IntAt(1) == 2);
  CHECK_FALSE(rs->body.nodes[0].attrs.Has("shape"));
  auto relu = OneOp(5, "Relu");
  AttrInts(relu.mutable_graph()->mutable_node(0), "consumed_inputs", {0});
  auto rr = Import(relu);
  REQUIRE(rr.ok());
  CHECK(rr->body.nodes[0].attrs.items().empty());
}
