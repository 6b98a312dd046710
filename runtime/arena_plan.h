// The runtime's recheck of an entry's memory plan (compiler/passes/memory_plan.cc), so that a
// corrupt or hostile plan is an error and never two kernels writing the same bytes:
//  - every arena tensor is written by exactly one instruction, and no instruction reads it
//    before that one (checked at load, ArenaLiveness::Build);
//  - for the shapes of a binding, every arena tensor lies inside the arena, aligned to its
//    element size, and shares no byte with another arena tensor live at the same time
//    (CheckArenaPlan). A tensor is live over the closed interval [the instruction that
//    writes it, the last instruction that reads it]; the entry's outputs stay live to the end.
//
//   ArenaLiveness live;
//   KILN_RETURN_IF_ERROR(ArenaLiveness::Build(entry, &live));          // at load
//   ArenaScratch scratch;
//   scratch.Resize(live);                                              // per context
//   KILN_RETURN_IF_ERROR(CheckArenaPlan(entry, values, dims, scratch)); // per new binding
//
// Offsets and sizes are exprs over the symbols, so the byte check runs where they are known:
// at load for an entry without symbols, else once per new binding in Bind. It first walks
// the tensors in the order of their offsets, which proves a plan laid out in slots (each a
// run of tensors at one offset whose lifetimes follow one another, the slots end to end, as
// the compiler's PlaceSymbolic makes them) in O(n) for n arena tensors when that order did
// not change since the last binding. A plan this walk cannot prove (another layout, or an
// overlap) gets the exact check: a sweep of the tensors in the order they are written,
// keeping the live ones ordered by offset, O(n log n). No allocation once the scratch is
// sized, no strings unless it fails.
// Every failure is kDataLoss naming the entry and the tensors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kiln/status.h"
#include "kiln/tensor.h"

namespace kiln {

struct PreparedEntry;  // runtime/model_impl.h

// An entry's arena tensors and their lifetimes, in instruction indices.
struct ArenaLiveness {
  std::vector<int32_t> tensors;  // arena tensor indices, ordered by (first, index)
  std::vector<int32_t> first;    // per position in `tensors`: the instruction that writes it
  std::vector<int32_t> last;     // the last that reads it; the instruction count for outputs
  std::vector<int32_t> expiry;   // positions ordered by (last, position)
  std::vector<int32_t> offset_expr;  // per position: the tensor's offset expr
  std::vector<uint32_t> elem_bytes;  // per position: its element size (1, 2, 4 or 8)

  // From the entry's instructions, whose operand indices load verification has checked.
  // kDataLoss when an arena tensor is written twice or never, or read before it is written.
  static Status Build(const PreparedEntry& entry, ArenaLiveness* out);
};

// A set of integers in [0, n) with predecessor and successor queries in O(log64 n): bit i of
// level 0 is set when i is in the set, bit w of level k + 1 when word w of level k is nonzero.
class RankSet {
 public:
  void Resize(size_t n);
  void Clear();
  void Insert(int64_t i);
  void Erase(int64_t i);
  int64_t Below(int64_t i) const;  // the largest member < i, or -1
  int64_t Above(int64_t i) const;  // the smallest member > i, or -1

 private:
  std::vector<uint64_t> words_;       // every level, level 0 first
  std::vector<size_t> level_begin_;   // first word of each level, then words_.size()
};

// Per-context buffers for CheckArenaPlan, sized once per entry.
struct ArenaScratch {
  std::vector<uint64_t> begin, end;  // per position: bytes [begin, end) in the arena
  // Positions ordered by (begin, position), kept from the last check: the order of offsets
  // rarely changes between bindings (a compiled plan's offsets are sums of slot sizes), and
  // an order that still holds is not sorted again.
  std::vector<int32_t> by_offset;
  std::vector<int32_t> rank;         // per position: its index in by_offset
  RankSet live;                      // the ranks of the tensors live at the sweep's instruction
  int64_t sweeps = 0;                // exact sweeps run: plans the walk by offset did not prove

  void Resize(const ArenaLiveness& l);
};

// numel * elem_bytes of a shape; false on a negative dim or overflow. Inline: Bind's LayOut
// calls it for every tensor.
inline bool ShapeBytes(const int64_t* dims, int32_t rank, uint64_t elem_bytes, int64_t* elements, uint64_t* bytes) {
  int64_t n = 1;
  for (int32_t d = 0; d < rank; ++d)
    if (dims[d] < 0 || __builtin_mul_overflow(n, dims[d], &n)) return false;
  uint64_t b = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(n), elem_bytes, &b)) return false;
  *elements = n;
  *bytes = b;
  return true;
}

// Checks the entry's arena tensors for the evaluated `values` of its exprs and `dims` (flat,
// laid out as PreparedEntry::dim_exprs): each inside the arena (values[arena_expr] bytes) and
// aligned, and no two live at the same time sharing a byte. Empty tensors take no bytes.
Status CheckArenaPlan(const PreparedEntry& entry, const int64_t* values, const int64_t* dims, ArenaScratch& s);

}  // namespace kiln
