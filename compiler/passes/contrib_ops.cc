// onnxruntime's com.microsoft ops written as ONNX ops once their inputs' shapes are known
// (contrib_ops.h). Each expansion follows docs/ContribOperators.md in onnxruntime's repository
// and, where the text leaves it open, onnxruntime's CPU kernels, which tests/python/
// test_contrib_ops.py runs beside Kiln on generated cases.
#include "compiler/passes/contrib_ops.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <string>

#include "compiler/ops/meta_util.h"
#include "compiler/passes/constants.h"

namespace kiln::passes {
namespace {

using ir::kNoValue;
using ir::ValueId;
using Kind = Attr::Kind;

constexpr std::string_view kOps[] = {"FusedMatMul",        "FusedConv",       "Attention",
                                     "MultiHeadAttention", "RotaryEmbedding", "EmbedLayerNormalization"};

// Writes the ONNX nodes of one com.microsoft node: intermediate values named after it, its own
// outputs where asked.
class Writer {
 public:
  Writer(ir::Trace& t, const ir::Node& node)
      : t_(t),
        node_(node),
        op_(node.op.substr(kContribPrefix.size())),
        where_("node '" + node.name + "' (com.microsoft " + op_ + ")") {}

  const std::string& op() const { return op_; }
  Status Invalid(const std::string& what) const { return InvalidArgument(where_ + ": " + what); }
  Status NotTaken(const std::string& what) const { return Unimplemented(where_ + ": " + what); }

  // Input i, or kNoValue when absent.
  ValueId in(size_t i) const { return i < node_.inputs.size() ? node_.inputs[i] : kNoValue; }
  bool given(size_t i) const { return in(i) != kNoValue; }
  // A copy: the trace's values move as nodes add new ones.
  ir::Value value(ValueId id) const { return t_.value(id); }
  // Output i of the com.microsoft node, or kNoValue when the model does not ask for it.
  ValueId out(size_t i) const { return i < node_.outputs.size() ? node_.outputs[i] : kNoValue; }
  const AttrMap& attrs() const { return node_.attrs; }

  // InvalidArgument naming the first attribute not in `known`, or of another type than its own
  // (onnxruntime refuses both when it loads the model).
  Status CheckAttrs(std::initializer_list<std::pair<std::string_view, Kind>> known) const {
    static constexpr const char* kKinds[] = {"INT", "FLOAT", "STRING", "INTS", "FLOATS"};
    for (const auto& item : node_.attrs.items()) {
      const std::string& name = item.first;  // not a structured binding: clang's lambdas cannot capture one
      const Attr& attr = item.second;
      const auto it = std::find_if(known.begin(), known.end(), [&](const auto& k) { return k.first == name; });
      if (it == known.end()) return Invalid("has no attribute '" + name + "'");
      if (attr.kind != it->second)
        return Invalid("attribute '" + name + "': expected " + kKinds[static_cast<int>(it->second)] + ", found " +
                       kKinds[static_cast<int>(attr.kind)]);
    }
    return Status::Ok();
  }
  // InvalidArgument unless input i (named `name`) is a float tensor.
  Status CheckFloat(size_t i, const char* name) const {
    const DType dt = t_.value(in(i)).dtype;
    if (ir::meta::IsFloat(dt)) return Status::Ok();
    return Invalid(std::string("input '") + name + "': expected a float type, found " + ir::meta::DTypeStr(dt));
  }
  // InvalidArgument unless input i (named `name`) has dtype `want`.
  Status CheckDType(size_t i, const char* name, DType want) const {
    const DType dt = t_.value(in(i)).dtype;
    if (dt == want) return Status::Ok();
    return Invalid(std::string("input '") + name + "': expected " + ir::meta::DTypeStr(want) + ", found " +
                   ir::meta::DTypeStr(dt));
  }
  // InvalidArgument when dim `d` of input i (named `name`) is static and not `want`.
  Status CheckDim(size_t i, const char* name, int d, int64_t want, const std::string& what) const {
    const ir::Value v = t_.value(in(i));
    const auto dim = d < v.rank() ? v.shape[static_cast<size_t>(d)].value() : std::nullopt;
    if (!dim || *dim == want) return Status::Ok();
    return Invalid(std::string("input '") + name + "' " + ir::meta::Str(v.shape) + ": dim " + std::to_string(d) + " (" +
                   what + ") must be " + std::to_string(want) + ", found " + std::to_string(*dim));
  }
  // InvalidArgument naming the first required input that is absent, or an input past `max`.
  Status CheckInputs(std::initializer_list<size_t> required, size_t max,
                     std::initializer_list<const char*> names) const {
    if (node_.inputs.size() > max)
      return Invalid("takes at most " + std::to_string(max) + " inputs, got " + std::to_string(node_.inputs.size()));
    for (size_t i : required)
      if (!given(i)) return Invalid("input #" + std::to_string(i) + " (" + names.begin()[i] + ") is required");
    return Status::Ok();
  }
  // Unimplemented naming the first output at or past `count` that the model asks for.
  Status CheckOutputs(size_t count) const {
    for (size_t i = count; i < node_.outputs.size(); ++i)
      if (node_.outputs[i] != kNoValue)
        return NotTaken("output #" + std::to_string(i) + " ('" + t_.value(node_.outputs[i]).name +
                        "') is not produced by Kiln");
    return out(0) == kNoValue ? Invalid("needs its output #0") : Status::Ok();
  }

