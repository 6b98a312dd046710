// Attention on cuDNN 9's backend API: PlanSdpa (what the fused attention takes), the operation
// graph (sdpa.h), heuristics, execution plans per shape and variant packs per set of pointers.
// NOTE: the library calls below have never run on a GPU (see sdpa.h).
#include "runtime/cuda/sdpa.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/kernels/kernel_util.h"

namespace kiln::cuda {
namespace {

using cpu::DTypeStr;

constexpr std::string_view kOp = "Attention";

Status Refused(const std::string& msg) { return Unimplemented("cuDNN SDPA: " + msg); }
Status Invalid(const std::string& msg) { return InvalidArgument(std::string(kOp) + ": " + msg); }

const DeviceTensor* Optional(std::span<const DeviceTensor> ts, size_t i) {
  return i < ts.size() && ts[i].present() ? &ts[i] : nullptr;
}

// The unique ids of the graph's tensors: the variant pack's operands, then the virtual ones.
enum Uid : int64_t {
  kQ = 1, kK, kV, kY, kMask, kScale,
  kScores = 101, kScaled, kMasked, kMax, kShifted, kExp, kSum, kProbs,
};

// A backend descriptor, destroyed with the object.
class Desc {
 public:
  Desc() = default;
  Desc(const Dnn* dnn, cudnnBackendDescriptor_t d) : dnn_(dnn), d_(d) {}
  Desc(Desc&& o) noexcept : dnn_(o.dnn_), d_(std::exchange(o.d_, nullptr)) {}
  Desc& operator=(Desc&& o) noexcept {
    std::swap(dnn_, o.dnn_);
    std::swap(d_, o.d_);
    return *this;
  }
  ~Desc() {
    if (d_) dnn_->BackendDestroyDescriptor(d_);  // a destructor can do nothing with a failure
  }
  cudnnBackendDescriptor_t get() const { return d_; }
  cudnnBackendDescriptor_t* slot() { return &d_; }

 private:
  const Dnn* dnn_ = nullptr;
  cudnnBackendDescriptor_t d_ = nullptr;
};

// Builds descriptors; every failure names the call and what was being built. The message is
// built only on failure: a steady-state execute formats no string.
class Builder {
 public:
  Builder(const Dnn& dnn, const CallName& what) : dnn_(dnn), what_(what) {}

  Status Make(cudnnBackendDescriptorType_t type, Desc* out) {
    *out = Desc(&dnn_, nullptr);
    return Check(dnn_.BackendCreateDescriptor(type, out->slot()), "cudnnBackendCreateDescriptor");
  }
  Status Set(const Desc& d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, const void* values,
             int64_t count = 1) {
    const cudnnStatus_t st = dnn_.BackendSetAttribute(d.get(), name, type, count, values);
    if (st == CUDNN_STATUS_SUCCESS) return Status::Ok();
    return Check(st, "cudnnBackendSetAttribute (attribute " + std::to_string(static_cast<int>(name)) + ")");
  }
  Status SetDesc(const Desc& d, cudnnBackendAttributeName_t name, const Desc& value) {
    cudnnBackendDescriptor_t v = value.get();
    return Set(d, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, &v);
  }
  Status Finalize(const Desc& d) { return Check(dnn_.BackendFinalize(d.get()), "cudnnBackendFinalize"); }
  Status Check(cudnnStatus_t st, std::string_view call) const {
    if (st == CUDNN_STATUS_SUCCESS) return Status::Ok();
    return CheckDnn(dnn_, st, what_.str() + ": " + std::string(call));
  }

