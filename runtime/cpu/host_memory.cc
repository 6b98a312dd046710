#include "runtime/cpu/host_memory.h"

#include <algorithm>
#include <cstring>
#include <string>

#include <sys/mman.h>

#include "runtime/fault_injection.h"
#include "runtime/fused/interpreter.h"
#include "runtime/kernels/widen.h"

namespace kiln::cpu {

using std::to_string;

bool AlignedBuffer::Reserve(uint64_t bytes) {
  if (bytes <= size_) return true;
  const uint64_t rounded = AllocationBytes(bytes);
  if (rounded < bytes || rounded > static_cast<uint64_t>(PTRDIFF_MAX)) return false;
  // Blocks of 2 MiB or more start on a 2 MiB boundary, and their whole 2 MiB extents are
  // advised for transparent huge pages (Linux's THP setting `madvise` or `always` honours it;
  // `never` ignores it): a model's packed weights and large tensors then take one TLB entry per
  // 2 MiB rather than per 4 KiB. The tail past the last whole extent keeps small pages, so no
  // memory is added. 1 thread, p50 over 4 alternating runs each: wav2vec2-base 63.8 -> 62.4 ms,
  // ViT-B/16 139.7 -> 138.2, BERT-base 90.1 -> 89.2 (benchmarks/results/2026-12-05-attention-3.md).
  constexpr uint64_t kHugePage = uint64_t{2} << 20;
  void* p = nullptr;
  if (fault::Inject("host memory") ||
      posix_memalign(&p, rounded >= kHugePage ? kHugePage : 64, static_cast<size_t>(rounded)) != 0)
    return false;
#ifdef MADV_HUGEPAGE
  if (rounded >= kHugePage) madvise(p, static_cast<size_t>(rounded / kHugePage * kHugePage), MADV_HUGEPAGE);
#endif
  // Every page touched now, where the context binds (Create, Warm, a new shape's first Run), not
  // page-faulted in by the kernels of the Run that follows.
  std::memset(p, 0, static_cast<size_t>(rounded));
  std::free(data_);
  data_ = static_cast<uint8_t*>(p);
  size_ = rounded;
  return true;
}

Status HostMemory::Place(const PreparedEntry& pe, EntryState& s, int threads, uint64_t max_context_bytes,
                         uint64_t library_workspace) {
  s.workspace_needed = library_workspace;
  for (const PreparedInstruction& pi : pe.instructions) {
    if (pi.program) {
      s.workspace_needed = std::max<uint64_t>(s.workspace_needed, FusedWorkspaceBytes(*pi.program, threads));
      continue;
    }
    if (pi.kernel == nullptr) continue;  // a run-time Loop's control: the executor's, no workspace
    const TensorRef* ops = s.operands.data() + pi.operands_begin;
    const size_t ws = KernelWorkspaceBytes(*pi.kernel, pi.attrs, {ops, static_cast<size_t>(pi.num_inputs)},
                                           {ops + pi.num_inputs, static_cast<size_t>(pi.num_outputs)});
    s.workspace_needed = std::max<uint64_t>(s.workspace_needed, ws);
  }
  const uint64_t arena = std::max(arena_.size(), AllocationBytes(s.arena_needed));
  const uint64_t workspace = std::max(workspace_.size(), AllocationBytes(s.workspace_needed));
  uint64_t total = 0;
  if (__builtin_add_overflow(arena, workspace, &total)) total = UINT64_MAX;
  if (total > max_context_bytes)
    return ResourceExhausted(pe.label + ": these shapes need an arena of " + to_string(s.arena_needed) +
                             " bytes and " + to_string(s.workspace_needed) +
                             " bytes of kernel workspace; the context would hold " + to_string(total) +
                             " bytes, above LoadOptions::max_context_bytes (" + to_string(max_context_bytes) + ")");
  const uint8_t* before = arena_.data();
  if (!arena_.Reserve(s.arena_needed))
    return ResourceExhausted(pe.label + ": cannot allocate an arena of " + to_string(s.arena_needed) + " bytes");
  // A moved arena invalidates every entry placed in it, even if the workspace fails below.
  if (placement_ == 0 || arena_.data() != before) ++placement_;
  if (!workspace_.Reserve(s.workspace_needed))
    return ResourceExhausted(pe.label + ": cannot allocate " + to_string(s.workspace_needed) +
                             " bytes of kernel workspace");
  // Arena pointers, now that the arena is placed.
  for (const int32_t t : pe.liveness.tensors) s.refs[t].data = arena_.data() + s.arena_offsets[t];
  for (const auto& [slot, t] : s.arena_slots) s.operands[slot].data = s.refs[t].data;
  s.host_placement = placement_;
  return Status::Ok();
}

}  // namespace kiln::cpu
