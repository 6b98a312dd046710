#include "compiler/onnx/subgraph_depth.h"

#include <optional>
#include <vector>

namespace kiln::onnx_import {
namespace {

// The messages on the path to a subgraph, and the field numbers (onnx.proto) that lead on.
// A model-local function (FunctionProto) holds nodes as a graph does, at level 0.
enum class Kind { kModel, kGraph, kFunction, kNode, kAttribute };
constexpr uint32_t kModelGraph = 7, kModelFunctions = 25, kGraphNode = 1, kFunctionName = 1, kFunctionNode = 7,
                   kNodeName = 3, kNodeOpType = 4, kNodeAttribute = 5, kAttributeName = 1, kAttributeG = 6,
                   kAttributeGraphs = 11;

bool HoldsNodes(Kind k) { return k == Kind::kGraph || k == Kind::kFunction; }

struct Frame {
  Frame(Kind k, size_t e) : kind(k), end(e) {}
  Kind kind;
  size_t end;         // offset one past the message's last byte
  int nodes = 0;      // kGraph, kFunction: nodes seen so far
  int index = 0;      // kNode: its index in the graph
  std::string name;   // kFunction, kNode, kAttribute: as read so far
  std::string op;     // kNode
};

std::optional<uint64_t> ReadVarint(std::span<const uint8_t> b, size_t& pos, size_t end) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64 && pos < end; shift += 7) {
    const uint8_t byte = b[pos++];
    v |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if (!(byte & 0x80)) return v;
  }
  return std::nullopt;
}

// "main graph > node 'a' (If) attribute 'then_branch' > ...", the middle elided past 6 levels;
// "function 'f' > ..." inside a model-local function.
std::string PathText(const std::vector<Frame>& stack) {
  std::vector<std::string> hops;
  for (size_t i = 0; i < stack.size(); ++i) {
    const Frame& f = stack[i];
    if (f.kind == Kind::kNode) {
      std::string node = f.name.empty() ? "node #" + std::to_string(f.index) : "node '" + f.name + "'";
      hops.push_back(node + " (" + (f.op.empty() ? std::string("no op_type") : f.op) + ")");
    } else if (f.kind == Kind::kAttribute) {
      hops.back() += " attribute '" + f.name + "'";
    }
  }
  std::string s = stack.size() > 1 && stack[1].kind == Kind::kFunction ? "function '" + stack[1].name + "'"
                                                                       : std::string("main graph");
  for (size_t i = 0; i < hops.size(); ++i) {
    if (hops.size() > 6 && i == 3) {
      s += " > ... (" + std::to_string(hops.size() - 6) + " levels) ...";
      i = hops.size() - 3;
    }
    s += " > " + hops[i];
  }
  return s;
}

}  // namespace

Status CheckSubgraphDepth(std::span<const uint8_t> bytes, int max_depth, const std::string& source) {
  std::vector<Frame> stack{Frame(Kind::kModel, bytes.size())};
  int depth = -1;  // of the innermost graph on the stack
  size_t pos = 0;
  while (!stack.empty()) {
    Frame& f = stack.back();
    if (pos >= f.end) {
      if (HoldsNodes(f.kind)) --depth;
      stack.pop_back();
      continue;
    }
    const auto tag = ReadVarint(bytes, pos, f.end);
    if (!tag) return Status::Ok();  // malformed: the parser says so
    const uint32_t field = static_cast<uint32_t>(*tag >> 3);
    switch (*tag & 7) {
      case 0:
        if (!ReadVarint(bytes, pos, f.end)) return Status::Ok();
        continue;
      case 1: pos += 8; continue;
      case 5: pos += 4; continue;
      case 2: break;
      default: return Status::Ok();  // groups (not used by onnx.proto) or invalid wire types
    }
    const auto len = ReadVarint(bytes, pos, f.end);
    if (!len || *len > f.end - pos) return Status::Ok();
    const size_t end = pos + static_cast<size_t>(*len);
    std::optional<Kind> child;
    if (f.kind == Kind::kModel && field == kModelGraph) child = Kind::kGraph;
    if (f.kind == Kind::kModel && field == kModelFunctions) child = Kind::kFunction;
    if (f.kind == Kind::kGraph && field == kGraphNode) child = Kind::kNode;
    if (f.kind == Kind::kFunction && field == kFunctionNode) child = Kind::kNode;
    if (f.kind == Kind::kNode && field == kNodeAttribute) child = Kind::kAttribute;
    if (f.kind == Kind::kAttribute && (field == kAttributeG || field == kAttributeGraphs)) child = Kind::kGraph;
    if (!child) {
      std::string* text = f.kind == Kind::kNode && field == kNodeName        ? &f.name
                          : f.kind == Kind::kNode && field == kNodeOpType    ? &f.op
                          : f.kind == Kind::kAttribute && field == kAttributeName ? &f.name
                          : f.kind == Kind::kFunction && field == kFunctionName   ? &f.name
                                                                                   : nullptr;
      if (text) text->assign(reinterpret_cast<const char*>(bytes.data() + pos), end - pos);
      pos = end;
      continue;
    }
    Frame next(*child, end);
    if (*child == Kind::kNode) next.index = f.nodes++;
    if (HoldsNodes(*child) && ++depth > max_depth)
      return ResourceExhausted(source + ": subgraphs (If/Loop/Scan bodies) nest deeper than max_subgraph_depth " +
                               std::to_string(max_depth) + ": level " + std::to_string(depth) + " at " +
                               PathText(stack));
    stack.push_back(std::move(next));
  }
  return Status::Ok();
}

}  // namespace kiln::onnx_import
