// The op-version table: see op_versions.h.
//
// Sources: ONNX's docs/Changelog.md and the op schemas (onnx.defs.get_all_schemas_with_history)
// of the onnx wheel the conformance suite comes from. The table covers
//  - every op that got a new version in opsets 25, 26 and 27 (kMaxOpset = 27), and
//  - every op Kiln registers whose version below opset 7 differs from its opset-7 form
//    beyond what the importer handles for all ops (the `consumed_inputs` memory hint, a
//    no-op, and the legacy `broadcast` flag, which numpy broadcasting subsumes, are dropped).
// An op absent here runs the same at every opset Kiln accepts, up to what importer.cc's
// Rewrite handles (Slice < 10, Reduce* < 18, Pad < 11, ...).
// Adding a version: add its row in order; the unit test checks order and uniqueness.
#include "compiler/onnx/op_versions.h"

#include <algorithm>
#include <iterator>

namespace kiln::onnx_import {
namespace {

using enum VersionSupport;

constexpr std::string_view kLegacyBroadcast =
    "legacy broadcasting aligned at 'axis' is not implemented (Kiln broadcasts as numpy, "
    "the opset-7 form)";
constexpr std::string_view kNumpyBroadcast = "numpy broadcasting, the form Kiln implements";
constexpr std::string_view kInt2 = "adds int2/uint2 only; Kiln rejects those element types";

constexpr OpVersion kTable[] = {
    {"Add", 1, kRefusedIfAttr, kLegacyBroadcast, "axis"},
    {"Add", 7, kSame, kNumpyBroadcast},
    {"And", 1, kRefusedIfAttr, kLegacyBroadcast, "axis"},
    {"And", 7, kSame, kNumpyBroadcast},
    // Kiln has no Attention kernel yet; these rows keep a future one from ignoring windows.
    {"Attention", 25, kRefusedIfAttr, "sliding-window masks are not implemented", "left_window_size", -1},
    {"Attention", 25, kRefusedIfAttr, "sliding-window masks are not implemented", "right_window_size", -1},
    {"BitCast", 26, kSame, "new op: the version Kiln implements"},
    {"Cast", 1, kRewritten, "'to' as a type name ('FLOAT') becomes the dtype number"},
    {"Cast", 6, kSame, "'to' as a dtype number"},
    {"Cast", 25, kSame, kInt2},
    {"CastLike", 25, kSame, kInt2},
    {"CausalConvWithState", 27, kSame, "new op: the version Kiln implements"},
    {"Concat", 1, kRewritten, "an absent 'axis' becomes the old default 1"},
    {"Concat", 4, kSame, "'axis' required"},
    {"Constant", 25, kSame, kInt2},
    {"ConstantOfShape", 25, kSame, kInt2},
    {"CumProd", 26, kSame, "new op: the version Kiln implements"},
    {"DequantizeLinear", 25, kSame, kInt2},
    {"Div", 1, kRefusedIfAttr, kLegacyBroadcast, "axis"},
    {"Div", 7, kSame, kNumpyBroadcast},
    {"Equal", 1, kRefusedIfAttr, kLegacyBroadcast, "axis"},
    {"Equal", 7, kSame, kNumpyBroadcast},
    {"Flatten", 25, kSame, kInt2},
    {"GlobalLpPool", 1, kRefused, "a float 'p' (GlobalLpPool-1) is not implemented; Kiln implements "
                                  "GlobalLpPool-2's integer 'p'"},
    {"GlobalLpPool", 2, kSame, "integer 'p'"},
    {"Greater", 1, kRefusedIfAttr, kLegacyBroadcast, "axis"},
    {"Greater", 7, kSame, kNumpyBroadcast},
    {"Identity", 25, kSame, kInt2},
    {"If", 25, kSame, kInt2},
    {"Less", 1, kRefusedIfAttr, kLegacyBroadcast, "axis"},
    {"Less", 7, kSame, kNumpyBroadcast},
    {"LinearAttention", 27, kSame, "new op: the version Kiln implements"},
    {"Loop", 25, kSame, kInt2},
    {"LpPool", 1, kRefused, "a float 'p' (LpPool-1) is not implemented; Kiln implements LpPool-2's integer 'p'"},
    {"LpPool", 2, kSame, "integer 'p'"},
    {"Mul", 1, kRefusedIfAttr, kLegacyBroadcast, "axis"},
    {"Mul", 7, kSame, kNumpyBroadcast},
    {"Or", 1, kRefusedIfAttr, kLegacyBroadcast, "axis"},
    {"Or", 7, kSame, kNumpyBroadcast},
    {"Pad", 25, kSame, kInt2},
    {"Pow", 1, kRefusedIfAttr, kLegacyBroadcast, "axis"},
    {"Pow", 7, kSame, kNumpyBroadcast},
    {"QuantizeLinear", 25, kSame, kInt2},
    {"Range", 27, kSame, "adds float16/bfloat16 with 'stash_type' (their accumulation type); Kiln's Range "
                         "rejects those element types, and 'stash_type' changes nothing for the others"},
    {"Reshape", 1, kRewritten, "the 'shape' attribute becomes input 1"},
    {"Reshape", 5, kSame, "'shape' as an input"},
    {"Reshape", 25, kSame, kInt2},
    {"Scan", 25, kSame, kInt2},
    {"Shape", 25, kSame, kInt2},
    {"Size", 25, kSame, kInt2},
    {"Squeeze", 25, kSame, kInt2},
    {"Sub", 1, kRefusedIfAttr, kLegacyBroadcast, "axis"},
    {"Sub", 7, kSame, kNumpyBroadcast},
    {"Tile", 1, kRefused, "Tile-1's (tiles, axis) inputs are not implemented; Kiln implements Tile-6's "
                          "per-axis 'repeats'"},
    {"Tile", 6, kSame, "per-axis 'repeats'"},
    {"Transpose", 25, kSame, kInt2},
    {"Unsqueeze", 25, kSame, kInt2},
    {"Xor", 1, kRefusedIfAttr, kLegacyBroadcast, "axis"},
    {"Xor", 7, kSame, kNumpyBroadcast},
};

}  // namespace

std::span<const OpVersion> OpVersionTable() { return kTable; }

std::span<const OpVersion> OpVersionRows(std::string_view op, int64_t opset) {
  const OpVersion* lo = std::lower_bound(std::begin(kTable), std::end(kTable), op,
                                         [](const OpVersion& r, std::string_view o) { return r.op < o; });
  // The op's rows are in since order: the last group with since <= opset is in effect.
  const OpVersion* end = lo;
  while (end != std::end(kTable) && end->op == op && end->since <= opset) ++end;
  if (end == lo) return {};
  const OpVersion* begin = end - 1;
  while (begin != lo && (begin - 1)->since == begin->since) --begin;
  return {begin, end};
}

Status CheckOpVersion(std::string_view op, int64_t opset, const AttrMap& attrs, const std::string& where) {
  for (const OpVersion& row : OpVersionRows(op, opset)) {
    const std::string version = std::string(op) + "-" + std::to_string(row.since) + " (opset " +
                                std::to_string(opset) + ")";
    if (row.support == kRefused)
      return Unimplemented(where + ": " + version + ": " + std::string(row.note));
    if (row.support != kRefusedIfAttr) continue;
    const Attr* a = attrs.Find(row.attr);
    if (!a || (row.allowed && a->kind == Attr::Kind::kInt && a->i == *row.allowed)) continue;
    const std::string value = a->kind == Attr::Kind::kInt ? " = " + std::to_string(a->i) : "";
    return Unimplemented(where + ": " + version + " with attribute '" + std::string(row.attr) + "'" + value +
                         ": " + std::string(row.note));
  }
  return Status::Ok();
}

}  // namespace kiln::onnx_import
