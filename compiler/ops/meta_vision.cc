// Meta functions of the detection and vision ops in runtime/kernels/vision.cc: RoiAlign,
// Col2Im, MaxUnpool, DeformConv and NonMaxSuppression. NonMaxSuppression's output size
// depends on the data: with constant inputs the canonical stage folds it, otherwise its
// count of selected boxes is a run-time dim (ir::RuntimeDim).
#include <cstring>

#include "compiler/ops/families.h"
#include "compiler/ops/meta_util.h"
#include "runtime/kernels/non_max_suppression.h"

namespace kiln::ir {
using namespace meta;
namespace {

Status CheckFloat3264(const Value& v, std::string_view what) {
  if (v.dtype != DType::kFloat32 && v.dtype != DType::kFloat64)
    return Unimplemented("input " + std::string(what) + ": Kiln supports float32 and float64, found " +
                         DTypeStr(v.dtype));
  return Status::Ok();
}

Status RoiAlignMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* X, Need(ctx, 0, "X"));
  KILN_ASSIGN_OR_RETURN(const Value* rois, Need(ctx, 1, "rois"));
  KILN_ASSIGN_OR_RETURN(const Value* bi, Need(ctx, 2, "batch_indices"));
  KILN_RETURN_IF_ERROR(CheckFloat3264(*X, "X"));
  KILN_RETURN_IF_ERROR(CheckSameDType(*X, "X", *rois, "rois"));
  if (bi->dtype != DType::kInt64)
    return InvalidArgument("input batch_indices: expected int64, found " + DTypeStr(bi->dtype));
  KILN_RETURN_IF_ERROR(CheckRank(*X, "input X", 4, 4));
  KILN_RETURN_IF_ERROR(CheckRank(*rois, "input rois", 2, 2));
  KILN_RETURN_IF_ERROR(CheckRank(*bi, "input batch_indices", 1, 1));
  KILN_RETURN_IF_ERROR(Unify(ctx, Sym(4), rois->shape[1], "input rois dim 1 (x1, y1, x2, y2)"));
  KILN_RETURN_IF_ERROR(Unify(ctx, rois->shape[0], bi->shape[0], "input batch_indices dim 0 (one per roi)"));
  const std::string ctm(ctx.attrs().GetString("coordinate_transformation_mode", "half_pixel"));
  if (ctm != "half_pixel" && ctm != "output_half_pixel")
    return InvalidArgument("attribute 'coordinate_transformation_mode': expected half_pixel or output_half_pixel, "
                           "found \"" + ctm + "\"");
  const std::string mode(ctx.attrs().GetString("mode", "avg"));
  if (mode != "avg" && mode != "max")
    return InvalidArgument("attribute 'mode': expected avg or max, found \"" + mode + "\"");
  const int64_t oh = ctx.attrs().GetInt("output_height", 1), ow = ctx.attrs().GetInt("output_width", 1);
  if (oh < 1 || ow < 1)
    return InvalidArgument("attributes 'output_height', 'output_width': expected positive values, found " +
                           std::to_string(oh) + ", " + std::to_string(ow));
  if (int64_t s = ctx.attrs().GetInt("sampling_ratio", 0); s < 0)
    return InvalidArgument("attribute 'sampling_ratio': expected >= 0 (0: adaptive), found " + std::to_string(s));
  ctx.SetOutput(0, X->dtype, {rois->shape[0], X->shape[1], Sym(oh), Sym(ow)});
  return Status::Ok();
}

