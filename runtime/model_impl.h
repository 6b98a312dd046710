// Model::Impl: everything the runtime needs from a verified artifact, copied once at load
// into plain structs so that Run never touches the FlatBuffer, never parses and never
// builds strings on its success path. Immutable after Load; shared by Model copies and
// ExecutionContexts through shared_ptr.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kiln/runtime.h"
#include "runtime/arena_plan.h"
#include "runtime/attrs.h"
#include "runtime/cpu/native/image.h"
#include "runtime/kernels/kernel.h"
#include "runtime/expr_eval.h"
#include "runtime/fused/program.h"
#include "runtime/prologue.h"

namespace kiln {

// The artifact's bytes: a read-only private mmap of the file, an owned 256-byte-aligned copy of
// caller bytes, or a private anonymous mapping the file was read into (when a signature is
// required or weights are decrypted: no later write to the file reaches it). Released (munmap /
// free) by the destructor.
class ArtifactBytes {
 public:
  static std::shared_ptr<const ArtifactBytes> Mapped(void* addr, size_t size);
  static std::shared_ptr<const ArtifactBytes> Owned(void* addr, size_t size);
  static std::shared_ptr<const ArtifactBytes> Read(void* addr, size_t size);
  ~ArtifactBytes();
  ArtifactBytes(const ArtifactBytes&) = delete;
  ArtifactBytes& operator=(const ArtifactBytes&) = delete;

  const uint8_t* data() const { return static_cast<const uint8_t*>(addr_); }
  size_t size() const { return size_; }
  // The bytes are Load's own (Owned or Read), not the file's mapping: Load may decrypt the
  // weights in place before the Model is made, and nothing writes them after.
  bool private_copy() const { return private_; }
  uint8_t* private_data() const { return static_cast<uint8_t*>(addr_); }

 private:
  ArtifactBytes(void* addr, size_t size, bool mapped, bool is_private)
      : addr_(addr), size_(size), mapped_(mapped), private_(is_private) {}
  void* addr_;
  size_t size_;
  bool mapped_;
  bool private_;
};

enum class StorageKind : uint8_t { kAbsent = 0, kInput = 1, kWeight = 2, kArena = 3, kSymbolic = 4 };

struct PreparedTensor {
  std::string name;
  DType dtype = DType::kUndefined;
  StorageKind storage = StorageKind::kAbsent;
  int32_t rank = -1;         // -1 for Absent
  int32_t dims_begin = 0;    // into PreparedEntry::dim_exprs (and the context's dims array)
  int64_t index = 0;         // Input: model input; Weight: weight index
  int32_t offset_expr = -1;  // Arena: byte offset
  int32_t values_begin = 0;  // Symbolic: into PreparedEntry::value_exprs
  int32_t num_values = 0;
};

// What an instruction is to the executor (runtime/executor/run_entry.h): work it hands to a
// backend, or a run-time Loop's control, which it runs itself (runtime/executor/loop.h).
enum class Control : uint8_t { kNone, kLoopBegin, kLoopEnd };

struct PreparedInstruction {
  const cpu::KernelDef* kernel = nullptr;    // null for a fused instruction and for control
  Control control = Control::kNone;          // kiln.LoopBegin, kiln.LoopEnd
  const fused::Program* program = nullptr;   // kiln.Fused: Model::Impl::programs[i]
  native::KernelFn native = nullptr;    // kiln.Fused: its native code (Model::Impl::native), or null
  int32_t sizes_begin = 0;   // kiln.Fused: its size-argument exprs in PreparedEntry::size_exprs
  int32_t num_sizes = 0;
  AttrMap attrs;
  int32_t operands_begin = 0;  // inputs then outputs, in PreparedEntry::operands (-1: absent)
  int32_t num_inputs = 0;
  int32_t num_outputs = 0;
  std::string label;  // "instruction 12 'conv1' (Conv)", prefixed to kernel errors
  // What runs it on each registered backend: the artifact's placements, and for a backend it
  // records none of (an older artifact), the backend's claims (runtime/claims.h).
  std::vector<InstructionPlacement> placements;
  Library LibraryOn(std::string_view backend) const {
    for (const InstructionPlacement& p : placements)
      if (p.backend == backend) return p.library;
    return Library::kCpuKernel;
  }
  // Format 6 (schema/kiln.fbs Instruction.when): it runs only when each tensor's one bool
  // element equals its value (a run-time If's branch); empty: always.
  struct Predicate {
    int32_t tensor = 0;
    bool value = true;
    bool operator==(const Predicate&) const = default;
  };
  std::vector<Predicate> when;

