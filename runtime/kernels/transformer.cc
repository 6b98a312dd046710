// The transformer ops of opsets 23, 24 and 27: Attention, RotaryEmbedding, RMSNormalization and
// LinearAttention, each one kernel rather than the graph of primitives of its ONNX function body,
// so the intermediates (scores, probabilities, the concatenated cache, the running state) never
// reach memory plans.
//
// Storage may be float32, float16 or bfloat16 (RMSNormalization also float64); everything
// is computed in float32 (RMS statistics in double) and rounded to the storage type once
// per output element. For half inputs that is at least as accurate as the reference, which
// rounds every intermediate (scores, softmax) to half. LinearAttention reads float32 only.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include "runtime/kernels/attention_tiles.h"
#include "runtime/kernels/families.h"
#include "runtime/kernels/row_math.h"
#include "runtime/kernels/gemm.h"
#include "runtime/kernels/kernel_util.h"
#include "runtime/half.h"

namespace kiln::cpu {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

bool IsStorageType(DType dt) {
  return dt == DType::kFloat32 || dt == DType::kFloat16 || dt == DType::kBFloat16;
}

float Load(const TensorRef& t, int64_t i) {
  switch (t.dtype) {
    case DType::kFloat16: return HalfToFloat(t.as<const uint16_t>()[i]);
    case DType::kBFloat16: return BF16ToFloat(t.as<const uint16_t>()[i]);
    case DType::kFloat64: return static_cast<float>(t.as<const double>()[i]);
    default: return t.as<const float>()[i];
  }
}

void Store(const TensorRef& t, int64_t i, double v) {
  switch (t.dtype) {
    case DType::kFloat16: t.as<uint16_t>()[i] = FloatToHalf(static_cast<float>(v)); break;
    case DType::kBFloat16: t.as<uint16_t>()[i] = FloatToBF16(static_cast<float>(v)); break;
    case DType::kFloat64: t.as<double>()[i] = v; break;
    default: t.as<float>()[i] = static_cast<float>(v); break;
  }
}

double LoadDouble(const TensorRef& t, int64_t i) {
  return t.dtype == DType::kFloat64 ? t.as<const double>()[i] : static_cast<double>(Load(t, i));
}

// ---- RMSNormalization ------------------------------------------------------------------

// Y = X / sqrt(mean(X^2 over axes [axis, rank)) + epsilon) * scale, scale broadcast to X[axis:].
Status RmsNormalization(const KernelCall& call) {
  constexpr std::string_view kName = "RMSNormalization";
  KILN_RETURN_IF_ERROR(CheckArity(call, kName, 2));
  const TensorRef &x = call.inputs[0], &scale = call.inputs[1], &y = call.outputs[0];
  if ((!IsStorageType(x.dtype) && x.dtype != DType::kFloat64) || scale.dtype != x.dtype || y.dtype != x.dtype)
    return OpError(kName, "X, scale and Y must share a float32, float16, bfloat16 or float64 dtype, got " +
                              DTypeStr(x.dtype) + ", " + DTypeStr(scale.dtype) + ", " + DTypeStr(y.dtype));
  KILN_RETURN_IF_ERROR(CheckSameCount(x, y, kName));
  if (int64_t stash = call.attrs.GetInt("stash_type", 1); stash != 1)
    return OpUnimplemented(kName, "stash_type " + std::to_string(stash) + ": only 1 (float32) is supported");
  int axis = 0;
  if (!NormalizeAxis(call.attrs.GetInt("axis", -1), x.rank, &axis))
    return OpError(kName, "axis " + std::to_string(call.attrs.GetInt("axis", -1)) + " is out of range for X " +
                              ShapeStr(x));
  const int nrank = x.rank - axis;
  int64_t ss[kMaxRank] = {};
  if (!BroadcastStrides(scale.dims, scale.rank, x.dims + axis, nrank, ss))
    return OpError(kName, "scale " + ShapeStr(scale) + " must broadcast to the normalised shape " +
                              ShapeStr(x.dims + axis, nrank));
  const int64_t outer = Product(x.dims, 0, axis), inner = Product(x.dims, axis, x.rank);
  const double eps = call.attrs.GetFloat("epsilon", 1e-5f);
  for (int64_t r = 0; r < outer; ++r) {
    const int64_t base = r * inner;
    double sq = 0;
    for (int64_t i = 0; i < inner; ++i) {
      const double v = LoadDouble(x, base + i);
      sq += v * v;
    }
    const double inv_rms = 1.0 / std::sqrt((inner ? sq / inner : 0.0) + eps);
    NdIndex it(x.dims + axis, nrank);
    for (int64_t i = 0; i < inner; ++i) {
      Store(y, base + i, LoadDouble(x, base + i) * inv_rms * LoadDouble(scale, it.Offset(ss, nrank)));
      it.Next(nrank);
    }
  }
  return Status::Ok();
}

// ---- RotaryEmbedding -------------------------------------------------------------------

// Rotates the first rotary_embedding_dim values of each head by the angles of its token:
// pairs (x[k], x[k + rot/2]), or (x[2k], x[2k+1]) when interleaved, become
// (cos*x1 - sin*x2, sin*x1 + cos*x2); the rest of the head is copied.
Status RotaryEmbedding(const KernelCall& call) {
  constexpr std::string_view kName = "RotaryEmbedding";
  KILN_RETURN_IF_ERROR(CheckArity(call, kName, 3));
  const TensorRef &x = call.inputs[0], &cos = call.inputs[1], &sin = call.inputs[2], &y = call.outputs[0];
  const TensorRef* pos = OptionalInput(call, 3);
  if (!IsStorageType(x.dtype) || cos.dtype != x.dtype || sin.dtype != x.dtype || y.dtype != x.dtype)
    return OpError(kName, "X, cos_cache, sin_cache and Y must share a float32, float16 or bfloat16 dtype");
  if ((x.rank != 3 && x.rank != 4) || y.num_elements != x.num_elements)
    return OpError(kName, "X must be 3-D or 4-D with Y's element count, got X " + ShapeStr(x) + ", Y " + ShapeStr(y));
  const bool four_d = x.rank == 4;
  const int64_t batch = x.dims[0], seq = four_d ? x.dims[2] : x.dims[1];
  const int64_t heads = four_d ? x.dims[1] : call.attrs.GetInt("num_heads", 0);
  if (heads < 1 || (!four_d && x.dims[2] % heads != 0))
    return OpError(kName, "num_heads " + std::to_string(heads) + " does not divide X " + ShapeStr(x));
  const int64_t head = four_d ? x.dims[3] : x.dims[2] / heads;
  const int64_t rot_attr = call.attrs.GetInt("rotary_embedding_dim", 0);
  const int64_t rot = rot_attr > 0 ? rot_attr : head, half = rot / 2;
  const bool interleaved = call.attrs.GetInt("interleaved", 0) != 0;
  const int cache_rank = pos ? 2 : 3;
  if (rot % 2 != 0 || rot > head || cos.rank != cache_rank || sin.rank != cache_rank ||
      cos.dims[cache_rank - 1] != half || sin.num_elements != cos.num_elements ||
      (!pos && cos.num_elements != batch * seq * half) ||
      (pos && (pos->dtype != DType::kInt64 || pos->num_elements != batch * seq)))
    return OpError(kName, "caches " + ShapeStr(cos) + ", " + ShapeStr(sin) + " and position_ids " +
                              (pos ? ShapeStr(*pos) : "<absent>") + " do not fit X " + ShapeStr(x) +
                              " with rotary dim " + std::to_string(rot));
  const int64_t positions = pos ? cos.dims[0] : 0;
  // Element (b, s, h, d) of X and Y: [B, H, S, D] in 4-D, [B, S, H*D] in 3-D.
  const int64_t sb = heads * seq * head, sh = four_d ? seq * head : head, ss = four_d ? head : heads * head;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t s = 0; s < seq; ++s) {
      int64_t row = b * seq + s;  // the cache row of this token
      if (pos) {
        row = pos->as<const int64_t>()[b * seq + s];
        if (row < 0 || row >= positions)
          return OpError(kName, "position_ids[" + std::to_string(b) + "," + std::to_string(s) + "] = " +
                                    std::to_string(row) + " is outside the caches' " + std::to_string(positions) +
                                    " positions");
      }
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t base = b * sb + h * sh + s * ss;
        for (int64_t k = 0; k < half; ++k) {
          const float c = Load(cos, row * half + k), sn = Load(sin, row * half + k);
          const int64_t i1 = base + (interleaved ? 2 * k : k), i2 = base + (interleaved ? 2 * k + 1 : k + half);
          const float x1 = Load(x, i1), x2 = Load(x, i2);
          Store(y, i1, c * x1 - sn * x2);
          Store(y, i2, sn * x1 + c * x2);
        }
        for (int64_t d = rot; d < head; ++d) Store(y, base + d, Load(x, base + d));
      }
    }
  return Status::Ok();
}

