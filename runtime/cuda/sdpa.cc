// Attention on cuDNN 9's backend API: PlanSdpa (what the fused attention takes), the operation
// graph (sdpa.h), heuristics, execution plans per shape and variant packs per set of pointers.
// NOTE: the library calls below have never run on a GPU (see sdpa.h).
#include "runtime/cuda/sdpa.h"

#include <algorithm>
#include <array>
#include <utility>
#include <cmath>
#include <string>
#include <string_view>
#include <unordered_map>
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

// Builds descriptors; every failure names the call and what was being built.
class Builder {
 public:
  Builder(const Dnn& dnn, const CallName& what) : dnn_(dnn), what_(what) {}

  Result<Desc> Make(cudnnBackendDescriptorType_t type) {
    Desc d(&dnn_, nullptr);
    KILN_RETURN_IF_ERROR(Check(dnn_.BackendCreateDescriptor(type, d.slot()), "cudnnBackendCreateDescriptor"));
    return d;
  }
  template <typename T>
  Status Set(const Desc& d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, const T* values,
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

  // A tensor: dims and strides in elements.
  Result<Desc> Tensor(int64_t uid, cudnnDataType_t dtype, const std::array<int64_t, 4>& dims,
                      const std::array<int64_t, 4>& strides, bool is_virtual = false, bool by_value = false) {
    KILN_ASSIGN_OR_RETURN(Desc t, Make(CUDNN_BACKEND_TENSOR_DESCRIPTOR));
    const int64_t alignment = 16;
    KILN_RETURN_IF_ERROR(Set(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, &dtype));
    KILN_RETURN_IF_ERROR(Set(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, dims.data(), 4));
    KILN_RETURN_IF_ERROR(Set(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, strides.data(), 4));
    KILN_RETURN_IF_ERROR(Set(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, &uid));
    KILN_RETURN_IF_ERROR(Set(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, &alignment));
    KILN_RETURN_IF_ERROR(Set(t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, &is_virtual));
    KILN_RETURN_IF_ERROR(Set(t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, &by_value));
    KILN_RETURN_IF_ERROR(Finalize(t));
    return t;
  }
  // A float32 intermediate of `dims`, packed.
  Result<Desc> Virtual(int64_t uid, const std::array<int64_t, 4>& dims) {
    return Tensor(uid, CUDNN_DATA_FLOAT, dims, {dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1}, true);
  }

  Result<Desc> Matmul(const Desc& a, const Desc& b, const Desc& c) {
    KILN_ASSIGN_OR_RETURN(Desc m, Make(CUDNN_BACKEND_MATMUL_DESCRIPTOR));
    const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    KILN_RETURN_IF_ERROR(Set(m, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &comp));
    KILN_RETURN_IF_ERROR(Finalize(m));
    KILN_ASSIGN_OR_RETURN(Desc op, Make(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR));
    KILN_RETURN_IF_ERROR(SetDesc(op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, a));
    KILN_RETURN_IF_ERROR(SetDesc(op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, b));
    KILN_RETURN_IF_ERROR(SetDesc(op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, c));
    KILN_RETURN_IF_ERROR(SetDesc(op, CUDNN_ATTR_OPERATION_MATMUL_DESC, m));
    KILN_RETURN_IF_ERROR(Finalize(op));
    return op;
  }
  // y = x `mode` b (b null: unary), in float32.
  Result<Desc> Pointwise(cudnnPointwiseMode_t mode, const Desc& x, const Desc* b, const Desc& y) {
    KILN_ASSIGN_OR_RETURN(Desc pw, Make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR));
    const cudnnDataType_t prec = CUDNN_DATA_FLOAT;
    KILN_RETURN_IF_ERROR(Set(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, &mode));
    KILN_RETURN_IF_ERROR(Set(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, &prec));
    KILN_RETURN_IF_ERROR(Finalize(pw));
    KILN_ASSIGN_OR_RETURN(Desc op, Make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR));
    KILN_RETURN_IF_ERROR(SetDesc(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw));
    KILN_RETURN_IF_ERROR(SetDesc(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x));
    if (b) KILN_RETURN_IF_ERROR(SetDesc(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b));
    KILN_RETURN_IF_ERROR(SetDesc(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y));
    KILN_RETURN_IF_ERROR(Finalize(op));
    return op;
  }
  Result<Desc> Reduction(cudnnReduceTensorOp_t reduce, const Desc& x, const Desc& y) {
    KILN_ASSIGN_OR_RETURN(Desc r, Make(CUDNN_BACKEND_REDUCTION_DESCRIPTOR));
    const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    KILN_RETURN_IF_ERROR(Set(r, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, &reduce));
    KILN_RETURN_IF_ERROR(Set(r, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &comp));
    KILN_RETURN_IF_ERROR(Finalize(r));
    KILN_ASSIGN_OR_RETURN(Desc op, Make(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR));
    KILN_RETURN_IF_ERROR(SetDesc(op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, r));
    KILN_RETURN_IF_ERROR(SetDesc(op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x));
    KILN_RETURN_IF_ERROR(SetDesc(op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y));
    KILN_RETURN_IF_ERROR(Finalize(op));
    return op;
  }

  // The message is built only on failure: a steady-state execute formats no string.
  Status Check(cudnnStatus_t st, std::string_view call) const {
    if (st == CUDNN_STATUS_SUCCESS) return Status::Ok();
    return CheckDnn(dnn_, st, what_.str() + ": " + std::string(call));
  }

 private:
  const Dnn& dnn_;
  CallName what_;  // formatted only on failure
};

