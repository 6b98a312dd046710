// Test helper: one call's inputs for Silero VAD (the test data's silero_vad_16k_op15): a chunk of
// 576 samples (512 and the 64 of context the model expects), all `sample`, a zero LSTM state and
// the 16 kHz rate, as host views.
#pragma once

#include <cstdint>
#include <vector>

#include "kiln/tensor.h"

namespace kiln::testing {

struct SileroCall {
  explicit SileroCall(float sample = 0.01f) : input(576, sample) {}
  std::vector<float> input;
  std::vector<float> state = std::vector<float>(2 * 128, 0.0f);
  int64_t sr = 16000;
  std::vector<TensorView> views() {
    return {TensorView::Host(input.data(), DType::kFloat32, {1, 576}),
            TensorView::Host(state.data(), DType::kFloat32, {2, 1, 128}), TensorView::Host(&sr, DType::kInt64, {})};
  }
};

}  // namespace kiln::testing
