#include "compiler/passes/qdq.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>

#include "compiler/passes/canonicalize.h"
#include "compiler/passes/constant_fold.h"
#include "runtime/kernels/matmul_integer_trans_b.h"
#include "runtime/kernels/nhwc_conv_int8.h"
#include "runtime/op_table.h"

namespace kiln::passes {
namespace {

bool IsInt8(DType t) { return t == DType::kInt8 || t == DType::kUInt8; }

// Who produces and how many read each value of the top-level nodes (model outputs count as
// readers).
struct Graph {
  std::vector<int> producer, readers;
  std::vector<int32_t> scopes;
  explicit Graph(const ir::Trace& t) : producer(t.values.size(), -1), readers(t.values.size(), 0) {
    for (size_t i = 0; i < t.body.nodes.size(); ++i) {
      const ir::Node& n = t.body.nodes[i];
      for (ir::ValueId id : n.inputs)
        if (id != ir::kNoValue) ++readers[static_cast<size_t>(id)];
      for (ir::ValueId id : n.outputs)
        if (id != ir::kNoValue) producer[static_cast<size_t>(id)] = static_cast<int>(i);
      // A subgraph's reads keep a value alive too.
      for (const auto& [name, block] : n.blocks)
        for (const ir::Node& m : block->nodes)
          for (ir::ValueId id : m.inputs)
            if (id != ir::kNoValue) ++readers[static_cast<size_t>(id)];
    }
    for (ir::ValueId id : t.outputs) ++readers[static_cast<size_t>(id)];
    scopes = ir::LoopScopes(t.body.nodes);
  }
  const ir::Node* Producer(const ir::Trace& t, ir::ValueId v, std::string_view op) const {
    if (v == ir::kNoValue || producer[static_cast<size_t>(v)] < 0) return nullptr;
    const ir::Node& n = t.body.nodes[static_cast<size_t>(producer[static_cast<size_t>(v)])];
    return n.op == op ? &n : nullptr;
  }
};

// One quantization: a DequantizeLinear's or QuantizeLinear's int8 tensor, scale and zero point.
struct Quant {
  ir::ValueId q = ir::kNoValue, scale = ir::kNoValue, zero_point = ir::kNoValue;
  int axis = 1;  // normalized against q's rank
};

const ir::ConstData* ConstOf(const ir::Trace& t, ir::ValueId v) {
  return v != ir::kNoValue && t.value(v).is_const() ? t.value(v).data.get() : nullptr;
}

// Checks a DequantizeLinear or QuantizeLinear `n` whose int8 side is `q`: a float32 constant
// scale and a constant zero point of q's dtype (or none), one element each or, with
// `per_axis` > 0, that many along `channel_axis` of q. "" or why not.
std::string ReadQuant(const ir::Trace& t, const ir::Node& n, ir::ValueId q, int64_t per_axis, int channel_axis,
                      Quant* out) {
  out->q = q;
  out->scale = n.inputs.size() > 1 ? n.inputs[1] : ir::kNoValue;
  out->zero_point = n.inputs.size() > 2 ? n.inputs[2] : ir::kNoValue;
  const ir::Value& qv = t.value(q);
  if (!IsInt8(qv.dtype))
    return fmt::format("{} '{}' quantizes to {}, not int8 or uint8", n.op, n.name, DTypeName(qv.dtype));
  if (n.attrs.GetInt("block_size", 0) != 0) return fmt::format("{} '{}' is blocked", n.op, n.name);
  const ir::ConstData* s = ConstOf(t, out->scale);
  const ir::ConstData* z = ConstOf(t, out->zero_point);
  if (!s || s->dtype != DType::kFloat32)
    return fmt::format("{} '{}' has a scale that is not a float32 constant", n.op, n.name);
  if (out->zero_point != ir::kNoValue && (!z || z->dtype != qv.dtype))
    return fmt::format("{} '{}' has a zero point that is not a constant of its tensor's dtype", n.op, n.name);
  const int64_t count = s->num_elements();
  if (count != 1) {
    int64_t axis = n.attrs.GetInt("axis", 1);
    if (axis < 0) axis += qv.rank();
    if (per_axis <= 0 || axis != channel_axis || count != per_axis || s->dims.size() != 1)
      return fmt::format("{} '{}' has {} scales (expected {})", n.op, n.name, count,
                         per_axis > 0 ? fmt::format("1 or {} along axis {}", per_axis, channel_axis) : "1");
  }
  if (z && z->num_elements() != count)
    return fmt::format("{} '{}' has {} zero points for {} scales", n.op, n.name, z->num_elements(), count);
  for (int64_t i = 0; i < count; ++i)
    if (!(s->FloatAt(i) > 0) || !std::isfinite(s->FloatAt(i)))
      return fmt::format("{} '{}' has a scale of {} (a scale must be positive and finite)", n.op, n.name,
                         s->FloatAt(i));
  out->axis = channel_axis;
  return "";
}

std::shared_ptr<ir::ConstData> MakeConst(DType dtype, std::vector<int64_t> dims, const void* bytes, size_t size) {
  auto d = std::make_shared<ir::ConstData>();
  d->dtype = dtype;
  d->dims = std::move(dims);
  d->bytes.assign(static_cast<const uint8_t*>(bytes), static_cast<const uint8_t*>(bytes) + size);
  return d;
}

ir::ValueId AddConst(ir::Trace& t, std::string name, std::shared_ptr<ir::ConstData> data) {
  ir::Value v;
  v.name = std::move(name);
  v.dtype = data->dtype;
  for (int64_t d : data->dims) v.shape.push_back(d);
  v.data = std::move(data);
  return t.AddValue(std::move(v));
}

// `zp`, or a new zero of `dtype` when the quantization has none (ONNX's default).
ir::ValueId ZeroPointOr(ir::Trace& t, ir::ValueId zp, DType dtype, const std::string& name) {
  if (zp != ir::kNoValue) return zp;
  const uint8_t zero = 0;
  return AddConst(t, name + "#zero_point", MakeConst(dtype, {}, &zero, 1));
}

// The lowest value of an int8 or uint8 dtype.
int64_t Lowest(DType t) { return t == DType::kInt8 ? -128 : 0; }

// A fold: the integer node that replaces the node at `at`, and the nodes it absorbs.
struct Fold {
  size_t at = 0;
  ir::Node node;
  std::vector<size_t> absorbed;
};

class Folder {
 public:
  Folder(ir::Trace& t, const Graph& g) : t_(t), g_(g) {}

