#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>

#include <fmt/format.h>

#include "tools/cli/commands.h"
#include "tools/cli/device_option.h"
#include "tools/cli/key_options.h"
#include "tools/io/bench_report.h"
#include "tools/io/compare.h"
#include "kiln/tensor_files.h"
#include "kiln/runtime.h"
#include "runtime/shape_text.h"

namespace kiln::cli {
namespace {

// "'conv1' (Conv) @cudnn", and for a generated kernel the ops it replaced.
std::string Describe(const InstructionInfo& i) {
  std::string s = i.label();
  for (size_t m = 0; m < i.member_ops.size(); ++m) s += (m ? ", " : " <- ") + i.member_ops[m];
  return s;
}

void PrintStats(const Model& model, const Stats& s, double load_ms) {
  std::cout << fmt::format("stats: calls {}, cache hits {}, cache misses {}, entry {}", s.calls, s.cache_hits,
                           s.cache_misses, s.last_entry);
  if (s.last_entry >= 0) std::cout << " '" << model.entries()[s.last_entry].name << "'";
  if (s.last_entry >= 0 && !model.entries()[s.last_entry].backend.empty())
    std::cout << " (the " << model.entries()[s.last_entry].backend << " plan)";
  // A loop's scan room doubled, and the call ran again (Stats::room_growths).
  if (s.room_growths > 0) std::cout << fmt::format(", room growths {}", s.room_growths);
  std::cout << "\n";
  std::cout << fmt::format("  load {:.3f} ms | host {:.3f} ms | cache lookup {:.3f} us | prologue {:.3f} us | "
                           "computation {:.3f} ms\n",
                           load_ms, s.last_host_time() / 1e6, s.last_cache_lookup_time() / 1e3,
                           s.last_prologue_time() / 1e3, s.last_computation_time() / 1e6);
  // Instructions that did not run where the artifact says (a library refused them): say why.
  for (const Stats::Fallback& f : s.last_fallbacks) {
    const std::vector<InstructionInfo>& infos = model.entries()[s.last_entry].instructions;
    std::cout << fmt::format("fallback: #{} {} ran on the CPU backend: {}\n", f.instruction,
                             f.instruction >= 0 && static_cast<size_t>(f.instruction) < infos.size()
                                 ? infos[f.instruction].label()
                                 : std::string("?"),
                             f.reason);
  }
}

// The last run's instruction times (ContextOptions::profile): the slowest first, then the
// total per library that ran them (Stats::last_instruction_library).
void PrintProfile(const Model& model, const Stats& s) {
  if (s.last_entry < 0 || s.last_instruction_ns.empty()) return;
  const std::vector<InstructionInfo>& infos = model.entries()[s.last_entry].instructions;
  const size_t n = std::min(infos.size(), s.last_instruction_ns.size());
  std::vector<size_t> order(n);
  for (size_t k = 0; k < n; ++k) order[k] = k;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return s.last_instruction_ns[a] > s.last_instruction_ns[b]; });
  int64_t total = 0;
  std::map<std::string_view, int64_t> by_library;
  for (size_t k = 0; k < n; ++k) {
    total += s.last_instruction_ns[k];
    by_library[k < s.last_instruction_library.size() ? LibraryTitle(s.last_instruction_library[k]) : "?"] +=
        s.last_instruction_ns[k];
  }
  std::cout << fmt::format("profile of the last run: {} instructions, {:.3f} ms\n", n, total / 1e6);
  for (size_t i = 0; i < n && i < 20; ++i) {
    const size_t k = order[i];
    std::cout << fmt::format("  {:9.3f} ms {:5.1f}%  #{:<4} {}\n", s.last_instruction_ns[k] / 1e6,
                             total ? 100.0 * s.last_instruction_ns[k] / total : 0.0, k, Describe(infos[k]));
  }
  for (const auto& [library, ns] : by_library)
    std::cout << fmt::format("  {:9.3f} ms {:5.1f}%  all on {}\n", ns / 1e6, total ? 100.0 * ns / total : 0.0, library);
}

struct RunFlags {
  std::string artifact, inputs, outputs, expected;
  std::string device = "auto";
  int repeat = 1;
  bool profile = false;
  int threads = 0;
  bool onednn = true;
  bool native_code = true;  // LoadOptions::native_code
  KeyFlags keys;            // LoadOptions::trusted_public_keys, weights_key
  double atol = 1e-4, rtol = 1e-3;
};

