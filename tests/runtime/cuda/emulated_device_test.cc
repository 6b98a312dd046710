// The CUDA backend on the emulated CUDA device (tests/emulated_cuda/), through what only the
// emulation offers: its call log (what each Run enqueued, in order), its counters (device
// allocations, graph launches) and fault injection (a failing allocation, launch, module load
// or library call; a kernel that faults). Each case is named "[emulated] ..." and starts with
// KILN_REQUIRE_EMULATED_CUDA(): without the emulated driver on the library path (a CPU machine
// as built, or a real GPU) it prints "GPU test skipped: ..." and returns.
//
//   LD_LIBRARY_PATH=build/tests/emulated_cuda/lib KILN_EMULATED_CUDA_CACHE=/tmp/emucache
//   build/tests/kiln_tests -tc="[emulated]*"                      (the two as one command line)
//
// Models: Silero VAD and the PP-OCR mobile v2.0 direction classifier from the test data
// (testing::TestDataDir(), made by scripts/test.sh), compiled with GPU images (the default
// archs; NVRTC's kernel cache makes that cheap), and a small MatMul/Gemm/Softmax model for
// cuBLASLt. Results are compared with the CPU backend's on the same artifact and inputs: for the
// real models within atol 1e-4 + rtol 1e-3 (float32 accumulation order), for the small model
// 1e-5 + 1e-4. The emulated device runs every kernel on the host, where PP-OCR's row reductions
// are slow, so most cases run it on the first image only.
//
// ONE CASE PER PROCESS for the "[emulated] a sticky fault ..." cases: the kernel fault each injects poisons
// the device's primary context, which every runner in the process shares (and the weights and
// modules are cached per Model and device across contexts, runtime/cuda/runner.cc), so every
// later CUDA test in the same process would fail. They are the last cases of this file, and
// scripts/gpu-check runs each "[gpu]" / "[emulated]" case in a process of its own.
#ifdef KILN_HAVE_CUDA

#include <doctest/doctest.h>

#include <cuda.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "compiler/compile.h"
#include "kiln/tensor_files.h"
#include "kiln/runtime.h"
#include "runtime/cuda/driver.h"
#include "runtime/model_impl.h"
#include "tests/compiler/compile_util.h"
#include "tests/compiler/onnx_model_builder.h"
#include "tests/cpu_reference.h"
#include "tests/e2e/model_dirs.h"
#include "tests/gpu_test_util.h"
#include "tests/runtime/count_allocations.h"
#include "tests/text_util.h"

