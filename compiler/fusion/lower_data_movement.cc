// Lowerings of the data-movement ops. Each is an index map: from the coordinates of an
// output element it computes the coordinates of the input element that element copies
// (Resize linear: of the few elements it interpolates) and asks ctx.ValueAt for it.
//
// The formulas follow the CPU kernels (runtime/kernels/data_movement.cc, resize.cc) and the
// parameter forms of the meta functions (compiler/ops/meta_data_movement.cc,
// meta_shape.cc): parameters given as tensors (Slice starts, Pad pads, Resize scales)
// must be known at compile time, as constants or as Sym elements; symbolic dims and Sym
// parameters become size arguments through ProgramBuilder::Dim.
//
// Safety: every coordinate handed to ValueAt is in range for every output element, also
// in branches a Select discards (interpreters and GPUs evaluate both sides). Concat and
// Pad clamp the coordinates of the unselected inputs; Gather and GatherElements check
// their data-dependent indices with kCheckIndex, which reports the node and yields 0.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "compiler/fusion/rules.h"
#include "compiler/ops/meta_util.h"

namespace kiln::fusion {
namespace {

using fused::Op;
using fused::ScalarType;
using ir::Sym;
using ir::SymShape;

using LowerImpl = Result<int32_t> (*)(LowerContext& ctx, const ir::Node& node, int output,
                                      std::span<const int32_t> coords);

// ---- helpers -------------------------------------------------------------------------------

bool IsConstDim(const Sym& d, int64_t v) { return d.is_const() && *d.value() == v; }

// Input i of the node, or nullptr when absent.
const ir::Value* InputOf(const LowerContext& ctx, const ir::Node& node, int i) {
  if (i >= static_cast<int>(node.inputs.size()) || node.inputs[i] == ir::kNoValue) return nullptr;
  return &ctx.trace().value(node.inputs[i]);
}

// An input that holds no elements is an absent optional input (ONNX's empty-tensor form).
const ir::Value* OptionalInputOf(const LowerContext& ctx, const ir::Node& node, int i) {
  const ir::Value* v = InputOf(ctx, node, i);
  if (v && IsConstDim(ir::NumElements(v->shape), 0)) return nullptr;
  return v;
}

int NormAxis(int64_t axis, int rank) { return static_cast<int>(axis < 0 ? axis + rank : axis); }

// A symbolic integer as a kI64 node: a constant, or the size argument holding it.
// (ProgramBuilder::Dim encodes a negative constant as a size argument, so constants that
// may be negative, like Pad's pads, must not go through it.)
int32_t IntNode(ProgramBuilder& b, const Sym& s) { return s.is_const() ? b.ConstI(*s.value()) : b.Dim(s); }

// The last index of a dim, d - 1, sharing d's size argument when d is symbolic.
int32_t LastIndex(ProgramBuilder& b, const Sym& d) { return b.Binary(Op::kSub, IntNode(b, d), b.ConstI(1)); }
// An extent that may be 0 at run time (it reads a run-time dim): its LastIndex may be -1, so a
// coordinate clamped to it takes max(.., 0) after the min.
bool MayBeEmpty(const Sym& d) { return d.lo() < 1; }

// The zero of a dtype's compute type.
int32_t Zero(ProgramBuilder& b, DType dtype) {
  ScalarType t = ScalarType::kF32;
  fused::ComputeTypeOf(dtype, &t);
  return t == ScalarType::kI64 ? b.ConstI(0) : b.ConstF(0.0, t);
}

// Element 0 of a constant, in its compute type.
int32_t ConstScalar(ProgramBuilder& b, const ir::ConstData& data, DType dtype) {
  ScalarType t = ScalarType::kF32;
  fused::ComputeTypeOf(dtype, &t);
  if (data.num_elements() == 0) return Zero(b, dtype);
  return t == ScalarType::kI64 ? b.ConstI(data.IntAt(0)) : b.ConstF(data.FloatAt(0), t);
}

std::string Quoted(const ir::Node& node) { return node.op + " '" + node.name + "'"; }

// Checks the contract every lowering relies on, then runs it: the output exists and the
// coordinates have its rank.
template <LowerImpl F>
Result<int32_t> Checked(LowerContext& ctx, const ir::Node& node, int output,
                        std::span<const int32_t> coords) {
  if (output < 0 || output >= static_cast<int>(node.outputs.size()) || node.outputs[output] == ir::kNoValue) {
    return Internal(Quoted(node) + ": output " + std::to_string(output) + " does not exist");
  }
  if (node.inputs.empty() || node.inputs[0] == ir::kNoValue) {
    return Internal(Quoted(node) + ": input 0 is absent");
  }
  const ir::Value& out = ctx.trace().value(node.outputs[output]);
  if (static_cast<int>(coords.size()) != out.rank()) {
    return Internal(Quoted(node) + ": " + std::to_string(coords.size()) + " coordinates for output " +
                    std::to_string(output) + " of rank " + std::to_string(out.rank()));
  }
  return F(ctx, node, output, coords);
}

// The input coordinates of a row-major view (Reshape, Flatten, Squeeze, Unsqueeze,
// Identity): the element with the same linear index. Dims of 1 are dropped from both
// shapes and the rest split into groups whose sizes match (e.g. [N, 6] -> [N, 2, 3] gives
// the groups N -> N and 6 -> 2x3), so a dim that is kept passes its coordinate through
// and only regrouped dims pay for Ravel/Unravel.
std::vector<int32_t> ViewCoords(ProgramBuilder& b, std::span<const int32_t> coords, const SymShape& out,
                                const SymShape& in) {
  std::vector<int32_t> result(in.size(), b.ConstI(0));
  std::vector<size_t> oi, ii;
  for (size_t k = 0; k < out.size(); ++k)
    if (!IsConstDim(out[k], 1)) oi.push_back(k);
  for (size_t k = 0; k < in.size(); ++k)
    if (!IsConstDim(in[k], 1)) ii.push_back(k);
  size_t i = 0, j = 0;
  while (i < oi.size() || j < ii.size()) {
    const size_t i0 = i, j0 = j;
    Sym po(1), pi(1);
    if (i < oi.size()) po = out[oi[i++]];
    if (j < ii.size()) pi = in[ii[j++]];
    while (!po.Same(pi) && (i < oi.size() || j < ii.size())) {
      if (!po.is_const() || !pi.is_const()) {
        // Sizes that cannot be compared: the rest is one group, which is always right.
        while (i < oi.size()) po = po * out[oi[i++]];
        while (j < ii.size()) pi = pi * in[ii[j++]];
        break;
      }
      const bool grow_out = j == ii.size() || (i < oi.size() && *po.value() < *pi.value());
      if (grow_out)
        po = po * out[oi[i++]];
      else
        pi = pi * in[ii[j++]];
    }
    if (j == j0) continue;  // nothing of the input in this group
    if (i - i0 == 1 && j - j0 == 1) {
      result[ii[j0]] = coords[oi[i0]];
      continue;
    }
    std::vector<int32_t> group_coords;
    SymShape group_out, group_in;
    for (size_t k = i0; k < i; ++k) {
      group_coords.push_back(coords[oi[k]]);
      group_out.push_back(out[oi[k]]);
    }
    for (size_t k = j0; k < j; ++k) group_in.push_back(in[ii[k]]);
    const std::vector<int32_t> c = b.Unravel(b.Ravel(group_coords, group_out), group_in);
    for (size_t k = j0; k < j; ++k) result[ii[k]] = c[k - j0];
  }
  return result;
}

// ---- views --------------------------------------------------------------------------------

Result<int32_t> LowerView(LowerContext& ctx, const ir::Node& node, int output,
                          std::span<const int32_t> coords) {
  if (output != 0) {
    if (node.op == "Dropout" && output == 1) return ctx.builder().ConstI(1);  // inference: the mask is all true
    return Internal(Quoted(node) + " has one output, asked for output " + std::to_string(output));
  }
  const ir::Trace& t = ctx.trace();
  const ir::Value& in = t.value(node.inputs[0]);
  const ir::Value& out = t.value(node.outputs[0]);
  return ctx.ValueAt(node.inputs[0], ViewCoords(ctx.builder(), coords, out.shape, in.shape));
}

// ---- Transpose ----------------------------------------------------------------------------

Result<int32_t> LowerTranspose(LowerContext& ctx, const ir::Node& node, int,
                               std::span<const int32_t> coords) {
  const int r = static_cast<int>(coords.size());
  std::vector<int64_t> perm = node.attrs.GetInts("perm");
  if (!node.attrs.Has("perm"))
    for (int i = r - 1; i >= 0; --i) perm.push_back(i);
  if (static_cast<int>(perm.size()) != r) return InvalidArgument("Transpose perm does not match the rank");
  std::vector<int32_t> in(r, -1);
  for (int i = 0; i < r; ++i) {
    const int p = NormAxis(perm[i], r);
    if (p < 0 || p >= r || in[p] >= 0) return InvalidArgument("Transpose perm is not a permutation");
    in[p] = coords[i];
  }
  return ctx.ValueAt(node.inputs[0], in);
}

// ---- Slice / Split / Concat ---------------------------------------------------------------

Result<int32_t> LowerSlice(LowerContext& ctx, const ir::Node& node, int, std::span<const int32_t> coords) {
  ProgramBuilder& b = ctx.builder();
  const ir::Value& x = ctx.trace().value(node.inputs[0]);
  const ir::Value* starts_v = InputOf(ctx, node, 1);
  if (!starts_v) return InvalidArgument("Slice needs input 1 (starts)");
  auto starts = ir::meta::Elements(*starts_v);
  if (!starts) return Unimplemented("Slice starts '" + starts_v->name + "' are not known at compile time");
  const size_t n = starts->size();
  std::vector<int64_t> axes, steps(n, 1);
  if (const ir::Value* a = InputOf(ctx, node, 3)) {
    auto c = ir::meta::ConstInts(*a);
    if (!c) return Unimplemented("Slice axes '" + a->name + "' are not known at compile time");
    axes = *c;
  } else {
    for (size_t i = 0; i < n; ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (const ir::Value* s = InputOf(ctx, node, 4)) {
    auto c = ir::meta::ConstInts(*s);
    if (!c) return Unimplemented("Slice steps '" + s->name + "' are not known at compile time");
    steps = *c;
  }
  if (axes.size() != n || steps.size() != n)
    return InvalidArgument("Slice starts, axes and steps differ in length");
  std::vector<int32_t> in(coords.begin(), coords.end());
  for (size_t i = 0; i < n; ++i) {
    const int d = NormAxis(axes[i], x.rank());
    if (d < 0 || d >= x.rank() || steps[i] == 0) return InvalidArgument("Slice axis or step out of range");
    KILN_ASSIGN_OR_RETURN(Sym start, ir::meta::SliceBound(x.shape[d], (*starts)[i], steps[i], false));
    in[d] = b.Binary(Op::kAdd, IntNode(b, start), b.Binary(Op::kMul, coords[d], b.ConstI(steps[i])));
  }
  return ctx.ValueAt(node.inputs[0], in);
}

// The sizes of Split's outputs along the axis, as the meta function computes them.
Result<std::vector<Sym>> SplitSizes(LowerContext& ctx, const ir::Node& node, int axis) {
  const ir::Trace& t = ctx.trace();
  const int n = static_cast<int>(node.outputs.size());
  std::vector<Sym> sizes;
  bool all_present = true;
  for (ir::ValueId o : node.outputs) {
    if (o == ir::kNoValue) {
      all_present = false;
      break;
    }
    sizes.push_back(t.value(o).shape[axis]);
  }
  if (all_present) return sizes;
  sizes.clear();
  const Sym& d = t.value(node.inputs[0]).shape[axis];
  if (const ir::Value* s = InputOf(ctx, node, 1)) {
    auto e = ir::meta::Elements(*s);
    if (!e || static_cast<int>(e->size()) != n) {
      return Unimplemented("Split sizes '" + s->name + "' are not known at compile time");
    }
    return *e;
  }
  if (node.attrs.Has("num_outputs")) {
    const Sym chunk = ir::CeilDiv(d, n);
    for (int i = 0; i + 1 < n; ++i) sizes.push_back(chunk);
    sizes.push_back(ir::meta::SubS(d, chunk * Sym(n - 1)));
    return sizes;
  }
  sizes.assign(n, ir::meta::DivExact(d, Sym(n)));
  return sizes;
}

Result<int32_t> LowerSplit(LowerContext& ctx, const ir::Node& node, int output,
                           std::span<const int32_t> coords) {
  ProgramBuilder& b = ctx.builder();
  const ir::Value& x = ctx.trace().value(node.inputs[0]);
  const int axis = NormAxis(node.attrs.GetInt("axis", 0), x.rank());
  if (axis < 0 || axis >= x.rank()) return InvalidArgument("Split axis out of range");
  KILN_ASSIGN_OR_RETURN(std::vector<Sym> sizes, SplitSizes(ctx, node, axis));
  Sym offset(0);
  for (int k = 0; k < output; ++k) offset = ir::meta::AddS(offset, sizes[k]);
  std::vector<int32_t> in(coords.begin(), coords.end());
  in[axis] = b.Binary(Op::kAdd, coords[axis], IntNode(b, offset));
  return ctx.ValueAt(node.inputs[0], in);
}

Result<int32_t> LowerConcat(LowerContext& ctx, const ir::Node& node, int, std::span<const int32_t> coords) {
  ProgramBuilder& b = ctx.builder();
  const ir::Trace& t = ctx.trace();
  const int r = static_cast<int>(coords.size());
  const int axis = NormAxis(node.attrs.GetInt("axis", 0), r);
  if (axis < 0 || axis >= r) return InvalidArgument("Concat axis out of range");
  // Inputs that contribute elements, with their offsets along the axis.
  struct Part {
    ir::ValueId v;
    Sym begin, len;
  };
  std::vector<Part> parts;
  Sym offset(0);
  for (ir::ValueId v : node.inputs) {
    if (v == ir::kNoValue) return InvalidArgument("Concat has an absent input");
    const Sym& len = t.value(v).shape[axis];
    if (!IsConstDim(len, 0)) parts.push_back({v, offset, len});
    offset = ir::meta::AddS(offset, len);
  }
  if (parts.empty()) return Internal("Concat '" + node.name + "' has no elements to read");
  const int32_t c = coords[axis];
  int32_t value = -1;
  // From the last part backwards: value = c < end_k ? part_k : value. Every part reads a
  // clamped coordinate, so the parts the Select discards stay in range.
  for (size_t k = parts.size(); k-- > 0;) {
    int32_t local = b.Binary(Op::kSub, c, IntNode(b, parts[k].begin));
    if (k + 1 < parts.size()) local = b.Binary(Op::kMin, local, LastIndex(b, parts[k].len));
    // After the min: a part that is empty at run time (a run-time dim of 0) has last index -1,
    // and reads index 0 of its room instead, which the Select discards.
    if (k > 0 || MayBeEmpty(parts[k].len)) local = b.Binary(Op::kMax, local, b.ConstI(0));
    std::vector<int32_t> in(coords.begin(), coords.end());
    in[axis] = local;
    KILN_ASSIGN_OR_RETURN(int32_t v, ctx.ValueAt(parts[k].v, in));
    if (value < 0) {
      value = v;
    } else {
      const int32_t end = IntNode(b, ir::meta::AddS(parts[k].begin, parts[k].len));
      value = b.Select(b.Binary(Op::kLt, c, end), v, value);
    }
  }
  return value;
}

// ---- Gather / GatherElements --------------------------------------------------------------

// An index read from `indices` for an axis of extent `dim`: negatives count from the end,
// and unless the constant indices are provably in range, a kCheckIndex reports a bad one.
int32_t NormalizedIndex(ProgramBuilder& b, int32_t raw, const ir::Value& indices, const Sym& dim,
                        const std::string& what) {
  bool non_negative = false, in_range = false;
  if (auto c = ir::meta::ConstInts(indices)) {
    non_negative = in_range = true;
    for (int64_t v : *c) {
      non_negative &= v >= 0;
      in_range &= dim.is_const() && v >= -*dim.value() && v < *dim.value();
    }
  }
  const int32_t n = IntNode(b, dim);
  if (!non_negative) raw = b.Select(b.Binary(Op::kLt, raw, b.ConstI(0)), b.Binary(Op::kAdd, raw, n), raw);
  if (!in_range) raw = b.CheckIndex(raw, n, what);
  return raw;
}

Result<int32_t> LowerGather(LowerContext& ctx, const ir::Node& node, int, std::span<const int32_t> coords) {
  ProgramBuilder& b = ctx.builder();
  const ir::Value& x = ctx.trace().value(node.inputs[0]);
  const ir::Value* idx = InputOf(ctx, node, 1);
  if (!idx) return InvalidArgument("Gather needs input 1 (indices)");
  const int axis = NormAxis(node.attrs.GetInt("axis", 0), x.rank());
  if (axis < 0 || axis >= x.rank()) return InvalidArgument("Gather axis out of range");
  const int q = idx->rank();
  int32_t raw;
  auto c = ir::meta::ConstInts(*idx);
  if (c && c->size() == 1) {
    raw = b.ConstI((*c)[0]);  // one index: no load
  } else {
    KILN_ASSIGN_OR_RETURN(raw, ctx.ValueAt(node.inputs[1], coords.subspan(axis, q)));
  }
  const std::string what =
      "Gather '" + node.name + "' input '" + idx->name + "' along axis " + std::to_string(axis);
  std::vector<int32_t> in(coords.begin(), coords.begin() + axis);
  in.push_back(NormalizedIndex(b, raw, *idx, x.shape[axis], what));
  in.insert(in.end(), coords.begin() + axis + q, coords.end());
  return ctx.ValueAt(node.inputs[0], in);
}

Result<int32_t> LowerGatherElements(LowerContext& ctx, const ir::Node& node, int,
                                    std::span<const int32_t> coords) {
  ProgramBuilder& b = ctx.builder();
  const ir::Value& x = ctx.trace().value(node.inputs[0]);
  const ir::Value* idx = InputOf(ctx, node, 1);
  if (!idx) return InvalidArgument("GatherElements needs input 1 (indices)");
  const int axis = NormAxis(node.attrs.GetInt("axis", 0), x.rank());
  if (axis < 0 || axis >= x.rank()) return InvalidArgument("GatherElements axis out of range");
  KILN_ASSIGN_OR_RETURN(int32_t raw, ctx.ValueAt(node.inputs[1], coords));
  const std::string what =
      "GatherElements '" + node.name + "' input '" + idx->name + "' along axis " + std::to_string(axis);
  std::vector<int32_t> in(coords.begin(), coords.end());
  in[axis] = NormalizedIndex(b, raw, *idx, x.shape[axis], what);
  return ctx.ValueAt(node.inputs[0], in);
}

// ---- Pad / Expand / Tile ------------------------------------------------------------------

Result<int32_t> LowerPad(LowerContext& ctx, const ir::Node& node, int, std::span<const int32_t> coords) {
  ProgramBuilder& b = ctx.builder();
  const ir::Value& x = ctx.trace().value(node.inputs[0]);
  const int r = x.rank();
  const std::string mode(node.attrs.GetString("mode", "constant"));
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap") {
    return InvalidArgument("Pad mode '" + mode + "' is unknown");
  }
  const ir::Value* pads_v = InputOf(ctx, node, 1);
  if (!pads_v) return InvalidArgument("Pad needs input 1 (pads)");
  auto pads = ir::meta::Elements(*pads_v);
  if (!pads) return Unimplemented("Pad pads '" + pads_v->name + "' are not known at compile time");
  std::vector<int64_t> axes;
  if (const ir::Value* a = InputOf(ctx, node, 3)) {
    auto c = ir::meta::ConstInts(*a);
    if (!c) return Unimplemented("Pad axes '" + a->name + "' are not known at compile time");
    axes = *c;
  } else {
    for (int i = 0; i < r; ++i) axes.push_back(i);
  }
  if (pads->size() != 2 * axes.size()) return InvalidArgument("Pad pads do not match the axes");
  std::vector<Sym> begin(r, Sym(0)), end(r, Sym(0));
  for (size_t i = 0; i < axes.size(); ++i) {
    const int d = NormAxis(axes[i], r);
    if (d < 0 || d >= r) return InvalidArgument("Pad axis out of range");
    begin[d] = (*pads)[i];
    end[d] = (*pads)[i + axes.size()];
  }
  const bool constant = mode == "constant";
  auto fill = [&]() -> Result<int32_t> {
    const ir::Value* cv = InputOf(ctx, node, 2);
    if (!cv) return Zero(b, x.dtype);
    if (cv->is_const()) return ConstScalar(b, *cv->data, x.dtype);
    std::vector<int32_t> zeros(cv->rank(), b.ConstI(0));
    return ctx.ValueAt(node.inputs[2], zeros);
  };
  if (constant)
    for (const Sym& d : x.shape)
      if (IsConstDim(d, 0)) return fill();  // an empty input: the output is all padding
  // A side can fall outside the input only where its pad may be positive.
  auto may_exceed = [](const Sym& pad) { return !(pad.is_const() && *pad.value() <= 0); };
  std::vector<int32_t> in(r);
  int32_t inside = -1;
  for (int d = 0; d < r; ++d) {
    if (IsConstDim(begin[d], 0) && IsConstDim(end[d], 0)) {
      in[d] = coords[d];
      continue;
    }
    const int32_t s = b.Binary(Op::kSub, coords[d], IntNode(b, begin[d]));
    const int32_t dim = IntNode(b, x.shape[d]);
    const int32_t last = LastIndex(b, x.shape[d]);
    const bool low = may_exceed(begin[d]), high = may_exceed(end[d]);
    if (constant || mode == "edge") {
      int32_t c = s;
      if (high) c = b.Binary(Op::kMin, c, last);
      // After the min: an input dim that is 0 at run time (last index -1) is read at 0 of its
      // room, which `inside` (constant) discards.
      if (low || (high && MayBeEmpty(x.shape[d]))) c = b.Binary(Op::kMax, c, b.ConstI(0));
      in[d] = c;
      if (constant) {
        auto both = [&](int32_t cond) { inside = inside < 0 ? cond : b.Binary(Op::kAnd, inside, cond); };
        if (low) both(b.Binary(Op::kLe, b.ConstI(0), s));
        if (high) both(b.Binary(Op::kLt, s, dim));
      }
    } else if (IsConstDim(x.shape[d], 1)) {
      in[d] = b.ConstI(0);  // reflect and wrap of a single element
    } else {
      // Negative pads crop first (docs/semantics.md, the CPU kernel's PadSource): wrap and
      // reflect pad around the n elements left, [lo, lo + n).
      const Sym lo_s = ir::Max(Sym(0), ir::meta::SubS(Sym(0), begin[d]));
      const int32_t lo = IntNode(b, lo_s);
      const int32_t n = IntNode(b, ir::meta::AddS(ir::meta::AddS(x.shape[d], ir::Min(begin[d], Sym(0))), ir::Min(end[d], Sym(0))));
      const int32_t t = IsConstDim(lo_s, 0) ? s : b.Binary(Op::kSub, s, lo);
      int32_t local;
      if (mode == "wrap") {
        local = b.Binary(Op::kMod, t, n);  // kMod takes the divisor's sign: in [0, n)
      } else {
        // reflect: period 2 * (n - 1), mirrored in its second half. n = 1 gives period 0,
        // and t % 0 = 0 is the right index.
        const int32_t period = b.Binary(Op::kMul, b.ConstI(2), b.Binary(Op::kSub, n, b.ConstI(1)));
        const int32_t m = b.Binary(Op::kMod, t, period);
        local = b.Select(b.Binary(Op::kLt, m, n), m, b.Binary(Op::kSub, period, m));
      }
      in[d] = IsConstDim(lo_s, 0) ? local : b.Binary(Op::kAdd, local, lo);
    }
  }
  KILN_ASSIGN_OR_RETURN(int32_t v, ctx.ValueAt(node.inputs[0], in));
  if (inside < 0) return v;
  KILN_ASSIGN_OR_RETURN(int32_t pad_value, fill());
  return b.Select(inside, v, pad_value);
}

Result<int32_t> LowerExpand(LowerContext& ctx, const ir::Node& node, int, std::span<const int32_t> coords) {
  return BroadcastInput(ctx, node, 0, coords);
}

Result<int32_t> LowerTile(LowerContext& ctx, const ir::Node& node, int, std::span<const int32_t> coords) {
  // The repeats are in the output dims already: input coordinate = output coordinate mod
  // the input dim, which also covers repeats given by a runtime tensor.
  ProgramBuilder& b = ctx.builder();
  const ir::Trace& t = ctx.trace();
  const ir::Value& x = t.value(node.inputs[0]);
  const ir::Value& y = t.value(node.outputs[0]);
  if (x.rank() != y.rank()) return InvalidArgument("Tile output rank differs from the input rank");
  std::vector<int32_t> in(coords.size());
  for (size_t d = 0; d < coords.size(); ++d) {
    if (x.shape[d].Same(y.shape[d]))
      in[d] = coords[d];
    else if (IsConstDim(x.shape[d], 1))
      in[d] = b.ConstI(0);
    else
      in[d] = b.Binary(Op::kMod, coords[d], IntNode(b, x.shape[d]));
  }
  return ctx.ValueAt(node.inputs[0], in);
}

// ---- DepthToSpace / SpaceToDepth ----------------------------------------------------------

Result<int32_t> LowerDepthToSpace(LowerContext& ctx, const ir::Node& node, int,
                                  std::span<const int32_t> coords) {
  ProgramBuilder& b = ctx.builder();
  const ir::Trace& t = ctx.trace();
  const ir::Value& y = t.value(node.outputs[0]);
  const int64_t bs = node.attrs.GetInt("blocksize", 0);
  if (bs < 1 || y.rank() != 4) return InvalidArgument("DepthToSpace needs blocksize >= 1 and 4-D tensors");
  const std::string mode(node.attrs.GetString("mode", "DCR"));
  const int32_t block = b.ConstI(bs);
  // y[n, c, h*bs + i, w*bs + j] = x[n, channel(c, i, j), h, w].
  const int32_t h = b.Binary(Op::kFloorDiv, coords[2], block), i = b.Binary(Op::kMod, coords[2], block);
  const int32_t w = b.Binary(Op::kFloorDiv, coords[3], block), j = b.Binary(Op::kMod, coords[3], block);
  const int32_t ij = b.Binary(Op::kAdd, b.Binary(Op::kMul, i, block), j);
  int32_t channel;
  if (mode == "DCR") {
    channel = b.Binary(Op::kAdd, b.Binary(Op::kMul, ij, IntNode(b, y.shape[1])), coords[1]);  // [bs, bs, C']
  } else if (mode == "CRD") {
    channel = b.Binary(Op::kAdd, b.Binary(Op::kMul, coords[1], b.ConstI(bs * bs)), ij);  // [C', bs, bs]
  } else {
    return InvalidArgument("DepthToSpace mode must be DCR or CRD, got '" + mode + "'");
  }
  const int32_t in[4] = {coords[0], channel, h, w};
  return ctx.ValueAt(node.inputs[0], in);
}

Result<int32_t> LowerSpaceToDepth(LowerContext& ctx, const ir::Node& node, int,
                                  std::span<const int32_t> coords) {
  ProgramBuilder& b = ctx.builder();
  const ir::Value& x = ctx.trace().value(node.inputs[0]);
  const int64_t bs = node.attrs.GetInt("blocksize", 0);
  if (bs < 1 || x.rank() != 4) return InvalidArgument("SpaceToDepth needs blocksize >= 1 and 4-D tensors");
  const int32_t block = b.ConstI(bs);
  // y[n, (i*bs + j)*C + c, h, w] = x[n, c, h*bs + i, w*bs + j].
  const int32_t channels = IntNode(b, x.shape[1]);
  const int32_t ij = b.Binary(Op::kFloorDiv, coords[1], channels);
  const int32_t c = b.Binary(Op::kMod, coords[1], channels);
  const int32_t i = b.Binary(Op::kFloorDiv, ij, block), j = b.Binary(Op::kMod, ij, block);
  const int32_t in[4] = {coords[0], c, b.Binary(Op::kAdd, b.Binary(Op::kMul, coords[2], block), i),
                         b.Binary(Op::kAdd, b.Binary(Op::kMul, coords[3], block), j)};
  return ctx.ValueAt(node.inputs[0], in);
}

// ---- Resize -------------------------------------------------------------------------------

// Float arithmetic as the CPU kernel does it (in float, operation by operation), folded
// at compile time, in float, where both operands are constants.
class FloatMath {
 public:
  explicit FloatMath(ProgramBuilder& b) : b_(b) {}
  int32_t C(float v) { return b_.ConstF(v, ScalarType::kF32); }
  std::optional<float> Known(int32_t n) const {
    const fused::Node& node = b_.program().nodes[n];
    if (node.op != Op::kConst || node.type != ScalarType::kF32) return std::nullopt;
    return static_cast<float>(node.f);
  }
  // An int (kI64 node) converted to float.
  int32_t FromInt(int32_t n) {
    const fused::Node& node = b_.program().nodes[n];
    if (node.op == Op::kConst) return C(static_cast<float>(node.i));
    return b_.Convert(n, ScalarType::kF32);
  }
  int32_t Add(int32_t x, int32_t y) { return Bin(Op::kAdd, x, y); }
  int32_t Sub(int32_t x, int32_t y) { return Bin(Op::kSub, x, y); }
  int32_t Mul(int32_t x, int32_t y) { return Bin(Op::kMul, x, y); }
  int32_t Div(int32_t x, int32_t y) { return Bin(Op::kDiv, x, y); }

 private:
  int32_t Bin(Op op, int32_t x, int32_t y) {
    auto a = Known(x), c = Known(y);
    if (a && c) {
      switch (op) {
        case Op::kAdd:
          return C(*a + *c);
        case Op::kSub:
          return C(*a - *c);
        case Op::kMul:
          return C(*a * *c);
        case Op::kDiv:
          return C(*a / *c);
        default:
          break;
      }
    }
    return b_.Binary(op, x, y);
  }
  ProgramBuilder& b_;
};

enum class CoordMode {
  kHalfPixel,
  kHalfPixelSymmetric,
  kAsymmetric,
  kPytorchHalfPixel,
  kAlignCorners,
  kTfCropAndResize
};
enum class NearestMode { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil };

// The input coordinate (float) of output coordinate `x` on one axis; `out_len` and
// `in_len` are the axis extents as kI64 nodes. Same expression trees as the CPU kernel's
// OriginalCoordinate, so the float results are identical (`ratio` as there).
int32_t OriginalCoordinate(ProgramBuilder& b, FloatMath& f, CoordMode mode, int32_t x, int32_t scale,
                           int32_t out_len_i, int32_t in_len_i, float roi_start, float roi_end, bool ratio) {
  const int32_t out_len = f.FromInt(out_len_i), in_len = f.FromInt(in_len_i);
  const int32_t half = f.C(0.5f), one = f.C(1.0f);
  auto half_pixel = [&] { return f.Sub(f.Div(f.Add(x, half), scale), half); };
  // `cond ? a : b` for a kI64 condition on the extents (folded when it is constant).
  auto when = [&](int32_t cond, int32_t a, int32_t c) { return b.Select(cond, a, c); };
  switch (mode) {
    case CoordMode::kHalfPixel:
      return half_pixel();
    case CoordMode::kHalfPixelSymmetric: {
      const int32_t adjustment = f.Div(out_len, f.Mul(scale, in_len));
      const int32_t center = f.Div(in_len, f.C(2.0f));
      const int32_t offset = f.Mul(center, f.Sub(one, adjustment));
      return f.Sub(f.Add(offset, f.Div(f.Add(x, half), scale)), half);
    }
    case CoordMode::kAsymmetric:
      return f.Div(x, scale);
    case CoordMode::kPytorchHalfPixel:
      return when(b.Binary(Op::kLt, b.ConstI(1), out_len_i), half_pixel(), f.C(0.0f));
    case CoordMode::kAlignCorners: {
      const int32_t resized = ratio ? out_len : f.Mul(scale, in_len);
      return when(b.Binary(Op::kEq, resized, one), f.C(0.0f), f.Div(f.Mul(x, f.Sub(in_len, one)), f.Sub(resized, one)));
    }
    case CoordMode::kTfCropAndResize: {
      const int32_t in_m1 = f.Sub(in_len, one);
      const int32_t many =
          f.Add(f.Mul(f.C(roi_start), in_m1),
                f.Div(f.Mul(f.Mul(x, f.C(roi_end - roi_start)), in_m1), f.Sub(out_len, one)));
      const int32_t single = f.Mul(f.Mul(f.C(0.5f), f.C(roi_start + roi_end)), in_m1);
      return when(b.Binary(Op::kLt, b.ConstI(1), out_len_i), many, single);
    }
  }
  return x;
}

// The CPU kernel's NearestPixel for the coordinates that matter: any negative result is
// clamped to 0 afterwards, so for x >= 0 "round" is floor plus one past the half.
int32_t NearestPixel(ProgramBuilder& b, FloatMath& f, NearestMode mode, int32_t x) {
  if (mode == NearestMode::kCeil) return b.Convert(b.Unary(Op::kCeil, x), ScalarType::kI64);
  const int32_t fl = b.Unary(Op::kFloor, x);
  const int32_t base = b.Convert(fl, ScalarType::kI64);
  if (mode == NearestMode::kFloor) return base;
  const int32_t frac = f.Sub(x, fl);  // exact
  const int32_t up = mode == NearestMode::kRoundPreferFloor ? b.Binary(Op::kLt, f.C(0.5f), frac)
                                                            : b.Binary(Op::kLe, f.C(0.5f), frac);
  return b.Binary(Op::kAdd, base, up);
}

// The CPU kernel's ExactNearest (runtime/kernels/resize.cc): with the scale exactly out / in, the
// source coordinate is n / d in integers, and a tie is rounded by the nearest_mode exactly.
// -1 for the coordinate modes that keep the float formula.
int32_t ExactNearest(ProgramBuilder& b, CoordMode coord, NearestMode nearest, int32_t o, int32_t in_len,
                     int32_t out_len) {
  int32_t n, d;
  if (coord == CoordMode::kAsymmetric) {
    n = b.Binary(Op::kMul, o, in_len);
    d = out_len;
  } else if (coord == CoordMode::kHalfPixel || coord == CoordMode::kPytorchHalfPixel) {
    const int32_t odd = b.Binary(Op::kAdd, b.Binary(Op::kMul, b.ConstI(2), o), b.ConstI(1));
    n = b.Binary(Op::kSub, b.Binary(Op::kMul, odd, in_len), out_len);
    d = b.Binary(Op::kMul, b.ConstI(2), out_len);
  } else {
    return -1;
  }
  const int32_t fl = b.Binary(Op::kFloorDiv, n, d);
  const int32_t r = b.Binary(Op::kSub, n, b.Binary(Op::kMul, fl, d));  // in [0, d)
  const int32_t twice = b.Binary(Op::kMul, b.ConstI(2), r);
  int32_t index = fl;
  switch (nearest) {
    case NearestMode::kRoundPreferFloor: index = b.Binary(Op::kAdd, fl, b.Binary(Op::kLt, d, twice)); break;
    case NearestMode::kRoundPreferCeil: index = b.Binary(Op::kAdd, fl, b.Binary(Op::kLe, d, twice)); break;
    case NearestMode::kFloor: break;
    case NearestMode::kCeil: index = b.Binary(Op::kAdd, fl, b.Binary(Op::kLt, b.ConstI(0), r)); break;
  }
  if (coord == CoordMode::kPytorchHalfPixel) index = b.Select(b.Binary(Op::kLt, b.ConstI(1), out_len), index, b.ConstI(0));
  return index;
}

Result<int32_t> LowerResize(LowerContext& ctx, const ir::Node& node, int, std::span<const int32_t> coords) {
  ProgramBuilder& b = ctx.builder();
  FloatMath f(b);
  const ir::Trace& t = ctx.trace();
  const AttrMap& attrs = node.attrs;
  const ir::Value& x = t.value(node.inputs[0]);
  const ir::Value& y = t.value(node.outputs[0]);
  const int r = x.rank();
  if (y.rank() != r || r < 1) return InvalidArgument("Resize input and output ranks differ");

  const std::string mode(attrs.GetString("mode", "nearest"));
  if (mode == "cubic") return Unimplemented("Resize mode 'cubic' has no fused form");
  if (mode != "nearest" && mode != "linear") return InvalidArgument("Resize mode '" + mode + "' is unknown");
  const bool linear = mode == "linear";
  if (attrs.GetInt("antialias", 0) != 0) return Unimplemented("Resize with antialias=1 has no fused form");
  // The kept aspect ratio's common scale is not out / in, which is what this lowering derives from sizes.
  if (attrs.GetString("keep_aspect_ratio_policy", "stretch") != "stretch")
    return Unimplemented("Resize keep_aspect_ratio_policy other than stretch has no fused form");
  const std::string cm(attrs.GetString("coordinate_transformation_mode", "half_pixel"));
  CoordMode coord;
  if (cm == "half_pixel")
    coord = CoordMode::kHalfPixel;
  else if (cm == "half_pixel_symmetric")
    coord = CoordMode::kHalfPixelSymmetric;
  else if (cm == "asymmetric")
    coord = CoordMode::kAsymmetric;
  else if (cm == "pytorch_half_pixel")
    coord = CoordMode::kPytorchHalfPixel;
  else if (cm == "align_corners")
    coord = CoordMode::kAlignCorners;
  else if (cm == "tf_crop_and_resize")
    coord = CoordMode::kTfCropAndResize;
  else
    return InvalidArgument("Resize coordinate_transformation_mode '" + cm + "' is unknown");
  const std::string nm(attrs.GetString("nearest_mode", "round_prefer_floor"));
  NearestMode nearest;
  if (nm == "round_prefer_floor")
    nearest = NearestMode::kRoundPreferFloor;
  else if (nm == "round_prefer_ceil")
    nearest = NearestMode::kRoundPreferCeil;
  else if (nm == "floor")
    nearest = NearestMode::kFloor;
  else if (nm == "ceil")
    nearest = NearestMode::kCeil;
  else
    return InvalidArgument("Resize nearest_mode '" + nm + "' is unknown");
  const bool extrapolate = coord == CoordMode::kTfCropAndResize;

  ScalarType vt = ScalarType::kI64;
  if (!fused::ComputeTypeOf(x.dtype, &vt)) return Unimplemented("Resize on " + ir::meta::DTypeStr(x.dtype));
  if (linear && vt == ScalarType::kI64) {
    return Unimplemented("Resize mode 'linear' on " + ir::meta::DTypeStr(x.dtype) +
                         " has no fused form (the CPU kernel interpolates floats only)");
  }

  std::vector<int> axis_of;
  if (attrs.Has("axes")) {
    for (int64_t a : attrs.GetInts("axes")) axis_of.push_back(NormAxis(a, r));
  } else {
    for (int i = 0; i < r; ++i) axis_of.push_back(i);
  }
  for (int a : axis_of)
    if (a < 0 || a >= r) return InvalidArgument("Resize axis out of range");
  const int naxes = static_cast<int>(axis_of.size());

  // Per-axis scale: a compile-time float where known, else computed at run time from the
  // extents as the kernel does (float(out) / float(in)).
  std::vector<std::optional<float>> scale(r, 1.0f);
  std::vector<bool> ratio(r, false);  // the scale is exactly out / in (sizes): see ExactNearest
  std::vector<float> roi_start(r, 0.0f), roi_end(r, 1.0f);
  if (const ir::Value* s = OptionalInputOf(ctx, node, 2)) {
    auto v = ir::meta::FloatElements(*s);
    if (!v) return Unimplemented("Resize scales '" + s->name + "' are not known at compile time");
    if (static_cast<int>(v->size()) != naxes) return InvalidArgument("Resize scales do not match the axes");
    for (int i = 0; i < naxes; ++i) scale[axis_of[i]] = static_cast<float>((*v)[i]);
  } else {
    for (int i = 0; i < naxes; ++i) {
      const int a = axis_of[i];
      const Sym &in = x.shape[a], &out = y.shape[a];
      ratio[a] = true;
      if (in.is_const() && out.is_const()) {
        scale[a] =
            *in.value() > 0 ? static_cast<float>(*out.value()) / static_cast<float>(*in.value()) : 1.0f;
      } else if (in.Same(out)) {
        scale[a] = 1.0f;
      } else {
        scale[a] = std::nullopt;
      }
    }
  }
  if (extrapolate) {
    if (const ir::Value* roi = OptionalInputOf(ctx, node, 1)) {
      auto v = ir::meta::FloatElements(*roi);
      if (!v) return Unimplemented("Resize roi '" + roi->name + "' is not known at compile time");
      if (static_cast<int>(v->size()) != 2 * naxes)
        return InvalidArgument("Resize roi does not match the axes");
      for (int i = 0; i < naxes; ++i) {
        roi_start[axis_of[i]] = static_cast<float>((*v)[i]);
        roi_end[axis_of[i]] = static_cast<float>((*v)[i + naxes]);
      }
    }
  }

  // Taps per axis: input indices and, for interpolated axes, their float weights.
  std::vector<std::vector<int32_t>> idx(r), w(r);
  int32_t outside = -1;
  for (int i = 0; i < r; ++i) {
    // onnxruntime's bilinear and trilinear paths interpolate their inner axes even when
    // unscaled; the CPU kernel does the same, and so does this.
    const bool ort_inner =
        linear && (((r == 2 || r == 4) && i >= r - 2) || ((r == 3 || r == 5) && i >= r - 3));
    const bool unscaled = scale[i] && *scale[i] == 1.0f && x.shape[i].Same(y.shape[i]);
    if (!ort_inner && unscaled && !extrapolate) {
      idx[i] = {coords[i]};
      continue;
    }
    if (linear && !ort_inner && !scale[i]) {
      // The kernel copies such an axis when it turns out unscaled and interpolates it
      // otherwise; the two differ in rounding, and which one applies is a run-time fact.
      return Unimplemented("Resize mode 'linear': whether axis " + std::to_string(i) +
                           " is resized is only known at run time");
    }
    // Upsampling by a power of two with floor(x / scale), the classic nearest Upsample:
    // the float transform is exact there, so integer division gives the same index.
    if (!linear && coord == CoordMode::kAsymmetric && nearest == NearestMode::kFloor && scale[i] &&
        *scale[i] >= 1.0f && *scale[i] <= 1024.0f && std::exp2(std::round(std::log2(*scale[i]))) == *scale[i] &&
        (x.shape[i] * ir::Sym(static_cast<int64_t>(*scale[i]))).Same(y.shape[i])) {
      idx[i] = {b.Binary(Op::kFloorDiv, coords[i], b.ConstI(static_cast<int64_t>(*scale[i])))};
      continue;
    }
    const int32_t in_len = IntNode(b, x.shape[i]), out_len = IntNode(b, y.shape[i]);
    const int32_t last = LastIndex(b, x.shape[i]);
    const bool may_be_empty = MayBeEmpty(x.shape[i]);
    const int32_t o = f.FromInt(coords[i]);
    int32_t in_x;
    if (linear && scale[i] && *scale[i] == 1.0f && !extrapolate) {
      in_x = o;  // the kernel skips the transform for unscaled axes
    } else {
      // An unknown scale may turn out 1 at run time; the transforms then give o exactly,
      // which is what the kernel's skip gives too.
      const int32_t s = scale[i] ? f.C(*scale[i]) : f.Div(f.FromInt(out_len), f.FromInt(in_len));
      in_x = OriginalCoordinate(b, f, coord, o, s, out_len, in_len, roi_start[i], roi_end[i], ratio[i]);
    }
    if (extrapolate) {
      const int32_t out_i =
          b.Binary(Op::kOr, b.Binary(Op::kLt, in_x, f.C(0.0f)), b.Binary(Op::kLt, f.FromInt(last), in_x));
      outside = outside < 0 ? out_i : b.Binary(Op::kOr, outside, out_i);
    }
    if (!linear) {
      int32_t exact = -1;
      if (ratio[i] && !extrapolate) exact = ExactNearest(b, coord, nearest, coords[i], in_len, out_len);
      const int32_t near = exact >= 0 ? exact : NearestPixel(b, f, nearest, in_x);
      // Max after min where the axis may be empty at run time (last -1): index 0, never -1.
      idx[i] = {may_be_empty ? b.Binary(Op::kMax, b.Binary(Op::kMin, near, last), b.ConstI(0))
                             : b.Clamp(near, b.ConstI(0), last)};
      continue;
    }
    const int32_t c = b.Binary(Op::kMax, f.C(0.0f), b.Binary(Op::kMin, in_x, f.FromInt(last)));
    int32_t i1 = b.Binary(Op::kMin, b.Convert(c, ScalarType::kI64), last);
    int32_t i2 = b.Binary(Op::kMin, b.Binary(Op::kAdd, i1, b.ConstI(1)), last);
    if (may_be_empty) {  // last is -1: read index 0
      i1 = b.Binary(Op::kMax, i1, b.ConstI(0));
      i2 = b.Binary(Op::kMax, i2, b.ConstI(0));
    }
    const int32_t same = b.Binary(Op::kEq, i1, i2);
    const int32_t d1 = b.Select(same, f.C(0.5f), b.Unary(Op::kAbs, f.Sub(c, f.FromInt(i1))));
    const int32_t d2 = b.Select(same, f.C(0.5f), b.Unary(Op::kAbs, f.Sub(c, f.FromInt(i2))));
    idx[i] = {i1, i2};
    w[i] = {d2, d1};
  }

  int32_t value;
  if (!linear) {
    std::vector<int32_t> in(r);
    for (int i = 0; i < r; ++i) in[i] = idx[i][0];
    KILN_ASSIGN_OR_RETURN(value, ctx.ValueAt(node.inputs[0], in));
  } else {
    // Corners in row-major tap order (last axis fastest), each weight the product of the
    // axes' weights from the last axis backwards, summed from 0: the kernel's order.
    value = b.ConstF(0.0, vt);
    std::vector<size_t> tap(r, 0);
    while (true) {
      std::vector<int32_t> in(r);
      int32_t wt = -1;
      for (int i = r - 1; i >= 0; --i) {
        in[i] = idx[i][tap[i]];
        if (!w[i].empty()) wt = wt < 0 ? w[i][tap[i]] : f.Mul(wt, w[i][tap[i]]);
      }
      KILN_ASSIGN_OR_RETURN(int32_t px, ctx.ValueAt(node.inputs[0], in));
      const int32_t term = wt < 0 ? px : b.Binary(Op::kMul, b.Convert(wt, vt), px);
      value = b.Binary(Op::kAdd, value, term);
      int i = r - 1;
      while (i >= 0 && ++tap[i] == idx[i].size()) tap[i--] = 0;
      if (i < 0) break;
    }
  }
  if (outside >= 0) {
    // The kernel fills with extrapolation_value for float32 and with 0 otherwise.
    const int32_t fill =
        x.dtype == DType::kFloat32
            ? b.ConstF(attrs.GetFloat("extrapolation_value", 0.0f), ScalarType::kF32)
            : (linear ? b.Convert(f.C(attrs.GetFloat("extrapolation_value", 0.0f)), vt) : Zero(b, x.dtype));
    value = b.Select(outside, fill, value);
  }
  return value;
}

constexpr Lowering kLowerings[] = {
    {"Concat", Checked<LowerConcat>},
    {"DepthToSpace", Checked<LowerDepthToSpace>},
    {"Dropout", Checked<LowerView>},
    {"Expand", Checked<LowerExpand>},
    {"Flatten", Checked<LowerView>},
    {"Gather", Checked<LowerGather>},
    {"GatherElements", Checked<LowerGatherElements>},
    {"Identity", Checked<LowerView>},
    {"Pad", Checked<LowerPad>},
    {"Reshape", Checked<LowerView>},
    {"Resize", Checked<LowerResize>},
    {"Slice", Checked<LowerSlice>},
    {"SpaceToDepth", Checked<LowerSpaceToDepth>},
    {"Split", Checked<LowerSplit>},
    {"Squeeze", Checked<LowerView>},
    {"Tile", Checked<LowerTile>},
    {"Transpose", Checked<LowerTranspose>},
    {"Unsqueeze", Checked<LowerView>},
};

}  // namespace

std::span<const Lowering> DataMovementLowerings() { return kLowerings; }

}  // namespace kiln::fusion