 private:
  const Dnn& dnn_;
  CallName what_;
};

// The graph as data: its tensors, then its operations over their unique ids.
struct TensorSpec {
  int64_t uid;
  cudnnDataType_t dtype;
  std::array<int64_t, 4> dims, strides;
  bool is_virtual, by_value;
};

// One operation: a MATMUL, POINTWISE or REDUCTION descriptor (`mode`: the pointwise mode or the
// reduction operator) and its operation over tensors x, b (0: none) and y.
struct OpSpec {
  cudnnBackendDescriptorType_t type;  // CUDNN_BACKEND_MATMUL / _POINTWISE / _REDUCTION_DESCRIPTOR
  int mode;
  int64_t x, b, y;
};

// Each kind's descriptor types and attribute names.
struct OpAttrs {
  cudnnBackendDescriptorType_t type, op_type;
  int mode_attr;  // -1: none
  cudnnBackendAttributeType_t mode_type;
  cudnnBackendAttributeName_t prec_attr, desc_attr, x_attr, b_attr, y_attr;
};
constexpr OpAttrs kOpAttrs[] = {
    {CUDNN_BACKEND_MATMUL_DESCRIPTOR, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, -1, CUDNN_TYPE_INT64,
     CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_ATTR_OPERATION_MATMUL_ADESC,
     CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_ATTR_OPERATION_MATMUL_CDESC},
    {CUDNN_BACKEND_POINTWISE_DESCRIPTOR, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, CUDNN_ATTR_POINTWISE_MODE,
     CUDNN_TYPE_POINTWISE_MODE, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR,
     CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_ATTR_OPERATION_POINTWISE_YDESC},
    {CUDNN_BACKEND_REDUCTION_DESCRIPTOR, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, CUDNN_ATTR_REDUCTION_OPERATOR,
     CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_ATTR_OPERATION_REDUCTION_DESC,
     CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_ATTR_OPERATION_REDUCTION_YDESC},
};

// The finalized operation graph of `tensors` and `ops` (every descriptor it needs kept in `keep`).
Status BuildGraph(Builder& b, cudnnHandle_t handle, std::span<const TensorSpec> tensors, std::span<const OpSpec> ops,
                  std::vector<Desc>* keep, Desc* graph) {
  const size_t first_tensor = keep->size();
  for (const TensorSpec& t : tensors) {
    Desc& d = keep->emplace_back();
    const int64_t alignment = 16;
    KILN_RETURN_IF_ERROR(b.Make(CUDNN_BACKEND_TENSOR_DESCRIPTOR, &d));
    KILN_RETURN_IF_ERROR(b.Set(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, &t.dtype));
    KILN_RETURN_IF_ERROR(b.Set(d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, t.dims.data(), 4));
    KILN_RETURN_IF_ERROR(b.Set(d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, t.strides.data(), 4));
    KILN_RETURN_IF_ERROR(b.Set(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, &t.uid));
    KILN_RETURN_IF_ERROR(b.Set(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, &alignment));
    KILN_RETURN_IF_ERROR(b.Set(d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, &t.is_virtual));
    KILN_RETURN_IF_ERROR(b.Set(d, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, &t.by_value));
    KILN_RETURN_IF_ERROR(b.Finalize(d));
  }
  auto tensor = [&](int64_t uid) -> const Desc& {
    size_t i = 0;
    while (tensors[i].uid != uid) ++i;  // every uid an OpSpec names is one of `tensors`
    return (*keep)[first_tensor + i];
  };
  std::vector<cudnnBackendDescriptor_t> raw;
  const cudnnDataType_t fp32 = CUDNN_DATA_FLOAT;
  for (const OpSpec& o : ops) {
    const OpAttrs& a = *std::find_if(std::begin(kOpAttrs), std::end(kOpAttrs),
                                     [&](const OpAttrs& k) { return k.type == o.type; });
    Desc& desc = keep->emplace_back();
    KILN_RETURN_IF_ERROR(b.Make(a.type, &desc));
    if (a.mode_attr >= 0)
      KILN_RETURN_IF_ERROR(b.Set(desc, static_cast<cudnnBackendAttributeName_t>(a.mode_attr), a.mode_type, &o.mode));
    KILN_RETURN_IF_ERROR(b.Set(desc, a.prec_attr, CUDNN_TYPE_DATA_TYPE, &fp32));  // float32 compute
    KILN_RETURN_IF_ERROR(b.Finalize(desc));
    Desc& op = keep->emplace_back();
    KILN_RETURN_IF_ERROR(b.Make(a.op_type, &op));
    KILN_RETURN_IF_ERROR(b.SetDesc(op, a.desc_attr, (*keep)[keep->size() - 2]));
    KILN_RETURN_IF_ERROR(b.SetDesc(op, a.x_attr, tensor(o.x)));
    if (o.b != 0) KILN_RETURN_IF_ERROR(b.SetDesc(op, a.b_attr, tensor(o.b)));
    KILN_RETURN_IF_ERROR(b.SetDesc(op, a.y_attr, tensor(o.y)));
    KILN_RETURN_IF_ERROR(b.Finalize(op));
    raw.push_back(op.get());
  }
  KILN_RETURN_IF_ERROR(b.Make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, graph));
  KILN_RETURN_IF_ERROR(b.Set(*graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, raw.data(),
                             static_cast<int64_t>(raw.size())));
  return b.Set(*graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, &handle);
}

cudnnDataType_t DnnType(DType t) { return t == DType::kBFloat16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF; }

// Strides of a [B, H, S, D] view: packed 4-D, or the 3-D [B, S, H*D] tensor's, or with packed_qkv
// a third of the 3-D [B, S, 3*H*D] tensor's columns (`parts` 3).
std::array<int64_t, 4> HeadStrides(bool three_d, int64_t heads, int64_t seq, int64_t dim, int64_t parts = 1) {
  if (three_d) return {seq * parts * heads * dim, dim, parts * heads * dim, 1};
  return {heads * seq * dim, seq * dim, dim, 1};
}

// cuDNN's NOT_SUPPORTED family (3000-3999): the graph or an engine refused, not a failure.
bool NotSupported(cudnnStatus_t st) { return st / 1000 == CUDNN_STATUS_NOT_SUPPORTED / 1000; }

Status DeviceRefusal(const SdpaOptions& options) {
  if (options.compute_capability >= 80) return Status::Ok();
  return Refused("fused attention needs compute capability 8.0 or later, the device has " +
                 (options.compute_capability > 0 ? std::to_string(options.compute_capability / 10) + "." +
                                                       std::to_string(options.compute_capability % 10)
                                                 : std::string("an unknown one")));
}

// A built plan: the execution plan, its workspace, and the variant pack of the last pointers.
struct Cached {
  Desc plan;
  int64_t workspace = 0;
  float scale = 0;  // the by-value scale's host storage, read at each execute
  Desc pack;
  std::array<void*, 6> pointers{};  // Q, K, V, Y, mask, workspace of `pack`
};

struct PlanHash {
  size_t operator()(const SdpaPlan& p) const {
    size_t h = std::hash<int64_t>()(p.batch);
    for (int64_t v : {p.heads, p.q_seq, p.kv_seq, p.head, p.v_head, p.mask_dims[0], p.mask_dims[1],
                      p.mask_dims[2], p.mask_dims[3]})
      h = h * 1000003u ^ std::hash<int64_t>()(v);
    return h ^ (static_cast<size_t>(p.dtype) << 1) ^ (p.three_d ? 0x9e37u : 0u) ^ (p.mask ? 0x7f4au : 0u) ^
           (p.packed ? 0x51c3u : 0u) ^
           std::hash<float>()(p.scale);
  }
};

}  // namespace