// ---- Attention -------------------------------------------------------------------------

// The sizes of one Attention call, Q, K and V seen as [batch, heads, sequence, head size].
// `packed`: Kiln's packed_qkv (compiler/passes/attention.h), each input [batch, sequence,
// 3 * hidden], Q read from its first third of columns, K from its second, V from its third.
struct AttentionShape {
  int64_t batch = 0, q_heads = 0, kv_heads = 0, q_seq = 0, kv_seq = 0, past = 0, total = 0, head = 0, v_head = 0;
  bool three_d = false, packed = false;
};

// Reads and checks the shapes of the inputs; the outputs are checked by the kernel.
Status ReadAttentionShape(const AttrMap& attrs, std::span<const TensorRef> in, AttentionShape* a) {
  constexpr std::string_view kName = "Attention";
  if (in.size() < 3 || !in[0].present() || !in[1].present() || !in[2].present())
    return OpError(kName, "inputs Q, K and V are required");
  const TensorRef &q = in[0], &k = in[1], &v = in[2];
  if ((q.rank != 3 && q.rank != 4) || k.rank != q.rank || v.rank != q.rank)
    return OpError(kName, "Q, K and V must all be 3-D or all 4-D, got " + ShapeStr(q) + ", " + ShapeStr(k) + ", " +
                              ShapeStr(v));
  a->three_d = q.rank == 3;
  a->packed = attrs.GetInt("packed_qkv", 0) != 0;
  a->batch = q.dims[0];
  if (a->packed && (!a->three_d || q.dims[2] % 3 != 0 || k.dims[2] != q.dims[2] || v.dims[2] != q.dims[2]))
    return OpError(kName, "packed_qkv needs Q, K and V 3-D, each [batch, sequence, 3 * hidden], got " + ShapeStr(q) +
                              ", " + ShapeStr(k) + ", " + ShapeStr(v));
  if (a->three_d) {
    a->q_heads = attrs.GetInt("q_num_heads", 0), a->kv_heads = attrs.GetInt("kv_num_heads", 0);
    const int64_t parts = a->packed ? 3 : 1;  // each input's hidden size: its last dim / parts
    if (a->q_heads < 1 || a->kv_heads < 1 || q.dims[2] % (parts * a->q_heads) != 0 ||
        k.dims[2] % (parts * a->kv_heads) != 0 || v.dims[2] % (parts * a->kv_heads) != 0)
      return OpError(kName, "q_num_heads " + std::to_string(a->q_heads) + " and kv_num_heads " +
                                std::to_string(a->kv_heads) + " must divide the hidden sizes of " + ShapeStr(q) +
                                ", " + ShapeStr(k) + ", " + ShapeStr(v) + (a->packed ? " (a third of each)" : ""));
    if (a->packed && a->q_heads != a->kv_heads)
      return OpError(kName, "packed_qkv needs q_num_heads and kv_num_heads equal, got " + std::to_string(a->q_heads) +
                                " and " + std::to_string(a->kv_heads));
    a->q_seq = q.dims[1], a->kv_seq = k.dims[1];
    a->head = q.dims[2] / parts / a->q_heads, a->v_head = v.dims[2] / parts / a->kv_heads;
  } else {
    a->q_heads = q.dims[1], a->kv_heads = k.dims[1], a->q_seq = q.dims[2], a->kv_seq = k.dims[2];
    a->head = q.dims[3], a->v_head = v.dims[3];
  }
  const int64_t k_head = a->three_d ? k.dims[2] / (a->packed ? 3 : 1) / a->kv_heads : k.dims[3];
  const int64_t v_heads = a->three_d ? a->kv_heads : v.dims[1];
  const int64_t v_seq = a->three_d ? v.dims[1] : v.dims[2];
  if (k.dims[0] != a->batch || v.dims[0] != a->batch || k_head != a->head || v_heads != a->kv_heads ||
      v_seq != a->kv_seq || a->kv_heads < 1 || a->q_heads % a->kv_heads != 0)
    return OpError(kName, "Q " + ShapeStr(q) + ", K " + ShapeStr(k) + " and V " + ShapeStr(v) + " do not agree");
  const bool has_past = in.size() > 5 && in[4].present() && in[5].present();
  if (has_past) {
    const TensorRef &pk = in[4], &pv = in[5];
    a->past = pk.rank == 4 ? pk.dims[2] : -1;
    const int64_t want_k[] = {a->batch, a->kv_heads, a->past, a->head};
    const int64_t want_v[] = {a->batch, a->kv_heads, a->past, a->v_head};
    if (pk.rank != 4 || pv.rank != 4 || !std::equal(want_k, want_k + 4, pk.dims) ||
        !std::equal(want_v, want_v + 4, pv.dims))
      return OpError(kName, "past_key " + ShapeStr(pk) + " and past_value " + ShapeStr(pv) +
                                " must be [batch, kv_heads, past, head size]");
  }
  a->total = a->past + a->kv_seq;
  return Status::Ok();
}

