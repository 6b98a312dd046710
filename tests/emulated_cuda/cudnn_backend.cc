// Emulated cuDNN 9: the backend (graph) API of the cudnn_graph library, as far as Kiln uses it
// (runtime/cuda/sdpa.cc builds scaled-dot-product attention with it). Written from NVIDIA's cuDNN
// API reference ("Backend Descriptor Types", cudnnBackendSetAttribute, cudnnBackendFinalize,
// cudnnBackendExecute) and the developer guide's "Graph API" chapter; nothing is shared with
// Kiln's runtime.
//
// Descriptors (cudnnBackendDescriptor_t is an opaque pointer): TENSOR, MATMUL, OPERATION_MATMUL,
// POINTWISE, OPERATION_POINTWISE, REDUCTION, OPERATION_REDUCTION, OPERATIONGRAPH, ENGINEHEUR,
// ENGINECFG, EXECUTION_PLAN and VARIANT_PACK; creating any other type is
// CUDNN_STATUS_NOT_SUPPORTED. Attributes are stored as set (type, count, bytes) and checked when
// the descriptor is finalized, as cuDNN checks them; a finalized descriptor takes no more
// attributes (CUDNN_STATUS_NOT_INITIALIZED) and copies what it needs of the descriptors it names,
// so those may be destroyed afterwards.
//
// The operations: MATMUL (A [.., M, K] x B [.., K, N] -> C [.., M, N], batch dims equal or 1 on
// an input, accumulated in double and rounded once to C's type); POINTWISE ADD, SUB, MUL, DIV,
// MAX, MIN (Y = X op B, B's dims each Y's or 1) and EXP (Y = exp(X)), in float; REDUCTION ADD and
// MAX over the dims where Y is 1 and X is not. Virtual tensors hold float values and are never
// in device memory; a by-value tensor's value is read from the host pointer in the variant pack
// when cudnnBackendExecute is called.
//
// The engine (what heuristics offer, one engine config, global index 0): any graph of those
// operations whose virtual tensors are CUDNN_DATA_FLOAT and whose matmuls compute in float,
// except that a graph of two matmuls (the fused attention pattern of the developer guide's
// "Supported Graph Patterns", which on a GPU runs as one flash-attention kernel) is offered only
// as that pattern allows it: Q, K and V CUDNN_DATA_HALF or CUDNN_DATA_BFLOAT16, and both head
// dims (the first matmul's K, the second's N) multiples of 8 and at most 128. Otherwise the
// heuristics return no engine config. Its workspace is 8 bytes per row of every reduction's
// output (the running max and sum a flash kernel keeps); cudnnBackendExecute checks that the
// variant pack's workspace covers it.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <unordered_map>

#include "tests/emulated_cuda/cudnn_internal.h"

