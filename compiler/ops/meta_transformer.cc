// Meta functions of the transformer ops of opsets 23, 24 and 27: Attention, RotaryEmbedding,
// RMSNormalization and LinearAttention (CPU kernels in runtime/kernels/transformer.cc).
#include <cmath>
#include <string>
#include <utility>

#include "compiler/ops/families.h"
#include "compiler/ops/meta_util.h"

namespace kiln::ir {
using namespace meta;
namespace {

// The dtypes the CPU kernels store; they compute in float32 (RMS statistics in double).
constexpr DType kHalfAndFloat[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};

Status CheckStorage(const Value& v, std::string_view what, bool allow_double) {
  KILN_RETURN_IF_ERROR(CheckDType(v, what, kFloats));
  for (DType d : kHalfAndFloat)
    if (v.dtype == d) return Status::Ok();
  if (allow_double && v.dtype == DType::kFloat64) return Status::Ok();
  return Unimplemented("input " + std::string(what) + ": dtype " + DTypeStr(v.dtype) +
                       " is not supported (float32, float16, bfloat16" + (allow_double ? ", float64" : "") + ")");
}

// `d` divided by a positive constant `n` (a head count): exact for a constant `d`, else the
// quotient with the guard that `n` divides `d`.
Result<Sym> PerHead(MetaContext& ctx, const Sym& d, int64_t n, std::string_view what,
                    std::string_view of = "the number of heads") {
  if (auto c = d.value()) {
    if (*c % n != 0)
      return InvalidArgument(std::string(what) + " " + std::to_string(*c) + ": expected a multiple of " +
                             std::to_string(n) + " (" + std::string(of) + ")");
    return Sym(*c / n);
  }
  AddGuard(ctx, Eq(Mod(d, Sym(n)), Sym(0)));
  return FloorDiv(d, Sym(n));
}

// A head-count attribute: required (>= 1) when `required`, else absent or >= 1; 0 when absent.
Result<int64_t> HeadsAttr(const AttrMap& attrs, const char* name, bool required, std::string_view why) {
  if (!attrs.Has(name)) {
    if (required) return InvalidArgument("attribute '" + std::string(name) + "' is required " + std::string(why));
    return int64_t{0};
  }
  const int64_t n = attrs.GetInt(name, 0);
  if (n < 1) return InvalidArgument("attribute '" + std::string(name) + "': expected >= 1, found " + std::to_string(n));
  return n;
}

// ---- RMSNormalization ------------------------------------------------------------------

Status RmsNormMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* X, Need(ctx, 0, "X"));
  KILN_ASSIGN_OR_RETURN(const Value* scale, Need(ctx, 1, "scale"));
  KILN_RETURN_IF_ERROR(CheckStorage(*X, "X", true));
  KILN_RETURN_IF_ERROR(CheckRank(*X, "input X", 1, 1000));
  if (scale->dtype != X->dtype)
    return Unimplemented("input scale: dtype " + DTypeStr(scale->dtype) + " differs from X's " + DTypeStr(X->dtype) +
                         "; Kiln supports one dtype for both");
  KILN_ASSIGN_OR_RETURN(int axis, NormAxis(ctx.attrs().GetInt("axis", -1), X->rank()));
  // Stage one in float32 is the spec's default; the kernel accumulates in double, which is
  // float32's result correctly rounded. Other stash types would ask for other roundings.
  if (int64_t stash = ctx.attrs().GetInt("stash_type", 1); stash != 1)
    return Unimplemented("stash_type " + std::to_string(stash) + ": only 1 (float32) is supported");
  // scale broadcasts (numpy rules, one way) to the normalised dims X[axis:].
  const SymShape tail(X->shape.begin() + axis, X->shape.end());
  if (scale->rank() > static_cast<int>(tail.size()))
    return InvalidArgument("input scale: expected a shape broadcastable to " + Str(tail) + ", found " +
                           Str(scale->shape));
  for (int i = 0; i < scale->rank(); ++i) {
    const Sym& d = scale->shape[scale->rank() - 1 - i];
    if (d.is_const() && *d.value() == 1) continue;
    KILN_RETURN_IF_ERROR(Unify(ctx, tail[tail.size() - 1 - i], d,
                               "input scale " + Str(scale->shape) + " against the normalised shape " + Str(tail)));
  }
  ctx.SetOutput(0, X->dtype, X->shape);
  return Status::Ok();
}

// ---- RotaryEmbedding -------------------------------------------------------------------