// The online softmax's tiles: kQueryBlock query rows against kKeyBlock keys at a time
// (flash attention's loop, Dao et al. 2022): a score tile of 128 x 512 floats (256 KiB) stays in
// L2, where the whole [Sq, T] score matrix of a head would not (Whisper's 1500 x 1500: 9 MB).
// 128 query rows per GEMM amortise dnnl_sgemm's packing of each tile of K and V; on this AVX-512
// machine 128 x 512 beat 64 x 512, 128 x 256, 256 x 512 and 64 x 2048 at 1 thread on 12 x 512
// and 6 x 1500 heads (benchmarks/attention.py; benchmarks/results/2026-12-05-attention.md).
// The query blocks are spread over kSlots scratch slots, each run by one thread at a time; a
// block's result does not depend on its slot, so the bits do not depend on the thread count.
constexpr int64_t kQueryBlock = 128, kKeyBlock = 512, kSlots = 16;
static_assert(kKeyBlock % kKeyPanel == 0, "a key tile starts at a panel of the transposed K");

// Where the kernel reads Q, K and V from:
//   kInputs    where they are (float32, no past cache to put before the new keys, no present
//              outputs to write): the GEMMs take their rows with the layout's stride;
//   kPresent   Q where it is, K and V from present_key and present_value (float32), into which
//              the past rows (unless they are there already: a bound cache) and the new ones
//              are written first;
//   kWorkspace all three gathered, widened to float32, into the workspace.
enum class KvSource { kInputs, kPresent, kWorkspace };

KvSource SourceOf(const AttentionShape& a, std::span<const TensorRef> in, std::span<const TensorRef> out) {
  if (in[0].dtype != DType::kFloat32) return KvSource::kWorkspace;
  const bool key = out.size() > 1 && out[1].present(), value = out.size() > 2 && out[2].present();
  if (!key && !value) return a.past == 0 ? KvSource::kInputs : KvSource::kWorkspace;
  return key && value ? KvSource::kPresent : KvSource::kWorkspace;
}

// The AVX-512 tile products (attention_tiles.h) when this CPU has them, the value head fits them and
// there are kMinTileQueries query rows or more; null where the products run on dnnl_sgemm. The
// tiles read K transposed into panels, which a call makes of every key: for a decoder's step (one
// query row against the whole cache) that copy costs more than the products it speeds up.
constexpr int64_t kMinTileQueries = 8;
const AttentionTiles* TilesFor(const AttentionShape& a) {
  return a.v_head <= kMaxValueDim && a.q_seq >= kMinTileQueries ? ActiveAttentionTiles() : nullptr;
}

// Workspace (float32): unless the kernel reads them in place, Q [B,Hq,Sq,D] and the whole K and
// V, past then new, [B,Hkv,T,D] and [B,Hkv,T,Dv]; with the AVX-512 tiles, K transposed in
// panels of 64 keys (attention_tiles.h), [B,Hkv,Tp/64,D,64] (Tp: T rounded up to 64, zero after
// T); then per slot a score tile [bq, bk], the
// output rows [bq, Dv], each row's running max and sum, and each row's max in the tile. bk is T when qk_matmul_output_mode 3
// is asked for (the probabilities need the whole row's sum before they are written).
struct AttentionScratch {
  int64_t q = 0, k = 0, v = 0, kt_cols = 0, kt = 0, bq = 0, bk = 0, slot = 0, slots = 0;
  AttentionScratch(const AttentionShape& a, bool whole_rows, KvSource source)
      : q(source != KvSource::kWorkspace ? 0 : a.batch * a.q_heads * a.q_seq * a.head),
        k(source != KvSource::kWorkspace ? 0 : a.batch * a.kv_heads * a.total * a.head),
        v(source != KvSource::kWorkspace ? 0 : a.batch * a.kv_heads * a.total * a.v_head), kt_cols((a.total + kKeyPanel - 1) / kKeyPanel * kKeyPanel),
        kt(TilesFor(a) ? a.batch * a.kv_heads * a.head * kt_cols : 0), bq(std::min(a.q_seq, kQueryBlock)),
        bk(whole_rows ? a.total : std::min(a.total, kKeyBlock)), slot(bq * bk + bq * a.v_head + 3 * bq),
        slots(std::min(kSlots, a.batch * a.q_heads * ((a.q_seq + kQueryBlock - 1) / kQueryBlock))) {}
  int64_t floats() const { return q + k + v + kt + slots * slot; }
};

bool WholeRows(const AttrMap& attrs, std::span<const TensorRef> outputs) {
  return outputs.size() > 3 && outputs[3].present() && attrs.GetInt("qk_matmul_output_mode", 0) == 3;
}

size_t AttentionWorkspace(const AttrMap& attrs, std::span<const TensorRef> inputs, std::span<const TensorRef> outputs) {
  AttentionShape a;
  if (!ReadAttentionShape(attrs, inputs, &a).ok()) return 0;
  const AttentionScratch sizes(a, WholeRows(attrs, outputs), SourceOf(a, inputs, outputs));
  return static_cast<size_t>(sizes.floats()) * sizeof(float);
}

// Offsets of element (b, h, s, 0) of a Q/K/V-layout tensor: [B,H,S,D] or [B,S,H*D]; or, packed
// (`part` 0, 1, 2: Q, K, V), the part'th third of each row of a [B,S,3*H*D] tensor.
struct HeadLayout {
  int64_t b = 0, h = 0, s = 0, c = 0;
  HeadLayout(bool three_d, int64_t heads, int64_t seq, int64_t dim, bool packed = false, int64_t part = 0)
      : b(heads * seq * dim * (packed ? 3 : 1)), h(three_d ? dim : seq * dim),
        s(three_d ? heads * dim * (packed ? 3 : 1) : dim), c(packed ? part * heads * dim : 0) {}
  int64_t at(int64_t bi, int64_t hi, int64_t si) const { return bi * b + hi * h + si * s + c; }
};