Status PlanSdpa(const AttrMap& attrs, std::span<const DeviceTensor> inputs, std::span<const DeviceTensor> outputs,
                SdpaPlan* plan) {
  *plan = SdpaPlan{};
  if (inputs.size() < 3 || !inputs[0].present() || !inputs[1].present() || !inputs[2].present() ||
      outputs.empty() || !outputs[0].present())
    return Invalid("inputs Q, K and V and output Y are required");
  const DeviceTensor &q = inputs[0], &k = inputs[1], &v = inputs[2], &y = outputs[0];
  if ((q.rank != 3 && q.rank != 4) || k.rank != q.rank || v.rank != q.rank || y.rank != q.rank)
    return Invalid("Q " + ShapeText(q) + ", K " + ShapeText(k) + ", V " + ShapeText(v) + " and Y " + ShapeText(y) +
                   " must all be 3-D or all 4-D");
  SdpaPlan p;
  p.three_d = q.rank == 3;
  p.packed = attrs.GetInt("packed_qkv", 0) != 0;
  p.batch = q.dims[0];
  int64_t kv_heads = 0;
  if (p.packed && (!p.three_d || k.dims[2] != q.dims[2] || v.dims[2] != q.dims[2]))
    return Invalid("packed_qkv needs Q " + ShapeText(q) + ", K " + ShapeText(k) + " and V " + ShapeText(v) +
                   " 3-D, each [batch, sequence, 3 * hidden]");
  if (p.three_d) {
    const int64_t parts = p.packed ? 3 : 1;  // each input's hidden size: its last dim / parts
    p.heads = attrs.GetInt("q_num_heads", 0), kv_heads = attrs.GetInt("kv_num_heads", 0);
    if (p.heads < 1 || kv_heads < 1 || q.dims[2] % (parts * p.heads) != 0 || k.dims[2] % (parts * kv_heads) != 0 ||
        v.dims[2] % (parts * kv_heads) != 0)
      return Invalid("q_num_heads and kv_num_heads must divide the hidden sizes of Q " + ShapeText(q) + ", K " +
                     ShapeText(k) + " and V " + ShapeText(v) + (p.packed ? " (a third of each)" : ""));
    p.q_seq = q.dims[1], p.kv_seq = k.dims[1], p.head = q.dims[2] / parts / p.heads,
    p.v_head = v.dims[2] / parts / kv_heads;
  } else {
    p.heads = q.dims[1], kv_heads = k.dims[1], p.q_seq = q.dims[2], p.kv_seq = k.dims[2];
    p.head = q.dims[3], p.v_head = v.dims[3];
  }
  const int64_t k_head = p.three_d ? k.dims[2] / (p.packed ? 3 : 1) / kv_heads : k.dims[3];
  const int64_t v_seq = p.three_d ? v.dims[1] : v.dims[2];
  const int64_t v_heads = p.three_d ? kv_heads : v.dims[1];
  const int64_t y_want[] = {p.batch, p.three_d ? p.q_seq : p.heads, p.three_d ? p.heads * p.v_head : p.q_seq,
                            p.v_head};
  if (k.dims[0] != p.batch || v.dims[0] != p.batch || k_head != p.head || v_seq != p.kv_seq ||
      v_heads != kv_heads || !std::equal(y.dims, y.dims + y.rank, y_want))
    return Invalid("Q " + ShapeText(q) + ", K " + ShapeText(k) + ", V " + ShapeText(v) + " and Y " + ShapeText(y) +
                   " do not agree");
  if (q.dtype != k.dtype || q.dtype != v.dtype || q.dtype != y.dtype)
    return Invalid("Q, K, V and Y must have one dtype, got " + DTypeStr(q.dtype) + ", " + DTypeStr(k.dtype) + ", " +
                   DTypeStr(v.dtype) + " and " + DTypeStr(y.dtype));
  if (q.dtype != DType::kFloat16 && q.dtype != DType::kBFloat16)
    return Refused(DTypeStr(q.dtype) + " Q, K and V: cuDNN's fused attention takes float16 and bfloat16 only");
  p.dtype = q.dtype;
  if (kv_heads != p.heads)
    return Refused("grouped-query attention (" + std::to_string(p.heads) + " query heads, " +
                   std::to_string(kv_heads) + " key/value heads) is not built");
  if (p.head % 8 != 0 || p.head > 128 || p.v_head % 8 != 0 || p.v_head > 128)
    return Refused("head sizes " + std::to_string(p.head) + " (Q, K) and " + std::to_string(p.v_head) +
                   " (V) must be multiples of 8 and at most 128");
  if (q.num_elements == 0 || k.num_elements == 0 || y.num_elements == 0) return Refused("an empty tensor");
  if (attrs.GetInt("is_causal", 0) != 0) return Refused("is_causal (the causal mask is not built into the graph)");
  if (attrs.GetFloat("softcap", 0.0f) != 0.0f) return Refused("softcap");
  if (Optional(inputs, 4) || Optional(inputs, 5)) return Refused("a past key/value cache");
  if (Optional(inputs, 6)) return Refused("nonpad_kv_seqlen");
  for (size_t i = 1; i < outputs.size(); ++i)
    if (outputs[i].present()) return Refused("the present_key, present_value or qk_matmul_output outputs");
  if (const DeviceTensor* m = Optional(inputs, 3)) {
    if (m->dtype != q.dtype)
      return Refused(DTypeStr(m->dtype) + " attn_mask: only an additive mask of Q's dtype (" + DTypeStr(q.dtype) +
                     ") is taken");
    const int64_t full[] = {p.batch, p.heads, p.q_seq, p.kv_seq};
    bool ok = m->rank >= 2 && m->rank <= 4;
    for (int i = 0; ok && i < 4; ++i) {
      const int j = m->rank - 4 + i;  // right-aligned
      p.mask_dims[i] = j >= 0 ? m->dims[j] : 1;
      ok = p.mask_dims[i] == full[i] || (i < 3 && p.mask_dims[i] == 1);
    }
    if (!ok)
      return Refused("attn_mask " + ShapeText(*m) + ": want rank 2 to 4, the last dim " + std::to_string(p.kv_seq) +
                     " (the keys) and each other dim 1 or that of [" + std::to_string(p.batch) + ", " +
                     std::to_string(p.heads) + ", " + std::to_string(p.q_seq) + "]");
    p.mask = true;
  }
  p.scale = attrs.Has("scale") ? attrs.GetFloat("scale", 1.0f)
                               : static_cast<float>(1.0 / std::sqrt(static_cast<double>(p.head)));
  *plan = p;
  return Status::Ok();
}

