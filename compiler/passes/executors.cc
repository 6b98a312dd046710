#include "compiler/passes/executors.h"

#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "runtime/kernels/kernel.h"
#include "runtime/op_table.h"

namespace kiln::passes {
namespace {

bool IsLoopControl(const ir::Node& n) { return n.op == "kiln.LoopBegin" || n.op == "kiln.LoopEnd"; }

// On a GPU, consecutive nodes the CPU backend runs form one CPU fallback region (one copy to
// the host of what it reads from the device, one wait, one copy back of what is read after it:
// runtime/cuda/runner.h). The trace lists them, with each distinct reason once. A library
// node joins a region only at run time, when its library refuses it (Stats::last_fallbacks).
void NoteFallbackRegions(ir::Trace& trace) {
  const std::vector<ir::Node>& nodes = trace.body.nodes;
  std::vector<std::string> regions;
  std::vector<std::string> loops;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].op == "kiln.LoopBegin")  // "<Loop>_begin" (passes/canonicalize.cc RuntimeLoop)
      loops.push_back("'" + (nodes[i].name.ends_with("_begin") ? nodes[i].name.substr(0, nodes[i].name.size() - 6)
                                                                : nodes[i].name) + "'");
    if (nodes[i].executor != "cpu" || IsLoopControl(nodes[i])) continue;
    const size_t begin = i;
    std::string members, reasons;
    // A run-time Loop's control is not part of a region: it stays on the host between them.
    for (; i < nodes.size() && nodes[i].executor == "cpu" && !IsLoopControl(nodes[i]); ++i) {
      members += (members.empty() ? "" : ", ") + ("'" + nodes[i].name + "' (" + nodes[i].op + ")");
      const std::string& why = nodes[i].executor_reason;
      if (reasons.find(why) == std::string::npos) reasons += (reasons.empty() ? "" : "; ") + why;
    }
    regions.push_back("CPU fallback region " + std::to_string(regions.size() + 1) + ", " + std::to_string(i - begin) +
                      (i - begin == 1 ? " node: " : " nodes: ") + members + " -- " + reasons);
    --i;  // the node that ended the region is looked at again
  }
  if (!loops.empty())
    trace.notes.push_back(std::to_string(loops.size()) + " run-time Loop" + (loops.size() == 1 ? "" : "s") + " (" +
                          fmt::format("{}", fmt::join(loops, ", ")) +
                          "): on a GPU the host reads each iteration's condition (one copy to the host and one wait "
                          "per iteration) and its body's nodes run where they would outside a loop");
  if (regions.empty()) return;
  trace.notes.push_back(std::to_string(regions.size()) + " CPU fallback region" + (regions.size() == 1 ? "" : "s") +
                        " on a GPU (each: one copy to the host, one wait, one copy back)");
  trace.notes.insert(trace.notes.end(), regions.begin(), regions.end());
}

// On a CPU, the nodes whose op the CPU backend's library claims (runtime/op_table.h
// CpuLibraryOf: Conv, MaxPool, AveragePool, MatMul and Gemm on oneDNN) run there where the runtime has it and
// takes the form.
void NoteCpuLibrary(ir::Trace& trace) {
  std::vector<std::string> names;
  for (const ir::Node& n : trace.body.nodes)
    if (CpuLibraryOf(n.op) == "onednn") names.push_back("'" + n.name + "'");
  if (names.empty()) return;
  trace.notes.push_back(
      std::to_string(names.size()) + (names.size() == 1 ? " node" : " nodes") + " on oneDNN on a CPU (" +
      fmt::format("{}", fmt::join(names, ", ")) +
      "), where the runtime has it (ContextOptions::onednn) and takes the form; else, and for a pointwise or "
      "float16 Conv, the CPU kernel (Stats::last_fallbacks names each fallback)");
}

}  // namespace

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
    if (IsLoopControl(node)) {  // the runtime's executor runs it (runtime/executor/loop.h)
      node.executor = "cpu";
      node.executor_reason = "a run-time Loop's control, on the host: on a GPU it reads the trip count and each "
                             "iteration's condition (one copy to the host and one wait per iteration) and copies the "
                             "carried values on the device";
      continue;
    }
    const cpu::KernelDef* kernel = cpu::FindKernel(node.op);
    if (!kernel)
      return Unimplemented("node '" + node.name + "' (" + node.op +
                           "): no backend can run this op (no CPU kernel registered)");
    // On a GPU, library ops go to cuBLASLt / cuDNN (the CPU backend takes them when the
    // library refuses a form); everything else is a CPU fallback region with copies. The op
    // table's library column is the claim the CUDA backend reads too (runtime/op_table.h).
    const OpInfo* info = FindOpInfo(node.op);
    if (info && info->fusion == FusionKind::kLibrary) {
      node.executor = std::string(LibraryName(info->library));
      node.executor_reason = std::string(info->note) + "; the CPU backend when the library refuses it or on a CPU";

    } else {
      node.executor = "cpu";
      // The `executors` trace notes it in a CPU fallback region with this reason.
      node.executor_reason = info && info->fusion == FusionKind::kCpuOnly ? std::string(info->note)
                             : kernel->runtime_size ? "a data-dependent output size: a run-time dim that the host reads"
                                                    : "this instance has no fused form (see the fusion log)";
    }
  }
  NoteCpuLibrary(trace);
  NoteFallbackRegions(trace);
  return trace;
}

}  // namespace kiln::passes
