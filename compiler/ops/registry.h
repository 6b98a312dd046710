// The op registry: for each op, its meta function (dtype and symbolic shape inference,
// attribute validation). The op's other facts (operands, precision class, GPU path) are its
// row in the op table (runtime/op_table.h); `kiln ops --check` keeps the two in step.
//
// A meta function reads the node's input Values and attributes and fills the dtype and
// shape of each output Value (and, for integer shape arithmetic, the outputs' `sym`
// elements). It rejects invalid attributes and mismatched inputs with kInvalidArgument,
// or kUnimplemented for valid ONNX the compiler does not support; the message says what
// was expected and what was found (the caller prefixes the node name and op).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/ir/trace.h"
#include "kiln/status.h"

namespace kiln::ir {

class MetaContext {
 public:
  MetaContext(Trace& trace, Node& node) : trace_(trace), node_(node) {}

  int num_inputs() const { return static_cast<int>(node_.inputs.size()); }
  int num_outputs() const { return static_cast<int>(node_.outputs.size()); }
  // Input i, or nullptr when absent (kNoValue or i >= num_inputs()).
  const Value* input(int i) const {
    return i < num_inputs() && node_.inputs[i] != kNoValue ? &trace_.value(node_.inputs[i]) : nullptr;
  }
  // Output i, or nullptr when the model does not use it (kNoValue).
  Value* output(int i) {
    return i < num_outputs() && node_.outputs[i] != kNoValue ? &trace_.value(node_.outputs[i]) : nullptr;
  }
  const AttrMap& attrs() const { return node_.attrs; }
  Node& node() { return node_; }
  Trace& trace() { return trace_; }

  // Sets output i's dtype and shape; ignores an absent output.
  void SetOutput(int i, DType dtype, SymShape shape) {
    if (Value* v = output(i)) { v->dtype = dtype; v->shape = std::move(shape); }
  }

 private:
  Trace& trace_;
  Node& node_;
};

using MetaFn = std::function<Status(MetaContext&)>;

struct OpDef {
  std::string name;
  MetaFn meta;
};

// The op named `name`, or nullptr. The registry is built once; thread-safe.
const OpDef* FindOp(std::string_view name);
std::vector<const OpDef*> AllOps();

// Runs the op's meta function on `node`, prefixing errors with
// "node 'NAME' (OP): ". Unknown ops are kUnimplemented.
Status InferNode(Trace& trace, Node& node);

}  // namespace kiln::ir
