#include <cstring>
#include <fstream>
#include <iostream>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "tools/cli/commands.h"
#include "kiln/runtime.h"
#include "runtime/kernels/kernel.h"
#include "runtime/shape_text.h"
#include "runtime/signature_trailer.h"
#include "tools/cli/key_options.h"

namespace kiln::cli {
namespace {

// "[N, 3, 224, 224]": a symbol's name where the dim is one.
std::string InfoShapeText(const TensorInfo& t) {
  return ShapeText(t.shape.size(), [&](size_t i) {
    return t.shape[i].symbol.empty() ? std::to_string(t.shape[i].value) : t.shape[i].symbol;
  });
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

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

nlohmann::json KernelsJson(const Model& model, bool sources) {
  nlohmann::json out = nlohmann::json::array();
  for (const KernelInfo& k : model.kernels()) {
    nlohmann::json images = nlohmann::json::array();
    for (size_t i = 0; i < k.archs.size(); ++i) images.push_back({{"arch", k.archs[i]}, {"bytes", k.image_bytes[i]}});
    nlohmann::json j = {{"name", k.name}, {"images", images}, {"launch", k.launch}, {"bytes_moved", k.bytes_moved}};
    if (sources) j["source"] = k.source, j["program"] = k.program;
    out.push_back(std::move(j));
  }
  return out;
}

// Every kernel: name, archs and image sizes, launch rule, bytes moved, then (with
// `sources`) its portable program and CUDA source.
void PrintKernels(const Model& model, bool sources) {
  for (size_t i = 0; i < model.kernels().size(); ++i) {
    const KernelInfo& k = model.kernels()[i];
    std::string images;
    for (size_t a = 0; a < k.archs.size(); ++a) images += fmt::format("{}{} {} B", a ? ", " : "", k.archs[a], k.image_bytes[a]);
    std::cout << fmt::format("\nkernel {} {}: {}; images: {}; bytes moved per launch: {}\n", i, k.name, k.launch,
                             images.empty() ? "none (CPU-only artifact)" : images,
                             k.bytes_moved >= 0 ? std::to_string(k.bytes_moved) : "symbolic");
    if (!sources) continue;
    std::cout << "program:\n" << k.program << "source:\n" << k.source << "\n";
  }
}

// The artifact's native CPU code (Model::native_code) and the target this CPU would run.
nlohmann::json NativeCodeJson(const Model& model) {
  nlohmann::json targets = nlohmann::json::array();
  for (const NativeCodeInfo& n : model.native_code())
    targets.push_back({{"target", n.target}, {"abi", n.abi}, {"code_bytes", n.code_bytes}, {"kernels", n.kernels}});
  return {{"targets", targets}, {"this_cpu", model.native_code_target()}, {"note", model.native_code_note()}};
}

std::string NativeCodeText(const Model& model) {
  std::string s;
  for (const NativeCodeInfo& n : model.native_code())
    s += fmt::format("native code {}: {} bytes, {} of {} generated kernels, calling convention {}\n", n.target,
                     n.code_bytes, n.kernels.size(), model.kernels().size(), n.abi);
  if (model.kernels().empty()) return s;
  s += model.native_code_target().empty()
           ? "this CPU: interpreter (" + model.native_code_note() + ")\n"
           : "this CPU: native code (" + model.native_code_target() + ")" +
                 (model.native_code_note().empty() ? "" : "; " + model.native_code_note()) + "\n";
  return s;
}

// The artifact's provenance (Model::provenance; docs/reproducibility.md).
nlohmann::json ProvenanceJson(const ProvenanceInfo& p) {
  nlohmann::json libraries = nlohmann::json::object();
  for (const auto& [name, version] : p.libraries) libraries[name] = version;
  return {{"kiln_version", p.kiln_version}, {"flags", p.flags}, {"model_sha256", p.model_sha256},
          {"libraries", libraries}};
}

std::string ProvenanceText(const ProvenanceInfo& p) {
  if (p.kiln_version.empty()) return "provenance: not recorded (written before Kiln recorded it)\n";
  std::vector<std::string> libraries;
  for (const auto& [name, version] : p.libraries) libraries.push_back(name + " " + version);
  return fmt::format("compiled by: kiln {}, model sha256 {}\ncompile flags: {}\nbuilt against: {}\n", p.kiln_version,
                     p.model_sha256.empty() ? "none (a traced model)" : p.model_sha256, fmt::join(p.flags, " "),
                     fmt::join(libraries, ", "));
}

// The file's signature trailer, if any (runtime/signature_trailer.h): who signed it and whether
// its weights are encrypted. "verified" when Load checked it (--trusted-key).
nlohmann::json SignatureJson(const std::string& path, bool verified) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  const std::streamoff size = in ? static_cast<std::streamoff>(in.tellg()) : 0;
  std::vector<uint8_t> tail(static_cast<size_t>(std::min<std::streamoff>(size, sizeof(SignatureTrailer))));
  in.seekg(size - static_cast<std::streamoff>(tail.size()));
  in.read(reinterpret_cast<char*>(tail.data()), static_cast<std::streamsize>(tail.size()));
  SignatureTrailer t;
  if (tail.size() < sizeof t || std::memcmp(tail.data(), kTrailerMagic, sizeof kTrailerMagic) != 0) return nullptr;
  std::memcpy(&t, tail.data(), sizeof t);
  std::string key;
  for (uint8_t b : t.public_key) key += fmt::format("{:02x}", b);
  nlohmann::json j = {{"algorithm", "Ed25519"}, {"public_key", key}, {"verified", verified}};
  if (t.flags & kTrailerWeightsEncrypted)
    j["weights_cipher"] = "AES-256-GCM", j["key_id"] = std::string(t.key_id, strnlen(t.key_id, sizeof t.key_id));
  return j;
}

std::string SignatureText(const nlohmann::json& s) {
  if (s.is_null()) return "signature: none\n";
  std::string text = fmt::format("signature: Ed25519 by public key {}, {}\n", s["public_key"].get<std::string>(),
                                 s["verified"].get<bool>() ? "verified (--trusted-key)" : "not verified (no --trusted-key)");
  if (s.contains("key_id"))
    text += fmt::format("weights: encrypted with AES-256-GCM, key id '{}'\n", s["key_id"].get<std::string>());
  return text;
}

int Inspect(const std::string& path, bool json, bool traces, bool kernels, const KeyFlags& keys) {
  LoadOptions options;
  if (Status st = ApplyKeyFlags(keys, options); !st.ok()) {
    std::cerr << "kiln inspect: " << st.ToString() << "\n";
    return 1;
  }
  auto model = Model::Load(path, options);
  if (!model.ok()) {
    std::cerr << "kiln inspect: " << path << ": " << model.status().ToString() << "\n";
    return 1;
  }
  if (json) {
    nlohmann::json entries = nlohmann::json::array();
    for (const EntryInfo& e : model->entries()) {
      nlohmann::json stages = nlohmann::json::array();
      const EntryCompileStats& c = e.compile;
      for (size_t i = 0; i < c.stage_names.size(); ++i) {
        nlohmann::json stage = {{"name", c.stage_names[i]}, {"ops", c.stage_ops[i]}};
        if (traces) stage["trace"] = e.stage_traces[i];
        stages.push_back(std::move(stage));
      }
      entries.push_back({{"name", e.name}, {"backend", e.backend}, {"prologue", e.prologue_text}, {"arena_bytes", e.arena_bytes},
                         {"runtime_dims", e.runtime_dims},
                         {"instructions", e.num_instructions}, {"kernels", c.kernels}, {"stages", stages}});
    }
    nlohmann::json doc = {{"format_version", model->format_version()},
                          {"producer", std::string(model->producer())},
                          {"provenance", ProvenanceJson(model->provenance())},
                          {"precision", std::string(model->precision())},
                          {"inputs", IoJson(model->inputs())},
                          {"outputs", IoJson(model->outputs())},
                          {"entries", entries},
                          {"kernels", KernelsJson(*model, kernels)},
                          {"native_code", NativeCodeJson(*model)},
                          {"signature", SignatureJson(path, !keys.trusted_keys.empty())},
                          {"weights_bytes", model->weights_bytes()}};
    // Names come from the model and need not be UTF-8: invalid bytes print as U+FFFD.
    std::cout << doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return 0;
  }
  std::cout << fmt::format("{}: format version {}, produced by {}, precision {}\n", path, model->format_version(),
                           model->producer(), model->precision());
  std::set<std::string> archs;
  for (const KernelInfo& k : model->kernels()) archs.insert(k.archs.begin(), k.archs.end());
  std::cout << fmt::format("weights: {} bytes\nkernels: {}{}\n", model->weights_bytes(), model->kernels().size(),
                           model->kernels().empty() ? ""
                           : archs.empty()          ? " (portable programs only: a CPU-only artifact)"
                                                    : " for " + Join({archs.begin(), archs.end()}));
  std::cout << NativeCodeText(*model) << ProvenanceText(model->provenance());
  std::cout << SignatureText(SignatureJson(path, !keys.trusted_keys.empty()));
  for (const TensorInfo& t : model->inputs())
    std::cout << fmt::format("input  {}: {}{}\n", t.name, DTypeName(t.dtype), InfoShapeText(t));
  for (const TensorInfo& t : model->outputs())
    std::cout << fmt::format("output {}: {}{}\n", t.name, DTypeName(t.dtype), InfoShapeText(t));
  for (size_t i = 0; i < model->entries().size(); ++i) {
    const EntryInfo& e = model->entries()[i];
    // A symbolic arena size is a long expression; --json and the plan trace have all of it.
    constexpr size_t kShown = 100;
    const std::string arena = e.arena_bytes.size() <= kShown
                                  ? e.arena_bytes + " bytes"
                                  : "symbolic, " + e.arena_bytes.substr(0, kShown) + "... bytes";
    std::cout << fmt::format("\nentry {} '{}'{}: {} instructions, arena {}\n", i, e.name,
                             e.backend.empty() ? "" : ", the " + e.backend + " backend's plan", e.num_instructions, arena);
    std::cout << "prologue:\n" << e.prologue_text << "\n";
    for (const std::string& d : e.runtime_dims) std::cout << "run-time dim: " << d << "\n";
    const EntryCompileStats& c = e.compile;
    for (size_t s = 0; s < c.stage_names.size(); ++s) {
      std::string ops;
      if (c.stage_ops[s] >= 0)
        ops = s > 0 && c.stage_ops[s - 1] >= 0 ? fmt::format(", {} -> {} ops", c.stage_ops[s - 1], c.stage_ops[s])
                                               : fmt::format(", {} ops", c.stage_ops[s]);
      std::cout << fmt::format("stage '{}'{}\n", c.stage_names[s], ops);
      // --kernels shows the fusion stage (its regions and cuts) even when traces are hidden.
      if (traces || (kernels && c.stage_names[s] == "fusion")) std::cout << e.stage_traces[s] << "\n";
    }
    if (c.kernels > 0) std::cout << fmt::format("kernels launched: {}\n", c.kernels);
  }
  if (kernels) PrintKernels(*model, true);
  else if (!model->kernels().empty()) PrintKernels(*model, false);
  if (!traces) std::cout << "\n(traces hidden by --no-traces)\n";
  return 0;
}

// --ops: the ops whose CPU kernels the artifacts' instructions run (every instruction but a
// generated kernel's: those this runtime's registry has a kernel for), and kiln.LoopBegin and
// kiln.LoopEnd where they have a run-time Loop (its control, which the executor runs), sorted, one
// per line after a comment that names the artifacts. A selective runtime is built from this list
// (CMake -DKILN_SELECTED_OPS=FILE, cmake/selective.cmake), so it must come from a runtime with
// every kernel.
int InspectOps(const std::vector<std::string>& paths) {
  std::set<std::string> ops;
  for (const std::string& path : paths) {
    auto model = Model::Load(path);
    if (!model.ok()) {
      std::cerr << "kiln inspect: " << path << ": " << model.status().ToString() << "\n";
      return 1;
    }
    for (const EntryInfo& e : model->entries()) {
      for (const InstructionInfo& ins : e.instructions) {
        if (cpu::FindKernel(ins.op) != nullptr || ins.op == "kiln.LoopBegin" || ins.op == "kiln.LoopEnd")
          ops.insert(ins.op);
      }
    }
  }
  std::cout << "# the CPU kernels (and run-time Loop control) that " << Join(paths) << " run (kiln inspect --ops)\n";
  for (const std::string& op : ops) std::cout << op << "\n";
  return 0;
}

}  // namespace

void AddInspectCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand("inspect", "Show what a .kiln artifact holds: I/O, entries, prologue, plan, traces, kernels");
  auto paths = std::make_shared<std::vector<std::string>>();
  auto json = std::make_shared<bool>(false);
  auto traces = std::make_shared<bool>(true);
  auto kernels = std::make_shared<bool>(false);
  auto ops = std::make_shared<bool>(false);
  auto keys = std::make_shared<KeyFlags>();
  cmd->add_option("artifact", *paths, "compiled model (.kiln); several with --ops")->required()->check(CLI::ExistingFile);
  auto* json_flag = cmd->add_flag("--json", *json, "print one JSON object (format_version, inputs, outputs, entries, kernels, "
                                                   "weights_bytes); entries include every stage's trace unless --no-traces, "
                                                   "kernels their program and source with --kernels");
  cmd->add_flag("--traces,!--no-traces", *traces,
                "print the trace of every compiler stage (default), or only the summary with --no-traces");
  auto* kernels_flag = cmd->add_flag("--kernels", *kernels,
                "print every generated kernel's portable program and CUDA source (archs, image sizes, launch rule "
                "and bytes moved are always listed), and the 'fusion' stage with its regions and cuts");
  cmd->add_flag("--ops", *ops,
                "print only the ops whose CPU kernels the artifacts run, and kiln.LoopBegin and kiln.LoopEnd where "
                "they have a run-time Loop, one per line: the list a selective runtime is built from "
                "(cmake -DKILN_SELECTED_OPS=FILE)")
      ->excludes(json_flag)
      ->excludes(kernels_flag);
  AddKeyOptions(cmd, *keys);
  cmd->callback([=] {
    if (*ops) return SetExitCode(InspectOps(*paths));
    if (paths->size() != 1) throw CLI::ValidationError("artifact", "one artifact, unless --ops lists the CPU kernels of several");
    SetExitCode(Inspect(paths->front(), *json, *traces, *kernels, *keys));
  });
}

}  // namespace kiln::cli
