// Meta functions of the data-movement ops: Transpose, Concat, Split, Slice, Gather,
// GatherElements, Pad, DepthToSpace, SpaceToDepth and Resize.
//
// Slice on a symbolic dim clamps its starts and ends exactly as ONNX specifies, with Min and
// Max where the dim's lower bound does not decide them (meta::SliceBound): x[1:] on dim T is
// T - 1, x[:5] is min(5, T), and an end of 1e9 is min(999999999, T), never an assumption that
// rejects a shorter T. Ends at or beyond INT32_MAX (and, for negative steps, at or below
// -INT32_MAX) mean "to the end". Symbolic starts/ends must be provably >= 0. Starts or ends
// computed from tensor data make the length a run-time dim (DataSliceMeta).
#include <algorithm>
#include <cmath>
#include <limits>

#include "compiler/ops/families.h"
#include "compiler/ops/meta_util.h"

namespace kiln::ir {
using namespace meta;
namespace {

Status TransposeMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* x, Need(ctx, 0, "data"));
  int r = x->rank();
  std::vector<int64_t> perm = ctx.attrs().GetInts("perm");
  if (!ctx.attrs().Has("perm"))
    for (int i = r - 1; i >= 0; --i) perm.push_back(i);
  if (static_cast<int>(perm.size()) != r)
    return InvalidArgument("perm: expected " + std::to_string(r) + " values (the input rank), found " +
                           Str(perm));
  std::vector<bool> seen(r, false);
  for (int64_t p : perm) {
    if (p < 0 || p >= r || seen[p])
      return InvalidArgument("perm: expected a permutation of 0.." + std::to_string(r - 1) +
                             ", found " + Str(perm));
    seen[p] = true;
  }
  SymShape out;
  for (int64_t p : perm) out.push_back(x->shape[p]);
  ctx.SetOutput(0, x->dtype, out);
  if (r <= 1)
    if (auto e = Elements(*x)) SetSym(ctx, 0, std::move(*e));
  return Status::Ok();
}

Status ConcatMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  if (ctx.num_inputs() < 1) return InvalidArgument("expected at least 1 input, found 0");
  if (!ctx.attrs().Has("axis")) return InvalidArgument("attribute axis: expected an int, found it missing");
  std::vector<const Value*> ins;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    KILN_ASSIGN_OR_RETURN(const Value* v, Need(ctx, i, "inputs[" + std::to_string(i) + "]"));
    ins.push_back(v);
  }
  const Value* a = ins[0];
  KILN_RETURN_IF_ERROR(CheckRank(*a, "input 0", 1, 1000));
  KILN_ASSIGN_OR_RETURN(int axis, NormAxis(ctx.attrs().GetInt("axis", 0), a->rank()));
  SymShape out = a->shape;
  for (size_t i = 1; i < ins.size(); ++i) {
    const Value* v = ins[i];
    std::string nm = "inputs[" + std::to_string(i) + "]";
    KILN_RETURN_IF_ERROR(CheckSameDType(*a, "inputs[0]", *v, nm));
    if (v->rank() != a->rank())
      return InvalidArgument("input " + std::to_string(i) + ": expected rank " +
                             std::to_string(a->rank()) + ", found rank " + std::to_string(v->rank()) +
                             " " + Str(v->shape) + " (input 0 is " + Str(a->shape) + ")");
    for (int d = 0; d < a->rank(); ++d) {
      if (d == axis) continue;
      if (!out[d].Same(v->shape[d]) && out[d].is_const() && v->shape[d].is_const())
        return InvalidArgument("input " + std::to_string(i) + " dim " + std::to_string(d) +
                               ": expected " + out[d].ToString() + ", found " +
                               v->shape[d].ToString() + " (" + Str(a->shape) + " vs " +
                               Str(v->shape) + ", axis " + std::to_string(axis) + ")");
      KILN_RETURN_IF_ERROR(Unify(ctx, out[d], v->shape[d], nm));
    }
    out[axis] = AddS(out[axis], v->shape[axis]);
  }
  ctx.SetOutput(0, a->dtype, out);
  // Elements: concatenate row-major blocks.
  // A count that overflows int64 stays symbolic (no value): not propagated either.
  if (auto count = NumElements(out).value(); !IsStatic(out) || !count || *count > kMaxSymElements) return Status::Ok();
  std::vector<std::vector<Sym>> elems;
  for (const Value* v : ins) {
    auto e = Elements(*v);
    if (!e) return Status::Ok();
    elems.push_back(std::move(*e));
  }
  int64_t outer = 1;
  for (int d = 0; d < axis; ++d) outer *= *out[d].value();
  std::vector<Sym> res;
  for (int64_t o = 0; o < outer; ++o)
    for (size_t i = 0; i < ins.size(); ++i) {
      int64_t block = 1;
      for (int d = axis; d < ins[i]->rank(); ++d) block *= *ins[i]->shape[d].value();
      for (int64_t k = 0; k < block; ++k) res.push_back(elems[i][o * block + k]);
    }
  SetSym(ctx, 0, std::move(res));
  return Status::Ok();
}

