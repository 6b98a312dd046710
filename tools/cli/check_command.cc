// `kiln check`: the preflight (kiln/check.h) printed for a person, or as JSON for a deployment
// pipeline to gate on. Exit status 0 when the artifact can run on the device asked for (with
// --device auto: on one of them), 1 when it cannot or does not load, 2 for a bad command line.
#include <algorithm>
#include <iostream>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kiln/check.h"
#include "tools/cli/commands.h"
#include "tools/cli/device_option.h"

namespace kiln::cli {
namespace {

nlohmann::json DeviceJson(const DeviceCheck& d) {
  nlohmann::json entries = nlohmann::json::array();
  for (const EntryCheck& e : d.entries) {
    nlohmann::json instructions = nlohmann::json::array();
    for (const InstructionCheck& i : e.instructions)
      instructions.push_back({{"index", i.index}, {"name", i.name}, {"op", i.op}, {"path", i.path}});
    entries.push_back(
        {{"name", e.name}, {"backend", e.backend}, {"arena_bytes", e.arena_bytes}, {"instructions", instructions}});
  }
  nlohmann::json libraries = nlohmann::json::array();
  for (const LibraryCheck& l : d.libraries)
    libraries.push_back(
        {{"name", l.name}, {"required", l.required}, {"compiled", l.compiled}, {"found", l.found}, {"ok", l.ok}});
  return {{"device", d.device},          {"description", d.description},
          {"usable", d.usable},          {"problems", d.problems},
          {"notes", d.notes},            {"libraries", libraries},
          {"min_driver_version", d.min_driver_version},
          {"ptx_jit_kernels", d.ptx_jit_kernels},
          {"ptx_jit_estimate_ms", d.ptx_jit_estimate_ms},
          {"entries", entries}};
}

// Each entry's instructions summed by path: "12 native code x86-64-v4, 3 oneDNN".
std::string PathCounts(const EntryCheck& e) {
  std::vector<std::pair<std::string, int>> counts;
  for (const InstructionCheck& i : e.instructions) {
    auto it = std::find_if(counts.begin(), counts.end(), [&](const auto& c) { return c.first == i.path; });
    if (it == counts.end()) counts.emplace_back(i.path, 1);
    else ++it->second;
  }
  std::string s;
  for (const auto& [path, n] : counts) s += fmt::format("{}{} {}", s.empty() ? "" : ", ", n, path);
  return s;
}

int Check(const std::string& path, const std::string& device, int ordinal, bool json, bool instructions) {
  CheckOptions options;
  options.device = DeviceNamed(device);
  options.device_ordinal = ordinal;
  auto report = CheckArtifact(path, options);
  if (!report.ok()) {
    if (json)
      std::cout << nlohmann::json{{"usable", false}, {"error", report.status().ToString()}}.dump(2) << "\n";
    std::cerr << "kiln check: " << report.status().ToString() << "\n";
    return 1;
  }
  const CheckReport& r = *report;
  if (json) {
    nlohmann::json devices = nlohmann::json::array();
    for (const DeviceCheck& d : r.devices) devices.push_back(DeviceJson(d));
    nlohmann::json libraries = nlohmann::json::object();
    for (const auto& [name, version] : r.provenance.libraries) libraries[name] = version;
    nlohmann::json doc = {{"usable", r.usable},
                          {"chosen_device", r.chosen_device},
                          {"format_version", r.format_version},
                          {"producer", r.producer},
                          {"provenance", {{"kiln_version", r.provenance.kiln_version},
                                          {"flags", r.provenance.flags},
                                          {"model_sha256", r.provenance.model_sha256},
                                          {"libraries", libraries}}},
                          {"file_bytes", r.file_bytes},
                          {"weights_bytes", r.weights_bytes},
                          {"weights_verified", r.weights_verified},
                          {"devices", devices},
                          {"check_ns", r.check_ns}};
    // Names come from the model and need not be UTF-8: invalid bytes print as U+FFFD.
    std::cout << doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return r.usable ? 0 : 1;
  }
  std::cout << fmt::format("{}: format version {}, {}, {} bytes ({} of weights, not read: Model::Load checks them)\n",
                           path, r.format_version, r.producer, r.file_bytes, r.weights_bytes);
  for (const DeviceCheck& d : r.devices) {
    std::cout << fmt::format("\n{}: {}{}\n", d.device, d.usable ? "usable" : "NOT usable",
                             d.description.empty() ? "" : " (" + d.description + ")");
    for (const std::string& p : d.problems) std::cout << "  problem: " << p << "\n";
    for (const std::string& n : d.notes) std::cout << "  note: " << n << "\n";
    if (d.min_driver_version > 0)
      std::cout << fmt::format("  driver: at least {}.{}\n", d.min_driver_version / 1000, d.min_driver_version % 1000 / 10);
    for (const LibraryCheck& l : d.libraries)
      std::cout << fmt::format("  {}: requires {}, compiled against {}, found {}\n", l.name, l.required,
                               l.compiled.empty() ? "?" : l.compiled, l.found.empty() ? "none" : l.found);
    for (const EntryCheck& e : d.entries) {
      // A symbolic arena size is a long expression; --json has all of it.
      constexpr size_t kShown = 60;
      const std::string arena = e.arena_bytes.size() <= kShown ? e.arena_bytes + " bytes"
                                                               : "symbolic (" + e.arena_bytes.substr(0, kShown) + "...)";
      std::cout << fmt::format("  entry '{}'{}: arena {} per context; {}\n", e.name,
                               e.backend.empty() ? "" : " (" + e.backend + " plan)", arena, PathCounts(e));
      if (instructions)
        for (const InstructionCheck& i : e.instructions)
          std::cout << fmt::format("    {:4} {} ({}): {}\n", i.index, i.name, i.op, i.path);
    }
  }
  std::cout << fmt::format("\nverdict: {} (checked in {:.3f} ms)\n",
                           r.usable ? "runs on " + r.chosen_device : std::string("no device can run it"),
                           r.check_ns / 1e6);
  return r.usable ? 0 : 1;
}

}  // namespace

void AddCheckCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "check",
      "Preflight: whether an artifact can run here, and how each instruction would run, from its header and "
      "FlatBuffer alone (no weight page is read). Exit 0: it can; 1: it cannot, or does not load");
  auto path = std::make_shared<std::string>();
  auto device = std::make_shared<std::string>("auto");
  auto ordinal = std::make_shared<int>(0);
  auto json = std::make_shared<bool>(false);
  auto instructions = std::make_shared<bool>(false);
  cmd->add_option("artifact", *path, "compiled model (.kiln)")->required()->check(CLI::ExistingFile);
  AddDeviceOption(cmd, *device, "the device to check; auto (the default) checks each, as a context would choose");
  cmd->add_option("--device-ordinal", *ordinal, "which CUDA device")->check(CLI::NonNegativeNumber);
  cmd->add_flag("--json", *json,
                "print one JSON object: usable, chosen_device, provenance, file_bytes, weights_bytes, and per device "
                "its problems, notes, libraries and each entry's instructions with their paths");
  cmd->add_flag("--instructions", *instructions, "list every instruction with its path, not only the counts");
  cmd->callback([=] { SetExitCode(Check(*path, *device, *ordinal, *json, *instructions)); });
}

}  // namespace kiln::cli
