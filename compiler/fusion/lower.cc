#include "compiler/fusion/lower.h"

namespace kiln::fusion {

std::vector<int32_t> BroadcastCoords(ProgramBuilder& b, std::span<const int32_t> coords, const ir::SymShape& out,
                                     const ir::SymShape& in) {
  // ONNX multidirectional broadcasting aligns trailing dims; an input dim of 1 against a
  // larger output dim reads index 0. A symbolic input dim that is not the output's own
  // expression may be 1 at run time while the output's is larger (meta::BroadcastDims::kAtRunTime:
  // N against max(N, M)): its coordinate is scaled by min(N - 1, 1), a size argument that is 0
  // exactly when N is 1. (Where a guard made the two equal, the factor is 1, or the dim is 1.)
  std::vector<int32_t> result(in.size());
  const size_t offset = out.size() - in.size();
  for (size_t k = 0; k < in.size(); ++k) {
    const ir::Sym& o = out[k + offset];
    const bool one = in[k].is_const() && *in[k].value() == 1;
    const bool out_one = o.is_const() && *o.value() == 1;
    if (one && !out_one) result[k] = b.ConstI(0);
    else if (in[k].is_const() || in[k].Same(o)) result[k] = coords[k + offset];
    else result[k] = b.Binary(fused::Op::kMul, coords[k + offset], b.Dim(ir::Min(in[k] - 1, 1)));
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
