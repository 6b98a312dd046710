// Loop and Scan unrolled (canonicalizer.h) when their iterations are known at compile time:
// one copy of the body per iteration (control_flow/body.cc), the carried values flowing from
// one copy to the next, and each scan output its iterations' values stacked. At most
// kMaxUnrolledIterations; past that, or where a condition is known only when the loop runs, the
// loop runs at run time instead (control_flow/runtime_loop.cc).
//
// Loop (ONNX Loop-1 to -21): unrolled when its trip count M and its condition are known at
// compile time at every iteration (constants, shapes or value profiles); each scan output is
// stacked along a new axis 0.
//
// Scan (ONNX Scan-9 to -21): unrolled along the scan axis, whose length is known at compile
// time: iteration t reads slice t of each scan input (Gather along its axis, from the end when
// its direction is 1), the states flow from one copy of the body to the next, and each scan
// output stacks its iterations along its axis (in reverse when its direction is 1).
#include <algorithm>

#include "compiler/passes/canonicalizer.h"

namespace kiln::passes {

Status Canonicalizer::UnrollLoop(ir::Node& node, std::vector<ir::Node>& out) {
  const std::string where = "node '" + node.name + "' (Loop)";
  const ir::Block* body = Body(node);
  if (!body) return InvalidArgument(where + ": no body");
  if (node.inputs.size() < 2 || body->inputs.size() != node.inputs.size() ||
      body->outputs.size() < body->inputs.size() - 1 ||
      node.outputs.size() != body->outputs.size() - 1)
    return InvalidArgument(where + ": " + std::to_string(node.inputs.size()) + " inputs and " +
                           std::to_string(node.outputs.size()) + " outputs for a body of " +
                           std::to_string(body->inputs.size()) + " parameters and " +
                           std::to_string(body->outputs.size()) + " results");
  const size_t carried = node.inputs.size() - 2, scanned = node.outputs.size() - carried;
  std::optional<int64_t> trips = INT64_MAX;
  if (node.inputs[0] != ir::kNoValue) trips = KnownScalar(node.inputs[0]);
  std::optional<int64_t> cond = 1;
  if (node.inputs[1] != ir::kNoValue) cond = KnownScalar(node.inputs[1]);
  // A trip count or condition known only when it runs: a run-time loop.
  const std::vector<ir::ValueId> initials(node.inputs.begin() + 2, node.inputs.end());
  const std::vector<ScanStack> stacks(scanned);
  // At run time, or else the reason it cannot be unrolled (naming the value, so that the
  // compile error shows the value profile to add) and the reason it cannot run at run time.
  auto runtime_loop = [&](const std::string& why_not_unrolled) -> Status {
    const Status st = RuntimeLoop(node, *body, node.inputs[0], node.inputs[1], initials, {}, stacks, out);
    if (st.ok() || st.code() != StatusCode::kUnimplemented) return st;
    std::string_view why(st.message());
    if (why.starts_with(where + ": ")) why.remove_prefix(where.size() + 2);
    return Unimplemented(where + ": " + why_not_unrolled + ", and it cannot run as a run-time loop: " +
                         std::string(why));
  };
  if (!trips)
    return runtime_loop("trip count M (" + trace_.value(node.inputs[0]).name + ") is not known at compile time");
  if (!cond) return runtime_loop("condition (" + trace_.value(node.inputs[1]).name + ") is not known at compile time");
  // What the unrolling adds, taken back when it finds a condition it cannot know or runs
  // past kMaxUnrolledIterations: then the loop runs at run time.
  const size_t nodes = out.size(), guards = guards_.size(), meta_guards = trace_.guards.size(),
               dims = trace_.runtime_dims.size();
  const std::vector<ir::ValueId> remap = remap_;  // the body's values map to the last iteration's
  auto at_run_time = [&](const std::string& why_not_unrolled) {
    remap_ = remap;
    out.resize(nodes);
    guards_.resize(guards);
    trace_.guards.resize(meta_guards);
    trace_.runtime_dims.resize(dims);
    return runtime_loop(why_not_unrolled);
  };
  std::vector<ir::ValueId> state(node.inputs.begin() + 2, node.inputs.end());
  std::vector<std::vector<ir::ValueId>> scans(scanned);
  for (int64_t i = 0; i < *trips; ++i) {
    if (!cond)
      return at_run_time("condition (" + trace_.value(body->outputs[0]).name + ") is not known at compile time");
    if (i >= kMaxUnrolledIterations)
      return at_run_time("more than " + std::to_string(kMaxUnrolledIterations) + " iterations to unroll");
    if (*cond == 0) break;
    std::vector<ir::ValueId> params = {ScalarConstant(node.name + "_iteration_" + std::to_string(i), DType::kInt64, i),
                                       ScalarConstant(node.name + "_condition_" + std::to_string(i), DType::kBool, 1)};
    params.insert(params.end(), state.begin(), state.end());
    KILN_ASSIGN_OR_RETURN(std::vector<ir::ValueId> results, Iterate(node, *body, params, i, out));
    if (undecided_) return Status::Ok();
    cond = KnownScalar(results[0]);
    for (size_t k = 0; k < carried; ++k) state[k] = results[1 + k];
    for (size_t k = 0; k < scanned; ++k) scans[k].push_back(results[1 + carried + k]);
  }
  for (size_t k = 0; k < carried; ++k)
    if (node.outputs[k] != ir::kNoValue) SetMap(node.outputs[k], state[k]);
  for (size_t k = 0; k < scanned; ++k) {
    if (node.outputs[carried + k] == ir::kNoValue) continue;
    if (scans[k].empty()) {
      const ir::ValueId declared = body->outputs[1 + carried + k];
      const std::optional<ir::ValueId> empty = EmptyStack(declared, 0, trace_.value(node.outputs[carried + k]).name);
      if (!empty)
        return Unimplemented(where + ": scan output " + std::to_string(k) + " of a loop that runs no iteration: "
                             "the body declares no static shape for '" + trace_.value(declared).name + "'");
      SetMap(node.outputs[carried + k], *empty);
      continue;
    }
    KILN_RETURN_IF_ERROR(Stack(node, scans[k], 0, node.outputs[carried + k], out));
  }
  return Status::Ok();
}

Status Canonicalizer::UnrollScan(ir::Node& node, std::vector<ir::Node>& out) {
  const std::string where = "node '" + node.name + "' (Scan)";
  const ir::Block* body = Body(node);
  if (!body) return InvalidArgument(where + ": no body");
  const int64_t m = node.attrs.GetInt("num_scan_inputs", 0);
  if (m < 1 || static_cast<size_t>(m) > node.inputs.size() || body->inputs.size() != node.inputs.size() ||
      body->outputs.size() != node.outputs.size() || body->outputs.size() < node.inputs.size() - m)
    return InvalidArgument(where + ": num_scan_inputs " + std::to_string(m) + ", " +
                           std::to_string(node.inputs.size()) + " inputs and " + std::to_string(node.outputs.size()) +
                           " outputs for a body of " + std::to_string(body->inputs.size()) + " parameters and " +
                           std::to_string(body->outputs.size()) + " results");
  const size_t states = node.inputs.size() - static_cast<size_t>(m), scanned = node.outputs.size() - states;
  // Each list, when given, has one value per scan input or output (0 when absent); a
  // direction is 0 (forward) or 1 (reverse), as ONNX's Scan-9 says.
  std::string bad;
  auto list = [&](const char* name, size_t n, bool direction) {
    std::vector<int64_t> v = node.attrs.GetInts(name);
    if (node.attrs.Has(name) && v.size() != n && bad.empty())
      bad = std::string(name) + " has " + std::to_string(v.size()) + " values for " + std::to_string(n) +
            (std::string(name).find("input") != std::string::npos ? " scan inputs" : " scan outputs");
    for (size_t k = 0; direction && k < v.size() && bad.empty(); ++k)
      if (v[k] != 0 && v[k] != 1)
        bad = std::string(name) + "[" + std::to_string(k) + "] = " + std::to_string(v[k]) +
              ", expected 0 (forward) or 1 (reverse)";
    v.resize(n, 0);
    return v;
  };
  const std::vector<int64_t> in_axes = list("scan_input_axes", m, false),
                             in_dirs = list("scan_input_directions", m, true),
                             out_axes = list("scan_output_axes", scanned, false),
                             out_dirs = list("scan_output_directions", scanned, true);
  if (!bad.empty()) return InvalidArgument(where + ": " + bad);
  std::optional<int64_t> length;
  std::vector<int64_t> axes(m);
  for (int64_t j = 0; j < m; ++j) {
    const ir::Value& x = trace_.value(node.inputs[states + j]);
    const int64_t rank = x.rank();
    axes[j] = in_axes[j] < 0 ? in_axes[j] + rank : in_axes[j];
    if (axes[j] < 0 || axes[j] >= rank)
      return InvalidArgument(where + ": scan_input_axes[" + std::to_string(j) + "] = " + std::to_string(in_axes[j]) +
                             " is out of range for scan input '" + x.name + "' of rank " + std::to_string(rank));
  }
  for (int64_t j = 0; j < m; ++j) {
    const std::optional<int64_t> len = trace_.value(node.inputs[states + j]).shape[axes[j]].value();
    if (!len) return RuntimeScan(node, *body, axes, in_dirs, out_axes, out_dirs, out);
    if (length && *len != *length)
      return InvalidArgument(where + ": scan inputs of lengths " + std::to_string(*length) + " and " +
                             std::to_string(*len));
    length = len;
  }
  std::vector<ir::ValueId> state(node.inputs.begin(), node.inputs.begin() + static_cast<std::ptrdiff_t>(states));
  std::vector<std::vector<ir::ValueId>> scans(scanned);
  for (int64_t t = 0; t < *length; ++t) {
    std::vector<ir::ValueId> params = state;
    for (int64_t j = 0; j < m; ++j) {
      ir::Node slice;
      slice.op = "Gather";
      slice.name = node.name + "_slice_" + std::to_string(j) + "_" + std::to_string(t);
      slice.attrs.SetInt("axis", axes[j]);
      const int64_t index = in_dirs[j] == 1 ? *length - 1 - t : t;
      slice.inputs = {node.inputs[states + j], ScalarConstant(slice.name + "_index", DType::kInt64, index)};
      ir::Value v;
      v.name = slice.name;
      slice.outputs = {trace_.AddValue(std::move(v))};
      params.push_back(slice.outputs[0]);
      KILN_RETURN_IF_ERROR(Process(std::move(slice), out));
      params.back() = Map(params.back());
    }
    KILN_ASSIGN_OR_RETURN(std::vector<ir::ValueId> results, Iterate(node, *body, params, t, out));
    if (undecided_) return Status::Ok();
    for (size_t k = 0; k < states; ++k) state[k] = results[k];
    for (size_t k = 0; k < scanned; ++k) scans[k].push_back(results[states + k]);
  }
  for (size_t k = 0; k < states; ++k)
    if (node.outputs[k] != ir::kNoValue) SetMap(node.outputs[k], state[k]);
  for (size_t k = 0; k < scanned; ++k) {
    if (node.outputs[states + k] == ir::kNoValue) continue;
    const ir::ValueId declared = body->outputs[states + k];
    const int64_t rank = (scans[k].empty() ? trace_.value(declared).rank() : trace_.value(scans[k][0]).rank()) + 1;
    const int64_t axis = out_axes[k] < 0 ? out_axes[k] + rank : out_axes[k];
    if (axis < 0 || axis >= rank)
      return InvalidArgument(where + ": scan_output_axes[" + std::to_string(k) + "] = " +
                             std::to_string(out_axes[k]) + " is out of range for rank " + std::to_string(rank));
    if (scans[k].empty()) {
      const std::optional<ir::ValueId> empty = EmptyStack(declared, axis, trace_.value(node.outputs[states + k]).name);
      if (!empty)
        return Unimplemented(where + ": scan output " + std::to_string(k) + " of an empty scan: the body declares "
                             "no static shape for '" + trace_.value(declared).name + "'");
      SetMap(node.outputs[states + k], *empty);
      continue;
    }
    if (out_dirs[k] == 1) std::reverse(scans[k].begin(), scans[k].end());
    KILN_RETURN_IF_ERROR(Stack(node, scans[k], axis, node.outputs[states + k], out));
  }
  return Status::Ok();
}

Status Canonicalizer::Stack(const ir::Node& node, std::vector<ir::ValueId> parts, int64_t axis, ir::ValueId result,
                            std::vector<ir::Node>& out) {
  std::vector<ir::ValueId> unsqueezed;
  const ir::ValueId axes = Constant(node.name + "_stack_axis", DType::kInt64, {1}, {axis});
  for (size_t t = 0; t < parts.size(); ++t) {
    ir::Node u;
    u.op = "Unsqueeze";
    u.name = node.name + "_stack_" + std::to_string(t);
    u.inputs = {parts[t], axes};
    ir::Value v;
    v.name = trace_.value(result).name + "_" + std::to_string(t);
    u.outputs = {trace_.AddValue(std::move(v))};
    unsqueezed.push_back(u.outputs[0]);
    KILN_RETURN_IF_ERROR(Process(std::move(u), out));
  }
  ir::Node concat;
  concat.op = "Concat";
  concat.name = node.name + "_stack";
  concat.attrs.SetInt("axis", axis);
  for (ir::ValueId id : unsqueezed) concat.inputs.push_back(Map(id));
  concat.outputs = {result};
  return Process(std::move(concat), out);
}

std::optional<ir::ValueId> Canonicalizer::EmptyStack(ir::ValueId body_output, int64_t axis, const std::string& name) {
  const ir::Value& v = trace_.value(body_output);
  if (v.dtype == DType::kUndefined || !ir::IsStatic(v.shape) || axis < 0 || axis > v.rank()) return std::nullopt;
  auto data = std::make_shared<ir::ConstData>();
  data->dtype = v.dtype;
  data->dims = ir::StaticDims(v.shape);
  data->dims.insert(data->dims.begin() + axis, 0);
  ir::Value c{name, v.dtype, {}, data, std::nullopt};
  for (int64_t d : data->dims) c.shape.push_back(ir::Sym(d));
  return trace_.AddValue(std::move(c));
}

}  // namespace kiln::passes
