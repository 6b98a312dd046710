// LSTM, GRU and RNN on cuDNN 9's RNN API (rnn.h): PlanRnn (what cudnnRNNForward takes), the
// weight space filled once per plan and weights, and one cudnnRNNForward per call.
// NOTE: the library calls below have never run on a GPU (see rnn.h).
#include "runtime/cuda/rnn.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/cuda/device_memory.h"

namespace kiln::cuda {
namespace {

Status Refused(const std::string& msg) { return Unimplemented("cuDNN RNN: " + msg); }

const DeviceTensor* Optional(std::span<const DeviceTensor> ts, size_t i) {
  return i < ts.size() && ts[i].present() ? &ts[i] : nullptr;
}

constexpr size_t kMaxWorkspace = size_t{64} << 20;
constexpr size_t kAlign = 256;
size_t AlignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// Per cell: ONNX's gate of each cuDNN linear layer (rnn.h), and the default activations of one
// direction as the importer spells a non-default list (lowercased here).
struct Cell {
  std::string_view op;
  int gates;
  int onnx_gate[4];
  std::string_view activations;
};
constexpr Cell kCells[] = {{"LSTM", 4, {0, 2, 3, 1}, "sigmoid,tanh,tanh"},
                           {"GRU", 3, {1, 0, 2, 0}, "sigmoid,tanh"},
                           {"RNN", 1, {0, 0, 0, 0}, "tanh"}};

const Cell* FindCell(std::string_view op) {
  for (const Cell& c : kCells)
    if (c.op == op) return &c;
  return nullptr;
}

cudnnDataType_t DataType(DType t) { return t == DType::kFloat16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT; }

// Whether the lowercased `list` is `one` once per direction, comma-separated.
bool ActivationsAre(std::string_view list, std::string_view one, int dirs) {
  const size_t k = one.size();
  return list.size() == k * static_cast<size_t>(dirs) + static_cast<size_t>(dirs - 1) && list.substr(0, k) == one &&
         (dirs == 1 || (list[k] == ',' && list.substr(k + 1) == one));
}

bool NotSupported(cudnnStatus_t st) { return st / 1000 == CUDNN_STATUS_NOT_SUPPORTED / 1000; }

CUdeviceptr Address(const void* p) { return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p)); }
void* Pointer(CUdeviceptr p) { return reinterpret_cast<void*>(static_cast<uintptr_t>(p)); }

}  // namespace