struct SdpaLibrary::State {
  const Dnn* dnn = nullptr;
  SdpaOptions options;
  cudnnHandle_t handle = nullptr;
  std::unordered_map<SdpaPlan, Cached, PlanHash> cache;

  ~State() {
    cache.clear();  // descriptors before the handle
    if (handle) dnn->Destroy(handle);
  }

  // The graph of `p`, its heuristics and the first engine config whose execution plan finalizes,
  // into *c.
  Status Build(const SdpaPlan& p, const CallName& name, Cached* c) const {
    Builder b(*dnn, name);
    const cudnnDataType_t dt = DnnType(p.dtype), f32 = CUDNN_DATA_FLOAT;
    const int64_t B = p.batch, H = p.heads, Sq = p.q_seq, Sk = p.kv_seq, D = p.head, Dv = p.v_head;
    const int64_t parts = p.packed ? 3 : 1;
    const auto ks = HeadStrides(p.three_d, H, Sk, D, parts);
    const int64_t* m = p.mask_dims;
    const std::array<int64_t, 4> rows = {B, H, Sq, Sk}, row_strides = {H * Sq * Sk, Sq * Sk, Sk, 1};
    const std::array<int64_t, 4> stats = {B, H, Sq, 1}, stat_strides = {H * Sq, Sq, 1, 1};
    std::vector<TensorSpec> tensors = {
        {kQ, dt, {B, H, Sq, D}, HeadStrides(p.three_d, H, Sq, D, parts), false, false},
        {kK, dt, {B, H, D, Sk}, {ks[0], ks[1], ks[3], ks[2]}, false, false},  // K^T: K's strides swapped
        {kV, dt, {B, H, Sk, Dv}, HeadStrides(p.three_d, H, Sk, Dv, parts), false, false},
        {kY, dt, {B, H, Sq, Dv}, HeadStrides(p.three_d, H, Sq, Dv), false, false},
        {kScale, f32, {1, 1, 1, 1}, {1, 1, 1, 1}, false, true},
        {kMask, dt, {m[0], m[1], m[2], m[3]}, {m[1] * m[2] * m[3], m[2] * m[3], m[3], 1}, false, false},
        {kMasked, f32, rows, row_strides, true, false}};
    for (const int64_t uid : {kScores, kScaled, kShifted, kExp, kProbs}) tensors.push_back({uid, f32, rows, row_strides, true, false});
    for (const int64_t uid : {kMax, kSum}) tensors.push_back({uid, f32, stats, stat_strides, true, false});
    const int64_t logits = p.mask ? kMasked : kScaled;
    std::vector<OpSpec> ops = {{CUDNN_BACKEND_MATMUL_DESCRIPTOR, 0, kQ, kK, kScores},
                               {CUDNN_BACKEND_POINTWISE_DESCRIPTOR, CUDNN_POINTWISE_MUL, kScores, kScale, kScaled}};
    if (p.mask) ops.push_back({CUDNN_BACKEND_POINTWISE_DESCRIPTOR, CUDNN_POINTWISE_ADD, kScaled, kMask, kMasked});
    else tensors.erase(tensors.begin() + 5, tensors.begin() + 7);  // no mask, no masked scores
    ops.insert(ops.end(), {{CUDNN_BACKEND_REDUCTION_DESCRIPTOR, CUDNN_REDUCE_TENSOR_MAX, logits, 0, kMax},
                           {CUDNN_BACKEND_POINTWISE_DESCRIPTOR, CUDNN_POINTWISE_SUB, logits, kMax, kShifted},
                           {CUDNN_BACKEND_POINTWISE_DESCRIPTOR, CUDNN_POINTWISE_EXP, kShifted, 0, kExp},
                           {CUDNN_BACKEND_REDUCTION_DESCRIPTOR, CUDNN_REDUCE_TENSOR_ADD, kExp, 0, kSum},
                           {CUDNN_BACKEND_POINTWISE_DESCRIPTOR, CUDNN_POINTWISE_DIV, kExp, kSum, kProbs},
                           {CUDNN_BACKEND_MATMUL_DESCRIPTOR, 0, kProbs, kV, kY}});
    std::vector<Desc> keep;
    Desc graph;
    KILN_RETURN_IF_ERROR(BuildGraph(b, handle, tensors, ops, &keep, &graph));
    if (const cudnnStatus_t st = dnn->BackendFinalize(graph.get()); NotSupported(st))
      return Refused("the operation graph: " + std::string(b.Check(st, "cudnnBackendFinalize").message()));
    else KILN_RETURN_IF_ERROR(b.Check(st, "cudnnBackendFinalize (operation graph)"));

    Desc heur;
    const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
    KILN_RETURN_IF_ERROR(b.Make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur));
    KILN_RETURN_IF_ERROR(b.SetDesc(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph));
    KILN_RETURN_IF_ERROR(b.Set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, &mode));
    KILN_RETURN_IF_ERROR(b.Finalize(heur));
    int64_t count = 0;
    KILN_RETURN_IF_ERROR(b.Check(dnn->BackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                          CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr),
                                 "cudnnBackendGetAttribute (the number of engine configs)"));
    std::vector<Desc> configs(static_cast<size_t>(std::max<int64_t>(count, 0)));
    std::vector<cudnnBackendDescriptor_t> raw;
    for (Desc& cfg : configs) {
      KILN_RETURN_IF_ERROR(b.Make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfg));
      raw.push_back(cfg.get());
    }
    if (count > 0)
      KILN_RETURN_IF_ERROR(b.Check(dnn->BackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                            CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &count, raw.data()),
                                   "cudnnBackendGetAttribute (the engine configs)"));
    std::string tried;
    for (int64_t i = 0; i < count; ++i) {
      Desc plan;
      KILN_RETURN_IF_ERROR(b.Make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan));
      KILN_RETURN_IF_ERROR(b.SetDesc(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, configs[static_cast<size_t>(i)]));
      KILN_RETURN_IF_ERROR(b.Set(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, &handle));
      int64_t workspace = -1, n = 0;
      const cudnnStatus_t st = dnn->BackendFinalize(plan.get());
      if (st == CUDNN_STATUS_SUCCESS)
        KILN_RETURN_IF_ERROR(b.Check(dnn->BackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                                              CUDNN_TYPE_INT64, 1, &n, &workspace),
                                     "cudnnBackendGetAttribute (the workspace size)"));
      if (st == CUDNN_STATUS_SUCCESS && workspace >= 0 && static_cast<size_t>(workspace) <= options.max_workspace_bytes) {
        c->plan = std::move(plan);
        c->workspace = workspace;
        c->scale = p.scale;
        return Status::Ok();
      }
      tried += "; engine config " + std::to_string(i) + ": " +
               (st != CUDNN_STATUS_SUCCESS ? std::string(dnn->GetErrorString(st))
                                           : "needs " + std::to_string(workspace) + " bytes of workspace, above the cap");
    }
    return Refused("no engine config of the heuristics (" + std::to_string(count) + " offered) finalizes" + tried);
  }

  // The variant pack of `c` for these pointers (made again only when they change), then execute.
  Status Execute(Cached& c, const std::array<void*, 6>& ptrs, const CallName& name) {
    Builder b(*dnn, name);
    if (!c.pack.get() || c.pointers != ptrs) {
      const int64_t uids[] = {kQ, kK, kV, kY, kScale, kMask};
      void* data[] = {ptrs[0], ptrs[1], ptrs[2], ptrs[3], &c.scale, ptrs[4]};
      const int64_t n = ptrs[4] != nullptr ? 6 : 5;  // the mask last, when there is one
      KILN_RETURN_IF_ERROR(b.Make(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &c.pack));
      c.pointers = {};  // a failure below leaves no pack that seems to match
      KILN_RETURN_IF_ERROR(b.Set(c.pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, uids, n));
      KILN_RETURN_IF_ERROR(b.Set(c.pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, data, n));
      KILN_RETURN_IF_ERROR(b.Set(c.pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, &ptrs[5]));
      KILN_RETURN_IF_ERROR(b.Finalize(c.pack));
      c.pointers = ptrs;
    }
    const cudnnStatus_t st = dnn->BackendExecute(handle, c.plan.get(), c.pack.get());
    if (NotSupported(st)) return Refused(std::string(b.Check(st, "cudnnBackendExecute").message()));
    return b.Check(st, "cudnnBackendExecute");
  }
};