  // Tries the Conv or MatMul at `i`; "" with `fold` filled, else why not ("" and no fold when
  // no QuantizeLinear reads it: nothing to say).
  std::string Try(size_t i, std::optional<Fold>* fold) {
    const ir::Node& op = t_.body.nodes[i];
    if (op.outputs.size() != 1 || op.inputs.size() < 2) return "";
    // The float product, read only by the QuantizeLinear (or a Relu that it alone reads).
    size_t relu = SIZE_MAX;
    const ir::Node* q = SoleReader(op.outputs[0], i);
    if (q && q->op == "Relu") {
      relu = Index(*q);
      q = SoleReader(q->outputs[0], relu);
    }
    if (!q || q->op != "QuantizeLinear") return "";
    const size_t qi = Index(*q);
    const std::string what = fmt::format("{} '{}'", op.op, op.name);
    if (q->when != op.when || g_.scopes[qi] != g_.scopes[i] ||
        (relu != SIZE_MAX && (t_.body.nodes[relu].when != op.when || g_.scopes[relu] != g_.scopes[i])))
      return what + ": its QuantizeLinear runs under other conditions";
    Quant y;
    if (std::string why = ReadQuant(t_, *q, q->outputs[0], 0, 0, &y); !why.empty()) return what + ": " + why;
    if (relu != SIZE_MAX) {
      const ir::ConstData* z = ConstOf(t_, y.zero_point);
      if ((z ? z->IntAt(0) : 0) != Lowest(t_.value(y.q).dtype))
        return what + ": a Relu before a QuantizeLinear whose zero point is not its lowest value";
    }
    // X (A) through its DequantizeLinear, one scale.
    const ir::Node* dx = g_.Producer(t_, op.inputs[0], "DequantizeLinear");
    if (!dx) return what + ": its input is not a DequantizeLinear's";
    Quant x;
    if (std::string why = ReadQuant(t_, *dx, dx->inputs[0], 0, 0, &x); !why.empty()) return what + ": " + why;
    // W (B), a constant, through its DequantizeLinear: one scale or one per output channel.
    const ir::Node* dw = g_.Producer(t_, op.inputs[1], "DequantizeLinear");
    if (!dw || !ConstOf(t_, dw->inputs[0])) return what + ": its weight is not a DequantizeLinear of a constant";
    const ir::Value& wv = t_.value(dw->inputs[0]);
    const bool conv = op.op == "Conv", gemm = op.op == "Gemm";
    if (!conv && wv.rank() != 2) return what + ": a weight of rank " + std::to_string(wv.rank()) + ", not 2";
    if (conv && wv.rank() < 3) return what + ": a weight of rank " + std::to_string(wv.rank());
    const bool trans_b = gemm && op.attrs.GetInt("transB", 0) != 0;
    const float alpha = gemm ? op.attrs.GetFloat("alpha", 1.0f) : 1.0f;
    if (gemm && op.attrs.GetInt("transA", 0) != 0) return what + ": transA";
    if (gemm && op.inputs.size() > 2 && op.inputs[2] != ir::kNoValue && op.attrs.GetFloat("beta", 1.0f) != 1.0f)
      return what + ": beta other than 1";
    if (!(alpha > 0) || !std::isfinite(alpha)) return what + ": alpha not positive and finite";
    // W's output channels: Conv's dim 0, B's columns (dim 0 of a transposed B).
    const int channel_axis = conv || trans_b ? 0 : 1;
    const int64_t channels = ConstOf(t_, dw->inputs[0])->dims[static_cast<size_t>(channel_axis)];
    Quant w;
    if (std::string why = ReadQuant(t_, *dw, dw->inputs[0], channels, channel_axis, &w); !why.empty())
      return what + ": " + why;

    Fold f;
    f.at = i;
    f.absorbed.push_back(qi);
    if (relu != SIZE_MAX) f.absorbed.push_back(relu);
    ir::Node& n = f.node;
    n.op = conv ? "QLinearConv" : gemm ? "QGemm" : "QLinearMatMul";
    n.name = op.name;
    n.when = op.when;
    if (conv) n.attrs = op.attrs;
    if (gemm) {
      n.attrs.SetFloat("alpha", alpha);
      n.attrs.SetInt("transB", trans_b ? 1 : 0);
    }
    n.inputs = {x.q,
                x.scale,
                ZeroPointOr(t_, x.zero_point, t_.value(x.q).dtype, op.name + "_x"),
                w.q,
                w.scale,
                ZeroPointOr(t_, w.zero_point, wv.dtype, op.name + "_w"),
                y.scale,
                ZeroPointOr(t_, y.zero_point, t_.value(y.q).dtype, op.name + "_y")};
    n.outputs = {q->outputs[0]};
    ir::ValueId bias = ir::kNoValue;
    if ((conv || gemm) && op.inputs.size() > 2 && op.inputs[2] != ir::kNoValue) {
      Result<ir::ValueId> b = IntBias(op, op.inputs[2], x, w, channels, alpha);
      if (!b.ok()) return what + ": " + std::string(b.status().message());
      bias = *b;
    }
    if (conv && bias != ir::kNoValue) n.inputs.push_back(bias);
    if (gemm) {  // QGemm: A, a_scale, a_zero_point, B, b_scale, b_zero_point, C, y_scale, y_zero_point
      const ir::ValueId ys = n.inputs[6], yzp = n.inputs[7];
      n.inputs.resize(6);
      n.inputs.insert(n.inputs.end(), {bias, ys, yzp});
    }
    *fold = std::move(f);
    return "";
  }

