// What the recurrent kernels (LSTM in lstm.cc, GRU and RNN in rnn.cc) share: the
// `activations` list, the two layouts with their shape checks, sequence_lens, clip, and the
// input projection X·W^T + biases for every step as one SGEMM.
// Layout 0: X [seq, batch, input], Y [seq, dirs, batch, H], states [dirs, batch, H].
// Layout 1: X [batch, seq, input], Y [batch, seq, dirs, H], states [batch, dirs, H].
// W is [dirs, gates*H, input], R [dirs, gates*H, H], B [dirs, 2*gates*H] (W's biases, then R's).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "runtime/kernels/kernel.h"

namespace kiln::cpu::recurrent {

enum class Act {
  kSigmoid, kTanh, kRelu, kHardSigmoid, kLeakyRelu, kThresholdedRelu, kScaledTanh, kAffine, kElu, kSoftsign, kSoftplus
};

struct Activation {
  Act kind = Act::kSigmoid;
  float alpha = 0, beta = 0;
  float operator()(float x) const;
};

// ONNX's `activations` is a string list, which AttrMap cannot hold; the importer passes a
// non-default list as one comma-separated string (e.g. "Sigmoid,Tanh,Tanh"), names compared
// case-insensitively. `defaults` is one direction's list; `acts` receives per_dir * dirs
// entries. activation_alpha/beta are consumed in order by the functions that take them.
Status ParseActivations(std::string_view op, const AttrMap& attrs, std::span<const Act> defaults, int dirs,
                        std::span<Activation> acts);

struct Geometry {
  bool batch_first = false;
  bool reverse = false;  // direction "reverse" (bidirectional runs direction 1 reversed)
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, dirs = 1;
  const TensorRef* lens = nullptr;  // sequence_lens, checked to lie in [0, seq]
  std::optional<float> clip;

  int64_t XRow(int64_t t, int64_t b) const { return batch_first ? b * seq + t : t * batch + b; }
  int64_t YRow(int64_t t, int64_t d, int64_t b) const {
    return batch_first ? (b * seq + t) * dirs + d : (t * dirs + d) * batch + b;
  }
  int64_t StateRow(int64_t d, int64_t b) const { return batch_first ? b * dirs + d : d * batch + b; }
  std::array<int64_t, 3> StateDims() const {
    return batch_first ? std::array<int64_t, 3>{batch, dirs, hidden} : std::array<int64_t, 3>{dirs, batch, hidden};
  }
  // The time index that batch entry b handles at `step` of direction d, or -1 when b's
  // sequence has ended. A reversed direction starts at each entry's own last step.
  int64_t Time(int64_t step, int64_t d, int64_t b) const;
  float Clip(float v) const { return clip ? (v < -*clip ? -*clip : v > *clip ? *clip : v) : v; }
};

// Reads layout, direction, hidden_size and clip, and checks X (0), W (1), R (2), B (3),
// sequence_lens (4), initial_h (5), Y (output 0) and Y_h (output 1) for `gates` gates.
Status ParseGeometry(std::string_view op, const KernelCall& call, int64_t gates, Geometry* g);

// Workspace sizing needs seq, batch and hidden before the kernel runs; 0 where the inputs
// are malformed (the kernel then reports the error).
std::optional<Geometry> WorkspaceGeometry(const AttrMap& attrs, std::span<const TensorRef> inputs);

// Checks that an optional tensor is float32 with exactly `dims`.
Status CheckShape(std::string_view op, const TensorRef* t, std::span<const int64_t> dims, const char* what);
inline Status CheckShape(std::string_view op, const TensorRef* t, std::initializer_list<int64_t> dims,
                         const char* what) {
  return CheckShape(op, t, std::span<const int64_t>(dims.begin(), dims.size()), what);
}

// out [seq*batch, gates*H] (rows as X's) = X·W_d^T + W's bias + R's bias for the first
// `r_bias_gates` gates (GRU with linear_before_reset adds R's h bias after the reset gate).
void ProjectInputs(const Geometry& g, const KernelCall& call, int64_t d, int64_t gates, int64_t r_bias_gates,
                   float* out);

// out [batch, n] += h [batch, H] · r^T, r [n, H] row-major: on Sgemm, or at batch 1 on gemv.h's
// product where the CPU has it.
void AddRecurrent(const Geometry& g, const float* h, const float* r, int64_t n, float* out, int64_t out_stride);

}  // namespace kiln::cpu::recurrent