// Sets the elements of output `out` to elements [start, start+len) along a 1-D input.
void SliceElements1D(MetaContext& ctx, int out, const Value& x, int64_t start, int64_t len,
                     int64_t step) {
  if (x.rank() != 1) return;
  auto e = Elements(x);
  if (!e) return;
  std::vector<Sym> r;
  for (int64_t i = 0; i < len; ++i) {
    int64_t k = start + i * step;
    if (k < 0 || k >= static_cast<int64_t>(e->size())) return;
    r.push_back((*e)[k]);
  }
  SetSym(ctx, out, std::move(r));
}

Status SplitMeta(MetaContext& ctx) {
  KILN_ASSIGN_OR_RETURN(const Value* x, Need(ctx, 0, "input"));
  KILN_RETURN_IF_ERROR(CheckRank(*x, "input", 1, 1000));
  KILN_ASSIGN_OR_RETURN(int axis, NormAxis(ctx.attrs().GetInt("axis", 0), x->rank()));
  int n = ctx.num_outputs();
  if (n < 1) return InvalidArgument("expected at least 1 output, found 0");
  const Sym& d = x->shape[axis];
  std::vector<Sym> sizes;
  if (const Value* s = ctx.input(1)) {
    KILN_RETURN_IF_ERROR(CheckDType(*s, "split", kSignedInts));
    KILN_RETURN_IF_ERROR(CheckRank(*s, "input split", 1, 1));
    KILN_ASSIGN_OR_RETURN(sizes, NeedElements(*s, "split"));
    if (static_cast<int>(sizes.size()) != n)
      return InvalidArgument("split: expected " + std::to_string(n) + " sizes (one per output), found " +
                             Str(sizes));
    Sym sum(0);
    for (const Sym& v : sizes) {
      if (v.is_const() && *v.value() < 0)
        return InvalidArgument("split: expected sizes >= 0, found " + Str(sizes));
      sum = AddS(sum, v);
    }
    if (!sum.Same(d) && sum.is_const() && d.is_const())
      return InvalidArgument("split: expected sizes summing to " + d.ToString() + " (dim " +
                             std::to_string(axis) + " of " + Str(x->shape) + "), found " + Str(sizes));
    KILN_RETURN_IF_ERROR(Unify(ctx, d, sum, "split sum"));
  } else if (ctx.attrs().Has("num_outputs")) {
    int64_t no = ctx.attrs().GetInt("num_outputs", 0);
    if (no != n)
      return InvalidArgument("num_outputs: expected " + std::to_string(n) + " (the node's outputs), found " +
                             std::to_string(no));
    Sym chunk = CeilDiv(d, n);
    for (int i = 0; i + 1 < n; ++i) sizes.push_back(chunk);
    Sym last = SubS(d, chunk * Sym(n - 1));
    if (auto lv = last.value(); lv && *lv < 0)
      return InvalidArgument("num_outputs: expected at most " + d.ToString() + " outputs for dim " +
                             d.ToString() + ", found " + std::to_string(n));
    sizes.push_back(last);
  } else {
    if (auto dv = d.value(); dv && *dv % n != 0)
      return InvalidArgument("expected dim " + std::to_string(axis) + " of " + Str(x->shape) +
                             " divisible by the " + std::to_string(n) + " outputs, found " +
                             std::to_string(*dv));
    bool exact = false;
    Sym each = DivExact(d, Sym(n), &exact);
    if (!exact) AddGuard(ctx, Eq(Mod(d, n), 0));
    sizes.assign(n, each);
  }
  int64_t offset = 0;
  bool static_offsets = true;
  for (int i = 0; i < n; ++i) {
    SymShape out = x->shape;
    out[axis] = sizes[i];
    ctx.SetOutput(i, x->dtype, out);
    if (static_offsets && sizes[i].is_const() && x->rank() == 1) {
      SliceElements1D(ctx, i, *x, offset, *sizes[i].value(), 1);
      offset += *sizes[i].value();
    } else {
      static_offsets = false;
    }
  }
  return Status::Ok();
}

// The start (after normalisation) and length of a slice along a dim.
struct SliceRange {
  Sym start, len;
};