namespace kiln {
namespace {

using io::HostTensor;
using testing::CheckClose;
using testing::EmulatedCudaControl;
using testing::Sentinel;
using testing::Views;

constexpr char kSilero[] = "silero_vad_16k_op15";
constexpr char kCls[] = "ch_ppocr_mobile_v2.0_cls";
constexpr double kModelAtol = 1e-4, kModelRtol = 1e-3;  // real models (the project's rule)
constexpr double kSmallAtol = 1e-5, kSmallRtol = 1e-4;  // the small MatMul model

// ---- Models and inputs ----------------------------------------------------------------------------

// A real model of the test data, compiled with GPU images; once per process.
const std::vector<uint8_t>& RealArtifact(const std::string& name) {
  static std::map<std::string, std::vector<uint8_t>> cache;
  if (auto it = cache.find(name); it != cache.end()) return it->second;
  const std::string onnx = testing::TestDataDir() + "/" + name + "/model.onnx";
  REQUIRE_MESSAGE(std::filesystem::exists(onnx), onnx << " is missing (scripts/test.sh makes the test data)");
  auto bytes = compiler::CompileOnnxFile(onnx, compiler::CompileOptions{}, nullptr);
  REQUIRE_MESSAGE(bytes.ok(), name << ": " << bytes.status().ToString());
  return cache.emplace(name, std::move(*bytes)).first->second;
}

std::vector<HostTensor> RealInputs(const std::string& name) {
  return testing::ReadInputs(RealArtifact(name), testing::TestDataDir() + "/" + name + "/test_data_set_0");
}

// The first item of a batch (dim 0).
HostTensor FirstItem(HostTensor t) {
  REQUIRE(!t.dims.empty());
  REQUIRE(t.dims[0] >= 1);
  t.bytes.resize(t.bytes.size() / static_cast<size_t>(t.dims[0]));
  t.dims[0] = 1;
  return t;
}

// The classifier's test image, first of its batch: float32 [1, 3, 48, 192].
std::vector<HostTensor> ClsOneImage() {
  std::vector<HostTensor> in = RealInputs(kCls);
  REQUIRE(in.size() == 1);
  in[0] = FirstItem(std::move(in[0]));
  REQUIRE(in[0].dims.size() == 4);
  return in;
}

// The first `width` columns of an NCHW float32 image.
HostTensor CropWidth(const HostTensor& t, int64_t width) {
  REQUIRE(t.dims.size() == 4);
  REQUIRE(t.dtype == DType::kFloat32);
  const int64_t rows = t.dims[0] * t.dims[1] * t.dims[2], w = t.dims[3];
  REQUIRE(width <= w);
  HostTensor c = t;
  c.dims[3] = width;
  c.bytes.resize(static_cast<size_t>(rows * width) * sizeof(float));
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(c.bytes.data() + r * width * sizeof(float), t.bytes.data() + r * w * sizeof(float),
                static_cast<size_t>(width) * sizeof(float));
  return c;
}

std::vector<float> SeededFloats(size_t n, uint32_t seed, float scale) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// x [4, 32] -> MatMul [32, 48] -> Add -> Relu -> Gemm ([48, 16], C [16]) -> Softmax: two
// cuBLASLt instructions (the biases in their epilogues), a generated Relu (cuBLASLt's ReLU
// epilogue has no NaN rule: docs/semantics.md) and a generated row reduction.
const std::vector<uint8_t>& MlpArtifact() {
  static const std::vector<uint8_t> bytes = [] {
    onnx::ModelProto m = testing::MakeModel(17);
    onnx::GraphProto* g = m.mutable_graph();
    testing::AddInput(g, "x", {"4", "32"});
    testing::AddFloatInit(g, "w1", {32, 48}, SeededFloats(32 * 48, 11, 0.25f));
    testing::AddFloatInit(g, "b1", {48}, SeededFloats(48, 12, 0.5f));
    testing::AddFloatInit(g, "w2", {48, 16}, SeededFloats(48 * 16, 13, 0.25f));
    testing::AddFloatInit(g, "b2", {16}, SeededFloats(16, 14, 0.5f));
    testing::AddNode(g, "MatMul", {"x", "w1"}, {"h"}, "fc1");
    testing::AddNode(g, "Add", {"h", "b1"}, {"hb"}, "fc1_bias");
    testing::AddNode(g, "Relu", {"hb"}, {"a"}, "relu");
    testing::AddNode(g, "Gemm", {"a", "w2", "b2"}, {"logits"}, "fc2");
    testing::AttrInt(testing::AddNode(g, "Softmax", {"logits"}, {"y"}, "softmax"), "axis", -1);
    testing::AddOutput(g, "y");
    return testing::CompileModel(m, compiler::CompileOptions{});
  }();
  return bytes;
}

// A float32 input 'x' of shape `dims` holding `values`.
HostTensor FloatInput(std::vector<int64_t> dims, const std::vector<float>& values) {
  HostTensor x;
  x.name = "x";
  x.dtype = DType::kFloat32;
  x.dims = std::move(dims);
  x.bytes.resize(values.size() * sizeof(float));
  std::memcpy(x.bytes.data(), values.data(), x.bytes.size());
  return x;
}

std::vector<HostTensor> MlpInputs() { return {FloatInput({4, 32}, SeededFloats(4 * 32, 7, 2.0f))}; }

// x [rows, 5] -> Relu (generated) -> Hardmax -> ArgMax (on the CPU: one fallback region) ->
// Cast to float32 (generated): `rows` is a number or a symbol.
std::vector<uint8_t> RegionArtifact(const std::string& rows) {
  onnx::ModelProto m = testing::MakeModel(13);
  onnx::GraphProto* g = m.mutable_graph();
  testing::AddInput(g, "x", {rows, "5"});
  testing::AddNode(g, "Relu", {"x"}, {"r"}, "relu");
  testing::AddNode(g, "Hardmax", {"r"}, {"h"}, "hardmax");
  testing::AttrInt(testing::AddNode(g, "ArgMax", {"h"}, {"a"}, "argmax"), "axis", 1);
  testing::AttrInt(testing::AddNode(g, "Cast", {"a"}, {"y"}, "cast"), "to", onnx::TensorProto::FLOAT);
  testing::AddOutput(g, "y");
  return testing::CompileModel(m, compiler::CompileOptions{});
}

Model Load(const std::vector<uint8_t>& artifact) {
  auto model = Model::Load(artifact);
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  return std::move(*model);
}

// ---- Running and comparing --------------------------------------------------------------------------

ContextOptions Cuda(bool graphs = false, bool profile = false) {
  ContextOptions o;
  o.device = Device::kCuda;
  o.cuda.graphs = graphs;
  o.profile = profile;
  return o;
}

ExecutionContext CreateCuda(const Model& model, const ContextOptions& options) {
  auto ctx = ExecutionContext::Create(model, options);
  REQUIRE_MESSAGE(ctx.ok(), ctx.status().ToString());
  REQUIRE(ctx->device() == Device::kCuda);
  return std::move(*ctx);
}

// Run into caller-owned host outputs `out` (Run copies into them), then Synchronize.
Status RunInto(ExecutionContext& ctx, const std::vector<HostTensor>& inputs, std::vector<HostTensor>& out,
               CUstream stream = nullptr) {
  std::vector<TensorView> views = Views(out);
  KILN_RETURN_IF_ERROR(ctx.Run(Views(inputs), views, stream));
  return ctx.Synchronize(stream);
}

bool SameBits(const std::vector<HostTensor>& a, const std::vector<HostTensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t o = 0; o < a.size(); ++o)
    if (a[o].dims != b[o].dims || a[o].bytes != b[o].bytes) return false;
  return true;
}

// ---- The emulated device ------------------------------------------------------------------------------

const cuda::Driver& Drv() {
  auto drv = cuda::LoadDriver();
  REQUIRE_MESSAGE(drv.ok(), drv.status().ToString());
  return **drv;
}

// Clears the injected faults when the case ends, however it ends.
struct FaultGuard {
  const EmulatedCudaControl* emu;
  ~FaultGuard() { emu->set_faults(""); }
};

void Inject(const EmulatedCudaControl* emu, const char* spec) { REQUIRE(emu->set_faults(spec) == 0); }

// A non-blocking stream of the current context (a CUDA ExecutionContext made on this thread
// made the device's primary context current). Declare it after the context: it goes first.
struct Stream {
  CUstream s = nullptr;
  Stream() { REQUIRE(Drv().StreamCreate(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS); }
  ~Stream() {
    if (s) Drv().StreamDestroy(s);
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
};

// Page-locked host memory (cuMemAllocHost): copies into it are asynchronous.
struct Pinned {
  void* p = nullptr;
  explicit Pinned(size_t bytes) { REQUIRE(Drv().MemAllocHost(&p, bytes) == CUDA_SUCCESS); }
  ~Pinned() {
    if (p) Drv().MemFreeHost(p);
  }
  Pinned(const Pinned&) = delete;
  Pinned& operator=(const Pinned&) = delete;
};

// A host tensor copied into device memory (freed at the end), and its device view.
struct OnDevice {
  CUdeviceptr ptr = 0;
  TensorView view;
  explicit OnDevice(const HostTensor& t) {
    REQUIRE(Drv().MemAlloc(&ptr, t.bytes.size()) == CUDA_SUCCESS);
    REQUIRE(Drv().MemcpyHtoD(ptr, t.bytes.data(), t.bytes.size()) == CUDA_SUCCESS);
    view = t.view();
    view.data = reinterpret_cast<void*>(ptr);
    view.memory = MemoryKind::kDevice;
  }
  ~OnDevice() { Drv().MemFree(ptr); }
  OnDevice(const OnDevice&) = delete;
  OnDevice& operator=(const OnDevice&) = delete;
};

// Device memory the emulated driver holds now, and what it freed for destroyed contexts (where
// an allocation Kiln leaked would end up): both unchanged across a case means nothing leaked.
struct DeviceMemory {
  uint64_t live = 0, freed_with_context = 0;
  static DeviceMemory Now(const EmulatedCudaControl* emu) {
    return {emu->counter("live_device_allocations"), emu->counter("allocations_freed_with_context")};
  }
};

void CheckNoLeak(const EmulatedCudaControl* emu, const DeviceMemory& before, const std::string& after_what) {
  const DeviceMemory now = DeviceMemory::Now(emu);
  CHECK_MESSAGE(now.live == before.live, after_what << ": " << now.live << " live device allocations, "
                                                    << before.live << " before");
  CHECK_MESSAGE(now.freed_with_context == before.freed_with_context,
                after_what << ": " << (now.freed_with_context - before.freed_with_context)
                           << " device allocations were still held when their context was destroyed");
}

using testing::Contains;

// ---- The call log ---------------------------------------------------------------------------------

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(line);
  return lines;
}

std::string Join(const std::vector<std::string>& lines) {
  std::string s;
  for (const std::string& l : lines) s += "    " + l + "\n";
  return s.empty() ? "    (nothing)\n" : s;
}

bool StartsWith(const std::string& s, std::string_view p) { return s.compare(0, p.size(), p) == 0; }
bool IsLaunch(const std::string& l) { return StartsWith(l, "cuLaunchKernel "); }
bool IsDnn(const std::string& l) { return StartsWith(l, "cudnn"); }
bool IsBlas(const std::string& l) { return StartsWith(l, "cublasLt"); }
template <typename P>
int CountIf(const std::vector<std::string>& lines, P p) {
  return static_cast<int>(std::count_if(lines.begin(), lines.end(), p));
}

// The call log of one profiled Run of an entry of `n` instructions, cut at its CUDA events.
// Execute (runtime/cuda/runner.cc) records the start event, stages the inputs, records
// marks[0], then after each instruction i marks[i + 1], and last the stop event: n + 3
// "cuEventRecord" lines. Run then copies the outputs into caller buffers, and Synchronize reads
// the kernels' error words.
struct Segments {
  std::vector<std::string> staging;                    // between the start event and marks[0]
  std::vector<std::vector<std::string>> instructions;  // instruction i: between marks[i] and marks[i + 1]
  std::vector<std::string> after;                      // after the stop event
};

Segments SegmentsOf(const std::string& log, size_t n) {
  std::vector<std::vector<std::string>> groups(1);
  for (const std::string& line : Lines(log)) {
    if (line == "cuEventRecord") groups.emplace_back();
    else groups.back().push_back(line);
  }
  INFO("the call log:\n" << log);
  REQUIRE_MESSAGE(groups.size() - 1 == n + 3, "expected " << n + 3 << " cuEventRecord lines for " << n
                                                          << " profiled instructions, found " << groups.size() - 1);
  CHECK_MESSAGE(groups[0].empty(), "enqueued before the start event:\n" << Join(groups[0]));
  CHECK_MESSAGE(groups[n + 2].empty(), "enqueued after the last instruction's event:\n" << Join(groups[n + 2]));
  Segments s;
  s.staging = groups[1];
  for (size_t i = 0; i < n; ++i) s.instructions.push_back(groups[i + 2]);
  s.after = groups[n + 3];
  return s;
}

// The CUDA entry point of a generated instruction (Model::kernels() name), "" for another.
std::string KernelOf(const Model& model, int32_t e, size_t i) {
  const Model::Impl& mi = model.impl();
  const PreparedInstruction& pi = mi.prepared[static_cast<size_t>(e)].instructions[i];
  if (pi.program == nullptr) return "";
  return model.kernels()[static_cast<size_t>(pi.program - mi.programs.data())].name;
}

const Stats::Fallback* FallbackOf(const Stats& stats, size_t i) {
  for (const Stats::Fallback& f : stats.last_fallbacks)
    if (f.instruction == static_cast<int32_t>(i)) return &f;
  return nullptr;
}

// Each instruction of the last Run's entry enqueued what its CUDA placement does: @generated its own
// kernel's launch and nothing else; @cudnn / @cublaslt that library's calls and no launch, unless
// Stats::last_fallbacks reports it (with a reason): then it runs on the host. Consecutive
// instructions on the host (@cpu, or reported fallbacks) form one CPU fallback region, whose
// copies are all enqueued at its first instruction: no launch, no library call, and at least
// one output copied back to the device (what is read after the region); the region's other
// instructions enqueue nothing. Returns the size of the largest region.
size_t CheckPlacement(const Model& model, const ExecutionContext& ctx, const Segments& seg) {
  const Stats& stats = ctx.stats();
  const int32_t e = stats.last_entry;
  REQUIRE(e >= 0);
  const EntryInfo& entry = model.entries()[static_cast<size_t>(e)];
  REQUIRE(seg.instructions.size() == entry.instructions.size());
  for (const Stats::Fallback& f : stats.last_fallbacks) {
    REQUIRE(f.instruction >= 0);
    REQUIRE(static_cast<size_t>(f.instruction) < entry.instructions.size());
    const InstructionInfo& info = entry.instructions[static_cast<size_t>(f.instruction)];
    const Library lib = info.library("cuda");
    CHECK_MESSAGE((lib == Library::kCudnn || lib == Library::kCublasLt), "a fallback reported for " << info.label());
    CHECK(!f.reason.empty());
  }
  auto on_host = [&](size_t i) {
    const Library exec = entry.instructions[i].library("cuda");
    return exec == Library::kCpuKernel ||
           ((exec == Library::kCudnn || exec == Library::kCublasLt) && FallbackOf(stats, i) != nullptr);
  };
  size_t region = 0, largest = 0;
  for (size_t i = 0; i < entry.instructions.size(); ++i) {
    const InstructionInfo& info = entry.instructions[i];
    const std::vector<std::string>& calls = seg.instructions[i];
    INFO("instruction " << i << " " << info.label() << " enqueued:\n" << Join(calls));
    const Library exec = info.library("cuda");
    // The profile names what ran it: its library, or the CPU kernel where it ran on the host.
    REQUIRE(stats.last_instruction_library.size() == entry.instructions.size());
    CHECK(stats.last_instruction_library[i] == (on_host(i) ? Library::kCpuKernel : exec));
    const int launches = CountIf(calls, IsLaunch), dnn = CountIf(calls, IsDnn), blas = CountIf(calls, IsBlas);
    const int to_device = CountIf(calls, [](const std::string& l) { return StartsWith(l, "cuMemcpyHtoDAsync "); });
    const Stats::Fallback* fallback = FallbackOf(stats, i);
    region = on_host(i) ? region + 1 : 0;
    largest = std::max(largest, region);
    if (region > 1) {
      CHECK_MESSAGE(calls.empty(), "inside a CPU fallback region: its copies belong to its first instruction");
      continue;
    }
    if (exec == Library::kGenerated) {
      const std::string kernel = KernelOf(model, e, i);
      CHECK(!kernel.empty());
      CHECK(info.kernel == kernel);
      CHECK(info.op == "kiln.Fused");
      CHECK(!info.member_ops.empty());
      CHECK(calls == std::vector<std::string>{"cuLaunchKernel " + kernel});
      CHECK(fallback == nullptr);
    } else if (exec == Library::kCudnn || exec == Library::kCublasLt) {
      CHECK(info.kernel.empty());
      CHECK(launches == 0);
      if (fallback != nullptr) {
        CHECK(dnn + blas == 0);
        CHECK(to_device >= 1);
      } else {
        CHECK((exec == Library::kCudnn ? dnn : blas) >= 1);
        CHECK((exec == Library::kCudnn ? blas : dnn) == 0);
        // No copies, but on an RNN's first run the fill of cuDNN's weight space (runtime/cuda/rnn.h):
        // its sequence lengths, a memset, and per direction and linear layer a matrix and a bias.
        const bool rnn = info.op == "LSTM" || info.op == "GRU" || info.op == "RNN";
        const int fill = rnn ? CountIf(calls, [](const std::string& l) {
          return StartsWith(l, "cuMemcpyHtoDAsync ") || StartsWith(l, "cuMemsetD8Async ") ||
                 StartsWith(l, "cuMemcpyDtoDAsync ");
        })
                             : 0;
        CHECK(calls.size() == static_cast<size_t>(dnn + blas + fill));
      }
    } else if (exec == Library::kCpuKernel) {
      CHECK(launches == 0);
      CHECK(dnn + blas == 0);
      CHECK(to_device >= 1);
      CHECK(fallback == nullptr);
    } else {
      FAIL_CHECK("a CUDA placement the CUDA backend does not run: " << LibraryName(exec));
    }
  }
  return largest;
}

// Runs `artifact` once on a profiling CUDA context into host outputs, with the call log on,
// and checks where each instruction ran, the staging and output copies, and the outputs against
// the CPU backend's. Returns the context's stats.
Stats CheckOneProfiledRun(const std::string& what, const std::vector<uint8_t>& artifact,
                          const std::vector<HostTensor>& inputs, double atol, double rtol) {
  INFO(what);
  const EmulatedCudaControl* emu = testing::EmulatedCuda();
  const Model model = Load(artifact);
  const std::vector<HostTensor> want = testing::RunCpuReference(model, inputs);
  ExecutionContext ctx = CreateCuda(model, Cuda(false, true));
  std::vector<HostTensor> got = Sentinel(want);
  emu->log_begin();
  const Status st = RunInto(ctx, inputs, got);
  const std::string log = emu->log_take();
  REQUIRE_MESSAGE(st.ok(), st.ToString());
  const int32_t e = ctx.stats().last_entry;
  REQUIRE(e >= 0);
  const size_t n = model.entries()[static_cast<size_t>(e)].instructions.size();
  const Segments seg = SegmentsOf(log, n);
  const size_t largest_region = CheckPlacement(model, ctx, seg);
  MESSAGE(what << ": the largest CPU fallback region has " << largest_region << " instruction(s)");
  CHECK(ctx.stats().last_instruction_ns.size() == n);
  // Staging: each host input copied once (and perhaps the symbolic values); after the stop
  // event, each output copied to its host buffer, then the error words read.
  for (const HostTensor& in : inputs)
    CHECK_MESSAGE(CountIf(seg.staging, [&](const std::string& l) {
                    return l == "cuMemcpyHtoDAsync " + std::to_string(in.bytes.size());
                  }) >= 1,
                  "input '" << in.name << "' (" << in.bytes.size() << " bytes) not staged:\n" << Join(seg.staging));
  std::vector<std::string> expect_after;
  for (const HostTensor& o : want) expect_after.push_back("cuMemcpyDtoHAsync " + std::to_string(o.bytes.size()));
  expect_after.push_back("cuMemcpyDtoHAsync 16");  // Synchronize: the kernels' error words (check, index, bound)
  CHECK_MESSAGE(seg.after == expect_after, "after the stop event:\n" << Join(seg.after));
  CheckClose(got, want, atol, rtol, what);
  return ctx.stats();
}

// ---- Steady state --------------------------------------------------------------------------------

// The segments of device work of `entry` as its artifact places them (every library takes its
// instructions): the maximal runs of instructions whose CUDA placement is not a CPU kernel, between CPU
// fallback segments. Each is a CUDA graph of its own (runtime/cuda/graphs.h).
size_t DeviceSegments(const EntryInfo& entry) {
  size_t n = 0;
  bool in = false;
  for (const InstructionInfo& i : entry.instructions) {
    const bool device = i.library("cuda") != Library::kCpuKernel;
    n += device && !in ? 1 : 0;
    in = device;
  }
  return n;
}

// Three warm-up runs (the second captures a graph of each device segment), then five more: no
// allocation in Kiln's code on the host, none on the device, and the outputs still right.
void CheckSteadyState(const std::string& what, const std::vector<uint8_t>& artifact,
                      const std::vector<HostTensor>& inputs, bool graphs, size_t device_segments) {
  const std::string mode = graphs ? "CUDA graphs on a created stream" : "no graphs, the legacy stream";
  INFO(what << ", " << mode);
  const EmulatedCudaControl* emu = testing::EmulatedCuda();
  const Model model = Load(artifact);
  const std::vector<HostTensor> want = testing::RunCpuReference(model, inputs);
  ExecutionContext ctx = CreateCuda(model, Cuda(graphs));
  std::optional<Stream> created;
  if (graphs) created.emplace();
  const CUstream stream = created ? created->s : nullptr;
  std::vector<HostTensor> got = Sentinel(want);
  const std::vector<TensorView> in = Views(inputs);
  std::vector<TensorView> out = Views(got);
  for (int run = 0; run < 3; ++run) {
    Status st = ctx.Run(in, out, stream);
    if (st.ok()) st = ctx.Synchronize(stream);
    REQUIRE_MESSAGE(st.ok(), "warm-up run " << run + 1 << ": " << st.ToString());
  }
  const uint64_t device_allocations = emu->counter("device_allocations");
  bool ok = true;
  const long host_allocations = testing::CountKilnAllocations([&] {
    for (int run = 0; run < 5; ++run) ok = ok && ctx.Run(in, out, stream).ok() && ctx.Synchronize(stream).ok();
  });
  CHECK(ok);
  CHECK_MESSAGE(host_allocations == 0, host_allocations << " allocations in Kiln's code in 5 steady-state runs:\n"
                                                        << testing::CountedAllocationStacks());
  CHECK(emu->counter("device_allocations") == device_allocations);
  CHECK(ctx.stats().last_fallbacks.empty());
  CheckClose(got, want, kModelAtol, kModelRtol, what);
  // Runs 2..8 of one shape: the 2nd captures each device segment, the others replay them; the
  // CPU fallback segments between them run uncaptured.
  REQUIRE(DeviceSegments(model.entries()[static_cast<size_t>(ctx.stats().last_entry)]) == device_segments);
  CHECK(ctx.stats().graph_misses == (graphs ? device_segments : 0u));
  CHECK(ctx.stats().graph_hits == (graphs ? 6 * device_segments : 0u));
}

// =====================================================================================================

TEST_CASE("[emulated] every instruction runs where its artifact places it, or the runtime says why") {
  KILN_REQUIRE_EMULATED_CUDA();
  {
    const Stats s = CheckOneProfiledRun(kSilero, RealArtifact(kSilero), RealInputs(kSilero), kModelAtol, kModelRtol);
    CHECK(s.last_fallbacks.empty());
    const Model model = Load(RealArtifact(kSilero));
    int lstms = 0;
    for (const InstructionInfo& info : model.entries()[static_cast<size_t>(s.last_entry)].instructions) {
      if (info.op != "LSTM") continue;
      ++lstms;
      CHECK_MESSAGE(info.library("cuda") == Library::kCudnn, info.label());  // cuDNN's RNN (runtime/cuda/rnn.h)
    }
    CHECK(lstms == 1);
  }
  {
    const Stats s = CheckOneProfiledRun(kCls, RealArtifact(kCls), RealInputs(kCls), kModelAtol, kModelRtol);
    const Model model = Load(RealArtifact(kCls));
    int dnn = 0;
    for (const InstructionInfo& info : model.entries()[static_cast<size_t>(s.last_entry)].instructions)
      dnn += info.library("cuda") == Library::kCudnn;
    CHECK(dnn > 10);
  }
  {
    const Stats s = CheckOneProfiledRun("MatMul/Gemm model", MlpArtifact(), MlpInputs(), kSmallAtol, kSmallRtol);
    CHECK(s.last_fallbacks.empty());
    const Model model = Load(MlpArtifact());
    int blas = 0;
    for (const InstructionInfo& info : model.entries()[static_cast<size_t>(s.last_entry)].instructions)
      blas += info.library("cuda") == Library::kCublasLt;
    CHECK(blas == 2);
  }
}

TEST_CASE("[emulated] consecutive CPU instructions run as one CPU fallback region: one copy in, one copy back") {
  KILN_REQUIRE_EMULATED_CUDA();
  const std::vector<uint8_t> artifact = RegionArtifact("2");
  const HostTensor x = FloatInput({2, 5}, {0.5f, -1, 3, 2, 0, -4, 1, 1.5f, 7, 2});

  const EmulatedCudaControl* emu = testing::EmulatedCuda();
  const Model model = Load(artifact);
  const std::vector<HostTensor> want = testing::RunCpuReference(model, {x});
  ExecutionContext ctx = CreateCuda(model, Cuda(false, true));
  std::vector<HostTensor> got = Sentinel(want);
  emu->log_begin();
  const Status st = RunInto(ctx, {x}, got);
  const std::string log = emu->log_take();
  REQUIRE_MESSAGE(st.ok(), st.ToString());
  const EntryInfo& entry = model.entries()[static_cast<size_t>(ctx.stats().last_entry)];
  const Segments seg = SegmentsOf(log, entry.instructions.size());
  CHECK(CheckPlacement(model, ctx, seg) == 2);
  size_t hardmax = entry.instructions.size();
  for (size_t i = 0; i < entry.instructions.size(); ++i)
    if (entry.instructions[i].op == "Hardmax") hardmax = i;
  REQUIRE(hardmax + 1 < entry.instructions.size());
  CHECK(entry.instructions[hardmax + 1].op == "ArgMax");
  // The region's copies, all at its first instruction: Relu's output r (10 floats) to the host,
  // then ArgMax's output (2 int64) back. Hardmax's output h lives and dies on the host.
  CHECK(seg.instructions[hardmax] == std::vector<std::string>{"cuMemcpyDtoHAsync 40", "cuMemcpyHtoDAsync 16"});
  CHECK(seg.instructions[hardmax + 1].empty());
  // The argmax of each row, hand-computed: 2 and 3.
  REQUIRE(got.size() == 1);
  std::vector<float> y(2);
  REQUIRE(got[0].bytes.size() == y.size() * sizeof(float));
  std::memcpy(y.data(), got[0].bytes.data(), got[0].bytes.size());
  CHECK(y == std::vector<float>{2, 3});
  // The region ran in the host arena and workspace, placed for it: they are the context's
  // host memory now.
  CHECK(ctx.memory_usage().host_bytes > 0);
}

TEST_CASE("[emulated] a CPU fallback region after a change of shapes runs in host memory placed for them") {
  KILN_REQUIRE_EMULATED_CUDA();
  // Each new N binds the entry again, and its region needs the host arena placed for that N.
  const Model model = Load(RegionArtifact("N"));
  ExecutionContext ctx = CreateCuda(model, Cuda());
  for (const int64_t n : {2, 7, 3, 7}) {
    INFO("N = " << n);
    const HostTensor x = FloatInput({n, 5}, SeededFloats(static_cast<size_t>(n * 5), static_cast<uint32_t>(n), 3.0f));
    const std::vector<HostTensor> want = testing::RunCpuReference(model, {x});
    std::vector<HostTensor> got = Sentinel(want);
    const Status st = RunInto(ctx, {x}, got);
    REQUIRE_MESSAGE(st.ok(), st.ToString());
    CHECK(ctx.stats().last_fallbacks.empty());
    REQUIRE(got.size() == 1);
    CHECK(got[0].bytes == want[0].bytes);  // argmax indices: exact
  }
}

TEST_CASE("[emulated] a CUDA context whose entry runs wholly on the device holds no host arena") {
  KILN_REQUIRE_EMULATED_CUDA();
  const Model model = Load(MlpArtifact());
  ExecutionContext ctx = CreateCuda(model, Cuda());
  std::vector<HostTensor> got = Sentinel(testing::RunCpuReference(model, MlpInputs()));
  for (int run = 0; run < 2; ++run) REQUIRE(RunInto(ctx, MlpInputs(), got).ok());
  CHECK(ctx.stats().last_fallbacks.empty());
  const ExecutionContext::MemoryUsage m = ctx.memory_usage();
  CHECK(m.host_bytes == 0);
  CHECK(ctx.arena_bytes() == 0);
  // The device holds the arena (4 x 48 floats of h and a, at least), the weights and staging.
  CHECK(m.device_bytes >= model.impl().weights_size + 4 * 48 * sizeof(float));
}

TEST_CASE("[emulated] a fallback is reported: cuDNN refusing a call when it runs moves that instruction to the CPU") {
  KILN_REQUIRE_EMULATED_CUDA();
  const EmulatedCudaControl* emu = testing::EmulatedCuda();
  FaultGuard guard{emu};
  const Model model = Load(RealArtifact(kCls));
  const std::vector<HostTensor> inputs = ClsOneImage();
  const std::vector<HostTensor> want = testing::RunCpuReference(model, inputs);
  const std::vector<InstructionInfo>& infos = model.entries()[0].instructions;
  // The fault fires at the first cuDNN convolution or pooling call: the first @cudnn instruction.
  size_t refused = infos.size();
  for (size_t i = 0; i < infos.size() && refused == infos.size(); ++i)
    if (infos[i].library("cuda") == Library::kCudnn) refused = i;
  REQUIRE(refused < infos.size());
  INFO("the refused instruction: " << refused << " " << infos[refused].label());

  ExecutionContext ctx = CreateCuda(model, Cuda(false, true));
  const uint64_t fired = emu->counter("faults_fired");
  Inject(emu, "dnn-not-supported@1");
  for (int run = 1; run <= 2; ++run) {
    INFO("run " << run << " of the context");
    std::vector<HostTensor> got = Sentinel(want);
    emu->log_begin();
    const Status st = RunInto(ctx, inputs, got);
    const std::string log = emu->log_take();
    REQUIRE_MESSAGE(st.ok(), st.ToString());
    REQUIRE(ctx.stats().last_entry == 0);
    const Stats& stats = ctx.stats();
    REQUIRE(stats.last_fallbacks.size() == 1);
    CHECK(stats.last_fallbacks[0].instruction == static_cast<int32_t>(refused));
    CHECK_MESSAGE(Contains(stats.last_fallbacks[0].reason, "cuDNN refused it when it ran"),
                  stats.last_fallbacks[0].reason);
    CHECK_MESSAGE(Contains(stats.last_fallbacks[0].reason, "CUDNN_STATUS_NOT_SUPPORTED"),
                  stats.last_fallbacks[0].reason);
    const Segments seg = SegmentsOf(log, infos.size());
    CheckPlacement(model, ctx, seg);  // the refused instruction: no cuDNN call, a CPU fallback's copies
    CHECK(CountIf(seg.instructions[refused], IsDnn) == 0);
    CheckClose(got, want, kModelAtol, kModelRtol, "PP-OCR cls with a refused cuDNN call");
  }
  CHECK(emu->counter("faults_fired") == fired + 1);

  // A new context decides afresh: cuDNN runs the instruction.
  ExecutionContext fresh = CreateCuda(model, Cuda(false, true));
  std::vector<HostTensor> got = Sentinel(want);
  emu->log_begin();
  const Status st = RunInto(fresh, inputs, got);
  const std::string log = emu->log_take();
  REQUIRE_MESSAGE(st.ok(), st.ToString());
  CHECK(fresh.stats().last_fallbacks.empty());
  const Segments seg = SegmentsOf(log, infos.size());
  CheckPlacement(model, fresh, seg);
  CHECK(CountIf(seg.instructions[refused], IsDnn) >= 1);
  CheckClose(got, want, kModelAtol, kModelRtol, "PP-OCR cls in a new context");
}

TEST_CASE("[emulated] steady-state runs allocate nothing, on the host or the device") {
  KILN_REQUIRE_EMULATED_CUDA();
  for (bool graphs : {false, true}) {
    CheckSteadyState(kSilero, RealArtifact(kSilero), RealInputs(kSilero), graphs, 1);  // its LSTM on cuDNN RNN too
    CheckSteadyState(kCls, RealArtifact(kCls), ClsOneImage(), graphs, 1);
  }
}

// The first Run of a context warmed for its shapes (by Create for fixed shapes, by Warm for
// symbolic ones) allocates no device memory, loads no module and asks cuBLASLt or cuDNN for no
// algorithm: the device arena, the staging of host inputs, the symbolic values and the library
// workspace were reserved, and the cuBLASLt and cuDNN convolution plans made, before it.
TEST_CASE("[emulated] the first Run after Create or Warm allocates no device memory and loads no module") {
  KILN_REQUIRE_EMULATED_CUDA();
  const EmulatedCudaControl* emu = testing::EmulatedCuda();
  struct Case {
    const char* what;
    std::vector<uint8_t> artifact;
    std::vector<HostTensor> inputs;
    bool warm;  // symbolic shapes: Warm at the inputs' shapes
    double atol = kSmallAtol, rtol = kSmallRtol;
  };
  const HostTensor x = FloatInput({3, 5}, SeededFloats(15, 5, 3.0f));
  const Case cases[] = {{"MatMul/Gemm model, fixed shapes", MlpArtifact(), MlpInputs(), false},
                        {"PP-OCR cls: Convs and pools on cuDNN, symbolic batch", RealArtifact(kCls), ClsOneImage(), true,
                         kModelAtol, kModelRtol},
                        {"a CPU fallback region, fixed shapes", RegionArtifact("3"), {x}, false},
                        {"a CPU fallback region, symbolic N", RegionArtifact("N"), {x}, true}};
  for (const Case& c : cases) {
    INFO(c.what);
    const Model model = Load(c.artifact);
    const std::vector<HostTensor> want = testing::RunCpuReference(model, c.inputs);
    ExecutionContext ctx = CreateCuda(model, Cuda());
    if (c.warm) REQUIRE(ctx.Warm(Views(c.inputs)).ok());
    const uint64_t allocations = emu->counter("device_allocations"), modules = emu->counter("module_loads");
    const uint64_t plans = emu->counter("library_plans");
    std::vector<HostTensor> got = Sentinel(want);
    const Status st = RunInto(ctx, c.inputs, got);
    REQUIRE_MESSAGE(st.ok(), st.ToString());
    CHECK(emu->counter("device_allocations") == allocations);
    CHECK(emu->counter("module_loads") == modules);
    CHECK(emu->counter("library_plans") == plans);  // cuBLASLt's and cuDNN's convolution algorithms
    CHECK(ctx.stats().calls == 1);
    CheckClose(got, want, c.atol, c.rtol, c.what);
  }
}

TEST_CASE("[emulated] Run enqueues on the caller's stream, results are right after Synchronize") {
  KILN_REQUIRE_EMULATED_CUDA();
  const EmulatedCudaControl* emu = testing::EmulatedCuda();
  const Model model = Load(RealArtifact(kCls));
  const std::vector<HostTensor> inputs = RealInputs(kCls);  // the batch of 2
  const std::vector<HostTensor> want = testing::RunCpuReference(model, inputs);
  ExecutionContext ctx = CreateCuda(model, Cuda());
  Stream stream;
  std::vector<std::unique_ptr<Pinned>> pinned;
  std::vector<TensorView> out;
  for (const HostTensor& w : want) {
    pinned.push_back(std::make_unique<Pinned>(w.bytes.size()));
    std::memset(pinned.back()->p, 0xA5, w.bytes.size());
    out.push_back(TensorView::Host(pinned.back()->p, w.dtype, w.dims.data(), static_cast<int32_t>(w.dims.size())));
  }
  emu->log_begin();
  Status st = ctx.Run(Views(inputs), out, stream.s);
  const std::string log = emu->log_take();
  REQUIRE_MESSAGE(st.ok(), st.ToString());
  // The outputs' copies into the pinned buffers were enqueued last, after the stop event.
  const std::vector<std::string> lines = Lines(log);
  REQUIRE(lines.size() > want.size());
  for (size_t o = 0; o < want.size(); ++o)
    CHECK(lines[lines.size() - want.size() + o] == "cuMemcpyDtoHAsync " + std::to_string(want[o].bytes.size()));
  CHECK(lines[lines.size() - want.size() - 1] == "cuEventRecord");
  st = ctx.Synchronize(stream.s);
  REQUIRE_MESSAGE(st.ok(), st.ToString());
  std::vector<HostTensor> got = want;
  for (size_t o = 0; o < want.size(); ++o) std::memcpy(got[o].bytes.data(), pinned[o]->p, got[o].bytes.size());
  CheckClose(got, want, kModelAtol, kModelRtol, "PP-OCR cls into pinned buffers");
  CHECK(ctx.stats().last_gpu_ns >= 0);  // Synchronize read the CUDA events
}

TEST_CASE("[emulated] CUDA graphs: captured at the second run of a shape, replayed after, results identical") {
  KILN_REQUIRE_EMULATED_CUDA();
  const EmulatedCudaControl* emu = testing::EmulatedCuda();
  const Model model = Load(RealArtifact(kCls));
  for (const InstructionInfo& info : model.entries()[0].instructions)
    REQUIRE_MESSAGE(info.library("cuda") != Library::kCpuKernel, "PP-OCR cls is no longer device-only: " << info.label());
  const std::vector<HostTensor> a = ClsOneImage();                  // [1, 3, 48, 192]
  const std::vector<HostTensor> b = {CropWidth(a[0], 96)};          // [1, 3, 48, 96]: fits A's buffers
  const std::vector<HostTensor> like_a = testing::RunCpuReference(model, a);
  const std::vector<HostTensor> like_b = testing::RunCpuReference(model, b);

  // Reference: an uncaptured context on the same inputs.
  std::vector<HostTensor> ref_a = Sentinel(like_a), ref_b = Sentinel(like_b);
  {
    ExecutionContext plain = CreateCuda(model, Cuda());
    Status st = RunInto(plain, a, ref_a);
    REQUIRE_MESSAGE(st.ok(), st.ToString());
    st = RunInto(plain, b, ref_b);
    REQUIRE_MESSAGE(st.ok(), st.ToString());
    CHECK(plain.stats().graph_hits == 0);
    CheckClose(ref_a, like_a, kModelAtol, kModelRtol, "shape A, uncaptured");
    CheckClose(ref_b, like_b, kModelAtol, kModelRtol, "shape B, uncaptured");
  }

  ExecutionContext ctx = CreateCuda(model, Cuda(true));
  Stream stream;
  struct Step {
    char shape;
    uint64_t misses, hits, graph_launches, captured;  // totals after the run
  };
  // First run of a shape: not captured; second: captured (a miss) and launched; later: replayed.
  const Step steps[] = {{'A', 0, 0, 0, 0}, {'A', 1, 0, 1, 1}, {'A', 1, 1, 2, 1}, {'A', 1, 2, 3, 1},
                        {'B', 1, 2, 3, 1}, {'B', 2, 2, 4, 2}, {'A', 2, 3, 5, 2}};
  const uint64_t launches0 = emu->counter("graph_launches"), captured0 = emu->counter("graphs_captured");
  int run = 0;
  for (const Step& step : steps) {
    ++run;
    INFO("run " << run << ", shape " << std::string(1, step.shape));
    std::vector<HostTensor> got = Sentinel(step.shape == 'A' ? like_a : like_b);
    const Status st = RunInto(ctx, step.shape == 'A' ? a : b, got, stream.s);
    REQUIRE_MESSAGE(st.ok(), st.ToString());
    CHECK(ctx.stats().last_fallbacks.empty());
    CHECK(ctx.stats().graph_misses == step.misses);
    CHECK(ctx.stats().graph_hits == step.hits);
    CHECK(emu->counter("graph_launches") - launches0 == step.graph_launches);
    CHECK(emu->counter("graphs_captured") - captured0 == step.captured);
    CHECK_MESSAGE(SameBits(got, step.shape == 'A' ? ref_a : ref_b), "differs from the uncaptured context's outputs");
  }
}

TEST_CASE("[emulated] own_stream: a null stream runs on the context's own stream, so CUDA graphs capture") {
  KILN_REQUIRE_EMULATED_CUDA();
  const EmulatedCudaControl* emu = testing::EmulatedCuda();
  const Model model = Load(RealArtifact(kCls));
  const std::vector<HostTensor> a = ClsOneImage();
  const std::vector<HostTensor> want = testing::RunCpuReference(model, a);
  std::vector<HostTensor> ref = Sentinel(want);
  {
    // Without own_stream a null stream is the legacy default stream: never captured.
    ExecutionContext plain = CreateCuda(model, Cuda(true));
    for (int run = 0; run < 3; ++run) REQUIRE(RunInto(plain, a, ref).ok());
    CHECK(plain.stats().graph_misses == 0);
    CHECK(plain.stats().graph_hits == 0);
  }
  ContextOptions options = Cuda(true);
  options.cuda.own_stream = true;
  const uint64_t captured0 = emu->counter("graphs_captured");
  for (int context = 0; context < 2; ++context) {  // each context makes and destroys its stream
    INFO("context " << context + 1);
    ExecutionContext ctx = CreateCuda(model, options);
    for (int run = 0; run < 3; ++run) {
      std::vector<HostTensor> got = Sentinel(want);
      const Status st = RunInto(ctx, a, got);  // stream null: the context's own
      REQUIRE_MESSAGE(st.ok(), st.ToString());
      CHECK_MESSAGE(SameBits(got, ref), "run " << run + 1 << " differs from the legacy stream's outputs");
    }
    CHECK(ctx.stats().graph_misses == 1);  // the second run captures, the third replays
    CHECK(ctx.stats().graph_hits == 1);
  }
  CHECK(emu->counter("graphs_captured") - captured0 == 2);
}

TEST_CASE("[emulated] Stats count the bytes between host and device and the time in CPU regions") {
  KILN_REQUIRE_EMULATED_CUDA();
  {
    // Wholly on the device: the host input in (4 x 32 floats), the output back (4 x 16), no region,
    // and one control transfer: the entry's symbol values (one int64) uploaded.
    const Model model = Load(MlpArtifact());
    ExecutionContext ctx = CreateCuda(model, Cuda());
    std::vector<HostTensor> got = Sentinel(testing::RunCpuReference(model, MlpInputs()));
    REQUIRE(RunInto(ctx, MlpInputs(), got).ok());
    CHECK(ctx.stats().last_host_to_device_bytes == 4 * 32 * sizeof(float) + 8);
    CHECK(ctx.stats().last_device_to_host_bytes == 4 * 16 * sizeof(float));
    CHECK(ctx.stats().last_control_transfers == 1);
    CHECK(ctx.stats().last_cpu_region_ns == 0);
  }
  // One CPU region (Hardmax, ArgMax): Relu's output r to the host (40 bytes) and ArgMax's output
  // back (2 int64), beside the input (10 floats) in, the symbol values (8 bytes) and the output
  // (2 floats) out.
  const Model model = Load(RegionArtifact("2"));
  ExecutionContext ctx = CreateCuda(model, Cuda());
  const HostTensor x = FloatInput({2, 5}, {0.5f, -1, 3, 2, 0, -4, 1, 1.5f, 7, 2});
  std::vector<HostTensor> got = Sentinel(testing::RunCpuReference(model, {x}));
  REQUIRE(RunInto(ctx, {x}, got).ok());
  CHECK(ctx.stats().last_host_to_device_bytes == 40 + 16 + 8);
  CHECK(ctx.stats().last_device_to_host_bytes == 40 + 8);
  CHECK(ctx.stats().last_cpu_region_ns > 0);
}

TEST_CASE("[emulated] require_device_resident: a plan with a CPU region is refused at Create, host tensors at Run") {
  KILN_REQUIRE_EMULATED_CUDA();
  ContextOptions resident = Cuda();
  resident.cuda.require_device_resident = true;
  const Model region = Load(RegionArtifact("2"));
  auto refused = ExecutionContext::Create(region, resident);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == StatusCode::kFailedPrecondition);
  CHECK_MESSAGE(Contains(refused.status().message(), "require_device_resident: entry 0"), refused.status().ToString());
  CHECK_MESSAGE(Contains(refused.status().message(), "'hardmax' (Hardmax) runs on the host in a CPU region"),
                refused.status().ToString());