  // Whether predicate `k` holds for its tensor's `elements` (one, or the artifact is corrupt:
  // kDataLoss) and the first element's byte `first`.
  Result<bool> Holds(size_t k, int64_t elements, uint8_t first) const {
    if (elements != 1)
      return DataLoss(label + ": its predicate's tensor " + std::to_string(when[k].tensor) + " holds " +
                      std::to_string(elements) + " elements, not one");
    return (first != 0) == when[k].value;
  }
};

// A run-time dim (schema/kiln.fbs RuntimeDim): symbol `symbol` is set to the size instruction
// `instruction` reports; expr `bound_expr` (evaluated by the prologue) is its largest value.
struct PreparedRuntimeDim {
  int32_t symbol = 0;
  int32_t instruction = 0;
  int32_t bound_expr = 0;
  int32_t room = -1;  // index into PreparedEntry::rooms when the bound is a room's symbol
};

// A room (schema/kiln.fbs Room): symbol `symbol`, which no input binds, is set by the context:
// `initial` at first, doubled when a call needs more (RuntimeDims::Grow, runtime/executor/runtime_dims.h), up to kMaxRoom
// (runtime/artifact_header.h).
struct PreparedRoom {
  int32_t symbol = 0;
  int64_t initial = 1;
};


// A guard that reads run-time dims (schema/kiln.fbs Entry.runtime_guards): checked when the
// last of them (by instruction) is set; `symbols` are the ones it reads, for its message.
struct PreparedRuntimeGuard {
  int32_t expr = 0;
  std::string text;
  std::vector<int32_t> symbols;
};

struct PreparedEntry {
  std::string name;
  std::string backend;  // Entry.backend: the backend whose plan it is ("cpu", "cuda"); empty: every one
  std::string label;    // "entry 0 (default)", "entry 1 (default, cpu plan)"
  Prologue prologue;
  std::vector<Expr> exprs;
  std::vector<PreparedTensor> tensors;
  std::vector<int32_t> dim_exprs;    // flat: every tensor's shape exprs
  std::vector<int32_t> branch_dims;  // into dim_exprs: the dims of tensors only a run-time If's branch writes (>= 0 at Bind)
  std::vector<int32_t> value_exprs;  // flat: every Symbolic tensor's element exprs
  std::vector<PreparedInstruction> instructions;
  std::vector<int32_t> operands;     // flat instruction operand tensor indices
  std::vector<int32_t> size_exprs;   // flat size-argument exprs of the fused instructions
  std::vector<int32_t> inputs;       // tensor index of each model input
  std::vector<int32_t> outputs;      // tensor index of each model output
  int32_t arena_expr = 0;
  int32_t num_symbolic_values = 0;
  std::vector<PreparedRuntimeDim> runtime_dims;
  std::vector<int32_t> runtime_dim_of;  // per instruction: the run-time dim it sets, or -1
  std::vector<PreparedRoom> rooms;
  // Per instruction: for a run-time Loop's kiln.LoopBegin its kiln.LoopEnd, and the reverse;
  // -1 elsewhere (runtime/executor/loop_pairs.h).
  std::vector<int32_t> loop_pair;
  // Per instruction: the end (exclusive) of the segment that holds it, the straight-line run
  // with no host decision inside (runtime/executor/segments.h).
  std::vector<int32_t> segment_end;
  // Per tensor: for an arena tensor, the instruction that writes it (a run-time Loop's
  // kiln.LoopBegin for what its LoopEnd writes) and the last that reads it (the instruction count
  // for an entry output), from `liveness`; -1 for other tensors (runtime/executor/segments.h).
  std::vector<int32_t> written_at, last_read_at;
  std::vector<PreparedRuntimeGuard> runtime_guards;
  std::vector<std::vector<int32_t>> guards_after;  // per run-time dim: the guards checked once it is set
  ArenaLiveness liveness;     // the arena tensors' lifetimes (runtime/arena_plan.h)
  bool has_predicates = false;  // some instruction runs under a condition (PreparedInstruction::when)
  // The memory plan's byte check passed at load: nothing in it depends on the symbols, so
  // Bind need not run it again.
  bool plan_checked = false;

