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
    // Its inputs, then its predicates' tensors, which it reads before it runs.
    for (int32_t k = 0; k < pi.num_inputs + static_cast<int32_t>(pi.when.size()); ++k) {
      const int32_t t = k < pi.num_inputs ? pe.operands[pi.operands_begin + k] : pi.when[k - pi.num_inputs].tensor;
      if (t < 0 || pe.tensors[t].storage != StorageKind::kArena) continue;
      if (writer[t] < 0) continue;  // reported below
      if (writer[t] >= i)
        return DataLoss(where + pi.label + " reads " + pe.TensorName(t) + " before " +
                        (writer[t] == i ? std::string("it writes it itself") : pe.instructions[writer[t]].label + " writes it"));
      last[t] = std::max(last[t], i);
    }
  }
  for (int32_t t : pe.outputs) last[t] = n;
  // A run-time Loop (runtime/executor/loop_pairs.h) runs its body again: what the body reads from before
  // the loop lives until its LoopEnd, and what LoopEnd writes (the scan outputs, row by row)
  // lives from its LoopBegin, so that no body tensor shares its bytes.
  std::vector<int32_t> first = writer;
  for (int32_t b = 0; b < n; ++b) {
    const int32_t e = pe.loop_pair.empty() ? -1 : pe.loop_pair[b];
    if (e <= b) continue;
    for (int32_t i = b + 1; i <= e; ++i) {
      const PreparedInstruction& pi = pe.instructions[i];
      for (int32_t k = 0; k < pi.num_inputs + static_cast<int32_t>(pi.when.size()); ++k) {
        const int32_t t = k < pi.num_inputs ? pe.operands[pi.operands_begin + k] : pi.when[k - pi.num_inputs].tensor;
        if (t >= 0 && writer[t] >= 0 && writer[t] < b) last[t] = std::max(last[t], e);
      }
    }
    const PreparedInstruction& end = pe.instructions[e];
    for (int32_t k = 0; k < end.num_outputs; ++k)
      if (const int32_t t = pe.operands[end.operands_begin + end.num_inputs + k]; t >= 0) first[t] = b;
  }
  ArenaLiveness& l = *out;
  l = ArenaLiveness{};
  for (int32_t t = 0; t < static_cast<int32_t>(pe.tensors.size()); ++t) {
    if (pe.tensors[t].storage != StorageKind::kArena) continue;
    if (writer[t] < 0) return DataLoss(where + pe.TensorName(t) + " is in the arena but no instruction writes it");
    l.tensors.push_back(t);
  }
  std::sort(l.tensors.begin(), l.tensors.end(),
            [&](int32_t a, int32_t b) { return first[a] != first[b] ? first[a] < first[b] : a < b; });
  for (int32_t t : l.tensors) {
    l.first.push_back(first[t]);
    l.last.push_back(last[t]);
    l.offset_expr.push_back(pe.tensors[t].offset_expr);
    l.elem_bytes.push_back(static_cast<uint32_t>(DTypeSize(pe.tensors[t].dtype)));  // verified dtype
  }
  l.expiry.resize(l.tensors.size());
  for (size_t p = 0; p < l.expiry.size(); ++p) l.expiry[p] = static_cast<int32_t>(p);
  std::sort(l.expiry.begin(), l.expiry.end(),
            [&](int32_t a, int32_t b) { return l.last[a] != l.last[b] ? l.last[a] < l.last[b] : a < b; });
  return Status::Ok();
}

void RankSet::Resize(size_t n) {
  level_begin_.clear();
  size_t words = 0, level = std::max<size_t>(1, (n + 63) / 64);
  for (;;) {
    level_begin_.push_back(words);
    words += level;
    if (level == 1) break;
    level = (level + 63) / 64;
  }
  level_begin_.push_back(words);
  words_.assign(words, 0);
}

void RankSet::Clear() { std::fill(words_.begin(), words_.end(), 0); }

void RankSet::Insert(int64_t i) {
  for (size_t k = 0; k + 1 < level_begin_.size(); ++k, i >>= 6) {
    uint64_t& w = words_[level_begin_[k] + static_cast<size_t>(i >> 6)];
    const bool was_empty = w == 0;
    w |= uint64_t{1} << (i & 63);
    if (!was_empty) break;
  }
}

void RankSet::Erase(int64_t i) {
  for (size_t k = 0; k + 1 < level_begin_.size(); ++k, i >>= 6) {
    uint64_t& w = words_[level_begin_[k] + static_cast<size_t>(i >> 6)];
    w &= ~(uint64_t{1} << (i & 63));
    if (w != 0) break;
  }
}

int64_t RankSet::Below(int64_t i) const {
  const size_t levels = level_begin_.size() - 1;
  size_t k = 0;
  for (;; ++k, i >>= 6) {  // up to the first level with a member below i's bit
    if (k == levels) return -1;
    const uint64_t w = words_[level_begin_[k] + static_cast<size_t>(i >> 6)] & ((uint64_t{1} << (i & 63)) - 1);
    if (w != 0) {
      i = (i & ~int64_t{63}) | (63 - std::countl_zero(w));
      break;
    }
  }
  for (; k > 0; --k)  // down, taking the highest member of each word
    i = (i << 6) | (63 - std::countl_zero(words_[level_begin_[k - 1] + static_cast<size_t>(i)]));
  return i;
}

