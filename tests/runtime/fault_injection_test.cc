// Fault injection (runtime/fault_injection.h), in a build with -DKILN_FAULT_INJECTION=ON (the
// sanitizer tier's, where LeakSanitizer also checks that no failure path leaks): a real model is
// loaded from its file (mapped, and once more into private memory, as a signed or encrypted one
// is read), a 2-thread context made (on the CPU also one without oneDNN, whose worker threads are
// Kiln's own) and one call run, once with no fault to count the resource
// requests, then once per chosen request with that request refused. Each refusal must fail the
// step it is in with a Status that names the resource (the file and offset, the bytes asked
// for, the thread, the library call) and, where one is involved, the entry or instruction, and
// never crash; a context made before the refused request must then run again, cleanly, with the
// clean run's outputs. A refusal the runtime absorbs (oneDNN refusing to create a primitive: the
// instruction falls back to Kiln's kernel) must succeed, within the project's tolerance of the
// clean outputs, with the reason in Stats::last_fallbacks.
//
// By default Silero VAD from the test data, every request refused in turn (CI, scripts/sanitize.sh).
// scripts/release-check sweeps real models instead:
//   KILN_FAULT_MODELS=DIR[:DIR...]  model folders (model.onnx, test_data_set_0/) to sweep
//   KILN_FAULT_MAX_REQUESTS=N       refuse at most N requests per model: the first at each site,
//                                   then others spread evenly; unset or -1: every request
//   KILN_FAULT_VERBOSE=1            print what each refusal said
// and prints one line per model: requests, the sites reached of those known, refusals, failures.
// The "[emulated]" case does the same on the emulated CUDA device (tests/emulated_cuda/): device
// memory, kernel modules, events, the cuBLASLt and cuDNN handles (whose refusal is absorbed: their
// ops run on the CPU, as device_note() says), and first each dlopen of the CUDA driver, cuBLASLt
// and cuDNN, which the runtime does once per process.
#if KILN_FAULT_INJECTION

#include "runtime/fault_injection.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "compiler/compile.h"
#include "kiln/runtime.h"
#include "kiln/tensor_files.h"
#include "tests/e2e/model_dirs.h"
#include "tests/e2e/silero_call.h"
#include "tests/native_target.h"
#include "tests/temp_dir.h"
#ifdef KILN_HAVE_CUDA
#include <cublasLt.h>
#include <cudnn.h>

#include <functional>
#include <utility>

#include "runtime/cuda/driver.h"
#include "runtime/cuda/dynamic_symbols.h"
#include "tests/gpu_test_util.h"
#endif

