// LSTM (ONNX opset 14 semantics): forward, reverse or bidirectional, with optional bias,
// sequence lengths, initial state, peepholes, clip and input_forget. Layout 0 has X
// [seq, batch, input], Y [seq, dirs, batch, H] and states [dirs, batch, H]; layout 1 puts
// batch first: X [batch, seq, input], Y [batch, seq, dirs, H], states [batch, dirs, H].
// The input projection X·W^T for all steps is one SGEMM; each step adds H·R^T with
// another. Gate order in W, R and B is i, o, f, c.
#include <cblas.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "runtime/cpu/families.h"
#include "runtime/cpu/kernel_util.h"

namespace kiln::cpu {
namespace {

constexpr std::string_view kName = "LSTM";

enum class Act { kSigmoid, kTanh, kRelu, kHardSigmoid };

struct Activation {
  Act kind = Act::kSigmoid;
  float alpha = 0.2f, beta = 0.5f;
  float operator()(float x) const {
    switch (kind) {
      case Act::kSigmoid: return x >= 0 ? 1.0f / (1.0f + std::exp(-x)) : std::exp(x) / (1.0f + std::exp(x));
      case Act::kTanh: return std::tanh(x);
      case Act::kRelu: return x > 0 ? x : 0.0f;
      case Act::kHardSigmoid: return std::max(0.0f, std::min(1.0f, alpha * x + beta));
    }
    return x;
  }
};

// ONNX's `activations` is a string list, which AttrMap cannot hold; the importer passes
// it as one comma-separated string (e.g. "Sigmoid,Tanh,Tanh").
Status ParseActivations(const AttrMap& attrs, int num_dirs, Activation acts[6]) {
  for (int d = 0; d < 2; ++d) {
    acts[3 * d] = {Act::kSigmoid};
    acts[3 * d + 1] = {Act::kTanh};
    acts[3 * d + 2] = {Act::kTanh};
  }
  const std::string_view list = attrs.GetString("activations", "");
  if (list.empty()) return Status::Ok();
  const auto& alphas = attrs.GetFloats("activation_alpha");
  const auto& betas = attrs.GetFloats("activation_beta");
  int n = 0;
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t end = list.find(',', pos);
    if (end == std::string_view::npos) end = list.size();
    const std::string_view name = list.substr(pos, end - pos);
    if (n >= 3 * num_dirs) return OpError(kName, "too many activations in '" + std::string(list) + "'");
    Activation& a = acts[n];
    if (name == "Sigmoid") a.kind = Act::kSigmoid;
    else if (name == "Tanh") a.kind = Act::kTanh;
    else if (name == "Relu") a.kind = Act::kRelu;
    else if (name == "HardSigmoid") a.kind = Act::kHardSigmoid;
    else return OpUnimplemented(kName, "activation '" + std::string(name) + "' is not supported");
    if (static_cast<size_t>(n) < alphas.size()) a.alpha = alphas[n];
    if (static_cast<size_t>(n) < betas.size()) a.beta = betas[n];
    ++n;
    pos = end + 1;
  }
  if (n != 3 * num_dirs) {
    return OpError(kName, "expected " + std::to_string(3 * num_dirs) + " activations, got " + std::to_string(n));
  }
  return Status::Ok();
}

struct LstmShape {
  int64_t seq = 0, batch = 0, input = 0, hidden = 0;
  int dirs = 1;
};

size_t WorkspaceFloats(const LstmShape& s) {
  return static_cast<size_t>(s.seq * s.batch * 4 * s.hidden + s.batch * 4 * s.hidden + 2 * s.batch * s.hidden);
}

size_t LstmWorkspace(const AttrMap& attrs, std::span<const TensorRef> inputs, std::span<const TensorRef>) {
  if (inputs.size() < 3 || !inputs[0].present() || inputs[0].rank != 3) return 0;
  const bool batch_first = attrs.GetInt("layout", 0) == 1;
  LstmShape s;
  s.seq = inputs[0].dims[batch_first ? 1 : 0];
  s.batch = inputs[0].dims[batch_first ? 0 : 1];
  s.hidden = attrs.GetInt("hidden_size", inputs[2].present() && inputs[2].rank == 3 ? inputs[2].dims[2] : 0);
  return WorkspaceFloats(s) * sizeof(float);
}

Status CheckShape(const TensorRef* t, std::span<const int64_t> dims, const char* what) {
  if (!t) return Status::Ok();
  if (t->dtype != DType::kFloat32) {
    return OpError(kName, std::string(what) + " must be float32, got " + DTypeStr(t->dtype));
  }
  bool ok = t->rank == static_cast<int>(dims.size());
  for (int i = 0; ok && i < t->rank; ++i) ok = t->dims[i] == dims[i];
  if (!ok) {
    std::string want = "[";
    for (int64_t d : dims) want += (want.size() > 1 ? "," : "") + std::to_string(d);
    return OpError(kName, std::string(what) + " is " + ShapeStr(*t) + ", expected " + want + "]");
  }
  return Status::Ok();
}
Status CheckShape(const TensorRef* t, std::initializer_list<int64_t> dims, const char* what) {
  return CheckShape(t, std::span<const int64_t>(dims.begin(), dims.size()), what);
}

Status LstmKernel(const KernelCall& call) {
  if (call.inputs.size() < 3 || !call.inputs[0].present() || !call.inputs[1].present() ||
      !call.inputs[2].present()) {
    return OpError(kName, "X, W and R are required");
  }
  const int64_t layout = call.attrs.GetInt("layout", 0);
  if (layout != 0 && layout != 1) return OpError(kName, "layout must be 0 or 1, got " + std::to_string(layout));
  const bool batch_first = layout == 1;
  const TensorRef &x = call.inputs[0], &w = call.inputs[1], &r = call.inputs[2];
  const TensorRef* bias = OptionalInput(call, 3);
  const TensorRef* lens = OptionalInput(call, 4);
  const TensorRef* h0 = OptionalInput(call, 5);
  const TensorRef* c0 = OptionalInput(call, 6);
  const TensorRef* peep = OptionalInput(call, 7);
  const TensorRef* y = OptionalOutput(call, 0);
  const TensorRef* yh = OptionalOutput(call, 1);
  const TensorRef* yc = OptionalOutput(call, 2);
  if (x.rank != 3) return OpError(kName, "X must have rank 3, got " + ShapeStr(x));
  const std::string_view direction = call.attrs.GetString("direction", "forward");
  LstmShape s;
  if (direction == "forward" || direction == "reverse") s.dirs = 1;
  else if (direction == "bidirectional") s.dirs = 2;
  else return OpError(kName, "unknown direction '" + std::string(direction) + "'");
  s.seq = x.dims[batch_first ? 1 : 0];
  s.batch = x.dims[batch_first ? 0 : 1];
  s.input = x.dims[2];
  s.hidden = call.attrs.GetInt("hidden_size", r.rank == 3 ? r.dims[2] : 0);
  const int64_t H = s.hidden, B = s.batch, S = s.seq, D = s.dirs;
  // Element offsets of X's row (t, b), of Y's row (t, d, b) and of a state's row (d, b).
  auto x_row = [&](int64_t t, int64_t b) { return batch_first ? b * S + t : t * B + b; };
  auto y_row = [&](int64_t t, int64_t d, int64_t b) { return batch_first ? (b * S + t) * D + d : (t * D + d) * B + b; };
  auto state_row = [&](int64_t d, int64_t b) { return batch_first ? b * D + d : d * B + b; };
  const std::array<int64_t, 3> state = batch_first ? std::array<int64_t, 3>{B, D, H} : std::array<int64_t, 3>{D, B, H};
  const std::array<int64_t, 3> x_dims =
      batch_first ? std::array<int64_t, 3>{B, S, s.input} : std::array<int64_t, 3>{S, B, s.input};
  const std::array<int64_t, 4> y_dims =
      batch_first ? std::array<int64_t, 4>{B, S, D, H} : std::array<int64_t, 4>{S, D, B, H};
  KILN_RETURN_IF_ERROR(CheckShape(&x, x_dims, "X"));
  KILN_RETURN_IF_ERROR(CheckShape(&w, {D, 4 * H, s.input}, "W"));
  KILN_RETURN_IF_ERROR(CheckShape(&r, {D, 4 * H, H}, "R"));
  KILN_RETURN_IF_ERROR(CheckShape(bias, {D, 8 * H}, "B"));
  KILN_RETURN_IF_ERROR(CheckShape(h0, state, "initial_h"));
  KILN_RETURN_IF_ERROR(CheckShape(c0, state, "initial_c"));
  KILN_RETURN_IF_ERROR(CheckShape(peep, {D, 3 * H}, "P"));
  KILN_RETURN_IF_ERROR(CheckShape(y, y_dims, "Y"));
  KILN_RETURN_IF_ERROR(CheckShape(yh, state, "Y_h"));
  KILN_RETURN_IF_ERROR(CheckShape(yc, state, "Y_c"));
  if (lens) {
    if (!IsIndexType(lens->dtype) || lens->num_elements != B) {
      return OpError(kName, "sequence_lens must be int32 with " + std::to_string(B) + " elements, got " +
                                DTypeStr(lens->dtype) + " " + ShapeStr(*lens));
    }
    for (int64_t b = 0; b < B; ++b) {
      const int64_t l = IndexAt(*lens, b);
      if (l < 0 || l > S) {
        return OpError(kName, "sequence_lens[" + std::to_string(b) + "] = " + std::to_string(l) +
                                  " is outside [0, " + std::to_string(S) + "]");
      }
    }
  }
  Activation acts[6];
  KILN_RETURN_IF_ERROR(ParseActivations(call.attrs, s.dirs, acts));
  const float* clip_attr = nullptr;
  float clip = 0;
  if (const Attr* a = call.attrs.Find("clip"); a && a->kind == Attr::Kind::kFloat) {
    clip = a->f;
    clip_attr = &clip;
  }
  const bool input_forget = call.attrs.GetInt("input_forget", 0) != 0;
  KILN_RETURN_IF_ERROR(CheckWorkspace(call, WorkspaceFloats(s) * sizeof(float), kName));

  float* gates_x = static_cast<float*>(call.workspace);  // [S*B, 4H], rows as X's
  float* gates = gates_x + S * B * 4 * H;                  // [B, 4H]
  float* h = gates + B * 4 * H;                            // [B, H]
  float* c = h + B * H;                                    // [B, H]
  if (y) std::fill(y->as<float>(), y->as<float>() + y->num_elements, 0.0f);

  for (int64_t d = 0; d < D; ++d) {
    const bool reverse = direction == "reverse" || d == 1;
    const Activation &f = acts[3 * d], &g = acts[3 * d + 1], &hact = acts[3 * d + 2];
    const float* wd = w.as<const float>() + d * 4 * H * s.input;
    const float* rd = r.as<const float>() + d * 4 * H * H;
    const float* pd = peep ? peep->as<const float>() + d * 3 * H : nullptr;
    if (S * B > 0 && H > 0) {
      if (s.input > 0) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(S * B),
                    static_cast<blasint>(4 * H), static_cast<blasint>(s.input), 1.0f, x.as<const float>(),
                    static_cast<blasint>(s.input), wd, static_cast<blasint>(s.input), 0.0f, gates_x,
                    static_cast<blasint>(4 * H));
      } else {
        std::fill(gates_x, gates_x + S * B * 4 * H, 0.0f);
      }
      if (bias) {
        const float* wb = bias->as<const float>() + d * 8 * H;
        const float* rb = wb + 4 * H;
        for (int64_t row = 0; row < S * B; ++row)
          for (int64_t j = 0; j < 4 * H; ++j) gates_x[row * 4 * H + j] += wb[j] + rb[j];
      }
    }
    for (int64_t b = 0; b < B; ++b)
      for (int64_t j = 0; j < H; ++j) {
        h[b * H + j] = h0 ? h0->as<const float>()[state_row(d, b) * H + j] : 0.0f;
        c[b * H + j] = c0 ? c0->as<const float>()[state_row(d, b) * H + j] : 0.0f;
      }
    for (int64_t step = 0; step < S; ++step) {
      // Each batch entry walks its own sequence; reverse starts at its own last step.
      for (int64_t b = 0; b < B; ++b) {
        const int64_t len = lens ? IndexAt(*lens, b) : S;
        if (step >= len) continue;
        const int64_t t = reverse ? len - 1 - step : step;
        std::memcpy(gates + b * 4 * H, gates_x + x_row(t, b) * 4 * H, 4 * H * sizeof(float));
      }
      if (B > 0 && H > 0) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(B),
                    static_cast<blasint>(4 * H), static_cast<blasint>(H), 1.0f, h, static_cast<blasint>(H),
                    rd, static_cast<blasint>(H), 1.0f, gates, static_cast<blasint>(4 * H));
      }
      for (int64_t b = 0; b < B; ++b) {
        const int64_t len = lens ? IndexAt(*lens, b) : S;
        if (step >= len) continue;
        const int64_t t = reverse ? len - 1 - step : step;
        const float* gb = gates + b * 4 * H;
        float* hb = h + b * H;
        float* cb = c + b * H;
        for (int64_t j = 0; j < H; ++j) {
          auto clipped = [&](float v) { return clip_attr ? std::clamp(v, -clip, clip) : v; };
          const float c_prev = cb[j];
          const float it = f(clipped(gb[j] + (pd ? pd[j] * c_prev : 0.0f)));
          const float ft = input_forget ? 1.0f - it
                                        : f(clipped(gb[2 * H + j] + (pd ? pd[2 * H + j] * c_prev : 0.0f)));
          const float ct = g(clipped(gb[3 * H + j]));
          const float c_new = ft * c_prev + it * ct;
          const float ot = f(clipped(gb[H + j] + (pd ? pd[H + j] * c_new : 0.0f)));
          cb[j] = c_new;
          hb[j] = ot * hact(c_new);
        }
        if (y) std::memcpy(y->as<float>() + y_row(t, d, b) * H, hb, H * sizeof(float));
      }
    }
    for (int64_t b = 0; b < B; ++b) {
      if (yh) std::memcpy(yh->as<float>() + state_row(d, b) * H, h + b * H, H * sizeof(float));
      if (yc) std::memcpy(yc->as<float>() + state_row(d, b) * H, c + b * H, H * sizeof(float));
    }
  }
  return Status::Ok();
}

constexpr KernelDef kKernels[] = {
    {"LSTM", LstmKernel, LstmWorkspace},
};

}  // namespace

std::span<const KernelDef> LstmKernels() { return kKernels; }

}  // namespace kiln::cpu