namespace kiln::emulated_cuda::dnn {
namespace {

// ---- Parsed forms ----------------------------------------------------------------------------

struct TensorInfo {
  int64_t uid = 0;
  bool is_virtual = false;
  bool by_value = false;
  View view;  // dtype, dims, strides
};

enum class OpKind : uint8_t { kMatmul, kPointwise, kReduction };

struct Node {
  OpKind kind = OpKind::kMatmul;
  int mode = 0;             // cudnnPointwiseMode_t or cudnnReduceTensorOp_t
  TensorInfo x, b, y;       // matmul: A, B, C; pointwise: X, B (unary: b.uid == -1), Y; reduction: X, -, Y
  bool binary = false;
};

struct Graph {
  std::vector<Node> nodes;  // in an order where each node's inputs come before it
  std::vector<TensorInfo> tensors;  // every tensor, once per uid
  size_t workspace = 0;
};

struct Descriptor {
  struct Attr {
    cudnnBackendAttributeType_t type{};
    int64_t count = 0;
    std::vector<uint8_t> bytes;
  };
  cudnnBackendDescriptorType_t type{};
  bool finalized = false;
  std::map<int, Attr> attrs;
  // Set at finalization, by type.
  TensorInfo tensor;
  int mode = 0;                        // POINTWISE / REDUCTION / HEUR mode
  cudnnDataType_t comp = CUDNN_DATA_FLOAT;  // MATMUL / POINTWISE / REDUCTION compute type
  Node node;                           // OPERATION_*
  std::shared_ptr<const Graph> graph;  // OPERATIONGRAPH, ENGINECFG, EXECUTION_PLAN
  std::vector<int64_t> uids;           // VARIANT_PACK
  std::vector<void*> pointers;
  void* workspace = nullptr;
};

const char* TypeName(cudnnBackendDescriptorType_t t) {
  switch (t) {
    case CUDNN_BACKEND_TENSOR_DESCRIPTOR: return "CUDNN_BACKEND_TENSOR_DESCRIPTOR";
    case CUDNN_BACKEND_MATMUL_DESCRIPTOR: return "CUDNN_BACKEND_MATMUL_DESCRIPTOR";
    case CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR: return "CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR";
    case CUDNN_BACKEND_POINTWISE_DESCRIPTOR: return "CUDNN_BACKEND_POINTWISE_DESCRIPTOR";
    case CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR: return "CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR";
    case CUDNN_BACKEND_REDUCTION_DESCRIPTOR: return "CUDNN_BACKEND_REDUCTION_DESCRIPTOR";
    case CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR: return "CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR";
    case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR: return "CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR";
    case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR: return "CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR";
    case CUDNN_BACKEND_ENGINECFG_DESCRIPTOR: return "CUDNN_BACKEND_ENGINECFG_DESCRIPTOR";
    case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR: return "CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR";
    case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR: return "CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR";
    default: return nullptr;
  }
}

// Bytes of one element of an attribute of type `t`; 0 for a type this emulation does not take.
size_t AttrElemSize(cudnnBackendAttributeType_t t) {
  switch (t) {
    case CUDNN_TYPE_HANDLE:
    case CUDNN_TYPE_VOID_PTR:
    case CUDNN_TYPE_BACKEND_DESCRIPTOR: return sizeof(void*);
    case CUDNN_TYPE_DATA_TYPE: return sizeof(cudnnDataType_t);
    case CUDNN_TYPE_POINTWISE_MODE: return sizeof(cudnnPointwiseMode_t);
    case CUDNN_TYPE_REDUCTION_OPERATOR_TYPE: return sizeof(cudnnReduceTensorOp_t);
    case CUDNN_TYPE_HEUR_MODE: return sizeof(cudnnBackendHeurMode_t);
    case CUDNN_TYPE_BOOLEAN: return sizeof(bool);
    case CUDNN_TYPE_INT64:
    case CUDNN_TYPE_DOUBLE: return 8;
    case CUDNN_TYPE_FLOAT: return sizeof(float);
    default: return 0;
  }
}

Descriptor* Live(cudnnBackendDescriptor_t d) {
  return IsLive(d, Kind::kBackend) ? static_cast<Descriptor*>(d) : nullptr;
}

std::string AttrStr(int name) { return "attribute " + std::to_string(name); }

// The attribute's elements as T, when it was set with type `type`; else a failure naming it.
template <typename T>
cudnnStatus_t Get(std::string_view call, const Descriptor& d, int name, const char* what,
                  cudnnBackendAttributeType_t type, bool required, std::vector<T>* out) {
  out->clear();
  auto it = d.attrs.find(name);
  if (it == d.attrs.end()) {
    if (!required) return CUDNN_STATUS_SUCCESS;
    return Fail(call, CUDNN_STATUS_BAD_PARAM, std::string(TypeName(d.type)) + ": " + what + " was never set");
  }
  if (it->second.type != type || AttrElemSize(type) != sizeof(T)) {
    return Fail(call, CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE,
                std::string(TypeName(d.type)) + ": " + what + " was set with attribute type " +
                    std::to_string(static_cast<int>(it->second.type)) + ", not " +
                    std::to_string(static_cast<int>(type)));
  }
  out->resize(static_cast<size_t>(it->second.count));
  if (!out->empty()) std::memcpy(out->data(), it->second.bytes.data(), it->second.bytes.size());
  return CUDNN_STATUS_SUCCESS;
}

// One element of a required attribute.
template <typename T>
cudnnStatus_t GetOne(std::string_view call, const Descriptor& d, int name, const char* what,
                     cudnnBackendAttributeType_t type, T* out) {
  std::vector<T> v;
  KILN_DNN_TRY(Get(call, d, name, what, type, true, &v));
  if (v.size() != 1) {
    return Fail(call, CUDNN_STATUS_BAD_PARAM, std::string(TypeName(d.type)) + ": " + what + " has " +
                                                  std::to_string(v.size()) + " elements, not 1");
  }
  *out = v[0];
  return CUDNN_STATUS_SUCCESS;
}

// The finalized descriptor of type `type` that attribute `name` names.
cudnnStatus_t GetDesc(std::string_view call, const Descriptor& d, int name, const char* what,
                      cudnnBackendDescriptorType_t type, const Descriptor** out) {
  void* p = nullptr;
  KILN_DNN_TRY(GetOne(call, d, name, what, CUDNN_TYPE_BACKEND_DESCRIPTOR, &p));
  const Descriptor* o = Live(p);
  if (o == nullptr || o->type != type) {
    return Fail(call, CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE,
                std::string(TypeName(d.type)) + ": " + what + " is not a live " + TypeName(type));
  }
  if (!o->finalized) {
    return Fail(call, CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED,
                std::string(TypeName(d.type)) + ": " + what + " (" + TypeName(type) + ") is not finalized");
  }
  *out = o;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t GetTensor(std::string_view call, const Descriptor& d, int name, const char* what, TensorInfo* out) {
  const Descriptor* t = nullptr;
  KILN_DNN_TRY(GetDesc(call, d, name, what, CUDNN_BACKEND_TENSOR_DESCRIPTOR, &t));
  *out = t->tensor;
  return CUDNN_STATUS_SUCCESS;
}

std::string Describe(const TensorInfo& t) {
  return "tensor " + std::to_string(t.uid) + " (" + t.view.Describe() + (t.is_virtual ? ", virtual" : "") +
         (t.by_value ? ", by value" : "") + ")";
}

// ---- Finalization, per descriptor type -----------------------------------------------------------

cudnnStatus_t FinalizeTensor(std::string_view call, Descriptor& d) {
  std::vector<int64_t> dims, strides;
  KILN_DNN_TRY(GetOne(call, d, CUDNN_ATTR_TENSOR_DATA_TYPE, "CUDNN_ATTR_TENSOR_DATA_TYPE", CUDNN_TYPE_DATA_TYPE,
                      &d.tensor.view.dtype));
  KILN_DNN_TRY(Get(call, d, CUDNN_ATTR_TENSOR_DIMENSIONS, "CUDNN_ATTR_TENSOR_DIMENSIONS", CUDNN_TYPE_INT64, true, &dims));
  KILN_DNN_TRY(Get(call, d, CUDNN_ATTR_TENSOR_STRIDES, "CUDNN_ATTR_TENSOR_STRIDES", CUDNN_TYPE_INT64, true, &strides));
  KILN_DNN_TRY(GetOne(call, d, CUDNN_ATTR_TENSOR_UNIQUE_ID, "CUDNN_ATTR_TENSOR_UNIQUE_ID", CUDNN_TYPE_INT64,
                      &d.tensor.uid));
  int64_t alignment = 0;
  KILN_DNN_TRY(GetOne(call, d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, "CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT",
                      CUDNN_TYPE_INT64, &alignment));
  auto boolean = [&](int name, const char* what, bool* out) -> cudnnStatus_t {
    auto it = d.attrs.find(name);
    if (it == d.attrs.end()) return CUDNN_STATUS_SUCCESS;
    if (it->second.type != CUDNN_TYPE_BOOLEAN || it->second.count != 1)
      return Fail(call, CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE, std::string(what) + " must be one CUDNN_TYPE_BOOLEAN");
    *out = it->second.bytes[0] != 0;
    return CUDNN_STATUS_SUCCESS;
  };
  KILN_DNN_TRY(boolean(CUDNN_ATTR_TENSOR_IS_VIRTUAL, "CUDNN_ATTR_TENSOR_IS_VIRTUAL", &d.tensor.is_virtual));
  KILN_DNN_TRY(boolean(CUDNN_ATTR_TENSOR_IS_BY_VALUE, "CUDNN_ATTR_TENSOR_IS_BY_VALUE", &d.tensor.by_value));
  if (dims.empty() || dims.size() > CUDNN_DIM_MAX || strides.size() != dims.size()) {
    return Fail(call, CUDNN_STATUS_BAD_PARAM,
                "tensor " + std::to_string(d.tensor.uid) + ": " + std::to_string(dims.size()) + " dimensions and " +
                    std::to_string(strides.size()) + " strides (1 to " + std::to_string(CUDNN_DIM_MAX) +
                    ", one stride per dimension)");
  }
  View& v = d.tensor.view;
  v.nb = static_cast<int>(dims.size());
  for (int i = 0; i < v.nb; ++i) {
    if (dims[i] < 1 || strides[i] < 1) {
      return Fail(call, CUDNN_STATUS_BAD_PARAM, "tensor " + std::to_string(d.tensor.uid) + ": dimensions " +
                                                    DimsStr(dims.data(), v.nb) + " and strides " +
                                                    DimsStr(strides.data(), v.nb) + " must be positive");
    }
    v.dims[i] = dims[i];
    v.strides[i] = strides[i];
  }
  if (ElemSize(v.dtype) == 0) {
    return Fail(call, CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE,
                "tensor " + std::to_string(d.tensor.uid) + ": " + DTypeName(v.dtype) + " is not emulated");
  }
  if (alignment < 1 || alignment % static_cast<int64_t>(ElemSize(v.dtype)) != 0) {
    return Fail(call, CUDNN_STATUS_BAD_PARAM, "tensor " + std::to_string(d.tensor.uid) + ": byte alignment " +
                                                  std::to_string(alignment) + " is not a multiple of the element size");
  }
  if (d.tensor.is_virtual && d.tensor.by_value)
    return Fail(call, CUDNN_STATUS_BAD_PARAM, "tensor " + std::to_string(d.tensor.uid) + " is virtual and by value");
  return CUDNN_STATUS_SUCCESS;
}

bool SameDims(const View& a, const View& b) {
  return a.nb == b.nb && std::equal(a.dims, a.dims + a.nb, b.dims);
}
// Each dim of `in` equals `out`'s or is 1.
bool Broadcasts(const View& in, const View& out) {
  if (in.nb != out.nb) return false;
  for (int i = 0; i < in.nb; ++i)
    if (in.dims[i] != out.dims[i] && in.dims[i] != 1) return false;
  return true;
}

cudnnStatus_t FinalizeOperation(std::string_view call, Descriptor& d) {
  Node& n = d.node;
  if (d.type == CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR) {
    n.kind = OpKind::kMatmul;
    n.binary = true;
    KILN_DNN_TRY(GetTensor(call, d, CUDNN_ATTR_OPERATION_MATMUL_ADESC, "CUDNN_ATTR_OPERATION_MATMUL_ADESC", &n.x));
    KILN_DNN_TRY(GetTensor(call, d, CUDNN_ATTR_OPERATION_MATMUL_BDESC, "CUDNN_ATTR_OPERATION_MATMUL_BDESC", &n.b));
    KILN_DNN_TRY(GetTensor(call, d, CUDNN_ATTR_OPERATION_MATMUL_CDESC, "CUDNN_ATTR_OPERATION_MATMUL_CDESC", &n.y));
    const Descriptor* m = nullptr;
    KILN_DNN_TRY(GetDesc(call, d, CUDNN_ATTR_OPERATION_MATMUL_DESC, "CUDNN_ATTR_OPERATION_MATMUL_DESC",
                         CUDNN_BACKEND_MATMUL_DESCRIPTOR, &m));
    if (m->comp != CUDNN_DATA_FLOAT) {
      return Fail(call, CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE,
                  "matmul compute type " + DTypeName(m->comp) + " (emulated: CUDNN_DATA_FLOAT only)");
    }
    const View &a = n.x.view, &b = n.b.view, &c = n.y.view;
    const int r = a.nb;
    bool ok = r >= 2 && b.nb == r && c.nb == r && a.dims[r - 2] == c.dims[r - 2] && b.dims[r - 1] == c.dims[r - 1] &&
              a.dims[r - 1] == b.dims[r - 2];
    for (int i = 0; ok && i < r - 2; ++i)
      ok = (a.dims[i] == c.dims[i] || a.dims[i] == 1) && (b.dims[i] == c.dims[i] || b.dims[i] == 1);
    if (!ok) {
      return Fail(call, CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH,
                  "matmul " + Describe(n.x) + " x " + Describe(n.b) + " -> " + Describe(n.y) +
                      ": want A [.., M, K], B [.., K, N], C [.., M, N]");
    }
    return CUDNN_STATUS_SUCCESS;
  }
  if (d.type == CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR) {
    n.kind = OpKind::kPointwise;
    const Descriptor* pw = nullptr;
    KILN_DNN_TRY(GetDesc(call, d, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR,
                         "CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR", CUDNN_BACKEND_POINTWISE_DESCRIPTOR, &pw));
    n.mode = pw->mode;
    n.binary = pw->mode != CUDNN_POINTWISE_EXP;
    KILN_DNN_TRY(GetTensor(call, d, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, "CUDNN_ATTR_OPERATION_POINTWISE_XDESC", &n.x));
    KILN_DNN_TRY(GetTensor(call, d, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, "CUDNN_ATTR_OPERATION_POINTWISE_YDESC", &n.y));
    n.b.uid = -1;
    if (n.binary) {
      KILN_DNN_TRY(GetTensor(call, d, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, "CUDNN_ATTR_OPERATION_POINTWISE_BDESC",
                             &n.b));
    }
    if (!SameDims(n.x.view, n.y.view) || (n.binary && !Broadcasts(n.b.view, n.y.view))) {
      return Fail(call, CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH,
                  "pointwise " + Describe(n.x) + (n.binary ? " and " + Describe(n.b) : "") + " -> " + Describe(n.y) +
                      ": Y must have X's dims, and each of B's dims be Y's or 1");
    }
    return CUDNN_STATUS_SUCCESS;
  }
  // CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR
  n.kind = OpKind::kReduction;
  const Descriptor* red = nullptr;
  KILN_DNN_TRY(GetDesc(call, d, CUDNN_ATTR_OPERATION_REDUCTION_DESC, "CUDNN_ATTR_OPERATION_REDUCTION_DESC",
                       CUDNN_BACKEND_REDUCTION_DESCRIPTOR, &red));
  n.mode = red->mode;
  n.b.uid = -1;
  KILN_DNN_TRY(GetTensor(call, d, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, "CUDNN_ATTR_OPERATION_REDUCTION_XDESC", &n.x));
  KILN_DNN_TRY(GetTensor(call, d, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, "CUDNN_ATTR_OPERATION_REDUCTION_YDESC", &n.y));
  if (!Broadcasts(n.y.view, n.x.view)) {
    return Fail(call, CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH,
                "reduction " + Describe(n.x) + " -> " + Describe(n.y) + ": each of Y's dims must be X's or 1");
  }
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t FinalizeGraph(std::string_view call, Descriptor& d) {
  std::vector<void*> ops;
  KILN_DNN_TRY(Get(call, d, CUDNN_ATTR_OPERATIONGRAPH_OPS, "CUDNN_ATTR_OPERATIONGRAPH_OPS",
                   CUDNN_TYPE_BACKEND_DESCRIPTOR, true, &ops));
  void* handle = nullptr;
  KILN_DNN_TRY(GetOne(call, d, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, "CUDNN_ATTR_OPERATIONGRAPH_HANDLE", CUDNN_TYPE_HANDLE,
                      &handle));
  KILN_DNN_TRY(NeedHandle(call, static_cast<const cudnnContext*>(handle)));
  if (ops.empty()) return Fail(call, CUDNN_STATUS_BAD_PARAM, "the operation graph has no operations");
  std::vector<Node> pending;
  for (size_t i = 0; i < ops.size(); ++i) {
    const Descriptor* o = Live(ops[i]);
    if (o == nullptr || (o->type != CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR &&
                         o->type != CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR &&
                         o->type != CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR)) {
      return Fail(call, CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE,
                  "operation " + std::to_string(i) + " is not a live matmul, pointwise or reduction operation");
    }
    if (!o->finalized)
      return Fail(call, CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED, "operation " + std::to_string(i) + " is not finalized");
    pending.push_back(o->node);
  }
  auto graph = std::make_shared<Graph>();
  // Every uid names one tensor; a tensor is produced at most once; a virtual tensor is produced
  // by a node and read by another.
  std::unordered_map<int64_t, TensorInfo> by_uid;
  std::unordered_map<int64_t, int> producers, readers;
  for (const Node& n : pending) {
    for (const TensorInfo* t : {&n.x, &n.b, &n.y}) {
      if (t->uid == -1) continue;
      auto [it, added] = by_uid.emplace(t->uid, *t);
      if (!added && (it->second.is_virtual != t->is_virtual || it->second.by_value != t->by_value ||
                     !SameDims(it->second.view, t->view) || it->second.view.dtype != t->view.dtype ||
                     !std::equal(t->view.strides, t->view.strides + t->view.nb, it->second.view.strides))) {
        return Fail(call, CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES,
                    "two different tensors have unique id " + std::to_string(t->uid) + ": " + Describe(it->second) +
                        " and " + Describe(*t));
      }
      if (!added) continue;
      graph->tensors.push_back(*t);
    }
    ++producers[n.y.uid];
    ++readers[n.x.uid];
    if (n.b.uid != -1) ++readers[n.b.uid];
  }
  for (const TensorInfo& t : graph->tensors) {
    if (producers[t.uid] > 1)
      return Fail(call, CUDNN_STATUS_BAD_PARAM, Describe(t) + " is the output of " + std::to_string(producers[t.uid]) + " operations");
    if (t.is_virtual && (producers[t.uid] == 0 || readers[t.uid] == 0)) {
      return Fail(call, CUDNN_STATUS_BAD_PARAM,
                  "virtual " + Describe(t) + (producers[t.uid] == 0 ? " is no operation's output" : " is never read"));
    }
    if (t.by_value && producers[t.uid] != 0)
      return Fail(call, CUDNN_STATUS_BAD_PARAM, "by-value " + Describe(t) + " is an operation's output");
  }
  // Order: a node runs once every tensor it reads is a graph input or already computed.
  std::unordered_map<int64_t, bool> ready;
  for (const TensorInfo& t : graph->tensors) ready[t.uid] = producers[t.uid] == 0;
  while (!pending.empty()) {
    auto it = std::find_if(pending.begin(), pending.end(),
                           [&](const Node& n) { return ready[n.x.uid] && (n.b.uid == -1 || ready[n.b.uid]); });
    if (it == pending.end()) return Fail(call, CUDNN_STATUS_BAD_PARAM, "the operation graph has a cycle");
    ready[it->y.uid] = true;
    if (it->kind == OpKind::kReduction) graph->workspace += static_cast<size_t>(it->y.view.Count()) * 8;
    graph->nodes.push_back(*it);
    pending.erase(it);
  }
  d.graph = std::move(graph);
  return CUDNN_STATUS_SUCCESS;
}

// Why the emulated engine does not take `g`, or "" when it does (see the header comment).
std::string EngineRefuses(const Graph& g) {
  std::vector<const Node*> matmuls;
  for (const Node& n : g.nodes) {
    if (n.kind == OpKind::kMatmul) matmuls.push_back(&n);
    if (n.kind == OpKind::kPointwise &&
        (n.mode != CUDNN_POINTWISE_ADD && n.mode != CUDNN_POINTWISE_SUB && n.mode != CUDNN_POINTWISE_MUL &&
         n.mode != CUDNN_POINTWISE_DIV && n.mode != CUDNN_POINTWISE_MAX && n.mode != CUDNN_POINTWISE_MIN &&
         n.mode != CUDNN_POINTWISE_EXP))
      return "pointwise mode " + std::to_string(n.mode) + " is not emulated";
    if (n.kind == OpKind::kReduction && n.mode != CUDNN_REDUCE_TENSOR_ADD && n.mode != CUDNN_REDUCE_TENSOR_MAX)
      return "reduction operator " + std::to_string(n.mode) + " is not emulated";
  }
  for (const TensorInfo& t : g.tensors) {
    if (t.is_virtual && t.view.dtype != CUDNN_DATA_FLOAT) return "virtual " + Describe(t) + " is not CUDNN_DATA_FLOAT";
    if (!t.is_virtual && !Computable(t.view.dtype)) return Describe(t) + ": its data type is not emulated";
  }
  if (matmuls.size() != 2) return "";
  // The fused attention pattern: S = Q x K^T, ..., O = P x V.
  const Node &bmm1 = *matmuls[0], &bmm2 = *matmuls[1];
  for (const TensorInfo* t : {&bmm1.x, &bmm1.b, &bmm2.b}) {
    if (t->view.dtype != CUDNN_DATA_HALF && t->view.dtype != CUDNN_DATA_BFLOAT16)
      return "fused attention: " + Describe(*t) + " must be CUDNN_DATA_HALF or CUDNN_DATA_BFLOAT16";
  }
  const int64_t d_qk = bmm1.x.view.dims[bmm1.x.view.nb - 1], d_v = bmm2.b.view.dims[bmm2.b.view.nb - 1];
  for (int64_t dim : {d_qk, d_v}) {
    if (dim % 8 != 0 || dim > 128) {
      return "fused attention: head dims " + std::to_string(d_qk) + " (Q, K) and " + std::to_string(d_v) +
             " (V) must be multiples of 8 and at most 128";
    }
  }
  return "";
}

cudnnStatus_t Finalize(std::string_view call, Descriptor& d) {
  switch (d.type) {
    case CUDNN_BACKEND_TENSOR_DESCRIPTOR: return FinalizeTensor(call, d);
    case CUDNN_BACKEND_MATMUL_DESCRIPTOR:
      return GetOne(call, d, CUDNN_ATTR_MATMUL_COMP_TYPE, "CUDNN_ATTR_MATMUL_COMP_TYPE", CUDNN_TYPE_DATA_TYPE, &d.comp);
    case CUDNN_BACKEND_POINTWISE_DESCRIPTOR: {
      cudnnPointwiseMode_t mode{};
      KILN_DNN_TRY(GetOne(call, d, CUDNN_ATTR_POINTWISE_MODE, "CUDNN_ATTR_POINTWISE_MODE", CUDNN_TYPE_POINTWISE_MODE, &mode));
      KILN_DNN_TRY(GetOne(call, d, CUDNN_ATTR_POINTWISE_MATH_PREC, "CUDNN_ATTR_POINTWISE_MATH_PREC", CUDNN_TYPE_DATA_TYPE,
                          &d.comp));
      d.mode = mode;
      if (d.comp != CUDNN_DATA_FLOAT)
        return Fail(call, CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE, "pointwise math precision " + DTypeName(d.comp));
      return CUDNN_STATUS_SUCCESS;
    }
    case CUDNN_BACKEND_REDUCTION_DESCRIPTOR: {
      cudnnReduceTensorOp_t op{};
      KILN_DNN_TRY(GetOne(call, d, CUDNN_ATTR_REDUCTION_OPERATOR, "CUDNN_ATTR_REDUCTION_OPERATOR",
                          CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, &op));
      KILN_DNN_TRY(GetOne(call, d, CUDNN_ATTR_REDUCTION_COMP_TYPE, "CUDNN_ATTR_REDUCTION_COMP_TYPE",
                          CUDNN_TYPE_DATA_TYPE, &d.comp));
      d.mode = op;
      if (d.comp != CUDNN_DATA_FLOAT)
        return Fail(call, CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE, "reduction compute type " + DTypeName(d.comp));
      return CUDNN_STATUS_SUCCESS;
    }
    case CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR: return FinalizeOperation(call, d);
    case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR: return FinalizeGraph(call, d);
    case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR: {
      const Descriptor* g = nullptr;
      KILN_DNN_TRY(GetDesc(call, d, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, "CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH",
                           CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &g));
      cudnnBackendHeurMode_t mode{};
      KILN_DNN_TRY(GetOne(call, d, CUDNN_ATTR_ENGINEHEUR_MODE, "CUDNN_ATTR_ENGINEHEUR_MODE", CUDNN_TYPE_HEUR_MODE, &mode));
      d.mode = mode;
      d.graph = g->graph;
      return CUDNN_STATUS_SUCCESS;
    }
    case CUDNN_BACKEND_ENGINECFG_DESCRIPTOR:
      // Made by the heuristics (ENGINEHEUR_RESULTS); an engine config built by hand would name an
      // engine descriptor, which this emulation does not create.
      return Fail(call, CUDNN_STATUS_NOT_SUPPORTED,
                  "emulated: engine configs come from CUDNN_ATTR_ENGINEHEUR_RESULTS only");
    case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR: {
      const Descriptor* cfg = nullptr;
      KILN_DNN_TRY(GetDesc(call, d, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, "CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG",
                           CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfg));
      void* handle = nullptr;
      KILN_DNN_TRY(GetOne(call, d, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, "CUDNN_ATTR_EXECUTION_PLAN_HANDLE",
                          CUDNN_TYPE_HANDLE, &handle));
      KILN_DNN_TRY(NeedHandle(call, static_cast<const cudnnContext*>(handle)));
      d.graph = cfg->graph;
      return CUDNN_STATUS_SUCCESS;
    }
    case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR: {
      KILN_DNN_TRY(Get(call, d, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, "CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS",
                       CUDNN_TYPE_INT64, true, &d.uids));
      KILN_DNN_TRY(Get(call, d, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, "CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS",
                       CUDNN_TYPE_VOID_PTR, true, &d.pointers));
      std::vector<void*> ws;
      KILN_DNN_TRY(Get(call, d, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, "CUDNN_ATTR_VARIANT_PACK_WORKSPACE",
                       CUDNN_TYPE_VOID_PTR, false, &ws));
      d.workspace = ws.empty() ? nullptr : ws[0];
      if (d.uids.size() != d.pointers.size()) {
        return Fail(call, CUDNN_STATUS_BAD_PARAM, std::to_string(d.uids.size()) + " unique ids but " +
                                                      std::to_string(d.pointers.size()) + " data pointers");
      }
      return CUDNN_STATUS_SUCCESS;
    }
    default: return Fail(call, CUDNN_STATUS_NOT_SUPPORTED, "descriptor type not emulated");
  }
}

// ---- Execution -----------------------------------------------------------------------------------

// The linear row-major index into a tensor of dims `in` (each `out`'s or 1) of the element of
// `out`'s multi-index `idx`.
int64_t BroadcastIndex(const View& in, const int64_t* idx) {
  int64_t i = 0;
  for (int d = 0; d < in.nb; ++d) i = i * in.dims[d] + (in.dims[d] == 1 ? 0 : idx[d]);
  return i;
}

// Calls f(linear, idx) for each element of dims `v` in row-major order.
template <typename F>
void ForEachIndex(const View& v, F f) {
  int64_t idx[CUDNN_DIM_MAX] = {};
  const int64_t n = v.Count();
  for (int64_t i = 0; i < n; ++i) {
    f(i, idx);
    for (int d = v.nb - 1; d >= 0 && ++idx[d] == v.dims[d]; --d) idx[d] = 0;
  }
}

float Pointwise(int mode, float x, float b) {
  switch (mode) {
    case CUDNN_POINTWISE_ADD: return x + b;
    case CUDNN_POINTWISE_SUB: return x - b;
    case CUDNN_POINTWISE_MUL: return x * b;
    case CUDNN_POINTWISE_DIV: return x / b;
    case CUDNN_POINTWISE_MAX: return std::isnan(x) || x > b ? x : b;  // NaN propagates
    case CUDNN_POINTWISE_MIN: return std::isnan(x) || x < b ? x : b;
    default: return std::exp(x);  // CUDNN_POINTWISE_EXP
  }
}

// The value of each tensor in logical row-major order, as float: virtual ones computed, device
// ones gathered from (and written to) `device[uid]`, by-value ones from `scalar[uid]`.
void Run(const Graph& g, const std::unordered_map<int64_t, void*>& device,
         const std::unordered_map<int64_t, float>& scalar) {
  std::unordered_map<int64_t, std::vector<float>> values;
  for (const TensorInfo& t : g.tensors) {
    if (t.by_value) values[t.uid].assign(static_cast<size_t>(t.view.Count()), scalar.at(t.uid));
    else if (!t.is_virtual && device.count(t.uid)) values[t.uid] = Gather(t.view, device.at(t.uid));
  }
  for (const Node& n : g.nodes) {
    const std::vector<float>& x = values.at(n.x.uid);
    std::vector<float> y(static_cast<size_t>(n.y.view.Count()));
    if (n.kind == OpKind::kMatmul) {
      const std::vector<float>& b = values.at(n.b.uid);
      const int r = n.y.view.nb;
      const int64_t m = n.y.view.dims[r - 2], nn = n.y.view.dims[r - 1], k = n.x.view.dims[r - 1];
      View batch = n.y.view, abatch = n.x.view, bbatch = n.b.view;  // the leading dims, as [.., 1, 1]
      for (View* v : {&batch, &abatch, &bbatch}) v->dims[r - 2] = v->dims[r - 1] = 1;
      ForEachIndex(batch, [&](int64_t bi, const int64_t* idx) {
        const float* pa = x.data() + BroadcastIndex(abatch, idx) * m * k;
        const float* pb = b.data() + BroadcastIndex(bbatch, idx) * k * nn;
        float* pc = y.data() + bi * m * nn;
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < nn; ++j) {
            double acc = 0;
            for (int64_t l = 0; l < k; ++l) acc += static_cast<double>(pa[i * k + l]) * pb[l * nn + j];
            pc[i * nn + j] = static_cast<float>(acc);
          }
      });
    } else if (n.kind == OpKind::kPointwise) {
      const std::vector<float>* b = n.binary ? &values.at(n.b.uid) : nullptr;
      ForEachIndex(n.y.view, [&](int64_t i, const int64_t* idx) {
        y[static_cast<size_t>(i)] =
            Pointwise(n.mode, x[static_cast<size_t>(i)], b ? (*b)[static_cast<size_t>(BroadcastIndex(n.b.view, idx))] : 0.0f);
      });
    } else {
      const bool max = n.mode == CUDNN_REDUCE_TENSOR_MAX;
      std::vector<double> acc(y.size(), max ? -std::numeric_limits<double>::infinity() : 0.0);
      ForEachIndex(n.x.view, [&](int64_t i, const int64_t* idx) {
        double& a = acc[static_cast<size_t>(BroadcastIndex(n.y.view, idx))];
        const double v = x[static_cast<size_t>(i)];
        if (!max) a += v;
        else if (std::isnan(v) || v > a) a = v;
      });
      for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>(acc[i]);
    }
    if (!n.y.is_virtual) Blend(n.y.view, device.at(n.y.uid), y, 1.0f, 0.0f);  // rounded once to Y's type
    values[n.y.uid] = std::move(y);
  }
}

}  // namespace
}  // namespace kiln::emulated_cuda::dnn

using namespace kiln::emulated_cuda::dnn;  // NOLINT: the C entry points below are the API

// cuDNN API reference, cudnn_graph library: cudnnBackendCreateDescriptor(). The descriptor
// types of the header comment; any other is CUDNN_STATUS_NOT_SUPPORTED.
cudnnStatus_t cudnnBackendCreateDescriptor(cudnnBackendDescriptorType_t descriptorType,
                                           cudnnBackendDescriptor_t* descriptor) {
  constexpr std::string_view kCall = "cudnnBackendCreateDescriptor";
  if (descriptor == nullptr) return Fail(kCall, CUDNN_STATUS_BAD_PARAM, "descriptor (the output pointer) is NULL");
  if (TypeName(descriptorType) == nullptr) {
    return Fail(kCall, CUDNN_STATUS_NOT_SUPPORTED,
                "descriptor type " + std::to_string(static_cast<int>(descriptorType)) + " is not emulated");
  }
  auto* d = new Descriptor();
  d->type = descriptorType;
  Register(d, Kind::kBackend);
  *descriptor = d;
  return Ok();
}

// cuDNN API reference: cudnnBackendDestroyDescriptor().
cudnnStatus_t cudnnBackendDestroyDescriptor(cudnnBackendDescriptor_t descriptor) {
  constexpr std::string_view kCall = "cudnnBackendDestroyDescriptor";
  Descriptor* d = Live(descriptor);
  if (d == nullptr) return Fail(kCall, CUDNN_STATUS_BAD_PARAM, "descriptor is NULL, destroyed, or not a backend descriptor");
  Unregister(d);
  delete d;
  return Ok();
}

// cuDNN API reference: cudnnBackendSetAttribute(). CUDNN_STATUS_NOT_INITIALIZED on a finalized
// descriptor; BAD_PARAM for a NULL array or a negative count.
cudnnStatus_t cudnnBackendSetAttribute(cudnnBackendDescriptor_t descriptor, cudnnBackendAttributeName_t attributeName,
                                       cudnnBackendAttributeType_t attributeType, int64_t elementCount,
                                       const void* arrayOfElements) {
  constexpr std::string_view kCall = "cudnnBackendSetAttribute";
  Descriptor* d = Live(descriptor);
  if (d == nullptr) return Fail(kCall, CUDNN_STATUS_BAD_PARAM, "descriptor is NULL, destroyed, or not a backend descriptor");
  if (d->finalized) {
    return Fail(kCall, CUDNN_STATUS_NOT_INITIALIZED,
                std::string(TypeName(d->type)) + " is finalized; " + AttrStr(attributeName) + " cannot be set");
  }
  const size_t size = AttrElemSize(attributeType);
  if (size == 0) {
    return Fail(kCall, CUDNN_STATUS_NOT_SUPPORTED,
                "attribute type " + std::to_string(static_cast<int>(attributeType)) + " is not emulated");
  }
  if (elementCount < 0 || (elementCount > 0 && arrayOfElements == nullptr)) {
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM, AttrStr(attributeName) + ": " + std::to_string(elementCount) +
                                                   " elements at " + (arrayOfElements ? "an address" : "NULL"));
  }
  Descriptor::Attr& a = d->attrs[attributeName];
  a.type = attributeType;
  a.count = elementCount;
  a.bytes.resize(size * static_cast<size_t>(elementCount));
  if (!a.bytes.empty()) std::memcpy(a.bytes.data(), arrayOfElements, a.bytes.size());
  return Ok();
}

