// Fused instructions in loaded artifacts: a good one runs through the program interpreter;
// every way a hostile artifact can get the kernel table or a fused instruction wrong is a
// precise kDataLoss at load, never a crash or an out-of-range read at run time.
#include <doctest/doctest.h>

#include "kiln/runtime.h"
#include "runtime/kernels/kernel.h"
#include "tests/runtime/artifact_builder_test_util.h"

using namespace kiln::testing;  // NOLINT
using kiln::DType;
using kiln::fused::Op;
using kiln::fused::ScalarType;

namespace {

// y = max(x + w, 0) as one fused instruction: x float32[N, 3], w = {10, 20, 30}.
// Size argument 0 is N (expr 0).
ArtifactSpec FusedAddSpec() { return kiln::testing::FusedAddModelSpec(true); }

kiln::Status LoadStatus(const ArtifactSpec& spec) {
  auto m = kiln::Model::Load(BuildArtifact(spec));
  return m.ok() ? kiln::Status::Ok() : m.status();
}

void CheckDataLoss(const ArtifactSpec& spec, const std::string& fragment) {
  kiln::Status st = LoadStatus(spec);
  CHECK(st.code() == kiln::StatusCode::kDataLoss);
  CHECK_MESSAGE(st.message().find(fragment) != std::string::npos, st.message());
}

}  // namespace

TEST_CASE("a fused instruction runs its kernel's program") {
  auto model = kiln::Model::Load(BuildArtifact(FusedAddSpec()));
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  REQUIRE(model->kernels().size() == 1);
  CHECK(model->kernels()[0].archs.empty());
  CHECK(model->kernels()[0].program.find("load f32") != std::string::npos);
  auto ctx = kiln::ExecutionContext::Create(*model, {});
  REQUIRE(ctx.ok());
  float x[6] = {-11, 1, 2, 3, -40, 0.5f};
  kiln::TensorView in[] = {kiln::TensorView::Host(x, DType::kFloat32, {2, 3})};
  std::vector<kiln::TensorView> out;
  REQUIRE(ctx->Run(in, out).ok());
  const float* y = static_cast<const float*>(out[0].data);
  const float want[6] = {0, 21, 32, 13, 0, 30.5f};
  for (int i = 0; i < 6; ++i) CHECK(y[i] == want[i]);
}

TEST_CASE("hostile kernel references and programs are rejected at load") {
  SUBCASE("kernel index out of range") {
    ArtifactSpec a = FusedAddSpec();
    a.entries[0].instructions[0].kernel = 5;
    CheckDataLoss(a, "kernel 5 out of range (kernels: 1)");
  }
  SUBCASE("a CPU op naming a kernel") {
    ArtifactSpec a = FusedAddSpec();
    a.entries[0].instructions[0].op = "Add";
    CheckDataLoss(a, "only kiln.Fused instructions run kernels");
  }
  SUBCASE("size arguments missing") {
    ArtifactSpec a = FusedAddSpec();
    a.entries[0].instructions[0].sizes = {};
    CheckDataLoss(a, "0 size arguments, its kernel's program takes 1");
  }
  SUBCASE("size argument expr out of range") {
    ArtifactSpec a = FusedAddSpec();
    a.entries[0].instructions[0].sizes = {99};
    CheckDataLoss(a, "size argument 0 expr 99 out of range");
  }
  SUBCASE("operand count differs from the program") {
    ArtifactSpec a = FusedAddSpec();
    a.entries[0].instructions[0].inputs = {0};
    CheckDataLoss(a, "1 inputs, its kernel's program has 2");
  }
  SUBCASE("operand dtype differs from the program") {
    ArtifactSpec a = FusedAddSpec();
    a.kernels[0].inputs[1].dtype = DType::kFloat64;
    a.kernels[0].nodes[3].type = ScalarType::kF64;
    a.kernels[0].nodes = {a.kernels[0].nodes[0], a.kernels[0].nodes[1], a.kernels[0].nodes[2],
                          a.kernels[0].nodes[3]};
    a.kernels[0].outputs[0].value = 1;
    CheckDataLoss(a, "input 1 does not match its kernel's program");
  }
  SUBCASE("a program node reading a later node") {
    ArtifactSpec a = FusedAddSpec();
    a.kernels[0].nodes[4].b = 6;
    kiln::Status st = LoadStatus(a);
    CHECK(st.code() == kiln::StatusCode::kDataLoss);  // a corrupt artifact, not a caller's mistake
    CHECK_MESSAGE(st.message().find("kernel 0 'kiln_test_0': program: ") != std::string::npos, st.message());
  }
  SUBCASE("a load of a missing input") {
    ArtifactSpec a = FusedAddSpec();
    a.kernels[0].nodes[3].i = 7;
    kiln::Status st = LoadStatus(a);
    CHECK(st.code() != kiln::StatusCode::kOk);
    CHECK_MESSAGE(st.message().find("kernel 0") != std::string::npos, st.message());
  }
}

