// A run-time Loop's control on the executor (runtime/executor/loop.h).
#include <algorithm>
#include <string>
#include <utility>

#include "runtime/executor/entry_run.h"
#include "runtime/executor/loop_rules.h"

namespace kiln {
namespace {

using std::to_string;

constexpr const char* kBegin = "kiln.LoopBegin";
constexpr const char* kEnd = "kiln.LoopEnd";

}  // namespace

Status EntryRun::StartIteration(const char* op) {
  return loop::StartIteration(op, &x_.loop_iterations, c_.max_loop_iterations);
}

// kiln.LoopBegin(M?, cond?, initial...) -> (iteration_num, cond_in, v...)
Status EntryRun::LoopBegin(size_t k, size_t* next) {
  const PreparedInstruction& pi = pe_.instructions[k];
  const int32_t* ops = pe_.operands.data() + pi.operands_begin;
  const int32_t* outs = ops + pi.num_inputs;
  const size_t pair = static_cast<size_t>(pe_.loop_pair[k]);
  LoopFrame& f = x_.loops.emplace_back();  // reserved at Create: no allocation for up to 16 nested loops
  f.begin = k;
  f.trips = INT64_MAX;
  uint8_t go = 1;
  if (ops[0] >= 0) KILN_RETURN_IF_ERROR(ReadScalar(ops[0], DType::kInt64, &f.trips, {"kiln.LoopBegin: M"}));
  if (ops[1] >= 0) KILN_RETURN_IF_ERROR(ReadScalar(ops[1], DType::kBool, &go, {"kiln.LoopBegin: cond"}));
  for (int32_t j = 2; j < pi.num_inputs; ++j)
    KILN_RETURN_IF_ERROR(CopyTensor(ops[j], outs[j], 0, true, {"kiln.LoopBegin: initial value", j - 2}));
  f.condition = go != 0 ? 1 : 0;
  KILN_RETURN_IF_ERROR(WriteScalar(outs[0], DType::kInt64, &f.iteration, {"kiln.LoopBegin: iteration_num"}));
  KILN_RETURN_IF_ERROR(WriteScalar(outs[1], DType::kBool, &f.condition, {"kiln.LoopBegin: cond_in"}));
  f.skipped = !loop::Again(go != 0, 0, f.trips);
  if (!f.skipped) KILN_RETURN_IF_ERROR(StartIteration(kBegin));
  *next = f.skipped ? pair : k + 1;
  KILN_RETURN_IF_ERROR(backend_.Mark(run_, k, k + 1));
  return f.skipped ? backend_.Mark(run_, k + 1, pair) : Status::Ok();  // a skipped body takes no time
}

// kiln.LoopEnd(M?, iteration_num, cond_in, v..., cond_out, v_next..., scan...) -> (v_final..., stacked...)
Status EntryRun::LoopEnd(size_t k, size_t* next) {
  const PreparedInstruction& pi = pe_.instructions[k];
  const int32_t* ops = pe_.operands.data() + pi.operands_begin;
  const size_t pair = static_cast<size_t>(pe_.loop_pair[k]);
  if (x_.loops.empty() || x_.loops.back().begin != pair) return Internal(std::string(kEnd) + ": reached without its kiln.LoopBegin");
  LoopFrame& f = x_.loops.back();
  // Its stacked outputs have the room of the bound again when an outer loop runs it anew.
  const int32_t dim = pe_.runtime_dim_of[k];
  if (dim >= 0) KILN_RETURN_IF_ERROR(ResetDim(dim));
  KILN_ASSIGN_OR_RETURN(const loop::EndOperands layout,
                        loop::EndLayout(kEnd, pi.attrs.GetInt("carried", -1), static_cast<size_t>(pi.num_inputs),
                                        static_cast<size_t>(pi.num_outputs)));
  const int64_t carried = layout.carried, scans = layout.scans;
  const int32_t* values = ops + layout.kValues;
  const int32_t* results = ops + layout.results();
  const int32_t* parts = ops + layout.parts();
  const int32_t* outs = ops + pi.num_inputs;
  if (!f.skipped) {
    uint8_t go = 0;
    KILN_RETURN_IF_ERROR(ReadScalar(ops[layout.cond_out()], DType::kBool, &go, {"kiln.LoopEnd: the body's condition"}));
    // This iteration's scan values, at row f.ran of each stacked output.
    for (int64_t j = 0; j < scans; ++j) {
      const int32_t stacked = outs[carried + j], part = parts[j];
      if (stacked < 0) continue;
      const cpu::TensorRef &y = s_.refs[stacked], &p = s_.refs[part < 0 ? stacked : part];
      bool fits = part >= 0 && y.dtype == p.dtype && y.rank == p.rank + 1;
      for (int32_t d = 0; fits && d < p.rank; ++d) fits = y.dims[d + 1] == p.dims[d];
      if (!fits)
        return DataLoss(std::string(kEnd) + ": scan value " + to_string(j) + (part < 0 ? " is absent" : " (" + pe_.TensorName(part) + ")") +
                        " does not fit a row of the stacked output " + pe_.TensorName(stacked));
      if (f.ran >= y.dims[0]) {
        Status full = loop::NoRow(kEnd, f.ran, j, y.dims[0], pi.attrs.GetInt("scan_bound", 0));
        return dim >= 0 ? dims_.Grow(dim, std::move(full)) : full;
      }
      const uint64_t row = static_cast<uint64_t>(p.num_elements) * DTypeSize(p.dtype);
      KILN_RETURN_IF_ERROR(CopyTensor(part, stacked, static_cast<uint64_t>(f.ran) * row, false, {"kiln.LoopEnd: scan value", j}));
    }
    for (int64_t j = 0; j < carried; ++j)
      KILN_RETURN_IF_ERROR(CopyTensor(results[j], values[j], 0, true, {"kiln.LoopEnd: carried value", j}));
    f.ran += 1;
    f.iteration = f.ran;
    f.condition = go != 0 ? 1 : 0;
    KILN_RETURN_IF_ERROR(WriteScalar(ops[layout.kIteration], DType::kInt64, &f.iteration, {"kiln.LoopEnd: iteration_num"}));
    KILN_RETURN_IF_ERROR(WriteScalar(ops[layout.kCondition], DType::kBool, &f.condition, {"kiln.LoopEnd: cond_in"}));
    if (loop::Again(go != 0, f.ran, f.trips)) {
      KILN_RETURN_IF_ERROR(StartIteration(kEnd));
      // The body's conditions are read again in the next iteration.
      if (pe_.has_predicates) std::fill(x_.conditions.begin(), x_.conditions.end(), int8_t{-1});
      *next = pair + 1;
      KILN_RETURN_IF_ERROR(backend_.Mark(run_, k, k + 1));
      return backend_.Repeat(run_, pair, k + 1);
    }
  }
  for (int64_t j = 0; j < carried; ++j)
    if (outs[j] >= 0) KILN_RETURN_IF_ERROR(CopyTensor(values[j], outs[j], 0, true, {"kiln.LoopEnd: final value", j}));
  const int64_t ran = f.ran;
  x_.loops.pop_back();
  *next = k + 1;
  if (dim >= 0) {
    KILN_RETURN_IF_ERROR(SetDim(dim, ran));
  } else {
    for (int64_t j = 0; j < scans; ++j)
      if (const int32_t stacked = outs[carried + j]; stacked >= 0)
        KILN_RETURN_IF_ERROR(loop::CheckIterations(kEnd, j, s_.refs[stacked].dims[0], ran));
  }
  return backend_.Mark(run_, k, k + 1);
}

}  // namespace kiln