// cuDNN API reference: cudnnBackendFinalize(). Checks the attributes of the descriptor type
// (BAD_PARAM and its sub-codes for missing or inconsistent ones, NOT_SUPPORTED and its sub-codes
// for what is not emulated).
cudnnStatus_t cudnnBackendFinalize(cudnnBackendDescriptor_t descriptor) {
  constexpr std::string_view kCall = "cudnnBackendFinalize";
  Descriptor* d = Live(descriptor);
  if (d == nullptr) return Fail(kCall, CUDNN_STATUS_BAD_PARAM, "descriptor is NULL, destroyed, or not a backend descriptor");
  if (d->finalized) return Fail(kCall, CUDNN_STATUS_BAD_PARAM, std::string(TypeName(d->type)) + " is already finalized");
  KILN_DNN_TRY(Finalize(kCall, *d));
  d->finalized = true;
  if (d->type == CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR) kiln::emulated_cuda::CountLibraryPlan();
  return Ok();
}

// cuDNN API reference: cudnnBackendGetAttribute(). On finalized descriptors: any attribute as it
// was set; CUDNN_ATTR_ENGINEHEUR_RESULTS (the engine configs, into descriptors of type
// CUDNN_BACKEND_ENGINECFG_DESCRIPTOR the caller created; a requestedElementCount of 0 asks for
// the count only); CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE and CUDNN_ATTR_ENGINECFG_WORKSPACE_SIZE.
cudnnStatus_t cudnnBackendGetAttribute(cudnnBackendDescriptor_t const descriptor,
                                       cudnnBackendAttributeName_t attributeName,
                                       cudnnBackendAttributeType_t attributeType, int64_t requestedElementCount,
                                       int64_t* elementCount, void* arrayOfElements) {
  constexpr std::string_view kCall = "cudnnBackendGetAttribute";
  const Descriptor* d = Live(descriptor);
  if (d == nullptr) return Fail(kCall, CUDNN_STATUS_BAD_PARAM, "descriptor is NULL, destroyed, or not a backend descriptor");
  if (!d->finalized)
    return Fail(kCall, CUDNN_STATUS_NOT_INITIALIZED, std::string(TypeName(d->type)) + " is not finalized");
  if (requestedElementCount < 0 || (requestedElementCount > 0 && arrayOfElements == nullptr))
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM, AttrStr(attributeName) + ": no room for the elements asked for");
  if (d->type == CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR && attributeName == CUDNN_ATTR_ENGINEHEUR_RESULTS) {
    if (attributeType != CUDNN_TYPE_BACKEND_DESCRIPTOR)
      return Fail(kCall, CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE, "CUDNN_ATTR_ENGINEHEUR_RESULTS are backend descriptors");
    const std::string refused = EngineRefuses(*d->graph);
    if (!refused.empty()) kiln::emulated_cuda::Diagnose(kCall, "the heuristics offer no engine config: " + refused);
    const int64_t available = refused.empty() ? 1 : 0;
    if (elementCount != nullptr) *elementCount = std::min(available, requestedElementCount > 0 ? requestedElementCount : available);
    auto* out = static_cast<cudnnBackendDescriptor_t*>(arrayOfElements);
    for (int64_t i = 0; i < std::min(available, requestedElementCount); ++i) {
      Descriptor* cfg = Live(out[i]);
      if (cfg == nullptr || cfg->type != CUDNN_BACKEND_ENGINECFG_DESCRIPTOR)
        return Fail(kCall, CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE,
                    "result " + std::to_string(i) + " is not a live CUDNN_BACKEND_ENGINECFG_DESCRIPTOR");
      cfg->graph = d->graph;
      cfg->finalized = true;
    }
    return Ok();
  }
  if ((d->type == CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR && attributeName == CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE) ||
      (d->type == CUDNN_BACKEND_ENGINECFG_DESCRIPTOR && attributeName == CUDNN_ATTR_ENGINECFG_WORKSPACE_SIZE)) {
    if (attributeType != CUDNN_TYPE_INT64)
      return Fail(kCall, CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE, "the workspace size is one CUDNN_TYPE_INT64");
    if (elementCount != nullptr) *elementCount = 1;
    if (requestedElementCount >= 1) *static_cast<int64_t*>(arrayOfElements) = static_cast<int64_t>(d->graph->workspace);
    return Ok();
  }
  auto it = d->attrs.find(attributeName);
  if (it == d->attrs.end())
    return Fail(kCall, CUDNN_STATUS_NOT_SUPPORTED, AttrStr(attributeName) + " of " + TypeName(d->type) + " is not emulated, or was never set");
  if (it->second.type != attributeType)
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE, AttrStr(attributeName) + " has another attribute type");
  if (elementCount != nullptr) *elementCount = it->second.count;
  const size_t n = std::min<size_t>(static_cast<size_t>(requestedElementCount), static_cast<size_t>(it->second.count));
  if (n > 0) std::memcpy(arrayOfElements, it->second.bytes.data(), n * AttrElemSize(attributeType));
  return Ok();
}