Status PlanRnn(std::string_view op, const AttrMap& a, std::span<const DeviceTensor> inputs,
               std::span<const DeviceTensor> outputs, RnnPlan* plan) {
  const Cell* cell = FindCell(op);
  if (cell == nullptr) return Refused("the op is not LSTM, GRU or RNN");
  const bool lstm = cell->gates == 4;
  if (inputs.size() < 3 || !inputs[0].present() || !inputs[1].present() || !inputs[2].present())
    return InvalidArgument("LSTM/GRU/RNN: X, W and R are required");
  const DeviceTensor &x = inputs[0], &w = inputs[1], &r = inputs[2];
  RnnPlan p;
  p.batch_first = a.GetInt("layout", 0) != 0;
  const std::string_view direction = a.GetString("direction", "forward");
  p.dirs = direction == "bidirectional" ? 2 : 1;
  const int64_t G = cell->gates;
  const bool ranks = x.rank == 3 && w.rank == 3 && r.rank == 3;
  const int64_t seq = ranks ? x.dims[p.batch_first ? 1 : 0] : 0, batch = ranks ? x.dims[p.batch_first ? 0 : 1] : 0,
                input = ranks ? x.dims[2] : 0, hidden = ranks ? w.dims[1] / G : 0;
  // The CPU kernel's checks, in one: it names what disagrees when it runs the op.
  const int64_t want_w[] = {p.dirs, G * hidden, input}, want_r[] = {p.dirs, G * hidden, hidden},
                want_b[] = {p.dirs, 2 * G * hidden},
                want_state[] = {p.batch_first ? batch : p.dirs, p.batch_first ? p.dirs : batch, hidden},
                want_y[] = {p.batch_first ? batch : seq, p.batch_first ? seq : p.dirs, p.batch_first ? p.dirs : batch,
                            hidden};
  auto is = [](const DeviceTensor* t, std::span<const int64_t> dims) {
    return !t || (t->rank == static_cast<int32_t>(dims.size()) && std::equal(dims.begin(), dims.end(), t->dims));
  };
  bool agree = ranks && is(&w, want_w) && is(&r, want_r) && is(Optional(inputs, 3), want_b) &&
               a.GetInt("hidden_size", hidden) == hidden && is(Optional(outputs, 0), want_y);
  for (const DeviceTensor* t : {Optional(inputs, 5), Optional(inputs, 6), Optional(outputs, 1), Optional(outputs, 2)})
    agree = agree && is(t, want_state);
  for (std::span<const DeviceTensor> ts : {inputs, outputs})  // every operand but sequence_lens has X's dtype
    for (size_t i = 0; i < ts.size(); ++i)
      agree = agree && (!ts[i].present() || (ts.data() == inputs.data() && i == 4) || ts[i].dtype == x.dtype);
  if (!agree) return InvalidArgument("LSTM/GRU/RNN: operands that do not agree (the CPU kernel says which)");
  if (x.dtype != DType::kFloat32 && x.dtype != DType::kFloat16)
    return Refused("a dtype other than float32 and float16");
  for (size_t i = 1; i < 4; ++i)
    if (const DeviceTensor* t = Optional(inputs, i); t && !t->weight)
      return Refused("W, R or B is not a model weight (its weight space is filled once)");
  if (direction == "reverse") return Refused("direction reverse (cuDNN's one-direction RNN runs forward only)");
  if (a.Has("clip")) return Refused("clip");
  if (lstm && a.GetInt("input_forget", 0) != 0) return Refused("input_forget");
  if (lstm && Optional(inputs, 7)) return Refused("peepholes (P)");
  if (op == "GRU" && a.GetInt("linear_before_reset", 0) == 0)
    return Refused("linear_before_reset 0 (cuDNN's GRU applies the reset gate after R_h h, linear_before_reset 1)");
  if (a.Has("activation_alpha") || a.Has("activation_beta")) return Refused("activation_alpha/beta");
  p.cell = lstm ? CUDNN_LSTM : op == "GRU" ? CUDNN_GRU : CUDNN_RNN_TANH;
  if (std::string_view acts = a.GetString("activations", ""); !acts.empty()) {
    char lower[64] = {};
    const size_t n = std::min(acts.size(), sizeof(lower));
    for (size_t i = 0; i < n; ++i) lower[i] = static_cast<char>(std::tolower(static_cast<unsigned char>(acts[i])));
    const std::string_view list(lower, n);
    if (G == 1 && ActivationsAre(list, "relu", p.dirs)) p.cell = CUDNN_RNN_RELU;
    else if (!ActivationsAre(list, cell->activations, p.dirs))
      return Refused("activations other than the defaults (RNN: Tanh or Relu, one for every direction)");
  }
  const bool states = Optional(inputs, 5) || Optional(inputs, 6) || Optional(outputs, 1) || Optional(outputs, 2);
  if (p.batch_first && p.dirs == 2 && states)
    return Refused("layout 1 with two directions and a state ([batch, 2, hidden] is not cuDNN's [2, batch, hidden])");
  for (const int64_t d : {seq, batch, input, hidden})
    if (d < 1 || d > std::numeric_limits<int32_t>::max() / 8) return Refused("an empty dim or one beyond int32");
  if (const DeviceTensor* l = Optional(inputs, 4)) {
    if (l->dtype != DType::kInt32 || l->rank != 1 || l->dims[0] != batch)
      return InvalidArgument("LSTM/GRU/RNN: sequence_lens must be int32 [batch]");
    if (l->host == nullptr)
      return Refused("sequence_lens computed at run time (cuDNN takes the lengths on the host; a model weight's are read)");
    const int32_t* v = static_cast<const int32_t*>(l->host);
    for (int64_t b = 0; b < batch; ++b) {
      if (v[b] < 0 || v[b] > seq) return InvalidArgument("LSTM/GRU/RNN: a sequence length outside [0, seq]");
      if (v[b] == 0) return Refused("a sequence length of 0 (cuDNN's are at least 1)");
    }
    p.lens = true;
  }
  p.dtype = x.dtype;
  p.seq = static_cast<int32_t>(seq), p.batch = static_cast<int32_t>(batch);
  p.input = static_cast<int32_t>(input), p.hidden = static_cast<int32_t>(hidden);
  p.bias = Optional(inputs, 3) != nullptr;
  p.y = Optional(outputs, 0) != nullptr;
  *plan = p;
  return Status::Ok();
}