// |step| for counting the elements of a slice: INT64_MIN's magnitude is not an int64, and
// INT64_MAX counts the same (a distance between in-range indices is at most INT64_MAX).
int64_t StepSize(int64_t step) {
  if (step == std::numeric_limits<int64_t>::min()) return std::numeric_limits<int64_t>::max();
  return step > 0 ? step : -step;
}

Result<SliceRange> SliceDim(MetaContext& ctx, const Sym& d, const Sym& s, const Sym& e,
                            int64_t step) {
  if (d.is_const() && s.is_const() && e.is_const()) {
    int64_t D = *d.value(), S = *s.value(), E = *e.value();
    if (step > 0) {
      S = S < 0 ? std::max<int64_t>(0, S + D) : std::min(S, D);
      E = E < 0 ? std::max<int64_t>(0, E + D) : std::min(E, D);
      int64_t n = E > S ? 1 + (E - S - 1) / step : 0;  // ceil((E - S) / step) without overflow
      return SliceRange{Sym(S), Sym(n)};
    }
    // Negative step: starts clamp to [0, D-1], ends to [-1, D-1] (ONNX Slice-13); an empty
    // dim gives nothing.
    S = S < 0 ? std::max<int64_t>(0, S + D) : std::min(S, D - 1);
    E = E < 0 ? std::max<int64_t>(-1, E + D) : std::min(E, D - 1);
    int64_t n = D > 0 && S > E ? 1 + (S - E - 1) / StepSize(step) : 0;
    return SliceRange{Sym(S), Sym(n)};
  }
  // Symbolic: exact clamps (SliceBound), so no index is assumed in range.
  KILN_ASSIGN_OR_RETURN(Sym S, SliceBound(d, s, step, false));
  KILN_ASSIGN_OR_RETURN(Sym E, SliceBound(d, e, step, true));
  // x[-k:] is the last min(k, d) elements: d - max(0, d - k) written out.
  if (step == 1 && E.Same(d) && S.op() == SymOp::kMax && s.is_const() && *s.value() < 0)
    return SliceRange{S, Min(Sym(-*s.value()), d)};
  const Sym diff = Max(Sym(0), step > 0 ? SubS(E, S) : SubS(S, E));
  const int64_t as = StepSize(step);
  return SliceRange{S, as == 1 ? diff : CeilDiv(diff, Sym(as))};
}

// The length of a slice of dim `d` from `s` to `e` by `t` (ONNX Slice-13): SliceDim's for a
// constant step; for a step read at each call, the clamps of either sign, picked by its sign,
// each divided by a divisor kept positive (the step's magnitude, or 1 on the unused side).
Result<Sym> SliceLength(MetaContext& ctx, const Sym& d, const Sym& s, const Sym& e, const Sym& t) {
  if (t.is_const()) {
    if (*t.value() == 0) return InvalidArgument("steps: expected nonzero values, found 0");
    KILN_ASSIGN_OR_RETURN(SliceRange r, SliceDim(ctx, d, s, e, *t.value()));
    return r.len;
  }
  KILN_ASSIGN_OR_RETURN(Sym up_start, SliceBound(d, s, 1, false));
  KILN_ASSIGN_OR_RETURN(Sym up_end, SliceBound(d, e, 1, true));
  KILN_ASSIGN_OR_RETURN(Sym down_start, SliceBound(d, s, -1, false));
  KILN_ASSIGN_OR_RETURN(Sym down_end, SliceBound(d, e, -1, true));
  const Sym up = CeilDiv(Max(Sym(0), up_end - up_start), Max(t, Sym(1)));
  // An empty dim gives nothing downwards (its clamps [0, d - 1] and [-1, d - 1] are empty).
  const Sym down = CeilDiv(Max(Sym(0), down_start - down_end), Max(Sym(0) - t, Sym(1))) * Min(d, Sym(1));
  return Lt(Sym(0), t) * up + Lt(t, Sym(0)) * down;
}

// A Slice whose axes or steps are read at each call (value symbols, passes/value_inputs.h): dim
// i keeps its length unless an axis names it, then it is that slice's length. The CPU kernel
// reads the axes and steps at run time.
Status SliceOverValueAxes(MetaContext& ctx, const Value& x, const std::vector<Sym>& starts,
                          const std::vector<Sym>& ends, const std::vector<Sym>& axes, const std::vector<Sym>& steps) {
  const int64_t r = x.rank();
  const std::vector<Sym> hits = ValueAxesHits(ctx, axes, r);
  for (const Sym& t : steps)
    if (!t.is_const()) AddGuard(ctx, Sym(1) - Eq(t, Sym(0)), "whose steps must be nonzero");
  SymShape out;
  for (int64_t i = 0; i < r; ++i) {
    const Sym& d = x.shape[static_cast<size_t>(i)];
    Sym dim = (Sym(1) - hits[static_cast<size_t>(i)]) * d;
    for (size_t j = 0; j < starts.size(); ++j) {
      const Sym names = NamesDim(axes[j], i, r);
      if (names.is_const() && *names.value() == 0) continue;
      KILN_ASSIGN_OR_RETURN(Sym len, SliceLength(ctx, d, starts[j], ends[j], steps[j]));
      dim = dim + names * len;
    }
    out.push_back(dim);
  }
  ctx.SetOutput(0, x.dtype, out);
  return Status::Ok();
}