Status RotaryMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* X, Need(ctx, 0, "X"));
  KILN_ASSIGN_OR_RETURN(const Value* cos, Need(ctx, 1, "cos_cache"));
  KILN_ASSIGN_OR_RETURN(const Value* sin, Need(ctx, 2, "sin_cache"));
  const Value* pos = ctx.input(3);
  KILN_RETURN_IF_ERROR(CheckStorage(*X, "X", false));
  KILN_RETURN_IF_ERROR(CheckRank(*X, "input X", 3, 4));
  KILN_RETURN_IF_ERROR(CheckSameDType(*X, "X", *cos, "cos_cache"));
  KILN_RETURN_IF_ERROR(CheckSameDType(*X, "X", *sin, "sin_cache"));
  const AttrMap& attrs = ctx.attrs();
  if (int64_t il = attrs.GetInt("interleaved", 0); il != 0 && il != 1)
    return InvalidArgument("attribute 'interleaved': expected 0 or 1, found " + std::to_string(il));
  // The 4-D layout is [batch, heads, sequence, head_size], the 3-D one [batch, sequence, hidden].
  const Sym& batch = X->shape[0];
  const Sym& seq = X->rank() == 4 ? X->shape[2] : X->shape[1];
  Sym head;
  if (X->rank() == 4) {
    head = X->shape[3];
    KILN_ASSIGN_OR_RETURN(int64_t h, HeadsAttr(attrs, "num_heads", false, ""));
    if (h) KILN_RETURN_IF_ERROR(Unify(ctx, Sym(h), X->shape[1], "input X dim 1 (heads) against num_heads"));
  } else {
    KILN_ASSIGN_OR_RETURN(int64_t h, HeadsAttr(attrs, "num_heads", true, "for a 3-D input"));
    KILN_ASSIGN_OR_RETURN(head, PerHead(ctx, X->shape[2], h, "input X dim 2 (hidden size)"));
  }
  const int64_t rot_attr = attrs.GetInt("rotary_embedding_dim", 0);
  if (rot_attr < 0 || rot_attr % 2 != 0)
    return InvalidArgument("attribute 'rotary_embedding_dim': expected 0 (the head size) or a positive even number, "
                           "found " + std::to_string(rot_attr));
  Sym half_rot;
  if (rot_attr > 0) {
    if (auto h = head.value(); h && rot_attr > *h)
      return InvalidArgument("attribute 'rotary_embedding_dim' " + std::to_string(rot_attr) +
                             ": expected at most the head size " + std::to_string(*h));
    if (!head.is_const()) AddGuard(ctx, Lt(Sym(rot_attr - 1), head));  // rot <= head
    half_rot = Sym(rot_attr / 2);
  } else {
    KILN_ASSIGN_OR_RETURN(half_rot, PerHead(ctx, head, 2, "head size"));
  }
  for (const Value* c : {cos, sin}) {
    const std::string what = "input " + c->name;
    if (pos) {
      KILN_RETURN_IF_ERROR(CheckRank(*c, what + " (with position_ids)", 2, 2));
    } else {
      KILN_RETURN_IF_ERROR(CheckRank(*c, what + " (without position_ids)", 3, 3));
      KILN_RETURN_IF_ERROR(Unify(ctx, batch, c->shape[0], what + " dim 0 (batch)"));
      KILN_RETURN_IF_ERROR(Unify(ctx, seq, c->shape[1], what + " dim 1 (sequence)"));
    }
    KILN_RETURN_IF_ERROR(Unify(ctx, half_rot, c->shape.back(), what + " last dim (rotary dim / 2)"));
  }
  if (pos) {
    KILN_RETURN_IF_ERROR(CheckDType(*pos, "position_ids", kSignedInts));
    if (pos->dtype != DType::kInt64)
      return InvalidArgument("input position_ids: expected dtype int64, found " + DTypeStr(pos->dtype));
    KILN_RETURN_IF_ERROR(CheckRank(*pos, "input position_ids", 2, 2));
    KILN_RETURN_IF_ERROR(Unify(ctx, batch, pos->shape[0], "input position_ids dim 0 (batch)"));
    KILN_RETURN_IF_ERROR(Unify(ctx, seq, pos->shape[1], "input position_ids dim 1 (sequence)"));
  }
  ctx.SetOutput(0, X->dtype, X->shape);
  return Status::Ok();
}

// ---- Attention -------------------------------------------------------------------------

// Q, K and V seen as 4-D: [batch, heads, sequence, head size].
struct AttentionDims {
  Sym batch, q_heads, kv_heads, q_seq, kv_seq, head, v_head;
};