namespace {

// Every site in the runtime, and what each one's Status must say (each string, in order of
// appearance or not). An absorbed site's refusal is no error: its text is in the fallback reason.
struct FaultSite {
  std::vector<std::string> says;
  bool absorbed = false;
};
const std::map<std::string, FaultSite>& KnownFaultSites() {
  static const std::map<std::string, FaultSite> sites = {
      {"open", {{"cannot open '"}}},
      {"mmap", {{"cannot map '", " bytes)"}}},
      {"file read", {{"cannot read at offset ", " bytes: ", ".kiln'"}}},
      {"host memory", {{"cannot allocate", " bytes"}}},
      {"native code mapping", {{"cannot map ", " bytes of code"}}},
      {"thread", {{"cannot start CPU worker thread "}}},
      {"oneDNN primitive execution", {{"instruction ", "oneDNN "}}},
      {"oneDNN primitive creation", {{"Kiln's kernel, not oneDNN: ", "could not create a primitive"}, true}},
      {"dlopen", {{" not found ("}}},
      {"cuMemAlloc", {{"cannot allocate ", " bytes", "CUDA_ERROR_OUT_OF_MEMORY"}}},
      {"cuModuleLoadData", {{"cuModuleLoadData (kernel '", "CUDA_ERROR_OUT_OF_MEMORY"}}},
      {"cuStreamCreate", {{"cuStreamCreate", "CUDA_ERROR_OUT_OF_MEMORY"}}},
      {"cuEventCreate", {{"cuEventCreate", "CUDA_ERROR_OUT_OF_MEMORY"}}},
      {"cublasLtCreate", {{"cuBLASLt unavailable, its ops run on the CPU: ", "cublasLtCreate", "ALLOC_FAILED"}, true}},
      {"cudnnCreate", {{" unavailable, its ops run on the CPU: ", "cudnnCreate", "ALLOCATION_FAILED"}, true}},
  };
  return sites;
}

// What one run of a model needs: its artifact on disk and its inputs.
struct FaultModel {
  std::string name;
  std::string path;  // the artifact
  std::optional<kiln::testing::SileroCall> silero;
  std::vector<kiln::io::HostTensor> inputs;
  std::vector<kiln::TensorView> views() {
    if (silero) {
      silero.emplace(0.25f);  // a fresh state each call
      return silero->views();
    }
    std::vector<kiln::TensorView> v;
    for (const kiln::io::HostTensor& t : inputs) v.push_back(t.view());
    return v;
  }
};

using FaultOutputs = std::vector<std::vector<uint8_t>>;

// A call, and on CUDA the wait for it: the outputs are read next.
kiln::Status FaultRun(kiln::ExecutionContext& ctx, FaultModel& m, std::vector<kiln::TensorView>& out) {
  KILN_RETURN_IF_ERROR(ctx.Run(m.views(), out));
  return ctx.Synchronize();
}

FaultOutputs FaultOutputBytes(const std::vector<kiln::TensorView>& outputs) {
  FaultOutputs out;
  for (const kiln::TensorView& o : outputs) {
    const auto* p = static_cast<const uint8_t*>(o.data);
    out.emplace_back(p, p + o.num_bytes());
  }
  return out;
}

// Within atol 1e-4 + rtol 1e-3 (the project's rule for real models) where float32, else equal.
bool FaultOutputsClose(const std::vector<kiln::TensorView>& got, const FaultOutputs& want) {
  if (got.size() != want.size()) return false;
  for (size_t i = 0; i < got.size(); ++i) {
    if (static_cast<size_t>(got[i].num_bytes()) != want[i].size()) return false;
    if (got[i].dtype != kiln::DType::kFloat32) {
      if (std::memcmp(got[i].data, want[i].data(), want[i].size()) != 0) return false;
      continue;
    }
    const auto* g = static_cast<const float*>(got[i].data);
    const auto* w = reinterpret_cast<const float*>(want[i].data());
    for (size_t k = 0; k < want[i].size() / sizeof(float); ++k)
      if (!(std::fabs(g[k] - w[k]) <= 1e-4 + 1e-3 * std::fabs(w[k])) && !(std::isnan(g[k]) && std::isnan(w[k])))
        return false;
  }
  return true;
}

// Where `got` is farthest from `want` (float32 outputs), for messages.
std::string FaultWorst(const std::vector<kiln::TensorView>& got, const FaultOutputs& want) {
  std::string worst = "no float32 output differs";
  double far = 0;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    if (got[i].dtype != kiln::DType::kFloat32 || static_cast<size_t>(got[i].num_bytes()) != want[i].size()) continue;
    const auto* g = static_cast<const float*>(got[i].data);
    const auto* w = reinterpret_cast<const float*>(want[i].data());
    for (size_t k = 0; k < want[i].size() / sizeof(float); ++k)
      if (std::fabs(g[k] - w[k]) > far) {
        far = std::fabs(g[k] - w[k]);
        worst = "output " + std::to_string(i) + " [" + std::to_string(k) + "]: " + std::to_string(g[k]) +
                ", the clean run's " + std::to_string(w[k]);
      }
  }
  return worst;
}

int64_t FaultEnvInt(const char* name, int64_t otherwise) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::strtoll(v, nullptr, 10) : otherwise;
}

// Which of the requests to refuse: every one (cap < 0), else the first at each site, then
// others spread evenly, up to `cap` (at least one per site).
std::vector<int64_t> FaultChosen(const std::vector<std::string>& sites, int64_t cap) {
  const auto n = static_cast<int64_t>(sites.size());
  std::vector<int64_t> all(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) all[static_cast<size_t>(i)] = i;
  if (cap < 0 || cap >= n) return all;
  std::set<int64_t> chosen;
  std::set<std::string> seen;
  for (int64_t i = 0; i < n; ++i)
    if (seen.insert(sites[static_cast<size_t>(i)]).second) chosen.insert(i);
  const int64_t rest = cap - static_cast<int64_t>(chosen.size());
  for (int64_t k = 0; k < rest; ++k) chosen.insert(k * n / rest);
  return {chosen.begin(), chosen.end()};
}

// Leaves the process counting nothing, whatever way the test ends: other tests in it check
// that calls allocate nothing.
struct FaultStopAtExit {
  FaultStopAtExit() = default;
  FaultStopAtExit(const FaultStopAtExit&) = delete;
  FaultStopAtExit& operator=(const FaultStopAtExit&) = delete;
  ~FaultStopAtExit() { kiln::fault::Stop(); }
};