 private:
  size_t Index(const ir::Node& n) const { return static_cast<size_t>(&n - t_.body.nodes.data()); }

  // The one node that reads `v` (a top-level node after `after`), or null.
  const ir::Node* SoleReader(ir::ValueId v, size_t after) const {
    if (g_.readers[static_cast<size_t>(v)] != 1) return nullptr;
    for (size_t k = after + 1; k < t_.body.nodes.size(); ++k)
      for (ir::ValueId in : t_.body.nodes[k].inputs)
        if (in == v) return &t_.body.nodes[k];
    return nullptr;
  }

  // Conv's or Gemm's float bias `b` as QLinearConv's or QGemm's int32 bias in the scale
  // alpha * xs * ws[c]: the int32 tensor of its DequantizeLinear where that has this scale and
  // zero point 0, else rounded. Gemm's C must have one value per column ([N] or [1, N]).
  Result<ir::ValueId> IntBias(const ir::Node& conv, ir::ValueId b, const Quant& x, const Quant& w, int64_t channels,
                              float alpha) {
    const ir::ConstData* xs = ConstOf(t_, x.scale);
    const ir::ConstData* ws = ConstOf(t_, w.scale);
    const auto scale = [&](int64_t c) {
      return static_cast<double>(alpha) * xs->FloatAt(0) * ws->FloatAt(ws->num_elements() == 1 ? 0 : c);
    };
    if (const ir::Value& bv = t_.value(b); bv.rank() > 2 || (bv.rank() == 2 && bv.shape[0].value() != 1))
      return Unimplemented("its bias is not one value per output channel");
    std::vector<double> values(static_cast<size_t>(channels));
    if (const ir::Node* db = g_.Producer(t_, b, "DequantizeLinear"); db && ConstOf(t_, db->inputs[0])) {
      const ir::ConstData* bq = ConstOf(t_, db->inputs[0]);
      const ir::ConstData* bs = ConstOf(t_, db->inputs.size() > 1 ? db->inputs[1] : ir::kNoValue);
      const ir::ConstData* bz = ConstOf(t_, db->inputs.size() > 2 ? db->inputs[2] : ir::kNoValue);
      if (bq->dtype != DType::kInt32 || bq->num_elements() != channels || !bs ||
          (bs->num_elements() != 1 && bs->num_elements() != channels) ||
          (bz && bz->num_elements() != bs->num_elements()) ||
          (db->inputs.size() > 2 && db->inputs[2] != ir::kNoValue && !bz))
        return Unimplemented("its bias is not an int32 DequantizeLinear of " + std::to_string(channels) + " constants");
      bool same = true;
      for (int64_t c = 0; c < channels; ++c) {
        const int64_t k = bs->num_elements() == 1 ? 0 : c;
        const double zp = bz ? static_cast<double>(bz->IntAt(k)) : 0.0;
        same = same && zp == 0 && static_cast<float>(bs->FloatAt(k)) == static_cast<float>(scale(c)) &&
               t_.value(b).rank() == 1;
        values[static_cast<size_t>(c)] = (static_cast<double>(bq->IntAt(c)) - zp) * bs->FloatAt(k);
      }
      if (same) return db->inputs[0];
    } else if (const ir::ConstData* bf = ConstOf(t_, b); bf && bf->num_elements() == channels) {
      for (int64_t c = 0; c < channels; ++c) values[static_cast<size_t>(c)] = bf->FloatAt(c);
    } else {
      return Unimplemented("its bias is not a constant");
    }
    std::vector<int32_t> q(static_cast<size_t>(channels));
    for (int64_t c = 0; c < channels; ++c) {
      const double v = std::nearbyint(values[static_cast<size_t>(c)] / scale(c));
      if (!(std::abs(v) <= std::numeric_limits<int32_t>::max()))
        return Unimplemented(
            fmt::format("its bias {} is beyond int32 in the scale {}", values[static_cast<size_t>(c)], scale(c)));
      q[static_cast<size_t>(c)] = static_cast<int32_t>(v);
    }
    return AddConst(t_, conv.name + "#int32_bias", MakeConst(DType::kInt32, {channels}, q.data(), q.size() * 4));
  }