  // A node of `op` over `inputs`; its outputs are `outs` where given (kNoValue: a new value), as
  // many as `count`.
  std::vector<ValueId> Step(const std::string& op, std::vector<ValueId> inputs, AttrMap attrs = {},
                            std::vector<ValueId> outs = {}, size_t count = 1) {
    ir::Node n;
    n.op = op;
    n.name = node_.name + "/" + op + "_" + std::to_string(nodes.size());
    n.inputs = std::move(inputs);
    n.attrs = std::move(attrs);
    n.when = node_.when;
    outs.resize(std::max(outs.size(), count), kNoValue);
    for (ValueId& id : outs)
      if (id == kNoValue) id = NewValue(n.name);
    n.outputs = outs;
    nodes.push_back(std::move(n));
    return outs;
  }
  ValueId One(const std::string& op, std::vector<ValueId> inputs, AttrMap attrs = {}, ValueId out = kNoValue) {
    return Step(op, std::move(inputs), std::move(attrs), {out})[0];
  }
  ValueId Ints(std::vector<int64_t> v, DType dtype = DType::kInt64) {
    const int64_t n = static_cast<int64_t>(v.size());
    return AddIntConstant(t_, NextName("ints"), dtype, {n}, v);
  }
  ValueId IntScalar(int64_t v, DType dtype = DType::kInt64) {
    return AddIntConstant(t_, NextName("int"), dtype, {}, {v});
  }
  ValueId FloatScalar(double v, DType dtype) { return AddFloatConstant(t_, NextName("float"), dtype, {}, {v}); }

  // Dim `d` of `x` as a 1-element int64 tensor (Shape's start and end), and as a scalar.
  ValueId Dim(ValueId x, int64_t d) {
    AttrMap a;
    a.SetInt("start", d);
    a.SetInt("end", d + 1);
    return One("Shape", {x}, a);
  }
  ValueId DimScalar(ValueId x, int64_t d) { return One("Squeeze", {Dim(x, d), Ints({0})}); }
  ValueId Unsqueeze(ValueId x, std::vector<int64_t> axes) { return One("Unsqueeze", {x, Ints(std::move(axes))}); }
  ValueId Transpose(ValueId x, std::vector<int64_t> perm) {
    AttrMap a;
    a.SetInts("perm", std::move(perm));
    return One("Transpose", {x}, a);
  }
  ValueId Cast(ValueId x, DType to) {
    AttrMap a;
    a.SetInt("to", static_cast<int64_t>(to));
    return One("Cast", {x}, a);
  }
  // [0, n) as int64, n an int64 scalar.
  ValueId Iota(ValueId n) { return One("Range", {IntScalar(0), n, IntScalar(1)}); }

  std::vector<ir::Node> nodes;

 private:
  ValueId NewValue(const std::string& hint) {
    ir::Value v;
    v.name = NextName(hint);
    return t_.AddValue(std::move(v));
  }
  std::string NextName(const std::string& hint) { return hint + "#" + std::to_string(counter_++); }