struct FaultReport {
  int64_t requests = 0, refused = 0, failures = 0;
  int64_t retried = 0;  // refused in Create's warm-up: the first Run asked again
  std::set<std::string> sites;
};

// The sweep over one model on `device`: see the file's comment.
FaultReport FaultSweep(FaultModel& m, kiln::Device device, int64_t cap) {
  kiln::ContextOptions context_options;
  context_options.device = device;
  context_options.cpu.threads = 2;
  kiln::LoadOptions private_copy;  // a key callback: Load reads the file into private memory
  private_copy.weights_key = [](std::string_view, std::span<uint8_t, 32>) { return kiln::Status::Ok(); };
  kiln::fault::FailAt(-1);
  const bool have_private = kiln::Model::Load(m.path, private_copy).ok();  // not without libcrypto

  // Load (mapped, and into private memory), Create and Run; `ctx` keeps the context when Create
  // succeeded.
  int64_t loaded = 0, created_all = 0;  // the requests made by the Loads, and by them and Create
  auto attempt = [&](std::optional<kiln::ExecutionContext>& ctx, std::vector<kiln::TensorView>& out) -> kiln::Status {
    if (have_private) {
      auto copy = kiln::Model::Load(m.path, private_copy);
      if (!copy.ok()) return copy.status();
    }
    auto model = kiln::Model::Load(m.path);
    if (!model.ok()) return model.status();
    loaded = kiln::fault::Requests();
    auto created = kiln::ExecutionContext::Create(*model, context_options);
    if (!created.ok()) return created.status();
    ctx.emplace(std::move(*created));
    if (device == kiln::Device::kCpu) {  // and one on Kiln's own threads, which oneDNN's OpenMP team replaces
      kiln::ContextOptions own_threads = context_options;
      own_threads.cpu.onednn = false;
      auto other = kiln::ExecutionContext::Create(*model, own_threads);
      if (!other.ok()) return other.status();
    }
    created_all = kiln::fault::Requests();
    return FaultRun(*ctx, m, out);
  };
  FaultReport report;
  std::optional<kiln::ExecutionContext> clean_ctx;
  std::vector<kiln::TensorView> clean_out;
  {  // What the first call of a process does once (the CUDA libraries' dlopen) is left out of the count.
    std::optional<kiln::ExecutionContext> first_ctx;
    std::vector<kiln::TensorView> first_out;
    const kiln::Status first = attempt(first_ctx, first_out);
    REQUIRE_MESSAGE(first.ok(), m.name << ": " << first.ToString());
  }
  kiln::fault::FailAt(-1);
  const kiln::Status clean = attempt(clean_ctx, clean_out);
  REQUIRE_MESSAGE(clean.ok(), m.name << ": " << clean.ToString());
  report.requests = kiln::fault::Requests();
  const std::vector<std::string> sites = kiln::fault::RequestSites();
  report.sites = {sites.begin(), sites.end()};
  const FaultOutputs want = FaultOutputBytes(clean_out);
  REQUIRE(report.requests > 0);
  const int64_t create_begin = loaded, create_end = created_all;
  {  // the comparisons below need a context's next call to give the same outputs
    std::vector<kiln::TensorView> again;
    REQUIRE(FaultRun(*clean_ctx, m, again).ok());
    REQUIRE_MESSAGE(FaultOutputBytes(again) == want, m.name << ": a second clean call's outputs are "
                                                            << (FaultOutputsClose(again, want) ? "close to" : "far from")
                                                            << " the first's");
  }

  const std::vector<int64_t> chosen = FaultChosen(sites, cap);
  std::cout << m.name << ": " << report.requests << " resource requests; refusing " << chosen.size() << std::endl;
  for (const int64_t n : chosen) {
    const std::string& site = sites[static_cast<size_t>(n)];
    INFO(m.name << ": request " << n << " of " << report.requests << ": " << site);
    kiln::fault::FailAt(n);
    std::optional<kiln::ExecutionContext> ctx;
    std::vector<kiln::TensorView> out;
    const kiln::Status st = attempt(ctx, out);
    const bool hit = kiln::fault::Requests() > n;
    kiln::fault::FailAt(-1);
    REQUIRE(hit);  // the same requests in the same order: the run is deterministic
    ++report.refused;
    const auto known = KnownFaultSites().find(site);
    REQUIRE_MESSAGE(known != KnownFaultSites().end(), "a site the test does not know: add it to KnownFaultSites");
    bool good = true, retried = false;
    std::string said = st.ToString();
    if (known->second.absorbed) {
      // The call succeeds on Kiln's kernel, and says why.
      good = st.ok() && FaultOutputsClose(out, want);
      said.clear();
      if (ctx) {
        said = ctx->device_note() + "\n";
        for (const kiln::Stats::Fallback& f : ctx->stats().last_fallbacks) said += f.reason + "\n";
      }
    } else if (st.ok() && n >= create_begin && n < create_end) {
      // Create's warm-up leaves an error to the entry's first Run, which makes the request again.
      good = FaultOutputBytes(out) == want;
      said = "refused in Create's warm-up, made again by the first Run: " + said;
      ++report.retried;
      retried = true;
    } else {
      good = !st.ok();
    }
    if (!retried)
      for (const std::string& part : known->second.says) good = good && said.find(part) != std::string::npos;
    CHECK_MESSAGE(good, said << (st.ok() ? "\n" + FaultWorst(out, want) : std::string()));
    if (FaultEnvInt("KILN_FAULT_VERBOSE", 0) != 0) std::cout << "  request " << n << " (" << site << "): " << said << "\n";
    if (ctx) {  // the context made before the refusal runs the next call cleanly
      std::vector<kiln::TensorView> again;
      const kiln::Status retry = FaultRun(*ctx, m, again);
      CHECK_MESSAGE(retry.ok(), retry.ToString());
      if (retry.ok()) {
        const bool same = known->second.absorbed ? FaultOutputsClose(again, want) : FaultOutputBytes(again) == want;
        CHECK_MESSAGE(same, "the next call's outputs are " << (FaultOutputsClose(again, want) ? "close to" : "far from")
                                                           << " the clean run's: " << FaultWorst(again, want));
        good = good && same;
      }
      good = good && retry.ok();
    }
    if (!good) ++report.failures;
  }
  std::string reached;
  for (const std::string& s : report.sites) reached += (reached.empty() ? "" : ", ") + s;
  std::cout << "fault injection on " << m.name << " (" << (device == kiln::Device::kCuda ? "cuda" : "cpu")
            << "): " << report.requests << " resource requests at " << report.sites.size() << " sites of "
            << KnownFaultSites().size() << " known (" << reached << "); " << report.refused << " refused ("
            << (report.requests ? 100 * report.refused / report.requests : 0) << "% of the requests; "
            << report.retried << " of them in Create's warm-up, which the first Run made again), "
            << report.failures << " failures" << std::endl;
  return report;
}

