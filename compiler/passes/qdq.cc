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

// ---- The CUDA plan: quantized MatMul and Gemm on cuBLASLt's int8 GEMM ----------------------------

// `shape` permuted: element i is shape[perm[i]] (ONNX Transpose).
ir::SymShape Permuted(const ir::SymShape& shape, const std::vector<int64_t>& perm) {
  ir::SymShape out;
  for (int64_t p : perm) out.push_back(shape[static_cast<size_t>(p)]);
  return out;
}

// "" when the Conv `op` with weight `w` [M, C, k...] is pointwise (1 x 1 taps, strides 1, no pads,
// one group), else why not.
std::string PointwiseConv(const ir::Node& op, const ir::ConstData& w) {
  for (size_t d = 2; d < w.dims.size(); ++d)
    if (w.dims[d] != 1) return "its kernel is not 1 x 1";
  if (op.attrs.GetInt("group", 1) != 1) return "it has groups";
  for (int64_t v : op.attrs.GetInts("strides"))
    if (v != 1) return "its strides are not 1";
  for (int64_t v : op.attrs.GetInts("pads"))
    if (v != 0) return "it is padded";
  return "";
}

// A new value of `dtype` with the shape of `like`.
ir::ValueId AddLike(ir::Trace& t, ir::ValueId like, DType dtype, std::string name) {
  ir::Value v;
  v.name = std::move(name);
  v.dtype = dtype;
  v.shape = t.value(like).shape;
  return t.AddValue(std::move(v));
}

// A node `op` of one output.
ir::Node OneOutput(std::string op, std::string name, const std::vector<ir::Predicate>& when,
                   std::vector<ir::ValueId> inputs, ir::ValueId output) {
  ir::Node n;
  n.op = std::move(op);
  n.name = std::move(name);
  n.when = when;
  n.inputs = std::move(inputs);
  n.outputs = {output};
  return n;
}

