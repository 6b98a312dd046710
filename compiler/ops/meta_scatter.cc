// Meta functions of the index-driven ops in runtime/kernels/scatter.cc: ScatterElements
// (and Scatter), ScatterND, GatherND and OneHot.
#include <cmath>

#include "compiler/ops/families.h"
#include "compiler/ops/meta_util.h"

namespace kiln::ir {
using namespace meta;
namespace {

Status CheckReduction(const AttrMap& attrs) {
  const std::string_view r = attrs.GetString("reduction", "none");
  if (r != "none" && r != "add" && r != "mul" && r != "max" && r != "min")
    return InvalidArgument("attribute reduction: expected none, add, mul, max or min, found \"" + std::string(r) + "\"");
  return Status::Ok();
}

Status ScatterElementsMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_RETURN_IF_ERROR(CheckReduction(ctx.attrs()));
  KILN_ASSIGN_OR_RETURN(const Value* data, Need(ctx, 0, "data"));
  KILN_ASSIGN_OR_RETURN(const Value* idx, Need(ctx, 1, "indices"));
  KILN_ASSIGN_OR_RETURN(const Value* upd, Need(ctx, 2, "updates"));
  KILN_RETURN_IF_ERROR(CheckDType(*idx, "indices", kSignedInts));
  KILN_RETURN_IF_ERROR(CheckSameDType(*data, "data", *upd, "updates"));
  KILN_RETURN_IF_ERROR(CheckRank(*data, "data", 1, kMaxRank));
  if (idx->rank() != data->rank() || upd->rank() != data->rank())
    return InvalidArgument("inputs indices and updates: expected rank " + std::to_string(data->rank()) +
                           " (data's), found " + Str(idx->shape) + " and " + Str(upd->shape));
  KILN_RETURN_IF_ERROR(NormAxis(ctx.attrs().GetInt("axis", 0), data->rank()).status());
  for (int i = 0; i < idx->rank(); ++i)
    KILN_RETURN_IF_ERROR(Unify(ctx, idx->shape[i], upd->shape[i], "updates dim " + std::to_string(i) + " (indices')"));
  ctx.SetOutput(0, data->dtype, data->shape);
  return Status::Ok();
}

// The length of the index tuples (indices' last dim), which must be a constant.
Result<int64_t> TupleLength(const Value& idx, const Value& data) {
  KILN_RETURN_IF_ERROR(CheckDType(idx, "indices", kSignedInts));
  if (idx.dtype != DType::kInt64) return InvalidArgument("input indices: expected int64, found " + DTypeStr(idx.dtype));
  KILN_RETURN_IF_ERROR(CheckRank(idx, "indices", 1, kMaxRank));
  auto k = idx.shape.back().value();
  if (!k) return Unimplemented("input indices: expected a constant last dim, found " + Str(idx.shape));
  if (*k < 1 || *k > data.rank())
    return InvalidArgument("input indices: expected a last dim in [1, " + std::to_string(data.rank()) + "] (data's rank), found " + std::to_string(*k));
  return *k;
}

Status ScatterNDMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_RETURN_IF_ERROR(CheckReduction(ctx.attrs()));
  KILN_ASSIGN_OR_RETURN(const Value* data, Need(ctx, 0, "data"));
  KILN_ASSIGN_OR_RETURN(const Value* idx, Need(ctx, 1, "indices"));
  KILN_ASSIGN_OR_RETURN(const Value* upd, Need(ctx, 2, "updates"));
  KILN_RETURN_IF_ERROR(CheckSameDType(*data, "data", *upd, "updates"));
  KILN_ASSIGN_OR_RETURN(int64_t k, TupleLength(*idx, *data));
  // updates: indices.shape[:-1] + data.shape[k:]
  SymShape want(idx->shape.begin(), idx->shape.end() - 1);
  want.insert(want.end(), data->shape.begin() + k, data->shape.end());
  if (static_cast<int>(want.size()) != upd->rank())
    return InvalidArgument("input updates: expected shape " + Str(want) + ", found " + Str(upd->shape));
  for (size_t i = 0; i < want.size(); ++i)
    KILN_RETURN_IF_ERROR(Unify(ctx, want[i], upd->shape[i], "updates dim " + std::to_string(i)));
  ctx.SetOutput(0, data->dtype, data->shape);
  return Status::Ok();
}