cudnnDataType_t DnnType(DType t) { return t == DType::kBFloat16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF; }

// Strides of a [B, H, S, D] view: packed 4-D, or the 3-D [B, S, H*D] tensor's.
std::array<int64_t, 4> HeadStrides(bool three_d, int64_t heads, int64_t seq, int64_t dim) {
  if (three_d) return {seq * heads * dim, dim, heads * dim, 1};
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
  p.batch = q.dims[0];
  int64_t kv_heads = 0;
  if (p.three_d) {
    p.heads = attrs.GetInt("q_num_heads", 0), kv_heads = attrs.GetInt("kv_num_heads", 0);
    if (p.heads < 1 || kv_heads < 1 || q.dims[2] % p.heads != 0 || k.dims[2] % kv_heads != 0 ||
        v.dims[2] % kv_heads != 0)
      return Invalid("q_num_heads and kv_num_heads must divide the hidden sizes of Q " + ShapeText(q) + ", K " +
                     ShapeText(k) + " and V " + ShapeText(v));
    p.q_seq = q.dims[1], p.kv_seq = k.dims[1], p.head = q.dims[2] / p.heads, p.v_head = v.dims[2] / kv_heads;
  } else {
    p.heads = q.dims[1], kv_heads = k.dims[1], p.q_seq = q.dims[2], p.kv_seq = k.dims[2];
    p.head = q.dims[3], p.v_head = v.dims[3];
  }
  const int64_t k_head = p.three_d ? k.dims[2] / kv_heads : k.dims[3];
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

  // The graph of `p`, its heuristics and the first engine config whose execution plan finalizes.
  Result<Cached> Build(const SdpaPlan& p, const CallName& name) const {
    Builder b(*dnn, name);
    const cudnnDataType_t dt = DnnType(p.dtype);
    const int64_t B = p.batch, H = p.heads, Sq = p.q_seq, Sk = p.kv_seq, D = p.head, Dv = p.v_head;
    const auto ks = HeadStrides(p.three_d, H, Sk, D);
    KILN_ASSIGN_OR_RETURN(Desc q, b.Tensor(kQ, dt, {B, H, Sq, D}, HeadStrides(p.three_d, H, Sq, D)));
    KILN_ASSIGN_OR_RETURN(Desc kt, b.Tensor(kK, dt, {B, H, D, Sk}, {ks[0], ks[1], ks[3], ks[2]}));  // K^T
    KILN_ASSIGN_OR_RETURN(Desc v, b.Tensor(kV, dt, {B, H, Sk, Dv}, HeadStrides(p.three_d, H, Sk, Dv)));
    KILN_ASSIGN_OR_RETURN(Desc y, b.Tensor(kY, dt, {B, H, Sq, Dv}, HeadStrides(p.three_d, H, Sq, Dv)));
    KILN_ASSIGN_OR_RETURN(Desc scale, b.Tensor(kScale, CUDNN_DATA_FLOAT, {1, 1, 1, 1}, {1, 1, 1, 1}, false, true));
    const std::array<int64_t, 4> rows = {B, H, Sq, Sk}, stat = {B, H, Sq, 1};
    KILN_ASSIGN_OR_RETURN(Desc s, b.Virtual(kScores, rows));
    KILN_ASSIGN_OR_RETURN(Desc scaled, b.Virtual(kScaled, rows));
    KILN_ASSIGN_OR_RETURN(Desc max, b.Virtual(kMax, stat));
    KILN_ASSIGN_OR_RETURN(Desc shifted, b.Virtual(kShifted, rows));
    KILN_ASSIGN_OR_RETURN(Desc exp, b.Virtual(kExp, rows));
    KILN_ASSIGN_OR_RETURN(Desc sum, b.Virtual(kSum, stat));
    KILN_ASSIGN_OR_RETURN(Desc probs, b.Virtual(kProbs, rows));
    std::vector<Desc> ops;
    KILN_ASSIGN_OR_RETURN(ops.emplace_back(), b.Matmul(q, kt, s));
    KILN_ASSIGN_OR_RETURN(ops.emplace_back(), b.Pointwise(CUDNN_POINTWISE_MUL, s, &scale, scaled));
    Desc mask, masked;
    const Desc* logits = &scaled;
    if (p.mask) {
      const int64_t* m = p.mask_dims;
      KILN_ASSIGN_OR_RETURN(mask, b.Tensor(kMask, dt, {m[0], m[1], m[2], m[3]},
                                           {m[1] * m[2] * m[3], m[2] * m[3], m[3], 1}));
      KILN_ASSIGN_OR_RETURN(masked, b.Virtual(kMasked, rows));
      KILN_ASSIGN_OR_RETURN(ops.emplace_back(), b.Pointwise(CUDNN_POINTWISE_ADD, scaled, &mask, masked));
      logits = &masked;
    }
    KILN_ASSIGN_OR_RETURN(ops.emplace_back(), b.Reduction(CUDNN_REDUCE_TENSOR_MAX, *logits, max));
    KILN_ASSIGN_OR_RETURN(ops.emplace_back(), b.Pointwise(CUDNN_POINTWISE_SUB, *logits, &max, shifted));
    KILN_ASSIGN_OR_RETURN(ops.emplace_back(), b.Pointwise(CUDNN_POINTWISE_EXP, shifted, nullptr, exp));
    KILN_ASSIGN_OR_RETURN(ops.emplace_back(), b.Reduction(CUDNN_REDUCE_TENSOR_ADD, exp, sum));
    KILN_ASSIGN_OR_RETURN(ops.emplace_back(), b.Pointwise(CUDNN_POINTWISE_DIV, exp, &sum, probs));
    KILN_ASSIGN_OR_RETURN(ops.emplace_back(), b.Matmul(probs, v, y));

    KILN_ASSIGN_OR_RETURN(Desc graph, b.Make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR));
    std::vector<cudnnBackendDescriptor_t> raw;
    for (const Desc& op : ops) raw.push_back(op.get());
    KILN_RETURN_IF_ERROR(b.Set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, raw.data(),
                               static_cast<int64_t>(raw.size())));
    KILN_RETURN_IF_ERROR(b.Set(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, &handle));
    if (const cudnnStatus_t st = dnn->BackendFinalize(graph.get()); NotSupported(st))
      return Refused("the operation graph: " + std::string(b.Check(st, "cudnnBackendFinalize").message()));
    else KILN_RETURN_IF_ERROR(b.Check(st, "cudnnBackendFinalize (operation graph)"));

    KILN_ASSIGN_OR_RETURN(Desc heur, b.Make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR));
    const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
    KILN_RETURN_IF_ERROR(b.SetDesc(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph));
    KILN_RETURN_IF_ERROR(b.Set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, &mode));
    KILN_RETURN_IF_ERROR(b.Finalize(heur));
    int64_t count = 0;
    KILN_RETURN_IF_ERROR(b.Check(dnn->BackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                          CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr),
                                 "cudnnBackendGetAttribute (the number of engine configs)"));
    std::vector<Desc> configs;
    std::vector<cudnnBackendDescriptor_t> raw_configs;
    for (int64_t i = 0; i < count; ++i) {
      KILN_ASSIGN_OR_RETURN(configs.emplace_back(), b.Make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
      raw_configs.push_back(configs.back().get());
    }
    if (count > 0)
      KILN_RETURN_IF_ERROR(b.Check(dnn->BackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                            CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &count,
                                                            raw_configs.data()),
                                   "cudnnBackendGetAttribute (the engine configs)"));
    std::string tried;
    for (int64_t i = 0; i < count; ++i) {
      KILN_ASSIGN_OR_RETURN(Desc plan, b.Make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR));
      KILN_RETURN_IF_ERROR(b.SetDesc(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, configs[static_cast<size_t>(i)]));
      KILN_RETURN_IF_ERROR(b.Set(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, &handle));
      if (const cudnnStatus_t st = dnn->BackendFinalize(plan.get()); st != CUDNN_STATUS_SUCCESS) {
        tried += "; engine config " + std::to_string(i) + ": " + dnn->GetErrorString(st);
        continue;
      }
      int64_t workspace = 0, n = 0;
      KILN_RETURN_IF_ERROR(b.Check(dnn->BackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                                            CUDNN_TYPE_INT64, 1, &n, &workspace),
                                   "cudnnBackendGetAttribute (the workspace size)"));
      if (workspace < 0 || static_cast<size_t>(workspace) > options.max_workspace_bytes) {
        tried += "; engine config " + std::to_string(i) + ": needs " + std::to_string(workspace) +
                 " bytes of workspace, above the cap of " + std::to_string(options.max_workspace_bytes);
        continue;
      }
      Cached c;
      c.plan = std::move(plan);
      c.workspace = workspace;
      c.scale = p.scale;
      return c;
    }
    return Refused("no engine config of the heuristics (" + std::to_string(count) + " offered) finalizes" + tried);
  }

  // The variant pack of `c` for these pointers (made again only when they change), then execute.
  Status Execute(Cached& c, const std::array<void*, 6>& ptrs, const CallName& name) {
    Builder b(*dnn, name);
    if (!c.pack.get() || c.pointers != ptrs) {
      c.pack = Desc();
      KILN_ASSIGN_OR_RETURN(Desc pack, b.Make(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR));
      std::vector<int64_t> uids = {kQ, kK, kV, kY, kScale};
      std::vector<void*> data = {ptrs[0], ptrs[1], ptrs[2], ptrs[3], &c.scale};
      if (ptrs[4] != nullptr) {
        uids.push_back(kMask);
        data.push_back(ptrs[4]);
      }
      KILN_RETURN_IF_ERROR(b.Set(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, uids.data(),
                                 static_cast<int64_t>(uids.size())));
      KILN_RETURN_IF_ERROR(b.Set(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, data.data(),
                                 static_cast<int64_t>(data.size())));
      KILN_RETURN_IF_ERROR(b.Set(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, &ptrs[5]));
      KILN_RETURN_IF_ERROR(b.Finalize(pack));
      c.pack = std::move(pack);
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
    KILN_ASSIGN_OR_RETURN(Cached built, s_->Build(plan, name));
    it = s_->cache.emplace(plan, std::move(built)).first;
  }
  Cached& c = it->second;
  if (call.workspace_bytes < static_cast<size_t>(c.workspace))
    return InvalidArgument(name.str() + ": cuDNN SDPA needs " + std::to_string(c.workspace) +
                           " bytes of workspace, the call has " + std::to_string(call.workspace_bytes));
  auto ptr = [](CUdeviceptr p) { return reinterpret_cast<void*>(static_cast<uintptr_t>(p)); };
  const DeviceTensor* mask = Optional(call.inputs, 3);
  const std::array<void*, 6> ptrs = {ptr(call.inputs[0].data), ptr(call.inputs[1].data), ptr(call.inputs[2].data),
                                     ptr(call.outputs[0].data), mask ? ptr(mask->data) : nullptr,
                                     ptr(call.workspace)};
  if (const cudnnStatus_t st = s_->dnn->SetStream(s_->handle, call.stream); st != CUDNN_STATUS_SUCCESS)
    return CheckDnn(*s_->dnn, st, name.str() + ": cudnnSetStream");
  return s_->Execute(c, ptrs, name);
}

size_t SdpaLibrary::cached_plans() const { return s_->cache.size(); }

}  // namespace kiln::cuda