  ir::Trace& t_;
  const Graph& g_;
};

// The Conv and MatMul nodes that fold, with the reasons of those that do not.
std::vector<Fold> FindFolds(ir::Trace& t, std::vector<std::string>* unfolded) {
  const Graph g(t);
  Folder folder(t, g);
  std::vector<Fold> folds;
  for (size_t i = 0; i < t.body.nodes.size(); ++i) {
    const std::string& op = t.body.nodes[i].op;
    if (op != "Conv" && op != "MatMul" && op != "Gemm") continue;
    std::optional<Fold> f;
    std::string why = folder.Try(i, &f);
    if (!why.empty() && unfolded) unfolded->push_back(std::move(why));
    if (f) folds.push_back(std::move(*f));
  }
  return folds;
}

// ---- The CUDA plan: quantized MatMul, Gemm and Conv on cuBLASLt's and cuDNN's int8 kernels ------

// `shape` permuted: element i is shape[perm[i]] (ONNX Transpose).
ir::SymShape Permuted(const ir::SymShape& shape, const std::vector<int64_t>& perm) {
  ir::SymShape out;
  for (int64_t p : perm) out.push_back(shape[static_cast<size_t>(p)]);
  return out;
}

// A new value of `dtype` with the shape of `like`.
ir::ValueId AddLike(ir::Trace& t, ir::ValueId like, DType dtype, std::string name) {
  ir::Value v;
  v.name = std::move(name);
  v.dtype = dtype;
  v.shape = t.value(like).shape;
  return t.AddValue(std::move(v));
}

// Builds a folded group's nodes for the CUDA plan (CudaIntegerOps), appending them to `out`.
class CudaGroup {
 public:
  CudaGroup(ir::Trace& t, const Fold& f, const ir::Node& op, std::vector<ir::Node>* out)
      : t_(t), q_(f.node), op_(op), out_(out) {}

  // "" with the nodes written, or why not (then nothing is to be kept of `out`).
  std::string Build() {
    const bool conv = q_.op == "QLinearConv";
    x_ = q_.inputs[0];
    product_ = op_.outputs[0];
    const ir::ValueId bias = q_.op == "QGemm" ? q_.inputs[6] : conv && q_.inputs.size() > 8 ? q_.inputs[8] : ir::kNoValue;
    if (t_.value(product_).dtype != DType::kFloat32) return "its product is not float32";
    if (t_.value(x_).rank() < 2) return "its input is 1-D";
    w_ = ConstOf(t_, q_.inputs[3]);
    w_u8_ = w_->dtype == DType::kUInt8;
    const int64_t w_shift = w_u8_ ? 128 : 0;
    const ir::ConstData* wz = ConstOf(t_, q_.inputs[5]);
    for (int64_t i = 0; i < wz->num_elements(); ++i)
      if (wz->IntAt(i) != w_shift)
        return fmt::format("a weight zero point of {} (the int8 kernels take a {} weight with zero point {})",
                           wz->IntAt(i), DTypeName(w_->dtype), w_shift);
    za_ = ConstOf(t_, q_.inputs[2])->IntAt(0) - (t_.value(x_).dtype == DType::kUInt8 ? 128 : 0);
    bias_ = ConstOf(t_, bias);
    const std::string why = conv && !PointwiseConv() ? Conv() : Gemm(conv);
    if (!why.empty()) out_->clear();
    return why;
  }

 private:
  // W's element i as int8 (a uint8 W less 128).
  int64_t W8(int64_t i) const {
    const uint8_t b = w_->bytes[static_cast<size_t>(i)];
    return w_u8_ ? int64_t{b} - 128 : int64_t{static_cast<int8_t>(b)};
  }

  // Whether the Conv is pointwise (1 x 1 taps, strides 1, no pads, one group): the GEMM of X's
  // channels-last rows by W [M, C].
  bool PointwiseConv() const {
    for (size_t d = 2; d < w_->dims.size(); ++d)
      if (w_->dims[d] != 1) return false;
    if (op_.attrs.GetInt("group", 1) != 1) return false;
    for (int64_t v : op_.attrs.GetInts("strides"))
      if (v != 1) return false;
    for (int64_t v : op_.attrs.GetInts("pads"))
      if (v != 0) return false;
    return true;
  }

  ir::Node& Add(std::string op, const std::string& suffix, std::vector<ir::ValueId> inputs, ir::ValueId output) {
    ir::Node n;
    n.op = std::move(op);
    n.name = op_.name + suffix;
    n.when = op_.when;
    n.inputs = std::move(inputs);
    n.outputs = {output};
    out_->push_back(std::move(n));
    return out_->back();
  }
  ir::ValueId Constant(const std::string& suffix, DType dtype, std::vector<int64_t> dims, const void* bytes,
                       size_t size) {
    return AddConst(t_, op_.name + suffix, MakeConst(dtype, std::move(dims), bytes, size));
  }
  ir::ValueId Transposed(ir::ValueId v, const std::vector<int64_t>& perm, const std::string& suffix, DType dtype) {
    const ir::ValueId r = AddLike(t_, v, dtype, op_.name + suffix);
    t_.value(r).shape = Permuted(t_.value(v).shape, perm);
    Add("Transpose", suffix, {v}, r).attrs.SetInts("perm", perm);
    return r;
  }

  // X as int8: x - 128 for a uint8 X (elementwise ops of the generated kernel before the GEMM).
  ir::ValueId Int8Input() {
    if (t_.value(x_).dtype == DType::kInt8) return x_;
    const ir::ValueId wide = AddLike(t_, x_, DType::kInt32, op_.name + "#x_int32");
    const ir::ValueId shifted = AddLike(t_, x_, DType::kInt32, op_.name + "#x_shifted");
    const ir::ValueId a8 = AddLike(t_, x_, DType::kInt8, op_.name + "#x_int8");
    const int32_t k128 = 128;
    Add("Cast", "#x_int32", {x_}, wide).attrs.SetInt("to", static_cast<int64_t>(DType::kInt32));
    Add("Sub", "#x_shift", {wide, Constant("#128", DType::kInt32, {}, &k128, 4)}, shifted);
    Add("Cast", "#x_int8", {shifted}, a8).attrs.SetInt("to", static_cast<int64_t>(DType::kInt8));
    return a8;
  }

