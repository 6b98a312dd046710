// GRU (opset 22) and RNN (opset 22): forward, reverse or bidirectional, both layouts, with
// optional bias, sequence lengths, initial state, clip and activations (recurrent.h).
// GRU's gate order in W, R and B is z, r, h:
//   z = f(x·Wz + h·Rz + Wbz + Rbz), r = f(x·Wr + h·Rr + Wbr + Rbr)
//   linear_before_reset = 0: n = g(x·Wh + (r ⊙ h)·Rh + Wbh + Rbh)
//   linear_before_reset ≠ 0: n = g(x·Wh + Wbh + r ⊙ (h·Rh + Rbh))
//   h' = (1 - z) ⊙ n + z ⊙ h
// RNN: h' = f(x·Wi + h·Ri + Wbi + Rbi).
// Clip bounds every gate's input before its activation. GRU with the default activations and no
// clip runs them on row_math.h's vectorized sigmoid and tanh.
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

using recurrent::Act;
using recurrent::Activation;
using recurrent::Geometry;

// Workspace: the projected inputs [S*B, gates*H], one step's gates [B, gates*H], h [B, H]
// and, for GRU, r ⊙ h [B, H].
size_t WorkspaceFloats(const Geometry& g, int64_t gates) {
  return static_cast<size_t>((g.seq * g.batch + g.batch) * gates * g.hidden + 2 * g.batch * g.hidden);
}

template <int64_t kGates>
size_t RecurrentWorkspace(const AttrMap& attrs, std::span<const TensorRef> inputs, std::span<const TensorRef>) {
  const std::optional<Geometry> g = recurrent::WorkspaceGeometry(attrs, inputs);
  return g ? WorkspaceFloats(*g, kGates) * static_cast<size_t>(g->dirs) * sizeof(float) : 0;
}

// Loads direction d's initial state into h [B, H].
void InitState(const Geometry& g, const KernelCall& call, int64_t d, float* h) {
  const TensorRef* h0 = OptionalInput(call, 5);
  const int64_t H = g.hidden;
  for (int64_t b = 0; b < g.batch; ++b) {
    if (h0) std::memcpy(h + b * H, h0->as<const float>() + g.StateRow(d, b) * H, H * sizeof(float));
    else std::fill(h + b * H, h + (b + 1) * H, 0.0f);
  }
}

// Copies each running batch entry's projected input for `step` into gates [B, n].
void GatherStep(const Geometry& g, const float* gates_x, int64_t step, int64_t d, int64_t n, float* gates) {
  for (int64_t b = 0; b < g.batch; ++b)
    if (const int64_t t = g.Time(step, d, b); t >= 0)
      std::memcpy(gates + b * n, gates_x + g.XRow(t, b) * n, n * sizeof(float));
}

// Writes entry b's new state to Y (when present) at time t.
void StoreY(const Geometry& g, const TensorRef* y, int64_t t, int64_t d, int64_t b, const float* hb) {
  if (y) std::memcpy(y->as<float>() + g.YRow(t, d, b) * g.hidden, hb, g.hidden * sizeof(float));
}

void StoreYh(const Geometry& g, const TensorRef* yh, int64_t d, const float* h) {
  if (!yh) return;
  for (int64_t b = 0; b < g.batch; ++b)
    std::memcpy(yh->as<float>() + g.StateRow(d, b) * g.hidden, h + b * g.hidden, g.hidden * sizeof(float));
}