SdpaLibrary::SdpaLibrary(std::unique_ptr<State> state) : s_(std::move(state)) {}
SdpaLibrary::~SdpaLibrary() = default;

Result<std::unique_ptr<SdpaLibrary>> SdpaLibrary::Create(const Dnn& dnn, const SdpaOptions& options) {
  auto state = std::make_unique<State>();
  state->dnn = &dnn;
  state->options = options;
  KILN_RETURN_IF_ERROR_CTX(CheckDnn(dnn, dnn.Create(&state->handle), "cudnnCreate"), "cuDNN SDPA");
  return std::unique_ptr<SdpaLibrary>(new SdpaLibrary(std::move(state)));
}

Status SdpaLibrary::SupportsWith(const SdpaOptions& options, std::string_view op, const AttrMap& attrs,
                                 std::span<const DeviceTensor> inputs, std::span<const DeviceTensor> outputs) {
  if (op != kOp) return Refused(std::string(op) + " is not Attention");
  SdpaPlan plan;
  KILN_RETURN_IF_ERROR(PlanSdpa(attrs, inputs, outputs, &plan));
  return DeviceRefusal(options);
}

Status SdpaLibrary::Accepts(std::string_view op, const AttrMap& attrs, std::span<const DeviceTensor> inputs,
                            std::span<const DeviceTensor> outputs) const {
  return SupportsWith(s_->options, op, attrs, inputs, outputs);
}

