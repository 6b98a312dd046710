#include <cerrno>
#include <chrono>
#include <iostream>

#include <fmt/format.h>

#include "compiler/cli/commands.h"
#include "compiler/compile.h"
#include "compiler/serialize/artifact_file.h"

namespace kiln::cli {
namespace {

int exit_code = 0;

// "NAME:1x3x224x224"; a dim of "?" or "-1" stays symbolic. The name may contain ':'; the
// shape is after the last one.
bool ParseShape(const std::string& text, std::string& name, std::vector<int64_t>& dims, std::string& error) {
  size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    error = "expected NAME:DIMS such as images:1x3x224x224, got '" + text + "'";
    return false;
  }
  name = text.substr(0, colon);
  std::string rest = text.substr(colon + 1);
  dims.clear();
  size_t pos = 0;
  while (true) {
    size_t x = rest.find('x', pos);
    std::string d = rest.substr(pos, x == std::string::npos ? std::string::npos : x - pos);
    if (d == "?" || d == "-1") {
      dims.push_back(-1);
    } else {
      char* end = nullptr;
      errno = 0;
      long long v = std::strtoll(d.c_str(), &end, 10);
      if (d.empty() || *end != '\0' || v < 0 || errno == ERANGE) {
        error = "dim '" + d + "' in '" + text + "' is not a non-negative 64-bit integer, '?' or -1";
        return false;
      }
      dims.push_back(v);
    }
    if (x == std::string::npos) break;
    pos = x + 1;
  }
  return true;
}

void RunCompile(const std::string& model, const std::string& output, const std::vector<std::string>& shapes,
                bool quiet) {
  compiler::CompileOptions options;
  for (const std::string& s : shapes) {
    std::string name, error;
    std::vector<int64_t> dims;
    if (!ParseShape(s, name, dims, error)) {
      std::cerr << "kiln compile: --shape: " << error << "\n";
      exit_code = 2;
      return;
    }
    if (!options.input_shapes.emplace(name, dims).second) {
      std::cerr << "kiln compile: --shape: input '" << name << "' is given more than once\n";
      exit_code = 2;
      return;
    }
  }
  const auto start = std::chrono::steady_clock::now();
  if (!quiet)
    options.log = [start](const std::string& line) {
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::cerr << fmt::format("[{:7.3f}s] {}\n", s, line);
    };
  compiler::CompileSummary summary;
  auto bytes = compiler::CompileOnnxFile(model, options, &summary);
  if (!bytes.ok()) {
    std::cerr << "kiln compile: " << model << ": " << bytes.status().ToString() << "\n";
    exit_code = 1;
    return;
  }
  if (Status written = serialize::WriteArtifactFile(output, *bytes); !written.ok()) {
    std::cerr << "kiln compile: " << written.message() << "\n";
    exit_code = 1;
    return;
  }
  std::cout << fmt::format("wrote {} ({} bytes, {} entr{}) in {:.3f} s\n", output, bytes->size(),
                           summary.entries.size(), summary.entries.size() == 1 ? "y" : "ies", summary.total_ns / 1e9);
  for (const auto& e : summary.entries) {
    std::cout << fmt::format("  entry '{}': {} instructions, arena {}", e.name, e.instructions, e.arena_bytes);
    if (e.lower_bound_bytes >= 0) std::cout << fmt::format(" (lower bound {} bytes)", e.lower_bound_bytes);
    std::cout << "\n";
  }
}

}  // namespace

int ExitCode() { return exit_code; }
void SetExitCode(int code) { exit_code = code; }

void AddCompileCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand("compile", "Compile an ONNX model into a .kiln artifact");
  auto model = std::make_shared<std::string>();
  auto output = std::make_shared<std::string>();
  auto shapes = std::make_shared<std::vector<std::string>>();
  auto quiet = std::make_shared<bool>(false);
  cmd->add_option("model", *model, "ONNX model file (.onnx); external-data files are read from its folder")
      ->required()->check(CLI::ExistingFile);
  cmd->add_option("-o,--output", *output, "artifact to write (.kiln)")->required();
  cmd->add_option("--shape", *shapes,
                  "fix an input's shape, NAME:DIMS such as images:1x3x224x224 ('?' or -1 keeps a dim symbolic); "
                  "repeatable. Without it, symbolic dims stay symbolic.");
  cmd->add_flag("-q,--quiet", *quiet, "do not print progress to stderr");
  cmd->callback([=] { RunCompile(*model, *output, *shapes, *quiet); });
}

}  // namespace kiln::cli