Result<AttentionDims> ReadAttentionDims(MetaContext& ctx, const Value& Q, const Value& K, const Value& V) {
  const AttrMap& attrs = ctx.attrs();
  AttentionDims d;
  d.batch = Q.shape[0];
  Sym k_head;
  // Kiln's packed_qkv (compiler/passes/attention.h): each input [B, S, 3 * hidden], Q, K and V
  // its first, second and third thirds of columns.
  const int64_t packed = attrs.GetInt("packed_qkv", 0);
  if (packed != 0 && packed != 1)
    return InvalidArgument("attribute 'packed_qkv': expected 0 or 1, found " + std::to_string(packed));
  if (packed && Q.rank() != 3) return InvalidArgument("attribute 'packed_qkv': expected 3-D inputs");
  if (Q.rank() == 3) {
    KILN_ASSIGN_OR_RETURN(int64_t hq, HeadsAttr(attrs, "q_num_heads", true, "for 3-D inputs"));
    KILN_ASSIGN_OR_RETURN(int64_t hkv, HeadsAttr(attrs, "kv_num_heads", true, "for 3-D inputs"));
    if (packed && hq != hkv)
      return InvalidArgument("attribute 'packed_qkv': expected q_num_heads (" + std::to_string(hq) +
                             ") equal to kv_num_heads (" + std::to_string(hkv) + ")");
    d.q_heads = Sym(hq), d.kv_heads = Sym(hkv), d.q_seq = Q.shape[1], d.kv_seq = K.shape[1];
    KILN_RETURN_IF_ERROR(Unify(ctx, d.kv_seq, V.shape[1], "input V dim 1 (kv sequence)"));
    const int64_t parts = packed ? 3 : 1;
    const char* of = packed ? "3 times the number of heads, packed_qkv" : "the number of heads";
    KILN_ASSIGN_OR_RETURN(d.head, PerHead(ctx, Q.shape[2], parts * hq, "input Q dim 2 (hidden size)", of));
    KILN_ASSIGN_OR_RETURN(k_head, PerHead(ctx, K.shape[2], parts * hkv, "input K dim 2 (hidden size)", of));
    KILN_ASSIGN_OR_RETURN(d.v_head, PerHead(ctx, V.shape[2], parts * hkv, "input V dim 2 (hidden size)", of));
    if (packed) KILN_RETURN_IF_ERROR(Unify(ctx, d.head, d.v_head, "packed V's head size against Q's"));
  } else {
    d.q_heads = Q.shape[1], d.kv_heads = K.shape[1], d.q_seq = Q.shape[2], d.kv_seq = K.shape[2];
    d.head = Q.shape[3], k_head = K.shape[3], d.v_head = V.shape[3];
    KILN_RETURN_IF_ERROR(Unify(ctx, d.kv_heads, V.shape[1], "input V dim 1 (kv heads)"));
    KILN_RETURN_IF_ERROR(Unify(ctx, d.kv_seq, V.shape[2], "input V dim 2 (kv sequence)"));
    // The head counts are Q's and K's dim 1; the attributes, when given anyway, must agree.
    const std::pair<const char*, const Sym*> heads[] = {{"q_num_heads", &d.q_heads}, {"kv_num_heads", &d.kv_heads}};
    for (const auto& [name, dim] : heads) {
      KILN_ASSIGN_OR_RETURN(int64_t h, HeadsAttr(attrs, name, false, ""));
      if (h) KILN_RETURN_IF_ERROR(Unify(ctx, *dim, Sym(h), std::string("attribute '") + name + "' against the 4-D input"));
    }
  }
  KILN_RETURN_IF_ERROR(Unify(ctx, d.batch, K.shape[0], "input K dim 0 (batch)"));
  KILN_RETURN_IF_ERROR(Unify(ctx, d.batch, V.shape[0], "input V dim 0 (batch)"));
  KILN_RETURN_IF_ERROR(Unify(ctx, d.head, k_head, "K's head size against Q's"));
  // Grouped-query attention: each kv head serves q_heads / kv_heads consecutive q heads.
  if (d.q_heads.is_const() && d.kv_heads.is_const()) {
    if (*d.kv_heads.value() < 1 || *d.q_heads.value() % *d.kv_heads.value() != 0)
      return InvalidArgument("q heads " + d.q_heads.ToString() + ": expected a multiple of the kv heads " +
                             d.kv_heads.ToString());
  } else {
    AddGuard(ctx, Eq(Mod(d.q_heads, d.kv_heads), Sym(0)));
  }
  return d;
}

