#include "runtime/executor/binder.h"

#include <algorithm>
#include <string>

#include "runtime/shape_text.h"

namespace kiln {

using std::to_string;

std::string ViewShapeText(const int64_t* dims, int32_t rank) {
  if (rank < 0 || rank > kMaxRank) return "of rank " + to_string(rank);
  return ShapeText({dims, static_cast<size_t>(rank)});
}

Status Binder::Bind(int32_t e, std::span<const TensorView> inputs, bool runtime_dims_set) {
  const PreparedEntry& pe = c_.mi->prepared[e];
  EntryState& s = c_.entries[e];
  s.bound = false;
  if (!runtime_dims_set)
    for (const PrologueBound& b : pe.prologue.bounds)
      s.scratch.symbol_values[static_cast<size_t>(b.symbol)] = s.scratch.expr_values[static_cast<size_t>(b.expr)];
  s.host_placement = 0;  // LayOut clears the arena pointers: the backend places them again
  ExprFailure why;
  if (!EvalExprs(pe.exprs, s.scratch.symbol_values, s.values.data(), &why))
    return InvalidArgument(pe.label + ": cannot compute shapes for these inputs: " +
                           FormatExprFailure(pe.exprs, pe.prologue.symbols, why));
  // A branch that cannot run for these shapes (its guard, checked if it is taken, fails)
  // has empty tensors, not negative dims.
  EvaluateDims(pe, s.values.data(), s.dims.data());
  for (size_t t = 0; t < pe.tensors.size(); ++t) KILN_RETURN_IF_ERROR(LayOut(pe, s, static_cast<int32_t>(t), inputs));
  if (!pe.plan_checked) KILN_RETURN_IF_ERROR(CheckArenaPlan(pe, s.values.data(), s.dims.data(), s.arena_scratch));
  s.arena_needed = static_cast<uint64_t>(s.values[pe.arena_expr]);  // >= 0: the plan check
  // An empty tensor's offset is never read.
  const ArenaLiveness& l = pe.liveness;
  for (size_t p = 0; p < l.tensors.size(); ++p) {
    const int32_t t = l.tensors[p];
    s.arena_offsets[t] = s.refs[t].num_elements == 0 ? 0 : static_cast<uint64_t>(s.values[l.offset_expr[p]]);
  }
  for (size_t k = 0; k < pe.operands.size(); ++k)
    s.operands[k] = pe.operands[k] < 0 ? cpu::TensorRef{} : s.refs[pe.operands[k]];
  for (size_t k = 0; k < pe.size_exprs.size(); ++k) s.sizes[k] = s.values[pe.size_exprs[k]];
  KILN_RETURN_IF_ERROR(c_.backend->Prepare(pe, s));
  std::copy(s.scratch.symbol_values.begin(), s.scratch.symbol_values.end(), s.binding.begin());
  s.bound = true;
  return Status::Ok();
}

bool Binder::NeedsBind(int32_t e) const {
  const EntryState& s = c_.entries[e];
  if (!s.bound || !c_.backend->Holds(s)) return true;
  const auto& v = s.scratch.symbol_values;
  for (size_t k = 0; k < v.size(); ++k)
    if (v[k] != s.binding[k]) return true;
  for (const PrologueBound& b : c_.mi->prepared[e].prologue.bounds)
    if (v[static_cast<size_t>(b.symbol)] != s.scratch.expr_values[static_cast<size_t>(b.expr)]) return true;
  return false;
}

int32_t Binder::RuntimeSymbol(int32_t e, int32_t dim) const {
  return c_.mi->prepared[e].runtime_dims[static_cast<size_t>(dim)].symbol;
}

int64_t Binder::RuntimeBound(int32_t e, int32_t dim) const {
  const PreparedRuntimeDim& d = c_.mi->prepared[e].runtime_dims[static_cast<size_t>(dim)];
  return c_.entries[e].scratch.expr_values[static_cast<size_t>(d.bound_expr)];
}

Status Binder::CheckRuntimeGuards(int32_t e, int32_t dim) const {
  const PreparedEntry& pe = c_.mi->prepared[e];
  const EntryState& s = c_.entries[e];
  for (const int32_t g : pe.guards_after[static_cast<size_t>(dim)]) {
    const PreparedRuntimeGuard& guard = pe.runtime_guards[static_cast<size_t>(g)];
    if (s.values[static_cast<size_t>(guard.expr)] != 0) continue;
    std::string values;
    for (const int32_t k : guard.symbols)
      values += (values.empty() ? "" : ", ") + pe.prologue.symbols[static_cast<size_t>(k)] + " = " +
                to_string(s.scratch.symbol_values[static_cast<size_t>(k)]);
    return InvalidArgument(pe.label + ": guard " + guard.text + " does not hold for " + values);
  }
  return Status::Ok();
}

Status Binder::LayOut(const PreparedEntry& pe, EntryState& s, int32_t t, std::span<const TensorView> inputs) {
  const PreparedTensor& pt = pe.tensors[t];
  cpu::TensorRef& r = s.refs[t];
  r = cpu::TensorRef{};
  if (pt.storage == StorageKind::kAbsent) return Status::Ok();
  r.dtype = pt.dtype;
  r.rank = pt.rank;
  r.dims = s.dims.data() + pt.dims_begin;
  for (int32_t d = 0; d < r.rank; ++d)
    if (r.dims[d] < 0) return DataLoss(pe.TensorLabel(t) + ": dim " + to_string(d) + " evaluates to " + to_string(r.dims[d]));
  uint64_t bytes = 0;
  if (!ShapeBytes(r.dims, r.rank, DTypeSize(r.dtype), &r.num_elements, &bytes))
    return InvalidArgument(pe.TensorLabel(t) + ": shape " + ViewShapeText(r.dims, r.rank) + " is too large");
  switch (pt.storage) {
    case StorageKind::kInput: {
      const TensorView& v = inputs[pt.index];
      if (v.rank != r.rank || !std::equal(r.dims, r.dims + r.rank, v.dims))
        return DataLoss(pe.TensorLabel(t) + ": planned shape " + ViewShapeText(r.dims, r.rank) + " differs from input " +
                        to_string(pt.index) + "'s " + ViewShapeText(v.dims, v.rank));
      r.data = v.data;
      break;
    }
    case StorageKind::kWeight: {
      const PreparedWeight& w = c_.mi->weight_table[pt.index];
      if (bytes > w.size)
        return DataLoss(pe.TensorLabel(t) + ": needs " + to_string(bytes) + " bytes, weight " + to_string(pt.index) +
                        " has " + to_string(w.size));
      r.data = const_cast<uint8_t*>(c_.mi->weights + w.offset);  // kernels only read inputs
      break;
    }
    case StorageKind::kArena: break;  // placed by the backend (Backend::Prepare) once the plan is checked
    case StorageKind::kSymbolic: {
      if (r.num_elements != pt.num_values)
        return DataLoss(pe.TensorLabel(t) + ": shape " + ViewShapeText(r.dims, r.rank) + " but " +
                        to_string(pt.num_values) + " values");
      int64_t* base = s.symbolic.data() + pt.values_begin;
      for (int32_t v = 0; v < pt.num_values; ++v) {
        const int64_t x = s.values[pe.value_exprs[pt.values_begin + v]];
        if (pt.dtype == DType::kInt64) {
          base[v] = x;
        } else {
          if (x < INT32_MIN || x > INT32_MAX)
            return InvalidArgument(pe.TensorLabel(t) + ": value " + to_string(x) + " does not fit int32");
          reinterpret_cast<int32_t*>(base)[v] = static_cast<int32_t>(x);
        }
      }
      r.data = base;
      break;
    }
    case StorageKind::kAbsent: break;
  }
  return Status::Ok();
}

}  // namespace kiln
