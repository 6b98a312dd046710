// Meta functions of kiln.LoopBegin and kiln.LoopEnd (runtime/executor/loop.h), the control of a
// run-time Loop (passes/control_flow/runtime_loop.cc): the body's instructions lie between
// them, and the runtime's executor runs them again while the loop goes on.
//   kiln.LoopBegin(M?, cond?, v_initial...) -> (iteration_num, cond_in, v...)
//     M: int64, one element, the trip count (absent: no limit); cond: bool, one element
//     (absent: true); the outputs are the body's parameters (ONNX Loop-21's body inputs).
//   kiln.LoopEnd(M?, iteration_num, cond_in, v..., cond_out, v_next..., scan...) -> (v_final..., scan_stacked...)
//     attribute `carried`: the number of v; the inputs after cond_in are the body's outputs.
//     Each v_next has its v's dtype and shape; each stacked scan output is the iterations'
//     values along a new axis 0, whose size, the iterations that ran, is a run-time dim
//     bounded by max(M, 0), or M itself with attribute `exact` = 1 (no condition can end the
//     loop and M >= 1 for every call). When M bounds nothing (absent, computed from data, or a
//     while loop's huge constant), attribute `scan_bound` (CompileOptions::loop_scan_bound)
//     gives the rows, or else they are room the runtime grows (NewGrowingRuntimeDim).
#include <string>

#include "compiler/ops/families.h"
#include "compiler/ops/meta_util.h"

