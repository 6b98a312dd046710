// Helpers that build small ONNX ModelProtos in C++ (no Python at test time), for the
// importer, pass and artifact tests.
#pragma once

#include <doctest/doctest.h>
#include <onnx/onnx_pb.h>

#include <cctype>
#include <string>
#include <vector>

#include "compiler/onnx/importer.h"
#include "compiler/passes/canonicalize.h"

namespace kiln::testing {

using kiln::ir::Trace;
using kiln::onnx_import::ImportOnnxBytes;
using kiln::onnx_import::ImportOptions;

inline onnx::ModelProto MakeModel(int64_t opset) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("kiln-test");
  m.set_producer_version("1.0");
  auto* os = m.add_opset_import();
  os->set_domain("");
  os->set_version(opset);
  m.mutable_graph()->set_name("g");
  return m;
}

// dims: a number is dim_value, "?" an unknown dim, anything else a dim_param.
inline void AddValueInfo(google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>* list,
                  const std::string& name, int elem, const std::vector<std::string>& dims) {
  auto* vi = list->Add();
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem);
  auto* shape = tt->mutable_shape();
  for (const auto& d : dims) {
    auto* dim = shape->add_dim();
    if (d == "?") continue;
    if (std::isdigit(static_cast<unsigned char>(d[0])) || d[0] == '-') dim->set_dim_value(std::stoll(d));
    else dim->set_dim_param(d);
  }
}
inline void AddInput(onnx::GraphProto* g, const std::string& name, const std::vector<std::string>& dims,
              int elem = onnx::TensorProto::FLOAT) {
  AddValueInfo(g->mutable_input(), name, elem, dims);
}
inline void AddOutput(onnx::GraphProto* g, const std::string& name) { g->add_output()->set_name(name); }

inline onnx::NodeProto* AddNode(onnx::GraphProto* g, const std::string& op, std::vector<std::string> ins,
                         std::vector<std::string> outs, const std::string& name = "") {
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (auto& i : ins) n->add_input(i);
  for (auto& o : outs) n->add_output(o);
  return n;
}
inline void AttrInt(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}
inline void AttrString(onnx::NodeProto* n, const std::string& name, const std::string& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}
inline void AttrFloat(onnx::NodeProto* n, const std::string& name, float v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}
inline void AttrInts(onnx::NodeProto* n, const std::string& name, std::vector<int64_t> v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (auto x : v) a->add_ints(x);
}
inline void AttrStrings(onnx::NodeProto* n, const std::string& name, const std::vector<std::string>& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRINGS);
  for (const auto& x : v) a->add_strings(x);
}
inline void AttrFloats(onnx::NodeProto* n, const std::string& name, std::vector<float> v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOATS);
  for (auto x : v) a->add_floats(x);
}
inline onnx::TensorProto* AddFloatInit(onnx::GraphProto* g, const std::string& name,
                                std::vector<int64_t> dims, std::vector<float> vals) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (auto d : dims) t->add_dims(d);
  for (auto v : vals) t->add_float_data(v);
  return t;
}

// An initializer of `dtype` (ONNX's TensorProto data type) from raw bytes: the elements of `v`.
template <typename T>
void AddRawInit(onnx::GraphProto* g, const std::string& name, int dtype, std::vector<int64_t> dims,
                const std::vector<T>& v) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(dtype);
  for (int64_t d : dims) t->add_dims(d);
  t->set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T)));
}

inline kiln::Result<Trace> Import(const onnx::ModelProto& m, const ImportOptions& opts = {},
                           const std::string& base_dir = "") {
  std::string bytes;
  REQUIRE(m.SerializeToString(&bytes));
  return ImportOnnxBytes({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}, base_dir, opts);
}

inline onnx::TensorProto* AddInt64Init(onnx::GraphProto* g, const std::string& name,
                                std::vector<int64_t> dims, std::vector<int64_t> vals) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  for (auto d : dims) t->add_dims(d);
  for (auto v : vals) t->add_int64_data(v);
  return t;
}

