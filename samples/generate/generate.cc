// generate: greedy generation with a compiled GPT-2-class decoder exported with a KV cache.
//
//   kiln compile gpt2_kv.onnx -o gpt2_kv.kiln      # one entry: every past length, 0 included
//   generate gpt2_kv.kiln --prompt 10,20,30,40,50 --tokens 8 [--threads T] [--warmup]
//
// The model takes input_ids [batch, seq], attention_mask [batch, past + seq] (optional),
// position_ids [batch, seq] (optional) and past_key_values.N.key/.value [batch, heads, past,
// head_dim] for each layer N, and gives logits [batch, seq, vocab] and present.N.key/.value
// [batch, heads, past + seq, head_dim] (the Hugging Face Optimum / onnxruntime-genai layout).
// There is no tokenizer: the prompt is a list of token ids. The prompt runs with an empty cache
// (past length 0); then each step feeds the argmax of the last logits back, one token at a time,
// with the present keys and values of the step before as its past. It prints, per generated
// token, its id, its logit and the margin to the second-best logit (random weights give near
// ties, where another implementation's rounding may pick the other id), then the time to the
// first token and the time per generated token, in ms of wall clock. Batch 1, CPU backend.
// --warmup generates once before the timed generation, so that the times leave out the context's
// one-time work at its first Run and at each shape it first sees (the first time to first token
// of a process is mostly that).
//
// Copies of the cache per step: none. The sample binds one buffer per layer and kind, each sized
// for the whole generation, to the context (ExecutionContext::BindCache, onnxruntime-genai's
// past_present_share_buffer): a step's past view and present view both point at it, and Run
// writes only the step's new rows, after the past ones. Where the context refuses the binding
// (an artifact whose present = Concat(past, new) stays written out, or another backend), the
// sample says so and holds two sets of buffers instead: a step reads its past from one, Run
// delivers the present into the other, and they swap; the graph's Concat and Run's delivery then
// copy the whole cache at each step.
// Uses only the public runtime API.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kiln/runtime.h"