Status GruKernel(const KernelCall& call) {
  constexpr std::string_view kName = "GRU";
  constexpr int64_t kGates = 3;
  Geometry g;
  KILN_RETURN_IF_ERROR(recurrent::ParseGeometry(kName, call, kGates, &g));
  constexpr Act kDefaults[] = {Act::kSigmoid, Act::kTanh};
  Activation acts[4];
  KILN_RETURN_IF_ERROR(recurrent::ParseActivations(kName, call.attrs, kDefaults, static_cast<int>(g.dirs), acts));
  const bool linear_before_reset = call.attrs.GetInt("linear_before_reset", 0) != 0;
  KILN_RETURN_IF_ERROR(CheckWorkspace(call, WorkspaceFloats(g, kGates) * static_cast<size_t>(g.dirs) * sizeof(float), kName));
  const TensorRef* y = OptionalOutput(call, 0);
  const TensorRef* yh = OptionalOutput(call, 1);
  const int64_t H = g.hidden, B = g.batch, S = g.seq, N = kGates * H;
  if (y) std::fill(y->as<float>(), y->as<float>() + y->num_elements, 0.0f);
  const float* bias = OptionalInput(call, 3) ? OptionalInput(call, 3)->as<const float>() : nullptr;

  const RowMath& rows = ActiveRowMath();
  auto run_direction = [&](int64_t d) {  // independent: a part of the workspace each
    float* gates_x = static_cast<float*>(call.workspace) + d * WorkspaceFloats(g, kGates);  // [S*B, 3H]
    float* gates = gates_x + S * B * N;                                                   // [B, 3H]
    float* h = gates + B * N;                                                             // [B, H]
    float* rh = h + B * H;  // [B, H]: r ⊙ h, or h·Rh
    const Activation &f = acts[2 * d], &gact = acts[2 * d + 1];
    const float* rd = call.inputs[2].as<const float>() + d * N * H;
    const float* rbh = bias ? bias + d * 2 * N + N + 2 * H : nullptr;  // R's h-gate bias
    // Without linear_before_reset both h-gate biases sum outside the reset, so R's joins W's.
    recurrent::ProjectInputs(g, call, d, kGates, linear_before_reset ? 2 : 3, gates_x);
    InitState(g, call, d, h);
    const bool plain = kRowMathGates && f.kind == Act::kSigmoid && gact.kind == Act::kTanh && !g.clip;
    for (int64_t step = 0; step < S; ++step) {
      GatherStep(g, gates_x, step, d, N, gates);
      recurrent::AddRecurrent(g, h, rd, 2 * H, gates, N);
      if (plain) {  // the default activations, vectorized: z and r in place, then n
        for (int64_t b = 0; b < B; ++b) rows.sigmoid(gates + b * N, 2 * H);
        if (linear_before_reset) {
          std::fill(rh, rh + B * H, 0.0f);
          recurrent::AddRecurrent(g, h, rd + 2 * H * H, H, rh, H);
          for (int64_t b = 0; b < B; ++b)
            for (int64_t j = 0; j < H; ++j)
              gates[b * N + 2 * H + j] += gates[b * N + H + j] * (rh[b * H + j] + (rbh ? rbh[j] : 0.0f));
        } else {
          for (int64_t b = 0; b < B; ++b)
            for (int64_t j = 0; j < H; ++j) rh[b * H + j] = gates[b * N + H + j] * h[b * H + j];
          recurrent::AddRecurrent(g, rh, rd + 2 * H * H, H, gates + 2 * H, N);
        }
        for (int64_t b = 0; b < B; ++b) {
          const int64_t t = g.Time(step, d, b);
          if (t < 0) continue;
          float* gb = gates + b * N;
          float* hb = h + b * H;
          rows.tanh(gb + 2 * H, H);
          for (int64_t j = 0; j < H; ++j) hb[j] = (1.0f - gb[j]) * gb[2 * H + j] + gb[j] * hb[j];
          StoreY(g, y, t, d, b, hb);
        }
        continue;
      }
      if (linear_before_reset) {
        // rh = h·Rh; Rbh and r apply per element below.
        std::fill(rh, rh + B * H, 0.0f);
        recurrent::AddRecurrent(g, h, rd + 2 * H * H, H, rh, H);
      } else {
        for (int64_t b = 0; b < B; ++b)
          for (int64_t j = 0; j < H; ++j) rh[b * H + j] = f(g.Clip(gates[b * N + H + j])) * h[b * H + j];
        recurrent::AddRecurrent(g, rh, rd + 2 * H * H, H, gates + 2 * H, N);
      }
      for (int64_t b = 0; b < B; ++b) {
        const int64_t t = g.Time(step, d, b);
        if (t < 0) continue;
        const float* gb = gates + b * N;
        float* hb = h + b * H;
        for (int64_t j = 0; j < H; ++j) {
          const float z = f(g.Clip(gb[j]));
          const float r = f(g.Clip(gb[H + j]));
          const float pre =
              linear_before_reset ? gb[2 * H + j] + r * (rh[b * H + j] + (rbh ? rbh[j] : 0.0f)) : gb[2 * H + j];
          const float n = gact(g.Clip(pre));
          hb[j] = (1.0f - z) * n + z * hb[j];
        }
        StoreY(g, y, t, d, b, hb);
      }
    }
    StoreYh(g, yh, d, h);
  };
  ParallelFor(call.threads, g.dirs, 1, [&](int64_t begin, int64_t end) {
    for (int64_t d = begin; d < end; ++d) run_direction(d);
  });
  return Status::Ok();
}