  // The offset of output channel c: C'[c] - za * (the sum of W8's taps of c); "" or why not.
  std::string Offsets(int64_t channels, const std::vector<int64_t>& tap_sums, std::vector<int64_t>* offsets) const {
    offsets->resize(static_cast<size_t>(channels));
    for (int64_t c = 0; c < channels; ++c) {
      const int64_t o = (bias_ ? bias_->IntAt(c) : 0) - za_ * tap_sums[static_cast<size_t>(c)];
      if (o < std::numeric_limits<int32_t>::min() || o > std::numeric_limits<int32_t>::max())
        return fmt::format("its offset {} at channel {} is beyond int32", o, c);
      (*offsets)[static_cast<size_t>(c)] = o;
    }
    return "";
  }

  // float(sums) + offsets, times alpha * xs * ws[c], into `dst` (channels last).
  void Rescale(ir::ValueId sums, const std::vector<int64_t>& offsets, ir::ValueId dst) {
    const int64_t channels = static_cast<int64_t>(offsets.size());
    const bool any = std::any_of(offsets.begin(), offsets.end(), [](int64_t o) { return o != 0; });
    const bool int_sums = t_.value(sums).dtype == DType::kInt32;
    if (any && int_sums) {
      std::vector<int32_t> o(offsets.begin(), offsets.end());
      const ir::ValueId sum = AddLike(t_, sums, DType::kInt32, op_.name + "#int32_offset_added");
      Add("Add", "#offset", {sums, Constant("#int32_offset", DType::kInt32, {channels}, o.data(), o.size() * 4)}, sum);
      sums = sum;
    }
    ir::ValueId wide = sums;
    if (int_sums) {
      wide = AddLike(t_, sums, DType::kFloat32, op_.name + "#float");
      Add("Cast", "#float", {sums}, wide).attrs.SetInt("to", static_cast<int64_t>(DType::kFloat32));
    } else if (any) {  // cuDNN's float sums: the offsets in float (exact below 2^24)
      std::vector<float> o(offsets.begin(), offsets.end());
      const ir::ValueId sum = AddLike(t_, sums, DType::kFloat32, op_.name + "#offset_added");
      Add("Add", "#offset", {sums, Constant("#offset", DType::kFloat32, {channels}, o.data(), o.size() * 4)}, sum);
      wide = sum;
    }
    const ir::ConstData* xs = ConstOf(t_, q_.inputs[1]);
    const ir::ConstData* ws = ConstOf(t_, q_.inputs[4]);
    const float alpha = q_.op == "QGemm" ? q_.attrs.GetFloat("alpha", 1.0f) : 1.0f;
    std::vector<float> scale(static_cast<size_t>(ws->num_elements()));
    for (size_t c = 0; c < scale.size(); ++c)
      scale[c] = static_cast<float>(double{alpha} * xs->FloatAt(0) * ws->FloatAt(static_cast<int64_t>(c)));
    const std::vector<int64_t> dims = scale.size() == 1 ? std::vector<int64_t>{} : std::vector<int64_t>{channels};
    Add("Mul", "#scale", {wide, Constant("#scale", DType::kFloat32, dims, scale.data(), scale.size() * 4)}, dst);
  }

  // MatMul, Gemm and a pointwise Conv on cuBLASLt's int8 GEMM (kiln.MatMulIntegerTransB).
  std::string Gemm(bool conv) {
    const bool trans_b = conv || q_.attrs.GetInt("transB", 0) != 0;
    const int64_t k = w_->dims[trans_b ? 1 : 0], n = w_->dims[trans_b ? 0 : 1];
    if (k % 4 != 0 || n % 4 != 0)
      return fmt::format("cuBLASLt's int8 GEMM needs K and N multiples of 4, found K {}, N {}", k, n);
    std::vector<int8_t> w8(static_cast<size_t>(n * k));
    std::vector<int64_t> sums(static_cast<size_t>(n), 0), offsets;
    for (int64_t c = 0; c < n; ++c)
      for (int64_t i = 0; i < k; ++i) {
        const int64_t v = W8(trans_b ? c * k + i : i * n + c);
        w8[static_cast<size_t>(c * k + i)] = static_cast<int8_t>(v);
        sums[static_cast<size_t>(c)] += v;
      }
    if (std::string why = Offsets(n, sums, &offsets); !why.empty()) return why;
    ir::ValueId a8 = Int8Input();
    // A pointwise Conv: X [N, C, D...] as [N, D..., C], and the GEMM's [N, D..., M] back after it.
    const int rank = t_.value(x_).rank();
    std::vector<int64_t> to_last = {0}, to_first = {0, rank - 1};
    for (int d = 2; d < rank; ++d) to_last.push_back(d);
    to_last.push_back(1);
    for (int d = 1; d < rank - 1; ++d) to_first.push_back(d);
    ir::ValueId gemm_out = product_;
    if (conv) {
      a8 = Transposed(a8, to_last, "#x_channels_last", DType::kInt8);
      gemm_out = AddLike(t_, product_, DType::kFloat32, op_.name + "#channels_last");
      t_.value(gemm_out).shape = Permuted(t_.value(product_).shape, to_last);
    }
    const ir::ValueId acc = AddLike(t_, gemm_out, DType::kInt32, op_.name + "#int32");
    Add(std::string(cpu::kMatMulIntegerTransBOp), "", {a8, Constant("#w_int8_nk", DType::kInt8, {n, k}, w8.data(), w8.size())},
        acc);
    Rescale(acc, offsets, gemm_out);
    if (conv) Add("Transpose", "#channels_first", {gemm_out}, product_).attrs.SetInts("perm", to_first);
    return "";
  }