// The block count and size of Col2Im over image_shape and block_shape values that are not all
// constants: value input elements (passes/value_inputs.h), which guards check at each call. The
// CPU kernel reads block_shape and takes the image dims from its output.
Status Col2ImValueBlocks(MetaContext& ctx, const std::vector<Sym>& img, const std::vector<Sym>& blk,
                         const std::vector<int64_t>& dil, const std::vector<int64_t>& str,
                         const std::vector<int64_t>& pads, Sym* block_size, Sym* blocks) {
  const size_t n = img.size();
  for (size_t i = 0; i < n; ++i) {
    KILN_RETURN_IF_ERROR(Require(ctx, Lt(Sym(0), img[i]) * Lt(Sym(0), blk[i]),
                                 "inputs image_shape and block_shape: expected positive values, found " + Str(img) +
                                     " and " + Str(blk),
                                 "whose image_shape and block_shape must be positive"));
    // (img + pads - dilated block) floordiv stride + 1 blocks, at least 1.
    const Sym span = SubS(AddC(img[i], pads[i] + pads[i + n]), AddC(blk[i] * Sym(dil[i]), 1 - dil[i]));
    KILN_RETURN_IF_ERROR(Require(ctx, Lt(Sym(-1), span),
                                 "input image_shape: dim " + std::to_string(i) + " (" + img[i].ToString() +
                                     ") is smaller than the dilated block",
                                 "whose padded image_shape must hold the dilated block"));
    *block_size = *block_size * blk[i];
    *blocks = *blocks * AddC(FloorDiv(span, Sym(str[i])), 1);
  }
  return Status::Ok();
}

Status Col2ImMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* x, Need(ctx, 0, "input"));
  KILN_ASSIGN_OR_RETURN(const Value* image, Need(ctx, 1, "image_shape"));
  KILN_ASSIGN_OR_RETURN(const Value* block, Need(ctx, 2, "block_shape"));
  KILN_RETURN_IF_ERROR(CheckDType(*x, "input", kNumeric));
  KILN_RETURN_IF_ERROR(CheckRank(*x, "input input", 3, 3));
  KILN_ASSIGN_OR_RETURN(std::vector<Sym> image_elements, NeedElements(*image, "image_shape"));
  KILN_ASSIGN_OR_RETURN(std::vector<Sym> block_elements, NeedElements(*block, "block_shape"));
  if (image_elements.empty() || image_elements.size() > static_cast<size_t>(kMaxRank - 2) ||
      block_elements.size() != image_elements.size())
    return InvalidArgument("inputs image_shape and block_shape: expected the same length in 1.." +
                           std::to_string(kMaxRank - 2) + ", found " + Str(image_elements) + " and " +
                           Str(block_elements));
  const size_t n = image_elements.size();
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> dil, IntsAttr(ctx.attrs(), "dilations", n, 1));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> str, IntsAttr(ctx.attrs(), "strides", n, 1));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> pads, IntsAttr(ctx.attrs(), "pads", 2 * n, 0));
  for (size_t i = 0; i < n; ++i)
    if (dil[i] < 1 || str[i] < 1 || pads[i] < 0 || pads[i + n] < 0)
      return InvalidArgument("attributes 'dilations', 'strides', 'pads': expected positive dilations and strides, "
                             "pads >= 0, found " + Str(dil) + ", " + Str(str) + ", " + Str(pads));
  Sym block_size(1), blocks(1);
  const std::optional<std::vector<int64_t>> img_ints = ConstInts(*image), blk_ints = ConstInts(*block);
  if (!img_ints || !blk_ints) {
    KILN_RETURN_IF_ERROR(Col2ImValueBlocks(ctx, image_elements, block_elements, dil, str, pads, &block_size, &blocks));
  } else {
    const std::vector<int64_t> &img = *img_ints, &blk = *blk_ints;
    int64_t size = 1, count = 1;
    for (size_t i = 0; i < n; ++i) {
      if (img[i] < 1 || blk[i] < 1)
        return InvalidArgument("inputs image_shape and block_shape: expected positive values, found " + Str(img) +
                               " and " + Str(blk));
      // nb = (img + pads - dilated block) / stride + 1, every step checked for int64 overflow.
      int64_t padded, dilated, nb = 0;
      const bool overflow = __builtin_add_overflow(img[i], pads[i], &padded) ||
                            __builtin_add_overflow(padded, pads[i + n], &padded) ||
                            __builtin_mul_overflow(dil[i], blk[i] - 1, &dilated) ||
                            __builtin_add_overflow(dilated, 1, &dilated);
      if (overflow)
        return InvalidArgument("dim " + std::to_string(i) + ": image_shape " + Str(img) + ", block_shape " +
                               Str(blk) + ", dilations " + Str(dil) + " and pads " + Str(pads) + " overflow int64");
      if (padded >= dilated) nb = (padded - dilated) / str[i] + 1;
      if (nb < 1)
        return InvalidArgument("input image_shape: dim " + std::to_string(i) + " (" + std::to_string(img[i]) +
                               ") is smaller than the dilated block " + std::to_string(dilated));
      if (__builtin_mul_overflow(size, blk[i], &size) || __builtin_mul_overflow(count, nb, &count))
        return InvalidArgument("inputs image_shape and block_shape: the block size or the number of blocks of " +
                               Str(img) + " and " + Str(blk) + " overflows int64");
    }
    if (auto d = x->shape[1].value(); d && *d % size != 0)
      return InvalidArgument("input input dim 1: expected a multiple of the block size " + std::to_string(size) +
                             ", found " + std::to_string(*d));
    block_size = Sym(size);
    blocks = Sym(count);
  }
  bool exact = true;
  Sym c = DivExact(x->shape[1], block_size, &exact);
  if (!exact) AddGuard(ctx, Eq(x->shape[1], c * block_size), "whose input dim 1 must be a multiple of the block size");
  KILN_RETURN_IF_ERROR(Unify(ctx, blocks, x->shape[2], "input input dim 2 (number of blocks)"));
  SymShape out = {x->shape[0], c};
  out.insert(out.end(), image_elements.begin(), image_elements.end());
  ctx.SetOutput(0, x->dtype, out);
  return Status::Ok();
}

