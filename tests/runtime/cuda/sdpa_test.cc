// ONNX Attention on cuDNN's fused attention (runtime/cuda/sdpa.h).
//
// Without a device: what PlanSdpa takes and refuses, and the reasons it gives, against hand
// values; and which recognised attentions (a TorchScript BERT chain in float16) the compiler's
// cuda plan keeps as one Attention (compiler/passes/cudnn_sdpa_filter.h), with the compile log's
// reason for the one it leaves written out.
//
// "[emulated]" cases (tests/emulated_cuda/, whose cuDNN backend API interprets the graph from
// NVIDIA's documented semantics): small models with one Attention node (opset 23), compiled with
// GPU images and run with --device cuda, against the CPU backend on the same artifact and
// inputs. With --precision fp16 the Attention runs on cuDNN (the call log shows one
// cudnnBackendExecute per run, no fallback); both backends compute in float32 from the same
// float16 operands and round once to float16, so they may differ by the float32 summation order
// carried into that rounding: within atol 1e-3 + rtol 1e-3, two float16 steps at 1. What cuDNN's
// fused attention does not take (a head size of 20, float32) falls back to the CPU kernel, with
// the reason in Stats::last_fallbacks, and gives the CPU backend's bits exactly. Sequence lengths
// stay small: the emulated device runs the graph in host loops.
#if KILN_HAVE_CUDA

#include "runtime/cuda/sdpa.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "compiler/compile.h"
#include "kiln/runtime.h"
#include "kiln/tensor_files.h"
#include "tests/compiler/compile_util.h"
#include "tests/compiler/onnx_model_builder.h"
#include "tests/cpu_reference.h"
#include "tests/gpu_test_util.h"
#include "tests/runtime/count_allocations.h"
#include "tests/runtime/cuda/emulated_run.h"
#include "tests/runtime/cuda/library_test_util.h"
#include "tests/text_util.h"