int64_t RankSet::Above(int64_t i) const {
  const size_t levels = level_begin_.size() - 1;
  size_t k = 0;
  for (;; ++k, i >>= 6) {
    if (k == levels) return -1;
    const uint64_t w = words_[level_begin_[k] + static_cast<size_t>(i >> 6)] & ~((uint64_t{2} << (i & 63)) - 1);
    if (w != 0) {
      i = (i & ~int64_t{63}) | std::countr_zero(w);
      break;
    }
  }
  for (; k > 0; --k)
    i = (i << 6) | std::countr_zero(words_[level_begin_[k - 1] + static_cast<size_t>(i)]);
  return i;
}

void ArenaScratch::Resize(const ArenaLiveness& l) {
  const size_t m = l.tensors.size();
  begin.assign(m, 0);
  end.assign(m, 0);
  by_offset.resize(m);
  rank.resize(m);
  for (size_t p = 0; p < m; ++p) by_offset[p] = rank[p] = static_cast<int32_t>(p);
  live.Resize(m);
}

namespace {

// The O(n) proof. Walk the tensors in the order of their offsets; a run starts at a tensor
// that starts at or past every end so far. Within a run each tensor must be written after
// the last read of the one walked before it, whose lifetime then ends last in the run. Two
// tensors that share a byte are in one run (the later one in the walk starts inside the
// earlier one, so no run starts between them), so their lifetimes are apart. A slot plan
// passes: a slot's tensors start at one offset, walked in the order they are written, each
// after its predecessor's last read, and end before the next slot. False proves nothing:
// the exact sweep decides.
bool ProvenByRuns(const ArenaLiveness& l, const ArenaScratch& s) {
  uint64_t reach = 0;    // the largest end so far
  int32_t run_last = 0;  // the last read of the run's latest tensor, its latest one to end
  for (const int32_t p : s.by_offset) {
    if (s.end[p] == s.begin[p]) continue;
    if (s.begin[p] < reach && l.first[p] <= run_last) return false;
    run_last = l.last[p];
    reach = std::max(reach, s.end[p]);
  }
  return true;
}

}  // namespace

Status CheckArenaPlan(const PreparedEntry& pe, const int64_t* values, const int64_t* dims, ArenaScratch& s) {
  const ArenaLiveness& l = pe.liveness;
  const int32_t m = static_cast<int32_t>(l.tensors.size());
  const int64_t arena = values[pe.arena_expr];
  if (arena < 0) return DataLoss(pe.label + ": arena size evaluates to " + to_string(arena));
  for (int32_t p = 0; p < m; ++p) {
    const PreparedTensor& pt = pe.tensors[l.tensors[p]];
    int64_t elements = 0;
    uint64_t bytes = 0;
    if (!ShapeBytes(dims + pt.dims_begin, pt.rank, l.elem_bytes[p], &elements, &bytes))
      return DataLoss(pe.TensorLabel(l.tensors[p]) + ": dims negative or too large");
    const int64_t off = values[l.offset_expr[p]];
    s.begin[p] = s.end[p] = 0;
    if (bytes == 0) continue;  // an empty tensor's offset is never dereferenced
    // Element sizes are powers of two: the mask tests alignment without a division.
    if (off < 0 || (static_cast<uint64_t>(off) & (l.elem_bytes[p] - 1)) != 0 || off > arena ||
        bytes > static_cast<uint64_t>(arena - off))
      return DataLoss(pe.TensorLabel(l.tensors[p]) + ": arena bytes [" + to_string(off) + ", +" + to_string(bytes) +
                      ") misaligned or outside the arena (" + to_string(arena) + " bytes)");
    s.begin[p] = static_cast<uint64_t>(off);
    s.end[p] = static_cast<uint64_t>(off) + bytes;
  }
  auto before = [&](int32_t a, int32_t b) { return s.begin[a] != s.begin[b] ? s.begin[a] < s.begin[b] : a < b; };
  if (!std::is_sorted(s.by_offset.begin(), s.by_offset.end(), before)) {
    std::sort(s.by_offset.begin(), s.by_offset.end(), before);
    for (int32_t r = 0; r < m; ++r) s.rank[s.by_offset[r]] = r;
  }
  if (ProvenByRuns(l, s)) return Status::Ok();
  ++s.sweeps;
  s.live.Clear();
  auto overlap = [&](int32_t a, int32_t b) {
    auto side = [&](int32_t p) {
      return pe.TensorName(l.tensors[p]) + " (bytes [" + to_string(s.begin[p]) + ", " +
             to_string(s.end[p]) + "), " + Lifetime(pe, l.first[p], l.last[p]) + ")";
    };
    return DataLoss(pe.label + " memory plan: " + side(a) + " and " + side(b) + " share bytes");
  };
  // Sweep in write order. The live set is kept free of overlaps, so ordered by offset its
  // ends are ordered too: a new tensor overlaps a live one iff it overlaps its neighbours.
  size_t x = 0;
  for (int32_t p = 0; p < m; ++p) {
    for (; x < l.expiry.size() && l.last[l.expiry[x]] < l.first[p]; ++x) {
      const int32_t q = l.expiry[x];
      if (s.end[q] != s.begin[q]) s.live.Erase(s.rank[q]);
    }
    if (s.end[p] == s.begin[p]) continue;
    if (const int64_t r = s.live.Below(s.rank[p]); r >= 0) {
      const int32_t q = s.by_offset[r];
      if (s.end[q] > s.begin[p]) return overlap(q, p);
    }
    if (const int64_t r = s.live.Above(s.rank[p]); r >= 0) {
      const int32_t q = s.by_offset[r];
      if (s.begin[q] < s.end[p]) return overlap(p, q);
    }
    s.live.Insert(s.rank[p]);
  }
  return Status::Ok();
}

}  // namespace kiln
