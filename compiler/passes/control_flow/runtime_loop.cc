// A Loop whose trip count or condition is known only when it runs (or that runs more than
// kMaxUnrolledIterations times), or a Scan whose length is not known at compile time
// (canonicalizer.h): the body is compiled once, between kiln.LoopBegin and kiln.LoopEnd
// (compiler/ops/meta_loop.cc), whose kernels the runtime's executors run as the loop's control:
// LoopBegin binds the body's parameters (iteration number, condition, the carried values'
// initial values), LoopEnd copies the body's results back into them, stacks the scan outputs
// and jumps back while the trip count and the condition allow, then writes the final carried
// values. The carried values keep their shapes from iteration to iteration (checked here). A
// scan output's leading dim, the iterations that ran, is M itself when the loop has no
// condition and M is at least 1 for every call (a Scan's length), else a run-time dim bounded
// by max(0, M), so scan outputs need M known at compile time as an expression (a constant, a
// shape, an input's value). The body may set run-time dims, which its scan values' shapes may
// not read.
//
// A run-time Scan is such a loop of its length's iterations, each reading its slice of every
// scan input (Gather at the iteration number); the scan inputs must have the same length, as
// written.
#include <algorithm>

#include "compiler/ops/meta_util.h"
#include "compiler/passes/canonicalizer.h"