Status CheckAttentionAttrs(const AttrMap& attrs) {
  if (int64_t c = attrs.GetInt("is_causal", 0); c != 0 && c != 1)
    return InvalidArgument("attribute 'is_causal': expected 0 or 1, found " + std::to_string(c));
  if (int64_t m = attrs.GetInt("qk_matmul_output_mode", 0); m < 0 || m > 3)
    return InvalidArgument("attribute 'qk_matmul_output_mode': expected 0, 1, 2 or 3, found " + std::to_string(m));
  if (float s = attrs.GetFloat("softcap", 0.0f); !(s >= 0.0f) || std::isinf(s))
    return InvalidArgument("attribute 'softcap': expected a finite number >= 0, found " + std::to_string(s));
  if (attrs.Has("scale") && !std::isfinite(attrs.GetFloat("scale", 1.0f)))
    return InvalidArgument("attribute 'scale': expected a finite number, found " +
                           std::to_string(attrs.GetFloat("scale", 1.0f)));
  // The kernel's softmax runs in float32: what float16, bfloat16 and float32 ask for, or better.
  if (attrs.Has("softmax_precision")) {
    const int64_t p = attrs.GetInt("softmax_precision", 1);
    if (p == 11) return Unimplemented("softmax_precision 11 (double): the softmax runs in float32");
    if (p != 1 && p != 10 && p != 16)
      return InvalidArgument("attribute 'softmax_precision': expected a float type (1, 10, 11 or 16), found " +
                             std::to_string(p));
  }
  return Status::Ok();
}

// attn_mask broadcasts to [batch, q_heads, q_seq, total]; its last dim may be shorter than
// total (the missing keys are masked).
Status CheckMask(MetaContext& ctx, const Value& mask, const Value& Q, const AttentionDims& d, const Sym& total) {
  if (mask.dtype != DType::kBool && mask.dtype != Q.dtype)
    return InvalidArgument("input attn_mask: expected dtype bool or " + DTypeStr(Q.dtype) + " (Q's), found " +
                           DTypeStr(mask.dtype));
  KILN_RETURN_IF_ERROR(CheckRank(mask, "input attn_mask", 1, 4));
  const Sym& last = mask.shape.back();
  if (last.is_const() && total.is_const() && *last.value() > *total.value())
    return InvalidArgument("input attn_mask last dim " + last.ToString() + ": expected at most the total sequence " +
                           total.ToString());
  const Sym target[] = {d.batch, d.q_heads, d.q_seq};
  for (int i = 0; i + 1 < mask.rank(); ++i) {
    const Sym& m = mask.shape[mask.rank() - 2 - i];
    if (m.is_const() && *m.value() == 1) continue;
    KILN_RETURN_IF_ERROR(Unify(ctx, target[2 - i], m, "input attn_mask " + Str(mask.shape) +
                                                          " against [batch, q_heads, q_seq] dim " + std::to_string(2 - i)));
  }
  return Status::Ok();
}