  ir::Trace& t_;
  const ir::Node& node_;
  std::string op_, where_;
  int counter_ = 0;
};

// ---- FusedMatMul: alpha * op(A) @ op(B) --------------------------------------------------------
// transBatchX moves X's dim 0 to just before its last (perm [1, ..., r - 2, 0, r - 1], both inputs
// of one rank of at least 3); transX then swaps the last two dims.
Status FusedMatMul(Writer& w) {
  KILN_RETURN_IF_ERROR(w.CheckAttrs({{"alpha", Kind::kFloat},
                                     {"transA", Kind::kInt},
                                     {"transB", Kind::kInt},
                                     {"transBatchA", Kind::kInt},
                                     {"transBatchB", Kind::kInt}}));
  KILN_RETURN_IF_ERROR(w.CheckInputs({0, 1}, 2, {"A", "B"}));
  KILN_RETURN_IF_ERROR(w.CheckOutputs(1));
  KILN_RETURN_IF_ERROR(w.CheckFloat(0, "A"));
  KILN_RETURN_IF_ERROR(w.CheckFloat(1, "B"));
  const AttrMap& a = w.attrs();
  const bool batch[] = {a.GetInt("transBatchA", 0) != 0, a.GetInt("transBatchB", 0) != 0};
  const bool trans[] = {a.GetInt("transA", 0) != 0, a.GetInt("transB", 0) != 0};
  const int rank[] = {w.value(w.in(0)).rank(), w.value(w.in(1)).rank()};
  if ((batch[0] || batch[1]) && (rank[0] != rank[1] || rank[0] < 3))
    return w.Invalid("transBatchA and transBatchB need A and B of one rank of at least 3, found ranks " +
                     std::to_string(rank[0]) + " and " + std::to_string(rank[1]));
  ValueId x[2];
  for (int i = 0; i < 2; ++i) {
    const char* name = i == 0 ? "A" : "B";
    x[i] = w.in(static_cast<size_t>(i));
    if (trans[i] && rank[i] < 2)
      return w.Invalid(std::string("trans") + name + " needs " + name + " of rank at least 2, found rank " +
                       std::to_string(rank[i]));
    std::vector<int64_t> perm(static_cast<size_t>(rank[i]));
    std::iota(perm.begin(), perm.end(), 0);
    if (batch[i]) std::rotate(perm.begin(), perm.begin() + 1, perm.end() - 1);
    if (trans[i]) std::swap(perm[perm.size() - 2], perm[perm.size() - 1]);
    if (batch[i] || trans[i]) x[i] = w.Transpose(x[i], perm);
  }
  const float alpha = a.GetFloat("alpha", 1.0f);
  if (alpha == 1.0f) {
    w.One("MatMul", {x[0], x[1]}, {}, w.out(0));
    return Status::Ok();
  }
  const ValueId product = w.One("MatMul", {x[0], x[1]});
  w.One("Mul", {product, w.FloatScalar(alpha, w.value(w.in(0)).dtype)}, {}, w.out(0));
  return Status::Ok();
}

// ---- FusedConv: activation(Conv(X, W, B) + Z) ---------------------------------------------------
Status FusedConv(Writer& w) {
  KILN_RETURN_IF_ERROR(w.CheckAttrs({{"activation", Kind::kString},
                                     {"activation_params", Kind::kFloats},
                                     {"auto_pad", Kind::kString},
                                     {"dilations", Kind::kInts},
                                     {"group", Kind::kInt},
                                     {"kernel_shape", Kind::kInts},
                                     {"pads", Kind::kInts},
                                     {"strides", Kind::kInts}}));
  KILN_RETURN_IF_ERROR(w.CheckInputs({0, 1}, 4, {"X", "W", "B", "Z"}));
  KILN_RETURN_IF_ERROR(w.CheckOutputs(1));
  KILN_RETURN_IF_ERROR(w.CheckFloat(0, "X"));
  AttrMap conv = w.attrs();
  const std::string activation(conv.GetString("activation", ""));
  const std::vector<float> params = conv.GetFloats("activation_params");
  conv.Erase("activation");
  conv.Erase("activation_params");
  const DType dtype = w.value(w.in(0)).dtype;
  const size_t want = activation == "LeakyRelu" ? 1 : activation == "Clip" || activation == "HardSigmoid" ? 2 : 0;
  if (activation != "" && activation != "Relu" && activation != "Tanh" && activation != "Sigmoid" && want == 0)
    return w.NotTaken("activation '" + activation +
                      "' (Kiln takes Relu, Tanh, Sigmoid, LeakyRelu, Clip and HardSigmoid)");
  if (params.size() != want)  // onnxruntime's FusedConv reads exactly these
    return w.Invalid("activation '" + activation + "' takes " + std::to_string(want) + " activation_params, found " +
                     std::to_string(params.size()));
  std::vector<ValueId> conv_in = {w.in(0), w.in(1)};
  if (w.given(2)) conv_in.push_back(w.in(2));
  const bool last_is_conv = activation.empty() && !w.given(3);
  ValueId y = w.One("Conv", conv_in, conv, last_is_conv ? w.out(0) : kNoValue);
  if (w.given(3)) y = w.One("Add", {y, w.in(3)}, {}, activation.empty() ? w.out(0) : kNoValue);
  if (activation.empty()) return Status::Ok();
  AttrMap act;
  std::vector<ValueId> act_in = {y};
  if (activation == "LeakyRelu") act.SetFloat("alpha", params[0]);
  if (activation == "HardSigmoid") {
    act.SetFloat("alpha", params[0]);
    act.SetFloat("beta", params[1]);
  }
  if (activation == "Clip") act_in = {y, w.FloatScalar(params[0], dtype), w.FloatScalar(params[1], dtype)};
  w.One(activation, act_in, act, w.out(0));
  return Status::Ok();
}

// ---- RotaryEmbedding -----------------------------------------------------------------------
// (input, position_ids, cos_cache, sin_cache) as ONNX's RotaryEmbedding (X, cos_cache, sin_cache,
// position_ids). The 4-D input is [batch, heads, sequence, head size], as ONNX's. position_ids
// [1] is an offset: the positions are offset + [0, sequence) in every batch row. `scale` is read
// by neither onnxruntime's kernels nor Kiln.
Status RotaryEmbedding(Writer& w) {
  KILN_RETURN_IF_ERROR(w.CheckAttrs({{"interleaved", Kind::kInt},
                                     {"is_packed_batching", Kind::kInt},
                                     {"num_heads", Kind::kInt},
                                     {"rotary_embedding_dim", Kind::kInt},
                                     {"scale", Kind::kFloat}}));
  KILN_RETURN_IF_ERROR(w.CheckInputs({0, 1, 2, 3}, 4, {"input", "position_ids", "cos_cache", "sin_cache"}));
  KILN_RETURN_IF_ERROR(w.CheckOutputs(1));
  const AttrMap& a = w.attrs();
  if (a.GetInt("is_packed_batching", 0) != 0) return w.NotTaken("is_packed_batching 1 (packed sequences)");
  KILN_RETURN_IF_ERROR(w.CheckFloat(0, "input"));
  KILN_RETURN_IF_ERROR(w.CheckDType(1, "position_ids", DType::kInt64));
  const ir::Value& x = w.value(w.in(0));
  const ir::Value& pos = w.value(w.in(1));
  if (x.rank() != 3 && x.rank() != 4)
    return w.Invalid(
        "input 'input' must be 3-D [batch, sequence, hidden] or 4-D [batch, heads, sequence, head size], "
        "found rank " +
        std::to_string(x.rank()));
  AttrMap rope;
  rope.SetInt("interleaved", a.GetInt("interleaved", 0));
  if (a.Has("rotary_embedding_dim")) rope.SetInt("rotary_embedding_dim", a.GetInt("rotary_embedding_dim", 0));
  int64_t heads = a.GetInt("num_heads", 0);
  if (heads == 0 && x.rank() == 3 && a.GetInt("rotary_embedding_dim", 0) != 0)
    return w.Invalid("a 3-D input with rotary_embedding_dim needs num_heads (as onnxruntime does)");
  if (heads == 0 && x.rank() == 3) {
    // onnxruntime derives the head size from the caches: 2 * cos_cache's last dim.
    const ir::Value& cos = w.value(w.in(2));
    const auto half = cos.rank() == 2 ? cos.shape[1].value() : std::nullopt;
    const auto hidden = x.shape[2].value();
    if (!half || !hidden || *half < 1 || *hidden % (2 * *half) != 0)
      return w.Invalid(
          "a 3-D input without num_heads needs a static hidden size that is a multiple of 2 * cos_cache's "
          "last dim (the head size), found hidden " +
          x.shape[2].ToString() + " and cos_cache rank " + std::to_string(cos.rank()));
    heads = *hidden / (2 * *half);
  }
  if (heads != 0) rope.SetInt("num_heads", heads);
  ValueId positions = w.in(1);
  if (pos.rank() == 1) {
    if (!pos.shape[0].value() || *pos.shape[0].value() != 1)
      return w.Invalid("position_ids must be [batch, sequence] or [1] (an offset), found " + ir::meta::Str(pos.shape));
    const ValueId seq = w.DimScalar(w.in(0), x.rank() == 4 ? 2 : 1);
    const ValueId offset = w.One("Squeeze", {w.in(1), w.Ints({0})});  // int64, as checked above
    const ValueId range = w.One("Add", {w.Iota(seq), offset});  // its length known: the sequence
    AttrMap axis0;
    axis0.SetInt("axis", 0);
    const ValueId shape = w.One("Concat", {w.Dim(w.in(0), 0), w.Dim(w.in(0), x.rank() == 4 ? 2 : 1)}, axis0);
    positions = w.One("Expand", {w.Unsqueeze(range, {0}), shape});
  } else if (pos.rank() != 2) {
    return w.Invalid("position_ids must be [batch, sequence] or [1] (an offset), found " + ir::meta::Str(pos.shape));
  }
  w.One("RotaryEmbedding", {w.in(0), w.in(2), w.in(3), positions}, rope, w.out(0));
  return Status::Ok();
}

// ---- EmbedLayerNormalization ------------------------------------------------------------------
// output = LayerNormalization(word_embedding[input_ids] + position_embedding[position_ids, or
// [0, sequence)] + segment_embedding[segment_ids]); embedding_sum the sum; mask_index per batch
// row the count of mask elements equal to 1 (onnxruntime's kernel: 0 when there is no mask).
Status EmbedLayerNormalization(Writer& w) {
  KILN_RETURN_IF_ERROR(w.CheckAttrs({{"epsilon", Kind::kFloat}, {"mask_index_type", Kind::kInt}}));
  KILN_RETURN_IF_ERROR(w.CheckInputs({0, 2, 3, 5}, 9,
                                     {"input_ids", "segment_ids", "word_embedding", "position_embedding",
                                      "segment_embedding", "gamma", "beta", "mask", "position_ids"}));
  KILN_RETURN_IF_ERROR(w.CheckOutputs(3));
  if (w.given(1) != w.given(4)) return w.Invalid("segment_ids and segment_embedding: expected both or neither");
  const int64_t mask_index_type = w.attrs().GetInt("mask_index_type", 1);
  if (mask_index_type != 0 && mask_index_type != 1)
    return w.Invalid("attribute 'mask_index_type': expected 0 or 1, found " + std::to_string(mask_index_type));
  const ir::Value ids = w.value(w.in(0));
  if (ids.rank() != 2) return w.Invalid("input_ids must be 2-D [batch, sequence], found " + ir::meta::Str(ids.shape));
  KILN_RETURN_IF_ERROR(w.CheckDType(0, "input_ids", DType::kInt32));
  // segment_ids, mask and position_ids: int32, and input_ids' shape ([1, sequence] for
  // position_ids too), as onnxruntime requires.
  const std::pair<size_t, const char*> same_shape[] = {{1, "segment_ids"}, {7, "mask"}, {8, "position_ids"}};
  for (const auto& [i, name] : same_shape) {
    if (!w.given(i)) continue;
    KILN_RETURN_IF_ERROR(w.CheckDType(i, name, DType::kInt32));
    const ir::Value v = w.value(w.in(i));
    bool fits = v.rank() == 2;
    for (int d = 0; fits && d < 2; ++d) {
      const auto got = v.shape[static_cast<size_t>(d)].value(), want = ids.shape[static_cast<size_t>(d)].value();
      fits = !got || !want || *got == *want || (i == 8 && d == 0 && *got == 1);
    }
    if (!fits)
      return w.Invalid(std::string("input '") + name + "' " + ir::meta::Str(v.shape) + ": expected input_ids' shape " +
                       ir::meta::Str(ids.shape) + (i == 8 ? " (or [1, sequence])" : ""));
  }
  // onnxruntime refuses a negative id, which Gather would read from the end: one becomes an id
  // past the table (INT32_MAX), which Gather refuses at run time.
  const auto gather = [&](ValueId table, ValueId ids) {
    const ValueId negative = w.One("Less", {ids, w.IntScalar(0, DType::kInt32)});
    const ValueId checked = w.One("Where", {negative, w.IntScalar(INT32_MAX, DType::kInt32), ids});
    return w.One("Gather", {table, checked});
  };
  const ValueId position_ids = w.given(8) ? w.in(8) : w.Cast(w.Iota(w.DimScalar(w.in(0), 1)), DType::kInt32);
  std::vector<ValueId> terms = {gather(w.in(2), w.in(0)), gather(w.in(3), position_ids)};
  if (w.given(1)) terms.push_back(gather(w.in(4), w.in(1)));
  ValueId sum = terms[0];
  for (size_t i = 1; i < terms.size(); ++i)
    sum = w.One("Add", {sum, terms[i]}, {}, i + 1 == terms.size() ? w.out(2) : kNoValue);
  AttrMap ln;
  ln.SetInt("axis", -1);
  ln.SetFloat("epsilon", w.attrs().GetFloat("epsilon", 1e-12f));
  std::vector<ValueId> ln_in = {sum, w.in(5)};
  if (w.given(6)) ln_in.push_back(w.in(6));
  w.One("LayerNormalization", ln_in, ln, w.out(0));
  if (w.out(1) == kNoValue) return Status::Ok();
  if (!w.given(7)) {
    w.One("Expand", {w.IntScalar(0, DType::kInt32), w.Dim(w.in(0), 0)}, {}, w.out(1));
    return Status::Ok();
  }
  AttrMap keep;
  keep.SetInt("keepdims", 0);
  const ValueId ones = w.One("Equal", {w.in(7), w.IntScalar(1, w.value(w.in(7)).dtype)});
  w.One("ReduceSum", {w.Cast(ones, DType::kInt32), w.Ints({1})}, keep, w.out(1));
  return Status::Ok();
}

// ---- Attention and MultiHeadAttention -----------------------------------------------------------

// onnxruntime's mask forms, as an additive float mask that broadcasts to [batch, heads, q_seq,
// total]: 0 where a key is kept, mask_filter_value where it is masked. `mask` is [batch] (keys
// at or past the value are masked), [2 * batch] (end, then start: keys outside [start, end)),
// [batch, total] or [batch, q_seq, total] (keys where the mask is 0 are masked); [2 * batch]
// only where `two_batch` (Attention's mask_index, not MultiHeadAttention's key_padding_mask).
// `total` is the total sequence (past + new keys) as an int64 scalar, `total_static` its value
// where the shapes give it, which a 2-D or 3-D mask's last dim must equal.
Result<ValueId> AdditiveMask(Writer& w, ValueId mask, const ir::Sym& batch, ValueId total,
                             std::optional<int64_t> total_static, bool two_batch, DType dtype) {
  const ir::Value m = w.value(mask);
  if (!ir::meta::IsInteger(m.dtype) && m.dtype != DType::kBool)
    return w.Invalid("the mask " + ir::meta::Str(m.shape) + ": expected an integer type, found " +
                     ir::meta::DTypeStr(m.dtype));
  const float filter = w.attrs().GetFloat("mask_filter_value", -10000.0f);
  ValueId keep;
  std::vector<int64_t> axes;
  if (m.rank() == 1) {
    const ValueId keys = w.Unsqueeze(w.Iota(total), {0});  // [1, total]
    const ValueId index = w.Cast(mask, DType::kInt64);
    // onnxruntime tells the forms apart by the length at run time; Kiln at compile time: [2 *
    // batch] where both are static and the length is twice the batch, else [batch] (the mask's
    // length then must equal the batch, which the prologue checks where it is symbolic).
    const auto length = m.shape[0].value();
    if (two_batch && length && batch.value() && *length == 2 * *batch.value()) {
      AttrMap split;
      split.SetInt("axis", 0);
      split.SetInt("num_outputs", 2);
      const std::vector<ValueId> parts = w.Step("Split", {index}, split, {}, 2);
      keep = w.One("And", {w.One("Less", {keys, w.Unsqueeze(parts[0], {1})}),
                           w.One("GreaterOrEqual", {keys, w.Unsqueeze(parts[1], {1})})});
    } else {
      keep = w.One("Less", {keys, w.Unsqueeze(index, {1})});
    }
    axes = {1, 2};
  } else if (m.rank() == 2 || m.rank() == 3) {
    if (const auto last = m.shape.back().value(); last && total_static && *last != *total_static)
      return w.Invalid("the mask " + ir::meta::Str(m.shape) + ": its last dim must be the total sequence " +
                       std::to_string(*total_static) + " (past + new keys), found " + std::to_string(*last));
    keep = w.One("Greater", {mask, w.IntScalar(0, m.dtype)});
    axes = m.rank() == 2 ? std::vector<int64_t>{1, 2} : std::vector<int64_t>{1};
  } else {
    return w.NotTaken("a mask of rank " + std::to_string(m.rank()) + " " + ir::meta::Str(m.shape) +
                      " (Kiln takes [batch], [2 * batch], [batch, total] and [batch, q_seq, total])");
  }
  const ValueId additive = w.One("Where", {keep, w.FloatScalar(0.0, dtype), w.FloatScalar(filter, dtype)});
  return w.Unsqueeze(additive, axes);
}

// ONNX's Attention over 3-D Q, K and V ([batch, sequence, heads * head size]) with the
// com.microsoft op's mask, attention_bias, past and attributes (`batch`: the input's dim 0; the
// dtype: input #0's; `total_static` and `two_batch`: AdditiveMask's). Its outputs: `outs` (Y,
// present_key, present_value; kNoValue: a new value), the presents only `with_present`.
Result<std::vector<ValueId>> WriteAttention(Writer& w, ValueId q, ValueId k, ValueId v, ValueId mask, ValueId bias,
                                            ValueId past_k, ValueId past_v, int64_t heads, const ir::Sym& batch,
                                            std::optional<int64_t> total_static, bool two_batch,
                                            std::vector<ValueId> outs, bool with_present) {
  const DType dtype = w.value(w.in(0)).dtype;
  ValueId attn_mask = kNoValue;
  if (mask != kNoValue) {
    ValueId total = w.DimScalar(k, 1);
    if (past_k != kNoValue) total = w.One("Add", {w.DimScalar(past_k, 2), total});
    KILN_ASSIGN_OR_RETURN(attn_mask, AdditiveMask(w, mask, batch, total, total_static, two_batch, dtype));
  }
  if (bias != kNoValue) attn_mask = attn_mask == kNoValue ? bias : w.One("Add", {attn_mask, bias});
  AttrMap a;
  a.SetInt("q_num_heads", heads);
  a.SetInt("kv_num_heads", heads);
  // onnxruntime reads a scale of 0 (its kernels' default) as 1 / sqrt(head size), ONNX's default.
  if (const float scale = w.attrs().GetFloat("scale", 0.0f); scale != 0.0f) a.SetFloat("scale", scale);
  if (w.attrs().GetInt("unidirectional", 0) != 0) a.SetInt("is_causal", 1);
  std::vector<ValueId> inputs = {q, k, v, attn_mask};
  if (past_k != kNoValue) inputs.insert(inputs.end(), {past_k, past_v});
  while (inputs.back() == kNoValue) inputs.pop_back();
  outs.resize(with_present ? 3 : 1);
  return w.Step("Attention", inputs, a, outs, outs.size());
}

int64_t HeadsAttr(const Writer& w) { return w.attrs().GetInt("num_heads", 0); }

// Attention: (input, weights, bias, mask_index, past, attention_bias, past_sequence_length);
// Q, K and V are input @ weights (+ bias) split by qkv_hidden_sizes (equal thirds by default);
// past is [2, batch, heads, past, head size], present the same with past + sequence.
Status Attention(Writer& w) {
  KILN_RETURN_IF_ERROR(w.CheckAttrs({{"num_heads", Kind::kInt},
                                     {"qkv_hidden_sizes", Kind::kInts},
                                     {"scale", Kind::kFloat},
                                     {"unidirectional", Kind::kInt},
                                     {"mask_filter_value", Kind::kFloat},
                                     {"do_rotary", Kind::kInt},
                                     {"rotary_embedding_dim", Kind::kInt},
                                     {"past_present_share_buffer", Kind::kInt}}));
  KILN_RETURN_IF_ERROR(w.CheckInputs(
      {0, 1}, 7, {"input", "weights", "bias", "mask_index", "past", "attention_bias", "past_sequence_length"}));
  KILN_RETURN_IF_ERROR(w.CheckOutputs(2));
  KILN_RETURN_IF_ERROR(w.CheckFloat(0, "input"));
  KILN_RETURN_IF_ERROR(w.CheckFloat(1, "weights"));
  const AttrMap& a = w.attrs();
  const int64_t heads = HeadsAttr(w);
  if (heads < 1) return w.Invalid("attribute 'num_heads' is required and must be at least 1");
  if (a.GetInt("do_rotary", 0) != 0) return w.NotTaken("do_rotary 1 (rotary embedding inside Attention)");
  if (a.GetInt("past_present_share_buffer", 0) != 0 || w.given(6))
    return w.NotTaken("past_present_share_buffer and past_sequence_length (a shared KV buffer)");
  const ir::Value& x = w.value(w.in(0));
  const ir::Value& weights = w.value(w.in(1));
  if (x.rank() != 3)
    return w.Invalid("input must be 3-D [batch, sequence, input hidden], found " + ir::meta::Str(x.shape));
  if (weights.rank() != 2)
    return w.Invalid("weights must be 2-D [input hidden, q + k + v hidden], found " + ir::meta::Str(weights.shape));
  std::vector<int64_t> sizes = a.GetInts("qkv_hidden_sizes");
  const auto all = weights.shape[1].value();
  if (sizes.empty()) {
    if (!all || *all % 3 != 0)
      return w.Invalid("weights dim 1 must be a static multiple of 3 without qkv_hidden_sizes, found " +
                       weights.shape[1].ToString());
    sizes.assign(3, *all / 3);
    if (sizes[0] % heads != 0)
      return w.Invalid("the hidden size of Q, K and V, " + std::to_string(sizes[0]) +
                       " (weights dim 1 / 3), is not a multiple of num_heads " + std::to_string(heads));
  }
  if (sizes.size() != 3 || sizes[0] != sizes[1] ||
      std::any_of(sizes.begin(), sizes.end(), [&](int64_t s) { return s < 1 || s % heads != 0; }))
    return w.Invalid("qkv_hidden_sizes must be 3 positive multiples of num_heads with q's equal to k's");
  const int64_t sum = sizes[0] + sizes[1] + sizes[2];
  if (all && *all != sum)
    return w.Invalid("qkv_hidden_sizes add up to " + std::to_string(sum) + ", but weights dim 1 is " +
                     std::to_string(*all));
  if (w.given(2)) KILN_RETURN_IF_ERROR(w.CheckDim(2, "bias", 0, sum, "q + k + v hidden"));
  if (w.given(3)) KILN_RETURN_IF_ERROR(w.CheckDType(3, "mask_index", DType::kInt32));
  ValueId qkv = w.One("MatMul", {w.in(0), w.in(1)});
  if (w.given(2)) qkv = w.One("Add", {qkv, w.in(2)});
  AttrMap split;
  split.SetInt("axis", 2);
  const std::vector<ValueId> parts = w.Step("Split", {qkv, w.Ints(sizes)}, split, {}, 3);
  ValueId past_k = kNoValue, past_v = kNoValue;
  if (w.given(4)) {
    if (w.value(w.in(4)).rank() != 5)
      return w.Invalid("past must be 5-D [2, batch, heads, past sequence, head size], found " +
                       ir::meta::Str(w.value(w.in(4)).shape));
    KILN_RETURN_IF_ERROR(w.CheckDim(4, "past", 0, 2, "key and value"));
    KILN_RETURN_IF_ERROR(w.CheckDim(4, "past", 2, heads, "heads"));
    const auto half = [&](int64_t i) {
      AttrMap g;
      g.SetInt("axis", 0);
      return w.One("Gather", {w.in(4), w.IntScalar(i)}, g);
    };
    past_k = half(0), past_v = half(1);
  }
  const bool present = w.out(1) != kNoValue;
  std::optional<int64_t> total = x.shape[1].value();
  if (total && w.given(4)) {
    const auto past = w.value(w.in(4)).shape[3].value();
    total = past ? std::optional<int64_t>(*total + *past) : std::nullopt;
  }
  KILN_ASSIGN_OR_RETURN(const std::vector<ValueId> outs,
                        WriteAttention(w, parts[0], parts[1], parts[2], w.in(3), w.in(5), past_k, past_v, heads,
                                       x.shape[0], total, true, {w.out(0), kNoValue, kNoValue}, present));
  if (present) {  // [2, batch, heads, total, head size]
    AttrMap axis0;
    axis0.SetInt("axis", 0);
    w.One("Concat", {w.Unsqueeze(outs[1], {0}), w.Unsqueeze(outs[2], {0})}, axis0, w.out(1));
  }
  return Status::Ok();
}

// MultiHeadAttention: (query, key, value, bias, key_padding_mask, attention_bias, past_key,
// past_value, past_sequence_length, cache_indirection). query [batch, sequence, hidden]; key and
// value [batch, kv sequence, hidden], or [batch, heads, kv sequence, head size] (cross
// attention's keys computed once, without bias); or packed: query [batch, sequence, heads, 3,
// head size] alone, or key [batch, kv sequence, heads, 2, head size] without value. bias
// [q + k + v hidden] is added to Q, K and V. past_key and past_value are [batch, heads, past,
// head size], present_key and present_value the same with past + kv sequence.
Status MultiHeadAttention(Writer& w) {
  KILN_RETURN_IF_ERROR(w.CheckAttrs({{"num_heads", Kind::kInt},
                                     {"mask_filter_value", Kind::kFloat},
                                     {"scale", Kind::kFloat},
                                     {"unidirectional", Kind::kInt}}));
  KILN_RETURN_IF_ERROR(w.CheckInputs({0}, 10,
                                     {"query", "key", "value", "bias", "key_padding_mask", "attention_bias", "past_key",
                                      "past_value", "past_sequence_length", "cache_indirection"}));
  KILN_RETURN_IF_ERROR(w.CheckOutputs(3));
  KILN_RETURN_IF_ERROR(w.CheckFloat(0, "query"));
  const int64_t heads = HeadsAttr(w);
  if (heads < 1) return w.Invalid("attribute 'num_heads' is required and must be at least 1");
  if (w.given(4)) KILN_RETURN_IF_ERROR(w.CheckDType(4, "key_padding_mask", DType::kInt32));
  if (w.given(8) || w.given(9))
    return w.NotTaken("past_sequence_length and cache_indirection (beam search's shared KV buffer)");
  if (w.given(6) != w.given(7)) return w.Invalid("past_key and past_value: expected both or neither");
  const auto flat = [&](ValueId x) { return w.One("Reshape", {x, w.Ints({0, 0, -1})}); };
  const auto unpack = [&](ValueId packed, int64_t i) {
    AttrMap g;
    g.SetInt("axis", 3);
    return flat(w.One("Gather", {packed, w.IntScalar(i)}, g));
  };
  // Each of Q, K and V 3-D, and its hidden size (heads * head size) where it is static.
  const ir::Value& query = w.value(w.in(0));
  const auto hidden = [&](const ir::Value& x) -> std::optional<int64_t> {
    if (x.rank() == 3) return x.shape[2].value();
    if (!x.shape[2].value() || !x.shape[4].value()) return std::nullopt;
    return *x.shape[2].value() * *x.shape[4].value();  // packed [batch, sequence, heads, n, head size]
  };
  ValueId q = w.in(0), k = w.in(1), v = w.in(2);
  std::optional<int64_t> sizes[3];
  if (query.rank() == 5) {
    if (w.given(1) || w.given(2))
      return w.Invalid("a packed query [batch, sequence, heads, 3, head size] takes no key or value");
    KILN_RETURN_IF_ERROR(w.CheckDim(0, "query", 2, heads, "heads"));
    KILN_RETURN_IF_ERROR(w.CheckDim(0, "query", 3, 3, "Q, K and V"));
    q = unpack(w.in(0), 0), k = unpack(w.in(0), 1), v = unpack(w.in(0), 2);
    sizes[0] = sizes[1] = sizes[2] = hidden(query);
  } else if (query.rank() == 3) {
    if (!w.given(1)) return w.Invalid("key is required unless query is packed [batch, sequence, heads, 3, head size]");
    const ir::Value& key = w.value(w.in(1));
    sizes[0] = hidden(query);
    if (key.rank() == 5) {
      if (w.given(2)) return w.Invalid("a packed key [batch, kv sequence, heads, 2, head size] takes no value");
      KILN_RETURN_IF_ERROR(w.CheckDim(1, "key", 2, heads, "heads"));
      KILN_RETURN_IF_ERROR(w.CheckDim(1, "key", 3, 2, "K and V"));
      k = unpack(w.in(1), 0), v = unpack(w.in(1), 1);
      sizes[1] = sizes[2] = hidden(key);
    } else if (!w.given(2) || w.value(w.in(2)).rank() != key.rank() || (key.rank() != 3 && key.rank() != 4)) {
      return w.Invalid(
          "key and value must both be 3-D [batch, kv sequence, hidden] or 4-D [batch, heads, kv "
          "sequence, head size], found key " +
          ir::meta::Str(key.shape) +
          (w.given(2) ? " and value " + ir::meta::Str(w.value(w.in(2)).shape) : " and no value"));
    } else if (key.rank() == 4) {
      if (w.given(3)) return w.NotTaken("bias with 4-D key and value");
      if (w.given(6)) return w.Invalid("past_key with 4-D key and value (they are the whole cache)");
      KILN_RETURN_IF_ERROR(w.CheckDim(1, "key", 1, heads, "heads"));
      KILN_RETURN_IF_ERROR(w.CheckDim(2, "value", 1, heads, "heads"));
      k = flat(w.Transpose(w.in(1), {0, 2, 1, 3})), v = flat(w.Transpose(w.in(2), {0, 2, 1, 3}));
    } else {
      sizes[1] = hidden(key), sizes[2] = hidden(w.value(w.in(2)));
    }
  } else {
    return w.Invalid(
        "query must be 3-D [batch, sequence, hidden] or 5-D packed [batch, sequence, heads, 3, head "
        "size], found " +
        ir::meta::Str(query.shape));
  }
  if (w.given(3)) {
    if (!sizes[0] || !sizes[1] || !sizes[2]) return w.NotTaken("bias with Q, K or V of a dynamic hidden size");
    KILN_RETURN_IF_ERROR(w.CheckDim(3, "bias", 0, *sizes[0] + *sizes[1] + *sizes[2], "q + k + v hidden"));
    AttrMap split;
    split.SetInt("axis", 0);
    const std::vector<ValueId> bias =
        w.Step("Split", {w.in(3), w.Ints({*sizes[0], *sizes[1], *sizes[2]})}, split, {}, 3);
    q = w.One("Add", {q, bias[0]}), k = w.One("Add", {k, bias[1]}), v = w.One("Add", {v, bias[2]});
  }
  const bool present = w.out(1) != kNoValue || w.out(2) != kNoValue;
  // The total sequence, where the shapes give it: the keys' (past + new).
  const ir::Value key = w.value(w.given(1) ? w.in(1) : w.in(0));
  std::optional<int64_t> total = key.shape[key.rank() == 4 ? 2 : 1].value();
  if (total && w.given(6)) {
    const auto past = w.value(w.in(6)).shape[2].value();
    total = past ? std::optional<int64_t>(*total + *past) : std::nullopt;
  }
  return WriteAttention(w, q, k, v, w.in(4), w.in(5), w.in(6), w.in(7), heads, query.shape[0], total, false,
                        {w.out(0), w.out(1), w.out(2)}, present)
      .status();
}

}  // namespace

bool IsShapedContribOp(std::string_view op_type) {
  return std::find(std::begin(kOps), std::end(kOps), op_type) != std::end(kOps);
}

Result<std::vector<ir::Node>> ExpandContribOp(ir::Trace& trace, const ir::Node& node) {
  Writer w(trace, node);
  const std::string& op = w.op();
  Status st = op == "FusedMatMul"               ? FusedMatMul(w)
              : op == "FusedConv"               ? FusedConv(w)
              : op == "RotaryEmbedding"         ? RotaryEmbedding(w)
              : op == "EmbedLayerNormalization" ? EmbedLayerNormalization(w)
              : op == "Attention"               ? Attention(w)
              : op == "MultiHeadAttention"      ? MultiHeadAttention(w)
                                                : w.NotTaken("is not a com.microsoft op that Kiln expands");
  KILN_RETURN_IF_ERROR(st);
  return std::move(w.nodes);
}

}  // namespace kiln::passes
