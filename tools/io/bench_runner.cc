#include "tools/io/bench_runner.h"

#include "tools/io/memcpy_bandwidth.h"

#include <sys/resource.h>

#include <charconv>
#include <deque>
#include <random>

#include "tools/io/kv_decoder.h"
#include "tools/io/random_inputs.h"
#include "kiln/tensor_files.h"
#include "runtime/clock.h"

namespace kiln::io {
namespace {

Result<std::vector<HostTensor>> PrepareInputs(const BenchConfig& config, const Model& model) {
  if (config.random == !config.inputs_dir.empty())
    return InvalidArgument("give exactly one of an input folder (--inputs DIR) and random inputs (--random)");
  if (!config.random) {
    if (!config.shapes.empty()) return InvalidArgument("--shape applies to random inputs only (--random)");
    std::vector<std::string> names;
    for (const TensorInfo& t : model.inputs()) names.push_back(t.name);
    return ReadInputDir(config.inputs_dir, names);
  }
  KILN_ASSIGN_OR_RETURN(auto shapes, ResolveInputShapes(model.inputs(), model.entries(), config.shapes));
  return RandomInputs(model.inputs(), shapes, config.seed);
}

// One call as the benchmark counts it: Run, then Synchronize, on the context's own stream.
Status Call(ExecutionContext& ctx, std::span<const TensorView> inputs, std::vector<TensorView>& outputs) {
  KILN_RETURN_IF_ERROR(ctx.Run(inputs, outputs));
  return ctx.Synchronize();
}

double Median(std::vector<double> v) { return Summarize(std::move(v)).p50; }

// Whether timed iteration `i` runs, `elapsed_ns` into the timed phase: --iterations of them, or
// while --duration has not passed (at least one).
bool More(const BenchConfig& config, int64_t i, int64_t elapsed_ns) {
  if (config.duration_s > 0) return i == 0 || static_cast<double>(elapsed_ns) < config.duration_s * 1e9;
  return i < config.iterations;
}

// What the context holds after the runs, and the process's peak RSS.
void RecordMemory(const ExecutionContext& ctx, BenchResult& r) {
  const ExecutionContext::MemoryUsage memory = ctx.memory_usage();
  r.host_bytes = memory.host_bytes;
  r.device_bytes = memory.device_bytes;
  struct rusage usage {};
  if (getrusage(RUSAGE_SELF, &usage) == 0) r.peak_rss_bytes = static_cast<uint64_t>(usage.ru_maxrss) * 1024;
}

// --generate: `config.warmup` untimed generations, then `config.iterations` timed ones (or as many
// as `config.duration_s` allows); every call after a prompt's is one generated token's.
Status BenchGenerate(const BenchConfig& config, const Model& model, ExecutionContext& ctx, BenchResult& r,
                     const std::function<void(const BenchProgress&)>& progress) {
  KILN_ASSIGN_OR_RETURN(KvDecoder d, FindKvDecoder(model));
  if (config.prompt_tokens < 1)
    return InvalidArgument("--prompt-tokens: expected at least 1, found " + std::to_string(config.prompt_tokens));
  std::mt19937_64 random(config.seed);
  std::vector<int64_t> prompt(static_cast<size_t>(config.prompt_tokens));
  for (int64_t& id : prompt) id = static_cast<int64_t>(random() % static_cast<uint64_t>(d.vocab));
  GenerateSummary g;
  g.prompt_tokens = config.prompt_tokens;
  g.tokens = config.generate;
  for (int i = 0; i < config.warmup; ++i) {
    KILN_RETURN_IF_ERROR(Generate(ctx, model, d, prompt, config.generate, nullptr).status());
    if (progress) progress({true, i + 1, 0});
  }
  std::vector<double> token_ms, first_ms;
  const int64_t begin = NowNs();
  int64_t end = begin;
  for (int64_t i = 0;; ++i) {
    if (!More(config, i, end - begin)) break;
    KILN_ASSIGN_OR_RETURN(g.generated_ids, Generate(
                                               ctx, model, d, prompt, config.generate,
                                               [&](int s, int64_t ns) {
                                                 (s == 0 ? first_ms : token_ms).push_back(static_cast<double>(ns) / 1e6);
                                               },
                                               &g.cache));
    end = NowNs();
    if (progress) progress({false, i + 1, static_cast<double>(end - begin) / 1e9});
  }
  double token_total_ms = 0;
  for (double ms : token_ms) token_total_ms += ms;
  r.iterations = static_cast<int64_t>(token_ms.size());
  r.timed_s = static_cast<double>(end - begin) / 1e9;
  if (!token_ms.empty()) r.latency_ms = Summarize(token_ms);
  r.throughput_per_s = token_total_ms > 0 ? static_cast<double>(token_ms.size()) / (token_total_ms / 1e3) : 0;
  g.first_token_ms = Summarize(std::move(first_ms));
  r.generate = std::move(g);
  const Stats& st = ctx.stats();
  if (st.last_entry >= 0) r.entry = model.entries()[static_cast<size_t>(st.last_entry)].name;
  return Status::Ok();
}

}  // namespace

std::optional<uint64_t> ParseSeed(std::string_view text) {
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

Result<BenchResult> RunBench(const BenchConfig& config, const std::function<void(const BenchProgress&)>& progress) {
  BenchResult r;
  r.artifact = config.artifact;
  r.threads = config.threads;
  r.warmup = config.warmup;
  if (config.random) r.seed = config.seed;
  // load_ms: Model::Load and ExecutionContext::Create, not reading or making the inputs.
  const int64_t load_start = NowNs();
  LoadOptions load_options;
  load_options.native_code = config.native_code;
  KILN_ASSIGN_OR_RETURN(Model model, Model::Load(config.artifact, load_options));
  const int64_t load_ns = NowNs() - load_start;
  if (config.generate > 0 && (config.random || !config.inputs_dir.empty()))
    return InvalidArgument("--generate makes its own inputs (a random prompt): give neither --inputs nor --random");
  if (config.generate > 0 && config.profile)
    return InvalidArgument("--profile and --trace do not apply to --generate (a generation's calls differ in shape)");
  std::vector<HostTensor> inputs;
  if (config.generate == 0) {
    KILN_ASSIGN_OR_RETURN(inputs, PrepareInputs(config, model));
  } else {
    r.seed = config.seed;
  }
  ContextOptions options;
  options.device = config.device;
  options.cuda.graphs = config.cuda_graphs;
  options.profile = config.profile;
  options.cpu.threads = config.threads;
  options.cpu.onednn = config.onednn;
  if (!config.warm) options.warm_runs = 0;  // --no-warm: the first call does the one-time work
  // CUDA backend: a non-blocking stream of the context's own, which CUDA graphs need (capture
  // on the legacy default stream is not allowed).
  options.cuda.own_stream = true;
  const int64_t create_start = NowNs();
  KILN_ASSIGN_OR_RETURN(ExecutionContext ctx, ExecutionContext::Create(model, options));
  const int64_t create_ns = NowNs() - create_start;
  r.load_ms = static_cast<double>(load_ns + create_ns) / 1e6;
  r.create_ms = static_cast<double>(create_ns) / 1e6;
  const bool cuda = ctx.device() == Device::kCuda;
  r.device = cuda ? "cuda" : "cpu";
  r.device_note = ctx.device_note();
  if (config.cuda_graphs && !cuda) r.notes.push_back("--cuda-graphs ignored on the CPU backend");
  if (config.cuda_graphs && cuda && config.profile)
    r.notes.push_back("--cuda-graphs has no effect with --profile (graphs are not captured while profiling)");
  r.cuda_graphs = config.cuda_graphs && cuda && !config.profile;
  if (config.profile)
    r.notes.push_back("--profile times every instruction, which adds its own cost to the latency figures");
  if (config.threads != 0 && cuda) r.notes.push_back("--threads has no effect on the CUDA backend");
  for (const auto& e : model.entries()) r.instructions.push_back(e.instructions);
  std::vector<TensorView> views;
  for (const HostTensor& t : inputs) {
    views.push_back(t.view());
    r.inputs.push_back({t.name, std::string(DTypeName(t.dtype)), t.dims});
  }
  if (config.warm && config.generate == 0) {
    const int64_t warm_start = NowNs();
    KILN_RETURN_IF_ERROR(ctx.Warm(views));
    const int64_t warm_ns = NowNs() - warm_start;
    r.warm_ms = static_cast<double>(warm_ns) / 1e6;
    r.load_ms += *r.warm_ms;
  }
  if (config.generate > 0) {
    KILN_RETURN_IF_ERROR(BenchGenerate(config, model, ctx, r, progress));
    RecordMemory(ctx, r);
    return r;
  }
  std::vector<TensorView> outputs;
  auto report = [&](const BenchProgress& p) {
    if (progress) progress(p);
  };
  for (int i = 0; i < config.warmup; ++i) {
    const int64_t start = NowNs();
    KILN_RETURN_IF_ERROR(Call(ctx, views, outputs));
    if (i == 0) r.first_call_ms = static_cast<double>(NowNs() - start) / 1e6;
    report({true, i + 1, 0});
  }
  const Stats& st = ctx.stats();
  std::vector<double> wall_ms, lookup_us, prologue_us, computation_us, gpu_ms;
  ProfileAccumulator profile;
  std::deque<TracedRun> trace;
  const int64_t begin = NowNs();
  int64_t end = begin;
  for (int64_t i = 0;; ++i) {
    if (!More(config, i, end - begin)) break;
    const int64_t start = NowNs();
    KILN_RETURN_IF_ERROR(Call(ctx, views, outputs));
    end = NowNs();
    wall_ms.push_back(static_cast<double>(end - start) / 1e6);
    lookup_us.push_back(static_cast<double>(st.last_cache_lookup_time()) / 1e3);
    prologue_us.push_back(static_cast<double>(st.last_prologue_time()) / 1e3);
    computation_us.push_back(static_cast<double>(st.last_computation_time()) / 1e3);
    if (st.last_gpu_ns >= 0) gpu_ms.push_back(static_cast<double>(st.last_gpu_ns) / 1e6);
    if (config.profile) {
      profile.Add(st.last_entry, st.last_instruction_ns, st.last_instruction_bytes, st.last_instruction_library);
      if (config.trace_runs > 0) {
        if (trace.size() == config.trace_runs) trace.pop_front();
        trace.push_back({i, start, end - start, st.last_computation_start, st.last_entry, st.last_instruction_ns,
                         st.last_instruction_library});
      }
    }
    report({false, i + 1, static_cast<double>(end - begin) / 1e9});
  }
  if (!r.first_call_ms && !wall_ms.empty()) r.first_call_ms = wall_ms.front();  // no warm-up
  r.iterations = static_cast<int64_t>(wall_ms.size());
  r.timed_s = static_cast<double>(end - begin) / 1e9;
  r.latency_ms = Summarize(wall_ms);
  r.throughput_per_s = r.timed_s > 0 ? static_cast<double>(r.iterations) / r.timed_s : 0;
  r.lookup_us = Median(std::move(lookup_us));
  r.prologue_us = Median(std::move(prologue_us));
  r.computation_us = Median(std::move(computation_us));
  if (!gpu_ms.empty()) r.gpu_ms = Summarize(std::move(gpu_ms));
  r.graph_hits = st.graph_hits;
  r.graph_misses = st.graph_misses;
  r.host_to_device_bytes = st.last_host_to_device_bytes;
  r.device_to_host_bytes = st.last_device_to_host_bytes;
  r.control_transfers = st.last_control_transfers;
  r.cpu_region_ms = static_cast<double>(st.last_cpu_region_ns) / 1e6;
  RecordMemory(ctx, r);
  if (st.last_entry >= 0) r.entry = model.entries()[st.last_entry].name;
  // kiln.Fused rows on the CPU: the native code of the context's target, or the interpreter.
  const std::string& target = st.native_code_target;
  auto fused_runner = [&](const InstructionInfo& info) -> std::string {
    for (const NativeCodeInfo& n : model.native_code()) {
      if (n.target != target || target.empty()) continue;
      for (uint32_t k : n.kernels)
        if (k < model.kernels().size() && model.kernels()[k].name == info.kernel) return "native code (" + target + ")";
    }
    return "interpreter";
  };
  if (config.profile) {
    r.profile = profile.Summary(r.instructions, cuda ? std::function<std::string(const InstructionInfo&)>() : fused_runner);
    if (!r.profile->program_kinds.empty()) r.profile->memcpy_gbps = MemcpyGBps();  // after the runs: it disturbs none
  }
  r.trace.assign(trace.begin(), trace.end());
  return r;
}

}  // namespace kiln::io
