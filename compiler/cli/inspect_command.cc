#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "compiler/cli/commands.h"
#include "kiln/runtime.h"

namespace kiln::cli {
namespace {

std::string ShapeText(const TensorInfo& t) {
  std::string s = "[";
  for (size_t i = 0; i < t.shape.size(); ++i)
    s += (i ? ", " : "") + (t.shape[i].symbol.empty() ? std::to_string(t.shape[i].value) : t.shape[i].symbol);
  return s + "]";
}

nlohmann::json IoJson(const std::vector<TensorInfo>& list) {
  nlohmann::json out = nlohmann::json::array();
  for (const TensorInfo& t : list) {
    nlohmann::json shape = nlohmann::json::array();
    for (const DimInfo& d : t.shape) shape.push_back(d.symbol.empty() ? nlohmann::json(d.value) : nlohmann::json(d.symbol));
    out.push_back({{"name", t.name}, {"dtype", std::string(DTypeName(t.dtype))}, {"shape", shape}});
  }
  return out;
}

int Inspect(const std::string& path, bool json, bool traces) {
  auto model = Model::Load(path);
  if (!model.ok()) {
    std::cerr << "kiln inspect: " << path << ": " << model.status().ToString() << "\n";
    return 1;
  }
  if (json) {
    nlohmann::json entries = nlohmann::json::array();
    for (const EntryInfo& e : model->entries()) {
      nlohmann::json stages = nlohmann::json::array();
      for (size_t i = 0; i < e.stage_names.size(); ++i)
      {
        nlohmann::json stage = {{"name", e.stage_names[i]}, {"time_ns", e.stage_time_ns[i]}};
        if (traces) stage["trace"] = e.stage_traces[i];
        stages.push_back(std::move(stage));
      }
      entries.push_back({{"name", e.name}, {"prologue", e.prologue_text}, {"arena_bytes", e.arena_bytes},
                         {"instructions", e.num_instructions}, {"stages", stages}});
    }
    nlohmann::json doc = {{"format_version", model->format_version()},
                          {"producer", std::string(model->producer())},
                          {"inputs", IoJson(model->inputs())},
                          {"outputs", IoJson(model->outputs())},
                          {"entries", entries},
                          {"kernels", nlohmann::json::array()},
                          {"weights_bytes", model->weights_bytes()}};
    std::cout << doc.dump(2) << "\n";
    return 0;
  }
  std::cout << fmt::format("{}: format version {}, produced by {}\n", path, model->format_version(), model->producer());
  std::cout << fmt::format("weights: {} bytes\nkernels: none (CPU backend only)\n", model->weights_bytes());
  for (const TensorInfo& t : model->inputs())
    std::cout << fmt::format("input  {}: {}{}\n", t.name, DTypeName(t.dtype), ShapeText(t));
  for (const TensorInfo& t : model->outputs())
    std::cout << fmt::format("output {}: {}{}\n", t.name, DTypeName(t.dtype), ShapeText(t));
  for (size_t i = 0; i < model->entries().size(); ++i) {
    const EntryInfo& e = model->entries()[i];
    // A symbolic arena size is a long expression; --json and the plan trace have all of it.
    constexpr size_t kShown = 100;
    const std::string arena = e.arena_bytes.size() <= kShown
                                  ? e.arena_bytes + " bytes"
                                  : "symbolic, " + e.arena_bytes.substr(0, kShown) + "... bytes";
    std::cout << fmt::format("\nentry {} '{}': {} instructions, arena {}\n", i, e.name, e.num_instructions, arena);
    std::cout << "prologue:\n" << e.prologue_text << "\n";
    for (size_t s = 0; s < e.stage_names.size(); ++s) {
      std::cout << fmt::format("stage '{}': {:.3f} ms\n", e.stage_names[s], e.stage_time_ns[s] / 1e6);
      if (traces) std::cout << e.stage_traces[s] << "\n";
    }
  }
  if (!traces) std::cout << "\n(traces hidden by --no-traces)\n";
  return 0;
}

}  // namespace

void AddInspectCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand("inspect", "Show what a .kiln artifact holds: I/O, entries, prologue, plan, traces");
  auto path = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  auto traces = std::make_shared<bool>(true);
  cmd->add_option("artifact", *path, "compiled model (.kiln)")->required()->check(CLI::ExistingFile);
  cmd->add_flag("--json", *json, "print one JSON object (format_version, inputs, outputs, entries, kernels, "
                                 "weights_bytes); entries include every stage's trace unless --no-traces");
  cmd->add_flag("--traces,!--no-traces", *traces,
                "print the trace of every compiler stage (default), or only the summary with --no-traces");
  cmd->callback([=] { SetExitCode(Inspect(*path, *json, *traces)); });
}

}  // namespace kiln::cli