// The folded MatMul or Gemm `f` (of the float node `op`) for the CUDA plan: the float product
// op's output is computed from the integers, the group's Relu and QuantizeLinear stay after it,
//   a8  = x - 128 as int8 (x uint8; an int8 x as it is)              generated kernel
//   acc = kiln.MatMulIntegerTransB(a8, W8 [N, K])                      cuBLASLt int8 GEMM
//   y   = float(acc + offset[n]) * (alpha * x_scale * w_scale[n])      generated kernel, with the Q
// where W8 is W transposed (uint8 W less 128) and offset[n] = C'[n] - (x_zero_point - 128 or
// 0) * sum_k W8[n, k], exact in int32: sum_k (x - xzp) W = sum_k a8 W8 - (xzp - 128) sum_k W8.
// Written into `out`; "" or why not (the group then keeps its float op).
std::string CudaIntegerGemm(ir::Trace& t, const Fold& f, const ir::Node& op, std::vector<ir::Node>* out) {
  const ir::Node& q = f.node;
  const bool conv = q.op == "QLinearConv";
  const ir::ValueId x = q.inputs[0], xs = q.inputs[1], xzp = q.inputs[2], w = q.inputs[3], ws = q.inputs[4],
                    wzp = q.inputs[5];
  const ir::ValueId bias = q.op == "QGemm" ? q.inputs[6] : conv && q.inputs.size() > 8 ? q.inputs[8] : ir::kNoValue;
  const ir::ValueId product = op.outputs[0];
  if (t.value(product).dtype != DType::kFloat32) return "its product is not float32";
  if (t.value(x).rank() < 2) return "its input is 1-D";
  const ir::ConstData* wc = ConstOf(t, w);
  const ir::ConstData* wz = ConstOf(t, wzp);
  // A Conv is the GEMM of X's channels-last rows by W [M, C] when it is pointwise: 1 x 1 taps,
  // strides 1, no pads, one group. Its channels go last and back in the kernels around it.
  const int rank = t.value(x).rank();
  if (conv) {
    if (std::string why = PointwiseConv(op, *wc); !why.empty())
      return why + "; cuDNN's int8 convolution is not wired, so the Conv stays float on cuDNN";
  }
  const bool trans_b = conv || q.attrs.GetInt("transB", 0) != 0;
  const int64_t k = wc->dims[trans_b ? 1 : 0], n = wc->dims[trans_b ? 0 : 1];
  if (k % 4 != 0 || n % 4 != 0)
    return fmt::format("cuBLASLt's int8 GEMM needs K and N multiples of 4, found K {}, N {}", k, n);
  const bool w_u8 = wc->dtype == DType::kUInt8, x_u8 = t.value(x).dtype == DType::kUInt8;
  const int64_t w_shift = w_u8 ? 128 : 0;
  for (int64_t i = 0; i < wz->num_elements(); ++i)
    if (wz->IntAt(i) != w_shift)
      return fmt::format("a weight zero point of {} (cuBLASLt's int8 GEMM takes a {} weight with zero point {})",
                         wz->IntAt(i), DTypeName(wc->dtype), w_shift);
  // W8 [N, K] and its row sums.
  std::vector<int8_t> w8(static_cast<size_t>(n * k));
  std::vector<int64_t> row_sum(static_cast<size_t>(n), 0);
  for (int64_t c = 0; c < n; ++c)
    for (int64_t i = 0; i < k; ++i) {
      const int64_t at = trans_b ? c * k + i : i * n + c;
      const int64_t v = (w_u8 ? int64_t{wc->bytes[static_cast<size_t>(at)]}
                              : int64_t{static_cast<int8_t>(wc->bytes[static_cast<size_t>(at)])}) - w_shift;
      w8[static_cast<size_t>(c * k + i)] = static_cast<int8_t>(v);
      row_sum[static_cast<size_t>(c)] += v;
    }
  const int64_t za = ConstOf(t, xzp)->IntAt(0) - (x_u8 ? 128 : 0);
  const ir::ConstData* bc = ConstOf(t, bias);
  std::vector<int32_t> offset(static_cast<size_t>(n));
  bool any_offset = false;
  for (int64_t c = 0; c < n; ++c) {
    const int64_t o = (bc ? bc->IntAt(c) : 0) - za * row_sum[static_cast<size_t>(c)];
    if (o < std::numeric_limits<int32_t>::min() || o > std::numeric_limits<int32_t>::max())
      return fmt::format("its offset {} at column {} is beyond int32", o, c);
    offset[static_cast<size_t>(c)] = static_cast<int32_t>(o);
    any_offset = any_offset || o != 0;
  }
  const ir::ConstData* xsc = ConstOf(t, xs);
  const ir::ConstData* wsc = ConstOf(t, ws);
  const float alpha = q.op == "QGemm" ? q.attrs.GetFloat("alpha", 1.0f) : 1.0f;
  std::vector<float> scale(static_cast<size_t>(wsc->num_elements()));
  for (size_t c = 0; c < scale.size(); ++c)
    scale[c] = static_cast<float>(double{alpha} * xsc->FloatAt(0) * wsc->FloatAt(static_cast<int64_t>(c)));

  const std::string& name = op.name;
  ir::ValueId a8 = x;
  if (x_u8) {
    const ir::ValueId wide = AddLike(t, x, DType::kInt32, name + "#x_int32");
    const ir::ValueId shifted = AddLike(t, x, DType::kInt32, name + "#x_shifted");
    a8 = AddLike(t, x, DType::kInt8, name + "#x_int8");
    const int32_t k128 = 128;
    const ir::ValueId c128 = AddConst(t, name + "#128", MakeConst(DType::kInt32, {}, &k128, 4));
    out->push_back(OneOutput("Cast", name + "#x_int32", op.when, {x}, wide));
    out->back().attrs.SetInt("to", static_cast<int64_t>(DType::kInt32));
    out->push_back(OneOutput("Sub", name + "#x_shift", op.when, {wide, c128}, shifted));
    out->push_back(OneOutput("Cast", name + "#x_int8", op.when, {shifted}, a8));
    out->back().attrs.SetInt("to", static_cast<int64_t>(DType::kInt8));
  }
  // A pointwise Conv: X [N, C, D...] as [N, D..., C], and the GEMM's [N, D..., M] back after it.
  std::vector<int64_t> to_last, to_first;
  ir::ValueId gemm_out = product;
  if (conv) {
    to_last.push_back(0);
    for (int d = 2; d < rank; ++d) to_last.push_back(d);
    to_last.push_back(1);
    to_first = {0, rank - 1};
    for (int d = 1; d < rank - 1; ++d) to_first.push_back(d);
    const ir::ValueId last = AddLike(t, a8, DType::kInt8, name + "#x_channels_last");
    t.value(last).shape = Permuted(t.value(a8).shape, to_last);
    out->push_back(OneOutput("Transpose", name + "#x_channels_last", op.when, {a8}, last));
    out->back().attrs.SetInts("perm", to_last);
    a8 = last;
    gemm_out = AddLike(t, product, DType::kFloat32, name + "#channels_last");
    t.value(gemm_out).shape = Permuted(t.value(product).shape, to_last);
  }
  const ir::ValueId b8 = AddConst(t, name + "#w_int8_nk", MakeConst(DType::kInt8, {n, k}, w8.data(), w8.size()));
  ir::ValueId acc = AddLike(t, gemm_out, DType::kInt32, name + "#int32");
  out->push_back(OneOutput(std::string(cpu::kMatMulIntegerTransBOp), name, op.when, {a8, b8}, acc));
  if (any_offset) {
    const ir::ValueId off =
        AddConst(t, name + "#int32_offset", MakeConst(DType::kInt32, {n}, offset.data(), offset.size() * 4));
    const ir::ValueId sum = AddLike(t, gemm_out, DType::kInt32, name + "#int32_offset_added");
    out->push_back(OneOutput("Add", name + "#offset", op.when, {acc, off}, sum));
    acc = sum;
  }
  const ir::ValueId wide = AddLike(t, gemm_out, DType::kFloat32, name + "#float");
  out->push_back(OneOutput("Cast", name + "#float", op.when, {acc}, wide));
  out->back().attrs.SetInt("to", static_cast<int64_t>(DType::kFloat32));
  const std::vector<int64_t> scale_dims = scale.size() == 1 ? std::vector<int64_t>{} : std::vector<int64_t>{n};
  const ir::ValueId sc =
      AddConst(t, name + "#scale", MakeConst(DType::kFloat32, scale_dims, scale.data(), scale.size() * 4));
  out->push_back(OneOutput("Mul", name + "#scale", op.when, {wide, sc}, gemm_out));
  if (conv) {
    out->push_back(OneOutput("Transpose", name + "#channels_first", op.when, {gemm_out}, product));
    out->back().attrs.SetInts("perm", to_first);
  }
  return "";
}

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
    int matmuls = 0, gemms = 0, convs = 0;
    for (const Fold& f : folds) {
      const ir::Node& op = t.body.nodes[f.at];
      std::vector<ir::Node> nodes;
      if (std::string why = CudaIntegerGemm(t, f, op, &nodes); !why.empty()) {
        unfolded.push_back(fmt::format("{} '{}': {}", op.op, op.name, why));
        continue;
      }
      (op.op == "Gemm" ? gemms : op.op == "Conv" ? convs : matmuls)++;
      replace[f.at] = std::move(nodes);
    }
    std::vector<ir::Node> out;
    for (size_t i = 0; i < t.body.nodes.size(); ++i) {
      if (replace[i].empty()) out.push_back(std::move(t.body.nodes[i]));
      else for (ir::Node& n : replace[i]) out.push_back(std::move(n));
    }
    t.body.nodes = std::move(out);
    if (log) {
      if (matmuls + gemms + convs > 0)
        log->push_back(fmt::format("qdq: {} DequantizeLinear -> MatMul -> QuantizeLinear groups, {} with Gemm and {} "
                                   "with a pointwise Conv -> {} (cuBLASLt int8) between generated kernels",
                                   matmuls, gemms, convs, cpu::kMatMulIntegerTransBOp));
      for (const std::string& why : unfolded) log->push_back("qdq not folded: " + why);
    }
  }
  KILN_RETURN_IF_ERROR(FoldConstantDequantize(t));
  EliminateDeadCode(t);
  return t;
}

}  // namespace kiln::passes
