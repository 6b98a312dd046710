// `kiln ops`: the ONNX ops the compiler implements, one per line, with how each runs: fused into
// a generated kernel (the op table's fusion kind), or each registered backend's claim (a library,
// or the CPU kernel; runtime/claims.h).
// `--json` adds each op's operand counts as the CPU backend checks them, which
// tests/conformance/check_arity.py compares with ONNX's own schemas. `--check` compares the op
// table with the meta functions, CPU kernels and lowerings (the build runs it).
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "compiler/cli/commands.h"
#include "compiler/ops/op_table_check.h"
#include "runtime/backend.h"
#include "runtime/op_table.h"

namespace kiln::cli {
namespace {

// How `info`'s op runs: "generated (elementwise)" for a fused kind; for a library op each
// backend's claim ("library: cuda cudnn (cuDNN pooling); cpu onednn (oneDNN pooling, ...)"); for
// an op no generated kernel takes, "cpu: " and why.
std::string Path(const OpInfo& info) {
  switch (info.fusion) {
    case FusionKind::kElementwise: return "generated (elementwise)";
    case FusionKind::kIndexMap: return "generated (data movement)";
    case FusionKind::kReduction: return "generated (reduction)";
    case FusionKind::kCpuOnly: return "cpu: " + std::string(info.note);
    case FusionKind::kLibrary: break;
  }
  std::string path = "library:";
  for (const BackendRegistration& r : RegisteredBackends()) {
    const Claim c = ClaimOn(r, info.op, false);
    path += std::string(path.back() == ':' ? " " : "; ") + r.name + " " + std::string(LibraryName(c.library)) + " (" +
            std::string(c.reason) + ")";
  }
  return path;
}

// Each registered backend's claim of the unfused op: {"cuda": {"library", "reason"}, ...}.
nlohmann::json ClaimsJson(const OpInfo& info) {
  nlohmann::json claims = nlohmann::json::object();
  for (const BackendRegistration& r : RegisteredBackends()) {
    const Claim c = ClaimOn(r, info.op, false);
    claims[r.name] = {{"library", LibraryName(c.library)}, {"reason", c.reason}};
  }
  return claims;
}

// The op's operand counts: max_* null for a variadic op, `required` one flag per input up to
// max_inputs (for a variadic op: its first min_inputs, all required).
nlohmann::json ArityJson(const Arity& a) {
  const bool variadic_in = a.max_inputs == Arity::kUnbounded;
  nlohmann::json required = nlohmann::json::array();
  for (size_t i = 0; i < (variadic_in ? a.min_inputs : a.max_inputs); ++i) required.push_back(a.Required(i));
  return {{"min_inputs", a.min_inputs},
          {"max_inputs", variadic_in ? nlohmann::json(nullptr) : nlohmann::json(a.max_inputs)},
          {"required", required},
          {"min_outputs", a.min_outputs},
          {"max_outputs", a.max_outputs == Arity::kUnbounded ? nlohmann::json(nullptr)
                                                                   : nlohmann::json(a.max_outputs)}};
}

const char* PrecisionClassName(PrecisionClass cls) {
  switch (cls) {
    case PrecisionClass::kLow: return "low";
    case PrecisionClass::kFollow: return "follow";
    case PrecisionClass::kFloat32: return "float32";
  }
  return "?";
}

}  // namespace

void AddOpsCommand(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "ops", "List the ONNX ops (default domain) the compiler implements, each with how each backend runs it");
  auto json = std::make_shared<bool>(false);
  auto check = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json,
                "one JSON array: per op its name, path (as the line prints it), fusion kind, claims (per "
                "backend: library and reason, for the op unfused), precision class (low, follow, float32) and "
                "arity (min_inputs, max_inputs, required, min_outputs, max_outputs; null max: variadic)");
  cmd->add_flag("--check", *check,
                "compare the op table with the meta functions, CPU kernels and lowerings: print each "
                "disagreement and exit 1, or exit 0 when they agree (the build runs it)");
  cmd->footer("One line per op: NAME  PATH, where PATH is 'generated (...)' for ops fused into generated kernels,\n"
              "'library: BACKEND LIBRARY (what it does); ...' for ops a library runs (each backend's claim:\n"
              "runtime/cpu/claims.cc, runtime/cuda/claims.cc), and 'cpu: why' for ops only a CPU kernel runs\n"
              "(on a GPU, as a CPU fallback). Every listed op has a CPU kernel. Op versions Kiln refuses are\n"
              "named by `kiln compile`. The list is the op table, runtime/op_table.cc.");
  cmd->callback([json, check] {
    if (*check) {
      const std::vector<std::string> problems = ir::OpTableProblems();
      for (const std::string& p : problems) std::cerr << "kiln ops --check: " << p << "\n";
      if (problems.empty())
        std::cout << "kiln ops --check: the op table's " << AllOpInfo().size()
                  << " ops all have their meta function, CPU kernel and lowering\n";
      SetExitCode(problems.empty() ? 0 : 1);
      return;
    }
    nlohmann::json all = nlohmann::json::array();
    for (const OpInfo& info : AllOpInfo()) {
      const std::string name(info.op);
      if (*json)
        all.push_back({{"name", name},
                       {"path", Path(info)},
                       {"fusion", FusionKindName(info.fusion)},
                       {"claims", ClaimsJson(info)},
                       {"precision", PrecisionClassName(info.precision.cls)},
                       {"arity", ArityJson(info.arity)}});
      else std::cout << name << "  " << Path(info) << "\n";
    }
    if (*json) std::cout << all.dump(1) << "\n";
    SetExitCode(0);
  });
}

}  // namespace kiln::cli
