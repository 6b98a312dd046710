#include "compiler/passes/memory_plan.h"

#include "compiler/passes/executors.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>

#include "compiler/ops/meta_util.h"

namespace kiln::passes {
namespace {

inline constexpr int64_t kBufferAlignment = 64;

// The least and greatest values of `s` over every value of its run-time dims (each in [0, its
// bound]; ir::RuntimeDim), as expressions over the input symbols: interval arithmetic, so
// exact for sums, products of non-negative terms, min and max. nullopt where it cannot bound
// `s` (a product with a possibly negative side, a division by a run-time dim).
struct Interval {
  ir::Sym lo, hi;
};
// `derived`: each derived symbol's bounds, computed once (a chain of them may read each twice).
std::optional<Interval> Bounds(const ir::Sym& s, const std::vector<ir::RuntimeDim>& dims,
                               std::map<std::string, std::optional<Interval>>& derived) {
  if (!ir::meta::HasRuntimeVar(s)) return Interval{s, s};
  if (s.is_derived()) {
    if (auto it = derived.find(s.name()); it != derived.end()) return it->second;
    return derived[s.name()] = Bounds(s.definition(), dims, derived);
  }
  if (s.op() == ir::SymOp::kVar) {
    for (const ir::RuntimeDim& d : dims)
      if (d.symbol == s.name()) return Interval{0, d.bound};
    return std::nullopt;
  }
  const std::optional<Interval> a = Bounds(s.lhs(), dims, derived), b = Bounds(s.rhs(), dims, derived);
  if (!a || !b) return std::nullopt;
  const bool fixed_b = !ir::meta::HasRuntimeVar(s.rhs()) && s.rhs().lo() >= 1;
  switch (s.op()) {
    case ir::SymOp::kAdd: return Interval{a->lo + b->lo, a->hi + b->hi};
    case ir::SymOp::kSub: return Interval{a->lo - b->hi, a->hi - b->lo};
    case ir::SymOp::kMul:
      if (a->lo.lo() < 0 || b->lo.lo() < 0) return std::nullopt;
      return Interval{a->lo * b->lo, a->hi * b->hi};
    case ir::SymOp::kFloorDiv:
      if (!fixed_b) return std::nullopt;
      return Interval{ir::FloorDiv(a->lo, s.rhs()), ir::FloorDiv(a->hi, s.rhs())};
    case ir::SymOp::kCeilDiv:
      if (!fixed_b) return std::nullopt;
      return Interval{ir::CeilDiv(a->lo, s.rhs()), ir::CeilDiv(a->hi, s.rhs())};
    case ir::SymOp::kMod:
      if (!fixed_b) return std::nullopt;
      return Interval{0, s.rhs() - 1};
    case ir::SymOp::kMax: return Interval{ir::Max(a->lo, b->lo), ir::Max(a->hi, b->hi)};
    case ir::SymOp::kMin: return Interval{ir::Min(a->lo, b->lo), ir::Min(a->hi, b->hi)};
    case ir::SymOp::kEq:
    case ir::SymOp::kLt: return Interval{0, 1};
    default: return std::nullopt;
  }
}

// Makes sure each model output is written by an instruction, into its own buffer.
void CopyUnwrittenOutputs(ir::Trace& trace) {
  std::vector<bool> written(trace.values.size(), false);
  for (const ir::Node& n : trace.body.nodes)
    for (ir::ValueId id : n.outputs)
      if (id != ir::kNoValue) written[id] = true;
  std::vector<bool> seen(trace.values.size(), false);
  for (size_t i = 0; i < trace.outputs.size(); ++i) {
    ir::ValueId src = trace.outputs[i];
    if (written[src] && !seen[src]) {
      seen[src] = true;
      continue;
    }
    ir::Value copy = trace.value(src);
    copy.data = nullptr;
    copy.sym.reset();
    ir::ValueId dst = trace.AddValue(copy);
    // The copy takes the name; the source keeps it too when it is a model input, or a model
    // output already (a value the model lists twice: both outputs are named as declared).
    if (std::find(trace.inputs.begin(), trace.inputs.end(), src) == trace.inputs.end() &&
        std::find(trace.outputs.begin(), trace.outputs.begin() + static_cast<std::ptrdiff_t>(i), src) ==
            trace.outputs.begin() + static_cast<std::ptrdiff_t>(i))
      trace.value(src).name += "#source";
    ir::Node node;
    node.op = "Identity";
    node.name = "copy_to_output_" + std::to_string(i);
    node.inputs = {src};
    node.outputs = {dst};
    PlaceNode(node);
    for (ir::Placement& p : node.placements) p.reason = "model output must be written into the arena";
    trace.body.nodes.push_back(std::move(node));
    trace.outputs[i] = dst;
    written.push_back(true);
    seen.push_back(true);
  }
}

// Greedy by size: largest first, lowest non-conflicting offset. nullopt when an end offset
// overflows int64.
std::optional<int64_t> PlaceStatic(const std::vector<int>& buffers, std::vector<TensorPlan>& plans) {
  std::vector<int> order = buffers;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return *plans[a].bytes.value() > *plans[b].bytes.value();
  });
  std::vector<int> placed;
  int64_t arena = 0;
  for (int b : order) {
    TensorPlan& p = plans[b];
    int64_t size = *p.bytes.value();
    std::vector<std::pair<int64_t, int64_t>> busy;  // [begin, end) of overlapping lifetimes
    for (int q : placed) {
      const TensorPlan& o = plans[q];
      if (o.first <= p.last && p.first <= o.last)
        busy.emplace_back(*o.offset.value(), *o.offset.value() + *o.bytes.value());
    }
    std::sort(busy.begin(), busy.end());
    int64_t offset = 0, end = 0;
    for (const auto& [busy_begin, busy_end] : busy) {
      if (__builtin_add_overflow(offset, size, &end)) return std::nullopt;
      if (end <= busy_begin) break;
      offset = std::max(offset, busy_end);
    }
    if (__builtin_add_overflow(offset, size, &end)) return std::nullopt;
    p.offset = offset;
    arena = std::max(arena, end);
    placed.push_back(b);
  }
  return arena;
}

