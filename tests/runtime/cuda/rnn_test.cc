// ONNX LSTM, GRU and RNN on cuDNN's RNN API (runtime/cuda/rnn.h).
//
// Without a device: what PlanRnn takes and refuses, and the reasons it gives, against hand
// values.
//
// "[emulated]" cases (tests/emulated_cuda/, whose cudnn_adv computes cudnnRNNForward with
// reference loops from NVIDIA's documented cell equations): small models with one LSTM, GRU or
// RNN node (opset 22), compiled with GPU images and run with --device cuda, against the CPU
// backend (Kiln's recurrent kernels, which pass ONNX's node tests) on the same inputs. float32:
// the emulated device computes in double, the CPU kernel in float32 with its vectorized
// sigmoid and tanh, so the two may differ by float32 rounding carried through the steps: within
// atol 2e-5 + rtol 2e-5. float16 (X, the weights, the states and Y in float16, math in float32
// on cuDNN; the model casts its float32 input and outputs): against the CPU backend on the
// float32 model with the same values (each one a float16), so the two differ by Y's rounding to
// float16 each step (half an ulp: 2^-11 at 1) carried through the recurrence: within atol 2e-3 +
// rtol 2e-3. sequence_lens, a model weight, gives each batch entry its own length on cuDNN as on
// the CPU. What cuDNN's RNN does not take (clip, peepholes, layout 1 with two directions and a
// state) falls back to the CPU kernel with the reason in Stats::last_fallbacks and gives the CPU
// backend's bits exactly.
// Sizes stay small (sequence 5, hidden 8): the emulated device runs the recurrence in host loops.
#if KILN_HAVE_CUDA

#include "runtime/cuda/rnn.h"

#include <doctest/doctest.h>

#include <cstring>
#include <iterator>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "compiler/compile.h"
#include "kiln/runtime.h"
#include "kiln/tensor_files.h"
#include "runtime/half.h"
#include "tests/compiler/compile_util.h"
#include "tests/compiler/onnx_model_builder.h"
#include "tests/cpu_reference.h"
#include "tests/gpu_test_util.h"
#include "tests/random_floats.h"
#include "tests/runtime/count_allocations.h"
#include "tests/runtime/cuda/emulated_run.h"
#include "tests/runtime/cuda/library_test_util.h"
#include "tests/text_util.h"