namespace {

// Runs cuDNN calls while the ones before succeeded; `what` names the last one run, for the error.
struct Steps {
  cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
  const char* what = "";
  bool ok() const { return st == CUDNN_STATUS_SUCCESS; }
  // kUnimplemented for cuDNN's NOT_SUPPORTED family, else CheckDnn's error naming the call.
  Status Done(const Dnn& dnn, const CallName& name) const {
    if (NotSupported(st)) return Refused(std::string(CheckDnn(dnn, st, what).message()));
    return CheckDnn(dnn, st, name.str() + ": " + what);
  }
};
#define KILN_RNN_STEP(steps, call, expr) \
  if ((steps).ok()) (steps).what = (call), (steps).st = (expr)

// The RNN descriptor and the weight space of one set of W, R and B, whatever the sequence length
// and batch (cuDNN's RNN descriptor and weight space depend on neither).
struct Weights {
  const Dnn* dnn = nullptr;
  RnnPlan plan;  // seq and batch unused
  CUdeviceptr w = 0, r = 0, b = 0;
  cudnnRNNDescriptor_t rnn = nullptr;
  cudnnTensorDescriptor_t m = nullptr, bias = nullptr;  // cudnnGetRNNWeightParams's shapes
  DeviceBuffer space;
  size_t bytes = 0;

  bool Holds(const RnnPlan& p, CUdeviceptr W, CUdeviceptr R, CUdeviceptr B) const {
    return plan.cell == p.cell && plan.dirs == p.dirs && plan.dtype == p.dtype && plan.input == p.input &&
           plan.hidden == p.hidden && w == W && r == R && b == B;
  }
  ~Weights() {
    dnn->DestroyRNNDescriptor(rnn);  // destructors can do nothing with a failure
    dnn->DestroyTensorDescriptor(m);
    dnn->DestroyTensorDescriptor(bias);
  }
};

// One plan's data descriptors, states, workspace layout and sequence lengths, over its weights.
struct Cached {
  const Dnn* dnn = nullptr;
  RnnPlan plan;
  Weights* weights = nullptr;
  cudnnRNNDataDescriptor_t x = nullptr, y = nullptr;
  // hx/hy, cx/cy; cuDNN's y [T, N, 2H] and ONNX's Y [T, 2, N, H] for the transpose.
  cudnnTensorDescriptor_t h = nullptr, y_from = nullptr, y_to = nullptr;
  DeviceBuffer lengths;  // devSeqLengths
  std::vector<int32_t> host_lengths;
  size_t cudnn_ws = 0, y_offset = 0, workspace = 0;

  ~Cached() {
    dnn->DestroyRNNDataDescriptor(x);
    dnn->DestroyRNNDataDescriptor(y);
    for (cudnnTensorDescriptor_t t : {h, y_from, y_to}) dnn->DestroyTensorDescriptor(t);
  }
};

}  // namespace

struct RnnLibrary::State {
  const Dnn* dnn = nullptr;
  const Driver* drv = nullptr;
  cudnnHandle_t handle = nullptr;
  std::vector<std::unique_ptr<Weights>> weights;
  std::vector<std::unique_ptr<Cached>> cache;

  ~State() {
    cache.clear();  // descriptors before the handle
    weights.clear();
    if (handle) dnn->Destroy(handle);
  }