  // A 2-D Conv on cuDNN's int8 convolution (kiln.NhwcConvInt8): X padded with its zero point
  // where that is not 0 (the float graph pads with 0.0, which is the zero point), its channels
  // padded to a multiple of 4 (an RGB stem's 3) against zero weights, channels last; the filter
  // [M, KH, KW, C4].
  std::string Conv() {
    if (t_.value(x_).rank() != 4) return "it is not 2-D (cuDNN's int8 convolution here is)";
    if (op_.attrs.GetInt("group", 1) != 1) return "it has groups (cuDNN's int8 convolution here has one)";
    const int64_t m = w_->dims[0], c = w_->dims[1], kh = w_->dims[2], kw = w_->dims[3];
    const int64_t c4 = (c + 3) / 4 * 4;
    if (m % 4 != 0)
      return fmt::format("cuDNN's int8 convolution needs output channels that are a multiple of 4, found {}", m);
    std::vector<int64_t> pads = op_.attrs.GetInts("pads");
    if (pads.empty()) pads.assign(4, 0);
    const std::string_view auto_pad = op_.attrs.GetString("auto_pad", "NOTSET");
    if (auto_pad != "NOTSET" && auto_pad != "VALID") return "auto_pad " + std::string(auto_pad);
    if (pads.size() != 4 || pads[0] != pads[2] || pads[1] != pads[3])
      return "asymmetric pads (cuDNN's descriptors take one pad per axis)";
    std::vector<int8_t> w8(static_cast<size_t>(m * kh * kw * c4), 0);
    std::vector<int64_t> sums(static_cast<size_t>(m), 0), offsets;
    for (int64_t o = 0; o < m; ++o)
      for (int64_t i = 0; i < c; ++i)
        for (int64_t r = 0; r < kh * kw; ++r) {
          const int64_t v = W8((o * c + i) * kh * kw + r);
          w8[static_cast<size_t>((o * kh * kw + r) * c4 + i)] = static_cast<int8_t>(v);
          sums[static_cast<size_t>(o)] += v;
        }
    if (std::string why = Offsets(m, sums, &offsets); !why.empty()) return why;
    ir::ValueId a8 = Int8Input();
    // Pad with the zero point, then convolve unpadded; the added channels meet zero weights, so
    // what they hold does not matter.
    const bool spatial = (pads[0] != 0 || pads[1] != 0) && za_ != 0;
    if (spatial || c4 != c) {
      const int64_t ph = spatial ? pads[0] : 0, pw = spatial ? pads[1] : 0;
      const ir::ValueId p = AddLike(t_, a8, DType::kInt8, op_.name + "#x_padded");
      ir::SymShape& shape = t_.value(p).shape;
      shape[1] = shape[1] + ir::Sym(c4 - c);
      shape[2] = shape[2] + ir::Sym(2 * ph);
      shape[3] = shape[3] + ir::Sym(2 * pw);
      const std::vector<int64_t> all = {0, 0, ph, pw, 0, c4 - c, ph, pw};
      const int8_t value = static_cast<int8_t>(spatial ? za_ : 0);
      Add("Pad", "#x_pad", {a8, Constant("#pads", DType::kInt64, {8}, all.data(), all.size() * 8),
                            Constant("#pad_value", DType::kInt8, {}, &value, 1)},
          p);
      a8 = p;
      if (spatial) pads.assign(4, 0);
    }
    const ir::ValueId x_nhwc = Transposed(a8, {0, 2, 3, 1}, "#x_nhwc", DType::kInt8);
    const ir::ValueId y_nhwc = AddLike(t_, product_, DType::kFloat32, op_.name + "#nhwc");
    t_.value(y_nhwc).shape = Permuted(t_.value(product_).shape, {0, 2, 3, 1});
    ir::Node& n = Add(std::string(cpu::kNhwcConvInt8Op), "",
                      {x_nhwc, Constant("#w_int8_mhwc", DType::kInt8, {m, kh, kw, c4}, w8.data(), w8.size())}, y_nhwc);
    n.attrs.SetInts("pads", pads);
    if (!op_.attrs.GetInts("strides").empty()) n.attrs.SetInts("strides", op_.attrs.GetInts("strides"));
    if (!op_.attrs.GetInts("dilations").empty()) n.attrs.SetInts("dilations", op_.attrs.GetInts("dilations"));
    const ir::ValueId scaled = AddLike(t_, y_nhwc, DType::kFloat32, op_.name + "#nhwc_scaled");
    Rescale(y_nhwc, offsets, scaled);
    Add("Transpose", "#nchw", {scaled}, product_).attrs.SetInts("perm", {0, 3, 1, 2});
    return "";
  }

