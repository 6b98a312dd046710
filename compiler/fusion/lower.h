// Lowering: how each fusible op computes one element of its output inside a fused
// program. A lowering function receives the coordinates of the wanted output element
// (kI64 nodes, one per output dim) and returns the node of that element's value, in the
// compute type of the output's dtype. It reads its inputs through LowerContext::ValueAt,
// which either lowers the producer in turn (the producer is fused into the same region)
// or loads the element from a region input. Index maps (Transpose, Slice, Gather, ...) are
// just lowerings that compute other coordinates for their input.
//
// A lowering returns kUnimplemented when this node's attributes or dtypes have no fused
// form (e.g. Resize with mode "cubic"); the fusion stage then leaves the node unfused and
// logs the message as the reason.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "compiler/fusion/program_builder.h"
#include "compiler/ir/trace.h"
#include "kiln/status.h"

namespace kiln::fusion {

class LowerContext {
 public:
  virtual ~LowerContext() = default;
  virtual ProgramBuilder& builder() = 0;
  virtual const ir::Trace& trace() const = 0;
  // The element of value `v` at `coords` (rank of v), in ComputeType(v.dtype).
  virtual Result<int32_t> ValueAt(ir::ValueId v, std::span<const int32_t> coords) = 0;

  // Reductions only. The coordinates of the current domain element (kCoord nodes).
  virtual std::vector<int32_t> DomainCoords() = 0;
};

// Computes element `coords` of output `output` of `node`.
using LowerFn = Result<int32_t> (*)(LowerContext& ctx, const ir::Node& node, int output,
                                    std::span<const int32_t> coords);

// The iteration domain a reduction-family node needs: its dims and reduced axes (bit k =
// axis k). Its LowerFn reads DomainCoords() to evaluate its reduced values and adds them
// with builder().AddReduction; the fusion stage calls the LowerFn once per wanted output
// element, always for an element of the current row.
struct ReductionDomain {
  ir::SymShape dims;
  uint32_t reduce_axes = 0;
};
using DomainFn = Result<ReductionDomain> (*)(const ir::Trace& trace, const ir::Node& node);

// Helpers shared by the lowering files.
// The coordinates of an input of shape `in` broadcast (ONNX multidirectional broadcasting)
// to an output element at `coords` of shape `out`.
std::vector<int32_t> BroadcastCoords(ProgramBuilder& b, std::span<const int32_t> coords,
                                     const ir::SymShape& out, const ir::SymShape& in);
// Input `i` of `node` at the element of the output broadcast to `coords`.
Result<int32_t> BroadcastInput(LowerContext& ctx, const ir::Node& node, int i,
                               std::span<const int32_t> coords);

}  // namespace kiln::fusion
