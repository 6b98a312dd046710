// Serializes compiled entries into a .kiln artifact (schema/kiln.fbs, format version 1):
// the 64-byte header, the FlatBuffer, and the 256-byte-aligned weights blob with its
// XXH64 checksum.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/passes/memory_plan.h"
#include "kiln/status.h"

namespace kiln::serialize {

struct StageRecord {
  std::string name;   // "import", "canonical", "executors", "plan"
  std::string trace;  // printed trace
  int64_t time_ns = 0;
};

struct EntryRecord {
  std::string name;
  passes::MemoryPlan plan;         // plan.trace carries inputs, outputs, guards
  std::vector<StageRecord> stages;
};

struct ArtifactRecord {
  std::string source;                 // model file name
  std::vector<EntryRecord> entries;   // at least one
};

Result<std::vector<uint8_t>> WriteArtifact(const ArtifactRecord& artifact);

}  // namespace kiln::serialize