namespace kiln::ir {
using namespace meta;
namespace {

// The largest constant trip count whose scan outputs the arena is sized for (2^24 rows).
constexpr int64_t kMaxBoundedIterations = int64_t{1} << 24;
// The rows a loop's scan outputs have at first when nothing bounds its iterations.
constexpr int64_t kInitialScanRows = 16;

// Input `i`, when present, is one element of `dtype`.
Status CheckScalar(MetaContext& ctx, int i, std::string_view what, DType dtype) {
  const Value* v = Optional(ctx, i);
  if (v == nullptr) return Status::Ok();
  if (v->dtype != dtype)
    return InvalidArgument(std::string(what) + ": expected " + DTypeStr(dtype) + ", found " + DTypeStr(v->dtype));
  const Sym n = NumElements(v->shape);
  if (!n.is_const() || *n.value() != 1)
    return InvalidArgument(std::string(what) + ": expected one element, found shape " + ShapeToString(v->shape));
  return Status::Ok();
}

Status LoopBeginMeta(MetaContext& ctx) {
  if (ctx.num_inputs() < 2 || ctx.num_outputs() != ctx.num_inputs())
    return InvalidArgument("expected M, cond and the initial values in, as many parameters out; found " +
                           std::to_string(ctx.num_inputs()) + " inputs and " + std::to_string(ctx.num_outputs()) +
                           " outputs");
  KILN_RETURN_IF_ERROR(CheckScalar(ctx, 0, "M", DType::kInt64));
  KILN_RETURN_IF_ERROR(CheckScalar(ctx, 1, "cond", DType::kBool));
  ctx.SetOutput(0, DType::kInt64, {});
  ctx.SetOutput(1, DType::kBool, {});
  for (int k = 2; k < ctx.num_inputs(); ++k) {
    KILN_ASSIGN_OR_RETURN(const Value* v, Need(ctx, k, "initial value " + std::to_string(k - 2)));
    ctx.SetOutput(k, v->dtype, v->shape);
  }
  return Status::Ok();
}

Status LoopEndMeta(MetaContext& ctx) {
  const int64_t carried = ctx.attrs().GetInt("carried", -1);
  const int scans = ctx.num_outputs() - static_cast<int>(carried);
  if (carried < 0 || scans < 0 || ctx.num_inputs() != 4 + 2 * carried + scans)
    return InvalidArgument("carried = " + std::to_string(carried) + " does not fit " + std::to_string(ctx.num_inputs()) +
                           " inputs and " + std::to_string(ctx.num_outputs()) + " outputs");
  const int k_values = 3, k_cond_out = 3 + static_cast<int>(carried), k_results = k_cond_out + 1,
            k_scans = k_results + static_cast<int>(carried);
  KILN_RETURN_IF_ERROR(CheckScalar(ctx, 0, "M", DType::kInt64));
  KILN_RETURN_IF_ERROR(Need(ctx, k_cond_out, "the body's condition").status());
  KILN_RETURN_IF_ERROR(CheckScalar(ctx, k_cond_out, "the body's condition", DType::kBool));
  for (int k = 0; k < carried; ++k) {
    KILN_ASSIGN_OR_RETURN(const Value* v, Need(ctx, k_values + k, "carried value " + std::to_string(k)));
    KILN_ASSIGN_OR_RETURN(const Value* next, Need(ctx, k_results + k, "the body's carried value " + std::to_string(k)));
    bool same = v->dtype == next->dtype && v->rank() == next->rank();
    for (int d = 0; same && d < v->rank(); ++d) same = v->shape[d].Same(next->shape[d]);
    if (!same)
      return InvalidArgument("carried value " + std::to_string(k) + " is " + DTypeStr(v->dtype) +
                             ShapeToString(v->shape) + " before an iteration and " + DTypeStr(next->dtype) +
                             ShapeToString(next->shape) + " after it");
    ctx.SetOutput(k, v->dtype, v->shape);
  }
  if (scans == 0) return Status::Ok();
  const Value* m = Optional(ctx, 0);
  std::optional<std::vector<Sym>> trips;
  if (m != nullptr) trips = Elements(*m);
  // A while loop as PyTorch exports it (M = INT64_MAX) bounds nothing the arena could hold.
  std::string unbounded;  // why M bounds no room for the rows
  if (trips && trips->size() == 1 && (*trips)[0].is_const() && *(*trips)[0].value() > kMaxBoundedIterations)
    unbounded = "M = " + (*trips)[0].ToString() + ", above " + std::to_string(kMaxBoundedIterations) +
                ": a while loop";
  else if (!trips || trips->size() != 1)
    unbounded = m == nullptr ? std::string("no M") : "M ('" + m->name + "') computed from data";
  const int64_t scan_bound = ctx.attrs().GetInt("scan_bound", 0);
  // Exactly M when the canonical stage found that nothing else ends the loop and M >= 0. With
  // --loop-scan-bound, an M that reads an input's value (which a while loop may pass as
  // INT64_MAX) has room for at most that many; a dim symbol's M (a Scan's length) is a size.
  // Without a bound the rows are room the runtime grows (kInitialScanRows at first).
  const int out = static_cast<int>(carried);
  Sym iterations;
  if (!unbounded.empty() && scan_bound <= 0)
    iterations = NewGrowingRuntimeDim(ctx, out, kInitialScanRows, "iterations that ran (" + unbounded + ")");
  else if (!unbounded.empty())
    iterations = NewRuntimeDim(ctx, out, Sym(scan_bound), "iterations that ran, at most --loop-scan-bound");
  else if (scan_bound > 0 && HasValueVar((*trips)[0]))
    iterations = NewRuntimeDim(ctx, out, Min(Max(Sym(0), (*trips)[0]), Sym(scan_bound)),
                               "iterations that ran, at most M and --loop-scan-bound");
  else if (ctx.attrs().GetInt("exact", 0) != 0)
    iterations = (*trips)[0];
  else
    iterations = NewRuntimeDim(ctx, out, Max(Sym(0), (*trips)[0]), "iterations that ran");
  for (int s = 0; s < scans; ++s) {
    KILN_ASSIGN_OR_RETURN(const Value* part, Need(ctx, k_scans + s, "the body's scan output " + std::to_string(s)));
    SymShape shape = {iterations};
    shape.insert(shape.end(), part->shape.begin(), part->shape.end());
    ctx.SetOutput(static_cast<int>(carried) + s, part->dtype, std::move(shape));
  }
  return Status::Ok();
}

}  // namespace

void RegisterLoopOps(std::vector<OpDef>& ops) {
  Def(ops, "kiln.LoopBegin", LoopBeginMeta);
  Def(ops, "kiln.LoopEnd", LoopEndMeta);
}

}  // namespace kiln::ir
