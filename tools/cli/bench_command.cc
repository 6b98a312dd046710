// `kiln bench`: latency, throughput, host/GPU time split, memory and a per-op profile of an
// artifact (tools/io/bench_runner.h does the measuring, bench_report.h the printing).
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>

#include <fmt/format.h>

#include "tools/cli/commands.h"
#include "tools/cli/device_option.h"
#include "tools/cli/shape_option.h"
#include "tools/io/bench_report.h"
#include "tools/io/bench_runner.h"

namespace kiln::cli {
namespace {

struct BenchFlags {
  io::BenchConfig config;
  bool warmup_given = false, iterations_given = false;  // --generate's defaults are 1 and 1
  bool seed_given = false;
  std::string device = "auto";
  std::vector<std::string> shapes;
  std::string json, trace;
  bool quiet = false;
};

// "\rtimed 37/100" on stderr, at most 10 times a second, once the run has taken a second;
// nothing unless stderr is a terminal. Clear() wipes the line before the report.
class ProgressLine {
 public:
  explicit ProgressLine(bool enabled) : enabled_(enabled && ::isatty(STDERR_FILENO)) {}
  void Show(const io::BenchProgress& p, const io::BenchConfig& c) {
    if (!enabled_) return;
    const auto now = std::chrono::steady_clock::now();
    if (now - start_ < std::chrono::seconds(1) || now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    shown_ = true;
    const std::string text = p.warmup ? fmt::format("warm-up {}/{}", p.done, c.warmup)
                             : c.duration_s > 0
                                 ? fmt::format("timed {} calls, {:.1f}/{:.1f} s", p.done, p.elapsed_s, c.duration_s)
                                 : fmt::format("timed {}/{}", p.done, c.iterations);
    std::cerr << "\r\033[Kkiln bench: " << text << std::flush;
  }
  void Clear() {
    if (shown_) std::cerr << "\r\033[K" << std::flush;
    shown_ = false;
  }

 private:
  bool enabled_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now(), last_{};
};

bool WriteJson(const std::string& path, const nlohmann::json& doc, int indent) {
  // Names come from the model and need not be UTF-8: invalid bytes are written as U+FFFD.
  const std::string text = doc.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  if (path == "-") {
    std::cout << text;
    return true;
  }
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) {
    std::cerr << "kiln bench: cannot write " << path << ": " << std::strerror(errno) << "\n";
    return false;
  }
  return true;
}

int Bench(BenchFlags& f) {
  io::BenchConfig& c = f.config;
  if (f.seed_given && !c.random && c.generate == 0) {
    std::cerr << "kiln bench: --seed applies to --random and --generate\n";
    return 2;
  }
  if (c.generate > 0) {
    if (!f.warmup_given) c.warmup = 1;
    if (!f.iterations_given) c.iterations = 1;
  } else if (!c.random && c.inputs_dir.empty()) {
    std::cerr << "kiln bench: no inputs: pass --inputs DIR (input_N.pb or NAME.npy files, as for kiln run) or --random "
                 "(seeded random values; --shape NAME:DIMS fixes symbolic dims)\n";
    return 2;
  }
  for (const std::string& s : f.shapes) {
    std::string name, error;
    std::vector<int64_t> dims;
    if (!ParseShape(s, name, dims, error)) {
      std::cerr << "kiln bench: --shape: " << error << "\n";
      return 2;
    }
    if (!c.shapes.emplace(name, dims).second) {
      std::cerr << "kiln bench: --shape: input '" << name << "' is given more than once\n";
      return 2;
    }
  }
  if (f.trace == "-") {
    std::cerr << "kiln bench: --trace needs a file ('-' is only for --json)\n";
    return 2;
  }
  // The output files are opened before the run, so that an unwritable path fails at once
  // rather than after a long --duration.
  for (const std::string* path : {&f.json, &f.trace}) {
    if (path->empty() || *path == "-") continue;
    std::ofstream probe(*path, std::ios::binary | std::ios::app);
    if (!probe) {
      std::cerr << "kiln bench: cannot write " << *path << ": " << std::strerror(errno) << "\n";
      return 1;
    }
  }
  c.device = DeviceNamed(f.device);
  if (!f.trace.empty()) c.profile = true;
  ProgressLine line(!f.quiet);
  auto result = io::RunBench(c, [&](const io::BenchProgress& p) { line.Show(p, c); });
  line.Clear();
  if (!result.ok()) {
    std::cerr << "kiln bench: " << result.status().ToString() << "\n";
    return 1;
  }
  if (f.json != "-") io::PrintBenchReport(*result, std::cout);
  if (!f.json.empty() && !WriteJson(f.json, io::BenchJson(*result), 2)) return 1;
  if (!f.trace.empty()) {
    if (!WriteJson(f.trace, io::TraceJson(*result), -1)) return 1;
    if (f.json != "-")
      std::cout << fmt::format("\ntrace: {} ({} runs; open in https://ui.perfetto.dev or chrome://tracing)\n", f.trace,
                               result->trace.size());
  }
  return 0;
}

}  // namespace

void AddBenchCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench",
                                 "Measure a .kiln artifact: latency percentiles, throughput, host and GPU "
                                 "time, memory, and a per-op profile");
  auto f = std::make_shared<BenchFlags>();
  io::BenchConfig& c = f->config;
  cmd->add_option("artifact", c.artifact, "compiled model (.kiln)")->required()->check(CLI::ExistingFile);
  auto* inputs = cmd->add_option("--inputs", c.inputs_dir,
                                 "folder with input_N.pb (ONNX TensorProto, N in the model's input order) or NAME.npy "
                                 "files, as for kiln run")
                     ->check(CLI::ExistingDirectory);
  auto* random =
      cmd->add_flag("--random", c.random,
                    "random inputs instead: floats uniform in [-1, 1), integers in 0..9, bools 0/1, from "
                    "--seed. Every dim must be known: a constant of the artifact, given by --shape, bound by "
                    "another input's --shape (same symbol), or fixed by the artifact's entries (the first entry "
                    "that fixes every open dim, else the one that fixes the most)");
  inputs->excludes(random);
  cmd->add_option("--shape", f->shapes,
                  "with --random: an input's shape, NAME:DIMS such as images:1x3x640x640 ('?' leaves a dim to the "
                  "artifact's entries); repeatable")
      ->needs(random);
  auto* seed = cmd->add_option("--seed", c.seed,
                  "seed of --random (or of --generate's prompt), an integer in 0..18446744073709551615 (the JSON "
                  "report's seed)")
      ->capture_default_str()
      ->check(CLI::Validator(
          [](std::string& text) {  // CLI11 alone reads "-1" as 2^64 - 1
            return io::ParseSeed(text) ? std::string()
                                       : "expected an integer in 0..18446744073709551615, got " + text;
          },
          "0..2^64-1"));
  auto* warmup = cmd->add_option("--warmup", c.warmup,
                                 "untimed calls before the timed ones (--generate: generations, 1)")
                     ->capture_default_str()
                     ->check(CLI::Range(0, 1000000));
  auto* iterations = cmd->add_option("--iterations", c.iterations, "timed calls (--generate: generations, 1)")
                         ->capture_default_str()
                         ->check(CLI::Range(int64_t{1}, int64_t{1000000000}));
  auto* generate =
      cmd->add_option("--generate", c.generate,
                      "time a decoder with a KV cache per generated token (inputs input_ids, past_key_values.N.key/"
                      ".value, optional attention_mask and position_ids; outputs logits and present.N.key/.value, as "
                      "Hugging Face Optimum exports it): each generation runs a prompt of --prompt-tokens random ids "
                      "(from --seed) with an empty cache, then N tokens greedily, one call each, the present keys and "
                      "values fed back as the next past. Reports the time to the first token and per generated token")
          ->check(CLI::Range(1, 1000000));
  cmd->add_option("--prompt-tokens", c.prompt_tokens, "with --generate: the prompt's length in ids")
      ->capture_default_str()
      ->needs(generate)
      ->check(CLI::Range(1, 1000000));
  generate->excludes(inputs)->excludes(random);
  cmd->add_option("--duration", c.duration_s,
                  "instead of --iterations: time calls until this many seconds have passed (at least one call)")
      ->check(CLI::Validator(
          [](std::string& text) {
            double v = 0;
            try {
              v = std::stod(text);
            } catch (const std::exception&) {
              return std::string("not a number: ") + text;
            }
            return v > 0 && std::isfinite(v) ? std::string() : "expected a finite number of seconds > 0, got " + text;
          },
          "SECONDS > 0"))
      ->excludes(iterations);
  AddDeviceOption(cmd, f->device,
                  "auto uses the first backend whose device is present (CUDA device 0 when a driver and device "
                  "are, else the CPU; the report's device line says which, and why)");
  cmd->add_option("--threads", c.threads,
                  "CPU backend threads for a Run, the calling thread included; 0 = one per CPU this process may use "
                  "(no effect on the CUDA backend)")
      ->capture_default_str()
      ->check(CLI::Range(0, 256));
  cmd->add_flag("--native-code,!--no-native-code", c.native_code,
                "run the generated kernels on the artifact's native CPU code when it has some this CPU runs "
                "(default), or interpret their portable programs (--no-native-code)");
  cmd->add_flag("--onednn,!--no-onednn", c.onednn,
                "CPU backend: run Conv, MaxPool, AveragePool, MatMul, Gemm, LSTM, GRU and RNN on oneDNN when this runtime has it "
                "(default), or on Kiln's own kernels (--no-onednn)");
  cmd->add_flag("--warm,!--no-warm", c.warm,
                "prepare the context for the inputs' shapes (ExecutionContext::Warm) after creating it, so that the first "
                "call does only what every call does (default; on the CPU it runs the model until its time settles); --no-warm "
                "leaves that work to the first call (and Create runs no warm-up run: ContextOptions::warm_runs 0)");
  cmd->add_flag("--cuda-graphs", c.cuda_graphs,
                "CUDA backend: capture each entry as a CUDA graph and replay it (ignored on the CPU backend, and "
                "while profiling)");
  cmd->add_flag("--profile", c.profile,
                "time every instruction (host time on the CPU, CUDA events on a GPU) over all timed calls and print "
                "the time per op kind and the slowest instructions; adds its own cost to the latency");
  cmd->add_option("--trace", f->trace,
                  "write a Chrome trace (Trace Event Format JSON, for https://ui.perfetto.dev or chrome://tracing) of "
                  "the last --trace-runs profiled calls to FILE; implies --profile");
  cmd->add_option("--trace-runs", c.trace_runs, "calls kept in the --trace file (the last ones)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--json", f->json,
                  "write the results as JSON to FILE ('-': to stdout, instead of the report). Latencies are wall time "
                  "of Run + Synchronize in ms; percentiles are nearest-rank (always one of the samples); host_us are "
                  "medians of Stats' phases; memory.peak_rss_bytes is the whole process's peak RSS (getrusage)");
  cmd->add_flag("-q,--quiet", f->quiet, "no progress line (it is shown only on a terminal, for runs over a second)");
  cmd->footer(
      "Inputs are host tensors, so on the CUDA backend each call includes their upload; outputs stay in the context's "
      "memory and are not copied back. Memory is what the context holds after the runs (its buffers only grow, so "
      "also its peak).");
  cmd->callback([f, warmup, iterations, seed] {
    f->seed_given = seed->count() > 0;
    f->warmup_given = warmup->count() > 0;
    f->iterations_given = iterations->count() > 0;
    SetExitCode(Bench(*f));
  });
}

}  // namespace kiln::cli
