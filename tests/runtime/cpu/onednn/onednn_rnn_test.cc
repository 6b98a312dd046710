// LSTM, GRU and RNN on oneDNN's RNN primitives (runtime/cpu/onednn/onednn.h) through the public
// API, at batch 16 (from which oneDNN is faster for LSTM and GRU): against Kiln's kernels
// (CpuOptions::onednn = false; those pass ONNX's node tests) on every output, in each direction,
// with and without initial states, GRU with linear_before_reset 0 and 1, RNN with Tanh, Relu and
// Sigmoid (and at batch 1, where oneDNN runs it too), and the same bits at 1 and 2 threads; the profile
// names oneDNN; and the forms oneDNN does not take, or where Kiln's kernel is faster (a smaller
// batch), run Kiln's kernel with the reason in Stats::last_fallbacks.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kiln/runtime.h"
#include "runtime/cpu/onednn/onednn.h"
#include "tests/compiler/compile_util.h"
#include "tests/compiler/onnx_model_builder.h"
#include "tests/random_floats.h"

namespace kiln {
namespace {

constexpr int64_t kSeq = 7, kBatch = 16, kInput = 5, kHidden = 19;

struct Form {
  std::string op = "LSTM";
  std::string direction = "forward";
  bool initial = false, lbr = false, lens = false, clip = false;
  int64_t batch = kBatch;
  std::string activations;  // the attribute, when not empty
};

Form MakeForm(const char* op, const char* direction, bool initial, bool lbr = false) {
  Form f;
  f.op = op, f.direction = direction, f.initial = initial, f.lbr = lbr;
  return f;
}

onnx::ModelProto RnnModel(const Form& f) {
  const int64_t gates = f.op == "LSTM" ? 4 : f.op == "RNN" ? 1 : 3, dirs = f.direction == "bidirectional" ? 2 : 1;
  auto m = testing::MakeModel(14);
  auto* g = m.mutable_graph();
  testing::AddInput(g, "x", {std::to_string(kSeq), std::to_string(f.batch), std::to_string(kInput)});
  testing::AddFloatInit(g, "W", {dirs, gates * kHidden, kInput},
                        kiln::testing::RandomFloats(dirs * gates * kHidden * kInput, 1, -0.6f, 0.6f));
  testing::AddFloatInit(g, "R", {dirs, gates * kHidden, kHidden},
                        kiln::testing::RandomFloats(dirs * gates * kHidden * kHidden, 2, -0.4f, 0.4f));
  testing::AddFloatInit(g, "B", {dirs, 2 * gates * kHidden},
                        kiln::testing::RandomFloats(dirs * 2 * gates * kHidden, 3, -0.5f, 0.5f));
  std::vector<std::string> ins = {"x", "W", "R", "B", "", "", ""};
  if (f.lens) {
    std::vector<int64_t> lens(f.batch, kSeq);
    lens[1] = 4, lens[2] = 6;
    testing::AddInt64Init(g, "lens64", {f.batch}, lens);
    testing::AttrInt(testing::AddNode(g, "Cast", {"lens64"}, {"lens"}, "lens"), "to", onnx::TensorProto::INT32);
    ins[4] = "lens";
  }
  if (f.initial) {
    testing::AddFloatInit(g, "h0", {dirs, f.batch, kHidden}, kiln::testing::RandomFloats(dirs * f.batch * kHidden, 4));
    ins[5] = "h0";
    if (f.op == "LSTM") {
      testing::AddFloatInit(g, "c0", {dirs, f.batch, kHidden}, kiln::testing::RandomFloats(dirs * f.batch * kHidden, 5));
      ins[6] = "c0";
    }
  }
  if (f.op != "LSTM") ins.pop_back();
  while (!ins.empty() && ins.back().empty()) ins.pop_back();
  std::vector<std::string> outs = {"y", "yh"};
  if (f.op == "LSTM") outs.push_back("yc");
  auto* n = testing::AddNode(g, f.op, ins, outs, "rnn");
  testing::AttrInt(n, "hidden_size", kHidden);
  testing::AttrString(n, "direction", f.direction);
  if (f.lbr) testing::AttrInt(n, "linear_before_reset", 1);
  if (f.clip) testing::AttrFloat(n, "clip", 100.0f);
  if (!f.activations.empty()) {
    std::vector<std::string> acts = {f.activations};
    if (dirs == 2) acts.push_back(f.activations);
    testing::AttrStrings(n, "activations", acts);
  }
  for (const std::string& o : outs) testing::AddOutput(g, o);
  return m;
}

struct RnnRun {
  std::vector<std::vector<float>> outputs;
  std::vector<Library> libraries;
  std::vector<Stats::Fallback> fallbacks;
};

RnnRun RunRnn(const Model& model, bool onednn, int threads = 1, int64_t batch = kBatch) {
  const std::vector<float> x = kiln::testing::RandomFloats(kSeq * batch * kInput, 9, -1.5f, 1.5f);
  const TensorView in[] = {TensorView::Host(x.data(), DType::kFloat32, {kSeq, batch, kInput})};
  ContextOptions options;
  options.device = Device::kCpu;
  options.cpu.onednn = onednn;
  options.cpu.threads = threads;
  options.profile = true;
  auto ctx = ExecutionContext::Create(model, options);
  REQUIRE(ctx.ok());
  std::vector<TensorView> out;
  const Status st = ctx->Run(in, out);
  REQUIRE_MESSAGE(st.ok(), st.ToString());
  return {testing::FloatCopies(out), ctx->stats().last_instruction_library, ctx->stats().last_fallbacks};
}

TEST_CASE("oneDNN RNN: LSTM, GRU and RNN match Kiln's kernels in every direction, with and without initial states") {
  if (!cpu::OneDnnBuilt()) return;
  std::vector<Form> forms;
  for (const char* dir : {"forward", "reverse", "bidirectional"})
    for (const bool initial : {false, true}) {
      forms.push_back(MakeForm("LSTM", dir, initial));
      forms.push_back(MakeForm("GRU", dir, initial, false));
      forms.push_back(MakeForm("GRU", dir, initial, true));
      forms.push_back(MakeForm("RNN", dir, initial));
    }
  for (const char* act : {"Relu", "Sigmoid"}) {
    Form f = MakeForm("RNN", "bidirectional", true);
    f.activations = act;
    forms.push_back(f);
  }
  Form small = MakeForm("RNN", "bidirectional", true);
  small.batch = 1;
  forms.push_back(small);
  for (const Form& f : forms) {
    INFO(f.op << " " << f.direction << " initial " << f.initial << " linear_before_reset " << f.lbr << " activations "
              << f.activations << " batch " << f.batch);
    auto model = Model::Load(testing::CompileModel(RnnModel(f)));
    REQUIRE(model.ok());
    REQUIRE(model->entries()[0].instructions.size() == 1);
    CHECK(model->entries()[0].instructions[0].library("cpu") == Library::kOneDnn);
    const RnnRun lib = RunRnn(*model, true, 1, f.batch), kernel = RunRnn(*model, false, 1, f.batch),
                 lib2 = RunRnn(*model, true, 2, f.batch);
    CHECK(lib.fallbacks.empty());
    CHECK(lib2.outputs == lib.outputs);  // the same bits on two threads
    CHECK(lib.libraries == std::vector<Library>{Library::kOneDnn});
    CHECK(kernel.libraries == std::vector<Library>{Library::kCpuKernel});
    REQUIRE(lib.outputs.size() == kernel.outputs.size());
    for (size_t o = 0; o < lib.outputs.size(); ++o) {
      INFO("output " << o);
      REQUIRE(lib.outputs[o].size() == kernel.outputs[o].size());
      int bad = 0;
      for (size_t i = 0; i < lib.outputs[o].size(); ++i)
        bad += !(std::fabs(lib.outputs[o][i] - kernel.outputs[o][i]) <= 1e-5f * (1 + std::fabs(kernel.outputs[o][i])));
      CHECK(bad == 0);
    }
  }
}

TEST_CASE("oneDNN RNN: sequence_lens, clip and a small batch run Kiln's kernel, and last_fallbacks says why") {
  if (!cpu::OneDnnBuilt()) return;
  struct Case {
    Form form;
    std::string why;
  };
  Case cases[3];
  cases[0].form.direction = "bidirectional", cases[0].form.lens = true, cases[0].why = "sequence_lens";
  cases[1].form.op = "GRU", cases[1].form.clip = true, cases[1].why = "clip";
  cases[2].form.op = "GRU", cases[2].form.batch = 4;
  cases[2].why = "GRU of batch 4: Kiln's kernel is faster below batch 16";
  for (const Case& c : cases) {
    INFO(c.form.op << " " << c.why);
    auto model = Model::Load(testing::CompileModel(RnnModel(c.form)));
    REQUIRE(model.ok());
    const RnnRun r = RunRnn(*model, true, 1, c.form.batch);
    REQUIRE(r.fallbacks.size() == 1);
    CHECK(r.fallbacks[0].reason.find(c.why) != std::string::npos);
    CHECK(r.libraries == std::vector<Library>{Library::kCpuKernel});
  }
}

}  // namespace
}  // namespace kiln