  // The RNN descriptor of `p` and its weight space filled from W, R and B on call.stream (zero
  // biases without B), into *w.
  Status BuildWeights(std::string_view op, const RnnPlan& p, const OpCall& call, const CallName& name,
                      Weights* w) const {
    const Cell& cell = *FindCell(op);
    const size_t elem = p.dtype == DType::kFloat16 ? 2 : 4;
    w->dnn = dnn;
    Steps s;
    KILN_RNN_STEP(s, "cudnnCreateRNNDescriptor", dnn->CreateRNNDescriptor(&w->rnn));
    KILN_RNN_STEP(s, "cudnnCreateTensorDescriptor", dnn->CreateTensorDescriptor(&w->m));
    KILN_RNN_STEP(s, "cudnnCreateTensorDescriptor", dnn->CreateTensorDescriptor(&w->bias));
    KILN_RNN_STEP(s, "cudnnSetRNNDescriptor_v8",
                  dnn->SetRNNDescriptor_v8(w->rnn, CUDNN_RNN_ALGO_STANDARD, static_cast<cudnnRNNMode_t>(p.cell),
                                           CUDNN_RNN_DOUBLE_BIAS, p.dirs == 2 ? CUDNN_BIDIRECTIONAL : CUDNN_UNIDIRECTIONAL,
                                           CUDNN_LINEAR_INPUT, DataType(p.dtype), CUDNN_DATA_FLOAT,
                                           elem == 2 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH,
                                           p.input, p.hidden, p.hidden, 1, nullptr, CUDNN_RNN_PADDED_IO_ENABLED));
    KILN_RNN_STEP(s, "cudnnGetRNNWeightSpaceSize", dnn->GetRNNWeightSpaceSize(handle, w->rnn, &w->bytes));
    if (!s.ok()) return s.Done(*dnn, name);
    w->space.drv = drv;
    KILN_RETURN_IF_ERROR(w->space.Reserve(std::max<size_t>(w->bytes, 1), "cuDNN RNN weight space"));
    const CUstream stream = call.stream;
    const DeviceTensor* B = Optional(call.inputs, 3);
    const size_t G = static_cast<size_t>(cell.gates), H = static_cast<size_t>(p.hidden),
                 I = static_cast<size_t>(p.input);
    CUresult cr = drv->MemsetD8Async(w->space.ptr, 0, w->bytes, stream);
    for (size_t d = 0; d < static_cast<size_t>(p.dirs); ++d)
      for (size_t l = 0; l < 2 * G && s.ok() && cr == CUDA_SUCCESS; ++l) {
        const size_t g = static_cast<size_t>(cell.onnx_gate[l % G]), rec = l >= G, cols = rec ? H : I;
        void* m = nullptr;
        void* bias = nullptr;
        KILN_RNN_STEP(s, "cudnnGetRNNWeightParams",
                      dnn->GetRNNWeightParams(handle, w->rnn, static_cast<int32_t>(d), w->bytes, Pointer(w->space.ptr),
                                              static_cast<int32_t>(l), w->m, &m, w->bias, &bias));
        const CUdeviceptr from = call.inputs[1 + rec].data + ((d * G + g) * H * cols) * elem;
        if (s.ok()) cr = drv->MemcpyDtoDAsync(Address(m), from, H * cols * elem, stream);
        if (s.ok() && cr == CUDA_SUCCESS && B != nullptr && bias != nullptr)
          cr = drv->MemcpyDtoDAsync(Address(bias), B->data + ((d * 2 + rec) * G + g) * H * elem, H * elem, stream);
      }
    if (!s.ok()) return s.Done(*dnn, name);
    KILN_RETURN_IF_ERROR(Check(*drv, cr, name.str() + ": filling the cuDNN RNN weight space"));
    w->plan = p;
    w->w = call.inputs[1].data, w->r = call.inputs[2].data, w->b = B ? B->data : 0;
    return Status::Ok();
  }