  // "tensor 17 'conv1_out'", and with the entry: "entry 0 (default) tensor 17 'conv1_out'".
  std::string TensorName(int32_t t) const {
    return "tensor " + std::to_string(t) + (tensors[t].name.empty() ? "" : " '" + tensors[t].name + "'");
  }
  std::string TensorLabel(int32_t t) const { return label + " " + TensorName(t); }
};

// Every tensor dim of `pe` (indexed as PreparedEntry::dim_exprs) from its expr values, with the
// dims only a run-time If's branch writes at least 0 (PreparedEntry::branch_dims).
inline void EvaluateDims(const PreparedEntry& pe, const int64_t* values, int64_t* dims) {
  for (size_t k = 0; k < pe.dim_exprs.size(); ++k) dims[k] = values[pe.dim_exprs[k]];
  for (const int32_t k : pe.branch_dims) dims[k] = std::max<int64_t>(dims[k], 0);
}

// The bytes an ExecutionContext allocates for an arena or workspace of `bytes`: a multiple
// of 64 (UINT64_MAX when that overflows), the size LoadOptions::max_context_bytes bounds.
inline uint64_t AllocationBytes(uint64_t bytes) {
  return bytes > UINT64_MAX - 63 ? UINT64_MAX : (bytes + 63) / 64 * 64;
}

// A generated kernel's launch rule and images (pointers into the artifact's bytes), for
// the CUDA backend.
struct PreparedImage {
  std::string arch;  // "sm_90" or "compute_90"
  bool ptx = false;  // NUL-terminated PTX text
  const uint8_t* data = nullptr;
  size_t size = 0;
};
struct PreparedKernel {
  std::string name;
  int launch_kind = 0;  // fb::LaunchKind: 0 elementwise, 1 row reduction
  int block = 256;
  int vector = 1;
  std::vector<PreparedImage> images;
};

struct PreparedWeight {
  std::string name;
  DType dtype = DType::kUndefined;
  uint64_t offset = 0;
  uint64_t size = 0;
};

// Hidden: a nested class takes the KILN_API visibility of its enclosing class, and this one
// is internal to the runtime (libkiln_runtime.so must not export it).
struct [[gnu::visibility("hidden")]] Model::Impl {
  std::shared_ptr<const ArtifactBytes> bytes;
  const uint8_t* weights = nullptr;  // the blob, inside `bytes`
  uint64_t weights_size = 0;

  uint32_t format_version = 0;
  uint64_t max_context_bytes = UINT64_MAX;  // LoadOptions::max_context_bytes, resolved
  std::string producer;
  ProvenanceInfo provenance;
  std::string precision;  // "fp32", "fp16" or "bf16" (verified)
  std::vector<TensorInfo> inputs;
  std::vector<TensorInfo> outputs;
  std::vector<EntryInfo> entries;

  std::vector<PreparedWeight> weight_table;
  std::vector<KernelInfo> kernels;        // Artifact.kernels[i], for inspection
  std::vector<fused::Program> programs;   // Artifact.kernels[i].program, validated
  std::vector<PreparedKernel> launch;     // Artifact.kernels[i]'s launch rule and images
  std::vector<NativeCodeInfo> native_code;              // Artifact.native_code, for inspection
  std::unique_ptr<native::NativeImage> native;     // the chosen native code, mapped; null: interpreted
  std::string native_target, native_note;               // Model::native_code_target(), native_code_note()
  std::vector<PreparedEntry> prepared;
};

// The artifact file mapped read-only (Model::Load's first step). Errors: kNotFound,
// kFailedPrecondition (cannot open), kInvalidArgument (not a regular file), kResourceExhausted
// (over options.max_artifact_bytes, or the mapping fails), kDataLoss (smaller than the header).
Result<std::shared_ptr<const ArtifactBytes>> MapArtifact(const std::string& path, const LoadOptions& options);

// Model::Load's checks and preparation of mapped bytes, for Load, or for the preflight
// (kiln/check.h), whose Model is inspected and never run: without the weights' checksum, the one
// step that reads their pages, and without the text only tools show (stage traces, kernel
// sources, printed programs: empty strings).
enum class ParseFor { kLoad, kPreflight };
Result<std::shared_ptr<const Model::Impl>> ParseArtifact(std::shared_ptr<const ArtifactBytes> bytes,
                                                         const LoadOptions& options, ParseFor purpose);

}  // namespace kiln
