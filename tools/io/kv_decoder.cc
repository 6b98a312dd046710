#include "tools/io/kv_decoder.h"

#include <algorithm>
#include <charconv>
#include <string>
#include <string_view>

#include "runtime/clock.h"

namespace kiln::io {
namespace {

// "input_ids int64 [batch, seq]".
std::string Describe(const TensorInfo& t) {
  std::string s = t.name + " " + std::string(DTypeName(t.dtype)) + " [";
  for (size_t d = 0; d < t.shape.size(); ++d)
    s += (d ? ", " : "") + (t.shape[d].value >= 0 ? std::to_string(t.shape[d].value) : t.shape[d].symbol);
  return s + "]";
}

// "past_key_values.3.value" with `prefix` "past_key_values.": layer 3, kind 1 (0: key, 1: value).
bool CacheName(std::string_view name, std::string_view prefix, int* layer, int* kind) {
  if (name.substr(0, prefix.size()) != prefix) return false;
  name.remove_prefix(prefix.size());
  const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), *layer);
  if (ec != std::errc() || *layer < 0 || *layer > 4096) return false;
  const std::string_view rest(end, static_cast<size_t>(name.data() + name.size() - end));
  *kind = rest == ".key" ? 0 : rest == ".value" ? 1 : -1;
  return *kind >= 0;
}

bool IsFloat(DType t) { return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16; }

}  // namespace

Result<KvDecoder> FindKvDecoder(const Model& model) {
  const std::vector<TensorInfo>& in = model.inputs();
  const std::vector<TensorInfo>& out = model.outputs();
  KvDecoder d;
  std::vector<std::string> problems;
  std::vector<int> past[2], present[2];  // per kind, per layer: input / output index, -1 absent
  auto claim = [&](std::vector<int>& slots, int layer, int index, const std::string& what) {
    if (slots.size() <= static_cast<size_t>(layer)) slots.resize(static_cast<size_t>(layer) + 1, -1);
    if (slots[static_cast<size_t>(layer)] >= 0) problems.push_back(what + " twice");
    slots[static_cast<size_t>(layer)] = index;
  };
  for (int i = 0; i < static_cast<int>(in.size()); ++i) {
    const TensorInfo& t = in[static_cast<size_t>(i)];
    int layer = 0, kind = 0;
    int* slot = t.name == "input_ids" ? &d.input_ids : t.name == "attention_mask" ? &d.attention_mask
                : t.name == "position_ids"                                         ? &d.position_ids
                                                                                  : nullptr;
    if (slot) {
      if (*slot >= 0) problems.push_back("input " + t.name + " twice");
      *slot = i;
      if (t.dtype != DType::kInt64 || t.shape.size() != 2)
        problems.push_back("input " + Describe(t) + ", expected int64 of rank 2");
    } else if (CacheName(t.name, "past_key_values.", &layer, &kind)) {
      claim(past[kind], layer, i, "input " + t.name);
    } else {
      problems.push_back("unexpected input " + Describe(t));
    }
  }
  for (int i = 0; i < static_cast<int>(out.size()); ++i) {
    const TensorInfo& t = out[static_cast<size_t>(i)];
    int layer = 0, kind = 0;
    if (t.name == "logits") {
      d.logits = i;
      if (t.dtype != DType::kFloat32 || t.shape.size() != 3 || t.shape[2].value < 1)
        problems.push_back("output " + Describe(t) + ", expected float32 [batch, seq, vocab] with a constant vocab");
      else
        d.vocab = t.shape[2].value;
    } else if (CacheName(t.name, "present.", &layer, &kind)) {
      claim(present[kind], layer, i, "output " + t.name);
    } else {
      problems.push_back("unexpected output " + Describe(t));
    }
  }
  if (d.input_ids < 0) problems.push_back("no input input_ids");
  if (d.logits < 0) problems.push_back("no output logits");
  const size_t layers = std::max({past[0].size(), past[1].size(), present[0].size(), present[1].size(), size_t{1}});
  const char* kinds[] = {"key", "value"};
  for (size_t n = 0; n < layers; ++n)
    for (int k = 0; k < 2; ++k) {
      const std::string name = std::to_string(n) + "." + kinds[k];
      const int p = n < past[k].size() ? past[k][n] : -1, q = n < present[k].size() ? present[k][n] : -1;
      if (p < 0) problems.push_back("no input past_key_values." + name);
      if (q < 0) problems.push_back("no output present." + name);
      if (p < 0 || q < 0) continue;
      const TensorInfo& t = in[static_cast<size_t>(p)];
      if (!IsFloat(t.dtype) || t.shape.size() != 4 || t.shape[1].value < 1 || t.shape[3].value < 1 ||
          (!d.cache.empty() && t.dtype != d.cache_dtype)) {
        problems.push_back("input " + Describe(t) + ", expected [batch, heads, past, head_dim] with constant heads "
                           "and head_dim, of one float dtype in every layer");
        continue;
      }
      d.cache_dtype = t.dtype;
      d.cache.emplace_back(p, q);
      d.cache_dims.push_back({t.shape[1].value, t.shape[3].value});
    }
  if (problems.empty()) return d;
  std::string message =
      "not a decoder with a KV cache: expected inputs input_ids, past_key_values.N.key and past_key_values.N.value "
      "for N = 0 .. layers - 1 (attention_mask and position_ids optional), and outputs logits, present.N.key and "
      "present.N.value; found inputs";
  for (const TensorInfo& t : in) message += " " + Describe(t) + (&t == &in.back() ? ";" : ",");
  message += " outputs";
  for (const TensorInfo& t : out) message += " " + Describe(t) + (&t == &out.back() ? "" : ",");
  for (const std::string& p : problems) message += "; " + p;
  return InvalidArgument(message);
}