// A Slice whose starts or ends are computed from tensor data (x[i:] in a run-time Loop's body,
// x[:n] with n from a ReduceSum): its length on the one axis it slices is a run-time dim that
// the CPU kernel reports, at most the axis dim (divided by the step). Axes and steps must be
// constants.
Status DataSliceMeta(MetaContext& ctx, const Value& x) {
  const Value &starts = *ctx.input(1), &ends = *ctx.input(2);
  const Sym n = NumElements(starts.shape);
  if (!n.is_const() || *n.value() != 1 || !NumElements(ends.shape).Same(n))
    return Unimplemented("data-dependent output shape: starts " + Str(starts.shape) + " and ends " + Str(ends.shape) +
                         " computed from tensor data: such a Slice takes one axis (one start and one end)");
  int64_t axis = 0, step = 1;
  if (const Value* a = ctx.input(3)) {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> axes, NeedConstInts(*a, "axes"));
    if (axes.size() != 1) return InvalidArgument("axes: expected 1 value (as starts), found " + Str(axes));
    axis = axes[0];
  }
  if (const Value* s = ctx.input(4)) {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> steps, NeedConstInts(*s, "steps"));
    if (steps.size() != 1 || steps[0] == 0) return InvalidArgument("steps: expected 1 nonzero value, found " + Str(steps));
    step = steps[0];
  }
  KILN_ASSIGN_OR_RETURN(std::vector<int> norm, NormAxes({axis}, x.rank()));
  SymShape out = x.shape;
  const Sym& d = x.shape[norm[0]];
  const int64_t size = StepSize(step);
  out[norm[0]] = NewRuntimeDim(ctx, 0, size == 1 ? d : CeilDiv(d, Sym(size)), "length, from starts or ends computed from tensor data");
  ctx.SetOutput(0, x.dtype, out);
  return Status::Ok();
}

Status SliceMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* x, Need(ctx, 0, "data"));
  KILN_RETURN_IF_ERROR(CheckRank(*x, "input data", 1, 1000));
  const char* names[] = {"starts", "ends", "axes", "steps"};
  for (int i = 1; i <= 4; ++i)
    if (const Value* v = ctx.input(i)) {
      KILN_RETURN_IF_ERROR(CheckDType(*v, names[i - 1], kSignedInts));
      KILN_RETURN_IF_ERROR(CheckRank(*v, std::string("input ") + names[i - 1], 1, 1));
    } else if (i <= 2) {
      return InvalidArgument(std::string("expected input ") + names[i - 1] + ", found it absent");
    }
  const std::optional<std::vector<Sym>> known_starts = Elements(*ctx.input(1)), known_ends = Elements(*ctx.input(2));
  if (!known_starts || !known_ends) return DataSliceMeta(ctx, *x);
  const std::vector<Sym>&starts = *known_starts, &ends = *known_ends;
  size_t n = starts.size();
  if (ends.size() != n)
    return InvalidArgument("ends: expected " + std::to_string(n) + " values (as starts), found " +
                           std::to_string(ends.size()));
  std::vector<Sym> sym_axes, sym_steps(n, Sym(1));
  if (const Value* a = ctx.input(3)) {
    KILN_ASSIGN_OR_RETURN(sym_axes, NeedElements(*a, "axes"));
  } else {
    for (size_t i = 0; i < n; ++i) sym_axes.push_back(Sym(static_cast<int64_t>(i)));
  }
  if (const Value* s = ctx.input(4)) {
    KILN_ASSIGN_OR_RETURN(sym_steps, NeedElements(*s, "steps"));
  }
  if (sym_axes.size() != n || sym_steps.size() != n)
    return InvalidArgument("axes/steps: expected " + std::to_string(n) + " values (as starts), found " +
                           std::to_string(sym_axes.size()) + " and " + std::to_string(sym_steps.size()));
  if (!AllConst(sym_axes) || !AllConst(sym_steps))
    return SliceOverValueAxes(ctx, *x, starts, ends, sym_axes, sym_steps);
  const std::vector<int64_t> axes = ConstValues(sym_axes), steps = ConstValues(sym_steps);
  KILN_ASSIGN_OR_RETURN(std::vector<int> norm, NormAxes(axes, x->rank()));
  SymShape out = x->shape;
  std::optional<SliceRange> r0;
  for (size_t i = 0; i < n; ++i) {
    if (steps[i] == 0) return InvalidArgument("steps: expected nonzero values, found " + Str(steps));
    KILN_ASSIGN_OR_RETURN(SliceRange r, SliceDim(ctx, x->shape[norm[i]], starts[i], ends[i], steps[i]));
    out[norm[i]] = r.len;
    r0 = r;
  }
  ctx.SetOutput(0, x->dtype, out);
  if (x->rank() == 1) {
    if (!r0) {
      if (auto e = Elements(*x)) SetSym(ctx, 0, std::move(*e));
    } else if (r0->start.is_const() && r0->len.is_const()) {
      SliceElements1D(ctx, 0, *x, *r0->start.value(), *r0->len.value(), steps[0]);
    }
  }
  return Status::Ok();
}

