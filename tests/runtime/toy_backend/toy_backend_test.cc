// A toy backend registered from a test (tests/runtime/toy_backend/backend.h): its folder and one
// registration run whole models, with the executor's control for every backend: a CPU fallback
// region with its copies, run-time Ifs whose conditions it reads through the toy's transfers,
// and a run-time Loop whose control copies on the toy. Every output is compared with the CPU
// backend's, bit for bit (the toy interprets the same portable programs).
#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "kiln/runtime.h"
#include "runtime/backend.h"
#include "tests/compiler/compile_util.h"
#include "tests/compiler/onnx_model_builder.h"
#include "tests/features/control_flow_models.h"
#include "tests/runtime/toy_backend/backend.h"

namespace kiln {
namespace {

// Registers the toy for one test case, and removes it after.
struct ToyRegistered {
  ToyRegistered() { REQUIRE(RegisterBackend(toy::ToyRegistration()).ok()); }
  ~ToyRegistered() { CHECK(UnregisterBackend("toy").ok()); }
};

// Every output of `ctx` for `in`, as host bytes.
std::vector<std::vector<uint8_t>> Outputs(ExecutionContext& ctx, std::span<const TensorView> in) {
  std::vector<TensorView> out;
  const Status st = ctx.Run(in, out);
  REQUIRE_MESSAGE(st.ok(), st.ToString());
  std::vector<std::vector<uint8_t>> bytes;
  for (const TensorView& o : out) {
    const auto* p = static_cast<const uint8_t*>(o.data);
    bytes.emplace_back(p, p + o.num_bytes());
  }
  return bytes;
}

// `model`'s outputs for `in` on the toy and on the CPU backend.
void CheckAgainstCpu(const Model& model, std::span<const TensorView> in) {
  auto on_toy = ExecutionContext::Create(model, {toy::kToyDevice});
  REQUIRE_MESSAGE(on_toy.ok(), on_toy.status().ToString());
  CHECK(on_toy->device() == toy::kToyDevice);
  CHECK(on_toy->device_note() == "toy backend (test only)");
  auto on_cpu = ExecutionContext::Create(model, {Device::kCpu});
  REQUIRE(on_cpu.ok());
  CHECK(Outputs(*on_toy, in) == Outputs(*on_cpu, in));
}

TEST_CASE("toy backend: registered by a test, it runs generated kernels and the executor runs the rest on the host") {
  ToyRegistered registered;
  // x -> Relu, * 2 (one generated kernel) -> Hardmax (a CPU kernel) -> + 1 (a generated kernel) -> y.
  onnx::ModelProto m = testing::MakeModel(13);
  auto* g = m.mutable_graph();
  testing::AddInput(g, "x", {"2", "5"});
  testing::AddFloatInit(g, "two", {}, {2.0f});
  testing::AddFloatInit(g, "one", {}, {1.0f});
  testing::AddNode(g, "Relu", {"x"}, {"r"}, "relu");
  testing::AddNode(g, "Mul", {"r", "two"}, {"d"}, "double");
  testing::AddNode(g, "Hardmax", {"d"}, {"h"}, "hardmax");
  testing::AddNode(g, "Add", {"h", "one"}, {"y"}, "plus_one");
  testing::AddOutput(g, "y");
  auto model = Model::Load(testing::CompileModel(m, testing::CpuOnly()));
  REQUIRE(model.ok());
  // The compiler asked the registered toy for its claims, as it asks every backend.
  const std::vector<InstructionInfo>& ins = model->entries()[0].instructions;
  REQUIRE(ins.size() == 3);
  CHECK(ins[0].library("toy") == Library::kGenerated);
  CHECK(ins[1].library("toy") == Library::kCpuKernel);
  CHECK(ins[2].library("toy") == Library::kGenerated);

  const std::vector<float> x = {1, -2, 3, 0.5f, 0, -1, 4, 4, 2, -3};
  const TensorView in[] = {TensorView::Host(x.data(), DType::kFloat32, {2, 5})};
  toy::Counters() = {};
  CheckAgainstCpu(*model, in);
  // Two segments on the toy around the Hardmax's region: its input copied to the host, its
  // output back; the outputs delivered from the toy's memory.
  CHECK(toy::Counters().segments == 2);
  CHECK(toy::Counters().to_host == 1);
  CHECK(toy::Counters().from_host == 1);
  // By hand: Relu(x) * 2 is [2, 0, 6, 1, 0] and [0, 8, 8, 4, 0]; Hardmax takes each row's largest
  // (the first of equal ones), [0, 0, 1, 0, 0] and [0, 1, 0, 0, 0]; + 1.
  ContextOptions profiled{toy::kToyDevice};
  profiled.profile = true;
  auto ctx = ExecutionContext::Create(*model, profiled);
  REQUIRE(ctx.ok());
  const std::vector<std::vector<uint8_t>> y = Outputs(*ctx, in);
  std::vector<float> got(10);
  REQUIRE(y.at(0).size() == sizeof(float) * got.size());
  std::memcpy(got.data(), y[0].data(), y[0].size());
  CHECK(got == std::vector<float>{1, 1, 2, 1, 1, 1, 2, 1, 1, 1});
  CHECK(ctx->stats().last_instruction_library ==
        std::vector<Library>{Library::kGenerated, Library::kCpuKernel, Library::kGenerated});
  // Device::kAuto tries the registered backends in order: the toy, before the CPU backend.
  auto automatic = ExecutionContext::Create(*model, {Device::kAuto});
  REQUIRE(automatic.ok());
  CHECK(automatic->device() == toy::kToyDevice);
}

TEST_CASE("toy backend: run-time Ifs and a run-time Loop, their control on the executor") {
  ToyRegistered registered;
  auto branches = Model::Load(testing::CompileModel(testing::BranchModel(), testing::CpuOnly()));
  REQUIRE(branches.ok());
  for (const std::vector<float>& x : {std::vector<float>{1, -2, 3, 4}, {-1, -2}, {0.5f, -1.5f}}) {
    const TensorView in[] = {TensorView::Host(x.data(), DType::kFloat32, {static_cast<int64_t>(x.size() / 2), 2})};
    toy::Counters() = {};
    CheckAgainstCpu(*branches, in);
    CHECK(toy::Counters().to_host >= 1);  // each condition read from the toy's memory
  }
  auto halving = Model::Load(testing::CompileModel(testing::HalvingModel(), testing::CpuOnly()));
  REQUIRE(halving.ok());
  const int64_t trips = 10;
  const std::vector<float> x0 = {3, 5, 8};  // sums 8, 4, 2, 1: four iterations
  const TensorView in[] = {TensorView::Host(&trips, DType::kInt64, {}), TensorView::Host(x0.data(), DType::kFloat32, {3})};
  toy::Counters() = {};
  CheckAgainstCpu(*halving, in);
  CHECK(toy::Counters().copies >= 4);  // carried values and scan rows, copied on the toy
}

TEST_CASE("RegisterBackend refuses a device or name registered already, UnregisterBackend an unknown name") {
  ToyRegistered registered;
  const Status again = RegisterBackend(toy::ToyRegistration());
  CHECK(again.code() == StatusCode::kInvalidArgument);
  CHECK(again.message() == "backend 'toy': its device or name is registered already ('toy')");
  CHECK(UnregisterBackend("cpu").code() == StatusCode::kNotFound);
  // Create names the registered backends for a device none of them is.
  auto model = Model::Load(testing::CompileModel(testing::BranchModel(), testing::CpuOnly()));
  REQUIRE(model.ok());
  const auto unknown = ExecutionContext::Create(*model, {static_cast<Device>(42)});
  CHECK(unknown.status().code() == StatusCode::kInvalidArgument);
  CHECK(unknown.status().message() == "unknown device 42; the registered backends are cuda, toy, cpu, or Device::kAuto");
}

}  // namespace
}  // namespace kiln