Status MaxUnpoolMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* X, Need(ctx, 0, "X"));
  KILN_ASSIGN_OR_RETURN(const Value* I, Need(ctx, 1, "I"));
  KILN_RETURN_IF_ERROR(CheckDType(*X, "X", kNumeric));
  if (I->dtype != DType::kInt64) return InvalidArgument("input I: expected int64, found " + DTypeStr(I->dtype));
  KILN_RETURN_IF_ERROR(CheckRank(*X, "input X", 3, kMaxRank));
  if (I->rank() != X->rank())
    return InvalidArgument("input I: expected the shape of X " + Str(X->shape) + ", found " + Str(I->shape));
  for (int i = 0; i < X->rank(); ++i)
    KILN_RETURN_IF_ERROR(Unify(ctx, X->shape[i], I->shape[i], "input I dim " + std::to_string(i)));
  const size_t n = X->rank() - 2;
  if (!ctx.attrs().Has("kernel_shape")) return InvalidArgument("attribute 'kernel_shape': required");
  const std::vector<int64_t>& k = ctx.attrs().GetInts("kernel_shape");
  if (k.size() != n)
    return InvalidArgument("attribute 'kernel_shape': expected " + std::to_string(n) + " values, found " + Str(k));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> str, IntsAttr(ctx.attrs(), "strides", n, 1));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> pads, IntsAttr(ctx.attrs(), "pads", 2 * n, 0));
  SymShape inferred = {X->shape[0], X->shape[1]};
  for (size_t i = 0; i < n; ++i) {
    if (k[i] < 1 || str[i] < 1 || pads[i] < 0 || pads[i + n] < 0)
      return InvalidArgument("attributes 'kernel_shape', 'strides', 'pads': expected positive kernel and strides, "
                             "pads >= 0, found " + Str(k) + ", " + Str(str) + ", " + Str(pads));
    // (in - 1) * stride - pads + kernel
    inferred.push_back(AddC(AddC(X->shape[2 + i], -1) * Sym(str[i]), k[i] - pads[i] - pads[i + n]));
  }
  const Value* os = Optional(ctx, 2);
  if (!os) {
    ctx.SetOutput(0, X->dtype, inferred);
    return Status::Ok();
  }
  // Constants, or a value input's elements (passes/value_inputs.h), which guards check at each
  // call; the CPU kernel takes the shape from its output.
  KILN_ASSIGN_OR_RETURN(std::vector<Sym> shape, NeedElements(*os, "output_shape"));
  if (shape.size() != static_cast<size_t>(X->rank()))
    return InvalidArgument("input output_shape: expected " + std::to_string(X->rank()) + " values, found " + Str(shape));
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i < 2) {  // X's batch and channels, guarded equal to the values
      KILN_RETURN_IF_ERROR(Unify(ctx, inferred[i], shape[i], "input output_shape value " + std::to_string(i)));
      if (!shape[i].is_const()) shape[i] = inferred[i];
      continue;
    }
    // The unpooled tensor is placed at the origin of the requested shape, so it must fit.
    KILN_RETURN_IF_ERROR(Require(ctx, Sym(1) - Lt(shape[i], inferred[i]),
                                 "input output_shape: value " + std::to_string(i) + " (" + shape[i].ToString() +
                                     ") is smaller than the unpooled size " + inferred[i].ToString(),
                                 "whose output_shape must hold the unpooled size"));
  }
  ctx.SetOutput(0, X->dtype, shape);
  return Status::Ok();
}