size_t SdpaLibrary::Workspace(std::string_view op, const AttrMap& attrs, std::span<const DeviceTensor> inputs,
                              std::span<const DeviceTensor> outputs) const {
  return Accepts(op, attrs, inputs, outputs).ok() ? s_->options.max_workspace_bytes : 0;
}

Status SdpaLibrary::Run(std::string_view op, const OpCall& call, std::string_view node) {
  if (op != kOp) return Refused(std::string(op) + " is not Attention");
  SdpaPlan plan;
  KILN_RETURN_IF_ERROR(PlanSdpa(call.attrs, call.inputs, call.outputs, &plan));
  KILN_RETURN_IF_ERROR(DeviceRefusal(s_->options));
  const CallName name{op, node};
  auto it = s_->cache.find(plan);
  if (it == s_->cache.end()) {
    Cached built;
    KILN_RETURN_IF_ERROR(s_->Build(plan, name, &built));
    it = s_->cache.emplace(plan, std::move(built)).first;
  }
  Cached& c = it->second;
  if (call.workspace_bytes < static_cast<size_t>(c.workspace))
    return InvalidArgument(name.str() + ": cuDNN SDPA needs " + std::to_string(c.workspace) +
                           " bytes of workspace, the call has " + std::to_string(call.workspace_bytes));
  auto ptr = [](CUdeviceptr p) { return reinterpret_cast<void*>(static_cast<uintptr_t>(p)); };
  const DeviceTensor* mask = Optional(call.inputs, 3);
  // packed_qkv: K's and V's columns start one and two thirds into their rows.
  const CUdeviceptr third = plan.packed ? static_cast<CUdeviceptr>(plan.heads * plan.head * DTypeSize(plan.dtype)) : 0;
  const std::array<void*, 6> ptrs = {ptr(call.inputs[0].data), ptr(call.inputs[1].data + third),
                                     ptr(call.inputs[2].data + 2 * third),
                                     ptr(call.outputs[0].data), mask ? ptr(mask->data) : nullptr,
                                     ptr(call.workspace)};
  if (const cudnnStatus_t st = s_->dnn->SetStream(s_->handle, call.stream); st != CUDNN_STATUS_SUCCESS)
    return CheckDnn(*s_->dnn, st, name.str() + ": cudnnSetStream");
  return s_->Execute(c, ptrs, name);
}

size_t SdpaLibrary::cached_plans() const { return s_->cache.size(); }

}  // namespace kiln::cuda
