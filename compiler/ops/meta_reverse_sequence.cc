// Meta function of ReverseSequence (runtime/kernels/reverse_sequence.cc): the output is the input's
// dtype and shape; batch_axis and time_axis name the first two dims, one each.
#include <string>

#include "compiler/ops/families.h"
#include "compiler/ops/meta_util.h"

namespace kiln::ir {
using namespace meta;
namespace {

Status ReverseSequenceMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* x, Need(ctx, 0, "input"));
  KILN_ASSIGN_OR_RETURN(const Value* lens, Need(ctx, 1, "sequence_lens"));
  if (lens->dtype != DType::kInt64)
    return InvalidArgument("input sequence_lens: expected int64, found " + DTypeStr(lens->dtype));
  KILN_RETURN_IF_ERROR(CheckRank(*lens, "input sequence_lens", 1, 1));
  if (x->rank() < 2) return InvalidArgument("input: expected rank >= 2, found " + Str(x->shape));
  const int64_t batch_axis = ctx.attrs().GetInt("batch_axis", 1);
  const int64_t time_axis = ctx.attrs().GetInt("time_axis", 0);
  if (batch_axis != 0 && batch_axis != 1)
    return InvalidArgument("batch_axis: expected 0 or 1, found " + std::to_string(batch_axis));
  if (time_axis != 0 && time_axis != 1)
    return InvalidArgument("time_axis: expected 0 or 1, found " + std::to_string(time_axis));
  if (batch_axis == time_axis)
    return InvalidArgument("batch_axis and time_axis: expected different axes, both are " +
                           std::to_string(batch_axis));
  KILN_RETURN_IF_ERROR(Unify(ctx, x->shape[batch_axis], lens->shape[0],
                             "input sequence_lens: length (the batch dim of input)"));
  if (auto v = ConstInts(*lens); v && x->shape[time_axis].is_const()) {
    const int64_t max_time = *x->shape[time_axis].value();
    for (int64_t n : *v)
      if (n < 0 || n > max_time)
        return InvalidArgument("input sequence_lens: expected values in [0, " + std::to_string(max_time) +
                               "] (the time dim of input), found " + std::to_string(n));
  }
  ctx.SetOutput(0, x->dtype, x->shape);
  return Status::Ok();
}

}  // namespace

void RegisterReverseSequenceOps(std::vector<OpDef>& ops) { Def(ops, "ReverseSequence", ReverseSequenceMeta); }

}  // namespace kiln::ir