Status DeformConvMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* X, Need(ctx, 0, "X"));
  KILN_ASSIGN_OR_RETURN(const Value* W, Need(ctx, 1, "W"));
  KILN_ASSIGN_OR_RETURN(const Value* off, Need(ctx, 2, "offset"));
  const Value* B = Optional(ctx, 3);
  const Value* mask = Optional(ctx, 4);
  KILN_RETURN_IF_ERROR(CheckFloat3264(*X, "X"));
  KILN_RETURN_IF_ERROR(CheckSameDType(*X, "X", *W, "W"));
  KILN_RETURN_IF_ERROR(CheckSameDType(*X, "X", *off, "offset"));
  if (X->rank() != 4)
    return Unimplemented("input X: Kiln implements 2-D DeformConv ([N, C, H, W]), found " + Str(X->shape));
  KILN_RETURN_IF_ERROR(CheckRank(*W, "input W", 4, 4));
  KILN_RETURN_IF_ERROR(CheckRank(*off, "input offset", 4, 4));
  const int64_t group = ctx.attrs().GetInt("group", 1), og = ctx.attrs().GetInt("offset_group", 1);
  if (group < 1) return InvalidArgument("attribute 'group': expected >= 1, found " + std::to_string(group));
  if (og < 1) return InvalidArgument("attribute 'offset_group': expected >= 1, found " + std::to_string(og));
  std::vector<int64_t> kernel;
  if (ctx.attrs().Has("kernel_shape")) {
    kernel = ctx.attrs().GetInts("kernel_shape");
    if (kernel.size() != 2) return InvalidArgument("attribute 'kernel_shape': expected 2 values, found " + Str(kernel));
  } else {
    for (int i = 2; i < 4; ++i) {
      auto d = W->shape[i].value();
      if (!d) return Unimplemented("input W: spatial dims must be static without kernel_shape, found " + Str(W->shape));
      kernel.push_back(*d);
    }
  }
  for (int i = 0; i < 2; ++i)
    KILN_RETURN_IF_ERROR(Unify(ctx, Sym(kernel[i]), W->shape[2 + i], "input W dim " + std::to_string(2 + i) +
                                                                          " (kernel_shape)"));
  KILN_RETURN_IF_ERROR(Unify(ctx, X->shape[1], W->shape[1] * Sym(group), "input X dim 1 (W dim 1 * group)"));
  if (auto oc = W->shape[0].value(); oc && *oc % group != 0)
    return InvalidArgument("input W dim 0: expected a multiple of group " + std::to_string(group) + ", found " +
                           std::to_string(*oc));
  if (auto c = X->shape[1].value(); c && *c % og != 0)
    return InvalidArgument("input X dim 1: expected a multiple of offset_group " + std::to_string(og) + ", found " +
                           std::to_string(*c));
  KILN_ASSIGN_OR_RETURN(Window w, ReadWindow(ctx.attrs(), kernel, true));
  KILN_ASSIGN_OR_RETURN(SymShape spatial, WindowOutput(ctx, {X->shape[2], X->shape[3]}, w));
  int64_t masks, offsets;  // offset_group * kH * kW, and * 2
  if (__builtin_mul_overflow(og, kernel[0], &masks) || __builtin_mul_overflow(masks, kernel[1], &masks) ||
      __builtin_mul_overflow(masks, 2, &offsets))
    return InvalidArgument("attributes 'offset_group' " + std::to_string(og) + " and 'kernel_shape' " + Str(kernel) +
                           ": offset_group * kH * kW * 2 overflows int64");
  KILN_RETURN_IF_ERROR(Unify(ctx, X->shape[0], off->shape[0], "input offset dim 0 (batch)"));
  KILN_RETURN_IF_ERROR(Unify(ctx, Sym(offsets), off->shape[1], "input offset dim 1 (offset_group * kH * kW * 2)"));
  KILN_RETURN_IF_ERROR(Unify(ctx, spatial[0], off->shape[2], "input offset dim 2 (output height)"));
  KILN_RETURN_IF_ERROR(Unify(ctx, spatial[1], off->shape[3], "input offset dim 3 (output width)"));
  if (B) {
    KILN_RETURN_IF_ERROR(CheckSameDType(*X, "X", *B, "B"));
    KILN_RETURN_IF_ERROR(CheckRank(*B, "input B", 1, 1));
    KILN_RETURN_IF_ERROR(Unify(ctx, W->shape[0], B->shape[0], "input B dim 0 (output channels)"));
  }
  if (mask) {
    KILN_RETURN_IF_ERROR(CheckSameDType(*X, "X", *mask, "mask"));
    KILN_RETURN_IF_ERROR(CheckRank(*mask, "input mask", 4, 4));
    KILN_RETURN_IF_ERROR(Unify(ctx, X->shape[0], mask->shape[0], "input mask dim 0 (batch)"));
    KILN_RETURN_IF_ERROR(Unify(ctx, Sym(masks), mask->shape[1], "input mask dim 1 (offset_group * kH * kW)"));
    KILN_RETURN_IF_ERROR(Unify(ctx, spatial[0], mask->shape[2], "input mask dim 2 (output height)"));
    KILN_RETURN_IF_ERROR(Unify(ctx, spatial[1], mask->shape[3], "input mask dim 3 (output width)"));
  }
  ctx.SetOutput(0, X->dtype, {X->shape[0], W->shape[0], spatial[0], spatial[1]});
  return Status::Ok();
}