Status GatherMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* x, Need(ctx, 0, "data"));
  KILN_ASSIGN_OR_RETURN(const Value* idx, Need(ctx, 1, "indices"));
  KILN_RETURN_IF_ERROR(CheckRank(*x, "input data", 1, 1000));
  KILN_RETURN_IF_ERROR(CheckDType(*idx, "indices", kSignedInts));
  KILN_ASSIGN_OR_RETURN(int axis, NormAxis(ctx.attrs().GetInt("axis", 0), x->rank()));
  const Sym& d = x->shape[axis];
  auto ie = Elements(*idx);
  if (ie && d.is_const()) {
    int64_t D = *d.value();
    for (const Sym& k : *ie)
      if (k.is_const() && (*k.value() < -D || *k.value() >= D))
        return InvalidArgument("indices: expected values in [" + std::to_string(-D) + ", " +
                               std::to_string(D - 1) + "] (dim " + std::to_string(axis) + " of " +
                               Str(x->shape) + "), found " + k.ToString());
  }
  SymShape out(x->shape.begin(), x->shape.begin() + axis);
  out.insert(out.end(), idx->shape.begin(), idx->shape.end());
  out.insert(out.end(), x->shape.begin() + axis + 1, x->shape.end());
  ctx.SetOutput(0, x->dtype, out);
  if (x->rank() == 1 && ie && d.is_const()) {
    auto xe = Elements(*x);
    if (!xe) return Status::Ok();
    std::vector<Sym> res;
    for (const Sym& k : *ie) {
      if (!k.is_const()) return Status::Ok();
      int64_t i = *k.value();
      if (i < 0) i += *d.value();
      res.push_back((*xe)[i]);
    }
    SetSym(ctx, 0, std::move(res));
  }
  return Status::Ok();
}

Status GatherElementsMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* x, Need(ctx, 0, "data"));
  KILN_ASSIGN_OR_RETURN(const Value* idx, Need(ctx, 1, "indices"));
  KILN_RETURN_IF_ERROR(CheckRank(*x, "input data", 1, 1000));
  KILN_RETURN_IF_ERROR(CheckDType(*idx, "indices", kSignedInts));
  if (idx->rank() != x->rank())
    return InvalidArgument("indices: expected rank " + std::to_string(x->rank()) + " (as data " +
                           Str(x->shape) + "), found " + Str(idx->shape));
  KILN_ASSIGN_OR_RETURN(int axis, NormAxis(ctx.attrs().GetInt("axis", 0), x->rank()));
  // Off the axis, each index dim must fit in the data's (ONNX GatherElements); where a
  // dim is symbolic the prologue checks it.
  for (int d = 0; d < x->rank(); ++d) {
    if (d == axis || idx->shape[d].Same(x->shape[d])) continue;
    const auto i = idx->shape[d].value(), n = x->shape[d].value();
    if (i && n) {
      if (*i > *n)
        return InvalidArgument("indices: dim " + std::to_string(d) + " is " + std::to_string(*i) +
                               ", more than data's " + std::to_string(*n) + " " + Str(x->shape));
      continue;
    }
    AddGuard(ctx, Lt(idx->shape[d], AddS(x->shape[d], Sym(1))));
  }
  ctx.SetOutput(0, x->dtype, idx->shape);
  return Status::Ok();
}

