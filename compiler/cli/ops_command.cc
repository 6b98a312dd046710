// `kiln ops`: the ONNX ops the compiler implements, one per line, with how each reaches a GPU
// (the fusion rules' kind: a generated kernel, a library, or the CPU backend only). `--json`
// adds each op's operand counts as the CPU backend checks them (runtime/cpu/arity.cc), which
// tests/conformance/check_arity.py compares with ONNX's own schemas.
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "compiler/cli/commands.h"
#include "compiler/fusion/rules.h"
#include "compiler/ops/registry.h"
#include "runtime/cpu/kernel.h"

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

// The op's operand counts: max_* null for a variadic op, `required` one flag per input up to
// max_inputs (for a variadic op: its first min_inputs, all required).
nlohmann::json ArityJson(std::string_view op) {
  const cpu::Arity* a = cpu::OpArity(op);
  if (!a) return nullptr;
  const bool variadic_in = a->max_inputs == cpu::Arity::kUnbounded;
  nlohmann::json required = nlohmann::json::array();
  for (size_t i = 0; i < (variadic_in ? a->min_inputs : a->max_inputs); ++i) required.push_back(a->Required(i));
  return {{"min_inputs", a->min_inputs},
          {"max_inputs", variadic_in ? nlohmann::json(nullptr) : nlohmann::json(a->max_inputs)},
          {"required", required},
          {"min_outputs", a->min_outputs},
          {"max_outputs", a->max_outputs == cpu::Arity::kUnbounded ? nlohmann::json(nullptr)
                                                                   : nlohmann::json(a->max_outputs)}};
}

}  // namespace

void AddOpsCommand(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "ops", "List the ONNX ops (default domain) the compiler implements, each with its path on a GPU");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json,
                "one JSON array: per op its name, gpu_path and arity (min_inputs, max_inputs, required, "
                "min_outputs, max_outputs; null max: variadic), as the CPU backend checks them");
  cmd->footer("One line per op: NAME  PATH, where PATH is 'generated (...)' for ops fused into generated kernels,\n"
              "'library: ...' for cuBLASLt/cuDNN ops and 'cpu: why' for ops only the CPU backend runs.\n"
              "Every listed op runs on the CPU backend. Op versions Kiln refuses are named by `kiln compile`.");
  cmd->callback([json] {
    nlohmann::json all = nlohmann::json::array();
    for (const ir::OpDef* op : ir::AllOps()) {
      if (op->name.rfind("kiln.", 0) == 0) continue;  // Kiln's internal ops (kiln.Fused, ...)
      if (*json) all.push_back({{"name", op->name}, {"gpu_path", GpuPath(op->name)}, {"arity", ArityJson(op->name)}});
      else std::cout << op->name << "  " << GpuPath(op->name) << "\n";
    }
    if (*json) std::cout << all.dump(1) << "\n";
    SetExitCode(0);
  });
}

}  // namespace kiln::cli