  // The data and state descriptors of `p` over `w`, its workspace layout and its sequence
  // lengths (uploaded on call.stream), into *c.
  Status Build(const RnnPlan& p, Weights* w, const OpCall& call, const CallName& name, Cached* c) const {
    const cudnnDataType_t dt = DataType(p.dtype);
    const size_t elem = p.dtype == DType::kFloat16 ? 2 : 4;
    const int T = p.seq, N = p.batch, H = p.hidden, D = p.dirs;
    const int h_dims[] = {D, N, H}, h_strides[] = {N * H, H, 1};
    const int y_dims[] = {T, D, N, H}, from_strides[] = {N * D * H, H, D * H, 1}, to_strides[] = {D * N * H, N * H, H, 1};
    const cudnnRNNDataLayout_t layout =
        p.batch_first ? CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED : CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED;
    c->dnn = dnn;
    c->weights = w;
    if (p.lens) {
      const auto* v = static_cast<const int32_t*>(call.inputs[4].host);
      c->host_lengths.assign(v, v + N);
    } else {
      c->host_lengths.assign(static_cast<size_t>(N), T);
    }
    static double zero_fill = 0;  // paddingFill, read only: zero in float32 and float16 alike
    size_t reserve = 0;
    Steps s;
    KILN_RNN_STEP(s, "cudnnCreateRNNDataDescriptor", dnn->CreateRNNDataDescriptor(&c->x));
    KILN_RNN_STEP(s, "cudnnCreateRNNDataDescriptor", dnn->CreateRNNDataDescriptor(&c->y));
    for (cudnnTensorDescriptor_t* t : {&c->h, &c->y_from, &c->y_to})
      KILN_RNN_STEP(s, "cudnnCreateTensorDescriptor", dnn->CreateTensorDescriptor(t));
    KILN_RNN_STEP(s, "cudnnSetRNNDataDescriptor",
                  dnn->SetRNNDataDescriptor(c->x, dt, layout, T, N, p.input, c->host_lengths.data(), nullptr));
    KILN_RNN_STEP(s, "cudnnSetRNNDataDescriptor",
                  dnn->SetRNNDataDescriptor(c->y, dt, layout, T, N, D * H, c->host_lengths.data(),
                                            &zero_fill));
    KILN_RNN_STEP(s, "cudnnSetTensorNdDescriptor", dnn->SetTensorNdDescriptor(c->h, dt, 3, h_dims, h_strides));
    KILN_RNN_STEP(s, "cudnnSetTensorNdDescriptor", dnn->SetTensorNdDescriptor(c->y_from, dt, 4, y_dims, from_strides));
    KILN_RNN_STEP(s, "cudnnSetTensorNdDescriptor", dnn->SetTensorNdDescriptor(c->y_to, dt, 4, y_dims, to_strides));
    KILN_RNN_STEP(s, "cudnnGetRNNTempSpaceSizes",
                  dnn->GetRNNTempSpaceSizes(handle, w->rnn, CUDNN_FWD_MODE_INFERENCE, c->x, &c->cudnn_ws, &reserve));
    if (!s.ok()) return s.Done(*dnn, name);
    // cuDNN's y in the workspace: for two directions in layout 0 (transposed into Y), or no Y.
    const bool y_scratch = !p.y || (D == 2 && !p.batch_first);
    c->y_offset = AlignUp(c->cudnn_ws);
    c->workspace = c->y_offset + (y_scratch ? static_cast<size_t>(T) * N * D * H * elem : 0);
    if (c->workspace > kMaxWorkspace) return Refused("its workspace would exceed the cap of 64 MiB");
    c->lengths.drv = drv;
    KILN_RETURN_IF_ERROR(c->lengths.Reserve(static_cast<size_t>(N) * sizeof(int32_t), "cuDNN RNN sequence lengths"));
    KILN_RETURN_IF_ERROR(Check(*drv,
                               drv->MemcpyHtoDAsync(c->lengths.ptr, c->host_lengths.data(),
                                                    static_cast<size_t>(N) * sizeof(int32_t), call.stream),
                               name.str() + ": cuMemcpyHtoDAsync (the sequence lengths)"));
    c->plan = p;
    return Status::Ok();
  }
};
#undef KILN_RNN_STEP

RnnLibrary::RnnLibrary(std::unique_ptr<State> state) : s_(std::move(state)) {}
RnnLibrary::~RnnLibrary() = default;

Result<std::unique_ptr<RnnLibrary>> RnnLibrary::Create(const Dnn& dnn, const Driver& drv) {
  auto state = std::make_unique<State>();
  state->dnn = &dnn;
  state->drv = &drv;
  KILN_RETURN_IF_ERROR_CTX(CheckDnn(dnn, dnn.Create(&state->handle), "cudnnCreate"), "cuDNN RNN");
  return std::unique_ptr<RnnLibrary>(new RnnLibrary(std::move(state)));
}

Status RnnLibrary::Supports(std::string_view op, const AttrMap& attrs, std::span<const DeviceTensor> inputs,
                            std::span<const DeviceTensor> outputs) {
  RnnPlan plan;
  return PlanRnn(op, attrs, inputs, outputs, &plan);
}

Status RnnLibrary::Accepts(std::string_view op, const AttrMap& attrs, std::span<const DeviceTensor> inputs,
                           std::span<const DeviceTensor> outputs) const {
  return Supports(op, attrs, inputs, outputs);
}

