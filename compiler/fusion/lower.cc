#include "compiler/fusion/lower.h"

namespace kiln::fusion {

std::vector<int32_t> BroadcastCoords(ProgramBuilder& b, std::span<const int32_t> coords, const ir::SymShape& out,
                                     const ir::SymShape& in) {
  // ONNX multidirectional broadcasting aligns trailing dims; an input dim of 1 against a
  // larger output dim reads index 0. Symbolic dims were unified by shape inference, so a
  // symbolic input dim equals the output dim.
  std::vector<int32_t> result(in.size());
  const size_t offset = out.size() - in.size();
  for (size_t k = 0; k < in.size(); ++k) {
    const bool one = in[k].is_const() && *in[k].value() == 1;
    const bool out_one = out[k + offset].is_const() && *out[k + offset].value() == 1;
    result[k] = one && !out_one ? b.ConstI(0) : coords[k + offset];
  }
  return result;
}

Result<int32_t> BroadcastInput(LowerContext& ctx, const ir::Node& node, int i, std::span<const int32_t> coords) {
  const ir::Trace& t = ctx.trace();
  const ir::Value& out = t.value(node.outputs[0]);
  const ir::Value& in = t.value(node.inputs[i]);
  std::vector<int32_t> c = BroadcastCoords(ctx.builder(), coords, out.shape, in.shape);
  return ctx.ValueAt(node.inputs[i], c);
}

}  // namespace kiln::fusion