// cuDNN API reference: cudnnBackendExecute(). Every non-virtual tensor of the plan's graph needs
// its unique id in the variant pack (BAD_PARAM otherwise): a device pointer covering the tensor's
// extent, or for a by-value tensor a host pointer to its value (read now). The workspace must be
// device memory of the plan's workspace size. The graph runs on the handle's stream.
cudnnStatus_t cudnnBackendExecute(cudnnHandle_t handle, cudnnBackendDescriptor_t executionPlan,
                                  cudnnBackendDescriptor_t variantPack) {
  constexpr std::string_view kCall = "cudnnBackendExecute";
  KILN_DNN_TRY(NeedHandle(kCall, handle));
  const Descriptor* plan = Live(executionPlan);
  const Descriptor* pack = Live(variantPack);
  if (plan == nullptr || plan->type != CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR || !plan->finalized)
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM, "executionPlan is not a live, finalized execution plan");
  if (pack == nullptr || pack->type != CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR || !pack->finalized)
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM, "variantPack is not a live, finalized variant pack");
  std::shared_ptr<const Graph> graph = plan->graph;
  std::unordered_map<int64_t, void*> device;
  std::unordered_map<int64_t, float> scalar;
  for (const TensorInfo& t : graph->tensors) {
    if (t.is_virtual) continue;
    auto at = std::find(pack->uids.begin(), pack->uids.end(), t.uid);
    if (at == pack->uids.end())
      return Fail(kCall, CUDNN_STATUS_BAD_PARAM, "the variant pack has no pointer for " + Describe(t));
    const void* p = pack->pointers[static_cast<size_t>(at - pack->uids.begin())];
    if (t.by_value) {
      KILN_DNN_TRY(NeedHost(kCall, ("the value of " + Describe(t)).c_str(), p));
      scalar[t.uid] = Gather(t.view, p)[0];  // a host scalar of the tensor's type
      continue;
    }
    cudnnStatus_t status = CUDNN_STATUS_SUCCESS;
    void* host = DeviceTensor(kCall, ("the data of tensor " + std::to_string(t.uid)).c_str(), p, t.view, &status);
    if (host == nullptr) return status;
    device[t.uid] = host;
  }
  if (graph->workspace > 0) {
    cudnnStatus_t status = CUDNN_STATUS_SUCCESS;
    if (DeviceBytes(kCall, "the workspace", pack->workspace, graph->workspace, "the plan's workspace", &status) == nullptr)
      return status;
  }
  if (kiln::emulated_cuda::FaultDue("dnn-not-supported"))
    return Fail(kCall, CUDNN_STATUS_NOT_SUPPORTED, "injected fault 'dnn-not-supported'");
  return Launch(kCall, handle, [graph, device, scalar] { Run(*graph, device, scalar); });
}
