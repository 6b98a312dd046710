#include "compiler/passes/canonicalize.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <string>
#include <unordered_set>

#include "compiler/ops/meta_util.h"
#include "compiler/ops/registry.h"
#include "compiler/passes/constant_fold.h"
#include "compiler/passes/fold_batchnorm.h"

namespace kiln::passes {
namespace {

// True when `s` is at least 1 for every binding the prologue accepts (dim symbols are >= 1;
// value symbols, passes/value_inputs.h, may be any int64; run-time dims may be 0), so it needs no guard. Conservative:
// floor division and subtraction are never assumed positive.
bool IsPositive(const ir::Sym& s) {
  switch (s.op()) {
    case ir::SymOp::kConst: return *s.value() >= 1;
    case ir::SymOp::kVar: return !s.is_value_var() && !s.is_runtime_var();
    case ir::SymOp::kAdd:
    case ir::SymOp::kMul:
    case ir::SymOp::kMin: return IsPositive(s.lhs()) && IsPositive(s.rhs());
    case ir::SymOp::kMax: return IsPositive(s.lhs()) || IsPositive(s.rhs());
    case ir::SymOp::kCeilDiv: return IsPositive(s.lhs()) && IsPositive(s.rhs());
    default: return false;
  }
}

class Canonicalizer {
 public:
  Canonicalizer(ir::Trace& trace, const std::vector<Assumption>& assumptions, const CanonicalizeOptions& options)
      : trace_(trace), assumptions_(assumptions), options_(options), remap_(trace.values.size()) {
    for (size_t i = 0; i < remap_.size(); ++i) remap_[i] = static_cast<ir::ValueId>(i);
  }

  // Processes `block` into `out`. Stops early, with undecided() set, at an If whose
  // condition no assumption decides.
  Status Run(const ir::Block& block, std::vector<ir::Node>& out) {
    for (const ir::Node& original : block.nodes) {
      if (undecided_) return Status::Ok();
      ir::Node node = original;
      for (ir::ValueId& id : node.inputs) {
        id = Map(id);
        KILN_RETURN_IF_ERROR(Usable(id, "node '" + node.name + "' (" + node.op + ")"));
      }
      // In an unrolled body every iteration writes values of its own: the node's outputs are
      // fresh values, and the body's own ids map to them until the next iteration.
      const std::vector<ir::ValueId> outputs = node.outputs;
      if (!iteration_.empty())
        for (ir::ValueId& id : node.outputs)
          if (id != ir::kNoValue) id = Fresh(id);
      const std::vector<ir::ValueId> fresh = node.outputs;  // Dispatch may move the node
      KILN_RETURN_IF_ERROR(Dispatch(node, out));
      if (!iteration_.empty())
        for (size_t i = 0; i < outputs.size(); ++i)
          if (outputs[i] != ir::kNoValue) SetMap(outputs[i], Map(fresh[i]));
    }
    return Status::Ok();
  }

  ir::ValueId Map(ir::ValueId id) const {
    return id == ir::kNoValue || static_cast<size_t>(id) >= remap_.size() ? id : remap_[id];
  }
  // Unimplemented when `id` (mapped) is a run-time If's output that it could not carry, read by
  // `reader`; an output nothing reads does not stop the compile.
  Status Usable(ir::ValueId id, const std::string& reader) const {
    auto it = unmerged_.find(id);
    if (it == unmerged_.end()) return Status::Ok();
    return Unimplemented(it->second + "; " + reader + " reads it");
  }
  const std::optional<ir::Sym>& undecided() const { return undecided_; }
  // Every guard the canonical stage made: the If assumptions first (they are why the entry
  // exists), then the checks of output extents.
  std::vector<ir::Guard> TakeGuards() {
    std::vector<ir::Guard> all = std::move(entry_guards_);
    all.insert(all.end(), std::make_move_iterator(guards_.begin()), std::make_move_iterator(guards_.end()));
    guards_.clear();
    return all;
  }

 private:
  // A node whose inputs are mapped: If and Loop/Scan resolved at compile time, a float Range
  // over integers rewritten, anything else processed.
  Status Dispatch(ir::Node& node, std::vector<ir::Node>& out) {
    if (node.op == "If") return InlineIf(node, out);
    if (node.op == "Loop") return UnrollLoop(node, out);
    if (node.op == "Scan") return UnrollScan(node, out);
    if (node.op == "Range") {
      KILN_ASSIGN_OR_RETURN(bool rewritten, RangeOverIntegers(node, out));
      if (rewritten) return Status::Ok();
    }
    return Process(std::move(node), out);
  }

  void SetMap(ir::ValueId id, ir::ValueId to) {
    while (remap_.size() <= static_cast<size_t>(id)) remap_.push_back(static_cast<ir::ValueId>(remap_.size()));
    remap_[id] = to;
  }

  // A new value for one iteration of body value `id`: its name with the iteration ("h@3"),
  // its type left to inference.
  ir::ValueId Fresh(ir::ValueId id) {
    ir::Value v;
    v.name = trace_.value(id).name + "@" + iteration_;
    v.dtype = trace_.value(id).dtype;
    return trace_.AddValue(std::move(v));
  }