  const Model model = Load(MlpArtifact());
  ExecutionContext ctx = CreateCuda(model, resident);
  const std::vector<HostTensor> inputs = MlpInputs();
  std::vector<TensorView> out;
  const Status host = ctx.Run(Views(inputs), out);
  CHECK(host.code() == StatusCode::kInvalidArgument);
  CHECK_MESSAGE(Contains(host.message(), "require_device_resident: input 0 'x' is in host memory"), host.ToString());

  // Device memory in, the outputs as views of the device's: nothing crosses but control.
  const OnDevice x(inputs[0]);
  const Status st = ctx.Run({&x.view, 1}, out);
  REQUIRE_MESSAGE(st.ok(), st.ToString());
  REQUIRE(ctx.Synchronize(nullptr).ok());
  CHECK(out[0].memory == MemoryKind::kDevice);
  CHECK(ctx.stats().last_control_transfers == 1);
  CHECK(ctx.stats().last_host_to_device_bytes == 8);  // that transfer: the symbol values
  CHECK(ctx.stats().last_device_to_host_bytes == 0);
  std::vector<float> y(4 * 16), want(4 * 16);
  REQUIRE(Drv().MemcpyDtoHAsync(y.data(), reinterpret_cast<CUdeviceptr>(out[0].data), y.size() * sizeof(float),
                                nullptr) == CUDA_SUCCESS);
  REQUIRE(Drv().StreamSynchronize(nullptr) == CUDA_SUCCESS);
  const std::vector<HostTensor> ref = testing::RunCpuReference(model, inputs);
  std::memcpy(want.data(), ref[0].bytes.data(), want.size() * sizeof(float));
  for (size_t i = 0; i < y.size(); ++i) CHECK(std::abs(y[i] - want[i]) <= kSmallAtol + kSmallRtol * std::abs(want[i]));
  // A caller's output in host memory is refused too.
  std::vector<HostTensor> host_out = Sentinel(ref);
  std::vector<TensorView> host_views = Views(host_out);
  const Status to_host = ctx.Run({&x.view, 1}, host_views);
  CHECK(to_host.code() == StatusCode::kInvalidArgument);
  CHECK_MESSAGE(Contains(to_host.message(), "output 0 'y' is in host memory"), to_host.ToString());