Status AttentionMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 4));
  KILN_ASSIGN_OR_RETURN(const Value* Q, Need(ctx, 0, "Q"));
  KILN_ASSIGN_OR_RETURN(const Value* K, Need(ctx, 1, "K"));
  KILN_ASSIGN_OR_RETURN(const Value* V, Need(ctx, 2, "V"));
  const Value* mask = ctx.input(3);
  const Value* past_k = ctx.input(4);
  const Value* past_v = ctx.input(5);
  const Value* nonpad = ctx.input(6);
  KILN_RETURN_IF_ERROR(CheckStorage(*Q, "Q", false));
  KILN_RETURN_IF_ERROR(CheckRank(*Q, "input Q", 3, 4));
  KILN_RETURN_IF_ERROR(CheckRank(*K, "input K", Q->rank(), Q->rank()));
  KILN_RETURN_IF_ERROR(CheckRank(*V, "input V", Q->rank(), Q->rank()));
  KILN_RETURN_IF_ERROR(CheckSameDType(*Q, "Q", *K, "K"));
  KILN_RETURN_IF_ERROR(CheckSameDType(*Q, "Q", *V, "V"));
  KILN_RETURN_IF_ERROR(CheckAttentionAttrs(ctx.attrs()));
  KILN_ASSIGN_OR_RETURN(AttentionDims d, ReadAttentionDims(ctx, *Q, *K, *V));
  if ((past_k == nullptr) != (past_v == nullptr))
    return InvalidArgument("inputs past_key and past_value: expected both or neither");
  Sym total = d.kv_seq;
  if (past_k) {
    KILN_RETURN_IF_ERROR(CheckSameDType(*Q, "Q", *past_k, "past_key"));
    KILN_RETURN_IF_ERROR(CheckSameDType(*Q, "Q", *past_v, "past_value"));
    KILN_RETURN_IF_ERROR(CheckRank(*past_k, "input past_key", 4, 4));
    KILN_RETURN_IF_ERROR(CheckRank(*past_v, "input past_value", 4, 4));
    const Sym& past = past_k->shape[2];
    const Sym want_k[] = {d.batch, d.kv_heads, past, d.head};
    const Sym want_v[] = {d.batch, d.kv_heads, past, d.v_head};
    for (int i = 0; i < 4; ++i) {
      KILN_RETURN_IF_ERROR(Unify(ctx, want_k[i], past_k->shape[i], "input past_key dim " + std::to_string(i)));
      KILN_RETURN_IF_ERROR(Unify(ctx, want_v[i], past_v->shape[i], "input past_value dim " + std::to_string(i)));
    }
    total = AddS(past, d.kv_seq);
  }
  if (nonpad) {
    if (past_k)
      return InvalidArgument("input nonpad_kv_seqlen: expected no past_key/past_value with it (an external cache)");
    if (nonpad->dtype != DType::kInt64)
      return InvalidArgument("input nonpad_kv_seqlen: expected dtype int64, found " + DTypeStr(nonpad->dtype));
    KILN_RETURN_IF_ERROR(CheckRank(*nonpad, "input nonpad_kv_seqlen", 1, 1));
    KILN_RETURN_IF_ERROR(Unify(ctx, d.batch, nonpad->shape[0], "input nonpad_kv_seqlen dim 0 (batch)"));
  }
  if (mask) KILN_RETURN_IF_ERROR(CheckMask(ctx, *mask, *Q, d, total));
  if (Q->rank() == 3) {
    ctx.SetOutput(0, Q->dtype, {d.batch, d.q_seq, d.q_heads * d.v_head});
  } else {
    ctx.SetOutput(0, Q->dtype, {d.batch, d.q_heads, d.q_seq, d.v_head});
  }
  ctx.SetOutput(1, Q->dtype, {d.batch, d.kv_heads, total, d.head});
  ctx.SetOutput(2, Q->dtype, {d.batch, d.kv_heads, total, d.v_head});
  ctx.SetOutput(3, Q->dtype, {d.batch, d.q_heads, d.q_seq, total});
  return Status::Ok();
}

// ---- LinearAttention -------------------------------------------------------------------

