// Serializes compiled entries into a .kiln artifact (schema/kiln.fbs, format version
// kFormatVersion): the 64-byte header, the FlatBuffer, and the 256-byte-aligned weights blob
// with their checksums (runtime/checksum.h), and the kernel table of generated kernels.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compiler/passes/memory_plan.h"
#include "compiler/profile.h"
#include "flatbuffers/flatbuffers.h"
#include "schema/kiln_generated.h"
#include "kiln/status.h"

namespace kiln::serialize {

struct StageRecord {
  std::string name;   // the stage's (compiler/pipeline/pipeline.h): "import", "canonical", ...
  std::string trace;  // printed trace
  int64_t time_ns = 0;  // for the compile's report (CompileSummary); not written to the artifact
  int num_ops = -1;   // ops in `trace`
};

struct EntryRecord {
  std::string name;
  // The backend whose plan this is ("cpu", "cuda"; Entry.backend); empty: every backend's.
  std::string backend;
  passes::MemoryPlan plan;         // plan.trace carries inputs, outputs, guards
  std::vector<StageRecord> stages;
  // Ranges of the entry's symbolic input dims from its compile profile; symbols not listed
  // are checked against the default range (>= 1).
  std::map<std::string, compiler::DimRange> ranges;
};

struct KernelImageRecord {
  std::string arch;           // "sm_90", or "compute_90" for PTX
  bool ptx = false;
  std::vector<uint8_t> data;
};

// One generated kernel, shared by every fused node (of any entry) with the same source.
struct KernelRecord {
  std::string name;
  std::string source;
  std::shared_ptr<const ir::FusedKernel> fused;  // its portable program
  int launch_kind = 0;        // fb::LaunchKind
  int block = 256;
  int vector = 1;
  int index_bits = 64;
  std::vector<KernelImageRecord> images;
};

// One CPU target's native code for the kernels (Artifact.native_code; compiler/codegen/cpu/).
struct NativeCodeRecord {
  std::string target;              // "x86-64", "x86-64-v3", "x86-64-v4", "aarch64"
  std::vector<uint8_t> code;       // the flat image
  std::vector<uint32_t> kernels;   // kernel indices with native code, ascending
  std::vector<uint32_t> offsets;   // each one's function offset in `code`
};

// Where the artifact came from (Artifact.provenance); the writer adds the Kiln version.
struct ProvenanceRecord {
  std::vector<std::string> flags;  // compiler::ProvenanceFlags
  std::string model_sha256;        // lowercase hex; empty: not from a file
  std::vector<std::pair<std::string, std::string>> libraries;  // name, version
};

struct ArtifactRecord {
  std::string source;                 // model file name
  std::vector<EntryRecord> entries;   // at least one
  // The model's runtime inputs as declared (before any profile fixed a dim), for
  // Model::inputs(). Empty: taken from the entries, as the outputs always are (each dim the
  // entries agree on; else the one symbolic form they share; else their forms joined by '|').
  std::vector<ir::Value> inputs;
  std::string precision = "fp32";          // passes::PrecisionName of `--precision`
  std::vector<std::string> target_archs;  // cubin archs and PTX ("compute_90"); empty: CPU-only
  std::vector<KernelRecord> kernels;
  std::vector<NativeCodeRecord> native_code;  // one per CPU target; empty: no native code
  ProvenanceRecord provenance;
  // The kernel of each fused node's FusedKernel (nodes share FusedKernel objects across the
  // stages' traces).
  std::map<const ir::FusedKernel*, int32_t> kernel_of;
};

// A program as the schema's Program table (also used by tests that build artifacts).
flatbuffers::Offset<fb::Program> WriteProgram(flatbuffers::FlatBufferBuilder& b, const fused::Program& program);

// Input plus output bytes of one launch of `program`, or -1 if a dim is symbolic.
int64_t BytesMoved(const fused::Program& program);

Result<std::vector<uint8_t>> WriteArtifact(const ArtifactRecord& artifact);

}  // namespace kiln::serialize
