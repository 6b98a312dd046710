#include "runtime/arena_plan.h"

#include <algorithm>
#include <bit>
#include <string>

#include "runtime/model_impl.h"

namespace kiln {
namespace {

using std::to_string;

std::string Lifetime(const PreparedEntry& pe, int32_t first, int32_t last) {
  const std::string end =
      last >= static_cast<int32_t>(pe.instructions.size()) ? std::string("the end") : to_string(last);
  return "live at instructions " + to_string(first) + ".." + end;
}

// A Fenwick tree over the ranks (by offset) of the live tensors.
void Mark(std::vector<int32_t>& tree, int32_t rank, int32_t delta) {
  for (size_t i = static_cast<size_t>(rank) + 1; i < tree.size(); i += i & (0 - i)) tree[i] += delta;
}
// Live tensors whose rank is below `rank`.
int32_t CountBelow(const std::vector<int32_t>& tree, int32_t rank) {
  int32_t n = 0;
  for (size_t i = static_cast<size_t>(rank); i > 0; i -= i & (0 - i)) n += tree[i];
  return n;
}
// The rank of the k-th live tensor by offset, k >= 1 and at most the live count.
int32_t KthLive(const std::vector<int32_t>& tree, int32_t k) {
  size_t at = 0;
  for (size_t step = std::bit_floor(tree.size() - 1); step > 0; step >>= 1) {
    if (at + step < tree.size() && tree[at + step] < k) {
      at += step;
      k -= tree[at];
    }
  }
  return static_cast<int32_t>(at);
}

}  // namespace

Status ArenaLiveness::Build(const PreparedEntry& pe, ArenaLiveness* out) {
  const int32_t n = static_cast<int32_t>(pe.instructions.size());
  const std::string where = pe.label + " memory plan: ";
  std::vector<int32_t> writer(pe.tensors.size(), -1), last(pe.tensors.size(), -1);
  for (int32_t i = 0; i < n; ++i) {
    const PreparedInstruction& pi = pe.instructions[i];
    for (int32_t k = 0; k < pi.num_outputs; ++k) {
      const int32_t t = pe.operands[pi.operands_begin + pi.num_inputs + k];
      if (writer[t] >= 0)
        return DataLoss(where + pe.TensorName(t) + " is written by " + pe.instructions[writer[t]].label +
                        " and again by " + pi.label);
      writer[t] = last[t] = i;
    }
  }
  for (int32_t i = 0; i < n; ++i) {
    const PreparedInstruction& pi = pe.instructions[i];
    for (int32_t k = 0; k < pi.num_inputs; ++k) {
      const int32_t t = pe.operands[pi.operands_begin + k];
      if (t < 0 || pe.tensors[t].storage != StorageKind::kArena) continue;
      if (writer[t] < 0) continue;  // reported below
      if (writer[t] >= i)
        return DataLoss(where + pi.label + " reads " + pe.TensorName(t) + " before " +
                        (writer[t] == i ? std::string("it writes it itself") : pe.instructions[writer[t]].label + " writes it"));
      last[t] = std::max(last[t], i);
    }
  }
  for (int32_t t : pe.outputs) last[t] = n;
  ArenaLiveness& l = *out;
  l = ArenaLiveness{};
  for (int32_t t = 0; t < static_cast<int32_t>(pe.tensors.size()); ++t) {
    if (pe.tensors[t].storage != StorageKind::kArena) continue;
    if (writer[t] < 0) return DataLoss(where + pe.TensorName(t) + " is in the arena but no instruction writes it");
    l.tensors.push_back(t);
  }
  std::sort(l.tensors.begin(), l.tensors.end(),
            [&](int32_t a, int32_t b) { return writer[a] != writer[b] ? writer[a] < writer[b] : a < b; });
  for (int32_t t : l.tensors) {
    l.first.push_back(writer[t]);
    l.last.push_back(last[t]);
  }
  l.expiry.resize(l.tensors.size());
  for (size_t p = 0; p < l.expiry.size(); ++p) l.expiry[p] = static_cast<int32_t>(p);
  std::sort(l.expiry.begin(), l.expiry.end(),
            [&](int32_t a, int32_t b) { return l.last[a] != l.last[b] ? l.last[a] < l.last[b] : a < b; });
  return Status::Ok();
}

void ArenaScratch::Resize(const ArenaLiveness& l) {
  const size_t m = l.tensors.size();
  begin.assign(m, 0);
  end.assign(m, 0);
  by_offset.assign(m, 0);
  rank.assign(m, 0);
  live.assign(m + 1, 0);
}

bool ShapeBytes(const int64_t* dims, int32_t rank, DType dtype, int64_t* elements, uint64_t* bytes) {
  int64_t n = 1;
  for (int32_t d = 0; d < rank; ++d)
    if (dims[d] < 0 || __builtin_mul_overflow(n, dims[d], &n)) return false;
  uint64_t b = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(n), DTypeSize(dtype), &b)) return false;
  *elements = n;
  *bytes = b;
  return true;
}

