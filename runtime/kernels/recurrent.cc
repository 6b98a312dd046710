#include "runtime/kernels/recurrent.h"

#include <algorithm>
#include <limits>
#include <cctype>
#include <cmath>

#include "runtime/kernels/activation.h"
#include "runtime/kernels/gemm.h"
#include "runtime/kernels/gemv.h"
#include "runtime/kernels/kernel_util.h"

namespace kiln::cpu::recurrent {
namespace {

struct ActInfo {
  std::string_view name;  // lower case
  Act kind;
  bool takes_alpha, takes_beta;
  float alpha, beta;  // the defaults of the ONNX op of the same name
};

constexpr ActInfo kActs[] = {
    {"sigmoid", Act::kSigmoid, false, false, 0, 0},
    {"tanh", Act::kTanh, false, false, 0, 0},
    {"relu", Act::kRelu, false, false, 0, 0},
    {"hardsigmoid", Act::kHardSigmoid, true, true, 0.2f, 0.5f},
    {"leakyrelu", Act::kLeakyRelu, true, false, 0.01f, 0},
    {"thresholdedrelu", Act::kThresholdedRelu, true, false, 1.0f, 0},
    {"scaledtanh", Act::kScaledTanh, true, true, 1.0f, 1.0f},
    {"affine", Act::kAffine, true, true, 1.0f, 0},
    {"elu", Act::kElu, true, false, 1.0f, 0},
    {"softsign", Act::kSoftsign, false, false, 0, 0},
    {"softplus", Act::kSoftplus, false, false, 0, 0},
};

const ActInfo& InfoOf(Act kind) {
  for (const ActInfo& a : kActs)
    if (a.kind == kind) return a;
  return kActs[0];
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

float Activation::operator()(float x) const {
  switch (kind) {
    case Act::kSigmoid: return SigmoidOf(x);
    case Act::kTanh: return std::tanh(x);
    case Act::kRelu: return ReluOf(x);
    case Act::kHardSigmoid: return ClampNaN(alpha * x + beta, 0.0f, 1.0f);
    case Act::kLeakyRelu: return x < 0 ? alpha * x : x;
    case Act::kThresholdedRelu: return x > alpha ? x : 0.0f;
    case Act::kScaledTanh: return alpha * std::tanh(beta * x);
    case Act::kAffine: return alpha * x + beta;
    case Act::kElu: return x < 0 ? alpha * (std::exp(x) - 1.0f) : x;
    case Act::kSoftsign: return x / (1.0f + std::fabs(x));
    case Act::kSoftplus: return std::log1p(std::exp(-std::fabs(x))) + std::max(x, 0.0f);
  }
  return x;
}

Status ParseActivations(std::string_view op, const AttrMap& attrs, std::span<const Act> defaults, int dirs,
                        std::span<Activation> acts) {
  const size_t want = defaults.size() * static_cast<size_t>(dirs);
  for (size_t i = 0; i < want; ++i) {
    const ActInfo& info = InfoOf(defaults[i % defaults.size()]);
    acts[i] = {info.kind, info.alpha, info.beta};
  }
  const std::string_view list = attrs.GetString("activations", "");
  if (list.empty()) return Status::Ok();
  const std::vector<float>& alphas = attrs.GetFloats("activation_alpha");
  const std::vector<float>& betas = attrs.GetFloats("activation_beta");
  size_t n = 0, next_alpha = 0, next_beta = 0, pos = 0;
  while (pos <= list.size()) {
    size_t end = list.find(',', pos);
    if (end == std::string_view::npos) end = list.size();
    const std::string_view name = list.substr(pos, end - pos);
    pos = end + 1;
    if (n >= want) {
      return OpError(op, "activations: expected " + std::to_string(want) + ", found more in '" + std::string(list) +
                             "'");
    }
    const std::string lower = Lower(name);
    const ActInfo* info = nullptr;
    for (const ActInfo& a : kActs)
      if (a.name == lower) info = &a;
    if (!info) return OpUnimplemented(op, "activations: '" + std::string(name) + "' is not supported");
    Activation& a = acts[n++];
    a = {info->kind, info->alpha, info->beta};
    if (info->takes_alpha && next_alpha < alphas.size()) a.alpha = alphas[next_alpha++];
    if (info->takes_beta && next_beta < betas.size()) a.beta = betas[next_beta++];
  }
  if (n != want) {
    return OpError(op, "activations: expected " + std::to_string(want) + ", found " + std::to_string(n) + " in '" +
                           std::string(list) + "'");
  }
  return Status::Ok();
}

int64_t Geometry::Time(int64_t step, int64_t d, int64_t b) const {
  const int64_t len = lens ? IndexAt(*lens, b) : seq;
  if (step >= len) return -1;
  return reverse || d == 1 ? len - 1 - step : step;
}

Status CheckShape(std::string_view op, const TensorRef* t, std::span<const int64_t> dims, const char* what) {
  if (!t) return Status::Ok();
  if (t->dtype != DType::kFloat32) {
    return OpError(op, std::string(what) + " must be float32, got " + DTypeStr(t->dtype));
  }
  bool ok = t->rank == static_cast<int>(dims.size());
  for (int i = 0; ok && i < t->rank; ++i) ok = t->dims[i] == dims[i];
  if (!ok) return OpError(op, std::string(what) + " is " + ShapeStr(*t) + ", expected " + ShapeText(dims));
  return Status::Ok();
}

std::optional<Geometry> WorkspaceGeometry(const AttrMap& attrs, std::span<const TensorRef> inputs) {
  if (inputs.size() < 3 || !inputs[0].present() || inputs[0].rank != 3) return std::nullopt;
  Geometry g;
  g.batch_first = attrs.GetInt("layout", 0) == 1;
  g.seq = inputs[0].dims[g.batch_first ? 1 : 0];
  g.batch = inputs[0].dims[g.batch_first ? 0 : 1];
  g.hidden = attrs.GetInt("hidden_size", inputs[2].present() && inputs[2].rank == 3 ? inputs[2].dims[2] : 0);
  g.dirs = attrs.GetString("direction", "forward") == "bidirectional" ? 2 : 1;
  // hidden_size is any int64 and X's dims may be huge with 0 elements: the workspaces, at most
  // (seq + 1) * batch * 8 * hidden floats per direction, must be computable without overflow
  // (else none is sized, and ParseGeometry or the shape checks refuse the call).
  int64_t floats = 0;
  if (g.seq < 0 || g.batch < 0 || g.hidden < 0 || __builtin_mul_overflow(g.seq + 1, g.batch, &floats) ||
      __builtin_mul_overflow(floats, 8 * g.dirs, &floats) || __builtin_mul_overflow(floats, g.hidden, &floats))
    return std::nullopt;
  return g;
}

Status ParseGeometry(std::string_view op, const KernelCall& call, int64_t gates, Geometry* g) {
  if (call.inputs.size() < 3 || !call.inputs[0].present() || !call.inputs[1].present() ||
      !call.inputs[2].present()) {
    return OpError(op, "X, W and R are required");
  }
  const int64_t layout = call.attrs.GetInt("layout", 0);
  if (layout != 0 && layout != 1) return OpError(op, "layout must be 0 or 1, got " + std::to_string(layout));
  g->batch_first = layout == 1;
  const TensorRef &x = call.inputs[0], &w = call.inputs[1], &r = call.inputs[2];
  if (x.rank != 3) return OpError(op, "X must have rank 3, got " + ShapeStr(x));
  const std::string_view direction = call.attrs.GetString("direction", "forward");
  if (direction == "forward" || direction == "reverse") g->dirs = 1;
  else if (direction == "bidirectional") g->dirs = 2;
  else return OpError(op, "unknown direction '" + std::string(direction) + "'");
  g->reverse = direction == "reverse";
  g->seq = x.dims[g->batch_first ? 1 : 0];
  g->batch = x.dims[g->batch_first ? 0 : 1];
  g->input = x.dims[2];
  g->hidden = call.attrs.GetInt("hidden_size", r.rank == 3 ? r.dims[2] : 0);
  // The attribute is any int64: the shapes below multiply it by 2 * gates, which must not overflow.
  if (g->hidden < 0 || g->hidden > std::numeric_limits<int64_t>::max() / (2 * gates))
    return OpError(op, "hidden_size " + std::to_string(g->hidden) + " is outside [0, 2^63 / " +
                           std::to_string(2 * gates) + ")");
  const int64_t H = g->hidden, B = g->batch, S = g->seq, D = g->dirs, I = g->input;
  const auto state = g->StateDims();
  const std::array<int64_t, 3> x_dims = g->batch_first ? std::array<int64_t, 3>{B, S, I}
                                                       : std::array<int64_t, 3>{S, B, I};
  const std::array<int64_t, 4> y_dims = g->batch_first ? std::array<int64_t, 4>{B, S, D, H}
                                                       : std::array<int64_t, 4>{S, D, B, H};
  KILN_RETURN_IF_ERROR(CheckShape(op, &x, x_dims, "X"));
  KILN_RETURN_IF_ERROR(CheckShape(op, &w, {D, gates * H, I}, "W"));
  KILN_RETURN_IF_ERROR(CheckShape(op, &r, {D, gates * H, H}, "R"));
  KILN_RETURN_IF_ERROR(CheckShape(op, OptionalInput(call, 3), {D, 2 * gates * H}, "B"));
  KILN_RETURN_IF_ERROR(CheckShape(op, OptionalInput(call, 5), state, "initial_h"));
  KILN_RETURN_IF_ERROR(CheckShape(op, OptionalOutput(call, 0), y_dims, "Y"));
  KILN_RETURN_IF_ERROR(CheckShape(op, OptionalOutput(call, 1), state, "Y_h"));
  g->lens = OptionalInput(call, 4);
  if (const TensorRef* lens = g->lens) {
    if (!IsIndexType(lens->dtype) || lens->num_elements != B) {
      return OpError(op, "sequence_lens must be int32 with " + std::to_string(B) + " elements, got " +
                             DTypeStr(lens->dtype) + " " + ShapeStr(*lens));
    }
    for (int64_t b = 0; b < B; ++b) {
      const int64_t l = IndexAt(*lens, b);
      if (l < 0 || l > S) {
        return OpError(op, "sequence_lens[" + std::to_string(b) + "] = " + std::to_string(l) +
                               " is outside [0, " + std::to_string(S) + "]");
      }
    }
  }
  if (const Attr* a = call.attrs.Find("clip"); a && a->kind == Attr::Kind::kFloat) g->clip = a->f;
  return Status::Ok();
}

void ProjectInputs(const Geometry& g, const KernelCall& call, int64_t d, int64_t gates, int64_t r_bias_gates,
                   float* out) {
  const int64_t rows = g.seq * g.batch, n = gates * g.hidden;
  if (rows == 0 || n == 0) return;
  const float* wd = call.inputs[1].as<const float>() + d * n * g.input;
  if (g.input > 0) {
    Sgemm(false, true, rows, n, g.input, 1.0f, call.inputs[0].as<const float>(), g.input, wd, g.input, 0.0f, out, n);
  } else {
    std::fill(out, out + rows * n, 0.0f);
  }
  if (const TensorRef* bias = OptionalInput(call, 3)) {
    const float* wb = bias->as<const float>() + d * 2 * n;
    const float* rb = wb + n;
    const int64_t rn = r_bias_gates * g.hidden;
    for (int64_t row = 0; row < rows; ++row) {
      float* o = out + row * n;
      for (int64_t j = 0; j < n; ++j) o[j] += j < rn ? wb[j] + rb[j] : wb[j];
    }
  }
}

void AddRecurrent(const Geometry& g, const float* h, const float* r, int64_t n, float* out, int64_t out_stride) {
  if (g.batch == 0 || n == 0 || g.hidden == 0) return;
  if (g.batch == 1) {  // a matrix-vector product: R's rows read where they are (gemv.h)
    if (const GemvFn gemv = ActiveGemv()) return gemv(r, g.hidden, h, n, g.hidden, out);
  }
  Sgemm(false, true, g.batch, n, g.hidden, 1.0f, h, g.hidden, r, g.hidden, 1.0f, out, out_stride);
}

}  // namespace kiln::cpu::recurrent
