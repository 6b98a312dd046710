// The canonical stage's walk over any node (canonicalizer.h): inputs mapped, shapes inferred,
// constants folded, Identity forwarded, onnxruntime's shaped com.microsoft ops written as ONNX
// ops (contrib_ops.h), and the checks every output dim gets.
#include "compiler/passes/canonicalizer.h"

#include <algorithm>
#include <cmath>

#include "compiler/ops/meta_util.h"
#include "compiler/ops/registry.h"
#include "compiler/passes/constant_fold.h"
#include "compiler/passes/contrib_ops.h"

namespace kiln::passes {

Status Canonicalizer::Run(const ir::Block& block, std::vector<ir::Node>& out) {
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

Status Canonicalizer::Dispatch(ir::Node& node, std::vector<ir::Node>& out) {
  if (node.op == "If") return InlineIf(node, out);
  if (node.op == "Loop") return UnrollLoop(node, out);
  if (node.op == "Scan") return UnrollScan(node, out);
  if (node.op.starts_with(kContribPrefix)) {  // written as ONNX ops now that its inputs' shapes are known
    KILN_ASSIGN_OR_RETURN(std::vector<ir::Node> nodes, ExpandContribOp(trace_, node));
    for (ir::Node& n : nodes) KILN_RETURN_IF_ERROR(Dispatch(n, out));
    return Status::Ok();
  }
  if (node.op == "Range") {
    KILN_ASSIGN_OR_RETURN(bool rewritten, RangeOverIntegers(node, out));
    if (rewritten) return Status::Ok();
  }
  return Process(std::move(node), out);
}

void Canonicalizer::SetMap(ir::ValueId id, ir::ValueId to) {
  while (remap_.size() <= static_cast<size_t>(id)) remap_.push_back(static_cast<ir::ValueId>(remap_.size()));
  remap_[id] = to;
}

ir::ValueId Canonicalizer::Fresh(ir::ValueId id) {
  ir::Value v;
  v.name = trace_.value(id).name + "@" + iteration_;
  v.dtype = trace_.value(id).dtype;
  return trace_.AddValue(std::move(v));
}

ir::ValueId Canonicalizer::NewValue(std::string name) {
  ir::Value v;
  v.name = std::move(name);
  return trace_.AddValue(std::move(v));
}

ir::ValueId Canonicalizer::ScalarConstant(const std::string& name, DType dtype, int64_t value) {
  return Constant(name, dtype, {}, {value});
}

ir::ValueId Canonicalizer::Constant(const std::string& name, DType dtype, ir::SymShape shape,
                                    const std::vector<int64_t>& elements) {
  ir::Value c{name, dtype, std::move(shape), nullptr, std::vector<ir::Sym>(elements.begin(), elements.end())};
  MaterializeKnownElements(c);
  c.sym.reset();
  return trace_.AddValue(std::move(c));
}

std::optional<int64_t> Canonicalizer::KnownScalar(ir::ValueId id) const {
  if (id == ir::kNoValue) return std::nullopt;
  const ir::Value& v = trace_.value(id);
  if (v.is_const() && v.data->num_elements() == 1) return v.data->IntAt(0);
  if (v.sym && v.sym->size() == 1 && (*v.sym)[0].is_const()) return *(*v.sym)[0].value();
  return std::nullopt;
}

Status Canonicalizer::Process(ir::Node node, std::vector<ir::Node>& out) {
  KILN_RETURN_IF_ERROR(ir::InferNode(trace_, node));
  KILN_RETURN_IF_ERROR(CheckOutputDims(node));
  if (node.op == "Cast" && node.inputs.size() == 1 && node.outputs.size() == 1 && node.inputs[0] != ir::kNoValue) {
    // uint64 is left out: its upper half would turn negative as the int64 Range's operand.
    const DType from = trace_.value(node.inputs[0]).dtype;
    if (ir::meta::IsInteger(from) && from != DType::kUInt64 && ir::meta::IsFloat(trace_.value(node.outputs[0]).dtype))
      cast_from_int_[node.outputs[0]] = node.inputs[0];
  }
  // Ops that return their first input unchanged are Identities: a Cast or CastLike to the dtype
  // it has already (an exporter's `weights.type(value.dtype)` in float32), and a Concat of one
  // tensor (the past key of a decoder's first layer, as transformers' DynamicCache exports it).
  // A float16 or bfloat16 Cast to its own dtype stays: a fused region computes in float32, and
  // the Cast is where it rounds to the half type, as the graph op by op does.
  const DType cast_to = node.outputs.empty() || node.outputs[0] == ir::kNoValue ? DType::kUndefined
                                                                                : trace_.value(node.outputs[0]).dtype;
  const bool unchanged =
      node.outputs.size() == 1 && !node.inputs.empty() && node.inputs[0] != ir::kNoValue &&
      ((node.op == "Identity" && node.inputs.size() == 1) || (node.op == "Concat" && node.inputs.size() == 1) ||
       ((node.op == "Cast" || node.op == "CastLike") && trace_.value(node.inputs[0]).dtype == cast_to &&
        cast_to != DType::kFloat16 && cast_to != DType::kBFloat16));
  if (unchanged) {
    SetMap(node.outputs[0], node.inputs[0]);
    return Status::Ok();
  }
  if (!NeedsInstruction(node)) return Status::Ok();
  // A DequantizeLinear of a constant (a quantized weight) stays for the fusion stage, which
  // folds it into an integer op or else into a float constant (passes/qdq.h).
  if (CanFold(trace_, node) && node.op != "DequantizeLinear") return FoldNode(trace_, node);
  node.when = when_;
  out.push_back(std::move(node));
  return Status::Ok();
}

Status Canonicalizer::Emit(ir::Node node, std::vector<ir::Node>& out) {
  KILN_RETURN_IF_ERROR(ir::InferNode(trace_, node));
  KILN_RETURN_IF_ERROR(CheckOutputDims(node));
  node.when = when_;
  out.push_back(std::move(node));
  return Status::Ok();
}

Result<bool> Canonicalizer::RangeOverIntegers(const ir::Node& node, std::vector<ir::Node>& out) {
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

bool Canonicalizer::NeedsInstruction(const ir::Node& node) {
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

ir::Sym Canonicalizer::Derive(const ir::Sym& s, const std::string& name) {
  if (s.tree_size() <= kDeriveAbove || s.Vars().empty()) return s;
  for (const ir::Sym& d : derived_)
    if (d.definition().Same(s)) return d;
  // Unique among the derived symbols and the inputs' symbols, which the artifact's expression
  // table tells apart by name.
  auto taken = [&](const std::string& n) {
    for (const ir::Sym& d : derived_)
      if (d.name() == n) return true;
    for (ir::ValueId in : trace_.inputs)
      for (const ir::Sym& dim : trace_.value(in).shape)
        if (dim.op() == ir::SymOp::kVar && dim.name() == n) return true;
    return false;
  };
  std::string unique = name;
  for (int k = 2; taken(unique); ++k) unique = name + "#" + std::to_string(k);
  derived_.push_back(ir::Sym::Derived(unique, s));
  return derived_.back();
}

Status Canonicalizer::CheckOutputDims(const ir::Node& node) {
  for (ir::ValueId id : node.outputs) {
    if (id == ir::kNoValue) continue;
    ir::Value& v = trace_.value(id);
    for (size_t d = 0; d < v.shape.size(); ++d) v.shape[d] = Derive(v.shape[d], v.name + ".dim" + std::to_string(d));
    if (v.sym)
      for (size_t i = 0; i < v.sym->size(); ++i)
        (*v.sym)[i] = Derive((*v.sym)[i], v.name + ".element" + std::to_string(i));
    // Checked after every node, so no definition grows past twice the limit before it is refused
    // (one node's meta function may still build a large expression from small ones).
    auto too_big = [&](const char* what, size_t i, const ir::Sym& s) -> std::optional<Status> {
      const int64_t size = s.is_derived() ? s.definition().tree_size() : s.tree_size();
      if (size <= kMaxSymTreeSize) return std::nullopt;
      return ResourceExhausted("node '" + node.name + "' (" + node.op + "): output '" + v.name + "' " + what + " " +
                               std::to_string(i) + " is a symbolic expression of " + std::to_string(size) +
                               " terms, over the limit of " + std::to_string(kMaxSymTreeSize));
    };
    for (size_t d = 0; d < v.shape.size(); ++d)
      if (auto e = too_big("dim", d, v.shape[d])) return *e;
    if (v.sym)
      for (size_t i = 0; i < v.sym->size(); ++i)
        if (auto e = too_big("element", i, (*v.sym)[i])) return *e;
    for (size_t d = 0; d < v.shape.size(); ++d) {
      const ir::Sym& dim = v.shape[d];
      if (dim.lo() >= 1) continue;
      if (dim.Vars().empty()) {
        if (dim.value() && *dim.value() == 0) continue;  // an empty tensor: every op and kernel accepts it
        return InvalidArgument("node '" + node.name + "' (" + node.op + "): output '" + v.name + "' dim " +
                               std::to_string(d) + " is " + dim.ToString() + " (negative or overflowing int64)");
      }
      // A size may be 0 at run time: an empty tensor, as ONNX allows (a Slice past the end of a
      // symbolic dim, max(0, W - min(5, W)); NonZero's count; a Split size or Reshape dim read
      // from a value input). One that is not provably >= 0 is guarded so. Ops that need more
      // guard it themselves (a window op's extent, meta::WindowOutput), and then this one is implied.
      if (dim.lo() >= 0) continue;
      const ir::Sym positive = ir::Lt(0, dim);
      if (std::any_of(trace_.guards.begin(), trace_.guards.end(),
                      [&](const ir::Guard& g) { return g.condition.Same(positive); }))
        continue;
      guards_.push_back({ir::Lt(-1, dim), "node '" + node.name + "' (" + node.op + "), whose output '" + v.name +
                                              "' dim " + std::to_string(d) + " must be >= 0"});
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

}  // namespace kiln::passes
