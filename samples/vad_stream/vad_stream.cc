// vad_stream: voice activity detection with a compiled Silero VAD model, streaming.
//
//   kiln compile silero_vad.onnx -o vad.kiln       # the silero-vad wheel's model, 16 and 8 kHz
//   sox speech.wav -r 16000 -c 1 -e float -b 32 speech.f32
//   vad_stream vad.kiln speech.f32 [16000|8000]
//
// Reads mono float32 PCM at 16 kHz (or 8 kHz), feeds it to the model in 32 ms chunks (512 new
// samples plus the previous 64 as context; 256 and 32 at 8 kHz), passes the sample rate as
// Silero's `sr` input as its own API does (the model's If on it picks the network: Kiln compiled
// one entry per rate, and the prologue picks it from sr's value), carries the LSTM state from
// call to call, and prints the speech segments found and the runtime's statistics. Uses only
// the public runtime API.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <vector>

#include "kiln/runtime.h"

namespace {

constexpr float kOnThreshold = 0.5f;   // Silero's defaults
constexpr float kOffThreshold = 0.35f;
constexpr int kMinSilenceChunks = 3;    // ~100 ms

int Fail(const char* what, const kiln::Status& st) {
  std::fprintf(stderr, "vad_stream: %s: %s\n", what, st.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const int rate = argc == 4 ? std::atoi(argv[3]) : 16000;
  if ((argc != 3 && argc != 4) || (rate != 16000 && rate != 8000)) {
    std::fprintf(stderr, "usage: vad_stream MODEL.kiln AUDIO.f32 [RATE] (mono float32 PCM; RATE 16000, the "
                         "default, or 8000)\n");
    return 2;
  }
  const int kChunk = rate / 1000 * 32, kContext = rate / 250;  // 32 ms; 4 ms of context
  std::ifstream in(argv[2], std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "vad_stream: cannot open %s\n", argv[2]);
    return 1;
  }
  std::vector<char> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> audio(raw.size() / sizeof(float));
  std::copy(raw.begin(), raw.begin() + audio.size() * sizeof(float), reinterpret_cast<char*>(audio.data()));

  auto model = kiln::Model::Load(argv[1]);
  if (!model.ok()) return Fail("load", model.status());
  auto ctx = kiln::ExecutionContext::Create(*model, {});
  if (!ctx.ok()) return Fail("create context", ctx.status());

  std::vector<float> window(kContext + kChunk, 0.0f);
  std::vector<float> state(2 * 1 * 128, 0.0f);
  int64_t sample_rate = rate;
  std::vector<float> probs;
  const int chunks = static_cast<int>(audio.size() / kChunk);
  for (int c = 0; c < chunks; ++c) {
    std::copy(window.end() - kContext, window.end(), window.begin());  // the last samples become context
    std::copy(audio.begin() + c * kChunk, audio.begin() + (c + 1) * kChunk, window.begin() + kContext);
    kiln::TensorView inputs[] = {
        kiln::TensorView::Host(window.data(), kiln::DType::kFloat32, {1, kContext + kChunk}),
        kiln::TensorView::Host(state.data(), kiln::DType::kFloat32, {2, 1, 128}),
        kiln::TensorView::Host(&sample_rate, kiln::DType::kInt64, {}),
    };
    std::vector<kiln::TensorView> outputs;
    kiln::Status st = ctx->Run(inputs, outputs);
    if (!st.ok()) return Fail("run", st);
    probs.push_back(*static_cast<const float*>(outputs[0].data));
    std::copy_n(static_cast<const float*>(outputs[1].data), state.size(), state.begin());
  }

  std::printf("audio: %.2f s, %d chunks of %d ms\n", audio.size() / double(rate), chunks, kChunk * 1000 / rate);
  std::printf("speech probability per 32 ms chunk ('#' >= %.2f, '+' >= %.2f, '.' below):\n", kOnThreshold,
              kOffThreshold);
  constexpr int kPerLine = 100;  // 3.2 s of audio per line
  for (int c = 0; c < chunks; ++c) {
    if (c % kPerLine == 0) std::printf("%s%6.2f s | ", c ? "\n" : "", c * kChunk / double(rate));
    std::putchar(probs[c] >= kOnThreshold ? '#' : probs[c] >= kOffThreshold ? '+' : '.');
  }
  std::printf("\n");
  bool speaking = false;
  int start = 0, silence = 0, segments = 0;
  for (int c = 0; c <= chunks; ++c) {
    float p = c < chunks ? probs[c] : 0.0f;
    if (!speaking && p >= kOnThreshold) { speaking = true; start = c; silence = 0; }
    else if (speaking && p < kOffThreshold) {
      if (++silence >= kMinSilenceChunks || c == chunks) {
        int end = c - silence + 1;
        std::printf("speech segment %d: %.2f s - %.2f s (peak probability %.3f)\n", ++segments,
                    start * kChunk / double(rate), end * kChunk / double(rate),
                    *std::max_element(probs.begin() + start, probs.begin() + end));
        speaking = false;
      }
    } else if (speaking) silence = 0;
  }
  if (segments == 0) std::printf("no speech found\n");

  const kiln::Stats& s = ctx->stats();
  std::printf("stats: %llu calls, %llu cache hits, %llu misses; last call: host %.1f us, prologue %.2f us, "
              "computation %.1f us; mean computation %.1f us\n",
              (unsigned long long)s.calls, (unsigned long long)s.cache_hits, (unsigned long long)s.cache_misses,
              s.last_host_time() / 1e3, s.last_prologue_time() / 1e3, s.last_computation_time() / 1e3,
              s.calls ? s.total_computation_ns / 1e3 / s.calls : 0.0);
  return 0;
}
