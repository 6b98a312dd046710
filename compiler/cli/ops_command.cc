// `kiln ops`: the ONNX ops the compiler implements, one per line, with how each reaches a GPU
// (the fusion rules' kind: a generated kernel, a library, or the CPU backend only).
#include <iostream>
#include <string>

#include "compiler/cli/commands.h"
#include "compiler/fusion/rules.h"
#include "compiler/ops/registry.h"

namespace kiln::cli {
namespace {

std::string GpuPath(std::string_view op) {
  const fusion::FusionRule* rule = fusion::FindRule(op);
  if (!rule) return "cpu: no GPU path";
  switch (rule->kind) {
    case fusion::FusionKind::kElementwise: return "generated (elementwise)";
    case fusion::FusionKind::kIndexMap: return "generated (data movement)";
    case fusion::FusionKind::kReduction: return "generated (reduction)";
    case fusion::FusionKind::kLibrary: return "library: " + std::string(rule->note);
    case fusion::FusionKind::kCpuOnly: return "cpu: " + std::string(rule->note);
  }
  return "?";
}

}  // namespace

void AddOpsCommand(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "ops", "List the ONNX ops (default domain) the compiler implements, each with its path on a GPU");
  cmd->footer("One line per op: NAME  PATH, where PATH is 'generated (...)' for ops fused into generated kernels,\n"
              "'library: ...' for cuBLASLt/cuDNN ops and 'cpu: why' for ops only the CPU backend runs.\n"
              "Every listed op runs on the CPU backend. Op versions Kiln refuses are named by `kiln compile`.");
  cmd->callback([] {
    for (const ir::OpDef* op : ir::AllOps()) {
      if (op->name.rfind("kiln.", 0) == 0) continue;  // Kiln's internal ops (kiln.Fused, ...)
      std::cout << op->name << "  " << GpuPath(op->name) << "\n";
    }
    SetExitCode(0);
  });
}

}  // namespace kiln::cli
