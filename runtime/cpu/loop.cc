// kiln.LoopBegin and kiln.LoopEnd: the control of a run-time Loop (ONNX Loop-21, compiled by
// compiler/passes/canonicalize.cc RuntimeLoop; operands in compiler/ops/meta_loop.cc). The
// body's instructions lie between the two; the executors run LoopBegin, then the body, then
// LoopEnd, and go back to the body while LoopEnd says so (KernelCall::loop).
//  - LoopBegin writes the body's parameters: iteration_num 0, cond_in the loop's condition
//    (true when absent), each carried value's initial value; the body runs when M (no limit
//    when absent) is above 0 and the condition holds.
//  - LoopEnd, after each iteration n: appends the iteration's scan values at row n of each
//    stacked output (sized for the bound of the iterations, a run-time dim; with no row left
//    it fails and sets LoopStep::full, so that the executor can grow a room), copies the
//    body's carried results into the parameters, then sets iteration_num n + 1 and cond_in
//    the body's condition. It asks for another iteration while n + 1 < M and the condition
//    holds; an iteration past ContextOptions::max_loop_iterations, counting those of all loops
//    of the Run together (nested loops multiply), is kResourceExhausted. When the loop
//    ends it copies the parameters into the final carried values and reports the iterations
//    that ran as the run-time dim (KernelCall::runtime_size) when there are scan outputs.
// The operands' layout, the decisions and their errors are runtime/loop_rules.h's, which the
// CUDA backend's control from the host follows too.
#include <cstring>
#include <string>

#include "runtime/kernels/families.h"
#include "runtime/kernels/kernel_util.h"
#include "runtime/loop_rules.h"

