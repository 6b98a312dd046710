#include "compiler/passes/executors.h"

#include <algorithm>

#include "compiler/ops/registry.h"
#include "runtime/cpu/kernel.h"

namespace kiln::passes {

Result<ir::Trace> AssignExecutors(const ir::Trace& canonical) {
  ir::Trace trace = canonical;
  trace.stage = "executors";
  trace.provenance = "executor assignment: generated kernels for fused regions, the CPU backend for the rest";
  for (ir::Node& node : trace.body.nodes) {
    if (node.fused) {
      node.executor = "generated";
      node.executor_reason = "generated kernel (CUDA from NVRTC; the CPU backend interprets its program)";
      continue;
    }
    const ir::OpDef* op = ir::FindOp(node.op);
    bool listed = op && std::find(op->executors.begin(), op->executors.end(), "cpu") != op->executors.end();
    if (!listed || !cpu::FindKernel(node.op))
      return Unimplemented("node '" + node.name + "' (" + node.op +
                           "): no executor can run this op (no CPU kernel registered)");
    node.executor = "cpu";
    node.executor_reason = "CPU reference kernel; no GPU executor in this build";
  }
  return trace;
}

}  // namespace kiln::passes