Status PadMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* x, Need(ctx, 0, "data"));
  KILN_ASSIGN_OR_RETURN(const Value* p, Need(ctx, 1, "pads"));
  if (ctx.attrs().Has("pads"))
    return InvalidArgument("pads: expected the opset-11 form (pads as input 1), found an attribute");
  std::string mode(ctx.attrs().GetString("mode", "constant"));
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap")
    return InvalidArgument("mode: expected constant, reflect, edge or wrap, found \"" + mode + "\"");
  KILN_RETURN_IF_ERROR(CheckDType(*p, "pads", kSignedInts));
  KILN_RETURN_IF_ERROR(CheckRank(*p, "input pads", 1, 1));
  KILN_ASSIGN_OR_RETURN(std::vector<Sym> pads, NeedElements(*p, "pads"));
  if (const Value* cv = ctx.input(2)) {
    KILN_RETURN_IF_ERROR(CheckSameDType(*x, "data", *cv, "constant_value"));
    auto n = StaticCount(*cv);
    if (cv->rank() > 1 || (n && *n != 1))
      return InvalidArgument("constant_value: expected a scalar, found shape " + Str(cv->shape));
  }
  std::vector<int> axes;
  std::optional<std::vector<Sym>> value_axes;  // axes read at each call (value symbols)
  if (const Value* a = ctx.input(3)) {
    KILN_RETURN_IF_ERROR(CheckDType(*a, "axes", kSignedInts));
    KILN_ASSIGN_OR_RETURN(std::vector<Sym> av, NeedElements(*a, "axes"));
    if (AllConst(av)) {
      KILN_ASSIGN_OR_RETURN(axes, NormAxes(ConstValues(av), x->rank()));
    } else {
      value_axes = std::move(av);
    }
  } else {
    for (int i = 0; i < x->rank(); ++i) axes.push_back(i);
  }
  const size_t named = value_axes ? value_axes->size() : axes.size();
  if (pads.size() != 2 * named)
    return InvalidArgument("pads: expected " + std::to_string(2 * named) + " values (2 per axis), found " +
                           std::to_string(pads.size()) + " " + Str(pads));
  if (value_axes) {
    // Each dim's pads are those of the axis that names it (none: 0), chosen at each call.
    const int64_t r = x->rank();
    ValueAxesHits(ctx, *value_axes, r);
    std::vector<Sym> per_dim(2 * static_cast<size_t>(r), Sym(0));
    for (int64_t i = 0; i < r; ++i) {
      axes.push_back(static_cast<int>(i));
      for (size_t j = 0; j < named; ++j) {
        const Sym names = NamesDim((*value_axes)[j], i, r);
        per_dim[i] = per_dim[i] + names * pads[j];
        per_dim[i + r] = per_dim[i + r] + names * pads[j + named];
      }
    }
    pads = std::move(per_dim);
  }
  size_t k = axes.size();
  SymShape out = x->shape;
  for (size_t i = 0; i < k; ++i) {
    const Sym& d = x->shape[axes[i]];
    const Sym &pb = pads[i], &pe = pads[i + k];
    // Negative pads crop first (docs/semantics.md): edge, wrap and reflect pad around the
    // elements they leave, which must not be empty, and reflection reaches at most one less
    // than their count. The prologue checks symbolic sizes.
    const Sym left = AddS(AddS(d, Min(pb, Sym(0))), Min(pe, Sym(0)));
    const bool pads_out = !(pb.is_const() && *pb.value() <= 0 && pe.is_const() && *pe.value() <= 0);
    // An axis padded to no element pads nothing: the checks are for axes that keep elements.
    const Sym padded = AddS(AddS(d, pb), pe);
    const bool empty_out = padded.is_const() && *padded.value() == 0;
    if (mode != "constant" && pads_out && !empty_out) {
      if (left.is_const() && *left.value() <= 0)
        return InvalidArgument("pads: " + mode + " padding needs a non-empty axis " + std::to_string(axes[i]) +
                               " (dim " + d.ToString() + ", pads " + pb.ToString() + " and " + pe.ToString() + ")");
      if (!left.is_const()) AddGuard(ctx, Lt(Sym(0), left));
    }
    if (mode == "reflect" && pads_out && !empty_out) {
      if (left.is_const() && pb.is_const() && pe.is_const()) {
        if ((*pb.value() > 0 && *pb.value() >= *left.value()) || (*pe.value() > 0 && *pe.value() >= *left.value()))
          return InvalidArgument("pads: reflect mode expects pads below " + left.ToString() +
                                 ", the elements left on axis " + std::to_string(axes[i]) +
                                 " after its negative pads (dim " + d.ToString() + "), found " + pb.ToString() +
                                 " and " + pe.ToString());
      } else {
        AddGuard(ctx, Lt(pb, left));
        AddGuard(ctx, Lt(pe, left));
      }
    }
    Sym o = AddS(AddS(d, pb), pe);
    if (auto v = o.value(); v && *v < 0)
      return InvalidArgument("pads: expected an output dim >= 0 on axis " + std::to_string(axes[i]) +
                             ", found " + std::to_string(*v) + " (pads " + Str(pads) + ")");
    out[axes[i]] = o;
  }
  ctx.SetOutput(0, x->dtype, out);
  return Status::Ok();
}