namespace kiln::cuda {
namespace {

using kiln::testing::Contains;

// atol and rtol of float16 Attention on cuDNN against the CPU kernel: two float16 steps at 1 (the
// header comment says why they may differ at all).
constexpr double kSdpaTolerance = 1e-3;

// PlanSdpa over shapes only (no data), Q K V [and mask] -> Y.
Status SdpaPlanOf(const AttrMap& attrs, const std::vector<const testing::HostTensor*>& in,
                  const std::vector<const testing::HostTensor*>& out, SdpaPlan* plan) {
  const std::vector<DeviceTensor> ins = testing::DevViews(in), outs = testing::DevViews(out);
  return PlanSdpa(attrs, ins, outs, plan);
}

TEST_CASE("cuDNN SDPA plan: 4-D and 3-D float16 attention, the default scale, a mask broadcast over heads") {
  using testing::Shape;
  const auto q = Shape({2, 4, 16, 64}, DType::kFloat16), k = Shape({2, 4, 24, 64}, DType::kFloat16);
  const auto v = Shape({2, 4, 24, 80}, DType::kFloat16), y = Shape({2, 4, 16, 80}, DType::kFloat16);
  const auto mask = Shape({2, 1, 16, 24}, DType::kFloat16);
  SdpaPlan p;
  REQUIRE(SdpaPlanOf({}, {&q, &k, &v, &mask}, {&y}, &p).ok());
  CHECK(p.batch == 2);
  CHECK(p.heads == 4);
  CHECK(p.q_seq == 16);
  CHECK(p.kv_seq == 24);
  CHECK(p.head == 64);
  CHECK(p.v_head == 80);
  CHECK(!p.three_d);
  CHECK(p.mask);
  CHECK(std::vector<int64_t>(p.mask_dims, p.mask_dims + 4) == std::vector<int64_t>{2, 1, 16, 24});
  CHECK(p.scale == doctest::Approx(0.125));  // 1/sqrt(64)

  // 3-D [B, S, H*D] with q_num_heads = kv_num_heads = 2, a 2-D mask, an explicit scale.
  const auto q3 = Shape({1, 8, 2 * 32}, DType::kBFloat16), k3 = Shape({1, 12, 2 * 32}, DType::kBFloat16);
  const auto y3 = Shape({1, 8, 2 * 32}, DType::kBFloat16), m2 = Shape({8, 12}, DType::kBFloat16);
  AttrMap a;
  a.SetInt("q_num_heads", 2);
  a.SetInt("kv_num_heads", 2);
  a.SetFloat("scale", 0.5f);
  REQUIRE(SdpaPlanOf(a, {&q3, &k3, &k3, &m2}, {&y3}, &p).ok());
  CHECK(p.three_d);
  CHECK(p.heads == 2);
  CHECK(p.head == 32);
  CHECK(p.kv_seq == 12);
  CHECK(p.scale == 0.5f);
  CHECK(std::vector<int64_t>(p.mask_dims, p.mask_dims + 4) == std::vector<int64_t>{1, 1, 8, 12});
  CHECK(!p.packed);

  // Kiln's packed_qkv: each input [B, S, 3 * H * D], the head size a third of its width over H.
  const auto x = Shape({1, 8, 3 * 2 * 32}, DType::kBFloat16);
  a.SetInt("packed_qkv", 1);
  REQUIRE(SdpaPlanOf(a, {&x, &x, &x}, {&y3}, &p).ok());
  CHECK(p.packed);
  CHECK(p.head == 32);
  CHECK(p.v_head == 32);
  CHECK(SdpaPlanOf(a, {&q3, &k3, &k3}, {&y3}, &p).code() == StatusCode::kInvalidArgument);  // widths not 3 parts
}

TEST_CASE("cuDNN SDPA plan: what cuDNN's fused attention does not take is refused with the reason") {
  using testing::Absent;
  using testing::Shape;
  auto refusal = [](const AttrMap& attrs, std::vector<testing::HostTensor> in, std::vector<testing::HostTensor> out) {
    std::vector<const testing::HostTensor*> ins, outs;
    for (const auto& t : in) ins.push_back(&t);
    for (const auto& t : out) outs.push_back(&t);
    SdpaPlan p;
    const Status st = SdpaPlanOf(attrs, ins, outs, &p);
    CHECK(st.code() == StatusCode::kUnimplemented);
    return std::string(st.message());
  };
  const DType h = DType::kFloat16;
  const auto q = Shape({1, 2, 8, 64}, h), y = Shape({1, 2, 8, 64}, h);
  CHECK(Contains(refusal({}, {Shape({1, 2, 8, 64}), Shape({1, 2, 8, 64}), Shape({1, 2, 8, 64})}, {Shape({1, 2, 8, 64})}),
                 "float32 Q, K and V: cuDNN's fused attention takes float16 and bfloat16 only"));
  const auto q20 = Shape({1, 2, 8, 20}, h);
  CHECK(Contains(refusal({}, {q20, q20, q20}, {q20}), "head sizes 20 (Q, K) and 20 (V) must be multiples of 8"));
  const auto q136 = Shape({1, 2, 8, 136}, h);
  CHECK(Contains(refusal({}, {q136, q136, q136}, {q136}), "at most 128"));
  const auto kv1 = Shape({1, 1, 8, 64}, h);
  CHECK(Contains(refusal({}, {q, kv1, kv1}, {y}), "grouped-query attention (2 query heads, 1 key/value heads)"));
  AttrMap causal;
  causal.SetInt("is_causal", 1);
  CHECK(Contains(refusal(causal, {q, q, q}, {y}), "is_causal"));
  CHECK(Contains(refusal({}, {q, q, q, Shape({8, 8}, DType::kBool)}, {y}), "bool attn_mask"));
  CHECK(Contains(refusal({}, {q, q, q, Shape({1, 2, 8, 4}, h)}, {y}), "attn_mask [1, 2, 8, 4]"));
  CHECK(Contains(refusal({}, {q, q, q, Absent(), Shape({1, 2, 0, 64}, h), Shape({1, 2, 0, 64}, h)}, {y}),
                 "past key/value cache"));
  CHECK(Contains(refusal({}, {q, q, q}, {y, Shape({1, 2, 8, 64}, h)}), "present_key"));

  // Operands that do not agree are the CPU kernel's errors, not refusals.
  SdpaPlan p;
  const auto bad_v = Shape({1, 2, 9, 64}, h);
  std::vector<const testing::HostTensor*> in = {&q, &q, &bad_v}, out = {&y};
  CHECK(SdpaPlanOf({}, in, out, &p).code() == StatusCode::kInvalidArgument);
  // The device: fused attention needs compute capability 8.0.
  std::vector<DeviceTensor> ins = testing::DevViews({&q, &q, &q}), outs = testing::DevViews({&y});
  SdpaOptions turing;
  turing.compute_capability = 75;
  const Status st = SdpaLibrary::SupportsWith(turing, "Attention", {}, ins, outs);
  CHECK(st.code() == StatusCode::kUnimplemented);
  CHECK(Contains(st.message(), "compute capability 8.0 or later, the device has 7.5"));
  SdpaOptions hopper;
  hopper.compute_capability = 90;
  CHECK(SdpaLibrary::SupportsWith(hopper, "Attention", {}, ins, outs).ok());
}

// ---- On the emulated device ------------------------------------------------------------------------

struct SdpaModel {
  int64_t batch = 1, heads = 2, q_seq = 16, kv_seq = 24, head = 64;
  bool mask = true;     // a constant [batch, 1, Sq, Sk] mask: broadcast over the heads
  bool three_d = false;  // Q, K, V and Y as [B, S, H*D]
  bool packed = false;   // with three_d: Kiln's packed_qkv, Q, K and V each [B, S, 3*H*D], their thirds read
  std::string seq;       // SdpaChainArtifact: a symbol for both sequence lengths (then no mask)
  passes::Precision precision = passes::Precision::kFp16;
};

std::vector<int64_t> SdpaDims(const SdpaModel& m, int64_t seq) {
  if (m.three_d) return {m.batch, seq, (m.packed ? 3 : 1) * m.heads * m.head};
  return {m.batch, m.heads, seq, m.head};
}

std::vector<std::string> SdpaDimText(const std::vector<int64_t>& dims) {
  std::vector<std::string> s;
  for (int64_t d : dims) s.push_back(std::to_string(d));
  return s;
}

// y = Attention(q, k, v[, mask]), the compile log into *log when not null; the mask holds -10000 where (query + key) % 5 == 4 (key 0 is
// never masked, so every query sees a key) and small values elsewhere.
std::vector<uint8_t> SdpaArtifact(const SdpaModel& m, std::vector<std::string>* log = nullptr) {
  onnx::ModelProto model = kiln::testing::MakeModel(23);
  onnx::GraphProto* g = model.mutable_graph();
  kiln::testing::AddInput(g, "q", SdpaDimText(SdpaDims(m, m.q_seq)));
  kiln::testing::AddInput(g, "k", SdpaDimText(SdpaDims(m, m.kv_seq)));
  kiln::testing::AddInput(g, "v", SdpaDimText(SdpaDims(m, m.kv_seq)));
  std::vector<std::string> ins = {"q", "k", "v"};
  if (m.mask) {
    std::vector<float> values;
    for (int64_t b = 0; b < m.batch; ++b)
      for (int64_t i = 0; i < m.q_seq; ++i)
        for (int64_t j = 0; j < m.kv_seq; ++j)
          values.push_back(j > 0 && (i + j) % 5 == 4 ? -10000.0f : 0.125f * static_cast<float>((i * 7 + j + b) % 3));
    kiln::testing::AddFloatInit(g, "mask", {m.batch, 1, m.q_seq, m.kv_seq}, values);
    ins.push_back("mask");
  }
  onnx::NodeProto* n = kiln::testing::AddNode(g, "Attention", ins, {"y"}, "attention");
  if (m.three_d) {
    kiln::testing::AttrInt(n, "q_num_heads", m.heads);
    kiln::testing::AttrInt(n, "kv_num_heads", m.heads);
    if (m.packed) kiln::testing::AttrInt(n, "packed_qkv", 1);
  }
  kiln::testing::AddOutput(g, "y");
  compiler::CompileOptions options;  // the default GPU archs
  options.precision.precision = m.precision;
  if (log) options.log = [log](const std::string& line) { log->push_back(line); };
  return kiln::testing::CompileModel(model, options);
}

io::HostTensor SdpaInput(const std::string& name, const std::vector<int64_t>& dims, uint32_t seed) {
  io::HostTensor t;
  t.name = name;
  t.dtype = DType::kFloat32;
  t.dims = dims;
  size_t n = 1;
  for (int64_t d : dims) n *= static_cast<size_t>(d);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  t.bytes.resize(n * sizeof(float));
  std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}

using SdpaRun = kiln::testing::EmulatedCudaRun;

// Runs `artifact` (of model `m`'s inputs) twice on --device cuda (the second run reuses the plan
// and the variant pack) and once on the CPU backend; the log and stats are the second CUDA run's.
SdpaRun RunSdpa(const std::vector<uint8_t>& artifact, const SdpaModel& m) {
  auto model = Model::Load(artifact);
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  const std::vector<io::HostTensor> inputs = {SdpaInput("q", SdpaDims(m, m.q_seq), 1),
                                              SdpaInput("k", SdpaDims(m, m.kv_seq), 2),
                                              SdpaInput("v", SdpaDims(m, m.kv_seq), 3)};
  ContextOptions options;
  options.profile = true;
  return kiln::testing::RunTwiceOnCuda(*model, *model, inputs, "Attention", options);
}

size_t SdpaExecutes(const std::string& log) {
  size_t n = 0;
  for (size_t at = log.find("cudnnBackendExecute"); at != std::string::npos;
       at = log.find("cudnnBackendExecute", at + 1))
    ++n;
  return n;
}

TEST_CASE("[emulated] Attention runs on cuDNN SDPA in float16: head sizes 64 and 80, a mask broadcast over heads") {
  KILN_REQUIRE_EMULATED_CUDA();
  SdpaModel four_d;  // [1, 2, 16, 64] against 24 keys, masked
  SdpaModel wide;
  wide.batch = 2, wide.heads = 3, wide.q_seq = 8, wide.kv_seq = 12, wide.head = 80;
  SdpaModel three_d;
  three_d.three_d = true, three_d.mask = false, three_d.q_seq = 8, three_d.kv_seq = 8;
  SdpaModel packed;  // thirds of [2, S, 3 * 2 * 32] tensors: strides 192, K and V's pointers offset
  packed.three_d = true, packed.packed = true, packed.batch = 2, packed.q_seq = 8, packed.kv_seq = 12, packed.head = 32;
  for (const SdpaModel& m : {four_d, wide, three_d, packed}) {
    INFO("B " << m.batch << ", H " << m.heads << ", Sq " << m.q_seq << ", Sk " << m.kv_seq << ", D " << m.head
              << (m.mask ? ", masked" : "") << (m.three_d ? ", 3-D" : "") << (m.packed ? ", packed" : ""));
    const SdpaRun r = RunSdpa(SdpaArtifact(m), m);
    CHECK(r.library == kiln::Library::kCudnn);
    CHECK(r.stats.last_fallbacks.empty());
    for (const Stats::Fallback& f : r.stats.last_fallbacks) MESSAGE("fallback: " << f.reason);
    CHECK_MESSAGE(SdpaExecutes(r.log) == 1, r.log);
    kiln::testing::CheckClose(r.got, r.want, kSdpaTolerance, kSdpaTolerance, "Attention on cuDNN SDPA");
  }
}

TEST_CASE("[emulated] Attention that cuDNN SDPA refuses runs on the CPU kernel: head size 20, float32") {
  KILN_REQUIRE_EMULATED_CUDA();
  SdpaModel d20;
  d20.head = 20;
  SdpaModel fp32;
  fp32.precision = passes::Precision::kFp32;
  for (const auto& refused : {std::pair<SdpaModel, std::string>{d20, "head sizes 20 (Q, K) and 20 (V)"},
                               {fp32, "float32 Q, K and V"}}) {
    const SdpaModel& m = refused.first;
    const std::string& reason = refused.second;
    INFO(reason);
    const SdpaRun r = RunSdpa(SdpaArtifact(m), m);
    CHECK(r.library == kiln::Library::kCudnn);  // the artifact's claim: the refusal is the runtime's
    REQUIRE(r.stats.last_fallbacks.size() == 1);
    CHECK_MESSAGE(Contains(r.stats.last_fallbacks[0].reason, "cuDNN refused it: cuDNN SDPA: " + reason),
                  r.stats.last_fallbacks[0].reason);
    CHECK(SdpaExecutes(r.log) == 0);
    REQUIRE(r.got.size() == 1);
    CHECK(r.got[0].bytes == r.want[0].bytes);  // the CPU kernel on both sides
  }
}

TEST_CASE("[emulated] Attention on cuDNN SDPA: steady-state runs allocate nothing and reuse the plan, with or without CUDA graphs") {
  KILN_REQUIRE_EMULATED_CUDA();
  const SdpaModel m;
  auto model = Model::Load(SdpaArtifact(m));
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  const std::vector<io::HostTensor> inputs = {SdpaInput("q", SdpaDims(m, m.q_seq), 7),
                                              SdpaInput("k", SdpaDims(m, m.kv_seq), 8),
                                              SdpaInput("v", SdpaDims(m, m.kv_seq), 9)};
  const kiln::testing::EmulatedCudaControl* emu = kiln::testing::EmulatedCuda();
  for (const bool graphs : {false, true}) {
    const char* mode = graphs ? "CUDA graphs on the context's own stream" : "no graphs, the legacy stream";
    INFO(mode);
    SdpaRun r;
    r.want = kiln::testing::RunCpuReference(*model, inputs);
    ContextOptions options;
    options.device = Device::kCuda;
    options.cuda.graphs = graphs;
    options.cuda.own_stream = graphs;
    auto ctx = ExecutionContext::Create(*model, options);
    REQUIRE_MESSAGE(ctx.ok(), ctx.status().ToString());
    r.got = kiln::testing::Sentinel(r.want);
    const std::vector<TensorView> in = kiln::testing::Views(inputs);
    std::vector<TensorView> out = kiln::testing::Views(r.got);
    for (int run = 0; run < 3; ++run) {
      Status st = ctx->Run(in, out);
      if (st.ok()) st = ctx->Synchronize();
      REQUIRE_MESSAGE(st.ok(), "warm-up run " << run + 1 << ": " << st.ToString());
    }
    const uint64_t device_allocations = emu->counter("device_allocations");
    bool ok = true;
    emu->log_begin();
    const long host_allocations = kiln::testing::CountKilnAllocations([&] {
      for (int run = 0; run < 5; ++run) ok = ok && ctx->Run(in, out).ok() && ctx->Synchronize().ok();
    });
    r.log = emu->log_take();
    CHECK(ok);
    CHECK_MESSAGE(host_allocations == 0, host_allocations << " allocations in Kiln's code in 5 steady-state runs:\n"
                                                          << kiln::testing::CountedAllocationStacks());
    CHECK(emu->counter("device_allocations") == device_allocations);
    CHECK(ctx->stats().last_fallbacks.empty());
    // Without graphs each run executes the plan; with them the captured execute is replayed.
    if (!graphs) CHECK(SdpaExecutes(r.log) == 5);
    if (graphs) CHECK(ctx->stats().graph_hits > 0);
    kiln::testing::CheckClose(r.got, r.want, kSdpaTolerance, kSdpaTolerance, "Attention on cuDNN SDPA");
  }
}

// The chain TorchScript's BERT exports (MatMul(Q, Transpose(K)), Div by sqrt(D), Add of a
// constant finite mask [1, 1, Sq, Sk] when m.mask, Softmax, MatMul with V), 4-D, compiled with
// --precision fp16 and GPU archs; the compile log into *log.
std::vector<uint8_t> SdpaChainArtifact(const SdpaModel& m, std::vector<std::string>* log) {
  onnx::ModelProto model = kiln::testing::MakeModel(18);
  onnx::GraphProto* g = model.mutable_graph();
  auto dims = [&](int64_t seq) {
    std::vector<std::string> d = SdpaDimText(SdpaDims(m, seq));
    if (!m.seq.empty()) d[2] = m.seq;
    return d;
  };
  kiln::testing::AddInput(g, "q", dims(m.q_seq));
  kiln::testing::AddInput(g, "k", dims(m.kv_seq));
  kiln::testing::AddInput(g, "v", dims(m.kv_seq));
  kiln::testing::AttrInts(kiln::testing::AddNode(g, "Transpose", {"k"}, {"kt"}, "kt"), "perm", {0, 1, 3, 2});
  kiln::testing::AddNode(g, "MatMul", {"q", "kt"}, {"s"}, "qk");
  kiln::testing::AddFloatInit(g, "sqrt_d", {}, {std::sqrt(static_cast<float>(m.head))});
  kiln::testing::AddNode(g, "Div", {"s", "sqrt_d"}, {"s1"}, "scale");
  if (m.mask) {
    std::vector<float> mask;
    for (int64_t i = 0; i < m.q_seq; ++i)
      for (int64_t j = 0; j < m.kv_seq; ++j) mask.push_back(j > 0 && (i + j) % 4 == 3 ? -10000.0f : 0.0f);
    kiln::testing::AddFloatInit(g, "mask", {1, 1, m.q_seq, m.kv_seq}, mask);
    kiln::testing::AddNode(g, "Add", {"s1", "mask"}, {"s2"}, "mask_add");
  }
  kiln::testing::AttrInt(kiln::testing::AddNode(g, "Softmax", {m.mask ? "s2" : "s1"}, {"p"}, "softmax"), "axis", -1);
  kiln::testing::AddNode(g, "MatMul", {"p", "v"}, {"y"}, "pv");
  kiln::testing::AddOutput(g, "y");
  compiler::CompileOptions options;
  options.precision.precision = passes::Precision::kFp16;
  options.log = [log](const std::string& line) { log->push_back(line); };
  return kiln::testing::CompileModel(model, options);
}

// The ops of the artifact's entry for `backend`.
std::vector<std::string> SdpaEntryOps(const Model& model, const std::string& backend) {
  std::vector<std::string> ops;
  for (const EntryInfo& e : model.entries())
    if (e.backend == backend)
      for (const InstructionInfo& info : e.instructions) ops.push_back(info.op);
  return ops;
}

bool SdpaHas(const std::vector<std::string>& ops, const std::string& op) {
  return std::find(ops.begin(), ops.end(), op) != ops.end();
}

TEST_CASE("cuDNN SDPA in the compiler: the cuda plan makes one Attention of a float16 chain cuDNN takes, and says why not") {
  SdpaModel d64;
  d64.q_seq = 8, d64.kv_seq = 12;
  SdpaModel d20 = d64;
  d20.head = 20;
  SdpaModel symbolic = d64;  // a symbolic sequence length: checked with a stand-in, kept
  symbolic.seq = "S", symbolic.mask = false;
  for (const SdpaModel& m : {d64, d20, symbolic}) {
    INFO("head size " << m.head << (m.seq.empty() ? "" : ", sequence length " + m.seq));
    std::vector<std::string> log;
    auto model = Model::Load(SdpaChainArtifact(m, &log));
    REQUIRE_MESSAGE(model.ok(), model.status().ToString());
    CHECK(SdpaHas(SdpaEntryOps(*model, "cpu"), "Attention"));  // the CPU plan as before
    const std::vector<std::string> cuda_ops = SdpaEntryOps(*model, "cuda");
    REQUIRE(!cuda_ops.empty());
    bool kept_logged = false;
    for (const std::string& line : log)
      kept_logged |= Contains(line, "attention kept written out: Softmax 'softmax': cuDNN SDPA: head sizes 20");
    CHECK(SdpaHas(cuda_ops, "Attention") == (m.head == 64));
    CHECK(SdpaHas(cuda_ops, "MatMul") == (m.head == 20));
    CHECK(kept_logged == (m.head == 20));
  }
}

TEST_CASE("cuDNN SDPA in the compiler: the log names why a model's own Attention runs on its CPU kernel on CUDA") {
  for (const passes::Precision precision : {passes::Precision::kFp32, passes::Precision::kFp16}) {
    SdpaModel m;
    m.precision = precision;
    std::vector<std::string> log;
    (void)SdpaArtifact(m, &log);
    bool refused = false;
    for (const std::string& line : log)
      refused |= Contains(line, "Attention 'attention' runs on its CPU kernel: cuDNN SDPA: float32 Q, K and V");
    CHECK(refused == (precision == passes::Precision::kFp32));
  }
}

TEST_CASE("[emulated] a recognised float16 attention runs as one Attention on cuDNN SDPA in the cuda plan") {
  KILN_REQUIRE_EMULATED_CUDA();
  SdpaModel m;
  m.q_seq = 8, m.kv_seq = 12;
  std::vector<std::string> log;
  const SdpaRun r = RunSdpa(SdpaChainArtifact(m, &log), m);
  CHECK(r.library == kiln::Library::kCudnn);
  CHECK(r.stats.last_fallbacks.empty());
  CHECK(SdpaExecutes(r.log) == 1);
  kiln::testing::CheckClose(r.got, r.want, kSdpaTolerance, kSdpaTolerance, "a BERT chain on cuDNN SDPA");
}

TEST_CASE("[emulated] Attention on cuDNN SDPA with a symbolic sequence length: one plan per length, each run right") {
  KILN_REQUIRE_EMULATED_CUDA();
  SdpaModel m;
  m.seq = "S", m.mask = false;
  std::vector<std::string> log;
  auto model = Model::Load(SdpaChainArtifact(m, &log));
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  ContextOptions options;
  options.device = Device::kCuda;
  auto ctx = ExecutionContext::Create(*model, options);
  REQUIRE_MESSAGE(ctx.ok(), ctx.status().ToString());
  const kiln::testing::EmulatedCudaControl* emu = kiln::testing::EmulatedCuda();
  for (const int64_t seq : {8, 12, 8}) {
    INFO("S = " << seq);
    const std::vector<io::HostTensor> inputs = {SdpaInput("q", SdpaDims(m, seq), 10 + static_cast<uint32_t>(seq)),
                                                SdpaInput("k", SdpaDims(m, seq), 11), SdpaInput("v", SdpaDims(m, seq), 12)};
    SdpaRun r;
    r.want = kiln::testing::RunCpuReference(*model, inputs);
    r.got = kiln::testing::Sentinel(r.want);
    std::vector<TensorView> out = kiln::testing::Views(r.got);
    emu->log_begin();
    Status st = ctx->Run(kiln::testing::Views(inputs), out);
    if (st.ok()) st = ctx->Synchronize();
    r.log = emu->log_take();
    REQUIRE_MESSAGE(st.ok(), st.ToString());
    CHECK(ctx->stats().last_fallbacks.empty());
    CHECK(SdpaExecutes(r.log) == 1);
    kiln::testing::CheckClose(r.got, r.want, kSdpaTolerance, kSdpaTolerance, "a symbolic length on cuDNN SDPA");
  }
}

}  // namespace
}  // namespace kiln::cuda

#endif  // KILN_HAVE_CUDA