  ir::Trace& t_;
  const ir::Node& q_;   // the CPU fold's integer node: its inputs are the group's quantizations
  const ir::Node& op_;  // the float MatMul, Gemm or Conv
  std::vector<ir::Node>* out_;
  ir::ValueId x_ = ir::kNoValue, product_ = ir::kNoValue;
  const ir::ConstData* w_ = nullptr;
  const ir::ConstData* bias_ = nullptr;  // the int32 bias C' in the scale alpha * xs * ws[c]
  bool w_u8_ = false;
  int64_t za_ = 0;  // X's zero point on the int8 side
};

// Folds each DequantizeLinear whose inputs are constants, then every node all of whose inputs
// became constants that way, in order (the trace is topologically sorted).
// A DequantizeLinear of an int8 constant of at least this many elements whose readers are all
// elementwise ops stays: it fuses into their generated kernels, which widen the int8 weight as
// they read it, so the artifact keeps it int8 (a QDQ model's quantized positional embedding).
constexpr int64_t kKeepInt8MinElements = 4096;

Status FoldConstantDequantize(ir::Trace& t) {
  std::vector<bool> only_elementwise(t.values.size(), true);  // every reader an elementwise op
  for (const ir::Node& n : t.body.nodes) {
    const OpInfo* info = FindOpInfo(n.op);
    for (ir::ValueId id : n.inputs)
      if (id != ir::kNoValue && (!info || info->fusion != FusionKind::kElementwise || !n.blocks.empty()))
        only_elementwise[static_cast<size_t>(id)] = false;
    for (const auto& [name, block] : n.blocks)
      for (const ir::Node& m : block->nodes)
        for (ir::ValueId id : m.inputs)
          if (id != ir::kNoValue) only_elementwise[static_cast<size_t>(id)] = false;
  }
  for (ir::ValueId id : t.outputs) only_elementwise[static_cast<size_t>(id)] = false;
  std::vector<bool> became(t.values.size(), false);
  std::vector<ir::Node> kept;
  kept.reserve(t.body.nodes.size());
  for (ir::Node& n : t.body.nodes) {
    if (n.op == "DequantizeLinear" && n.outputs.size() == 1 && only_elementwise[static_cast<size_t>(n.outputs[0])]) {
      const ir::ConstData* q = ConstOf(t, n.inputs[0]);
      if (q && IsInt8(q->dtype) && q->num_elements() >= kKeepInt8MinElements) {
        kept.push_back(std::move(n));
        continue;
      }
    }
    bool reads_new = n.op == "DequantizeLinear";
    for (ir::ValueId id : n.inputs) reads_new = reads_new || (id != ir::kNoValue && became[static_cast<size_t>(id)]);
    if (reads_new && n.when.empty() && n.blocks.empty() && CanFold(t, n)) {
      KILN_RETURN_IF_ERROR(FoldNode(t, n));
      for (ir::ValueId id : n.outputs)
        if (id != ir::kNoValue) became[static_cast<size_t>(id)] = true;
      continue;
    }
    kept.push_back(std::move(n));
  }
  t.body.nodes = std::move(kept);
  return Status::Ok();
}

// DequantizeLinear -> Reshape / Transpose / Squeeze / Unsqueeze / Flatten / MaxPool ... ->
// QuantizeLinear with the same quantization (one positive scale and zero point, equal, the int8
// dtype kept): those ops moved onto the int8 tensor, where they give its elements exactly, and
// the QuantizeLinear dropped. quantize_static writes such pairs around every Reshape and
// Transpose of a transformer's heads, and around a CNN's MaxPool. MaxPool only with `max_pool`
// (the CPU plan, whose kernels pool int8; cuDNN's pooling here takes float types alone). Returns
// how many QuantizeLinear nodes it dropped.
int MoveExactOpsToInt8(ir::Trace& t, bool max_pool) {
  const Graph g(t);
  // Ops that commute with dequantizing: they move or pick elements (MaxPool: the largest, which a
  // positive scale keeps the largest), so on the int8 tensor they give its own elements.
  const auto exact = [&](const ir::Node& n) {
    return n.op == "Reshape" || n.op == "Transpose" || n.op == "Squeeze" || n.op == "Unsqueeze" ||
           n.op == "Flatten" || (max_pool && n.op == "MaxPool" && n.outputs.size() == 1);
  };
  const auto scalar = [&](const ir::Node& n, size_t i, DType dtype) -> std::optional<double> {
    if (n.inputs.size() <= i || n.inputs[i] == ir::kNoValue) return i == 2 ? std::optional<double>(0) : std::nullopt;
    const ir::ConstData* c = ConstOf(t, n.inputs[i]);
    if (!c || c->num_elements() != 1 || (i == 2 && c->dtype != dtype)) return std::nullopt;
    return c->FloatAt(0);
  };
  const std::vector<ir::Node> nodes = t.body.nodes;  // read while `out` is written and values added
  std::vector<ir::Node> out;
  int moved = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const ir::Node& q = nodes[i];
    std::vector<const ir::Node*> chain;  // the layout ops, last first
    const ir::Node* d = nullptr;
    if (q.op == "QuantizeLinear" && q.when.empty() && g.scopes[i] < 0 && q.inputs.size() >= 2 &&
        q.outputs.size() == 1) {
      ir::ValueId v = q.inputs[0];
      for (;;) {
        const int p = v == ir::kNoValue ? -1 : g.producer[static_cast<size_t>(v)];
        if (p < 0) break;
        const ir::Node& n = nodes[static_cast<size_t>(p)];
        if (!n.when.empty() || g.scopes[static_cast<size_t>(p)] >= 0 || n.inputs.empty()) break;
        if (n.op == "DequantizeLinear") {
          d = &n;
          break;
        }
        if (!exact(n) || n.outputs.size() != 1) break;
        chain.push_back(&n);
        v = n.inputs[0];
      }
    }
    const DType qt = d ? t.value(q.outputs[0]).dtype : DType::kUndefined;
    if (d && !chain.empty() && d->inputs.size() >= 2 && t.value(d->inputs[0]).dtype == qt && IsInt8(qt) &&
        q.attrs.GetInt("block_size", 0) == 0 && d->attrs.GetInt("block_size", 0) == 0) {
      const auto qs = scalar(q, 1, qt), qz = scalar(q, 2, qt), ds = scalar(*d, 1, qt), dz = scalar(*d, 2, qt);
      if (qs && ds && qz && dz && *qs == *ds && *qs > 0 && *qz == *dz &&
          ConstOf(t, q.inputs[1])->dtype == DType::kFloat32) {
        ir::ValueId x = d->inputs[0];
        for (size_t k = chain.size(); k-- > 0;) {
          ir::Node n = *chain[k];
          n.inputs[0] = x;
          if (k == 0) {
            n.outputs = {q.outputs[0]};
          } else {
            ir::Value v = t.value(n.outputs[0]);
            v.name += "#int8";
            v.dtype = qt;
            v.data = nullptr;
            v.sym.reset();
            n.outputs = {t.AddValue(std::move(v))};
          }
          n.name += "#int8";
          x = n.outputs[0];
          out.push_back(std::move(n));
        }
        ++moved;
        continue;
      }
    }
    out.push_back(q);
  }
  t.body.nodes = std::move(out);
  return moved;
}

}  // namespace

