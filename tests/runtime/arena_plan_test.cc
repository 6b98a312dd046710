// The runtime's recheck of the memory plan (runtime/arena_plan.h): artifacts whose plan is
// corrupt are refused with kDataLoss naming the entry and the tensors; at load when the
// entry's offsets and sizes are constants, at the Run whose shapes make them collide
// otherwise.
#include <doctest/doctest.h>

#include <algorithm>
#include <iterator>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "kiln/runtime.h"
#include "runtime/arena_plan.h"
#include "runtime/model_impl.h"
#include "tests/runtime/artifact_builder_test_util.h"

namespace kiln {
namespace {

using testing::ArtifactSpec;
using testing::BuildArtifact;
using testing::E;
using testing::LoadError;
using testing::T;

// y = Relu(Relu(Relu(Relu(x)))) over float32[4] (16 bytes each): instruction i writes
// tensor i + 1 ('t1'..'t3', then 'y' = tensor 4) and reads tensor i. Exprs: 0 the dim 4,
// 1 offset 0, 2 offset 16, 3 offset 8, 4 arena 32. A valid plan ping-pongs between offsets 0
// and 16: t1 [0, 1], t2 [1, 2], t3 [2, 3], y [3, end] in instruction indices.
ArtifactSpec ChainSpec() {
  ArtifactSpec a;
  a.inputs = {{"x", DType::kFloat32, {4}, {""}}};
  a.outputs = {{"y", DType::kFloat32, {4}, {""}}};
  testing::EntrySpec e;
  e.checks = {{"x", DType::kFloat32, {testing::Const(4)}}};
  e.exprs = {E(fb::ExprOp::Const, 4), E(fb::ExprOp::Const, 0), E(fb::ExprOp::Const, 16),
             E(fb::ExprOp::Const, 8), E(fb::ExprOp::Const, 32)};
  e.tensors = {T("x", DType::kFloat32, {0}, fb::Storage::Input, 0)};
  for (int j = 1; j <= 4; ++j) {
    e.tensors.push_back(T(j == 4 ? "y" : "t" + std::to_string(j), DType::kFloat32, {0}, fb::Storage::Arena, 0,
                          j % 2 ? 1 : 2));
    e.instructions.push_back({"Relu", "relu" + std::to_string(j), {j - 1}, {j}, {}, -1, {}, {}});
  }
  e.inputs = {0};
  e.outputs = {4};
  e.arena_bytes = 4;
  a.entries = {e};
  return a;
}

TEST_CASE("memory plan: a plan that reuses bytes only after their tensor's last read loads and runs") {
  Result<Model> m = Model::Load(BuildArtifact(ChainSpec()));
  REQUIRE_MESSAGE(m.ok(), m.status().ToString());
  CHECK(m->impl().prepared[0].plan_checked);  // constants only: checked at load
  auto ctx = ExecutionContext::Create(*m, {.device = Device::kCpu, .cpu = {.threads = 1}});
  REQUIRE(ctx.ok());
  float x[] = {-1, 2, -3, 4};
  TensorView in[] = {TensorView::Host(x, DType::kFloat32, {4})};
  std::vector<TensorView> out;
  REQUIRE(ctx->Run(in, out).ok());
  const float* y = static_cast<const float*>(out[0].data);
  CHECK(std::vector<float>(y, y + 4) == std::vector<float>{0, 2, 0, 4});
}

TEST_CASE("memory plan: tensors live at the same time may not share a byte") {
  ArtifactSpec a = ChainSpec();
  a.entries[0].tensors[2].offset = 3;  // t2 at 8: overlaps t1 [0, 16) while instruction 1 reads t1
  Status st = LoadError(a);
  CHECK(st.code() == StatusCode::kDataLoss);
  CHECK(st.message() ==
        "entry 0 (default) memory plan: tensor 1 't1' (bytes [0, 16), live at instructions 0..1) and "
        "tensor 2 't2' (bytes [8, 24), live at instructions 1..2) share bytes");

  // Lifetimes are closed: an instruction's output may not take the bytes of its own input.
  a = ChainSpec();
  a.entries[0].tensors[2].offset = 1;  // t2 = Relu(t1), both at 0
  CHECK(LoadError(a).message() ==
        "entry 0 (default) memory plan: tensor 1 't1' (bytes [0, 16), live at instructions 0..1) and "
        "tensor 2 't2' (bytes [0, 16), live at instructions 1..2) share bytes");

  // An entry output lives to the end: t1 made an output may not be reused by t3.
  a = ChainSpec();
  a.outputs.push_back({"t1", DType::kFloat32, {4}, {""}});
  a.entries[0].outputs.push_back(1);
  CHECK(LoadError(a).message() ==
        "entry 0 (default) memory plan: tensor 1 't1' (bytes [0, 16), live at instructions 0..the end) and "
        "tensor 3 't3' (bytes [0, 16), live at instructions 2..3) share bytes");

  // Empty tensors take no bytes: a zero-sized t2 may sit anywhere.
  a = ChainSpec();
  a.entries[0].exprs.push_back(E(fb::ExprOp::Const, 0));  // 5
  a.entries[0].tensors[2].shape = {5};
  a.entries[0].tensors[2].offset = 1;
  a.entries[0].tensors[3].shape = {5};
  CHECK(LoadError(a).ok());
}

TEST_CASE("memory plan: every arena tensor is written by exactly one instruction, before any read") {
  ArtifactSpec a = ChainSpec();
  a.entries[0].instructions[2].outputs = {2};  // relu3 writes t2 again
  Status st = LoadError(a);
  CHECK(st.code() == StatusCode::kDataLoss);
  CHECK(st.message() ==
        "entry 0 (default) memory plan: tensor 2 't2' is written by instruction 1 'relu2' (Relu) and again by "
        "instruction 2 'relu3' (Relu)");

  a = ChainSpec();
  a.entries[0].instructions[0].inputs = {2};  // relu1 reads t2, which relu2 writes
  st = LoadError(a);
  CHECK(st.code() == StatusCode::kDataLoss);
  CHECK(st.message() ==
        "entry 0 (default) memory plan: instruction 0 'relu1' (Relu) reads tensor 2 't2' before instruction 1 "
        "'relu2' (Relu) writes it");

  a = ChainSpec();
  a.entries[0].instructions[1].inputs = {2};  // relu2 reads its own output
  CHECK(LoadError(a).message() ==
        "entry 0 (default) memory plan: instruction 1 'relu2' (Relu) reads tensor 2 't2' before it writes it itself");

  a = ChainSpec();
  a.entries[0].tensors.push_back(T("ghost", DType::kFloat32, {0}, fb::Storage::Arena, 0, 1));
  st = LoadError(a);
  CHECK(st.code() == StatusCode::kDataLoss);
  CHECK(st.message() == "entry 0 (default) memory plan: tensor 5 'ghost' is in the arena but no instruction writes it");
}

// ChainSpec over float32[N], N in 1..8: t1 and t3 at 0, t2 and y at the constant 16 (expr 2),
// arena N * 4 + 16. Right for N <= 4; from N = 5 on t1 [0, 4N) reaches into t2 [16, 16 + 4N).
ArtifactSpec SymbolicChainSpec() {
  ArtifactSpec a = ChainSpec();
  a.inputs[0] = {"x", DType::kFloat32, {-1}, {"N"}};
  a.outputs[0] = {"y", DType::kFloat32, {-1}, {"N"}};
  testing::EntrySpec& e = a.entries[0];
  e.symbols = {"N"};
  e.checks = {{"x", DType::kFloat32, {testing::Sym(0, 1, 8)}}};
  e.exprs[0] = E(fb::ExprOp::Var, 0);
  e.exprs.push_back(E(fb::ExprOp::Const, 4));   // 5
  e.exprs.push_back(E(fb::ExprOp::Mul, 0, 5));  // 6: N * 4
  e.exprs.push_back(E(fb::ExprOp::Add, 6, 2));  // 7: N * 4 + 16
  e.arena_bytes = 7;
  return a;
}

TEST_CASE("memory plan: symbolic offsets are checked at the Run whose shapes make tensors collide") {
  Result<Model> m = Model::Load(BuildArtifact(SymbolicChainSpec()));
  REQUIRE_MESSAGE(m.ok(), m.status().ToString());
  CHECK_FALSE(m->impl().prepared[0].plan_checked);
  auto ctx = ExecutionContext::Create(*m, {.device = Device::kCpu, .cpu = {.threads = 1}});
  REQUIRE(ctx.ok());
  float x[8] = {-1, 2, -3, 4, -5, 6, -7, 8};
  std::vector<TensorView> out;
  TensorView four[] = {TensorView::Host(x, DType::kFloat32, {4})};
  REQUIRE(ctx->Run(four, out).ok());
  CHECK(static_cast<const float*>(out[0].data)[3] == 4.0f);
  TensorView five[] = {TensorView::Host(x, DType::kFloat32, {5})};
  Status st = ctx->Run(five, out);
  CHECK(st.code() == StatusCode::kDataLoss);
  CHECK(st.message() ==
        "entry 0 (default) memory plan: tensor 1 't1' (bytes [0, 20), live at instructions 0..1) and "
        "tensor 2 't2' (bytes [16, 36), live at instructions 1..2) share bytes");
  // The context stays usable for shapes the plan fits.
  TensorView two[] = {TensorView::Host(x, DType::kFloat32, {2})};
  out.clear();
  REQUIRE(ctx->Run(two, out).ok());
  CHECK(out[0].dims[0] == 2);
  CHECK(static_cast<const float*>(out[0].data)[1] == 2.0f);
}

TEST_CASE("memory plan: the sweep finds an overlap among many live tensors, whatever their order in the arena") {
  // n tensors all written by one instruction each and all entry outputs (live to the end),
  // laid out back to back in reverse order; then one pair is made to overlap.
  const int n = 2000;
  ArtifactSpec a;
  a.inputs = {{"x", DType::kFloat32, {1}, {""}}};
  testing::EntrySpec e;
  e.checks = {{"x", DType::kFloat32, {testing::Const(1)}}};
  e.exprs = {E(fb::ExprOp::Const, 1)};
  e.tensors = {T("x", DType::kFloat32, {0}, fb::Storage::Input, 0)};
  for (int j = 1; j <= n; ++j) {
    e.exprs.push_back(E(fb::ExprOp::Const, 4 * (n - j)));
    e.tensors.push_back(T("t" + std::to_string(j), DType::kFloat32, {0}, fb::Storage::Arena, 0, j));
    e.instructions.push_back({"Identity", "id" + std::to_string(j), {0}, {j}, {}, -1, {}, {}});
    e.outputs.push_back(j);
    a.outputs.push_back({"t" + std::to_string(j), DType::kFloat32, {1}, {""}});
  }
  e.exprs.push_back(E(fb::ExprOp::Const, 4 * n));
  e.arena_bytes = n + 1;
  e.inputs = {0};
  a.entries = {e};
  REQUIRE(LoadError(a).ok());
  a.entries[0].exprs[1500] = E(fb::ExprOp::Const, 4 * (n - 700) + 2);  // t1500 reaches into t700
  a.entries[0].tensors[1500].dtype = a.outputs[1499].dtype = DType::kUInt8;
  Status st = LoadError(a);
  CHECK(st.code() == StatusCode::kDataLoss);
  CHECK(st.message() ==
        "entry 0 (default) memory plan: tensor 700 't700' (bytes [5200, 5204), live at instructions 699..the end) "
        "and tensor 1500 't1500' (bytes [5202, 5203), live at instructions 1499..the end) share bytes");
}

TEST_CASE("RankSet: predecessor and successor agree with std::set over one to four levels") {
  std::mt19937 rng(8);
  for (int64_t n : {1, 2, 63, 64, 65, 4097, 300000}) {
    CAPTURE(n);
    RankSet set;
    set.Resize(static_cast<size_t>(n));
    std::set<int64_t> want;
    for (int op = 0; op < 20000; ++op) {
      const int64_t i = static_cast<int64_t>(rng() % static_cast<uint64_t>(n));
      if (rng() % 3 != 0) {
        set.Insert(i);
        want.insert(i);
      } else {
        set.Erase(i);
        want.erase(i);
      }
      const int64_t q = static_cast<int64_t>(rng() % static_cast<uint64_t>(n));
      auto above = want.upper_bound(q);
      auto below = want.lower_bound(q);
      const int64_t want_above = above == want.end() ? -1 : *above;
      const int64_t want_below = below == want.begin() ? -1 : *std::prev(below);
      if (set.Above(q) != want_above || set.Below(q) != want_below) {
        CHECK(set.Above(q) == want_above);
        CHECK(set.Below(q) == want_below);
        break;
      }
    }
    set.Clear();
    CHECK(set.Below(n - 1) == -1);
    CHECK(set.Above(0) == -1);
  }
}

// An entry for CheckArenaPlan alone: tensor 0 the input, tensor j = 1..n float32[dims[j]] in
// the arena at values[j], written by instruction j - 1, which reads x and `reads[j - 1]`;
// `outputs` are entry outputs; the arena is values[n + 1] bytes.
PreparedEntry PlanEntry(int n, const std::vector<std::vector<int32_t>>& reads, const std::vector<int32_t>& outputs) {
  PreparedEntry pe;
  pe.label = "entry 0 (default)";
  pe.tensors.resize(static_cast<size_t>(n) + 1);
  pe.tensors[0].storage = StorageKind::kInput;
  for (int32_t j = 1; j <= n; ++j) {
    PreparedTensor& t = pe.tensors[j];
    t.dtype = DType::kFloat32;
    t.storage = StorageKind::kArena;
    t.rank = 1;
    t.dims_begin = j;
    t.offset_expr = j;
    PreparedInstruction ins;
    ins.operands_begin = static_cast<int32_t>(pe.operands.size());
    pe.operands.push_back(0);
    for (int32_t r : reads[j - 1]) pe.operands.push_back(r);
    pe.operands.push_back(j);
    ins.num_inputs = static_cast<int32_t>(reads[j - 1].size()) + 1;
    ins.num_outputs = 1;
    pe.instructions.push_back(ins);
  }
  pe.outputs = outputs;
  pe.arena_expr = n + 1;
  return pe;
}

TEST_CASE("memory plan: slot plans are proven without the sweep, changed ones agree with every pair") {
  // Plans as PlaceSymbolic makes them (a tensor takes the first slot free before it is
  // written, else a new one; slots end to end, each as large as its largest tensor), then in
  // half of them one change: a tensor moved by 4 bytes, grown by one element, made an entry
  // output (live to the end), emptied, or read by one more instruction.
  std::mt19937 rng(11);
  int refused = 0, proven_changed = 0;
  for (int trial = 0; trial < 600; ++trial) {
    const int n = 16;
    std::vector<std::vector<int32_t>> reads(n);
    std::vector<int32_t> last(n + 1), outputs = {n};
    std::vector<int64_t> elems(n + 1);
    for (int32_t j = 1; j <= n; ++j) {
      last[j] = j - 1;
      elems[j] = rng() % 5;
      for (int32_t r = 1; r < j; ++r)
        if (rng() % 5 == 0) {
          reads[j - 1].push_back(r);
          last[r] = j - 1;
        }
    }
    last[n] = n;
    std::vector<int64_t> slot_bytes, slot_free_after;
    std::vector<int32_t> slot(n + 1);
    for (int32_t j = 1; j <= n; ++j) {
      size_t k = 0;
      while (k < slot_bytes.size() && slot_free_after[k] >= j - 1) ++k;
      if (k == slot_bytes.size()) {
        slot_bytes.push_back(0);
        slot_free_after.push_back(0);
      }
      slot[j] = static_cast<int32_t>(k);
      slot_bytes[k] = std::max(slot_bytes[k], 4 * elems[j]);
      slot_free_after[k] = last[j];
    }
    std::vector<int64_t> slot_offset(slot_bytes.size() + 1, 0);
    for (size_t k = 0; k < slot_bytes.size(); ++k) slot_offset[k + 1] = slot_offset[k] + slot_bytes[k];
    std::vector<int64_t> values(n + 2), dims(n + 1);
    for (int32_t j = 1; j <= n; ++j) {
      values[j] = slot_offset[slot[j]];
      dims[j] = elems[j];
    }
    values[n + 1] = slot_offset.back() + 8;  // room for a moved or grown tensor
    const bool changed = trial % 2 == 1;
    if (changed) {
      const int32_t j = 1 + static_cast<int32_t>(rng() % n);
      switch (rng() % 5) {
        case 0: values[j] = values[j] >= 4 && rng() % 2 ? values[j] - 4 : values[j] + 4; break;
        case 1: ++dims[j]; break;
        case 2:
          if (j != n) outputs.push_back(j);
          last[j] = n;
          break;
        case 3: dims[j] = 0; break;
        case 4:  // read once more, by the instruction after its last reader (which may write its slot)
          if (last[j] + 1 < n) reads[++last[j]].push_back(j);
          break;
      }
    }
    PreparedEntry pe = PlanEntry(n, reads, outputs);
    REQUIRE(ArenaLiveness::Build(pe, &pe.liveness).ok());
    ArenaScratch scratch;
    scratch.Resize(pe.liveness);
    const Status st = CheckArenaPlan(pe, values.data(), dims.data(), scratch);
    bool overlap = false;
    for (int32_t i = 1; i <= n; ++i)
      for (int32_t j = i + 1; j <= n; ++j)
        overlap = overlap || (dims[i] > 0 && dims[j] > 0 && j - 1 <= last[i] && values[i] < values[j] + 4 * dims[j] &&
                              values[j] < values[i] + 4 * dims[i]);
    CAPTURE(trial);
    CAPTURE(st.ToString());
    CHECK(st.ok() == !overlap);
    if (!changed) CHECK(scratch.sweeps == 0);
    if (overlap) CHECK(st.message().ends_with(" share bytes"));
    refused += overlap;
    proven_changed += changed && scratch.sweeps == 0;
  }
  CHECK(refused > 60);  // both outcomes, and changed plans the walk proves and ones it does not
  CHECK(proven_changed > 30);
  CHECK(proven_changed < 270);
}

TEST_CASE("memory plan: the sweep agrees with checking every pair, on random plans") {
  std::mt19937 rng(8);
  int refused = 0;
  for (int trial = 0; trial < 400; ++trial) {
    // Instruction i writes tensor i + 1 (float32[size], 0 to 4 elements, at a random multiple
    // of 4 below 640) and reads x and a random subset of the tensors before it; the last
    // tensor and a random few are entry outputs.
    const int n = 12;
    ArtifactSpec a;
    a.inputs = {{"x", DType::kFloat32, {1}, {""}}};
    testing::EntrySpec e;
    e.checks = {{"x", DType::kFloat32, {testing::Const(1)}}};
    e.exprs = {E(fb::ExprOp::Const, 1)};
    e.tensors = {T("x", DType::kFloat32, {0}, fb::Storage::Input, 0)};
    e.inputs = {0};
    std::vector<int64_t> begin(n + 1), end(n + 1);
    std::vector<int> last(n + 1);
    for (int j = 1; j <= n; ++j) {
      begin[j] = 4 * (rng() % 160);
      end[j] = begin[j] + 4 * (rng() % 5);
      last[j] = j - 1;
      e.exprs.push_back(E(fb::ExprOp::Const, (end[j] - begin[j]) / 4));
      e.exprs.push_back(E(fb::ExprOp::Const, begin[j]));
      e.tensors.push_back(T("t" + std::to_string(j), DType::kFloat32, {2 * j - 1}, fb::Storage::Arena, 0, 2 * j));
      // Sum: variadic, so an instruction may read any number of earlier tensors (load checks arity).
      testing::InstructionSpec ins{"Sum", "id" + std::to_string(j), {0}, {j}, {}, -1, {}, {}};
      for (int r = 1; r < j; ++r) {
        if (rng() % 4 != 0) continue;
        ins.inputs.push_back(r);
        last[r] = j - 1;
      }
      e.instructions.push_back(ins);
    }
    for (int j = 1; j <= n; ++j) {
      if (j != n && rng() % 6 != 0) continue;
      e.outputs.push_back(j);
      last[j] = n;
      a.outputs.push_back({"t" + std::to_string(j), DType::kFloat32, {-1}, {"?"}});
    }
    e.exprs.push_back(E(fb::ExprOp::Const, 1024));
    e.arena_bytes = 2 * n + 1;
    a.entries = {e};
    bool overlap = false;
    for (int i = 1; i <= n; ++i)
      for (int j = i + 1; j <= n; ++j)
        overlap = overlap || (begin[i] < end[i] && begin[j] < end[j] && j - 1 <= last[i] && begin[i] < end[j] &&
                              begin[j] < end[i]);
    Status st = LoadError(a);
    CAPTURE(trial);
    CAPTURE(st.ToString());
    CHECK(st.ok() == !overlap);
    if (overlap) CHECK(st.message().ends_with(" share bytes"));
    refused += overlap;
  }
  CHECK(refused > 50);  // both outcomes are well represented
  CHECK(refused < 350);
}

}  // namespace
}  // namespace kiln