size_t RnnLibrary::Workspace(std::string_view op, const AttrMap& attrs, std::span<const DeviceTensor> inputs,
                             std::span<const DeviceTensor> outputs) const {
  return Accepts(op, attrs, inputs, outputs).ok() ? kMaxWorkspace : 0;
}

Status RnnLibrary::Run(std::string_view op, const OpCall& call, std::string_view node) {
  RnnPlan plan;
  KILN_RETURN_IF_ERROR(PlanRnn(op, call.attrs, call.inputs, call.outputs, &plan));
  const CallName name{op, node};
  const Dnn& dnn = *s_->dnn;
  if (const cudnnStatus_t st = dnn.SetStream(s_->handle, call.stream); st != CUDNN_STATUS_SUCCESS)
    return CheckDnn(dnn, st, name.str() + ": cudnnSetStream");
  const CUdeviceptr W = call.inputs[1].data, R = call.inputs[2].data;
  const DeviceTensor* B = Optional(call.inputs, 3);
  const DeviceTensor* Y = Optional(call.outputs, 0);
  Cached* c = nullptr;
  for (const auto& e : s_->cache)
    if (e->plan == plan && e->weights->Holds(plan, W, R, B ? B->data : 0) &&
        (!plan.lens || std::equal(e->host_lengths.begin(), e->host_lengths.end(),
                                  static_cast<const int32_t*>(call.inputs[4].host))))
      c = e.get();
  if (c == nullptr) {
    Weights* w = nullptr;
    for (const auto& e : s_->weights)
      if (e->Holds(plan, W, R, B ? B->data : 0)) w = e.get();
    if (w == nullptr) {
      auto built = std::make_unique<Weights>();
      KILN_RETURN_IF_ERROR(s_->BuildWeights(op, plan, call, name, built.get()));
      w = s_->weights.emplace_back(std::move(built)).get();
    }
    auto built = std::make_unique<Cached>();
    KILN_RETURN_IF_ERROR(s_->Build(plan, w, call, name, built.get()));
    c = s_->cache.emplace_back(std::move(built)).get();
  }
  if (call.workspace_bytes < c->workspace)
    return InvalidArgument(name.str() + ": the workspace is smaller than cuDNN RNN's");
  auto ptr = [](const DeviceTensor* t) { return t ? Pointer(t->data) : nullptr; };
  const bool y_scratch = c->workspace > c->y_offset;
  void* y = y_scratch ? Pointer(call.workspace + c->y_offset) : ptr(Y);
  const bool lstm = plan.cell == CUDNN_LSTM;
  const cudnnStatus_t st = dnn.RNNForward(
      s_->handle, c->weights->rnn, CUDNN_FWD_MODE_INFERENCE, static_cast<const int32_t*>(Pointer(c->lengths.ptr)), c->x,
      ptr(&call.inputs[0]), c->y, y, c->h, ptr(Optional(call.inputs, 5)), ptr(Optional(call.outputs, 1)), c->h,
      lstm ? ptr(Optional(call.inputs, 6)) : nullptr, lstm ? ptr(Optional(call.outputs, 2)) : nullptr,
      c->weights->bytes, Pointer(c->weights->space.ptr), c->cudnn_ws, Pointer(call.workspace), 0, nullptr);
  if (NotSupported(st)) return Refused(std::string(CheckDnn(dnn, st, "cudnnRNNForward").message()));
  if (st != CUDNN_STATUS_SUCCESS) return CheckDnn(dnn, st, name.str() + ": cudnnRNNForward");
  if (y_scratch && Y) {  // cuDNN's [T, N, 2H] into ONNX's [T, 2, N, H]
    const float one = 1.0f, zero = 0.0f;
    const cudnnStatus_t t = dnn.AddTensor(s_->handle, &one, c->y_from, y, &zero, c->y_to, ptr(Y));
    if (t != CUDNN_STATUS_SUCCESS) return CheckDnn(dnn, t, name.str() + ": cudnnAddTensor (Y's transpose)");
  }
  return Status::Ok();
}

size_t RnnLibrary::cached_plans() const { return s_->cache.size(); }
size_t RnnLibrary::weight_spaces() const { return s_->weights.size(); }

uint64_t RnnLibrary::held_bytes() const {
  uint64_t n = 0;
  for (const auto& w : s_->weights) n += w->space.bytes;
  for (const auto& c : s_->cache) n += c->lengths.bytes;
  return n;
}

}  // namespace kiln::cuda