namespace kiln::passes {

Status Canonicalizer::RuntimeLoop(const ir::Node& node, const ir::Block& body, ir::ValueId m, ir::ValueId cond,
                                  const std::vector<ir::ValueId>& initials, const std::vector<ScanSlice>& slices,
                                  const std::vector<ScanStack>& stacks, std::vector<ir::Node>& out) {
  const std::string where = "node '" + node.name + "' (" + node.op + ")";
  const bool scan = node.op == "Scan";  // its body has no iteration number, condition or condition output
  const size_t carried = initials.size();
  ir::Node begin;
  begin.op = "kiln.LoopBegin";
  begin.name = node.name + "_begin";
  begin.inputs = {m, cond};
  begin.inputs.insert(begin.inputs.end(), initials.begin(), initials.end());
  for (size_t k = 0; k < carried + 2; ++k) {
    ir::Value v;
    v.name = k >= 2 || !scan ? trace_.value(body.inputs[scan ? k - 2 : k]).name
                             : node.name + (k == 0 ? "_iteration" : "_condition");
    begin.outputs.push_back(trace_.AddValue(std::move(v)));
  }
  const std::vector<ir::ValueId> params = begin.outputs;
  KILN_RETURN_IF_ERROR(Emit(std::move(begin), out).WithContext(where));
  for (size_t k = scan ? 2 : 0; k < params.size(); ++k)
    KILN_RETURN_IF_ERROR(BindParameter(node, body.inputs[scan ? k - 2 : k], params[k]));
  // Each Scan input's slice: Gather at the iteration number (counted from the end when reversed).
  for (size_t j = 0; j < slices.size(); ++j) {
    ir::ValueId index = params[0];
    if (slices[j].reverse) {
      const ir::Value& x = trace_.value(slices[j].input);
      ir::Value last{node.name + "_last_" + std::to_string(j), DType::kInt64, {}, nullptr,
                     std::vector<ir::Sym>{x.shape[static_cast<size_t>(slices[j].axis)] - ir::Sym(1)}};
      ir::Node sub;
      sub.op = "Sub";
      sub.name = node.name + "_reverse_" + std::to_string(j);
      sub.inputs = {trace_.AddValue(std::move(last)), params[0]};
      ir::Value v;
      v.name = sub.name;
      sub.outputs = {trace_.AddValue(std::move(v))};
      index = sub.outputs[0];
      KILN_RETURN_IF_ERROR(Emit(std::move(sub), out));
    }
    ir::Node gather;
    gather.op = "Gather";
    gather.name = node.name + "_slice_" + std::to_string(j);
    gather.attrs.SetInt("axis", slices[j].axis);
    gather.inputs = {slices[j].input, index};
    ir::Value v;
    v.name = trace_.value(body.inputs[carried + j]).name;
    gather.outputs = {trace_.AddValue(std::move(v))};
    const ir::ValueId slice = gather.outputs[0];
    KILN_RETURN_IF_ERROR(Emit(std::move(gather), out));
    KILN_RETURN_IF_ERROR(BindParameter(node, body.inputs[carried + j], slice));
  }
  const size_t dims = trace_.runtime_dims.size();
  KILN_RETURN_IF_ERROR(Run(body, out));
  if (undecided_) return Status::Ok();
  std::vector<ir::ValueId> results;
  if (scan) results.push_back(params[1]);  // no condition: it stays true
  for (ir::ValueId id : body.outputs) {
    results.push_back(Map(id));
    KILN_RETURN_IF_ERROR(Usable(results.back(), where + "'s body"));
  }
  // The body may set run-time dims (a NonZero in it), set again in each iteration; a scan
  // value may not have one in its shape, since the rows it stacks must have one shape. (A
  // carried value keeps its shape: checked below.)
  for (size_t j = carried + 1; j < results.size(); ++j) {
    const ir::Value& v = trace_.value(results[j]);
    for (size_t r = dims; r < trace_.runtime_dims.size(); ++r)
      for (const ir::Sym& d : v.shape)
        if (const std::vector<std::string> vars = d.Vars();
            std::binary_search(vars.begin(), vars.end(), trace_.runtime_dims[r].symbol))
          return Unimplemented(where + ": scan output " + std::to_string(j - carried - 1) + " ('" + v.name + "') is " +
                               std::string(DTypeName(v.dtype)) + ir::ShapeToString(v.shape) +
                               ", sized by a run-time dim set in each iteration (" + trace_.runtime_dims[r].origin +
                               "); the rows a scan output stacks must have one shape");
  }
  for (size_t k = 0; k < carried; ++k) {
    const ir::Value &p = trace_.value(params[2 + k]), &r = trace_.value(results[1 + k]);
    bool same = p.dtype == r.dtype && p.shape.size() == r.shape.size();
    for (size_t d = 0; same && d < p.shape.size(); ++d) same = p.shape[d].Same(r.shape[d]);
    if (!same)
      return Unimplemented(where + ": loop-carried value " + std::to_string(k) + " ('" + p.name + "') is " +
                           std::string(DTypeName(p.dtype)) + ir::ShapeToString(p.shape) + " before an iteration and " +
                           std::string(DTypeName(r.dtype)) + ir::ShapeToString(r.shape) +
                           " after it; a run-time loop carries values whose dtype and shape stay the same (a loop "
                           "whose trip count is known at compile time is unrolled instead: --profile can fix it)");
    // A result that is another parameter (two carried values swapped) is copied first: LoopEnd
    // writes the parameters one after another.
    const auto pos = std::find(params.begin(), params.end(), results[1 + k]);
    if (pos >= params.begin() + 2 && pos != params.end() &&
        pos != params.begin() + 2 + static_cast<std::ptrdiff_t>(k)) {
      ir::Node copy;
      copy.op = "Identity";
      copy.name = node.name + "_carry_" + std::to_string(k);
      copy.inputs = {results[1 + k]};
      ir::Value v;
      v.name = p.name + "_next";
      copy.outputs = {trace_.AddValue(std::move(v))};
      results[1 + k] = copy.outputs[0];
      KILN_RETURN_IF_ERROR(Emit(std::move(copy), out));
    }
  }
  // The iterations are exactly M when nothing else can end the loop and M >= 0 for every call
  // (a dim's symbol: a Scan's length, which may be 0).
  const auto always = [&](ir::ValueId id) { return id == ir::kNoValue || id == params[1] || KnownScalar(id) == 1; };
  std::optional<std::vector<ir::Sym>> trips;
  if (m != ir::kNoValue) trips = ir::meta::Elements(trace_.value(m));
  const bool exact = always(cond) && always(results[0]) && trips && trips->size() == 1 && (*trips)[0].lo() >= 0;
  ir::Node end;
  end.op = "kiln.LoopEnd";
  end.name = node.name + "_end";
  end.attrs.SetInt("carried", static_cast<int64_t>(carried));
  if (exact) end.attrs.SetInt("exact", 1);
  // Room for the scan outputs where the trip count bounds nothing (meta_loop.cc).
  if (options_.loop_scan_bound > 0 && !stacks.empty())
    end.attrs.SetInt("scan_bound", options_.loop_scan_bound);
  end.inputs = {m};
  end.inputs.insert(end.inputs.end(), params.begin(), params.end());
  end.inputs.insert(end.inputs.end(), results.begin(), results.end());
  end.outputs = node.outputs;
  std::vector<ir::Node> after;  // a stack along another axis, or reversed
  for (size_t k = 0; k < end.outputs.size(); ++k) {
    if (end.outputs[k] == ir::kNoValue) {  // every instruction output has room in the arena
      ir::Value v;
      v.name = node.name + "_unused_" + std::to_string(k);
      end.outputs[k] = trace_.AddValue(std::move(v));
      continue;
    }
    if (k < carried) continue;
    const int64_t rank = trace_.value(results[1 + k]).rank() + 1;
    ScanStack st = stacks[k - carried];
    if (st.axis < 0) st.axis += rank;
    if (st.axis < 0 || st.axis >= rank)
      return InvalidArgument(where + ": scan_output_axes[" + std::to_string(k - carried) + "] = " +
                             std::to_string(stacks[k - carried].axis) + " is out of range for rank " +
                             std::to_string(rank));
    if (st.axis == 0 && !st.reverse) continue;
    ir::ValueId rows = NewValue(trace_.value(end.outputs[k]).name + "_rows");
    const ir::ValueId result = end.outputs[k];
    end.outputs[k] = rows;
    if (st.reverse) {
      ir::Node rev;
      rev.op = "Slice";
      rev.name = node.name + "_reverse_output_" + std::to_string(k - carried);
      rev.inputs = {rows, Constant(rev.name + "_starts", DType::kInt64, {1}, {-1}),
                    Constant(rev.name + "_ends", DType::kInt64, {1}, {INT64_MIN}),
                    Constant(rev.name + "_axes", DType::kInt64, {1}, {0}),
                    Constant(rev.name + "_steps", DType::kInt64, {1}, {-1})};
      rev.outputs = {st.axis == 0 ? result : NewValue(trace_.value(result).name + "_reversed")};
      rows = rev.outputs[0];
      after.push_back(std::move(rev));
    }
    if (st.axis != 0) {
      ir::Node t;
      t.op = "Transpose";
      t.name = node.name + "_output_axis_" + std::to_string(k - carried);
      std::vector<int64_t> perm;
      for (int64_t d = 0; d < rank; ++d) perm.push_back(d < st.axis ? d + 1 : d == st.axis ? 0 : d);
      t.attrs.SetInts("perm", perm);
      t.inputs = {rows};
      t.outputs = {result};
      after.push_back(std::move(t));
    }
  }
  KILN_RETURN_IF_ERROR(Emit(std::move(end), out).WithContext(where));
  for (ir::Node& n : after) KILN_RETURN_IF_ERROR(Process(std::move(n), out));
  return Status::Ok();
}

Status Canonicalizer::RuntimeScan(const ir::Node& node, const ir::Block& body, const std::vector<int64_t>& axes,
                                  const std::vector<int64_t>& in_dirs, const std::vector<int64_t>& out_axes,
                                  const std::vector<int64_t>& out_dirs, std::vector<ir::Node>& out) {
  const std::string where = "node '" + node.name + "' (Scan)";
  const size_t m = axes.size(), states = node.inputs.size() - m, scanned = node.outputs.size() - states;
  std::vector<ScanSlice> slices;
  std::optional<ir::Sym> length;
  for (size_t j = 0; j < m; ++j) {
    const ir::Value& x = trace_.value(node.inputs[states + j]);
    const ir::Sym& len = x.shape[static_cast<size_t>(axes[j])];
    if (length && !length->Same(len))
      return Unimplemented(where + ": scan inputs of lengths " + length->ToString() + " and " + len.ToString() +
                           " (" + x.name + "); a run-time Scan needs one length, as written");
    length = len;
    slices.push_back({node.inputs[states + j], axes[j], in_dirs[j] == 1});
  }
  std::vector<ScanStack> stacks(scanned);
  for (size_t k = 0; k < scanned; ++k) stacks[k] = {out_axes[k], out_dirs[k] == 1};
  ir::Value trips{node.name + "_length", DType::kInt64, {}, nullptr, std::vector<ir::Sym>{*length}};
  const std::vector<ir::ValueId> initials(node.inputs.begin(),
                                          node.inputs.begin() + static_cast<std::ptrdiff_t>(states));
  return RuntimeLoop(node, body, trace_.AddValue(std::move(trips)), ir::kNoValue, initials, slices, stacks, out);
}

}  // namespace kiln::passes