bool QdqChanges(const ir::Trace& trace) {
  ir::Trace copy = trace;
  return !FindFolds(copy, nullptr).empty();
}

Result<ir::Trace> FoldQdq(const ir::Trace& trace, std::vector<std::string>* log, QdqTarget target) {
  ir::Trace t = trace;
  if (const int moved = MoveExactOpsToInt8(t, target == QdqTarget::kCpu); moved > 0 && log)
    log->push_back(
        fmt::format("qdq: {} DequantizeLinear -> Reshape/Transpose/.../MaxPool -> QuantizeLinear chains of one "
                    "quantization run on the int8 tensor",
                    moved));
  if (target == QdqTarget::kCpu) {
    std::vector<std::string> unfolded;
    std::vector<Fold> folds = FindFolds(t, &unfolded);
    std::vector<bool> drop(t.body.nodes.size(), false);
    int convs = 0, matmuls = 0, gemms = 0;
    for (Fold& f : folds) {
      (f.node.op == "QLinearConv" ? convs : f.node.op == "QGemm" ? gemms : matmuls)++;
      for (size_t a : f.absorbed) drop[a] = true;
      t.body.nodes[f.at] = std::move(f.node);
    }
    std::vector<ir::Node> kept;
    for (size_t i = 0; i < t.body.nodes.size(); ++i)
      if (!drop[i]) kept.push_back(std::move(t.body.nodes[i]));
    t.body.nodes = std::move(kept);
    if (log) {
      if (convs + matmuls + gemms > 0)
        log->push_back(
            fmt::format("qdq: {} DequantizeLinear -> Conv -> QuantizeLinear groups -> QLinearConv, {} "
                        "with MatMul -> QLinearMatMul, {} with Gemm -> QGemm",
                        convs, matmuls, gemms));
      for (const std::string& why : unfolded) log->push_back("qdq not folded: " + why);
    }
  } else if (target == QdqTarget::kCuda) {
    std::vector<std::string> unfolded;
    std::vector<Fold> folds = FindFolds(t, &unfolded);
    std::vector<std::vector<ir::Node>> replace(t.body.nodes.size());
    int matmuls = 0, gemms = 0, pointwise = 0, convs = 0;
    for (const Fold& f : folds) {
      const ir::Node& op = t.body.nodes[f.at];
      std::vector<ir::Node> nodes;
      if (std::string why = CudaGroup(t, f, op, &nodes).Build(); !why.empty()) {
        unfolded.push_back(fmt::format("{} '{}': {}", op.op, op.name, why));
        continue;
      }
      const bool dnn = std::any_of(nodes.begin(), nodes.end(),
                                   [](const ir::Node& n) { return n.op == cpu::kNhwcConvInt8Op; });
      (op.op == "Gemm" ? gemms : op.op == "MatMul" ? matmuls : dnn ? convs : pointwise)++;
      replace[f.at] = std::move(nodes);
    }
    std::vector<ir::Node> out;
    for (size_t i = 0; i < t.body.nodes.size(); ++i) {
      if (replace[i].empty()) out.push_back(std::move(t.body.nodes[i]));
      else for (ir::Node& n : replace[i]) out.push_back(std::move(n));
    }
    t.body.nodes = std::move(out);
    if (log) {
      if (matmuls + gemms + pointwise + convs > 0)
        log->push_back(fmt::format("qdq: {} DequantizeLinear -> MatMul -> QuantizeLinear groups, {} with Gemm and {} "
                                   "with a pointwise Conv -> {} (cuBLASLt int8), {} with Conv -> {} (cuDNN int8), "
                                   "between generated kernels",
                                   matmuls, gemms, pointwise, cpu::kMatMulIntegerTransBOp, convs,
                                   cpu::kNhwcConvInt8Op));
      for (const std::string& why : unfolded) log->push_back("qdq not folded: " + why);
    }
  }
  KILN_RETURN_IF_ERROR(FoldConstantDequantize(t));
  EliminateDeadCode(t);
  return t;
}

}  // namespace kiln::passes
