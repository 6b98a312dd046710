// tools/io/kv_decoder.h: a decoder exported with a KV cache, and greedy generation through it,
// for `kiln bench --generate` (tools/io/bench_runner.h). The layout is Hugging Face Optimum's and
// onnxruntime-genai's: inputs input_ids int64 [batch, seq], attention_mask int64 [batch, past +
// seq] and position_ids int64 [batch, seq] (both optional), past_key_values.N.key and .value
// [batch, heads, past, head_dim] for each layer N; outputs logits float32 [batch, seq, vocab] and
// present.N.key and .value [batch, heads, past + seq, head_dim]. samples/generate does the same
// with the public runtime API alone, as a user would write it.
//
//   KILN_ASSIGN_OR_RETURN(kiln::io::KvDecoder d, kiln::io::FindKvDecoder(model));
//   KILN_ASSIGN_OR_RETURN(std::vector<int64_t> ids, kiln::io::Generate(ctx, model, d, {10, 20}, 8, nullptr));
//
// Thread-compatible.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "kiln/runtime.h"

namespace kiln::io {

// Where each tensor of a KV decoder is among a model's inputs and outputs.
struct KvDecoder {
  int input_ids = -1, attention_mask = -1, position_ids = -1;  // inputs; -1: absent (optional ones)
  int logits = -1;                                             // output
  // Per layer and kind (key, value): (past_key_values input, present output).
  std::vector<std::pair<int, int>> cache;
  std::vector<std::vector<int64_t>> cache_dims;  // per cache pair: {heads, head_dim}, constants
  DType cache_dtype = DType::kFloat32;
  int64_t vocab = 0;  // logits' last dim, a constant
};

// The model's KV decoder layout. kInvalidArgument when the model is not one: the message says
// what was expected, lists the inputs and outputs found, and names each problem (a missing
// present.N.value, an input_ids that is not int64 [batch, seq], an output of another name).
Result<KvDecoder> FindKvDecoder(const Model& model);

// Greedy generation at batch 1: runs `prompt` (>= 1 ids in [0, vocab)) with an empty cache, then
// `tokens` - 1 more calls of one token each, the argmax of the last logits fed back with the
// present keys and values as the next past. The cache is bound to the context for the generation
// (ExecutionContext::BindCache, unbound before returning), so each call appends its rows in place;
// where the context refuses that (another backend, an artifact whose present stays a Concat), the
// presents go into caller-owned outputs that become the next call's inputs (the graph's Concat and
// Run's delivery copy the cache; this loop does not). *cache (may be null) is set to which, in
// words. Returns the `tokens` generated ids. `step` (may be empty) is called after each call with
// its index (0: the prompt) and its wall time in ns (Run + Synchronize). Errors: kInvalidArgument
// for an empty prompt, an id out of range or tokens < 1, and those of ExecutionContext::Run and
// Synchronize, unchanged.
Result<std::vector<int64_t>> Generate(ExecutionContext& ctx, const Model& model, const KvDecoder& d,
                                      const std::vector<int64_t>& prompt, int tokens,
                                      const std::function<void(int step, int64_t ns)>& step,
                                      std::string* cache = nullptr);

}  // namespace kiln::io