  // A new value named `name`, its type left to inference.
  ir::ValueId NewValue(std::string name) {
    ir::Value v;
    v.name = std::move(name);
    return trace_.AddValue(std::move(v));
  }

  // A new int64 (or bool) scalar constant.
  ir::ValueId ScalarConstant(const std::string& name, DType dtype, int64_t value) {
    return Constant(name, dtype, {}, {value});
  }

  // A new constant of static `shape` holding `elements` (an integer or bool dtype), stored in
  // its dtype as the canonical stage stores known elements.
  ir::ValueId Constant(const std::string& name, DType dtype, ir::SymShape shape, const std::vector<int64_t>& elements) {
    ir::Value c{name, dtype, std::move(shape), nullptr, std::vector<ir::Sym>(elements.begin(), elements.end())};
    MaterializeKnownElements(c);
    c.sym.reset();
    return trace_.AddValue(std::move(c));
  }

  // The value of a one-element int or bool tensor known at compile time (constant data or
  // constant known elements).
  std::optional<int64_t> KnownScalar(ir::ValueId id) const {
    if (id == ir::kNoValue) return std::nullopt;
    const ir::Value& v = trace_.value(id);
    if (v.is_const() && v.data->num_elements() == 1) return v.data->IntAt(0);
    if (v.sym && v.sym->size() == 1 && (*v.sym)[0].is_const()) return *(*v.sym)[0].value();
    return std::nullopt;
  }

  static const ir::Block* Body(const ir::Node& node) {
    for (const auto& [name, block] : node.blocks)
      if (name == "body") return block.get();
    return nullptr;
  }