// Widens rows [s0, s0 + seq) of every (b, h) of `t` into `out` ([B,H,rows,dim], at row s0).
void Gather(const TensorRef& t, const HeadLayout& layout, int64_t batch, int64_t heads, int64_t seq, int64_t dim,
            int64_t rows, int64_t s0, float* out) {
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t s = 0; s < seq; ++s) {
        const int64_t src = layout.at(b, h, s);
        float* dst = out + ((b * heads + h) * rows + s0 + s) * dim;
        if (t.dtype == DType::kFloat32) {
          std::copy_n(t.as<const float>() + src, dim, dst);
        } else {
          for (int64_t d = 0; d < dim; ++d) dst[d] = Load(t, src + d);
        }
      }
}

// The additive bias of query row i of (b, h): the mask (bool: true -> 0, false -> -inf;
// keys past its last dim -> -inf), the causal frontier j <= i + offset (offset: the past
// length, or nonpad - q_seq for an external cache) and the padding j < nonpad.
struct BiasSource {
  const TensorRef* mask = nullptr;
  int64_t mask_strides[4] = {};  // over [B, Hq, Sq, M]
  int64_t mask_len = 0;
  bool causal = false;
  const TensorRef* nonpad = nullptr;
  int64_t past = 0, q_seq = 0;

  // Whether the bias is the mask alone, float32, contiguous along the keys and spanning all
  // `total` of them, so that a row's bias is mask + MaskOffset(b, h, i) (or none at all).
  bool Plain(int64_t total) const {
    return !causal && !nonpad &&
           (!mask || (mask->dtype == DType::kFloat32 && mask_strides[3] == 1 && mask_len == total));
  }
  int64_t MaskOffset(int64_t b, int64_t h, int64_t i) const {
    return b * mask_strides[0] + h * mask_strides[1] + i * mask_strides[2];
  }

  // Adds the bias of keys [j0, j1) to `row` (row[0] is key j0) and returns the row's new
  // maximum (NaNs aside; -inf when every key is masked).
  float AddTo(int64_t b, int64_t h, int64_t i, int64_t j0, int64_t j1, float* row) const {
    int64_t limit = j1;  // keys at or past it are padding
    int64_t frontier = i + past;
    if (nonpad) {
      const int64_t n = nonpad->as<const int64_t>()[b];
      limit = std::min(limit, n);
      frontier = i + n - q_seq;
    }
    float max = kNegInf;
    const int64_t at = MaskOffset(b, h, i);
    for (int64_t j = j0; j < j1; ++j) {
      float v = 0;
      if (mask) {
        const int64_t m = at + j * mask_strides[3];
        if (j >= mask_len) v = kNegInf;
        else if (mask->dtype == DType::kBool) v = mask->as<const uint8_t>()[m] ? 0.0f : kNegInf;
        else v = Load(*mask, m);
      }
      if (j >= limit || (causal && j > frontier)) v += kNegInf;
      float& x = row[j - j0];
      x += v;
      if (x > max) max = x;
    }
    return max;
  }
};

Status CheckAttentionOutputs(const KernelCall& call, const AttentionShape& a) {
  constexpr std::string_view kName = "Attention";
  const TensorRef& q = call.inputs[0];
  auto check = [&](size_t i, std::initializer_list<int64_t> want, const char* what) -> Status {
    const TensorRef* t = OptionalOutput(call, i);
    if (!t) return Status::Ok();
    if (t->dtype != q.dtype || t->rank != static_cast<int>(want.size()) || !std::equal(want.begin(), want.end(), t->dims))
      return OpError(kName, std::string(what) + " " + ShapeStr(*t) + " " + DTypeStr(t->dtype) + " does not match Q " +
                                ShapeStr(q) + " " + DTypeStr(q.dtype));
    return Status::Ok();
  };
  if (a.three_d) {
    KILN_RETURN_IF_ERROR(check(0, {a.batch, a.q_seq, a.q_heads * a.v_head}, "Y"));
  } else {
    KILN_RETURN_IF_ERROR(check(0, {a.batch, a.q_heads, a.q_seq, a.v_head}, "Y"));
  }
  KILN_RETURN_IF_ERROR(check(1, {a.batch, a.kv_heads, a.total, a.head}, "present_key"));
  KILN_RETURN_IF_ERROR(check(2, {a.batch, a.kv_heads, a.total, a.v_head}, "present_value"));
  return check(3, {a.batch, a.q_heads, a.q_seq, a.total}, "qk_matmul_output");
}

Status ReadBias(const KernelCall& call, const AttentionShape& a, BiasSource* bias) {
  constexpr std::string_view kName = "Attention";
  bias->causal = call.attrs.GetInt("is_causal", 0) != 0;
  bias->past = a.past, bias->q_seq = a.q_seq;
  if (const TensorRef* m = OptionalInput(call, 3)) {
    const int64_t target[] = {a.batch, a.q_heads, a.q_seq, m->rank > 0 ? m->dims[m->rank - 1] : 0};
    if ((m->dtype != DType::kBool && m->dtype != call.inputs[0].dtype) || m->rank < 1 || target[3] > a.total ||
        !BroadcastStrides(m->dims, m->rank, target, 4, bias->mask_strides))
      return OpError(kName, "attn_mask " + ShapeStr(*m) + " " + DTypeStr(m->dtype) + " must be bool or Q's dtype " +
                                "and broadcast to " + ShapeText(4, [&](size_t d) {
                                  return (d == 3 ? "at most " : "") + std::to_string(d == 3 ? a.total : target[d]);
                                }));
    bias->mask = m;
    bias->mask_len = target[3];
  }
  if (const TensorRef* n = OptionalInput(call, 6)) {
    if (n->dtype != DType::kInt64 || n->num_elements != a.batch)
      return OpError(kName, "nonpad_kv_seqlen " + ShapeStr(*n) + " " + DTypeStr(n->dtype) + " must be " +
                                std::to_string(a.batch) + " int64 values");
    if (a.past > 0 || OptionalInput(call, 4))
      return OpError(kName, "nonpad_kv_seqlen cannot be combined with past_key/past_value");
    bias->nonpad = n;
  }
  return Status::Ok();
}