Result<std::vector<int64_t>> Generate(ExecutionContext& ctx, const Model& model, const KvDecoder& d,
                                      const std::vector<int64_t>& prompt, int tokens,
                                      const std::function<void(int step, int64_t ns)>& step, std::string* cache) {
  if (prompt.empty()) return InvalidArgument("generate: the prompt has no ids");
  if (tokens < 1)
    return InvalidArgument("generate: expected at least 1 token to generate, found " + std::to_string(tokens));
  for (int64_t id : prompt)
    if (id < 0 || id >= d.vocab)
      return InvalidArgument("generate: prompt id " + std::to_string(id) + " is not in 0 .. " +
                             std::to_string(d.vocab - 1) + " (the model's vocabulary)");
  const size_t cache_size = DTypeSize(d.cache_dtype);
  const size_t pairs = d.cache.size();
  // The cache buffers, each for the whole generation. Bound to the context (BindCache), one set:
  // each call appends its rows in place. Otherwise two sets: a call reads its past from one and
  // writes its present into the other; they swap after each call.
  const int64_t total = static_cast<int64_t>(prompt.size()) + tokens;
  std::vector<ExecutionContext::CacheBinding> bindings;
  for (const auto& [past, present] : d.cache) bindings.push_back({past, present, total});
  const Status bound = ctx.BindCache(bindings);
  if (cache) *cache = bound.ok() ? "appended in place (ExecutionContext::BindCache)"
                                 : "copied at each step (" + std::string(bound.message()) + ")";
  std::vector<std::vector<uint8_t>> sets[2];
  for (int k = 0; k < (bound.ok() ? 1 : 2); ++k)
    for (size_t c = 0; c < pairs; ++c)
      sets[k].emplace_back(static_cast<size_t>(d.cache_dims[c][0] * total * d.cache_dims[c][1]) * cache_size);
  // Unbinds at return, leaving the context as it was (unbinding cannot fail).
  struct Unbind {
    ExecutionContext* ctx;
    ~Unbind() {
      if (ctx) (void)ctx->BindCache({});
    }
  } unbind{bound.ok() ? &ctx : nullptr};
  std::vector<int64_t> ids = prompt, mask, positions, generated;
  std::vector<float> logits;
  int64_t past = 0;
  for (int s = 0; s < tokens; ++s) {
    const int64_t seq = static_cast<int64_t>(ids.size());
    const std::vector<std::vector<uint8_t>>& read = sets[bound.ok() ? 0 : s % 2];
    std::vector<std::vector<uint8_t>>& write = sets[bound.ok() ? 0 : (s + 1) % 2];
    std::vector<TensorView> inputs(model.inputs().size());
    const int64_t ids_dims[2] = {1, seq};
    inputs[static_cast<size_t>(d.input_ids)] = TensorView::Host(ids.data(), DType::kInt64, ids_dims, 2);
    mask.assign(static_cast<size_t>(past + seq), 1);
    const int64_t mask_dims[2] = {1, past + seq};
    if (d.attention_mask >= 0)
      inputs[static_cast<size_t>(d.attention_mask)] = TensorView::Host(mask.data(), DType::kInt64, mask_dims, 2);
    positions.resize(static_cast<size_t>(seq));
    for (int64_t k = 0; k < seq; ++k) positions[static_cast<size_t>(k)] = past + k;
    if (d.position_ids >= 0)
      inputs[static_cast<size_t>(d.position_ids)] = TensorView::Host(positions.data(), DType::kInt64, ids_dims, 2);
    std::vector<TensorView> outputs(model.outputs().size());
    logits.resize(static_cast<size_t>(seq * d.vocab));
    const int64_t logits_dims[3] = {1, seq, d.vocab};
    outputs[static_cast<size_t>(d.logits)] = TensorView::Host(logits.data(), DType::kFloat32, logits_dims, 3);
    std::vector<std::vector<int64_t>> cache_dims(2 * pairs);
    for (size_t c = 0; c < pairs; ++c) {
      cache_dims[2 * c] = {1, d.cache_dims[c][0], past, d.cache_dims[c][1]};
      cache_dims[2 * c + 1] = {1, d.cache_dims[c][0], past + seq, d.cache_dims[c][1]};
      inputs[static_cast<size_t>(d.cache[c].first)] =
          TensorView::Host(read[c].data(), d.cache_dtype, cache_dims[2 * c].data(), 4);
      outputs[static_cast<size_t>(d.cache[c].second)] =
          TensorView::Host(write[c].data(), d.cache_dtype, cache_dims[2 * c + 1].data(), 4);
    }
    const int64_t start = NowNs();
    KILN_RETURN_IF_ERROR(ctx.Run(inputs, outputs));
    KILN_RETURN_IF_ERROR(ctx.Synchronize());
    const int64_t ns = NowNs() - start;
    if (step) step(s, ns);
    const float* last = logits.data() + (seq - 1) * d.vocab;
    const int64_t next = std::max_element(last, last + d.vocab) - last;
    generated.push_back(next);
    past += seq;
    ids.assign(1, next);
  }
  return generated;
}

}  // namespace kiln::io