// LinearAttention (opset 27), all 3-D packed with heads in the last dim: query [B, T, Hq*dk],
// key [B, T, Hkv*dk], value [B, T, Hkv*dv]; past_state [B, Hkv, dk, dv]; decay [B, T, Hkv*dk]
// (per key dim) or [B, T, Hkv] (per head), present exactly for the gated rules; beta [B, T, Hkv]
// or [B, T, 1], present exactly for the delta rules -> output [B, T, Hq*dv] in query's dtype and
// present_state [B, Hkv, dk, dv] in past_state's dtype, else query's (the ONNX reference's rule).
// chunk_size is a tuning hint that changes no result; the kernel ignores it.
Status LinearAttentionMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 2));
  KILN_ASSIGN_OR_RETURN(const Value* q, Need(ctx, 0, "query"));
  KILN_ASSIGN_OR_RETURN(const Value* k, Need(ctx, 1, "key"));
  KILN_ASSIGN_OR_RETURN(const Value* v, Need(ctx, 2, "value"));
  const Value *past = ctx.input(3), *decay = ctx.input(4), *beta = ctx.input(5);
  KILN_RETURN_IF_ERROR(CheckStorage(*q, "query", false));
  for (const auto& [x, name] : {std::pair{k, "key"}, std::pair{v, "value"}, std::pair{decay, "decay"},
                                std::pair{beta, "beta"}}) {
    if (x) KILN_RETURN_IF_ERROR(CheckSameDType(*q, "query", *x, name));
  }
  const AttrMap& attrs = ctx.attrs();
  const std::string rule(attrs.GetString("update_rule", "gated_delta"));
  const bool gated = rule == "gated" || rule == "gated_delta", delta = rule == "delta" || rule == "gated_delta";
  if (!gated && !delta && rule != "linear")
    return InvalidArgument("attribute 'update_rule': expected 'linear', 'gated', 'delta' or 'gated_delta', found '" +
                           rule + "'");
  if (gated != (decay != nullptr))
    return InvalidArgument("input decay: update_rule '" + rule + (gated ? "' requires it" : "' takes none"));
  if (delta != (beta != nullptr))
    return InvalidArgument("input beta: update_rule '" + rule + (delta ? "' requires it" : "' takes none"));
  KILN_ASSIGN_OR_RETURN(int64_t hq, HeadsAttr(attrs, "q_num_heads", true, "(it unpacks the heads of query)"));
  KILN_ASSIGN_OR_RETURN(int64_t hkv, HeadsAttr(attrs, "kv_num_heads", true, "(it unpacks the heads of key and value)"));
  if (hq % hkv != 0)
    return InvalidArgument("attribute 'q_num_heads' " + std::to_string(hq) + ": expected a multiple of kv_num_heads " +
                           std::to_string(hkv));
  if (attrs.Has("scale") && !std::isfinite(attrs.GetFloat("scale", 0.0f)))
    return InvalidArgument("attribute 'scale': expected a finite number, found " +
                           FloatStr(attrs.GetFloat("scale", 0.0f)));
  for (const auto& [x, name] : {std::pair{q, "input query"}, std::pair{k, "input key"}, std::pair{v, "input value"},
                                std::pair{decay, "input decay"}, std::pair{beta, "input beta"}}) {
    if (x) KILN_RETURN_IF_ERROR(CheckRank(*x, name, 3, 3));
  }
  const Sym &batch = q->shape[0], &seq = q->shape[1];
  KILN_ASSIGN_OR_RETURN(Sym dk, PerHead(ctx, q->shape[2], hq, "input query dim 2 (hidden size)", "q_num_heads"));
  KILN_ASSIGN_OR_RETURN(Sym k_head, PerHead(ctx, k->shape[2], hkv, "input key dim 2 (hidden size)", "kv_num_heads"));
  KILN_ASSIGN_OR_RETURN(Sym dv, PerHead(ctx, v->shape[2], hkv, "input value dim 2 (hidden size)", "kv_num_heads"));
  KILN_RETURN_IF_ERROR(Unify(ctx, dk, k_head, "key's head size against query's"));
  for (const auto& [x, name] : {std::pair{k, "input key"}, std::pair{v, "input value"}, std::pair{decay, "input decay"},
                                std::pair{beta, "input beta"}}) {
    if (!x) continue;
    KILN_RETURN_IF_ERROR(Unify(ctx, batch, x->shape[0], std::string(name) + " dim 0 (batch)"));
    KILN_RETURN_IF_ERROR(Unify(ctx, seq, x->shape[1], std::string(name) + " dim 1 (sequence)"));
  }
  // decay: one gate per key dim, or one per head. A symbolic last dim is taken per key dim.
  if (decay && decay->shape[2].value() != hkv)
    KILN_RETURN_IF_ERROR(
        Unify(ctx, Sym(hkv) * dk, decay->shape[2], "input decay dim 2 (kv_num_heads * head size, or kv_num_heads)"));
  // beta: one rate per head, or one for all heads. A symbolic last dim is taken per head.
  if (beta && beta->shape[2].value() != 1)
    KILN_RETURN_IF_ERROR(Unify(ctx, Sym(hkv), beta->shape[2], "input beta dim 2 (kv_num_heads, or 1)"));
  const SymShape state = {batch, Sym(hkv), dk, dv};
  if (past) {
    KILN_RETURN_IF_ERROR(CheckStorage(*past, "past_state", false));
    KILN_RETURN_IF_ERROR(CheckRank(*past, "input past_state", 4, 4));
    for (int d = 0; d < 4; ++d)
      KILN_RETURN_IF_ERROR(Unify(ctx, state[d], past->shape[d], "input past_state dim " + std::to_string(d)));
  }
  ctx.SetOutput(0, q->dtype, {batch, seq, Sym(hq) * dv});
  ctx.SetOutput(1, past ? past->dtype : q->dtype, state);
  return Status::Ok();
}

}  // namespace

void RegisterTransformerOps(std::vector<OpDef>& ops) {
  Def(ops, "Attention", AttentionMeta);
  Def(ops, "LinearAttention", LinearAttentionMeta);
  Def(ops, "RotaryEmbedding", RotaryMeta);
  Def(ops, "RMSNormalization", RmsNormMeta);
}

}  // namespace kiln::ir