Status GatherNDMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* data, Need(ctx, 0, "data"));
  KILN_ASSIGN_OR_RETURN(const Value* idx, Need(ctx, 1, "indices"));
  KILN_ASSIGN_OR_RETURN(int64_t k, TupleLength(*idx, *data));
  const int64_t b = ctx.attrs().GetInt("batch_dims", 0);
  if (b < 0 || b >= idx->rank() || b + k > data->rank())
    return InvalidArgument("attribute batch_dims: expected b >= 0, b < rank(indices) " + std::to_string(idx->rank()) +
                           " and b + " + std::to_string(k) + " (index length) <= rank(data) " + std::to_string(data->rank()) +
                           ", found " + std::to_string(b));
  SymShape out(data->shape.begin(), data->shape.begin() + b);
  for (int64_t i = 0; i < b; ++i)
    KILN_RETURN_IF_ERROR(Unify(ctx, data->shape[i], idx->shape[i], "indices batch dim " + std::to_string(i) + " (data's)"));
  out.insert(out.end(), idx->shape.begin() + b, idx->shape.end() - 1);
  out.insert(out.end(), data->shape.begin() + b + k, data->shape.end());
  ctx.SetOutput(0, data->dtype, out);
  return Status::Ok();
}

Status OneHotMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* idx, Need(ctx, 0, "indices"));
  KILN_ASSIGN_OR_RETURN(const Value* depth, Need(ctx, 1, "depth"));
  KILN_ASSIGN_OR_RETURN(const Value* values, Need(ctx, 2, "values"));
  KILN_RETURN_IF_ERROR(CheckDType(*idx, "indices", kNumeric));
  KILN_RETURN_IF_ERROR(CheckDType(*depth, "depth", kNumeric));
  if (auto n = StaticCount(*values); !n || *n != 2 || values->rank() != 1)
    return InvalidArgument("input values: expected [off_value, on_value] (shape [2]), found " + Str(values->shape));
  KILN_ASSIGN_OR_RETURN(int axis, NormAxis(ctx.attrs().GetInt("axis", -1), idx->rank() + 1));
  SymShape out = idx->shape;
  auto d = FloatElements(*depth);
  if (!d) {
    // A value input (passes/value_inputs.h): an integer one's value symbol, or a float32 one's
    // bits, truncated (ONNX casts a float depth to int64; >= 1 makes floor the same).
    std::optional<std::vector<Sym>> e = Elements(*depth);
    const bool is_float = !e;
    if (is_float) e = Float32Bits(*depth);
    if (!e)
      return Unimplemented("data-dependent output shape: depth (" + depth->name + ") is not known at compile time");
    if (e->size() != 1)
      return InvalidArgument("input depth: expected one value, found " + std::to_string(e->size()));
    const Sym& v = (*e)[0];
    if (is_float) {
      AddGuard(ctx, Lt(kF32One - 1, v), "whose depth must be >= 1");  // 1.0f and above, then negatives' bits
      AddGuard(ctx, Lt(v, kF32MaxFinite + 1), "whose depth must be finite");
    } else {
      AddGuard(ctx, Lt(0, v), "whose depth must be >= 1");
    }
    out.insert(out.begin() + axis, is_float ? FloorMulF32(1, v) : v);
    ctx.SetOutput(0, values->dtype, out);
    return Status::Ok();
  }
  if (d->size() != 1 || !(std::trunc((*d)[0]) >= 1))
    return InvalidArgument("input depth: expected one value >= 1, found " + std::to_string(d->size()) + " value(s)" +
                           (d->empty() ? std::string() : ", the first " + std::to_string((*d)[0])));
  out.insert(out.begin() + axis, Sym(static_cast<int64_t>(std::trunc((*d)[0]))));
  ctx.SetOutput(0, values->dtype, out);
  return Status::Ok();
}

}  // namespace

void RegisterScatterOps(std::vector<OpDef>& ops) {
  Def(ops, "ScatterElements", ScatterElementsMeta);
  Def(ops, "Scatter", ScatterElementsMeta);
  Def(ops, "ScatterND", ScatterNDMeta);
  Def(ops, "GatherND", GatherNDMeta);
  Def(ops, "OneHot", OneHotMeta);
}

}  // namespace kiln::ir