// Y = softmax(softcap(scale * Q K^T) + bias) V per head, with K and V the past cache
// followed by the new keys and values, and each kv head serving q_heads / kv_heads
// consecutive q heads. qk_matmul_output holds, by qk_matmul_output_mode, the scaled
// product (0), after softcap (1), after the bias (2) or the probabilities (3). A query row
// whose every key is masked gets zero probabilities, so a zero output (NaN with Kiln's
// masked_rows_nan 1, which the compiler sets on attention it made of a Softmax). Mode 0 follows the
// spec's text (before the softcap); onnx's reference returns it softcapped (no test has both).
Status Attention(const KernelCall& call) {
  constexpr std::string_view kName = "Attention";
  KILN_RETURN_IF_ERROR(CheckArity(call, kName, 3));
  AttentionShape a;
  KILN_RETURN_IF_ERROR(ReadAttentionShape(call.attrs, call.inputs, &a));
  const TensorRef &q = call.inputs[0], &k = call.inputs[1], &v = call.inputs[2], &y = call.outputs[0];
  if (!IsStorageType(q.dtype) || k.dtype != q.dtype || v.dtype != q.dtype)
    return OpError(kName, "Q, K and V must share a float32, float16 or bfloat16 dtype");
  KILN_RETURN_IF_ERROR(CheckAttentionOutputs(call, a));
  BiasSource bias;
  KILN_RETURN_IF_ERROR(ReadBias(call, a, &bias));
  const bool whole_rows = WholeRows(call.attrs, call.outputs);
  const KvSource source = SourceOf(a, call.inputs, call.outputs);
  // A bound cache (KernelCall::cache_rows): past and present are one buffer per tensor.
  const int64_t present_rows = call.cache_rows > 0 ? call.cache_rows : a.total;
  if (call.cache_rows > 0 &&
      (source != KvSource::kPresent || a.total > call.cache_rows || call.inputs.size() < 6 ||
       call.inputs[4].data != call.outputs[1].data || call.inputs[5].data != call.outputs[2].data))
    return OpError(kName, "a bound KV cache needs float32 past_key and present_key (and past_value and "
                          "present_value) in one buffer each, of at least " + std::to_string(a.total) +
                          " rows per head; it has " + std::to_string(call.cache_rows));
  const AttentionScratch sizes(a, whole_rows, source);
  KILN_RETURN_IF_ERROR(CheckWorkspace(call, static_cast<size_t>(sizes.floats()) * sizeof(float), kName));
  float* wq = static_cast<float*>(call.workspace);
  float* wk = wq + sizes.q;
  float* wv = wk + sizes.k;
  float* kt = wv + sizes.v;
  float* slots = kt + sizes.kt;

  // Where row s of head (b, h) of Q, K and V starts: in the inputs, or in the gathered copies
  // ([B, H, rows, dim], rows one after the other).
  const HeadLayout q_layout(a.three_d, a.q_heads, a.q_seq, a.head, a.packed, 0);
  const HeadLayout k_layout(a.three_d, a.kv_heads, a.kv_seq, a.head, a.packed, 1),
      v_layout(a.three_d, a.kv_heads, a.kv_seq, a.v_head, a.packed, 2);
  const float *q_base = wq, *k_base = wk, *v_base = wv;
  HeadLayout q_rows(false, a.q_heads, a.q_seq, a.head), k_rows(false, a.kv_heads, a.total, a.head),
      v_rows(false, a.kv_heads, a.total, a.v_head);
  if (source == KvSource::kInputs) {
    q_base = q.as<const float>(), k_base = k.as<const float>(), v_base = v.as<const float>();
    q_rows = q_layout, k_rows = k_layout, v_rows = v_layout;
  } else if (source == KvSource::kPresent) {
    float* pk = call.outputs[1].as<float>();
    float* pv = call.outputs[2].as<float>();
    if (a.past > 0 && call.cache_rows == 0) {
      const HeadLayout past_k(false, a.kv_heads, a.past, a.head), past_v(false, a.kv_heads, a.past, a.v_head);
      Gather(call.inputs[4], past_k, a.batch, a.kv_heads, a.past, a.head, present_rows, 0, pk);
      Gather(call.inputs[5], past_v, a.batch, a.kv_heads, a.past, a.v_head, present_rows, 0, pv);
    }
    Gather(k, k_layout, a.batch, a.kv_heads, a.kv_seq, a.head, present_rows, a.past, pk);
    Gather(v, v_layout, a.batch, a.kv_heads, a.kv_seq, a.v_head, present_rows, a.past, pv);
    q_base = q.as<const float>(), k_base = pk, v_base = pv;
    q_rows = q_layout, k_rows = HeadLayout(false, a.kv_heads, present_rows, a.head);
    v_rows = HeadLayout(false, a.kv_heads, present_rows, a.v_head);
  } else {
    Gather(q, q_layout, a.batch, a.q_heads, a.q_seq, a.head, a.q_seq, 0, wq);
    if (a.past > 0) {
      const HeadLayout pk(false, a.kv_heads, a.past, a.head), pv(false, a.kv_heads, a.past, a.v_head);
      Gather(call.inputs[4], pk, a.batch, a.kv_heads, a.past, a.head, a.total, 0, wk);
      Gather(call.inputs[5], pv, a.batch, a.kv_heads, a.past, a.v_head, a.total, 0, wv);
    }
    Gather(k, k_layout, a.batch, a.kv_heads, a.kv_seq, a.head, a.total, a.past, wk);
    Gather(v, v_layout, a.batch, a.kv_heads, a.kv_seq, a.v_head, a.total, a.past, wv);
    if (const TensorRef* pk = OptionalOutput(call, 1))
      for (int64_t i = 0; i < sizes.k; ++i) Store(*pk, i, wk[i]);
    if (const TensorRef* pv = OptionalOutput(call, 2))
      for (int64_t i = 0; i < sizes.v; ++i) Store(*pv, i, wv[i]);
  }
  if (sizes.slots == 0) return Status::Ok();  // no query rows
  const AttentionTiles* tiles = TilesFor(a);
  if (tiles) {  // K transposed in panels, once per call: panel p of head bh, [d][j % 64]
    const int64_t heads = a.batch * a.kv_heads, per_head = a.head * sizes.kt_cols;
    ParallelFor(call.threads, heads, MinItemsPerPart(per_head), [&](int64_t begin, int64_t end) {
      for (int64_t bh = begin; bh < end; ++bh) {
        const float* kh = k_base + k_rows.at(bh / a.kv_heads, bh % a.kv_heads, 0);
        float* out = kt + bh * per_head;
        std::fill(out + (a.total / kKeyPanel) * a.head * kKeyPanel, out + per_head, 0.0f);  // the last panel
        for (int64_t j = 0; j < a.total; ++j) {
          float* col = out + (j / kKeyPanel) * a.head * kKeyPanel + j % kKeyPanel;
          for (int64_t d = 0; d < a.head; ++d) col[d * kKeyPanel] = kh[j * k_rows.s + d];
        }
      }
    });
  }

  const float scale = call.attrs.Has("scale") ? call.attrs.GetFloat("scale", 1.0f)
                                              : static_cast<float>(1.0 / std::sqrt(static_cast<double>(a.head)));
  const float softcap = call.attrs.GetFloat("softcap", 0.0f);
  // A query row whose every score is -inf (masked, or -inf from the data): zeros, ONNX's
  // Attention's value, or NaN, Softmax's, for an attention the compiler made of a written-out
  // chain (Kiln's masked_rows_nan, compiler/passes/attention.h).
  const float masked_row = call.attrs.GetInt("masked_rows_nan", 0) != 0 ? std::numeric_limits<float>::quiet_NaN() : 0.0f;
  const TensorRef* qk_out = OptionalOutput(call, 3);
  const int64_t mode = call.attrs.GetInt("qk_matmul_output_mode", 0);
  const int64_t group = a.q_heads / a.kv_heads, t = a.total, dv = a.v_head;
  const int64_t q_blocks = (a.q_seq + kQueryBlock - 1) / kQueryBlock;
  const HeadLayout y_layout(a.three_d, a.q_heads, a.q_seq, dv);
  const RowMath& rows = ActiveRowMath();
  const bool plain_bias = bias.Plain(t) && !qk_out && softcap == 0;
  const bool fused_max = plain_bias && tiles && a.head > 0;
  // All keys in one tile and a float32 Y: each row is normalised before P V, which the GEMM
  // then writes into Y itself; otherwise the output rows are kept and rescaled per tile.
  const bool one_tile = t <= sizes.bk && y.dtype == DType::kFloat32;

  // Query block `u` (of head (b, h)) in `slot`: for each tile of keys, the scores S = scale Q K^T,
  // each row's running max m and sum l, the output rows O rescaled by exp(m_old - m_new) and
  // O += exp(S - m_new) V; at the end O / l (0 where every key is masked).
  auto run_block = [&](int64_t u, float* slot) {
    const int64_t bh = u / q_blocks, i0 = (u % q_blocks) * kQueryBlock;
    const int64_t b = bh / a.q_heads, h = bh % a.q_heads;
    const int64_t rows_n = std::min(kQueryBlock, a.q_seq - i0);
    float* scores = slot;
    float* o = scores + sizes.bq * sizes.bk;
    float* row_max = o + sizes.bq * dv;
    float* row_sum = row_max + sizes.bq;
    float* tile_maxima = row_sum + sizes.bq;  // from the AVX-512 scores, as it stores the tile
    const float* qh = q_base + q_rows.at(b, h, i0);
    const float* kh = k_base + k_rows.at(b, h / group, 0);
    const float* kt_head = kt + (b * a.kv_heads + h / group) * a.head * sizes.kt_cols;
    const float* vh = v_base + v_rows.at(b, h / group, 0);
    const int64_t ldq = q_rows.s, ldk = k_rows.s, ldv = v_rows.s;
    // out (+)= P V for the tile's `cols` keys, whose values start at `vt`.
    auto values = [&](int64_t cols, const float* vt, bool accumulate, float* out, int64_t ld_out) {
      if (dv == 0) return;
      if (tiles) {
        tiles->values(scores, cols, vt, ldv, rows_n, cols, dv, accumulate, out, ld_out);
      } else {
        Sgemm(false, false, rows_n, dv, cols, 1.0f, scores, cols, vt, ldv, accumulate ? 1.0f : 0.0f, out, ld_out);
      }
    };
    for (int64_t i = 0; i < rows_n; ++i) row_max[i] = kNegInf, row_sum[i] = 0;
    if (!one_tile)
      for (int64_t i = 0; i < rows_n * dv; ++i) o[i] = 0;
    const int64_t qk_base = bh * a.q_seq * t;
    for (int64_t j0 = 0; j0 < t; j0 += sizes.bk) {
      const int64_t cols = std::min(sizes.bk, t - j0);
      if (fused_max) {  // the mask added and each row's max taken as the tile is stored
        const float* m = bias.mask ? bias.mask->as<const float>() + bias.MaskOffset(b, h, i0) + j0 : nullptr;
        tiles->scores(qh, ldq, kt_head + j0 * a.head, rows_n, cols, a.head, scale, m, bias.mask_strides[2], scores,
                      cols, tile_maxima);
      } else if (a.head > 0 && tiles) {
        tiles->scores(qh, ldq, kt_head + j0 * a.head, rows_n, cols, a.head, scale, nullptr, 0, scores, cols, nullptr);
      } else if (a.head > 0) {
        Sgemm(false, true, rows_n, cols, a.head, scale, qh, ldq, kh + j0 * ldk, ldk, 0.0f, scores, cols);
      } else {
        for (int64_t e = 0; e < rows_n * cols; ++e) scores[e] = 0;
      }
      for (int64_t r = 0; r < rows_n; ++r) {
        float* row = scores + r * cols;
        const int64_t i = i0 + r;
        auto emit = [&](int64_t when) {
          if (qk_out && mode == when)
            for (int64_t j = 0; j < cols; ++j) Store(*qk_out, qk_base + i * t + j0 + j, row[j]);
        };
        float tile_max;
        if (fused_max) {
          tile_max = tile_maxima[r];
        } else if (plain_bias) {
          const float* m = bias.mask ? bias.mask->as<const float>() + bias.MaskOffset(b, h, i) + j0 : nullptr;
          tile_max = rows.add_max(row, m, cols);
        } else {
          emit(0);
          if (softcap > 0)
            for (int64_t j = 0; j < cols; ++j) row[j] = softcap * std::tanh(row[j] / softcap);
          emit(1);
          tile_max = bias.AddTo(b, h, i, j0, j0 + cols, row);
          emit(2);
        }
        const float m_new = std::max(row_max[r], tile_max);
        if (m_new == kNegInf) {  // every key so far is masked: nothing to add
          for (int64_t j = 0; j < cols; ++j) row[j] = 0;
          emit(3);
          if (one_tile) row_sum[r] = masked_row;  // Y's row: 0 times it
          continue;
        }
        if (one_tile) {  // P V is Y times the row's 1 / sum, applied to Y's row after the GEMM
          row_sum[r] = 1.0f / rows.exp_sum(row, cols, m_new);  // the sum is >= 1 (the max's term), or NaN
          if (qk_out && mode == 3) {
            for (int64_t j = 0; j < cols; ++j) Store(*qk_out, qk_base + i * t + j0 + j, row[j] * row_sum[r]);
          }
          continue;
        }
        const float correction = std::exp(row_max[r] - m_new);  // 0 for the first keys
        row_max[r] = m_new;
        row_sum[r] = row_sum[r] * correction + rows.exp_sum(row, cols, m_new);
        if (correction != 1)
          for (int64_t d = 0; d < dv; ++d) o[r * dv + d] *= correction;
        if (qk_out && mode == 3)  // whole rows: the sum is final
          for (int64_t j = 0; j < cols; ++j) Store(*qk_out, qk_base + i * t + j0 + j, row[j] / row_sum[r]);
      }
      if (one_tile) {  // Y = P V, written in place, then each row scaled by its 1 / sum
        float* yb = y.as<float>() + y_layout.at(b, h, i0);
        values(cols, vh, false, yb, y_layout.s);
        for (int64_t r = 0; r < rows_n; ++r) {
          const float inv = row_sum[r];
          float* y_row = yb + r * y_layout.s;
          for (int64_t d = 0; d < dv; ++d) y_row[d] *= inv;
        }
        return;
      }
      values(cols, vh + j0 * ldv, true, o, dv);
    }
    for (int64_t r = 0; r < rows_n; ++r) {
      const float inv = row_sum[r] == 0 ? masked_row : 1.0f / row_sum[r];  // NaN stays NaN
      const int64_t dst = y_layout.at(b, h, i0 + r);
      if (y.dtype == DType::kFloat32) {
        float* out = y.as<float>() + dst;
        for (int64_t d = 0; d < dv; ++d) out[d] = o[r * dv + d] * inv;
      } else {
        for (int64_t d = 0; d < dv; ++d) Store(y, dst + d, o[r * dv + d] * inv);
      }
    }
  };
  const int64_t blocks = a.batch * a.q_heads * q_blocks;
  const int64_t block_work = std::min(kQueryBlock, a.q_seq) * t * (a.head + dv);
  ParallelFor(call.threads, sizes.slots, MinItemsPerPart(block_work * blocks / sizes.slots),
              [&](int64_t begin, int64_t end) {
                for (int64_t s = begin; s < end; ++s)  // slot s: a contiguous share of the blocks
                  for (int64_t u = s * blocks / sizes.slots; u < (s + 1) * blocks / sizes.slots; ++u)
                    run_block(u, slots + s * sizes.slot);
              });
  return Status::Ok();
}

