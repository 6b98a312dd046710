#include "compiler/ops/registry.h"

#include <cmath>

#include <algorithm>
#include <string>

#include "compiler/ops/families.h"
#include "compiler/ops/meta_util.h"

namespace kiln::ir {
namespace {

struct Table {
  std::vector<OpDef> ops;  // sorted by name, names unique
};

const Table& GetTable() {
  static const Table table = [] {
    Table t;
    RegisterElementwiseOps(t.ops);
    RegisterMatMulOps(t.ops);
    RegisterConvOps(t.ops);
    RegisterPoolOps(t.ops);
    RegisterNormOps(t.ops);
    RegisterReduceOps(t.ops);
    RegisterShapeOps(t.ops);
    RegisterDataMovementOps(t.ops);
    RegisterRnnOps(t.ops);
    RegisterTransformerOps(t.ops);
    RegisterCumulativeOps(t.ops);
    RegisterBitCastOps(t.ops);
    RegisterTensorScatterOps(t.ops);
    RegisterCausalConvOps(t.ops);
    RegisterQuantizeOps(t.ops);
    RegisterGridSampleOps(t.ops);
    RegisterSignalOps(t.ops);
    RegisterMathOps(t.ops);
    RegisterMatrixOps(t.ops);
    RegisterScatterOps(t.ops);
    RegisterTopKOps(t.ops);
    RegisterVisionOps(t.ops);
    RegisterFeatureNormOps(t.ops);
    RegisterEinsumOps(t.ops);
    RegisterCenterCropPadOps(t.ops);
    RegisterSelectionOps(t.ops);
    RegisterLoopOps(t.ops);
    RegisterReverseSequenceOps(t.ops);
    // Sorted for lookup; on a duplicate name the first registration wins.
    std::stable_sort(t.ops.begin(), t.ops.end(),
                     [](const OpDef& a, const OpDef& b) { return a.name < b.name; });
    t.ops.erase(std::unique(t.ops.begin(), t.ops.end(),
                            [](const OpDef& a, const OpDef& b) { return a.name == b.name; }),
                t.ops.end());
    return t;
  }();
  return table;
}

}  // namespace

const OpDef* FindOp(std::string_view name) {
  const auto& ops = GetTable().ops;
  auto it = std::lower_bound(ops.begin(), ops.end(), name,
                             [](const OpDef& d, std::string_view n) { return d.name < n; });
  return it != ops.end() && it->name == name ? &*it : nullptr;
}

std::vector<const OpDef*> AllOps() {
  std::vector<const OpDef*> out;
  for (const OpDef& d : GetTable().ops) out.push_back(&d);
  return out;
}

// Attributes whose meaning is the same for every op that has them, checked here once:
// ONNX flags are 0 or 1, and an epsilon is a finite, non-negative number.
Status CheckCommonAttrs(const AttrMap& attrs) {
  static const char* const kFlags[] = {
      "keepdims", "noop_with_empty_axes", "select_last_index", "transA",   "transB",
      "ceil_mode", "count_include_pad",   "coerce_2d",         "allowzero", "input_forget",
      "storage_order", "fmod",            "exclusive",         "reverse",  "largest",
      "sorted",   "upper",                "exclude_outside",   "antialias"};
  for (const char* name : kFlags) {
    const Attr* a = attrs.Find(name);
    if (a && (a->kind != Attr::Kind::kInt || (a->i != 0 && a->i != 1)))
      return InvalidArgument(std::string("attribute '") + name + "': expected 0 or 1, found " +
                             (a->kind == Attr::Kind::kInt ? std::to_string(a->i) : "a non-integer"));
  }
  if (const Attr* e = attrs.Find("epsilon"); e && (e->kind != Attr::Kind::kFloat || !(e->f >= 0.0f) || std::isinf(e->f)))
    return InvalidArgument("attribute 'epsilon': expected a finite number >= 0, found " +
                           (e->kind == Attr::Kind::kFloat ? meta::FloatStr(e->f) : std::string("a non-float")));
  return Status::Ok();
}

Status InferNode(Trace& trace, Node& node) {
  const std::string context = "node '" + node.name + "' (" + node.op + ")";
  const OpDef* def = FindOp(node.op);
  if (!def)
    return Unimplemented("no op '" + node.op + "' in the registry (" +
                         std::to_string(GetTable().ops.size()) + " ops known)")
        .WithContext(context);
  KILN_RETURN_IF_ERROR_CTX(CheckCommonAttrs(node.attrs), context);
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    ValueId id = node.inputs[i];
    if (id == kNoValue) continue;
    if (id < 0 || static_cast<size_t>(id) >= trace.values.size())
      return Internal("input " + std::to_string(i) + " refers to value " + std::to_string(id) +
                      ", outside the value table (" + std::to_string(trace.values.size()) + ")")
          .WithContext(context);
    if (trace.value(id).dtype == DType::kUndefined)
      return Internal("input " + std::to_string(i) + " ('" + trace.value(id).name +
                      "') has no dtype yet; its producer must be inferred first")
          .WithContext(context);
  }
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    ValueId id = node.outputs[i];
    if (id == kNoValue) continue;
    if (id < 0 || static_cast<size_t>(id) >= trace.values.size())
      return Internal("output " + std::to_string(i) + " refers to value " + std::to_string(id) +
                      ", outside the value table (" + std::to_string(trace.values.size()) + ")")
          .WithContext(context);
    // The meta function decides the elements afresh.
    trace.value(id).sym.reset();
  }
  MetaContext ctx(trace, node);
  Status s = def->meta(ctx);
  if (!s.ok()) return s.WithContext(context);
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    ValueId id = node.outputs[i];
    if (id != kNoValue && trace.value(id).dtype == DType::kUndefined)
      return Internal("meta function left output " + std::to_string(i) + " without a dtype")
          .WithContext(context);
  }
  return Status::Ok();
}

}  // namespace kiln::ir