TEST_CASE("every CPU kernel has its op's operand counts") {
  for (const kiln::cpu::KernelDef& k : kiln::cpu::AllKernels()) {
    // Kiln's internal ops have no op table row and give their counts themselves.
    CHECK_MESSAGE((k.op.starts_with("kiln.") || kiln::FindOpInfo(k.op) != nullptr), k.op);
    CHECK_MESSAGE(k.arity.max_inputs >= k.arity.min_inputs, k.op);
    CHECK_MESSAGE(k.arity.max_inputs >= 1, k.op);
  }
  // kiln.IfOutput(cond, then_value, else_value): an instruction with other counts is a corrupt
  // artifact.
  const kiln::cpu::KernelDef* if_output = kiln::cpu::FindKernel("kiln.IfOutput");
  REQUIRE(if_output != nullptr);
  CHECK((if_output->arity.min_inputs == 3 && if_output->arity.max_inputs == 3 && if_output->arity.Required(2)));
  ArtifactSpec two = AddModelSpec();
  two.entries[0].instructions[0].op = "kiln.IfOutput";
  kiln::Status st = LoadStatus(two);
  CHECK(st.code() == kiln::StatusCode::kDataLoss);
  CHECK_MESSAGE(st.message().find("op 'kiln.IfOutput' takes 3 inputs, found 2") != std::string::npos, st.message());
  const kiln::cpu::KernelDef* roi = kiln::cpu::FindKernel("RoiAlign");
  REQUIRE(roi != nullptr);
  CHECK(roi->arity.min_inputs == 3);
  CHECK(roi->arity.Required(2));
  const kiln::cpu::KernelDef* nms = kiln::cpu::FindKernel("NonMaxSuppression");
  REQUIRE(nms != nullptr);
  CHECK((nms->arity.min_inputs == 2 && nms->arity.max_inputs == 5 && !nms->arity.Required(2)));
  CHECK(kiln::cpu::FindKernel("Concat")->arity.Required(40));  // variadic: every input
}

// The tester's cases (tampered, resealed artifacts): RoiAlign, NonMaxSuppression and DeformConv
// with 2 inputs read past their operand list, MaxUnpool and RoiAlign with an absent required
// input dereferenced null. Load now refuses every operand list its op's schema does not allow.
TEST_CASE("an instruction's operand counts and required inputs are checked at load") {
  SUBCASE("too few inputs") {
    ArtifactSpec a = AddModelSpec();
    a.entries[0].instructions[0].inputs = {0};
    CheckDataLoss(a, "instruction 0 'add0': op 'Add' takes 2 inputs, found 1");
  }
  SUBCASE("too many inputs") {
    ArtifactSpec a = AddModelSpec();
    a.entries[0].instructions[0].inputs = {0, 1, 1};
    CheckDataLoss(a, "op 'Add' takes 2 inputs, found 3");
  }
  SUBCASE("a required input absent") {
    ArtifactSpec a = AddModelSpec();
    a.entries[0].instructions[0].inputs = {0, -1};
    CheckDataLoss(a, "instruction 0 'add0': op 'Add' input 1 is required but absent");
  }
  SUBCASE("too many outputs") {
    ArtifactSpec a = AddModelSpec();
    a.entries[0].instructions[0].outputs = {2, 2};
    CheckDataLoss(a, "op 'Add' has 1 outputs, found 2");
  }
  SUBCASE("RoiAlign with 2 inputs") {
    ArtifactSpec a = AddModelSpec();
    a.entries[0].instructions[0].op = "RoiAlign";
    CheckDataLoss(a, "op 'RoiAlign' takes 3 inputs, found 2");
  }
  SUBCASE("NonMaxSuppression's optional inputs may be absent, its scores may not") {
    ArtifactSpec a = AddModelSpec();
    a.entries[0].instructions[0].op = "NonMaxSuppression";
    a.entries[0].instructions[0].inputs = {0, -1, -1};
    CheckDataLoss(a, "op 'NonMaxSuppression' input 1 is required but absent");
  }
  SUBCASE("MaxUnpool without its indices") {
    ArtifactSpec a = AddModelSpec();
    a.entries[0].instructions[0].op = "MaxUnpool";
    a.entries[0].instructions[0].inputs = {0, -1};
    CheckDataLoss(a, "op 'MaxUnpool' input 1 is required but absent");
  }
  SUBCASE("variadic Sum: at least one input, each present") {
    ArtifactSpec a = AddModelSpec();
    a.entries[0].instructions[0].op = "Sum";
    a.entries[0].instructions[0].inputs = {};
    CheckDataLoss(a, "op 'Sum' takes at least 1 inputs, found 0");
    a.entries[0].instructions[0].inputs = {0, 1, -1};
    CheckDataLoss(a, "op 'Sum' input 2 is required but absent");
  }
}