// ---- LinearAttention -------------------------------------------------------------------

// LinearAttention (opset 27): attention as a recurrence over the tokens, each (batch, kv head)
// carrying a state S [dk, dv] from token to token and from call to call (past_state ->
// present_state). For token t, in float32 as ONNX's reference:
//   S *= exp(decay_t)                   the gated rules: per key dim (a row of S) or per head
//   v_t = beta_t * (v_t - S^T k_t)      the delta rules
//   S += k_t (x) v_t
//   output_t = scale * q_t^T S          for each of the Hq / Hkv query heads sharing the kv head
// Its operands are float32 only: the runtime widens float16 and bfloat16 ones and rounds the
// outputs once (runtime/kernels/widen.h), the reference's float32 accumulation.

// LinearAttention's operands, inputs then outputs.
constexpr int kLaQuery = 0, kLaKey = 1, kLaValue = 2, kLaPast = 3, kLaDecay = 4, kLaBeta = 5;
constexpr int kLaOutput = 6, kLaPresent = 7, kLaOperands = 8;

// One call's sizes: query [B, T, Hq*dk], key [B, T, Hkv*dk], value [B, T, Hkv*dv], past_state
// and present_state [B, Hkv, dk, dv], decay [B, T, Hkv*dk] (per key dim) or [B, T, Hkv] (per
// head), beta [B, T, Hkv] or [B, T, 1], output [B, T, Hq*dv]; ops[i]: operand i, or null when
// absent.
struct LinearShape {
  int64_t batch = 0, seq = 0, q_heads = 0, kv_heads = 0, dk = 0, dv = 0;
  const TensorRef* ops[kLaOperands] = {};
};

