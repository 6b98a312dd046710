#include "compiler/passes/executors.h"

#include <algorithm>

#include "compiler/fusion/rules.h"
#include "compiler/ops/registry.h"
#include "runtime/cpu/kernel.h"

namespace kiln::passes {

Result<ir::Trace> AssignExecutors(const ir::Trace& canonical) {
  ir::Trace trace = canonical;
  trace.stage = "executors";
  trace.provenance = "executor assignment: generated kernels, cuBLASLt/cuDNN for library ops, CPU fallback for the rest";
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
    // On a GPU, library ops go to cuBLASLt / cuDNN (the CPU backend takes them when the
    // library refuses a form); everything else is a CPU fallback region with copies.
    const fusion::FusionRule* rule = fusion::FindRule(node.op);
    if (rule && rule->kind == fusion::FusionKind::kLibrary) {
      node.executor = std::string(rule->library);
      node.executor_reason = std::string(rule->note) + "; the CPU backend when the library refuses it or on a CPU";
    } else {
      node.executor = "cpu";
      node.executor_reason = rule && rule->kind == fusion::FusionKind::kCpuOnly
                                 ? "CPU fallback on a GPU: " + std::string(rule->note)
                                 : "CPU fallback on a GPU: this instance has no fused form (see the fusion log)";
    }
  }
  return trace;
}

}  // namespace kiln::passes