Status CheckArenaPlan(const PreparedEntry& pe, const int64_t* values, const int64_t* dims, ArenaScratch& s) {
  const ArenaLiveness& l = pe.liveness;
  const int32_t m = static_cast<int32_t>(l.tensors.size());
  const int64_t arena = values[pe.arena_expr];
  if (arena < 0) return DataLoss(pe.label + ": arena size evaluates to " + to_string(arena));
  for (int32_t p = 0; p < m; ++p) {
    const int32_t t = l.tensors[p];
    const PreparedTensor& pt = pe.tensors[t];
    int64_t elements = 0;
    uint64_t bytes = 0;
    if (!ShapeBytes(dims + pt.dims_begin, pt.rank, pt.dtype, &elements, &bytes))
      return DataLoss(pe.TensorLabel(t) + ": dims negative or too large");
    const int64_t off = values[pt.offset_expr];
    s.begin[p] = s.end[p] = 0;
    if (bytes == 0) continue;  // an empty tensor's offset is never dereferenced
    if (off < 0 || static_cast<uint64_t>(off) % DTypeSize(pt.dtype) != 0 || off > arena ||
        bytes > static_cast<uint64_t>(arena - off))
      return DataLoss(pe.TensorLabel(t) + ": arena bytes [" + to_string(off) + ", +" + to_string(bytes) +
                      ") misaligned or outside the arena (" + to_string(arena) + " bytes)");
    s.begin[p] = static_cast<uint64_t>(off);
    s.end[p] = static_cast<uint64_t>(off) + bytes;
  }
  for (int32_t p = 0; p < m; ++p) s.by_offset[p] = p;
  std::sort(s.by_offset.begin(), s.by_offset.end(),
            [&](int32_t a, int32_t b) { return s.begin[a] != s.begin[b] ? s.begin[a] < s.begin[b] : a < b; });
  for (int32_t r = 0; r < m; ++r) s.rank[s.by_offset[r]] = r;
  std::fill(s.live.begin(), s.live.end(), 0);
  auto overlap = [&](int32_t a, int32_t b) {
    auto side = [&](int32_t p) {
      return pe.TensorName(l.tensors[p]) + " (bytes [" + to_string(s.begin[p]) + ", " +
             to_string(s.end[p]) + "), " + Lifetime(pe, l.first[p], l.last[p]) + ")";
    };
    return DataLoss(pe.label + " memory plan: " + side(a) + " and " + side(b) + " share bytes");
  };
  // Sweep in write order. The live set is kept free of overlaps, so ordered by offset its
  // ends are ordered too: a new tensor overlaps a live one iff it overlaps its neighbours.
  int32_t live = 0;
  size_t x = 0;
  for (int32_t p = 0; p < m; ++p) {
    for (; x < l.expiry.size() && l.last[l.expiry[x]] < l.first[p]; ++x) {
      const int32_t q = l.expiry[x];
      if (s.end[q] == s.begin[q]) continue;
      Mark(s.live, s.rank[q], -1);
      --live;
    }
    if (s.end[p] == s.begin[p]) continue;
    const int32_t below = CountBelow(s.live, s.rank[p]);
    if (below > 0) {
      const int32_t q = s.by_offset[KthLive(s.live, below)];
      if (s.end[q] > s.begin[p]) return overlap(q, p);
    }
    if (below < live) {
      const int32_t q = s.by_offset[KthLive(s.live, below + 1)];
      if (s.begin[q] < s.end[p]) return overlap(p, q);
    }
    Mark(s.live, s.rank[p], 1);
    ++live;
  }
  return Status::Ok();
}

}  // namespace kiln