// A size at a nominal binding (every symbol 64), to compare symbolic sizes when choosing a
// slot. Only the choice depends on it; the offsets stay valid for every binding.
int64_t NominalBytes(const ir::Sym& bytes) {
  std::vector<std::pair<std::string, int64_t>> bindings;
  for (const std::string& v : bytes.Vars()) bindings.emplace_back(v, 64);
  return bytes.Eval(bindings).value_or(INT64_MAX);
}

// Slots for symbolic sizes: a buffer reuses a free slot, preferring one of the same size,
// then the one whose nominal size is closest without growing it, then the largest.
ir::Sym PlaceSymbolic(const std::vector<int>& buffers, std::vector<TensorPlan>& plans) {
  struct Slot { ir::Sym bytes; int64_t nominal; int32_t free_after; std::vector<int> members; };
  std::vector<Slot> slots;
  std::vector<int> order = buffers;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return plans[a].first < plans[b].first; });
  for (int b : order) {
    TensorPlan& p = plans[b];
    const int64_t want = NominalBytes(p.bytes);
    // Cost of putting the buffer in a slot: its growth at the nominal binding, then waste.
    auto cost = [&](const Slot& s) {
      return s.nominal >= want ? std::pair<int64_t, int64_t>{0, s.nominal - want}
                               : std::pair<int64_t, int64_t>{want - s.nominal, 0};
    };
    int chosen = -1;
    for (size_t s = 0; s < slots.size(); ++s) {
      if (slots[s].free_after >= p.first) continue;
      if (slots[s].bytes.Same(p.bytes)) {
        chosen = static_cast<int>(s);
        break;
      }
      if (chosen < 0 || cost(slots[s]) < cost(slots[chosen])) chosen = static_cast<int>(s);
    }
    if (chosen < 0) {
      slots.push_back({p.bytes, want, p.last, {b}});
    } else {
      Slot& s = slots[chosen];
      if (!s.bytes.Same(p.bytes)) s.bytes = ir::Max(s.bytes, p.bytes);
      s.nominal = std::max(s.nominal, want);
      s.free_after = p.last;
      s.members.push_back(b);
    }
  }
  ir::Sym offset(0);
  for (const Slot& s : slots) {
    for (int b : s.members) {
      plans[b].offset = offset;
      plans[b].slot = static_cast<int32_t>(&s - slots.data());
    }
    offset = offset + s.bytes;
  }
  return offset;
}

}  // namespace

