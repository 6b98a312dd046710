// compiler/onnx/subgraph_depth.h: bounds the nesting of ONNX subgraphs (the GRAPH and GRAPHS
// attributes of If, Loop and Scan nodes) before the model is parsed.
//
// A hostile model can nest subgraphs thousands of levels deep. Parsing it, walking it and
// inferring its shapes all recurse once per level, so the depth is checked first, on the
// serialized bytes, by an iterative walk of the wire format that follows only ModelProto.graph
// and .functions, GraphProto.node, FunctionProto.node, NodeProto.attribute and
// AttributeProto.g / .graphs and skips every other field by its length. Malformed bytes are left to the protobuf parser (which reports them).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "kiln/status.h"

namespace kiln::onnx_import {

// Nesting levels: the main graph (and each model-local function) is level 0, an If branch of
// a main-graph node level 1.
// OK when no subgraph is deeper than `max_depth`; else ResourceExhausted naming `source`, the
// depth found, the limit and the path of nodes and attributes down to the first subgraph
// over it ("main graph > node 'if0' (If) attribute 'then_branch' > ...").
Status CheckSubgraphDepth(std::span<const uint8_t> bytes, int max_depth, const std::string& source);

}  // namespace kiln::onnx_import