Status DepthSpaceMeta(MetaContext& ctx, bool to_space) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* x, Need(ctx, 0, "input"));
  KILN_RETURN_IF_ERROR(CheckRank(*x, "input", 4, 4));
  int64_t b = ctx.attrs().GetInt("blocksize", 0);
  if (b < 1) return InvalidArgument("blocksize: expected >= 1, found " + std::to_string(b));
  int64_t b2 = 0;  // blocksize^2, the channel factor
  if (__builtin_mul_overflow(b, b, &b2))
    return InvalidArgument("blocksize: expected blocksize^2 to fit int64, found blocksize " + std::to_string(b));
  if (to_space) {
    std::string mode(ctx.attrs().GetString("mode", "DCR"));
    if (mode != "DCR" && mode != "CRD")
      return InvalidArgument("mode: expected DCR or CRD, found \"" + mode + "\"");
  }
  const SymShape& s = x->shape;
  SymShape out;
  if (to_space) {
    if (auto c = s[1].value(); c && *c % b2 != 0)
      return InvalidArgument("expected channels divisible by blocksize^2 = " + std::to_string(b2) +
                             ", found " + std::to_string(*c));
    bool exact;
    Sym c = DivExact(s[1], Sym(b2), &exact);
    if (!exact) AddGuard(ctx, Eq(Mod(s[1], b2), 0));
    out = {s[0], c, s[2] * Sym(b), s[3] * Sym(b)};
  } else {
    SymShape hw;
    for (int i = 2; i < 4; ++i) {
      if (auto v = s[i].value(); v && *v % b != 0)
        return InvalidArgument("expected spatial dims divisible by blocksize " + std::to_string(b) +
                               ", found " + Str(s));
      bool exact;
      hw.push_back(DivExact(s[i], Sym(b), &exact));
      if (!exact) AddGuard(ctx, Eq(Mod(s[i], b), 0));
    }
    out = {s[0], s[1] * Sym(b2), hw[0], hw[1]};
  }
  ctx.SetOutput(0, x->dtype, out);
  return Status::Ok();
}

// floor(d * scale), kept symbolic for integer scales and exact small fractions.
Result<Sym> ScaleDim(const Sym& d, double scale) {
  if (!(scale > 0) || !std::isfinite(scale))
    return InvalidArgument("scales: expected positive values, found " + FloatStr(scale));
  constexpr double kInt64End = 9223372036854775808.0;  // 2^63: casting at or above it is undefined
  if (auto v = d.value()) {
    const double out = std::floor(static_cast<double>(*v) * scale);
    if (out >= kInt64End)
      return InvalidArgument("scales: " + FloatStr(scale) + " times dim " + std::to_string(*v) +
                             " does not fit int64");
    return Sym(static_cast<int64_t>(out));
  }
  if (scale >= kInt64End)
    return InvalidArgument("scales: " + FloatStr(scale) + " does not fit int64");
  if (scale == std::floor(scale)) return d * Sym(static_cast<int64_t>(scale));
  for (int64_t q = 2; q <= 1024; ++q) {
    double p = std::round(scale * q);
    if (p / static_cast<double>(q) == scale)
      return FloorDiv(d * Sym(static_cast<int64_t>(p)), q);
  }
  return Unimplemented("Resize scale " + FloatStr(scale) + " on symbolic dim " + d.ToString() +
                       ": expected an integer or an exact small fraction");
}