namespace kiln::cuda {
namespace {

using kiln::testing::Contains;

// atol and rtol against the CPU backend (the header comment says why they may differ at all).
constexpr double kRnnFloat32Tolerance = 2e-5;
constexpr double kRnnFloat16Tolerance = 2e-3;

// PlanRnn over shapes only (no data); W, R and B are model weights unless `weights` is false.
Status RnnPlanOf(std::string_view op, const AttrMap& attrs, const std::vector<const testing::HostTensor*>& in,
                 const std::vector<const testing::HostTensor*>& out, RnnPlan* plan, bool weights = true) {
  std::vector<DeviceTensor> ins = testing::DevViews(in), outs = testing::DevViews(out);
  for (size_t i = 1; i < 4 && i < ins.size(); ++i) ins[i].weight = weights;
  return PlanRnn(op, attrs, ins, outs, plan);
}

TEST_CASE("cuDNN RNN plan: LSTM, GRU and RNN in each layout and direction, with states") {
  using testing::Absent;
  using testing::Shape;
  const auto x = Shape({5, 3, 4}), w = Shape({2, 32, 4}), r = Shape({2, 32, 8}), b = Shape({2, 64});
  const auto state = Shape({2, 3, 8}), y = Shape({5, 2, 3, 8}), none = Absent();
  AttrMap bidir;
  bidir.SetString("direction", "bidirectional");
  RnnPlan p;
  REQUIRE(RnnPlanOf("LSTM", bidir, {&x, &w, &r, &b, &none, &state, &state}, {&y, &state, &state}, &p).ok());
  CHECK(p.cell == CUDNN_LSTM);
  CHECK(p.dirs == 2);
  CHECK(!p.batch_first);
  CHECK(p.seq == 5);
  CHECK(p.batch == 3);
  CHECK(p.input == 4);
  CHECK(p.hidden == 8);
  CHECK(p.bias);
  CHECK(p.y);
  CHECK(p.dtype == DType::kFloat32);

  // GRU with linear_before_reset, layout 1, float16, no B, no Y.
  AttrMap gru;
  gru.SetInt("linear_before_reset", 1);
  gru.SetInt("layout", 1);
  const DType h = DType::kFloat16;
  const auto x1 = Shape({3, 5, 4}, h), w1 = Shape({1, 24, 4}, h), r1 = Shape({1, 24, 8}, h), h1 = Shape({3, 1, 8}, h);
  REQUIRE(RnnPlanOf("GRU", gru, {&x1, &w1, &r1}, {&none, &h1}, &p).ok());
  CHECK(p.cell == CUDNN_GRU);
  CHECK(p.batch_first);
  CHECK(!p.bias);
  CHECK(!p.y);
  CHECK(p.dtype == h);

  // RNN: Tanh by default, Relu for every direction (names case-insensitive).
  const auto wr = Shape({2, 8, 4}), rr = Shape({2, 8, 8});
  REQUIRE(RnnPlanOf("RNN", bidir, {&x, &wr, &rr}, {&y}, &p).ok());
  CHECK(p.cell == CUDNN_RNN_TANH);
  AttrMap relu = bidir;
  relu.SetString("activations", "Relu,RELU");
  REQUIRE(RnnPlanOf("RNN", relu, {&x, &wr, &rr}, {&y}, &p).ok());
  CHECK(p.cell == CUDNN_RNN_RELU);
  // sequence_lens, a model weight: its values read on the host; a length 0 is refused, one
  // past seq is the CPU kernel's error.
  const auto lens = Shape({3}, DType::kInt32);
  for (const auto& form : {std::pair<std::vector<int32_t>, StatusCode>{{5, 2, 4}, StatusCode::kOk},
                           {{5, 0, 4}, StatusCode::kUnimplemented},
                           {{5, 6, 4}, StatusCode::kInvalidArgument}}) {
    const std::vector<int32_t>& values = form.first;
    const StatusCode code = form.second;
    std::vector<DeviceTensor> ins = testing::DevViews({&x, &wr, &rr, &none, &lens}), outs = testing::DevViews({&y});
    for (size_t i : {1, 2, 4}) ins[i].weight = true;
    ins[4].host = values.data();
    const Status st = PlanRnn("RNN", bidir, ins, outs, &p);
    CHECK(st.code() == code);
    if (code == StatusCode::kOk) CHECK(p.lens);
    if (code == StatusCode::kUnimplemented) CHECK(Contains(st.message(), "a sequence length of 0"));
  }
  AttrMap defaults;
  defaults.SetString("activations", "Sigmoid,Tanh,Tanh");
  const auto w4 = Shape({1, 32, 4}), r4 = Shape({1, 32, 8}), y4 = Shape({5, 1, 3, 8});
  CHECK(RnnPlanOf("LSTM", defaults, {&x, &w4, &r4}, {&y4}, &p).ok());
}

TEST_CASE("cuDNN RNN plan: what cuDNN's RNN does not take is refused with the reason") {
  using testing::Absent;
  using testing::Shape;
  const auto x = Shape({5, 3, 4}), w = Shape({1, 32, 4}), r = Shape({1, 32, 8}), y = Shape({5, 1, 3, 8});
  const auto none = Absent();
  auto refusal = [&](std::string_view op, const AttrMap& attrs, std::vector<const testing::HostTensor*> in,
                     bool weights = true) {
    RnnPlan p;
    const std::vector<const testing::HostTensor*> out = {&y};
    const Status st = RnnPlanOf(op, attrs, in, out, &p, weights);
    CHECK(st.code() == StatusCode::kUnimplemented);
    return std::string(st.message());
  };
  auto with = [](const char* name, auto value) {
    AttrMap a;
    if constexpr (std::is_same_v<decltype(value), const char*>) a.SetString(name, value);
    else if constexpr (std::is_same_v<decltype(value), float>) a.SetFloat(name, value);
    else a.SetInt(name, value);
    return a;
  };
  CHECK(Contains(refusal("LSTM", with("direction", "reverse"), {&x, &w, &r}), "direction reverse"));
  CHECK(Contains(refusal("LSTM", with("clip", 3.0f), {&x, &w, &r}), "cuDNN RNN: clip"));
  CHECK(Contains(refusal("LSTM", with("input_forget", 1), {&x, &w, &r}), "input_forget"));
  const auto p3 = Shape({1, 24});
  CHECK(Contains(refusal("LSTM", {}, {&x, &w, &r, &none, &none, &none, &none, &p3}), "peepholes"));
  const auto lens = Shape({3}, DType::kInt32);  // no host data: computed at run time
  CHECK(Contains(refusal("LSTM", {}, {&x, &w, &r, &none, &lens}), "sequence_lens computed at run time"));
  CHECK(Contains(refusal("LSTM", {}, {&x, &w, &r}, false), "not a model weight"));
  CHECK(Contains(refusal("LSTM", with("activations", "Sigmoid,Tanh,Relu"), {&x, &w, &r}), "activations"));
  CHECK(Contains(refusal("LSTM", with("activation_alpha", 0.5f), {&x, &w, &r}), "activation_alpha/beta"));
  const auto wg = Shape({1, 24, 4}), rg = Shape({1, 24, 8});
  CHECK(Contains(refusal("GRU", {}, {&x, &wg, &rg}), "linear_before_reset 0"));
  const auto wr = Shape({1, 8, 4}), rr = Shape({1, 8, 8});
  CHECK(Contains(refusal("RNN", with("activations", "Sigmoid"), {&x, &wr, &rr}), "activations"));
  const auto xd = Shape({5, 3, 4}, DType::kFloat64), wd = Shape({1, 32, 4}, DType::kFloat64),
             rd = Shape({1, 32, 8}, DType::kFloat64), yd = Shape({5, 1, 3, 8}, DType::kFloat64);
  RnnPlan p;
  CHECK(Contains(RnnPlanOf("LSTM", {}, {&xd, &wd, &rd}, {&yd}, &p).message(), "float32 and float16"));
  // Layout 1 with two directions and a state: [batch, 2, hidden] is not cuDNN's [2, batch, hidden].
  AttrMap two = with("layout", 1);
  two.SetString("direction", "bidirectional");
  const auto x1 = Shape({3, 5, 4}), w2 = Shape({2, 32, 4}), r2 = Shape({2, 32, 8}), h2 = Shape({3, 2, 8}),
             y2 = Shape({3, 5, 2, 8});
  const Status st = RnnPlanOf("LSTM", two, {&x1, &w2, &r2}, {&y2, &h2}, &p);
  CHECK(st.code() == StatusCode::kUnimplemented);
  CHECK(Contains(st.message(), "layout 1 with two directions and a state"));
  CHECK(RnnPlanOf("LSTM", two, {&x1, &w2, &r2}, {&y2}, &p).ok());
  // Operands that do not agree are the CPU kernel's errors, not refusals.
  const auto bad_y = Shape({5, 1, 3, 7});
  CHECK(RnnPlanOf("LSTM", {}, {&x, &w, &r}, {&bad_y}, &p).code() == StatusCode::kInvalidArgument);
  const auto half_x = Shape({5, 3, 4}, DType::kFloat16);
  CHECK(RnnPlanOf("LSTM", {}, {&half_x, &w, &r}, {&y}, &p).code() == StatusCode::kInvalidArgument);
  CHECK(Contains(RnnPlanOf("Conv", {}, {&x, &w, &r}, {&y}, &p).message(), "not LSTM, GRU or RNN"));
}

// ---- On the emulated device ------------------------------------------------------------------------

constexpr int64_t kRnnSeq = 5, kRnnBatch = 3, kRnnInput = 4, kRnnHidden = 8;

struct CudnnRnnForm {
  std::string op = "LSTM";
  std::string direction = "forward";
  bool initial = false;     // initial_h (and initial_c) as model weights
  bool batch_first = false; // layout 1
  bool float16 = false;     // the node in float16 (the model casts its input and outputs)
  std::string activations;  // one direction's list, when not empty
  bool lens = false;         // sequence_lens {5, 2, 4}, a model weight
  bool clip = false, peepholes = false;  // refused forms
  bool symbolic_seq = false;  // x's sequence length the symbol S
};

std::string CudnnRnnName(const CudnnRnnForm& f) {
  return f.op + " " + f.direction + (f.initial ? ", initial states" : "") + (f.batch_first ? ", layout 1" : "") +
         (f.float16 ? ", float16" : "") +
         (f.activations.empty() ? "" : ", activations " + f.activations) + (f.clip ? ", clip" : "") +
         (f.peepholes ? ", peepholes" : "") + (f.lens ? ", sequence_lens" : "");
}

// `n` random values in [lo, hi], each one a float16 (so that the float16 and float32 models hold
// the same values).
std::vector<float> CudnnRnnValues(int64_t n, uint32_t seed, float lo, float hi) {
  std::vector<float> v = kiln::testing::RandomFloats(static_cast<size_t>(n), seed, lo, hi);
  for (float& x : v) x = HalfToFloat(FloatToHalf(x));
  return v;
}

// One LSTM, GRU or RNN node "rnn" over input "x" (float32), its weights initializers; for a
// float16 node (`float16`) the model casts x, the weights and the states to float16 and its
// outputs back to float32.
std::vector<uint8_t> CudnnRnnArtifact(const CudnnRnnForm& f, bool float16) {
  const int64_t gates = f.op == "LSTM" ? 4 : f.op == "RNN" ? 1 : 3, dirs = f.direction == "bidirectional" ? 2 : 1;
  const int64_t H = kRnnHidden, B = kRnnBatch;
  onnx::ModelProto m = kiln::testing::MakeModel(22);
  onnx::GraphProto* g = m.mutable_graph();
  auto dims = [](std::vector<int64_t> d) {
    std::vector<std::string> s;
    for (int64_t v : d) s.push_back(std::to_string(v));
    return s;
  };
  std::vector<std::string> x_dims = dims(f.batch_first ? std::vector<int64_t>{B, kRnnSeq, kRnnInput}
                                                       : std::vector<int64_t>{kRnnSeq, B, kRnnInput});
  if (f.symbolic_seq) x_dims[f.batch_first ? 1 : 0] = "S";
  kiln::testing::AddInput(g, "x", x_dims);
  // A float32 initializer `name`, cast to float16 as `name`_h for a float16 node; returns what the node reads.
  auto init = [&](const std::string& name, std::vector<int64_t> d, uint32_t seed, float bound) {
    int64_t n = 1;
    for (int64_t v : d) n *= v;
    kiln::testing::AddFloatInit(g, name, d, CudnnRnnValues(n, seed, -bound, bound));
    if (!float16) return name;
    kiln::testing::AttrInt(kiln::testing::AddNode(g, "Cast", {name}, {name + "_h"}, name + "_cast"), "to",
                           onnx::TensorProto::FLOAT16);
    return name + "_h";
  };
  std::string x = "x";
  if (float16) {
    kiln::testing::AttrInt(kiln::testing::AddNode(g, "Cast", {"x"}, {"x_h"}, "x_cast"), "to", onnx::TensorProto::FLOAT16);
    x = "x_h";
  }
  std::vector<std::string> ins = {x, init("W", {dirs, gates * H, kRnnInput}, 1, 0.6f),
                                  init("R", {dirs, gates * H, H}, 2, 0.4f), init("B", {dirs, 2 * gates * H}, 3, 0.5f),
                                  "", "", "", ""};
  if (f.lens) {
    kiln::testing::AddInt64Init(g, "lens64", {B}, {kRnnSeq, 2, 4});
    kiln::testing::AttrInt(kiln::testing::AddNode(g, "Cast", {"lens64"}, {"lens"}, "lens"), "to", onnx::TensorProto::INT32);
    ins[4] = "lens";
  }
  const std::vector<int64_t> state = f.batch_first ? std::vector<int64_t>{B, dirs, H} : std::vector<int64_t>{dirs, B, H};
  if (f.initial) {
    ins[5] = init("h0", state, 4, 1.0f);
    if (f.op == "LSTM") ins[6] = init("c0", state, 5, 1.0f);
  }
  if (f.peepholes) ins[7] = init("P", {dirs, 3 * H}, 6, 0.5f);
  while (!ins.empty() && ins.back().empty()) ins.pop_back();
  std::vector<std::string> outs = {"y", "yh"};
  if (f.op == "LSTM") outs.push_back("yc");
  onnx::NodeProto* n = kiln::testing::AddNode(g, f.op, ins, outs, "rnn");
  kiln::testing::AttrInt(n, "hidden_size", H);
  kiln::testing::AttrString(n, "direction", f.direction);
  if (f.batch_first) kiln::testing::AttrInt(n, "layout", 1);
  if (f.op == "GRU") kiln::testing::AttrInt(n, "linear_before_reset", 1);
  if (f.clip) kiln::testing::AttrFloat(n, "clip", 100.0f);
  if (!f.activations.empty()) {
    std::vector<std::string> acts = {f.activations};
    if (dirs == 2) acts.push_back(f.activations);
    kiln::testing::AttrStrings(n, "activations", acts);
  }
  for (const std::string& o : outs) {
    if (!float16) {
      kiln::testing::AddOutput(g, o);
      continue;
    }
    // The node writes o + "_h"; the model's output is its float32 cast.
    for (std::string& out : *n->mutable_output())
      if (out == o) out = o + "_h";
    kiln::testing::AttrInt(kiln::testing::AddNode(g, "Cast", {o + "_h"}, {o}, o + "_cast"), "to", onnx::TensorProto::FLOAT);
    kiln::testing::AddOutput(g, o);
  }
  compiler::CompileOptions options;  // the default GPU archs
  return kiln::testing::CompileModel(m, options);
}

io::HostTensor CudnnRnnInput(const CudnnRnnForm& f, int64_t seq = kRnnSeq) {
  io::HostTensor t;
  t.name = "x";
  t.dtype = DType::kFloat32;
  t.dims = f.batch_first ? std::vector<int64_t>{kRnnBatch, seq, kRnnInput} : std::vector<int64_t>{seq, kRnnBatch, kRnnInput};
  const std::vector<float> v = CudnnRnnValues(seq * kRnnBatch * kRnnInput, 7, -1.0f, 1.0f);
  t.bytes.resize(v.size() * sizeof(float));
  std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}

using CudnnRnnRun = kiln::testing::EmulatedCudaRun;

size_t CudnnRnnCalls(const std::string& log, const std::string& call) {
  size_t n = 0;
  for (size_t at = log.find(call); at != std::string::npos; at = log.find(call, at + 1)) ++n;
  return n;
}

// Runs form `f` twice on --device cuda (the second run reuses the plan and the weight space; the
// log and stats are its), and the float32 model on the CPU backend.
CudnnRnnRun RunCudnnRnn(const CudnnRnnForm& f) {
  auto model = Model::Load(CudnnRnnArtifact(f, f.float16));
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  auto reference = f.float16 ? Model::Load(CudnnRnnArtifact(f, false)) : model;
  REQUIRE_MESSAGE(reference.ok(), reference.status().ToString());
  const std::vector<io::HostTensor> inputs = {CudnnRnnInput(f)};
  return kiln::testing::RunTwiceOnCuda(*model, *reference, inputs, f.op);
}

void CheckCudnnRnn(const CudnnRnnForm& f) {
  const std::string name = CudnnRnnName(f);
  INFO(name);
  const CudnnRnnRun r = RunCudnnRnn(f);
  CHECK(r.library == kiln::Library::kCudnn);
  CHECK(r.stats.last_fallbacks.empty());
  for (const Stats::Fallback& fb : r.stats.last_fallbacks) MESSAGE("fallback: " << fb.reason);
  CHECK_MESSAGE(CudnnRnnCalls(r.log, "cudnnRNNForward") == 1, r.log);
  CHECK_MESSAGE(CudnnRnnCalls(r.log, "cudnnAddTensor") == (f.direction == "bidirectional" && !f.batch_first), r.log);
  const double tol = f.float16 ? kRnnFloat16Tolerance : kRnnFloat32Tolerance;
  kiln::testing::CheckClose(r.got, r.want, tol, tol, name + " on cuDNN RNN");
}

TEST_CASE("[emulated] LSTM runs on cuDNN RNN: forward and bidirectional, with and without initial states, layout 1") {
  KILN_REQUIRE_EMULATED_CUDA();
  for (const char* direction : {"forward", "bidirectional"})
    for (const bool initial : {false, true}) {
      CudnnRnnForm f;
      f.direction = direction, f.initial = initial;
      CheckCudnnRnn(f);
    }
  CudnnRnnForm layout1;
  layout1.batch_first = true, layout1.initial = true;
  CheckCudnnRnn(layout1);
}

TEST_CASE("[emulated] GRU and RNN run on cuDNN RNN: forward and bidirectional, initial states, Tanh and Relu, layout 1") {
  KILN_REQUIRE_EMULATED_CUDA();
  for (const char* op : {"GRU", "RNN"})
    for (const char* direction : {"forward", "bidirectional"}) {
      CudnnRnnForm f;
      f.op = op, f.direction = direction, f.initial = std::string(direction) == "bidirectional";
      CheckCudnnRnn(f);
    }
  CudnnRnnForm relu;
  relu.op = "RNN", relu.direction = "bidirectional", relu.activations = "Relu", relu.initial = true;
  CheckCudnnRnn(relu);
  CudnnRnnForm layout1;
  layout1.op = "GRU", layout1.batch_first = true, layout1.initial = true;
  CheckCudnnRnn(layout1);
}

TEST_CASE("[emulated] LSTM and GRU with sequence_lens run on cuDNN RNN: lengths 5, 2 and 4, each direction") {
  KILN_REQUIRE_EMULATED_CUDA();
  for (const char* op : {"LSTM", "GRU"})
    for (const char* direction : {"forward", "bidirectional"}) {
      CudnnRnnForm f;
      f.op = op, f.direction = direction, f.lens = true, f.initial = true;
      CheckCudnnRnn(f);
    }
}

TEST_CASE("[emulated] float16 LSTM and GRU run on cuDNN RNN within float16's tolerance of the float32 CPU kernel") {
  KILN_REQUIRE_EMULATED_CUDA();
  for (const char* op : {"LSTM", "GRU"}) {
    CudnnRnnForm f;
    f.op = op, f.direction = "bidirectional", f.initial = true, f.float16 = true;
    CheckCudnnRnn(f);
  }
}

TEST_CASE("[emulated] forms cuDNN RNN refuses run on the CPU kernel: clip, peepholes, layout 1 both ways") {
  KILN_REQUIRE_EMULATED_CUDA();
  CudnnRnnForm clip, peepholes, layout1;
  clip.clip = true, peepholes.peepholes = true;
  layout1.op = "GRU", layout1.batch_first = true, layout1.direction = "bidirectional";  // and Y_h
  for (const auto& refused :
       {std::pair<CudnnRnnForm, std::string>{clip, "cuDNN RNN: clip"}, {peepholes, "cuDNN RNN: peepholes"},
        {layout1, "cuDNN RNN: layout 1 with two directions and a state"}}) {
    const CudnnRnnForm& form = refused.first;
    const std::string& reason = refused.second;
    const std::string name = CudnnRnnName(form);
    INFO(name);
    const CudnnRnnRun r = RunCudnnRnn(form);
    CHECK(r.library == kiln::Library::kCudnn);  // the artifact's claim: the refusal is the runtime's
    REQUIRE(r.stats.last_fallbacks.size() == 1);
    CHECK_MESSAGE(Contains(r.stats.last_fallbacks[0].reason, "cuDNN refused it: " + reason),
                  r.stats.last_fallbacks[0].reason);
    CHECK(CudnnRnnCalls(r.log, "cudnnRNNForward") == 0);
    REQUIRE(r.got.size() == r.want.size());
    for (size_t o = 0; o < r.got.size(); ++o) CHECK(r.got[o].bytes == r.want[o].bytes);  // the CPU kernel on both
  }
}

TEST_CASE("[emulated] LSTM on cuDNN RNN: steady-state runs allocate nothing and fill the weight space once") {
  KILN_REQUIRE_EMULATED_CUDA();
  CudnnRnnForm f;
  f.direction = "bidirectional", f.initial = true;
  auto model = Model::Load(CudnnRnnArtifact(f, false));
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  const std::vector<io::HostTensor> inputs = {CudnnRnnInput(f)};
  const std::vector<io::HostTensor> want = kiln::testing::RunCpuReference(*model, inputs);
  const kiln::testing::EmulatedCudaControl* emu = kiln::testing::EmulatedCuda();
  ContextOptions options;
  options.device = Device::kCuda;
  auto ctx = ExecutionContext::Create(*model, options);
  REQUIRE_MESSAGE(ctx.ok(), ctx.status().ToString());
  std::vector<io::HostTensor> got = kiln::testing::Sentinel(want);
  const std::vector<TensorView> in = kiln::testing::Views(inputs);
  std::vector<TensorView> out = kiln::testing::Views(got);
  emu->log_begin();
  REQUIRE(ctx->Run(in, out).ok());
  REQUIRE(ctx->Synchronize().ok());
  const std::string first = emu->log_take();
  // The first run fills the weight space: per direction and linear layer a matrix and a bias.
  CHECK_MESSAGE(CudnnRnnCalls(first, "cuMemcpyDtoDAsync") >= 2 * 8 * 2, first);
  const uint64_t device_allocations = emu->counter("device_allocations");
  bool ok = true;
  emu->log_begin();
  const long host_allocations = kiln::testing::CountKilnAllocations([&] {
    for (int run = 0; run < 5; ++run) ok = ok && ctx->Run(in, out).ok() && ctx->Synchronize().ok();
  });
  const std::string log = emu->log_take();
  CHECK(ok);
  CHECK_MESSAGE(host_allocations == 0, host_allocations << " allocations in Kiln's code in 5 steady-state runs:\n"
                                                        << kiln::testing::CountedAllocationStacks());
  CHECK(emu->counter("device_allocations") == device_allocations);
  CHECK(ctx->stats().last_fallbacks.empty());
  CHECK_MESSAGE(CudnnRnnCalls(log, "cudnnRNNForward") == 5, log);
  CHECK_MESSAGE(CudnnRnnCalls(log, "cuMemcpyDtoDAsync") == 0, log);  // the weight space is kept
  kiln::testing::CheckClose(got, want, kRnnFloat32Tolerance, kRnnFloat32Tolerance, "LSTM on cuDNN RNN");

  // The context's device memory counts the weight space: against the same model with clip (its
  // LSTM on the host), it holds the workspace cap (64 MiB) and at least W, R and B once more.
  CudnnRnnForm clip = f;
  clip.clip = true;
  auto host_model = Model::Load(CudnnRnnArtifact(clip, false));
  REQUIRE_MESSAGE(host_model.ok(), host_model.status().ToString());
  auto host_ctx = ExecutionContext::Create(*host_model, options);
  REQUIRE_MESSAGE(host_ctx.ok(), host_ctx.status().ToString());
  std::vector<io::HostTensor> host_got = kiln::testing::Sentinel(want);
  std::vector<TensorView> host_out = kiln::testing::Views(host_got);
  REQUIRE(host_ctx->Run(in, host_out).ok());
  REQUIRE(host_ctx->Synchronize().ok());
  const uint64_t wrb = 2 * (4 * kRnnHidden * kRnnInput + 4 * kRnnHidden * kRnnHidden + 8 * kRnnHidden) * sizeof(float);
  CHECK(ctx->memory_usage().device_bytes >= host_ctx->memory_usage().device_bytes + (uint64_t{64} << 20) + wrb);
}

TEST_CASE("[emulated] LSTM on cuDNN RNN with a symbolic sequence length: one weight space for every length") {
  KILN_REQUIRE_EMULATED_CUDA();
  CudnnRnnForm f;
  f.direction = "bidirectional", f.symbolic_seq = true;
  auto model = Model::Load(CudnnRnnArtifact(f, false));
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  const kiln::testing::EmulatedCudaControl* emu = kiln::testing::EmulatedCuda();
  ContextOptions options;
  options.device = Device::kCuda;
  auto ctx = ExecutionContext::Create(*model, options);
  REQUIRE_MESSAGE(ctx.ok(), ctx.status().ToString());
  const int64_t lengths[] = {5, 9, 2, 5};
  for (size_t run = 0; run < std::size(lengths); ++run) {
    const int64_t seq = lengths[run];
    INFO("sequence length " << seq);
    const std::vector<io::HostTensor> inputs = {CudnnRnnInput(f, seq)};
    const std::vector<io::HostTensor> want = kiln::testing::RunCpuReference(*model, inputs);
    std::vector<io::HostTensor> got = kiln::testing::Sentinel(want);
    std::vector<TensorView> out = kiln::testing::Views(got);
    emu->log_begin();
    Status st = ctx->Run(kiln::testing::Views(inputs), out);
    if (st.ok()) st = ctx->Synchronize();
    const std::string log = emu->log_take();
    REQUIRE_MESSAGE(st.ok(), st.ToString());
    CHECK(ctx->stats().last_fallbacks.empty());
    CHECK_MESSAGE(CudnnRnnCalls(log, "cudnnRNNForward") == 1, log);
    // Only the first run fills the weight space: per direction and linear layer a matrix and a bias.
    CHECK_MESSAGE(CudnnRnnCalls(log, "cuMemcpyDtoDAsync") == (run == 0 ? 2 * 8 * 2 : 0), log);
    kiln::testing::CheckClose(got, want, kRnnFloat32Tolerance, kRnnFloat32Tolerance, "LSTM on cuDNN RNN");
  }
}

}  // namespace
}  // namespace kiln::cuda

#endif  // KILN_HAVE_CUDA