namespace {

using Clock = std::chrono::steady_clock;

int Fail(const char* what, const kiln::Status& st) {
  std::fprintf(stderr, "generate: %s: %s\n", what, st.ToString().c_str());
  return 1;
}

int Usage() {
  std::fprintf(stderr, "usage: generate MODEL.kiln --prompt ID,ID,... --tokens N [--threads T] [--warmup]\n"
                       "  MODEL: a decoder exported with a KV cache; the prompt is token ids (no tokenizer);\n"
                       "  N >= 1 tokens are generated greedily; T: CPU threads, 0 (the default) for one per core;\n"
                       "  --warmup: generate once, untimed, before the timed generation\n");
  return 2;
}

// "input_ids int64 [batch, seq]": a model input or output as the artifact declares it.
std::string Describe(const kiln::TensorInfo& t) {
  std::string s = t.name + " " + std::string(kiln::DTypeName(t.dtype)) + " [";
  for (size_t d = 0; d < t.shape.size(); ++d)
    s += (d ? ", " : "") + (t.shape[d].value >= 0 ? std::to_string(t.shape[d].value) : t.shape[d].symbol);
  return s + "]";
}

// Where each tensor of a KV decoder is among the model's inputs and outputs (-1: absent).
struct Layout {
  size_t num_inputs = 0, num_outputs = 0;
  int input_ids = -1, attention_mask = -1, position_ids = -1, logits = -1;
  std::vector<int> past[2], present[2];  // [0] keys, [1] values; one per layer
  int64_t heads = 0, head_dim = 0, vocab = 0;
};

// Parses "past_key_values.N.key" (prefix "past_key_values.") into layer N and 0 (key) or 1 (value).
bool CacheName(const std::string& name, const std::string& prefix, int* layer, int* kind) {
  if (name.rfind(prefix, 0) != 0) return false;
  const char* p = name.c_str() + prefix.size();
  char* end = nullptr;
  const long n = std::strtol(p, &end, 10);
  if (end == p || n < 0 || n > 4096) return false;
  *layer = static_cast<int>(n);
  if (std::strcmp(end, ".key") == 0) *kind = 0;
  else if (std::strcmp(end, ".value") == 0) *kind = 1;
  else return false;
  return true;
}

// Sets `slot` to `index`; false when it was set already (a name given twice).
bool Claim(int& slot, int index) {
  const bool free = slot < 0;
  slot = index;
  return free;
}

// Sets `slots[layer]` to `index`, growing `slots`; false when it was set already.
bool Claim(std::vector<int>& slots, int layer, int index) {
  if (slots.size() <= static_cast<size_t>(layer)) slots.resize(layer + 1, -1);
  return Claim(slots[layer], index);
}

// Checks that the model is a KV decoder and finds its tensors. On failure, `error` says what was
// expected and what the model has.
bool FindLayout(const kiln::Model& model, Layout* l, std::string* error) {
  const auto& in = model.inputs();
  const auto& out = model.outputs();
  std::vector<std::string> problems;
  l->num_inputs = in.size();
  l->num_outputs = out.size();
  for (size_t i = 0; i < in.size(); ++i) {
    const kiln::TensorInfo& t = in[i];
    const int index = static_cast<int>(i);
    int layer = 0, kind = 0;
    bool once = true;
    if (t.name == "input_ids") once = Claim(l->input_ids, index);
    else if (t.name == "attention_mask") once = Claim(l->attention_mask, index);
    else if (t.name == "position_ids") once = Claim(l->position_ids, index);
    else if (CacheName(t.name, "past_key_values.", &layer, &kind)) once = Claim(l->past[kind], layer, index);
    else problems.push_back("unexpected input " + Describe(t));
    if (!once) problems.push_back("input " + t.name + " twice");
    const bool ids = t.name == "input_ids" || t.name == "attention_mask" || t.name == "position_ids";
    if (ids && (t.dtype != kiln::DType::kInt64 || t.shape.size() != 2))
      problems.push_back("input " + Describe(t) + ", expected int64 of rank 2");
  }
  for (size_t i = 0; i < out.size(); ++i) {
    const kiln::TensorInfo& t = out[i];
    const int index = static_cast<int>(i);
    int layer = 0, kind = 0;
    bool once = true;
    if (t.name == "logits") once = Claim(l->logits, index);
    else if (CacheName(t.name, "present.", &layer, &kind)) once = Claim(l->present[kind], layer, index);
    if (!once) problems.push_back("output " + t.name + " twice");
  }
  if (l->input_ids < 0) problems.push_back("no input input_ids");
  if (l->logits < 0) {
    problems.push_back("no output logits");
  } else {
    const kiln::TensorInfo& t = out[l->logits];
    if (t.dtype != kiln::DType::kFloat32 || t.shape.size() != 3 || t.shape[2].value < 1)
      problems.push_back("output " + Describe(t) + ", expected float32 [batch, seq, vocab] with a constant vocab");
    else
      l->vocab = t.shape[2].value;
  }
  // One layer at least: a model without past inputs is reported as missing past_key_values.0.
  const size_t layers = std::max({l->past[0].size(), l->past[1].size(), size_t{1}});
  const char* kinds[] = {"key", "value"};
  for (int k = 0; k < 2; ++k) {
    if (l->present[k].size() > layers)
      problems.push_back("output present." + std::to_string(l->present[k].size() - 1) + "." + kinds[k] +
                         " has no past_key_values input");
    l->past[k].resize(layers, -1);
    l->present[k].resize(layers, -1);
  }
  for (size_t n = 0; n < layers; ++n)
    for (int k = 0; k < 2; ++k) {
      const std::string layer_kind = std::to_string(n) + "." + kinds[k];
      if (l->past[k][n] < 0) problems.push_back("no input past_key_values." + layer_kind);
      if (l->present[k][n] < 0) problems.push_back("no output present." + layer_kind);
      if (l->past[k][n] < 0) continue;
      const kiln::TensorInfo& t = in[l->past[k][n]];
      const bool same = l->heads == 0 || (t.shape.size() == 4 && t.shape[1].value == l->heads &&
                                          t.shape[3].value == l->head_dim);
      if (t.dtype != kiln::DType::kFloat32 || t.shape.size() != 4 || t.shape[1].value < 1 || t.shape[3].value < 1 ||
          !same) {
        problems.push_back("input " + Describe(t) + ", expected float32 [batch, heads, past, head_dim] with the "
                           "same constant heads and head_dim in every layer");
        continue;
      }
      l->heads = t.shape[1].value;
      l->head_dim = t.shape[3].value;
    }
  if (problems.empty()) return true;
  *error = "not a decoder with a KV cache: expected inputs input_ids, past_key_values.N.key and "
           "past_key_values.N.value for N = 0 .. layers - 1 (attention_mask and position_ids optional), and outputs "
           "logits, present.N.key and present.N.value; found inputs";
  for (const kiln::TensorInfo& t : in) *error += " " + Describe(t) + (&t == &in.back() ? ";" : ",");
  *error += " outputs";
  for (const kiln::TensorInfo& t : out) *error += " " + Describe(t) + (&t == &out.back() ? "" : ",");
  for (const std::string& p : problems) *error += "\n  " + p;
  return false;
}

// Parses "1,2,3" into ids in [0, vocab); false with `error` set otherwise.
bool ParseIds(const char* text, int64_t vocab, std::vector<int64_t>* ids, std::string* error) {
  const char* p = text;
  while (true) {
    char* end = nullptr;
    const long long v = std::strtoll(p, &end, 10);
    if (end == p || v < 0 || v >= vocab) {
      *error = "--prompt '" + std::string(text) + "': token " + std::to_string(ids->size() + 1) +
               " is not an id in 0 .. " + std::to_string(vocab - 1) + " (the model's vocabulary)";
      return false;
    }
    ids->push_back(v);
    if (*end == '\0') return true;
    if (*end != ',') {
      *error = "--prompt '" + std::string(text) + "': expected a comma after token " + std::to_string(ids->size());
      return false;
    }
    p = end + 1;
  }
}

// Rows per head of a cache buffer: the longest past + seq of a generation (the last token is not
// fed back).
int64_t Capacity(const std::vector<int64_t>& prompt, long tokens) { return static_cast<int64_t>(prompt.size()) + tokens - 1; }

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

struct Generation {
  std::vector<int64_t> ids;     // the generated tokens
  std::vector<float> logit;     // each one's logit
  std::vector<float> margin;    // its logit less the second largest
  std::vector<double> step_ms;  // each one's time: the Run that gave its logits, and argmax
};

// Runs the prompt on an empty cache, then tokens - 1 steps of one token each, into `g`. Returns
// 0, or 1 after printing why a Run failed.
int Generate(kiln::ExecutionContext& ctx, const Layout& l, const std::vector<int64_t>& prompt, long tokens,
             bool bound, Generation* g) {
  *g = {};
  g->ids.reserve(tokens), g->logit.reserve(tokens), g->margin.reserve(tokens), g->step_ms.reserve(tokens);
  // The cache: one buffer per layer and kind, each for the longest sequence; when it is not
  // bound, two sets of them (the past of a step, its present), `cur` the set that holds the past.
  const int64_t prompt_len = static_cast<int64_t>(prompt.size());
  const int64_t max_total = Capacity(prompt, tokens);
  const size_t layers = l.past[0].size();
  std::vector<std::vector<float>> storage((bound ? 1 : 2) * 2 * layers,
                                          std::vector<float>(l.heads * max_total * l.head_dim));
  auto buffer = [&](int set, int kind, size_t n) { return storage[(set * 2 + kind) * layers + n].data(); };
  std::vector<float> logits(prompt_len * l.vocab);
  std::vector<int64_t> mask(max_total, 1), positions(prompt_len);
  for (int64_t i = 0; i < prompt_len; ++i) positions[i] = i;
  std::vector<kiln::TensorView> inputs(l.num_inputs), outputs(l.num_outputs);
  int cur = 0;
  int64_t past = 0;
  for (long k = 0; k < tokens; ++k) {
    const auto start = Clock::now();
    const int64_t seq = k == 0 ? prompt_len : 1, total = past + seq;
    const int64_t* step_ids = k == 0 ? prompt.data() : &g->ids.back();
    inputs[l.input_ids] = kiln::TensorView::Host(step_ids, kiln::DType::kInt64, {1, seq});
    if (l.attention_mask >= 0)
      inputs[l.attention_mask] = kiln::TensorView::Host(mask.data(), kiln::DType::kInt64, {1, total});
    if (l.position_ids >= 0) {
      if (k > 0) positions[0] = past;
      inputs[l.position_ids] = kiln::TensorView::Host(positions.data(), kiln::DType::kInt64, {1, seq});
    }
    outputs[l.logits] = kiln::TensorView::Host(logits.data(), kiln::DType::kFloat32, {1, seq, l.vocab});
    for (size_t n = 0; n < layers; ++n)
      for (int kind = 0; kind < 2; ++kind) {
        inputs[l.past[kind][n]] =
            kiln::TensorView::Host(buffer(cur, kind, n), kiln::DType::kFloat32, {1, l.heads, past, l.head_dim});
        outputs[l.present[kind][n]] = kiln::TensorView::Host(buffer(bound ? cur : 1 - cur, kind, n),
                                                             kiln::DType::kFloat32, {1, l.heads, total, l.head_dim});
      }
    kiln::Status st = ctx.Run(inputs, outputs);
    if (!st.ok()) return Fail(("run (step " + std::to_string(k) + ", past " + std::to_string(past) + ")").c_str(), st);
    // Greedy: the first of the largest logits of the last position, and the second largest.
    const float* last = logits.data() + (seq - 1) * l.vocab;
    int64_t best = 0;
    float second = -INFINITY;
    for (int64_t v = 1; v < l.vocab; ++v) {
      if (last[v] > last[best]) second = last[best], best = v;
      else if (last[v] > second) second = last[v];
    }
    g->step_ms.push_back(Ms(Clock::now() - start));
    g->ids.push_back(best);
    g->logit.push_back(last[best]);
    g->margin.push_back(last[best] - second);
    if (!bound) cur = 1 - cur;
    past = total;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return Usage();
  const char* prompt_text = nullptr;
  long tokens = 0, threads = 0;
  bool warmup = false;
  for (int i = 2; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--warmup") {
      warmup = true;
      continue;
    }
    if (i + 1 >= argc) return Usage();
    const char* value = argv[++i];
    char* end = nullptr;
    if (flag == "--prompt") prompt_text = value;
    else if (flag == "--tokens") tokens = std::strtol(value, &end, 10);
    else if (flag == "--threads") threads = std::strtol(value, &end, 10);
    else return Usage();
    if (end && (*end != '\0' || end == value)) return Usage();
  }
  if (!prompt_text || tokens < 1 || threads < 0) return Usage();

  auto model = kiln::Model::Load(argv[1]);
  if (!model.ok()) return Fail("load", model.status());
  Layout l;
  std::string error;
  if (!FindLayout(*model, &l, &error)) {
    std::fprintf(stderr, "generate: %s: %s\n", argv[1], error.c_str());
    return 1;
  }
  std::vector<int64_t> prompt;
  if (!ParseIds(prompt_text, l.vocab, &prompt, &error)) {
    std::fprintf(stderr, "generate: %s\n", error.c_str());
    return 2;
  }
  kiln::ContextOptions options;
  options.device = kiln::Device::kCpu;  // the cache lives in host buffers
  options.cpu.threads = static_cast<int>(threads);
  auto ctx = kiln::ExecutionContext::Create(*model, options);
  if (!ctx.ok()) return Fail("create context", ctx.status());

  // Each present appended in place to its past's buffer.
  std::vector<kiln::ExecutionContext::CacheBinding> caches;
  for (size_t n = 0; n < l.past[0].size(); ++n)
    for (int kind = 0; kind < 2; ++kind) caches.push_back({l.past[kind][n], l.present[kind][n], Capacity(prompt, tokens)});
  const kiln::Status bound = ctx->BindCache(caches);

  Generation g;
  if (warmup && Generate(*ctx, l, prompt, tokens, bound.ok(), &g) != 0) return 1;
  if (Generate(*ctx, l, prompt, tokens, bound.ok(), &g) != 0) return 1;

  std::printf("model: %zu layers, %lld heads of %lld, vocabulary %lld; %s\n", l.past[0].size(), (long long)l.heads,
              (long long)l.head_dim, (long long)l.vocab, ctx->device_note().c_str());
  std::printf("prompt: %zu ids; %ld tokens generated; threads %ld (0: one per core)\n", prompt.size(), tokens, threads);
  if (bound.ok())
    std::printf("kv cache: appended in place, %lld rows per head (ExecutionContext::BindCache)\n",
                (long long)Capacity(prompt, tokens));
  else
    std::printf("kv cache: copied at each step (BindCache: %s)\n", bound.ToString().c_str());
  for (size_t k = 0; k < g.ids.size(); ++k)
    std::printf("token %zu: id %lld, logit %.6f, margin %.6f\n", k + 1, (long long)g.ids[k], g.logit[k], g.margin[k]);
  std::printf("generated:");
  for (size_t k = 0; k < g.ids.size(); ++k) std::printf("%s%lld", k ? "," : " ", (long long)g.ids[k]);
  std::printf("\ntime to first token: %.3f ms (the prompt's Run and argmax%s)\n", g.step_ms[0],
              warmup ? "" : "; the context's first Run, with its one-time setup");
  if (tokens > 1) {
    double sum = 0;
    for (size_t k = 1; k < g.step_ms.size(); ++k) sum += g.step_ms[k];
    std::printf("time per generated token: %.3f ms mean, %.3f ms min, %.3f ms max over %ld steps (Run and argmax)\n",
                sum / (tokens - 1), *std::min_element(g.step_ms.begin() + 1, g.step_ms.end()),
                *std::max_element(g.step_ms.begin() + 1, g.step_ms.end()), tokens - 1);
  }
  const kiln::Stats& s = ctx->stats();
  std::printf("entries%s:", warmup ? " (the warm-up's calls included)" : "");
  for (size_t e = 0; e < s.entries.size(); ++e)
    std::printf("%s '%s' %llu calls", e ? "," : "", model->entries()[e].name.c_str(),
                (unsigned long long)s.entries[e].hits);
  std::printf("\n");
  return 0;
}