Status ResizeMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* x, Need(ctx, 0, "X"));
  KILN_RETURN_IF_ERROR(CheckDType(*x, "X", kNumeric));
  std::string mode(ctx.attrs().GetString("mode", "nearest"));
  if (mode != "nearest" && mode != "linear" && mode != "cubic")
    return InvalidArgument("mode: expected nearest, linear or cubic, found \"" + mode + "\"");
  const Value* scales = Optional(ctx, 2);
  const Value* sizes = Optional(ctx, 3);
  if (scales && sizes)
    return InvalidArgument("expected only one of scales and sizes, found both");
  if (!scales && !sizes) return InvalidArgument("expected scales or sizes, found neither");
  std::vector<int> axes;
  if (ctx.attrs().Has("axes")) {
    KILN_ASSIGN_OR_RETURN(axes, NormAxes(ctx.attrs().GetInts("axes"), x->rank()));
  } else {
    for (int i = 0; i < x->rank(); ++i) axes.push_back(i);
  }
  SymShape out = x->shape;
  if (sizes) {
    std::string policy(ctx.attrs().GetString("keep_aspect_ratio_policy", "stretch"));
    if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller")
      return InvalidArgument("keep_aspect_ratio_policy: expected stretch, not_larger or not_smaller, found \"" +
                             policy + "\"");
    KILN_RETURN_IF_ERROR(CheckDType(*sizes, "sizes", kSignedInts));
    KILN_ASSIGN_OR_RETURN(std::vector<Sym> sz, NeedElements(*sizes, "sizes"));
    if (sz.size() != axes.size())
      return InvalidArgument("sizes: expected " + std::to_string(axes.size()) + " values, found " +
                             Str(sz));
    for (size_t i = 0; i < axes.size(); ++i) {
      if (sz[i].is_const() && *sz[i].value() < 0)
        return InvalidArgument("sizes: expected values >= 0, found " + Str(sz));
      out[axes[i]] = sz[i];
    }
    if (policy != "stretch") {
      // One scale for every axis in `axes`: the min (not_larger) or max (not_smaller) of
      // sizes / input, in float as the CPU kernel computes it; each dim is round(in * scale).
      float scale = 0;
      for (size_t i = 0; i < axes.size(); ++i) {
        const auto in = x->shape[axes[i]].value();
        const auto want = sz[i].value();
        if (!in || !want)
          return Unimplemented("keep_aspect_ratio_policy \"" + policy + "\": expected static sizes and input dims "
                               "on the resized axes, found sizes " + Str(sz) + " and X " + Str(x->shape));
        const float s = *in > 0 ? static_cast<float>(*want) / static_cast<float>(*in) : 1.0f;
        scale = i == 0 ? s : policy == "not_larger" ? std::min(scale, s) : std::max(scale, s);
      }
      for (int a : axes) {
        out[a] = Sym(static_cast<int64_t>(std::round(static_cast<float>(*x->shape[a].value()) * scale)));
      }
    }
  } else {
    KILN_RETURN_IF_ERROR(CheckDType(*scales, "scales", kFloats));
    auto sc = FloatElements(*scales);
    if (!sc) {
      // A float32 value input (passes/value_inputs.h): each dim is floor(dim * scale) at run time.
      auto bits = Float32Bits(*scales);
      if (!bits)
        return Unimplemented("data-dependent output shape: scales (" + scales->name +
                             ") is not known at compile time");
      if (bits->size() != axes.size())
        return InvalidArgument("scales: expected " + std::to_string(axes.size()) + " values, found " +
                               std::to_string(bits->size()));
      for (size_t i = 0; i < axes.size(); ++i) {
        const Sym& b = (*bits)[i];  // positive and finite: bits 1 to the largest finite float's
        AddGuard(ctx, Lt(0, b), "whose scales element " + std::to_string(i) + " must be positive");
        AddGuard(ctx, Lt(b, kF32MaxFinite + 1), "whose scales element " + std::to_string(i) + " must be finite");
        out[axes[i]] = FloorMulF32(x->shape[axes[i]], b);
      }
      ctx.SetOutput(0, x->dtype, out);
      return Status::Ok();
    }
    if (sc->size() != axes.size())
      return InvalidArgument("scales: expected " + std::to_string(axes.size()) + " values, found " +
                             std::to_string(sc->size()));
    for (size_t i = 0; i < axes.size(); ++i) {
      KILN_ASSIGN_OR_RETURN(out[axes[i]], ScaleDim(x->shape[axes[i]], (*sc)[i]));
    }
  }
  ctx.SetOutput(0, x->dtype, out);
  return Status::Ok();
}

}  // namespace

void RegisterDataMovementOps(std::vector<OpDef>& ops) {
  Def(ops, "Transpose", TransposeMeta);
  Def(ops, "Concat", ConcatMeta);
  Def(ops, "Split", SplitMeta);
  Def(ops, "Slice", SliceMeta);
  Def(ops, "Gather", GatherMeta);
  Def(ops, "GatherElements", GatherElementsMeta);
  Def(ops, "Pad", PadMeta);
  Def(ops, "DepthToSpace", [](MetaContext& c) { return DepthSpaceMeta(c, true); });
  Def(ops, "SpaceToDepth", [](MetaContext& c) { return DepthSpaceMeta(c, false); });
  Def(ops, "Resize", ResizeMeta);
}

}  // namespace kiln::ir