// `onnx` compiled (CPU code for this machine; GPU images too for `gpu`) into `dir`.
std::string FaultArtifact(const std::string& onnx, const kiln::testing::TempDir& dir, const std::string& name,
                          bool gpu) {
  kiln::compiler::CompileOptions options;
  if (!gpu) options.archs.clear();
  options.cpu_targets = kiln::testing::NativeTargetForThisCpu();
  kiln::fault::FailAt(-1);
  auto bytes = kiln::compiler::CompileOnnxFile(onnx, options, nullptr);
  REQUIRE_MESSAGE(bytes.ok(), name << ": " << bytes.status().ToString());
  const std::string path = dir / (name + ".kiln");
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes->data()), bytes->size());
  return path;
}

// Silero VAD from the test data (the default), or the folders of $KILN_FAULT_MODELS.
std::vector<FaultModel> FaultModels(const kiln::testing::TempDir& dir, bool gpu) {
  std::vector<FaultModel> models;
  const char* list = std::getenv("KILN_FAULT_MODELS");
  if (list == nullptr || *list == '\0') {
    const std::string onnx = std::string(KILN_TEST_DATA_DIR) + "/silero_vad_16k_op15/model.onnx";
    if (!std::filesystem::exists(onnx)) return models;
    FaultModel& m = models.emplace_back();
    m.name = "silero_vad_16k_op15";
    m.path = FaultArtifact(onnx, dir, m.name, gpu);
    m.silero.emplace(0.25f);
    return models;
  }
  const std::string s = list;
  for (size_t pos = 0; pos <= s.size();) {
    const size_t colon = std::min(s.find(':', pos), s.size());
    const std::string folder = s.substr(pos, colon - pos);
    pos = colon + 1;
    if (folder.empty()) continue;
    FaultModel& m = models.emplace_back();
    m.name = std::filesystem::path(folder).filename();
    m.path = FaultArtifact(folder + "/model.onnx", dir, m.name, gpu);
    std::ifstream file(m.path, std::ios::binary);
    const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    m.inputs = kiln::testing::ReadInputs(bytes, folder + "/test_data_set_0");
  }
  return models;
}

