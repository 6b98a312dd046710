#include "runtime/executor/segments.h"

namespace kiln {

void SplitSegments(PreparedEntry& pe) {
  const size_t n = pe.instructions.size();
  auto control = [&](size_t k) { return pe.instructions[k].control != Control::kNone; };
  // A segment ends after instruction k when k or k + 1 is control, k reports a run-time dim,
  // or k + 1 runs under other predicates.
  pe.segment_end.assign(n, static_cast<int32_t>(n));
  for (size_t k = n; k-- > 0;) {
    const bool last = k + 1 == n || control(k) || control(k + 1) || pe.runtime_dim_of[k] >= 0 ||
                      pe.instructions[k + 1].when != pe.instructions[k].when;
    pe.segment_end[k] = last ? static_cast<int32_t>(k + 1) : pe.segment_end[k + 1];
  }
  const ArenaLiveness& l = pe.liveness;
  pe.written_at.assign(pe.tensors.size(), -1);
  pe.last_read_at.assign(pe.tensors.size(), -1);
  for (size_t p = 0; p < l.tensors.size(); ++p) {
    pe.written_at[static_cast<size_t>(l.tensors[p])] = l.first[p];
    pe.last_read_at[static_cast<size_t>(l.tensors[p])] = l.last[p];
  }
}

}  // namespace kiln