Result<MemoryPlan> PlanMemory(const ir::Trace& executors) {
  MemoryPlan plan;
  ir::Trace& trace = plan.trace;
  trace = executors;
  trace.stage = "plan";
  trace.provenance = "liveness-based memory plan; final instruction list";
  CopyUnwrittenOutputs(trace);

  const int32_t n = static_cast<int32_t>(trace.body.nodes.size());
  std::vector<TensorPlan>& tensors = plan.tensors;
  tensors.assign(trace.values.size(), TensorPlan{});
  for (size_t i = 0; i < trace.inputs.size(); ++i) {
    tensors[trace.inputs[i]].storage = StorageKind::kInput;
    tensors[trace.inputs[i]].input_index = static_cast<int64_t>(i);
  }
  for (int32_t t = 0; t < n; ++t) {
    const ir::Node& node = trace.body.nodes[t];
    for (ir::ValueId id : node.outputs) {
      if (id == ir::kNoValue) continue;
      TensorPlan& p = tensors[id];
      p.storage = StorageKind::kArena;
      p.first = t;
      p.last = t;
    }
    // A predicate's condition (a run-time If) is read as an input is: live until the node runs.
    std::vector<ir::ValueId> reads = node.inputs;
    for (const ir::Predicate& w : node.when) reads.push_back(w.cond);
    for (ir::ValueId id : reads) {
      if (id == ir::kNoValue) continue;
      TensorPlan& p = tensors[id];
      if (p.storage == StorageKind::kArena) {
        p.last = std::max(p.last, t);
      } else if (p.storage == StorageKind::kAbsent) {
        const ir::Value& v = trace.value(id);
        if (v.is_const()) p.storage = StorageKind::kWeight;
        else if (v.sym) p.storage = StorageKind::kSymbolic;
        else
          return Internal("plan: value '" + v.name + "' read by node '" + node.name +
                          "' has no producer, data or known elements");
      }
    }
  }
  for (ir::ValueId id : trace.outputs) tensors[id].last = n;
  // A run-time Loop runs its body again (runtime/executor/loop.h): what the body reads from before
  // kiln.LoopBegin lives until kiln.LoopEnd, and what LoopEnd writes (scan outputs, row by row
  // after each iteration) lives from LoopBegin. The runtime checks the same lifetimes
  // (runtime/arena_plan.cc).
  std::vector<int32_t> open;
  for (int32_t t = 0; t < n; ++t) {
    const ir::Node& node = trace.body.nodes[t];
    if (node.op == "kiln.LoopBegin") open.push_back(t);
    if (node.op != "kiln.LoopEnd" || open.empty()) continue;
    const int32_t b = open.back();
    open.pop_back();
    for (int32_t i = b + 1; i <= t; ++i) {
      std::vector<ir::ValueId> reads = trace.body.nodes[i].inputs;
      for (const ir::Predicate& w : trace.body.nodes[i].when) reads.push_back(w.cond);
      for (ir::ValueId id : reads)
        if (id != ir::kNoValue && tensors[id].storage == StorageKind::kArena && tensors[id].first < b)
          tensors[id].last = std::max(tensors[id].last, t);
    }
    for (ir::ValueId id : node.outputs)
      if (id != ir::kNoValue) tensors[id].first = b;
  }

  // Values written under a run-time If's predicate: for a call its branch does not run, a dim
  // may evaluate below 0 (a Conv's output extent, whose guard only that branch checks), and
  // the runtime lays the tensor out empty (runtime/model.cc).
  std::vector<bool> in_branch(tensors.size(), false);
  for (const ir::Node& node : trace.body.nodes)
    if (!node.when.empty())
      for (ir::ValueId id : node.outputs)
        if (id != ir::kNoValue) in_branch[id] = true;
  std::vector<int> buffers;
  bool all_static = true;
  for (size_t id = 0; id < tensors.size(); ++id) {
    TensorPlan& p = tensors[id];
    if (p.storage != StorageKind::kArena) continue;
    const ir::Value& v = trace.value(static_cast<ir::ValueId>(id));
    // A dim that depends on a run-time dim gets room for the largest value it can take.
    ir::SymShape room = v.shape;
    for (size_t d = 0; d < room.size(); ++d) {
      std::map<std::string, std::optional<Interval>> derived;
      const std::optional<Interval> b = Bounds(room[d], trace.runtime_dims, derived);
      if (!b)
        return Unimplemented("plan: tensor '" + v.name + "' dim " + std::to_string(d) + " (" + room[d].ToString() +
                             ") depends on a run-time dim in a way the memory plan cannot bound");
      room[d] = b->hi;
      if (in_branch[id]) room[d] = ir::Max(room[d], 0);
    }
    ir::Sym raw = ir::NumElements(room) * ir::Sym(static_cast<int64_t>(DTypeSize(v.dtype)));
    p.bytes = ir::CeilDiv(raw, kBufferAlignment) * ir::Sym(kBufferAlignment);
    if (!p.bytes.is_const() && p.bytes.Vars().empty())
      return ResourceExhausted("plan: tensor '" + v.name + "' " + std::string(DTypeName(v.dtype)) +
                               ir::ShapeToString(v.shape) + " has more bytes (rounded up to " +
                               std::to_string(kBufferAlignment) + ") than int64 can count");
    all_static = all_static && p.bytes.is_const();
    buffers.push_back(static_cast<int>(id));
  }
  const auto overflow = [&] {
    return ResourceExhausted("plan: the arena for " + std::to_string(buffers.size()) +
                             " tensors has more bytes than int64 can count");
  };
  if (all_static) {
    const std::optional<int64_t> arena = PlaceStatic(buffers, tensors);
    if (!arena) return overflow();
    plan.arena_bytes = *arena;
    int64_t bound = 0;
    for (int32_t t = 0; t <= n; ++t) {
      int64_t live = 0;  // at most the arena: it cannot overflow
      for (int b : buffers)
        if (tensors[b].first <= t && t <= tensors[b].last) live += *tensors[b].bytes.value();
      bound = std::max(bound, live);
    }
    plan.lower_bound_bytes = bound;
  } else {
    plan.arena_bytes = PlaceSymbolic(buffers, tensors);
    if (!plan.arena_bytes.is_const() && plan.arena_bytes.Vars().empty()) return overflow();
  }
  return plan;
}

}  // namespace kiln::passes