  // Without a GPU (the CPU backend chosen), the option refuses the context.
  ContextOptions cpu;
  cpu.device = Device::kCpu;
  cpu.cuda.require_device_resident = true;
  auto on_cpu = ExecutionContext::Create(model, cpu);
  CHECK(on_cpu.status().code() == StatusCode::kFailedPrecondition);
  CHECK(Contains(on_cpu.status().message(), "require_device_resident: the context would run on the CPU backend"));
}

TEST_CASE("[emulated] require_device_resident: a library refusing a call at run time fails the Run, naming it") {
  KILN_REQUIRE_EMULATED_CUDA();
  const EmulatedCudaControl* emu = testing::EmulatedCuda();
  FaultGuard guard{emu};
  const Model model = Load(RealArtifact(kCls));
  ContextOptions resident = Cuda();
  resident.cuda.require_device_resident = true;
  ExecutionContext ctx = CreateCuda(model, resident);  // every instruction on the device
  Inject(emu, "dnn-not-supported@1");
  std::vector<HostTensor> inputs = ClsOneImage();
  const OnDevice x(inputs[0]);
  std::vector<TensorView> out;
  const Status st = ctx.Run({&x.view, 1}, out);
  CHECK(st.code() == StatusCode::kFailedPrecondition);
  CHECK_MESSAGE(Contains(st.message(), "require_device_resident: instruction "), st.ToString());
  CHECK_MESSAGE(Contains(st.message(), "would run on the host in a CPU region: cuDNN refused it when it ran"),
                st.ToString());
}

TEST_CASE("[emulated] faults give a precise Status, leak nothing and leave a healthy context usable") {
  KILN_REQUIRE_EMULATED_CUDA();
  const EmulatedCudaControl* emu = testing::EmulatedCuda();
  FaultGuard guard{emu};
  const DeviceMemory before = DeviceMemory::Now(emu);
  const std::vector<HostTensor> inputs = RealInputs(kSilero);
  const std::vector<HostTensor> want = testing::RunCpuReference(Load(RealArtifact(kSilero)), inputs);

  SUBCASE("the weights' allocation fails: Create says so") {
    const Model model = Load(RealArtifact(kSilero));  // a Model of its own: nothing uploaded yet
    Inject(emu, "alloc-oom@1");
    auto ctx = ExecutionContext::Create(model, Cuda());
    REQUIRE(!ctx.ok());
    CHECK(ctx.status().code() == StatusCode::kResourceExhausted);
    CHECK_MESSAGE(Contains(ctx.status().message(), "bytes of weights"), ctx.status().ToString());
    CHECK_MESSAGE(Contains(ctx.status().message(), "CUDA_ERROR_OUT_OF_MEMORY"), ctx.status().ToString());
  }
  SUBCASE("the first run's arena allocation fails: that Run says so, the next one works") {
    const Model model = Load(RealArtifact(kSilero));
    ExecutionContext ctx = CreateCuda(model, Cuda());
    Inject(emu, "alloc-oom@1");
    std::vector<HostTensor> got = Sentinel(want);
    Status st = RunInto(ctx, inputs, got);
    CHECK(st.code() == StatusCode::kResourceExhausted);
    CHECK_MESSAGE(Contains(st.message(), "device arena"), st.ToString());
    st = RunInto(ctx, inputs, got);
    REQUIRE_MESSAGE(st.ok(), st.ToString());
    CheckClose(got, want, kModelAtol, kModelRtol, "the run after a failed arena allocation");
  }
  SUBCASE("a launch fails: the Run names the instruction, the next one works") {
    const Model model = Load(RealArtifact(kSilero));
    ExecutionContext ctx = CreateCuda(model, Cuda());
    std::vector<HostTensor> got = Sentinel(want);
    REQUIRE(RunInto(ctx, inputs, got).ok());
    // The first instruction that launches a kernel: "'name' (Op) @generated" -> "'name' (Op)".
    std::string first;
    for (const InstructionInfo& info : model.entries()[static_cast<size_t>(ctx.stats().last_entry)].instructions)
      if (first.empty() && info.library("cuda") == Library::kGenerated) first = "'" + info.name + "' (" + info.op + ")";
    REQUIRE(!first.empty());
    Inject(emu, "launch-fail@1");
    got = Sentinel(want);
    std::vector<TensorView> out = Views(got);
    Status st = ctx.Run(Views(inputs), out);
    CHECK(st.code() == StatusCode::kDeviceError);
    CHECK_MESSAGE(Contains(st.message(), "cuLaunchKernel"), st.ToString());
    CHECK_MESSAGE(Contains(st.message(), "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"), st.ToString());
    CHECK_MESSAGE(Contains(st.message(), first), st.ToString() << " (expected it to name " << first << ")");
    st = ctx.Synchronize();  // what was enqueued before the failure completes
    CHECK_MESSAGE(st.ok(), st.ToString());
    st = RunInto(ctx, inputs, got);
    REQUIRE_MESSAGE(st.ok(), st.ToString());
    CheckClose(got, want, kModelAtol, kModelRtol, "the run after a failed launch");
  }
  SUBCASE("a module has no binary for the device: Create says so") {
    const Model model = Load(RealArtifact(kSilero));
    Inject(emu, "no-binary@1");
    auto ctx = ExecutionContext::Create(model, Cuda());
    REQUIRE(!ctx.ok());
    CHECK(ctx.status().code() == StatusCode::kDeviceError);
    CHECK_MESSAGE(Contains(ctx.status().message(), "cuModuleLoadData"), ctx.status().ToString());
    CHECK_MESSAGE(Contains(ctx.status().message(), "CUDA_ERROR_NO_BINARY_FOR_GPU"), ctx.status().ToString());
    CHECK_MESSAGE(Contains(ctx.status().message(), model.kernels()[0].name), ctx.status().ToString());
  }
  SUBCASE("cuBLASLt refuses a matmul when it runs: the CPU runs it, and the run says so") {
    const Model model = Load(MlpArtifact());
    const std::vector<HostTensor> mlp_in = MlpInputs();
    const std::vector<HostTensor> mlp_want = testing::RunCpuReference(model, mlp_in);
    ExecutionContext ctx = CreateCuda(model, Cuda());
    const std::vector<InstructionInfo>& infos = model.entries()[0].instructions;
    size_t first = infos.size();
    for (size_t i = 0; i < infos.size() && first == infos.size(); ++i)
      if (infos[i].library("cuda") == Library::kCublasLt) first = i;
    REQUIRE(first < infos.size());
    Inject(emu, "blas-not-supported@1");
    for (int run = 1; run <= 2; ++run) {  // the decision is kept for the next run
      INFO("run " << run);
      std::vector<HostTensor> got = Sentinel(mlp_want);
      const Status st = RunInto(ctx, mlp_in, got);
      REQUIRE_MESSAGE(st.ok(), st.ToString());
      REQUIRE(ctx.stats().last_fallbacks.size() == 1);
      CHECK(ctx.stats().last_fallbacks[0].instruction == static_cast<int32_t>(first));
      CHECK_MESSAGE(Contains(ctx.stats().last_fallbacks[0].reason, "cuBLASLt refused it when it ran"),
                    ctx.stats().last_fallbacks[0].reason);
      CheckClose(got, mlp_want, kSmallAtol, kSmallRtol, "MatMul/Gemm model, one matmul on the CPU");
    }
  }
  // Every context and Model of the subcase is gone: so is every device allocation they made.
  CheckNoLeak(emu, before, "after the subcase");
}

// A kernel's illegal address on `artifact`: this Run (or its Synchronize) and every later call
// fail, naming the fault and saying it is sticky; destroying the context neither hangs nor crashes.
void CheckStickyFault(const std::vector<uint8_t>& artifact, const std::vector<HostTensor>& inputs) {
  const EmulatedCudaControl* emu = testing::EmulatedCuda();
  FaultGuard guard{emu};
  const Model model = Load(artifact);
  const std::vector<HostTensor> want = testing::RunCpuReference(model, inputs);
  uint64_t fired = 0;
  {
    ExecutionContext ctx = CreateCuda(model, Cuda());
    std::vector<HostTensor> got = Sentinel(want);
    REQUIRE(RunInto(ctx, inputs, got).ok());
    fired = emu->counter("faults_fired");
    Inject(emu, "illegal-address@1");
    // The faulting kernel (instruction 0) runs after its launch returned, on the stream's
    // worker: depending on when, the Run reports it at its next call (a cuDNN convolution that
    // cannot be enqueued any more: the runtime adds the stream's error to cuDNN's
    // EXECUTION_FAILED) or at its next wait (a CPU fallback's input copy), or the Synchronize
    // does. Every path must name the fault.
    std::vector<TensorView> out = Views(got);
    Status st = ctx.Run(Views(inputs), out);
    if (st.ok()) st = ctx.Synchronize();
    CHECK(st.code() == StatusCode::kDeviceError);
    CHECK_MESSAGE(Contains(st.message(), "CUDA_ERROR_ILLEGAL_ADDRESS"), st.ToString());
    // The context is poisoned for good: the next Run fails as clearly, at once, and says why.
    st = RunInto(ctx, inputs, got);
    CHECK(st.code() == StatusCode::kDeviceError);
    CHECK_MESSAGE(Contains(st.message(), "CUDA_ERROR_ILLEGAL_ADDRESS"), st.ToString());
    CHECK_MESSAGE(Contains(st.message(), "sticky error"), st.ToString());
    st = ctx.Synchronize();
    CHECK(st.code() == StatusCode::kDeviceError);
    CHECK_MESSAGE(Contains(st.message(), "CUDA_ERROR_ILLEGAL_ADDRESS"), st.ToString());
  }  // and it is destroyed without a hang or a crash
  CHECK(emu->counter("faults_fired") == fired + 1);
}

// LAST in this file, each alone in its process (see the top): they poison the primary context.
TEST_CASE("[emulated] a sticky fault (a kernel's illegal address) fails this Run and every later one, cleanly") {
  KILN_REQUIRE_EMULATED_CUDA();
  // Silero: a CPU fallback (the LSTM) waits on the stream in the middle of the Run.
  CheckStickyFault(RealArtifact(kSilero), RealInputs(kSilero));
}

TEST_CASE("[emulated] a sticky fault in a model that runs wholly on the device fails cleanly too") {
  KILN_REQUIRE_EMULATED_CUDA();
  // Every instruction on the device: the Run records its stop event after the faulting kernel,
  // and the context's destruction waits on that event.
  CheckStickyFault(MlpArtifact(), MlpInputs());
}

}  // namespace
}  // namespace kiln

#endif  // KILN_HAVE_CUDA