// The value of a scalar (or one-element) optional input, or `def` when it is absent or empty;
// the input, when present, is a constant.
Result<double> OptionalScalar(MetaContext& ctx, int i, std::string_view what, double def) {
  const Value* v = Optional(ctx, i);
  if (!v) return def;
  if (v->data->num_elements() != 1)
    return InvalidArgument("input " + std::string(what) + ": expected one value, found " + Str(v->data->dims));
  return v->data->FloatAt(0);
}

Status NonMaxSuppressionMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* boxes, Need(ctx, 0, "boxes"));
  KILN_ASSIGN_OR_RETURN(const Value* scores, Need(ctx, 1, "scores"));
  if (boxes->dtype != DType::kFloat32)
    return InvalidArgument("input boxes: expected float32, found " + DTypeStr(boxes->dtype));
  if (scores->dtype != DType::kFloat32)
    return InvalidArgument("input scores: expected float32, found " + DTypeStr(scores->dtype));
  KILN_RETURN_IF_ERROR(CheckRank(*boxes, "input boxes", 3, 3));
  KILN_RETURN_IF_ERROR(CheckRank(*scores, "input scores", 3, 3));
  KILN_RETURN_IF_ERROR(Unify(ctx, Sym(4), boxes->shape[2], "input boxes dim 2 (four coordinates)"));
  KILN_RETURN_IF_ERROR(Unify(ctx, boxes->shape[0], scores->shape[0], "input scores dim 0 (batches)"));
  KILN_RETURN_IF_ERROR(Unify(ctx, boxes->shape[1], scores->shape[2], "input scores dim 2 (boxes)"));
  const int64_t center = ctx.attrs().GetInt("center_point_box", 0);
  if (center != 0 && center != 1)
    return InvalidArgument("attribute 'center_point_box': expected 0 or 1, found " + std::to_string(center));
  if (const Value* m = Optional(ctx, 2); m && m->dtype != DType::kInt64)
    return InvalidArgument("input max_output_boxes_per_class: expected int64, found " + DTypeStr(m->dtype));
  for (int i : {3, 4})
    if (const Value* t = Optional(ctx, i); t && t->dtype != DType::kFloat32)
      return InvalidArgument(std::string("input ") + (i == 3 ? "iou_threshold" : "score_threshold") +
                             ": expected float32, found " + DTypeStr(t->dtype));
  // The number of selected boxes, the output's dim 0, depends on the data: known at compile
  // time when every input is a constant, else a run-time dim of at most batches x classes x
  // min(max_output_boxes_per_class, boxes).
  bool all_const = boxes->is_const() && scores->is_const();
  for (int i : {2, 3, 4})
    if (const Value* v = Optional(ctx, i); v && !v->is_const()) all_const = false;
  if (!all_const) {
    Sym per_class = 0;  // an absent max_output_boxes_per_class selects nothing
    if (const Value* m = Optional(ctx, 2)) {
      per_class = boxes->shape[1];
      if (m->is_const() && m->data->num_elements() == 1) per_class = Min(per_class, Sym(m->data->IntAt(0)));
      else if (m->sym && m->sym->size() == 1) per_class = Min(per_class, (*m->sym)[0]);
    }
    const Sym selected = NewRuntimeDim(ctx, 0, boxes->shape[0] * scores->shape[1] * Max(Sym(0), per_class),
                                    "count of selected boxes");
    ctx.SetOutput(0, DType::kInt64, {selected, Sym(3)});
    return Status::Ok();
  }
  cpu::NmsParams p;
  KILN_ASSIGN_OR_RETURN(double max_out, OptionalScalar(ctx, 2, "max_output_boxes_per_class", 0));
  KILN_ASSIGN_OR_RETURN(double iou, OptionalScalar(ctx, 3, "iou_threshold", 0));
  KILN_ASSIGN_OR_RETURN(double thr, OptionalScalar(ctx, 4, "score_threshold", 0));
  p.batches = boxes->data->dims[0];
  p.boxes = boxes->data->dims[1];
  p.classes = scores->data->dims[1];
  p.center_point_box = center == 1;
  p.max_per_class = max_out < 0 ? 0 : static_cast<int64_t>(max_out);
  p.iou_threshold = static_cast<float>(iou);
  p.has_score_threshold = Optional(ctx, 4) != nullptr;
  p.score_threshold = static_cast<float>(thr);
  std::vector<int64_t> order(p.boxes), kept(p.boxes);
  const auto* bx = reinterpret_cast<const float*>(boxes->data->bytes.data());
  const auto* sc = reinterpret_cast<const float*>(scores->data->bytes.data());
  const int64_t selected = cpu::NmsSelect(bx, sc, p, order.data(), kept.data(), [](int64_t, int64_t, int64_t) {});
  ctx.SetOutput(0, DType::kInt64, {Sym(selected), Sym(3)});
  return Status::Ok();
}

}  // namespace

void RegisterVisionOps(std::vector<OpDef>& ops) {
  Def(ops, "RoiAlign", RoiAlignMeta);
  Def(ops, "Col2Im", Col2ImMeta);
  Def(ops, "MaxUnpool", MaxUnpoolMeta);
  Def(ops, "DeformConv", DeformConvMeta);
  Def(ops, "NonMaxSuppression", NonMaxSuppressionMeta);
}

}  // namespace kiln::ir