Status RnnKernel(const KernelCall& call) {
  constexpr std::string_view kName = "RNN";
  constexpr int64_t kGates = 1;
  Geometry g;
  KILN_RETURN_IF_ERROR(recurrent::ParseGeometry(kName, call, kGates, &g));
  constexpr Act kDefaults[] = {Act::kTanh};
  Activation acts[2];
  KILN_RETURN_IF_ERROR(recurrent::ParseActivations(kName, call.attrs, kDefaults, static_cast<int>(g.dirs), acts));
  KILN_RETURN_IF_ERROR(CheckWorkspace(call, WorkspaceFloats(g, kGates) * static_cast<size_t>(g.dirs) * sizeof(float), kName));
  const TensorRef* y = OptionalOutput(call, 0);
  const TensorRef* yh = OptionalOutput(call, 1);
  const int64_t H = g.hidden, B = g.batch, S = g.seq;
  if (y) std::fill(y->as<float>(), y->as<float>() + y->num_elements, 0.0f);

  auto run_direction = [&](int64_t d) {  // independent: a part of the workspace each
    float* gates_x = static_cast<float*>(call.workspace) + d * WorkspaceFloats(g, kGates);  // [S*B, H]
    float* gates = gates_x + S * B * H;                                                   // [B, H]
    float* h = gates + B * H;                                                             // [B, H]
    const Activation& f = acts[d];
    recurrent::ProjectInputs(g, call, d, kGates, kGates, gates_x);
    InitState(g, call, d, h);
    for (int64_t step = 0; step < S; ++step) {
      GatherStep(g, gates_x, step, d, H, gates);
      recurrent::AddRecurrent(g, h, call.inputs[2].as<const float>() + d * H * H, H, gates, H);
      for (int64_t b = 0; b < B; ++b) {
        const int64_t t = g.Time(step, d, b);
        if (t < 0) continue;
        for (int64_t j = 0; j < H; ++j) h[b * H + j] = f(g.Clip(gates[b * H + j]));
        StoreY(g, y, t, d, b, h + b * H);
      }
    }
    StoreYh(g, yh, d, h);
  };
  ParallelFor(call.threads, g.dirs, 1, [&](int64_t begin, int64_t end) {
    for (int64_t d = begin; d < end; ++d) run_direction(d);
  });
  return Status::Ok();
}

constexpr KernelDef kKernels[] = {
    {"GRU", GruKernel, RecurrentWorkspace<3>},
    {"RNN", RnnKernel, RecurrentWorkspace<1>},
};

}  // namespace

std::span<const KernelDef> RnnKernels() { return KeptKernels<kKernels>(); }

}  // namespace kiln::cpu
