// The rules of a run-time Loop's control (ONNX Loop-21, compiled by
// compiler/passes/control_flow/runtime_loop.cc into kiln.LoopBegin ... body ... kiln.LoopEnd), in
// one place for load (verify.cc, loop_pairs.cc) and the executor (loop.cc): the operands' layout,
// when the body runs again, the iteration bound, a scan row's room, and the errors they give.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "kiln/status.h"
#include "runtime/op_table.h"

namespace kiln::loop {

// The operands of the two control instructions (they have no op table row: they are the
// executor's, not an ONNX op's), which load checks as it checks every op's (runtime/verify.cc).
//   kiln.LoopBegin(M?, cond?, initial...) -> (iteration_num, cond_in, v...)
//   kiln.LoopEnd(M?, iteration_num, cond_in, v..., cond_out, v_next..., scan...) -> (v_final..., stacked...)
inline constexpr Arity kBeginArity{2, Arity::kUnbounded, 0, 2, Arity::kUnbounded};
inline constexpr Arity kEndArity{4, Arity::kUnbounded, 0b110, 0, Arity::kUnbounded};

// kiln.LoopEnd's operands, as indices: inputs (M?, iteration_num, cond_in, v[carried]...,
// cond_out, v_next[carried]..., part[scans]...) and outputs (v_final[carried]...,
// stacked[scans]...). v are the body's parameters (kiln.LoopBegin's outputs 2...), v_next the
// body's carried results, part this iteration's scan values.
struct EndOperands {
  int64_t carried = 0, scans = 0;
  static constexpr size_t kM = 0, kIteration = 1, kCondition = 2, kValues = 3;
  size_t cond_out() const { return kValues + static_cast<size_t>(carried); }
  size_t results() const { return cond_out() + 1; }
  size_t parts() const { return results() + static_cast<size_t>(carried); }
};

// The layout of a kiln.LoopEnd with attribute `carried` (-1 when absent) and these operand
// counts; kDataLoss naming `label` when they do not fit one another.
inline Result<EndOperands> EndLayout(std::string_view label, int64_t carried, size_t inputs, size_t outputs) {
  const int64_t scans = static_cast<int64_t>(outputs) - carried;
  if (carried < 0 || scans < 0 || static_cast<int64_t>(inputs) != 4 + 2 * carried + scans)
    return DataLoss(std::string(label) + ": carried = " + std::to_string(carried) + " does not fit " +
                    std::to_string(inputs) + " inputs and " + std::to_string(outputs) + " outputs");
  return EndOperands{carried, scans};
}

// Whether the body runs (again) after `ran` iterations: while its condition `go` holds and
// fewer than the trip count `trips` (M; INT64_MAX when absent) ran.
inline bool Again(bool go, int64_t ran, int64_t trips) { return go && ran < trips; }

// Counts the iteration about to start in `*started`, the iterations every loop of the Run has
// started (nested loops multiply). Past `max` (ContextOptions::max_loop_iterations):
// kResourceExhausted.
inline Status StartIteration(std::string_view label, int64_t* started, int64_t max) {
  if (++*started <= max) return Status::Ok();
  return ResourceExhausted(std::string(label) + ": this call's loops would run more than " + std::to_string(max) +
                           " iterations, past ContextOptions::max_loop_iterations");
}

// The error when iteration `n` (>= 0) has no row in scan output `scan`, stacked with `rows`
// rows (its bound's): where the rows are the compile's --loop-scan-bound (`scan_bound` > 0, a
// trip count that bounds nothing), kResourceExhausted; else kInternal, which the memory plan
// excludes unless the bound is a room (then the executor asks RuntimeDims::Grow for
// more). Callers compare n with rows first, so the hot path reads no attribute.
inline Status NoRow(std::string_view label, int64_t n, int64_t scan, int64_t rows, int64_t scan_bound) {
  if (scan_bound > 0)
    return ResourceExhausted(std::string(label) + ": the loop goes on past its scan outputs' room of " +
                             std::to_string(rows) + " rows (kiln compile --loop-scan-bound " +
                             std::to_string(scan_bound) + ")");
  return Internal(std::string(label) + ": iteration " + std::to_string(n) + " has no row in scan output " +
                  std::to_string(scan) + ", sized for the bound of the iterations (" + std::to_string(rows) + " rows)");
}

// A loop whose scan outputs were compiled for exactly `rows` iterations (its M, with no run-time
// dim) ran `ran`: kDataLoss unless they agree.
inline Status CheckIterations(std::string_view label, int64_t scan, int64_t rows, int64_t ran) {
  if (rows == ran) return Status::Ok();
  return DataLoss(std::string(label) + ": scan output " + std::to_string(scan) + " was compiled for " +
                  std::to_string(rows) + " iterations; " + std::to_string(ran) + " ran");
}

}  // namespace kiln::loop