// The one error: what the attributes and operands must be, and what they are. Built by appends
// in a function of its own, since chains of operator+ inlined into the checks cost the
// size-budgeted runtime (cmake/check_runtime_size.cmake) kilobytes.
[[gnu::noinline, gnu::cold]] Status LinearShapeError(std::string_view rule, const int64_t* heads,
                                                      const LinearShape& s) {
  std::string m = "LinearAttention: update_rule '";
  m.append(rule).append("', heads [q_num_heads, kv_num_heads] ").append(ShapeText(std::span(heads, 2)));
  m.append(" and operands");
  for (int i = 0; i < kLaOperands; ++i)
    m.append(i ? ", " : " ").append(s.ops[i] ? ShapeStr(*s.ops[i]) : "<absent>");
  if (s.ops[kLaQuery]) m.append(" of ").append(DTypeName(s.ops[kLaQuery]->dtype));
  return InvalidArgument(m.append(
      ": expected update_rule 'linear', 'gated', 'delta' or 'gated_delta', Hkv >= 1 dividing Hq, and float32 "
      "query [B, T, Hq*dk], key [B, T, Hkv*dk], value [B, T, Hkv*dv], past_state [B, Hkv, dk, dv], decay "
      "[B, T, Hkv*dk or Hkv] for the gated rules only, beta [B, T, Hkv or 1] for the delta rules only, output "
      "[B, T, Hq*dv], present_state as past_state"));
}

// Whether t is float32 of the dims `want`: 3 of them, or 4 when want[3] >= 0.
[[gnu::noinline]] bool LinearFits(const TensorRef* t, const int64_t* want) {
  const int rank = want[3] < 0 ? 3 : 4;
  if (t->dtype != DType::kFloat32 || t->rank != rank) return false;
  for (int i = 0; i < rank; ++i)
    if (t->dims[i] != want[i]) return false;
  return true;
}

// Reads the attributes and checks every operand against them: decay and beta present exactly
// when update_rule reads them.
Status ReadLinearShape(const AttrMap& attrs, std::span<const TensorRef> in, std::span<const TensorRef> out,
                       LinearShape* s) {
  for (int i = 0; i < kLaOperands; ++i) {
    const std::span<const TensorRef> part = i < 6 ? in : out;
    const size_t at = i < 6 ? i : i - 6;
    s->ops[i] = at < part.size() && part[at].present() ? &part[at] : nullptr;
  }
  // The rule's index is its bits: 1 the gate (decay), 2 the delta correction (beta).
  constexpr std::string_view kRules[] = {"linear", "gated", "delta", "gated_delta"};
  const std::string_view rule = attrs.GetString("update_rule", "gated_delta");
  int r = 0;
  while (r < 4 && kRules[r] != rule) ++r;
  const int64_t heads[] = {attrs.GetInt("q_num_heads", 0), attrs.GetInt("kv_num_heads", 0)};
  const int64_t Hq = heads[0], Hkv = heads[1];
  const TensorRef *q = s->ops[kLaQuery], *v = s->ops[kLaValue], *y = s->ops[kLaOutput];
  const TensorRef *decay = s->ops[kLaDecay], *beta = s->ops[kLaBeta];
  bool ok = r < 4 && Hkv >= 1 && Hq >= 1 && Hq % Hkv == 0 && q && v && y && q->rank == 3 && v->rank == 3 &&
            y->rank == 3 && (r & 1) == (decay != nullptr) && (r & 2) == (beta != nullptr ? 2 : 0);
  if (ok) {
    const int64_t B = q->dims[0], T = q->dims[1], dk = q->dims[2] / Hq, dv = v->dims[2] / Hkv;
    // Hkv * dk <= Hq * dk <= query's dim and Hkv * dv <= value's cannot overflow; Hq * dv may, so
    // the output's dim is compared as a quotient.
    const int64_t gate = decay && decay->rank == 3 && decay->dims[2] == Hkv ? Hkv : Hkv * dk;
    const int64_t rate = beta && beta->rank == 3 && beta->dims[2] == 1 ? 1 : Hkv;
    const int64_t want[kLaOperands][4] = {{B, T, Hq * dk, -1}, {B, T, Hkv * dk, -1}, {B, T, Hkv * dv, -1},
                                          {B, Hkv, dk, dv},    {B, T, gate, -1},      {B, T, rate, -1},
                                          {B, T, y->dims[2], -1}, {B, Hkv, dk, dv}};
    ok = y->dims[2] % Hq == 0 && y->dims[2] / Hq == dv;
    for (int i = 0; i < kLaOperands; ++i) ok = ok && (!s->ops[i] || LinearFits(s->ops[i], want[i]));
    s->batch = B, s->seq = T, s->q_heads = Hq, s->kv_heads = Hkv, s->dk = dk, s->dv = dv;
  }
  return ok ? Status::Ok() : LinearShapeError(rule, heads, *s);
}