namespace kiln::cpu {
namespace {

size_t Bytes(const TensorRef& t) { return static_cast<size_t>(t.num_elements) * DTypeSize(t.dtype); }

// Copies `from` into `to`, which must have its dtype and shape.
Status Copy(std::string_view op, const TensorRef& from, const TensorRef& to, const char* what, size_t k) {
  bool same = from.present() && to.present() && from.dtype == to.dtype && from.rank == to.rank;
  for (int d = 0; same && d < from.rank; ++d) same = from.dims[d] == to.dims[d];
  if (!same)
    return OpError(op, std::string(what) + " " + std::to_string(k) + ": " + DTypeStr(from.dtype) + ShapeStr(from) +
                           " does not fit " + DTypeStr(to.dtype) + ShapeStr(to));
  if (from.data != to.data && Bytes(from) > 0) std::memmove(to.data, from.data, Bytes(from));
  return Status::Ok();
}

// A one-element input of `dtype` (absent: nullptr).
Result<const void*> Scalar(std::string_view op, const TensorRef& t, DType dtype, const char* what) {
  if (!t.present()) return static_cast<const void*>(nullptr);
  if (t.dtype != dtype || t.num_elements != 1)
    return OpError(op, std::string(what) + ": expected one " + DTypeStr(dtype) + ", found " + DTypeStr(t.dtype) +
                           ShapeStr(t));
  return static_cast<const void*>(t.data);
}

Status StartIteration(std::string_view op, LoopStep& step) {
  return loop::StartIteration(op, &step.iterations, step.max_iterations);
}

Status NeedControl(std::string_view op, const KernelCall& call) {
  if (call.loop == nullptr)
    return OpError(op, "runs only as a run-time Loop's control, from an executor");
  return Status::Ok();
}

Status LoopBegin(const KernelCall& call) {
  constexpr std::string_view kName = "kiln.LoopBegin";
  KILN_RETURN_IF_ERROR(NeedControl(kName, call));
  const size_t n = call.inputs.size();
  if (n < 2 || call.outputs.size() != n)
    return OpError(kName, std::to_string(n) + " inputs and " + std::to_string(call.outputs.size()) + " outputs");
  KILN_ASSIGN_OR_RETURN(const void* m, Scalar(kName, call.inputs[0], DType::kInt64, "M"));
  KILN_ASSIGN_OR_RETURN(const void* c, Scalar(kName, call.inputs[1], DType::kBool, "cond"));
  KILN_ASSIGN_OR_RETURN(const void* i, Scalar(kName, call.outputs[0], DType::kInt64, "iteration_num"));
  KILN_ASSIGN_OR_RETURN(const void* cond_in, Scalar(kName, call.outputs[1], DType::kBool, "cond_in"));
  if (i == nullptr || cond_in == nullptr) return OpError(kName, "iteration_num and cond_in must be present");
  for (size_t k = 2; k < n; ++k) KILN_RETURN_IF_ERROR(Copy(kName, call.inputs[k], call.outputs[k], "initial value", k - 2));
  const bool go = c == nullptr || *static_cast<const uint8_t*>(c) != 0;
  *static_cast<int64_t*>(const_cast<void*>(i)) = 0;
  *static_cast<uint8_t*>(const_cast<void*>(cond_in)) = go ? 1 : 0;
  call.loop->again = loop::Again(go, 0, m == nullptr ? INT64_MAX : *static_cast<const int64_t*>(m));
  return call.loop->again ? StartIteration(kName, *call.loop) : Status::Ok();
}

Status LoopEnd(const KernelCall& call) {
  constexpr std::string_view kName = "kiln.LoopEnd";
  KILN_RETURN_IF_ERROR(NeedControl(kName, call));
  KILN_ASSIGN_OR_RETURN(const loop::EndOperands ops,
                        loop::EndLayout(kName, call.attrs.GetInt("carried", -1), call.inputs.size(), call.outputs.size()));
  const int64_t carried = ops.carried, scans = ops.scans;
  const size_t values = ops.kValues, cond_out = ops.cond_out(), results = ops.results(), parts = ops.parts();
  KILN_ASSIGN_OR_RETURN(const void* m, Scalar(kName, call.inputs[ops.kM], DType::kInt64, "M"));
  KILN_ASSIGN_OR_RETURN(const void* pi, Scalar(kName, call.inputs[ops.kIteration], DType::kInt64, "iteration_num"));
  KILN_ASSIGN_OR_RETURN(const void* pc, Scalar(kName, call.inputs[ops.kCondition], DType::kBool, "cond_in"));
  if (pi == nullptr || pc == nullptr) return OpError(kName, "iteration_num and cond_in must be present");
  int64_t* const i = static_cast<int64_t*>(const_cast<void*>(pi));
  uint8_t* const cond_in = static_cast<uint8_t*>(const_cast<void*>(pc));
  const int64_t trips = m == nullptr ? INT64_MAX : *static_cast<const int64_t*>(m);
  int64_t ran = 0;  // iterations that ran
  bool again = false;
  if (!call.loop->skipped_body) {
    KILN_ASSIGN_OR_RETURN(const void* c, Scalar(kName, call.inputs[cond_out], DType::kBool, "the body's condition"));
    if (c == nullptr) return OpError(kName, "the body's condition must be present");
    const int64_t n = *i;
    if (n < 0) return OpError(kName, "iteration_num is " + std::to_string(n));
    // This iteration's scan values, at row n of each stacked output.
    for (int64_t s = 0; s < scans; ++s) {
      const TensorRef &part = call.inputs[parts + static_cast<size_t>(s)], &y = call.outputs[static_cast<size_t>(carried + s)];
      if (!y.present()) continue;
      bool fits = part.present() && y.dtype == part.dtype && y.rank == part.rank + 1;
      for (int d = 0; fits && d < part.rank; ++d) fits = y.dims[d + 1] == part.dims[d];
      if (!fits)
        return OpError(kName, "scan value " + std::to_string(s) + " " + DTypeStr(part.dtype) + ShapeStr(part) +
                                  " does not fit the stacked output " + DTypeStr(y.dtype) + ShapeStr(y));
      if (n >= y.dims[0]) {
        call.loop->full = true;
        return loop::NoRow(kName, n, s, y.dims[0], call.attrs.GetInt("scan_bound", 0));
      }
      if (Bytes(part) > 0) std::memcpy(static_cast<uint8_t*>(y.data) + n * Bytes(part), part.data, Bytes(part));
    }
    for (int64_t k = 0; k < carried; ++k)
      KILN_RETURN_IF_ERROR(Copy(kName, call.inputs[results + static_cast<size_t>(k)],
                                call.inputs[values + static_cast<size_t>(k)], "carried value", static_cast<size_t>(k)));
    const bool go = *static_cast<const uint8_t*>(c) != 0;
    ran = n + 1;
    *i = ran;
    *cond_in = go ? 1 : 0;
    again = loop::Again(go, ran, trips);
    if (again) KILN_RETURN_IF_ERROR(StartIteration(kName, *call.loop));
  }
  call.loop->again = again;
  if (again) return Status::Ok();
  for (int64_t k = 0; k < carried; ++k) {
    const TensorRef& y = call.outputs[static_cast<size_t>(k)];
    if (y.present())
      KILN_RETURN_IF_ERROR(Copy(kName, call.inputs[values + static_cast<size_t>(k)], y, "final value", static_cast<size_t>(k)));
  }
  if (call.runtime_size) *call.runtime_size = ran;
  else
    for (int64_t s = 0; s < scans; ++s) {
      const TensorRef& y = call.outputs[static_cast<size_t>(carried + s)];
      if (y.present()) KILN_RETURN_IF_ERROR(loop::CheckIterations(kName, s, y.dims[0], ran));
    }
  return Status::Ok();
}

constexpr KernelDef kKernels[] = {
    // Internal: no op table row, so their operands are given here.
    {"kiln.LoopBegin", LoopBegin, nullptr, true, {2, Arity::kUnbounded, 0, 2, Arity::kUnbounded}},
    {"kiln.LoopEnd", LoopEnd, nullptr, true, {4, Arity::kUnbounded, 0b110, 0, Arity::kUnbounded}, /*runtime_size=*/true},
};

}  // namespace

std::span<const KernelDef> LoopKernels() { return kKernels; }

}  // namespace kiln::cpu
