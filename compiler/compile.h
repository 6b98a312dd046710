// The compiler driver: ONNX file -> .kiln artifact bytes, through the stages of
// DESIGN.md (import, canonical, executors, plan).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "kiln/status.h"

namespace kiln::compiler {

struct CompileOptions {
  // Fixes dims of inputs (name -> dims, -1 keeps a dim symbolic), as `--shape`.
  std::map<std::string, std::vector<int64_t>> input_shapes;
  // At most this many entries are made by splitting on shape-dependent If conditions.
  int max_entries = 8;
  // Called with one human-readable line per step (progress and the compile log).
  std::function<void(const std::string&)> log;
};

struct EntrySummary {
  std::string name;
  int instructions = 0;
  std::string arena_bytes;           // number or expression
  int64_t lower_bound_bytes = -1;    // static entries only
};

struct CompileSummary {
  std::vector<EntrySummary> entries;
  int64_t total_ns = 0;
};

Result<std::vector<uint8_t>> CompileOnnxFile(const std::string& path, const CompileOptions& options,
                                             CompileSummary* summary);

}  // namespace kiln::compiler