// --expected: every output against its reference; false (after a line per output) when one
// differs or the references cannot be read.
bool CheckExpected(const Model& model, const RunFlags& f, const std::vector<io::HostTensor>& got) {
  std::vector<std::string> names;
  for (const TensorInfo& t : model.outputs()) names.push_back(t.name);
  auto want = io::ReadOutputDir(f.expected, names);
  if (!want.ok()) {
    std::cerr << "kiln run: --expected: " << want.status().ToString() << "\n";
    return false;
  }
  bool ok = true;
  for (size_t i = 0; i < got.size() && i < want->size(); ++i) {
    const io::Comparison c = io::CompareTensors((*want)[i], got[i], f.atol, f.rtol);
    std::cout << "expected: " << c.line << "\n";
    ok = ok && c.match;
  }
  std::cout << fmt::format("expected: {} (atol {}, rtol {}, as numpy.allclose with equal_nan)\n",
                           ok ? "every output matches" : "MISMATCH", f.atol, f.rtol);
  return ok;
}

int RunModel(const RunFlags& f) {
  const std::string &artifact = f.artifact, &inputs_dir = f.inputs, &outputs_dir = f.outputs, &device = f.device;
  const int repeat = f.repeat;
  auto t0 = std::chrono::steady_clock::now();
  LoadOptions load_options;
  load_options.native_code = f.native_code;
  if (Status st = ApplyKeyFlags(f.keys, load_options); !st.ok()) {
    std::cerr << "kiln run: " << st.ToString() << "\n";
    return 1;
  }
  auto model = Model::Load(artifact, load_options);
  if (!model.ok()) {
    std::cerr << "kiln run: " << artifact << ": " << model.status().ToString() << "\n";
    return 1;
  }
  double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::vector<std::string> names;
  for (const TensorInfo& t : model->inputs()) names.push_back(t.name);
  auto inputs = io::ReadInputDir(inputs_dir, names);
  if (!inputs.ok()) {
    std::cerr << "kiln run: " << inputs.status().ToString() << "\n";
    return 1;
  }
  ContextOptions options;
  options.device = DeviceNamed(device);
  options.profile = f.profile;
  options.cpu.threads = f.threads;
  options.cpu.onednn = f.onednn;
  options.warm_runs = 0;  // one call: Create's warm-up runs would only add to it
  auto ctx = ExecutionContext::Create(*model, options);
  if (!ctx.ok()) {
    std::cerr << "kiln run: " << ctx.status().ToString() << "\n";
    return 1;
  }
  std::cout << "device: " << ctx->device_note() << "\n";
  std::vector<TensorView> views;
  for (const io::HostTensor& t : *inputs) views.push_back(t.view());
  std::vector<TensorView> outputs;
  std::vector<int64_t> times, gpu_times;
  for (int i = 0; i < repeat; ++i) {
    outputs.clear();
    const auto start = std::chrono::steady_clock::now();
    Status st = ctx->Run(views, outputs);
    if (st.ok()) st = ctx->Synchronize();  // a no-op on the CPU backend
    if (!st.ok()) {
      std::cerr << "kiln run: " << st.ToString() << "\n";
      return 1;
    }
    times.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
    if (ctx->stats().last_gpu_ns >= 0) gpu_times.push_back(ctx->stats().last_gpu_ns);
  }
  std::vector<io::HostTensor> host;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const std::string& name = model->outputs()[i].name;
    std::cout << fmt::format("output {} '{}': {} {}\n", i, name, DTypeName(outputs[i].dtype),
                             ShapeText({outputs[i].dims, static_cast<size_t>(outputs[i].rank)}));
    if (outputs[i].memory == MemoryKind::kHost) {
      host.push_back(io::HostTensor::FromView(name, outputs[i]));
      continue;
    }
    io::HostTensor t;  // filled from the device below (ExecutionContext::CopyOutputs)
    t.name = name;
    t.dtype = outputs[i].dtype;
    t.dims.assign(outputs[i].dims, outputs[i].dims + outputs[i].rank);
    t.bytes.assign(static_cast<size_t>(outputs[i].num_bytes()), 0);
    host.push_back(std::move(t));
  }
  if (!outputs.empty() && outputs[0].memory == MemoryKind::kDevice) {
    std::vector<TensorView> into;
    for (io::HostTensor& t : host) into.push_back(t.view());
    Status st = ctx->CopyOutputs(into);
    if (st.ok()) st = ctx->Synchronize();
    if (!st.ok()) {
      std::cerr << "kiln run: " << st.ToString() << "\n";
      return 1;
    }
  }
  if (!outputs_dir.empty()) {
    Status st = io::WriteOutputDir(outputs_dir, host);
    if (!st.ok()) {
      std::cerr << "kiln run: " << st.ToString() << "\n";
      return 1;
    }
  }
  const bool matched = f.expected.empty() || CheckExpected(*model, f, host);
  PrintStats(*model, ctx->stats(), load_ms);
  PrintProfile(*model, ctx->stats());
  const kiln::ExecutionContext::MemoryUsage memory = ctx->memory_usage();
  std::cout << fmt::format("memory: {} bytes on the host and {} on the device held by the context\n",
                           memory.host_bytes, memory.device_bytes);
  if (repeat > 1) {
    std::sort(times.begin(), times.end());
    std::cout << fmt::format("latency over {} runs: min {:.3f} ms, median {:.3f} ms, max {:.3f} ms\n", repeat,
                             times.front() / 1e6, times[times.size() / 2] / 1e6, times.back() / 1e6);
    if (!gpu_times.empty()) {
      std::sort(gpu_times.begin(), gpu_times.end());
      std::cout << fmt::format("GPU time over {} runs (CUDA events{}): min {:.3f} ms, median {:.3f} ms\n",
                               gpu_times.size(),
                               io::EmulatedDevice(ctx->device_note()) ? "; EMULATED device: host time, not a GPU's" : "",
                               gpu_times.front() / 1e6, gpu_times[gpu_times.size() / 2] / 1e6);
    }
  }
  return matched ? 0 : 1;
}

}  // namespace

void AddRunCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand("run", "Run a .kiln artifact on inputs from a folder");
  auto f = std::make_shared<RunFlags>();
  cmd->add_option("artifact", f->artifact, "compiled model (.kiln)")->required()->check(CLI::ExistingFile);
  cmd->add_option("--inputs", f->inputs,
                  "folder with input_N.pb (ONNX TensorProto, N in the model's input order) or NAME.npy files")
      ->required()->check(CLI::ExistingDirectory);
  cmd->add_option("--outputs", f->outputs, "folder to write output_N.pb into, in the model's output order");
  cmd->add_option("--expected", f->expected,
                  "folder with reference outputs (output_N.pb, as in ONNX test data, or NAME.npy): compare every "
                  "output of the last run with them as numpy.allclose does (equal_nan), print a line per output "
                  "and exit 1 when one differs")
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--atol", f->atol, "--expected: absolute tolerance (default 1e-4)")->check(CLI::Range(0.0, 1e300));
  cmd->add_option("--rtol", f->rtol, "--expected: relative tolerance (default 1e-3)")->check(CLI::Range(0.0, 1e300));
  AddDeviceOption(cmd, f->device,
                  "auto uses the first backend whose device is present (CUDA device 0 when a driver and device "
                  "are, else the CPU; the first line printed says which, and why); a named backend fails with the "
                  "reason when it cannot be used");
  cmd->add_option("--repeat", f->repeat, "run this many times and print min/median/max latency")
      ->check(CLI::Range(1, 1000000));
  cmd->add_flag("--profile", f->profile,
                "time every instruction (host time on the CPU, CUDA events on a GPU) and print the slowest of the "
                "last run and the total per library that ran them");
  cmd->add_option("--threads", f->threads,
                  "CPU backend: threads per run, the caller's included (Kiln splits its kernels and GEMMs over them; OpenBLAS runs single-threaded inside); "
                  "0 (default): one per core")
      ->check(CLI::Range(0, 256));
  cmd->add_flag("--native-code,!--no-native-code", f->native_code,
                "run the generated kernels on the artifact's native CPU code when it has some this CPU runs "
                "(default), or interpret their portable programs (--no-native-code: no machine code from the "
                "artifact is mapped; docs/security.md)");
  cmd->add_flag("--onednn,!--no-onednn", f->onednn,
                "CPU backend: run Conv, MaxPool, AveragePool, MatMul, Gemm, LSTM, GRU and RNN on oneDNN when this runtime has it "
                "(default), or on Kiln's own kernels (--no-onednn)");
  AddKeyOptions(cmd, f->keys);
  cmd->callback([f] { SetExitCode(RunModel(*f)); });
}

}  // namespace kiln::cli