// Bytes of the state [B, Hkv, dk, dv]; SIZE_MAX when that overflows (sizes no present_state has).
size_t LinearStateBytes(const LinearShape& s) {
  const int64_t dims[] = {s.batch, s.kv_heads, s.dk, s.dv, sizeof(float)};
  int64_t bytes = 0;
  return CheckedProduct(dims, 0, 5, &bytes) ? static_cast<size_t>(bytes) : SIZE_MAX;
}

// The state's scratch when the model does not read present_state.
size_t LinearAttentionWorkspace(const AttrMap& attrs, std::span<const TensorRef> in, std::span<const TensorRef> out) {
  LinearShape s;
  if (!ReadLinearShape(attrs, in, out, &s).ok() || s.ops[kLaPresent]) return 0;
  return LinearStateBytes(s);
}

// The state lives in present_state (else the workspace), starting as past_state or zeros. The
// delta and outer-product steps go column by column of S: column m's update reads only column m,
// so no scratch vector is needed. scale 0 (the default) is 1 / sqrt(dk).
Status LinearAttention(const KernelCall& call) {
  constexpr std::string_view kName = "LinearAttention";
  KILN_RETURN_IF_ERROR(CheckArity(call, kName, 3));
  LinearShape s;
  KILN_RETURN_IF_ERROR(ReadLinearShape(call.attrs, call.inputs, call.outputs, &s));
  const TensorRef *past = s.ops[kLaPast], *decay = s.ops[kLaDecay], *beta = s.ops[kLaBeta];
  const TensorRef* present = s.ops[kLaPresent];
  const size_t state_bytes = LinearStateBytes(s);  // present_state's size when it is there
  if (!present) KILN_RETURN_IF_ERROR(CheckWorkspace(call, state_bytes, kName));
  float* state = present ? present->as<float>() : static_cast<float*>(call.workspace);
  if (past) std::memmove(state, past->data, state_bytes);  // a state updated in place stays right
  else std::memset(state, 0, state_bytes);
  // An empty output leaves nothing to run: no batch, no token (the state is past_state) or dv = 0.
  // Otherwise each loop below is bounded by a real tensor's size.
  if (call.outputs[0].num_elements == 0) return Status::Ok();
  const int64_t Hq = s.q_heads, Hkv = s.kv_heads, dk = s.dk, dv = s.dv, group = Hq / Hkv;
  const float attr_scale = call.attrs.GetFloat("scale", 0.0f);
  const float scale = attr_scale != 0.0f ? attr_scale : 1.0f / std::sqrt(static_cast<float>(dk));
  const bool head_gate = decay && decay->dims[2] == Hkv;  // else a gate per key dim
  const int64_t beta_w = beta ? beta->dims[2] : 0;
  const float *q = s.ops[kLaQuery]->as<const float>(), *k = s.ops[kLaKey]->as<const float>();
  const float* v = s.ops[kLaValue]->as<const float>();
  float* y = call.outputs[0].as<float>();
  const int64_t per_head = s.seq * dk * dv * (group + 3);  // multiply-adds of one (batch, kv head)
  ParallelFor(call.threads, s.batch * Hkv, MinItemsPerPart(per_head), [&](int64_t b0, int64_t b1) {
    for (int64_t bh = b0; bh < b1; ++bh) {  // bh = b * Hkv + h
      const int64_t h = bh % Hkv;
      float* S = state + bh * dk * dv;
      for (int64_t row = bh / Hkv * s.seq; row < (bh / Hkv + 1) * s.seq; ++row) {  // row = b * T + t
        const float *kt = k + (row * Hkv + h) * dk, *vt = v + (row * Hkv + h) * dv;
        if (decay) {
          const float* g = decay->as<const float>() + (head_gate ? row * Hkv + h : (row * Hkv + h) * dk);
          for (int64_t d = 0; d < dk; ++d) {
            const float e = std::exp(g[head_gate ? 0 : d]);
            for (int64_t m = 0; m < dv; ++m) S[d * dv + m] *= e;
          }
        }
        const float rate = beta ? beta->as<const float>()[row * beta_w + (beta_w == 1 ? 0 : h)] : 1.0f;
        for (int64_t m = 0; m < dv; ++m) {
          float u = vt[m], read = 0.0f;
          if (beta) {
            for (int64_t d = 0; d < dk; ++d) read += S[d * dv + m] * kt[d];
            u = rate * (u - read);
          }
          for (int64_t d = 0; d < dk; ++d) S[d * dv + m] += kt[d] * u;
        }
        for (int64_t hq = h * group; hq < (h + 1) * group; ++hq) {
          const float* qt = q + (row * Hq + hq) * dk;
          for (int64_t m = 0; m < dv; ++m) {
            float acc = 0.0f;
            for (int64_t d = 0; d < dk; ++d) acc += qt[d] * S[d * dv + m];
            y[(row * Hq + hq) * dv + m] = scale * acc;
          }
        }
      }
    }
  });
  return Status::Ok();
}

constexpr KernelDef kKernels[] = {
    {"Attention", Attention, AttentionWorkspace, true},
    {"LinearAttention", LinearAttention, LinearAttentionWorkspace},
    {"RMSNormalization", RmsNormalization, nullptr, true},
    {"RotaryEmbedding", RotaryEmbedding, nullptr, true},
};

}  // namespace

std::span<const KernelDef> TransformerKernels() { return KeptKernels<kKernels>(); }

}  // namespace kiln::cpu