  // Stacks one value per iteration (each `shape` the same) along `axis` of a new dim: each
  // Unsqueezed there, then one Concat writing `result`. Reversed for a scan output whose
  // direction is backwards.
  Status Stack(const ir::Node& node, std::vector<ir::ValueId> parts, int64_t axis, ir::ValueId result,
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

  // The stack of no iterations: an empty constant whose dims are the body output's declared
  // dims (its ONNX type) with 0 inserted at `axis`, or nullopt when it declares none.
  std::optional<ir::ValueId> EmptyStack(ir::ValueId body_output, int64_t axis, const std::string& name) {
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

  // Binds body parameter `param` to value `to`, whose dtype must be the one the body declares
  // for it, if any (ONNX's type of the body's input): InvalidArgument otherwise.
  Status BindParameter(const ir::Node& node, ir::ValueId param, ir::ValueId to) {
    const ir::Value &declared = trace_.value(param), &given = trace_.value(to);
    if (declared.dtype != DType::kUndefined && given.dtype != DType::kUndefined && declared.dtype != given.dtype)
      return InvalidArgument("node '" + node.name + "' (" + node.op + "): its body's input '" + declared.name +
                             "' is declared " + std::string(DTypeName(declared.dtype)) + ", and the " + node.op +
                             " gives it " + std::string(DTypeName(given.dtype)));
    SetMap(param, to);
    return Status::Ok();
  }

  // Runs `body` once with its parameters bound to `params`; the body's outputs, mapped.
  Result<std::vector<ir::ValueId>> Iterate(const ir::Node& node, const ir::Block& body,
                                           const std::vector<ir::ValueId>& params, int64_t i,
                                           std::vector<ir::Node>& out) {
    if (i >= kMaxUnrolledIterations)
      return ResourceExhausted("node '" + node.name + "' (" + node.op + "): more than " +
                               std::to_string(kMaxUnrolledIterations) + " iterations to unroll");
    for (size_t k = 0; k < params.size(); ++k) KILN_RETURN_IF_ERROR(BindParameter(node, body.inputs[k], params[k]));
    const std::string outer = iteration_;
    iteration_ = (outer.empty() ? "" : outer + ".") + std::to_string(i);
    Status st = Run(body, out);
    iteration_ = outer;
    KILN_RETURN_IF_ERROR(st);
    std::vector<ir::ValueId> results;
    for (ir::ValueId id : body.outputs) results.push_back(Map(id));
    return results;
  }

  // Loop (ONNX Loop-1 to -21): unrolled when its trip count M and its condition are known at
  // compile time at every iteration (constants, shapes or value profiles); the loop-carried
  // values flow from one copy of the body to the next, and each scan output is its
  // iterations' values stacked along a new axis 0.
  Status UnrollLoop(ir::Node& node, std::vector<ir::Node>& out) {
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
    if (!trips) return runtime_loop("trip count M (" + trace_.value(node.inputs[0]).name + ") is not known at compile time");
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

  // A Loop whose trip count or condition is known only when it runs (or that runs more than
  // kMaxUnrolledIterations times), or a Scan whose length is not known at compile time: the
  // body is compiled once, between kiln.LoopBegin and kiln.LoopEnd (compiler/ops/meta_loop.cc),
  // whose kernels the runtime's executors run as the loop's control: LoopBegin binds the body's
  // parameters (iteration number, condition, the carried values' initial values), LoopEnd
  // copies the body's results back into them, stacks the scan outputs and jumps back while the
  // trip count and the condition allow, then writes the final carried values. The carried
  // values keep their shapes from iteration to iteration (checked here). A scan output's
  // leading dim, the iterations that ran, is M itself when the loop has no condition and M is
  // at least 1 for every call (a Scan's length), else a run-time dim bounded by max(0, M), so
  // scan outputs need M known at compile time as an expression (a constant, a shape, an
  // input's value). The body may set run-time dims, which its scan values' shapes may not read.
  struct ScanSlice {  // a Scan input, read one slice per iteration
    ir::ValueId input;
    int64_t axis;
    bool reverse;
  };
  struct ScanStack {  // a scan output, stacked along `axis` (ONNX's: negative counts from the end), from the last iteration if `reverse`
    int64_t axis = 0;
    bool reverse = false;
  };
  Status RuntimeLoop(const ir::Node& node, const ir::Block& body, ir::ValueId m, ir::ValueId cond,
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
      if (pos >= params.begin() + 2 && pos != params.end() && pos != params.begin() + 2 + static_cast<std::ptrdiff_t>(k)) {
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
    // The iterations are exactly M when nothing else can end the loop and M >= 1 for every call.
    const auto always = [&](ir::ValueId id) { return id == ir::kNoValue || id == params[1] || KnownScalar(id) == 1; };
    std::optional<std::vector<ir::Sym>> trips;
    if (m != ir::kNoValue) trips = ir::meta::Elements(trace_.value(m));
    const bool exact = always(cond) && always(results[0]) && trips && trips->size() == 1 && IsPositive((*trips)[0]);
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

  // Infers `node` and appends it to `out` under the current predicates, as it is: never
  // folded or forwarded (a loop's control, or a copy it needs).
  Status Emit(ir::Node node, std::vector<ir::Node>& out) {
    KILN_RETURN_IF_ERROR(ir::InferNode(trace_, node));
    KILN_RETURN_IF_ERROR(CheckOutputDims(node));
    node.when = when_;
    out.push_back(std::move(node));
    return Status::Ok();
  }

  // Scan (ONNX Scan-9 to -21): unrolled along the scan axis, whose length is known at compile
  // time: iteration t reads slice t of each scan input (Gather along its axis, from the end
  // when its direction is 1), the states flow from one copy of the body to the next, and each
  // scan output stacks its iterations along its axis (in reverse when its direction is 1).
  Status UnrollScan(ir::Node& node, std::vector<ir::Node>& out) {
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

  // A Scan whose length is not known at compile time (a symbolic dim): a run-time loop of that
  // many iterations (RuntimeLoop), each reading its slice of every scan input. The scan inputs
  // must have the same length, as written.
  Status RuntimeScan(const ir::Node& node, const ir::Block& body, const std::vector<int64_t>& axes,
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
    const std::vector<ir::ValueId> initials(node.inputs.begin(), node.inputs.begin() + static_cast<std::ptrdiff_t>(states));
    return RuntimeLoop(node, body, trace_.AddValue(std::move(trips)), ir::kNoValue, initials, slices, stacks, out);
  }

  // Infers `node`, then folds it, forwards it (Identity) or appends it to `out`.
  Status Process(ir::Node node, std::vector<ir::Node>& out) {
    KILN_RETURN_IF_ERROR(ir::InferNode(trace_, node));
    KILN_RETURN_IF_ERROR(CheckOutputDims(node));
    if (node.op == "Cast" && node.inputs.size() == 1 && node.outputs.size() == 1 && node.inputs[0] != ir::kNoValue) {
      // uint64 is left out: its upper half would turn negative as the int64 Range's operand.
      const DType from = trace_.value(node.inputs[0]).dtype;
      if (ir::meta::IsInteger(from) && from != DType::kUInt64 && ir::meta::IsFloat(trace_.value(node.outputs[0]).dtype))
        cast_from_int_[node.outputs[0]] = node.inputs[0];
    }
    if (node.op == "Identity" && node.inputs.size() == 1 && node.outputs.size() == 1 &&
        node.inputs[0] != ir::kNoValue) {
      SetMap(node.outputs[0], node.inputs[0]);
      return Status::Ok();
    }
    if (!NeedsInstruction(node)) return Status::Ok();
    if (CanFold(trace_, node)) return FoldNode(trace_, node);
    node.when = when_;
    out.push_back(std::move(node));
    return Status::Ok();
  }

  // A float Range whose start, limit and delta are integers (float constants of integral value,
  // or Casts of integer tensors), such as YOLOv8's anchor grid Range(0, Cast<float>(W), 1), is
  // the integer Range cast to float: the same values (exact below 2^24 in float32), and its
  // length is an expression in the shapes rather than data. Rewritten so (true) when at least
  // one operand is not a constant; false leaves the node as it is. New values are never
  // remapped (remap_ covers the imported ones).
  Result<bool> RangeOverIntegers(const ir::Node& node, std::vector<ir::Node>& out) {
    if (node.inputs.size() != 3 || node.outputs.size() != 1 || node.outputs[0] == ir::kNoValue) return false;
    const ir::ValueId result = node.outputs[0];
    for (ir::ValueId id : node.inputs)
      if (id == ir::kNoValue || !ir::meta::IsFloat(trace_.value(id).dtype)) return false;
    std::vector<ir::ValueId> ints;
    bool computed = false;
    for (ir::ValueId id : node.inputs) {
      const ir::Value& v = trace_.value(id);
      if (auto c = cast_from_int_.find(id); c != cast_from_int_.end()) {
        ints.push_back(c->second);
        computed = true;
      } else if (v.is_const() && v.data->num_elements() == 1 && std::isfinite(v.data->FloatAt(0)) &&
                 v.data->FloatAt(0) == std::trunc(v.data->FloatAt(0)) && std::fabs(v.data->FloatAt(0)) < 0x1p53) {
        ints.push_back(ScalarConstant(v.name + "_int64", DType::kInt64, static_cast<int64_t>(v.data->FloatAt(0))));
      } else {
        return false;
      }
    }
    if (!computed) return false;
    // Each operand as an int64 scalar (Range needs one dtype), the int64 Range, and the Cast back.
    auto add = [&](const char* op, std::vector<ir::ValueId> in, DType to, const std::string& suffix) {
      ir::Node n;
      n.op = op;
      n.name = node.name + suffix;
      n.inputs = std::move(in);
      if (std::string(op) == "Cast") n.attrs.SetInt("to", static_cast<int64_t>(to));
      ir::Value v;
      v.name = trace_.value(result).name + suffix;
      n.outputs = {trace_.AddValue(std::move(v))};
      return n;
    };
    std::vector<ir::Node> rewritten;
    for (ir::ValueId& id : ints)
      if (trace_.value(id).dtype != DType::kInt64) {
        rewritten.push_back(add("Cast", {id}, DType::kInt64, "_" + trace_.value(id).name + "_int64"));
        id = rewritten.back().outputs[0];
      }
    rewritten.push_back(add("Range", ints, DType::kInt64, "_int64"));
    ir::Node cast = add("Cast", {rewritten.back().outputs[0]}, trace_.value(node.inputs[0]).dtype, "_cast");
    cast.outputs = {result};
    rewritten.push_back(std::move(cast));
    for (ir::Node& n : rewritten) KILN_RETURN_IF_ERROR(Process(std::move(n), out));
    return true;
  }

  // False when every output is constant or known element-wise as Syms, so the runtime
  // needs no instruction for it.
  bool NeedsInstruction(const ir::Node& node) {
    bool needed = false;
    for (ir::ValueId id : node.outputs) {
      if (id == ir::kNoValue) continue;
      ir::Value& v = trace_.value(id);
      // Known elements are computed in int64 by the meta functions; stored in the value's
      // dtype they wrap (or saturate) as the kernels' results do, and from then on the stored
      // data is what later nodes read, not the int64 elements.
      if (MaterializeKnownElements(v)) v.sym.reset();
      // A constant expression that overflowed int64 cannot be evaluated: the kernels, which
      // wrap, compute the value instead.
      if (v.sym) {
        bool evaluable = true;
        for (const ir::Sym& e : *v.sym) evaluable = evaluable && (e.is_const() || !e.Vars().empty());
        if (!evaluable) v.sym.reset();
      }
      // Elements left symbolic reach the runtime only as int32 or int64 (runtime/verify.cc);
      // others (an If's bool condition on shapes) keep their elements for the compiler, and an
      // instruction computes them should the runtime read them.
      const bool runtime_symbolic = v.sym && (v.dtype == DType::kInt64 || v.dtype == DType::kInt32);
      if (!v.is_const() && !runtime_symbolic) needed = true;
    }
    return needed;
  }

  // Every output dim must be computable: a dim with no symbols that did not fold to a
  // number overflowed int64. A static dim may be 0 (an empty tensor, as ONNX allows), and so
  // may a symbolic one that is provably >= 0 (a Slice length is clamped at 0). Any other
  // symbolic dim computed from the inputs (a Conv or pool extent, a value symbol) must be at
  // least 1 for the calls this entry accepts; the prologue gets a guard for it.
  Status CheckOutputDims(const ir::Node& node) {
    for (ir::ValueId id : node.outputs) {
      if (id == ir::kNoValue) continue;
      const ir::Value& v = trace_.value(id);
      // Checked after every node, so no expression grows past twice the limit before it is refused.
      auto too_big = [&](const char* what, size_t i, const ir::Sym& s) {
        return ResourceExhausted("node '" + node.name + "' (" + node.op + "): output '" + v.name + "' " + what + " " +
                                 std::to_string(i) + " is a symbolic expression of " + std::to_string(s.tree_size()) +
                                 " terms, over the limit of " + std::to_string(kMaxSymTreeSize));
      };
      for (size_t d = 0; d < v.shape.size(); ++d)
        if (v.shape[d].tree_size() > kMaxSymTreeSize) return too_big("dim", d, v.shape[d]);
      if (v.sym)
        for (size_t i = 0; i < v.sym->size(); ++i)
          if ((*v.sym)[i].tree_size() > kMaxSymTreeSize) return too_big("element", i, (*v.sym)[i]);
      for (size_t d = 0; d < v.shape.size(); ++d) {
        const ir::Sym& dim = v.shape[d];
        if (IsPositive(dim)) continue;
        if (dim.Vars().empty()) {
          if (dim.value() && *dim.value() == 0) continue;  // an empty tensor: every op and kernel accepts it
          return InvalidArgument("node '" + node.name + "' (" + node.op + "): output '" + v.name + "' dim " +
                                 std::to_string(d) + " is " + dim.ToString() + " (negative or overflowing int64)");
        }
        // A size that is provably >= 0 may be 0 at run time: an empty tensor, as ONNX allows (a
        // Slice past the end of a symbolic dim, max(0, W - min(5, W)); NonZero's count). Ops
        // that need more guard it themselves (a window op's extent, meta::WindowOutput).
        if (ir::meta::NonNegative(dim)) continue;
        guards_.push_back({ir::Lt(0, dim), "node '" + node.name + "' (" + node.op + "), whose output '" + v.name +
                                               "' dim " + std::to_string(d) + " must be >= 1"});
      }
      const ir::Sym elements = ir::NumElements(v.shape);
      if (!elements.is_const() && elements.Vars().empty())
        return InvalidArgument("node '" + node.name + "' (" + node.op + "): output '" + v.name +
                               "' has more elements than int64 can count: " + ir::ShapeToString(v.shape));
      // Folding sizes its buffer from this, the memory plan sums it: it must be a number.
      const ir::Sym bytes = elements * ir::Sym(static_cast<int64_t>(DTypeSize(v.dtype)));
      if (!bytes.is_const() && bytes.Vars().empty())
        return InvalidArgument("node '" + node.name + "' (" + node.op + "): output '" + v.name + "' " +
                               std::string(DTypeName(v.dtype)) + ir::ShapeToString(v.shape) +
                               " has more bytes than int64 can count");
    }
    return Status::Ok();
  }

  Status InlineIf(const ir::Node& node, std::vector<ir::Node>& out) {
    if (node.inputs.empty() || node.inputs[0] == ir::kNoValue)
      return InvalidArgument("node '" + node.name + "' (If): missing condition input");
    if (node.inputs.size() != 1 || node.outputs.empty())
      return InvalidArgument("node '" + node.name + "' (If): expected 1 input (cond) and at least 1 output, found " +
                             std::to_string(node.inputs.size()) + " and " + std::to_string(node.outputs.size()));
    const ir::Value& cond = trace_.value(node.inputs[0]);
    std::optional<bool> taken;
    if (cond.is_const() && cond.data->num_elements() >= 1) {
      taken = cond.data->IntAt(0) != 0;
    } else if (cond.sym && !cond.sym->empty()) {
      const ir::Sym& c = (*cond.sym)[0];
      if (c.is_const()) taken = *c.value() != 0;
      for (const Assumption& a : assumptions_)
        if (!taken && a.condition.Same(c)) {
          taken = a.holds;
          entry_guards_.push_back({a.holds ? c : ir::Eq(c, 0),
                             "node '" + node.name + "' (If), whose " + (a.holds ? "then" : "else") +
                                 " branch this entry was compiled for"});
        }
      if (!taken) {
        undecided_ = c;
        return Status::Ok();
      }
    } else {
      return RuntimeIf(node, out);
    }
    const char* branch = *taken ? "then_branch" : "else_branch";
    const ir::Block* chosen = nullptr;
    for (const auto& [name, block] : node.blocks)
      if (name == branch) chosen = block.get();
    if (!chosen) return InvalidArgument("node '" + node.name + "' (If): no " + branch);
    if (chosen->outputs.size() != node.outputs.size())
      return InvalidArgument("node '" + node.name + "' (If): " + branch + " has " +
                             std::to_string(chosen->outputs.size()) + " outputs, the node " +
                             std::to_string(node.outputs.size()));
    KILN_RETURN_IF_ERROR(Run(*chosen, out));
    for (size_t i = 0; i < node.outputs.size(); ++i)
      if (node.outputs[i] != ir::kNoValue) SetMap(node.outputs[i], Map(chosen->outputs[i]));
    return Status::Ok();
  }

  // An If whose condition is tensor data: both branches are compiled, each node under its
  // predicate (ir::Predicate: the then-branch's run when the condition holds, the
  // else-branch's when it does not), and each output is Where(condition, then value, else
  // value), which reads only what the branch that ran wrote (the other's tensors hold what
  // their memory last held, and Where selects none of it). An output whose shapes differ in
  // one dim between the branches is kiln.IfOutput(condition, then value, else value) instead,
  // a run-time dim there. A branch may set run-time dims (a NonZero in it): they are set only
  // when it runs, as are the guards that read them checked; so is a shape guard that only one
  // branch needs. Outputs whose shapes differ in rank or in more than one dim are refused.
  Status RuntimeIf(const ir::Node& node, std::vector<ir::Node>& out) {
    const std::string what = "node '" + node.name + "' (If)";
    const ir::ValueId cond_id = node.inputs[0];
    const ir::Value& cond = trace_.value(cond_id);
    if (cond.dtype != DType::kBool)
      return InvalidArgument(what + ": input cond: expected a bool tensor, found " + std::string(DTypeName(cond.dtype)));
    if (auto n = ir::NumElements(cond.shape).value(); !n || *n != 1)
      return InvalidArgument(what + ": input cond: expected one element, found shape " + ir::ShapeToString(cond.shape));
    const bool cond_is_scalar = cond.shape.empty();  // `cond` dangles once values are added
    const ir::Block* branches[2] = {nullptr, nullptr};
    const char* names[2] = {"then_branch", "else_branch"};
    for (const auto& [name, block] : node.blocks)
      for (int b = 0; b < 2; ++b)
        if (name == names[b]) branches[b] = block.get();
    for (int b = 0; b < 2; ++b) {
      if (!branches[b]) return InvalidArgument(what + ": no " + names[b]);
      if (branches[b]->outputs.size() != node.outputs.size())
        return InvalidArgument(what + ": " + names[b] + " has " + std::to_string(branches[b]->outputs.size()) +
                               " outputs, the node " + std::to_string(node.outputs.size()));
    }
    // The guards each branch adds (apart from the entry's own If assumptions, which hold for
    // every call the entry takes): one that both branches need is kept once, for the prologue;
    // one that only one branch needs is checked when that branch runs (below).
    std::vector<ir::Guard> added[2];
    const size_t dims = trace_.runtime_dims.size(), first_branch_node = out.size();
    std::vector<ir::ValueId> results[2];
    for (int b = 0; b < 2; ++b) {
      const size_t guards = guards_.size(), meta_guards = trace_.guards.size();
      when_.push_back({cond_id, b == 0});
      Status st = Run(*branches[b], out);
      when_.pop_back();
      KILN_RETURN_IF_ERROR(st);
      if (undecided_) return Status::Ok();
      for (ir::ValueId o : branches[b]->outputs) {
        results[b].push_back(Map(o));
        KILN_RETURN_IF_ERROR(Usable(results[b].back(), what + "'s " + names[b]));
      }
      // Taken out while the other branch runs, so that it records the guards it needs itself
      // (meta::AddGuard records a guard once); put back below.
      added[b].assign(guards_.begin() + static_cast<std::ptrdiff_t>(guards), guards_.end());
      added[b].insert(added[b].end(), trace_.guards.begin() + static_cast<std::ptrdiff_t>(meta_guards),
                      trace_.guards.end());
      guards_.resize(guards);
      trace_.guards.resize(meta_guards);
    }
    // A run-time dim set inside a branch (a NonZero there) is set only when the branch runs,
    // and a guard that reads one is checked when it is set (Entry.runtime_guards): such a
    // guard is the branch's own.
    const size_t branch_dims = trace_.runtime_dims.size();
    auto own = [&](const ir::Guard& g) {
      for (const std::string& v : g.condition.Vars())
        for (size_t d = dims; d < branch_dims; ++d)
          if (trace_.runtime_dims[d].symbol == v) return true;
      return false;
    };
    // A shape guard that only one branch needs is checked only when that branch runs: it is
    // rewritten to read a run-time dim that records the branch, `taken` (the count of
    // NonZero(condition): 1 when it holds, else 0), which an instruction before both branches
    // sets, and to hold when its branch does not run.
    std::optional<ir::Sym> taken;
    auto lone = [&](const ir::Guard& g, int b) -> Result<ir::Guard> {
      if (!taken) {
        ir::Node nz;
        nz.op = "NonZero";
        nz.name = node.name + "_taken";
        nz.inputs = {cond_id};
        ir::Value v;
        v.name = trace_.value(cond_id).name + "_taken";
        nz.outputs = {trace_.AddValue(std::move(v))};
        const ir::ValueId id = nz.outputs[0];
        std::vector<ir::Node> made;
        KILN_RETURN_IF_ERROR(Process(std::move(nz), made));
        out.insert(out.begin() + static_cast<std::ptrdiff_t>(first_branch_node), std::make_move_iterator(made.begin()),
                   std::make_move_iterator(made.end()));
        taken = trace_.value(Map(id)).shape.at(1);
      }
      const ir::Sym not_run = b == 0 ? ir::Sym(1) - *taken : *taken;
      const ir::Sym& c = g.condition;  // holds when not 0; a comparison is 1 or 0
      const ir::Sym holds = c.op() == ir::SymOp::kEq || c.op() == ir::SymOp::kLt ? c : ir::Sym(1) - ir::Eq(c, 0);
      return ir::Guard{ir::Lt(0, holds + not_run),
                       g.origin + ", in " + names[b] + ", checked when it runs"};
    };
    for (int b = 0; b < 2; ++b)
      for (const ir::Guard& g : added[b]) {
        bool both = false;
        for (const ir::Guard& h : added[1 - b]) both = both || h.condition.Same(g.condition);
        if (own(g) || (both && b == 0)) guards_.push_back(g);  // a guard both branches need: once
        else if (!both) {
          KILN_ASSIGN_OR_RETURN(ir::Guard checked, lone(g, b));
          guards_.push_back(std::move(checked));
        }
      }
    // Where takes the condition as a scalar, so that it broadcasts to any output.
    ir::ValueId scalar = cond_id;
    if (!cond_is_scalar) {
      ir::Node reshape;
      reshape.op = "Reshape";
      reshape.name = node.name + "_cond_scalar";
      reshape.inputs = {cond_id, Constant(node.name + "_cond_shape", DType::kInt64, {0}, {})};
      ir::Value v;
      v.name = trace_.value(cond_id).name + "_scalar";
      reshape.outputs = {trace_.AddValue(std::move(v))};
      scalar = reshape.outputs[0];
      KILN_RETURN_IF_ERROR(Process(std::move(reshape), out));
      scalar = Map(scalar);
    }
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      if (node.outputs[i] == ir::kNoValue) continue;
      const ir::ValueId a = results[0][i], b = results[1][i];
      if (a == b) {
        SetMap(node.outputs[i], a);
        continue;
      }
      const ir::Value &va = trace_.value(a), &vb = trace_.value(b);
      if (va.dtype != vb.dtype)
        return InvalidArgument(what + ": output " + std::to_string(i) + " is " + std::string(DTypeName(va.dtype)) +
                               " in then_branch and " + std::string(DTypeName(vb.dtype)) + " in else_branch");
      // The dims in which the branches' shapes differ, compared as written: (A+A) and (A*2)
      // differ (Sym has no canonical form for them).
      std::vector<int> differ;
      if (va.shape.size() == vb.shape.size())
        for (size_t d = 0; d < va.shape.size(); ++d)
          if (!va.shape[d].Same(vb.shape[d])) differ.push_back(static_cast<int>(d));
      if (va.shape.size() != vb.shape.size() || differ.size() > 1) {
        unmerged_[node.outputs[i]] = what + ": output " + std::to_string(i) + " has shape " + ir::ShapeToString(va.shape) +
                                     " in then_branch and " + ir::ShapeToString(vb.shape) +
                                     " in else_branch; a run-time If carries outputs whose shapes differ in one dim at most";
        continue;
      }
      // One shape: Where. Shapes that differ in one dim: kiln.IfOutput, whose dim there is a
      // run-time dim, set to the size of the branch that ran.
      ir::Node merge;
      merge.op = differ.empty() ? "Where" : "kiln.IfOutput";
      merge.name = node.name + "_output_" + std::to_string(i);
      merge.inputs = {scalar, a, b};
      merge.outputs = {node.outputs[i]};
      if (!differ.empty()) merge.attrs.SetInt("axis", differ[0]);
      KILN_RETURN_IF_ERROR(Process(std::move(merge), out));
    }
    return Status::Ok();
  }

  ir::Trace& trace_;
  const std::vector<Assumption>& assumptions_;
  const CanonicalizeOptions& options_;
  std::vector<ir::Predicate> when_;  // inside a run-time If's branches: their conditions, outermost first
  std::vector<ir::ValueId> remap_;
  std::string iteration_;  // inside an unrolled body: "3", or "3.1" in a nested one; else ""
  std::optional<ir::Sym> undecided_;
  std::vector<ir::Guard> guards_;        // the checks of output extents (CheckOutputDims)
  std::vector<ir::Guard> entry_guards_;  // the If assumptions this entry was compiled for
  // Run-time If outputs it could not carry (shapes that differ in rank or in two dims), with
  // the reason, refused when something reads them.
  std::unordered_map<ir::ValueId, std::string> unmerged_;
  std::unordered_map<ir::ValueId, ir::ValueId> cast_from_int_;  // a float Cast's output -> its integer input
};

// Keeps only the values the trace refers to, renumbered in order of first use.
void Compact(ir::Trace& trace) {
  std::vector<ir::ValueId> renum(trace.values.size(), ir::kNoValue);
  std::vector<ir::Value> kept;
  auto use = [&](ir::ValueId& id) {
    if (id == ir::kNoValue) return;
    if (renum[id] == ir::kNoValue) {
      renum[id] = static_cast<ir::ValueId>(kept.size());
      kept.push_back(trace.values[id]);
    }
    id = renum[id];
  };
  for (ir::ValueId& id : trace.inputs) use(id);
  for (ir::Node& n : trace.body.nodes) {
    for (ir::ValueId& id : n.inputs) use(id);
    for (ir::Predicate& p : n.when) use(p.cond);
    for (ir::ValueId& id : n.outputs) use(id);
  }
  for (ir::ValueId& id : trace.outputs) use(id);
  trace.values = std::move(kept);
}

// Folding an Identity or inlining an If can leave a model output pointing at a value with
// another name (an input, a branch value). Outputs keep the model's names: an intermediate
// is renamed; an input or an output listed twice gets an Identity copy.
void KeepOutputNames(const ir::Trace& imported, ir::Trace& trace) {
  for (size_t i = 0; i < trace.outputs.size(); ++i) {
    const std::string& want = imported.value(imported.outputs[i]).name;
    ir::ValueId id = trace.outputs[i];
    if (trace.value(id).name == want) continue;
    bool is_input = std::find(trace.inputs.begin(), trace.inputs.end(), id) != trace.inputs.end();
    bool repeated = std::count(trace.outputs.begin(), trace.outputs.end(), id) > 1;
    if (!is_input && !repeated) {
      trace.value(id).name = want;
      continue;
    }
    ir::Value copy = trace.value(id);
    copy.name = want;
    copy.data = nullptr;
    copy.sym.reset();
    ir::Node node;
    node.op = "Identity";
    node.name = "output_" + want;
    node.inputs = {id};
    node.outputs = {trace.AddValue(std::move(copy))};
    trace.outputs[i] = node.outputs[0];
    trace.body.nodes.push_back(std::move(node));
  }
}

}  // namespace

namespace {

void AddVars(const ir::Sym& s, std::unordered_set<std::string>& to) {
  for (const std::string& v : s.Vars()) to.insert(v);
}

// The symbols that every guard, and the shape or symbolic elements of every value but
// `node`'s outputs, read.
std::unordered_set<std::string> ReadElsewhere(const ir::Trace& trace, const ir::Node& node) {
  std::unordered_set<std::string> read;
  for (const ir::Guard& g : trace.guards) AddVars(g.condition, read);
  for (size_t id = 0; id < trace.values.size(); ++id) {
    if (std::find(node.outputs.begin(), node.outputs.end(), static_cast<ir::ValueId>(id)) != node.outputs.end())
      continue;
    const ir::Value& v = trace.values[id];
    for (const ir::Sym& d : v.shape) AddVars(d, read);
    if (v.sym)
      for (const ir::Sym& e : *v.sym) AddVars(e, read);
  }
  return read;
}

// True when `node` sets a run-time dim (ir::RuntimeDimsSetBy: NonZero's count) that a guard
// or another value reads. Such a node stays even when
// nothing reads its data, since a shape may read its count (Shape or Size of its output,
// folded to the dim itself); one whose count nothing reads (the branch a run-time If takes,
// once the profile's ranges decide the guard that read it) goes.
bool SetsReadRuntimeDim(const ir::Trace& trace, const ir::Node& node) {
  const std::vector<std::string> made = ir::RuntimeDimsSetBy(trace, node);
  if (made.empty()) return false;
  const std::unordered_set<std::string> read = ReadElsewhere(trace, node);
  for (const std::string& v : made)
    if (read.count(v)) return true;
  return false;
}

}  // namespace

void EliminateDeadCode(ir::Trace& trace) {
  std::unordered_set<ir::ValueId> live(trace.outputs.begin(), trace.outputs.end());
  std::vector<ir::Node> kept;
  for (auto it = trace.body.nodes.rbegin(); it != trace.body.nodes.rend(); ++it) {
    bool used = SetsReadRuntimeDim(trace, *it);
    for (ir::ValueId id : it->outputs) used = used || (id != ir::kNoValue && live.count(id));
    if (!used) continue;
    // Outputs nobody reads become absent, so the plan gives them no memory... except that
    // kernels may still need somewhere to write; keep them.
    for (ir::ValueId id : it->inputs)
      if (id != ir::kNoValue) live.insert(id);
    for (const ir::Predicate& p : it->when) live.insert(p.cond);
    kept.push_back(std::move(*it));
  }
  trace.body.nodes.assign(std::make_move_iterator(kept.rbegin()), std::make_move_iterator(kept.rend()));
  Compact(trace);
  // The run-time dims of removed nodes, which no value has any more.
  const std::unordered_set<std::string> read = ReadElsewhere(trace, ir::Node{});
  std::erase_if(trace.runtime_dims, [&](const ir::RuntimeDim& d) { return !read.count(d.symbol); });
}

Result<CanonicalizeResult> Canonicalize(const ir::Trace& imported, const std::vector<Assumption>& assumptions,
                                        const CanonicalizeOptions& options) {
  CanonicalizeResult result;
  ir::Trace& trace = result.trace;
  trace = imported;
  trace.stage = "canonical";
  trace.provenance =
      "shape inference, constant and shape folding, If resolution, BatchNormalization folded into Conv, "
      "dead-code elimination";
  trace.body = ir::Block{};
  Canonicalizer canon(trace, assumptions, options);
  KILN_RETURN_IF_ERROR(canon.Run(imported.body, trace.body.nodes));
  if (canon.undecided()) {
    result.undecided_condition = canon.undecided();
    return result;
  }
  for (ir::ValueId& id : trace.outputs) {
    id = canon.Map(id);
    KILN_RETURN_IF_ERROR(canon.Usable(id, "model output '" + trace.value(id).name + "'"));
  }
  KeepOutputNames(imported, trace);
  // The meta functions appended their guards to trace.guards while inferring; add the
  // If assumptions and output-extent checks, and drop repeats.
  // If assumptions come first: they are why the entry exists.
  std::vector<ir::Guard> guards = canon.TakeGuards();
  for (ir::Guard& g : trace.guards) guards.push_back(std::move(g));
  trace.guards.clear();
  for (ir::Guard& g : guards) {
    if (g.condition.is_const() && *g.condition.value() != 0) continue;
    if (g.condition.is_const())
      return InvalidArgument("the model's shapes contradict each other: " + g.origin +
                             " needs a condition that can never hold");
    bool seen = false;
    for (const ir::Guard& k : trace.guards) seen = seen || k.condition.Same(g.condition);
    if (!seen) trace.guards.push_back(std::move(g));
  }
  FoldBatchNormIntoConv(trace);
  EliminateDeadCode(trace);
  return result;
}

}  // namespace kiln::passes
