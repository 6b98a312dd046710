// LSTM (ONNX opset 14 semantics): forward, reverse or bidirectional, with optional bias,
// sequence lengths, initial state, peepholes, clip and input_forget. Layout 0 has X
// [seq, batch, input], Y [seq, dirs, batch, H] and states [dirs, batch, H]; layout 1 puts
// batch first: X [batch, seq, input], Y [batch, seq, dirs, H], states [batch, dirs, H].
// The input projection X·W^T for all steps is one SGEMM; each step adds H·R^T with
// another (recurrent.h). Gate order in W, R and B is i, o, f, c. With the default activations
// and neither clip, peepholes nor input_forget, the gates run on row_math.h's vectorized
// sigmoid and tanh; otherwise element by element (recurrent.h's Activation).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>

#include "runtime/kernels/families.h"
#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/recurrent.h"
#include "runtime/kernels/row_math.h"
#include "runtime/kernels/thread_pool.h"

namespace kiln::cpu {
namespace {

constexpr std::string_view kName = "LSTM";
constexpr int64_t kGates = 4;
using recurrent::Act;
using recurrent::Activation;
using recurrent::Geometry;

size_t WorkspaceFloats(const Geometry& g) {
  return static_cast<size_t>(g.seq * g.batch * kGates * g.hidden + g.batch * kGates * g.hidden +
                             2 * g.batch * g.hidden);
}

size_t LstmWorkspace(const AttrMap& attrs, std::span<const TensorRef> inputs, std::span<const TensorRef>) {
  const std::optional<Geometry> g = recurrent::WorkspaceGeometry(attrs, inputs);
  return g ? WorkspaceFloats(*g) * static_cast<size_t>(g->dirs) * sizeof(float) : 0;
}

Status LstmKernel(const KernelCall& call) {
  Geometry g;
  KILN_RETURN_IF_ERROR(recurrent::ParseGeometry(kName, call, kGates, &g));
  const TensorRef* h0 = OptionalInput(call, 5);
  const TensorRef* c0 = OptionalInput(call, 6);
  const TensorRef* peep = OptionalInput(call, 7);
  const TensorRef* y = OptionalOutput(call, 0);
  const TensorRef* yh = OptionalOutput(call, 1);
  const TensorRef* yc = OptionalOutput(call, 2);
  const int64_t H = g.hidden, B = g.batch, S = g.seq, D = g.dirs;
  const auto state = g.StateDims();
  KILN_RETURN_IF_ERROR(recurrent::CheckShape(kName, c0, state, "initial_c"));
  KILN_RETURN_IF_ERROR(recurrent::CheckShape(kName, peep, {D, 3 * H}, "P"));
  KILN_RETURN_IF_ERROR(recurrent::CheckShape(kName, yc, state, "Y_c"));
  constexpr Act kDefaults[] = {Act::kSigmoid, Act::kTanh, Act::kTanh};
  Activation acts[6];
  KILN_RETURN_IF_ERROR(recurrent::ParseActivations(kName, call.attrs, kDefaults, static_cast<int>(D), acts));
  const bool input_forget = call.attrs.GetInt("input_forget", 0) != 0;
  KILN_RETURN_IF_ERROR(CheckWorkspace(call, WorkspaceFloats(g) * static_cast<size_t>(D) * sizeof(float), kName));
  if (y) std::fill(y->as<float>(), y->as<float>() + y->num_elements, 0.0f);

  const RowMath& rows = ActiveRowMath();
  // The directions are independent: each has its own part of the workspace and runs on a
  // thread of its own when there are two.
  auto run_direction = [&](int64_t d) {
    float* gates_x = static_cast<float*>(call.workspace) + d * WorkspaceFloats(g);  // [S*B, 4H], rows as X's
    float* gates = gates_x + S * B * 4 * H;                                           // [B, 4H]
    float* h = gates + B * 4 * H;                                                     // [B, H]
    float* c = h + B * H;                                                             // [B, H]
    const Activation &f = acts[3 * d], &gact = acts[3 * d + 1], &hact = acts[3 * d + 2];
    const bool plain = kRowMathGates && f.kind == Act::kSigmoid && gact.kind == Act::kTanh && hact.kind == Act::kTanh && !g.clip &&
                       !peep && !input_forget;
    const float* rd = call.inputs[2].as<const float>() + d * 4 * H * H;
    const float* pd = peep ? peep->as<const float>() + d * 3 * H : nullptr;
    recurrent::ProjectInputs(g, call, d, kGates, kGates, gates_x);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t j = 0; j < H; ++j) {
        h[b * H + j] = h0 ? h0->as<const float>()[g.StateRow(d, b) * H + j] : 0.0f;
        c[b * H + j] = c0 ? c0->as<const float>()[g.StateRow(d, b) * H + j] : 0.0f;
      }
    for (int64_t step = 0; step < S; ++step) {
      for (int64_t b = 0; b < B; ++b)
        if (const int64_t t = g.Time(step, d, b); t >= 0)
          std::memcpy(gates + b * 4 * H, gates_x + g.XRow(t, b) * 4 * H, 4 * H * sizeof(float));
      recurrent::AddRecurrent(g, h, rd, 4 * H, gates, 4 * H);
      for (int64_t b = 0; b < B; ++b) {
        const int64_t t = g.Time(step, d, b);
        if (t < 0) continue;
        float* gb = gates + b * 4 * H;
        float* hb = h + b * H;
        float* cb = c + b * H;
        if (plain) {  // the default activations, vectorized: i, o, f, then the cell candidate
          rows.sigmoid(gb, 3 * H);
          rows.tanh(gb + 3 * H, H);
          for (int64_t j = 0; j < H; ++j) hb[j] = cb[j] = gb[2 * H + j] * cb[j] + gb[j] * gb[3 * H + j];
          rows.tanh(hb, H);
          for (int64_t j = 0; j < H; ++j) hb[j] *= gb[H + j];
        } else {
        for (int64_t j = 0; j < H; ++j) {
          const float c_prev = cb[j];
          const float it = f(g.Clip(gb[j] + (pd ? pd[j] * c_prev : 0.0f)));
          const float ft = input_forget ? 1.0f - it : f(g.Clip(gb[2 * H + j] + (pd ? pd[2 * H + j] * c_prev : 0.0f)));
          const float ct = gact(g.Clip(gb[3 * H + j]));
          const float c_new = ft * c_prev + it * ct;
          const float ot = f(g.Clip(gb[H + j] + (pd ? pd[H + j] * c_new : 0.0f)));
          cb[j] = c_new;
          hb[j] = ot * hact(c_new);
        }
        }
        if (y) std::memcpy(y->as<float>() + g.YRow(t, d, b) * H, hb, H * sizeof(float));
      }
    }
    for (int64_t b = 0; b < B; ++b) {
      if (yh) std::memcpy(yh->as<float>() + g.StateRow(d, b) * H, h + b * H, H * sizeof(float));
      if (yc) std::memcpy(yc->as<float>() + g.StateRow(d, b) * H, c + b * H, H * sizeof(float));
    }
  };
  ParallelFor(call.threads, D, 1, [&](int64_t begin, int64_t end) {
    for (int64_t d = begin; d < end; ++d) run_direction(d);
  });
  return Status::Ok();
}

constexpr KernelDef kKernels[] = {
    {"LSTM", LstmKernel, LstmWorkspace},
};

}  // namespace

std::span<const KernelDef> LstmKernels() { return KeptKernels<kKernels>(); }

}  // namespace kiln::cpu