void FaultSweepAll(kiln::Device device) {
  const FaultStopAtExit stop;
  kiln::testing::TempDir dir;
  std::vector<FaultModel> models = FaultModels(dir, device == kiln::Device::kCuda);
  if (models.empty()) {
    std::cout << "skipped: no silero_vad_16k_op15 in " << KILN_TEST_DATA_DIR << " (run scripts/test.sh)\n";
    return;
  }
  const int64_t cap = FaultEnvInt("KILN_FAULT_MAX_REQUESTS", -1);
  int64_t failures = 0;
  std::set<std::string> reached;
  for (FaultModel& m : models) {
    const FaultReport r = FaultSweep(m, device, cap);
    failures += r.failures;
    reached.insert(r.sites.begin(), r.sites.end());
  }
  if (models.size() > 1)
    std::cout << "fault injection over " << models.size() << " models: " << reached.size() << " sites of "
              << KnownFaultSites().size() << " known reached, " << failures << " failures" << std::endl;
  CHECK(failures == 0);
}

}  // namespace

TEST_CASE("fault injection: every resource request of Load, Create and Run on Silero VAD, refused in turn, gives a Status naming it") {
  FaultSweepAll(kiln::Device::kCpu);
}

#ifdef KILN_HAVE_CUDA
namespace {

// The CUDA driver's, cuBLASLt's and cuDNN's loads (once per process in the runtime, so not in a
// model's sweep), each dlopen refused in turn: the load fails naming the library and the version
// it needs, or (a refused sublibrary or second file name) finds it under another of its names.
void FaultLibraryLoads() {
  const FaultStopAtExit stop;
  const std::vector<std::pair<std::string, std::function<kiln::Status()>>> loads = {
      {"the CUDA driver", [] { kiln::cuda::Driver d; return kiln::cuda::LoadDriverFrom("libcuda.so.1", d); }},
      {"cuBLASLt",
       [] {
         kiln::cuda::Blas b;
         return kiln::cuda::LoadBlasFrom({"libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR)}, b);
       }},
      {"cuDNN",
       [] {
         kiln::cuda::Dnn d;
         return kiln::cuda::LoadDnnFrom({"libcudnn.so." + std::to_string(CUDNN_MAJOR)}, d);
       }},
  };
  int64_t requests = 0, refused = 0, found_elsewhere = 0;
  for (const auto& load : loads) {
    kiln::fault::FailAt(-1);
    REQUIRE_MESSAGE(load.second().ok(), load.first);
    const std::vector<std::string> sites = kiln::fault::RequestSites();
    requests += static_cast<int64_t>(sites.size());
    for (size_t n = 0; n < sites.size(); ++n) {
      if (sites[n] != "dlopen") continue;
      INFO(load.first << ": dlopen " << n);
      kiln::fault::FailAt(static_cast<int64_t>(n));
      const kiln::Status st = load.second();
      kiln::fault::FailAt(-1);
      ++refused;
      if (FaultEnvInt("KILN_FAULT_VERBOSE", 0) != 0)
        std::cout << "  " << load.first << ", dlopen " << n << ": " << st.ToString() << "\n";
      if (st.ok()) {
        ++found_elsewhere;
        continue;
      }
      const std::string said = st.ToString();
      // The file, and the library and version needed.
      CHECK_MESSAGE(said.find(" found (lib") != std::string::npos, said);
      CHECK_MESSAGE(said.find("install ") != std::string::npos, said);
      CHECK_MESSAGE(said.find(" CUDA ") != std::string::npos, said);
    }
  }
  std::cout << "fault injection on the CUDA libraries' loads: " << requests << " resource requests, " << refused
            << " dlopen refused, " << found_elsewhere << " found under another name" << std::endl;
}

}  // namespace

TEST_CASE("[emulated] fault injection: every resource request of Load, Create and Run on Silero VAD on the device, refused in turn, gives a Status naming it") {
  KILN_REQUIRE_EMULATED_CUDA();
  FaultLibraryLoads();
  FaultSweepAll(kiln::Device::kCuda);
}
#endif

#endif  // KILN_FAULT_INJECTION