// Adds a GRAPH attribute `name` ("then_branch", "else_branch") to an If node; returns the graph.
inline onnx::GraphProto* AddBranch(onnx::NodeProto* if_node, const std::string& name) {
  auto* a = if_node->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::GRAPH);
  return a->mutable_g();
}

// A serialized ModelProto (opset 13) whose main graph holds one If node 'if_0', whose
// then_branch holds 'if_1', and so on, `levels` subgraphs deep (the innermost graph empty).
// Written on the wire directly, from the sizes computed inside out: protobuf's serializer
// (and the destructor of a parsed ModelProto) recurse once per nested message.
inline std::string NestedIfModelBytes(int levels) {
  auto varint = [](std::string& s, uint64_t v) {
    for (; v >= 0x80; v >>= 7) s += static_cast<char>(v | 0x80);
    s += static_cast<char>(v);
  };
  auto varint_size = [](uint64_t v) {
    size_t n = 1;
    for (; v >= 0x80; v >>= 7) ++n;
    return n;
  };
  auto field_size = [&](uint32_t number, size_t len) { return varint_size(number << 3 | 2) + varint_size(len) + len; };
  auto field = [&](std::string& s, uint32_t number, size_t len) {
    varint(s, number << 3 | 2);
    varint(s, len);
  };
  auto text = [&](std::string& s, uint32_t number, const std::string& t) {
    field(s, number, t.size());
    s += t;
  };
  const auto name = [](int k) { return "if_" + std::to_string(k); };
  // GraphProto{node: NodeProto{name: 3, op_type: 4, attribute: 5 AttributeProto{name: 1,
  // type: 20 (GRAPH = 5), g: 6 GraphProto}}}.
  std::vector<size_t> graph(levels + 1, 0), node(levels), attr(levels);
  for (int k = levels - 1; k >= 0; --k) {
    attr[k] = field_size(1, 11) + 3 + field_size(6, graph[k + 1]);
    node[k] = field_size(3, name(k).size()) + field_size(4, 2) + field_size(5, attr[k]);
    graph[k] = field_size(1, node[k]);
  }
  std::string s;
  varint(s, 1 << 3);  // ir_version 8
  varint(s, 8);
  field(s, 8, 2);     // opset_import {version 13}
  varint(s, 2 << 3);
  varint(s, 13);
  field(s, 7, graph[0]);
  for (int k = 0; k < levels; ++k) {
    field(s, 1, node[k]);
    text(s, 3, name(k));
    text(s, 4, "If");
    field(s, 5, attr[k]);
    text(s, 1, "then_branch");
    varint(s, 20 << 3);
    varint(s, onnx::AttributeProto::GRAPH);
    field(s, 6, graph[k + 1]);
  }
  return s;
}

// out = (Shape(x)[0] == 1): the exporter's pattern behind `if x.size(0) == 1`.
inline void AddFirstDimIsOne(onnx::GraphProto* g, const std::string& x, const std::string& out) {
  AddInt64Init(g, out + "_zero", {}, {0});
  AddInt64Init(g, out + "_one", {}, {1});
  AddNode(g, "Shape", {x}, {out + "_shape"});
  AttrInt(AddNode(g, "Gather", {out + "_shape", out + "_zero"}, {out + "_dim0"}), "axis", 0);
  AddNode(g, "Equal", {out + "_dim0", out + "_one"}, {out});
}

// The op of each node of `t`'s body, in order.
inline std::vector<std::string> Ops(const Trace& t) {
  std::vector<std::string> ops;
  for (const auto& n : t.body.nodes) ops.push_back(n.op);
  return ops;
}

// Imports `m` (which must import) and runs the canonical stage on it.
inline kiln::Result<kiln::passes::CanonicalizeResult> Canonical(
    const onnx::ModelProto& m, const ImportOptions& options = {},
    const std::vector<kiln::passes::Assumption>& assumptions = {}) {
  auto imported = Import(m, options);
  REQUIRE_MESSAGE(imported.ok(), imported.status().ToString());
  return kiln::passes::Canonicalize(*imported, assumptions);
}

}  // namespace kiln::testing
