// Attention recognised in the graphs exporters write (compiler/passes/attention.h): which
// chains become one Attention node, what the compile log says of those that do not, and that
// the fused model computes what the written-out graph does (compiled with --no-fuse, op by op
// on Kiln's kernels: MatMul, Softmax, Where).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "compiler/passes/attention.h"
#include "kiln/runtime.h"
#include "tests/compiler/compile_util.h"
#include "tests/compiler/onnx_model_builder.h"
#include "tests/kv_cache_model.h"
#include "tests/random_floats.h"

namespace kiln::testing {
namespace {

constexpr int64_t kAttentionHeads = 2, kQueries = 5, kKeys = 7, kHead = 6;

// AttentionInputs q [1, H, Sq, D], k [1, H, T, D], v [1, H, T, D] and, when `mask`, m [1, 1, Sq, T] with
// -inf entries and query row 1 masked throughout.
struct AttentionInputs {
  std::vector<float> q = kiln::testing::RandomFloats(kAttentionHeads * kQueries * kHead, 1);
  std::vector<float> k = kiln::testing::RandomFloats(kAttentionHeads * kKeys * kHead, 2);
  std::vector<float> v = kiln::testing::RandomFloats(kAttentionHeads * kKeys * kHead, 3);
  std::vector<float> m = kiln::testing::RandomFloats(kQueries * kKeys, 4, -2.0f, 0.0f);
  AttentionInputs() {
    for (size_t i = 0; i < m.size(); i += 3) m[i] = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < kKeys; ++j) m[kKeys + j] = -std::numeric_limits<float>::infinity();
  }
};

void AddQkv(onnx::GraphProto* g, bool mask) {
  const std::string h = std::to_string(kAttentionHeads), sq = std::to_string(kQueries), t = std::to_string(kKeys),
                    d = std::to_string(kHead);
  AddInput(g, "q", {"1", h, sq, d});
  AddInput(g, "k", {"1", h, t, d});
  AddInput(g, "v", {"1", h, t, d});
  if (mask) AddInput(g, "m", {"1", "1", sq, t});
}

std::vector<std::vector<float>> Run(const std::vector<uint8_t>& bytes, const AttentionInputs& in, bool mask) {
  const int64_t qd[] = {1, kAttentionHeads, kQueries, kHead}, kd[] = {1, kAttentionHeads, kKeys, kHead}, md[] = {1, 1, kQueries, kKeys};
  std::vector<TensorView> views = {TensorView::Host(in.q.data(), DType::kFloat32, qd, 4),
                                   TensorView::Host(in.k.data(), DType::kFloat32, kd, 4),
                                   TensorView::Host(in.v.data(), DType::kFloat32, kd, 4)};
  if (mask) views.push_back(TensorView::Host(in.m.data(), DType::kFloat32, md, 4));
  ContextOptions options;
  options.device = Device::kCpu;
  return RunFloat(bytes, views, options);
}

// The fused artifact against the written-out graph, op by op (--no-fuse). Where a query row's
// every key is masked (-inf), both give NaN without PyTorch's Where(IsNaN(P), 0, P) (the
// Attention node's masked_rows_nan) and zeros with it.
void CheckAgainstUnfused(const onnx::ModelProto& m, const CompiledWithLog& c, bool mask) {
  const AttentionInputs in;
  const auto want = Run(CompileModel(m, OptionsFor(Device::kCpu, false)), in, mask);
  const auto got = Run(c.bytes, in, mask);
  REQUIRE(got.size() == 1);
  REQUIRE(got[0].size() == want[0].size());
  int nan_rows = 0;
  for (size_t i = 0; i < got[0].size(); ++i) {
    INFO("element " << i);
    if (std::isnan(want[0][i])) {
      ++nan_rows;
      CHECK(std::isnan(got[0][i]));
    } else {
      CHECK(got[0][i] == doctest::Approx(want[0][i]).epsilon(1e-5).scale(1.0));
    }
  }
  CHECK(nan_rows <= kAttentionHeads * kHead);  // row 1 of each head at most
}

// The fused artifact against the written-out graph, op by op (--no-fuse), on `in`: every element
// within 1e-5.
void CheckViewsAgainstUnfused(const onnx::ModelProto& m, const CompiledWithLog& c, const std::vector<TensorView>& in) {
  ContextOptions options;
  options.device = Device::kCpu;
  const auto want = RunFloat(CompileModel(m, OptionsFor(Device::kCpu, false)), in, options);
  const auto got = RunFloat(c.bytes, in, options);
  REQUIRE(got.size() == 1);
  REQUIRE(got[0].size() == want[0].size());
  for (size_t i = 0; i < got[0].size(); ++i) {
    INFO("element " << i);
    CHECK(got[0][i] == doctest::Approx(want[0][i]).epsilon(1e-5).scale(1.0));
  }
}

// TorchScript's BERT: MatMul(Q, Transpose(K)), Div by sqrt(d), Add of the extended mask,
// Softmax, PyTorch's Where(IsNaN(P), 0, P), MatMul with V.
onnx::ModelProto TorchScriptBert() {
  auto m = MakeModel(18);
  auto* g = m.mutable_graph();
  AddQkv(g, true);
  AttrInts(AddNode(g, "Transpose", {"k"}, {"kt"}, "kt"), "perm", {0, 1, 3, 2});
  AddNode(g, "MatMul", {"q", "kt"}, {"s"}, "qk");
  AddFloatInit(g, "sqrt_d", {}, {std::sqrt(static_cast<float>(kHead))});
  AddNode(g, "Div", {"s", "sqrt_d"}, {"s1"}, "scale");
  AddNode(g, "Add", {"s1", "m"}, {"s2"}, "mask");
  AttrInt(AddNode(g, "Softmax", {"s2"}, {"p"}, "softmax"), "axis", -1);
  AddNode(g, "IsNaN", {"p"}, {"nan"}, "isnan");
  AddFloatInit(g, "zero", {}, {0.0f});
  AddNode(g, "Where", {"nan", "zero", "p"}, {"p1"}, "zero_nan");
  AddNode(g, "MatMul", {"p1", "v"}, {"y"}, "pv");
  AddOutput(g, "y");
  return m;
}

}  // namespace

TEST_CASE("attention: TorchScript's BERT chain with a padding mask and the NaN guard becomes one Attention") {
  const onnx::ModelProto m = TorchScriptBert();
  const CompiledWithLog c = CompileWithLog(m);
  INFO(c.fusion_trace);
  CHECK(c.Logged("attention: 1 scaled dot-product attentions -> Attention"));
  // K is k itself (the Transpose undone), the scale 1/sqrt(6), the mask m.
  CHECK(c.fusion_trace.find("y = Attention(q, k, v, m, scale=0.408248") != std::string::npos);
  CHECK(c.fusion_trace.find("Softmax") == std::string::npos);
  CHECK(c.fusion_trace.find("masked_rows_nan") == std::string::npos);  // the guard's zeros, ONNX's rule
  CheckAgainstUnfused(m, c, true);
}

TEST_CASE("attention: dynamo's scale on Q and K apart, and K^T through Reshape, Transpose, Reshape") {
  auto m = MakeModel(18);
  auto* g = m.mutable_graph();
  AddQkv(g, false);
  const float quarter = std::pow(static_cast<float>(kHead), -0.25f);
  AddFloatInit(g, "c", {}, {quarter});
  AddNode(g, "Mul", {"q", "c"}, {"qs"}, "q_scale");
  AddInt64Init(g, "flat", {3}, {kAttentionHeads, kKeys, kHead});
  AddNode(g, "Reshape", {"k", "flat"}, {"k3"}, "k3");
  AttrInts(AddNode(g, "Transpose", {"k3"}, {"k3t"}, "k3t"), "perm", {0, 2, 1});
  AddInt64Init(g, "back", {4}, {1, kAttentionHeads, kHead, kKeys});
  AddNode(g, "Reshape", {"k3t", "back"}, {"kt"}, "kt");
  AddNode(g, "Mul", {"kt", "c"}, {"kts"}, "k_scale");
  AddNode(g, "MatMul", {"qs", "kts"}, {"s"}, "qk");
  AttrInt(AddNode(g, "Softmax", {"s"}, {"p"}, "softmax"), "axis", -1);
  AddNode(g, "MatMul", {"p", "v"}, {"y"}, "pv");
  AddOutput(g, "y");
  const CompiledWithLog c = CompileWithLog(m);
  INFO(c.fusion_trace);
  CHECK(c.fusion_trace.find("y = Attention(q, k, v, scale=0.408248") != std::string::npos);
  CheckAgainstUnfused(m, c, false);
}

TEST_CASE("attention: GPT-2's causal Where, alone and with an additive mask") {
  for (const bool additive : {false, true}) {
    INFO("additive mask: " << additive);
    auto m = MakeModel(18);
    auto* g = m.mutable_graph();
    AddQkv(g, additive);
    std::vector<float> lower(kQueries * kKeys);
    for (int64_t i = 0; i < kQueries; ++i)
      for (int64_t j = 0; j < kKeys; ++j) lower[i * kKeys + j] = j <= i + (kKeys - kQueries) ? 1.0f : 0.0f;
    AddFloatInit(g, "lower", {1, 1, kQueries, kKeys}, lower);
    AttrInt(AddNode(g, "Cast", {"lower"}, {"causal"}, "causal"), "to", onnx::TensorProto::BOOL);
    AttrInts(AddNode(g, "Transpose", {"k"}, {"kt"}, "kt"), "perm", {0, 1, 3, 2});
    AddNode(g, "MatMul", {"q", "kt"}, {"s"}, "qk");
    AddFloatInit(g, "scale", {}, {0.5f});
    AddNode(g, "Mul", {"s", "scale"}, {"s1"}, "scale");
    AddFloatInit(g, "min", {}, {std::numeric_limits<float>::lowest()});
    AddNode(g, "Where", {"causal", "s1", "min"}, {"s2"}, "causal_mask");
    std::string x = "s2";
    if (additive) {
      AddNode(g, "Add", {"s2", "m"}, {"s3"}, "mask");
      x = "s3";
    }
    AttrInt(AddNode(g, "Softmax", {x}, {"p"}, "softmax"), "axis", -1);
    AddNode(g, "MatMul", {"p", "v"}, {"y"}, "pv");
    AddOutput(g, "y");
    const CompiledWithLog c = CompileWithLog(m);
    INFO(c.fusion_trace);
    CHECK(c.Logged("attention: 1 scaled dot-product attentions -> Attention"));
    if (additive) {  // one mask: Where(causal, m, -inf), a fused region of its own
      CHECK(c.fusion_trace.find("<- Where 'qk/mask'") != std::string::npos);
      CHECK(c.fusion_trace.find("y = Attention(q, k, v, qk/mask, scale=0.5, masked_rows_nan=1)") != std::string::npos);
    } else {
      CHECK(c.fusion_trace.find("y = Attention(q, k, v, causal, scale=0.5, masked_rows_nan=1)") != std::string::npos);
    }
    CheckAgainstUnfused(m, c, additive);
  }
}

TEST_CASE("attention: Swin's shifted windows: a relative-position bias, then a window mask through Reshapes") {
  // S [windows 4, heads 2, N 5, N 5] + bias [2, 5, 5]; Reshape to [1, 4, 2, 5, 5], + mask
  // [1, 4, 1, 5, 5] (0 or -100, per window); Reshape back, Softmax, MatMul with V.
  const int64_t w = 4, h = 2, n = 5, d = 6;
  auto m = MakeModel(18);
  auto* g = m.mutable_graph();
  for (const char* name : {"q", "k", "v"}) AddInput(g, name, {"4", "2", "5", "6"});
  AttrInts(AddNode(g, "Transpose", {"k"}, {"kt"}, "kt"), "perm", {0, 1, 3, 2});
  AddNode(g, "MatMul", {"q", "kt"}, {"s"}, "qk");
  AddFloatInit(g, "bias", {h, n, n}, kiln::testing::RandomFloats(h * n * n, 7));
  AddNode(g, "Add", {"s", "bias"}, {"s1"}, "rel_bias");
  AddInt64Init(g, "five", {5}, {1, w, h, n, n});
  AddNode(g, "Reshape", {"s1", "five"}, {"s5"}, "split");
  std::vector<float> mask(w * n * n);
  for (size_t i = 0; i < mask.size(); ++i) mask[i] = (i * 7 + i / 5) % 3 == 0 && i % 6 != 0 ? -100.0f : 0.0f;
  AddFloatInit(g, "window_mask", {1, w, 1, n, n}, mask);
  AddNode(g, "Add", {"s5", "window_mask"}, {"s6"}, "mask");
  AddInt64Init(g, "four", {4}, {w, h, n, n});
  AddNode(g, "Reshape", {"s6", "four"}, {"s7"}, "merge");
  AttrInt(AddNode(g, "Softmax", {"s7"}, {"p"}, "softmax"), "axis", -1);
  AddNode(g, "MatMul", {"p", "v"}, {"y"}, "pv");
  AddOutput(g, "y");
  const CompiledWithLog c = CompileWithLog(m);
  INFO(c.fusion_trace);
  CHECK(c.Logged("attention: 1 scaled dot-product attentions -> Attention"));
  // One constant mask: the bias and the window mask summed, [4, 2, 5, 5].
  CHECK(c.fusion_trace.find("y = Attention(q, k, v, qk/mask_sum, scale=1, masked_rows_nan=1)") != std::string::npos);
  const std::vector<float> qv = kiln::testing::RandomFloats(w * h * n * d, 21), kv = kiln::testing::RandomFloats(w * h * n * d, 22),
                           vv = kiln::testing::RandomFloats(w * h * n * d, 23);
  const int64_t dims[] = {w, h, n, d};
  const std::vector<TensorView> in = {TensorView::Host(qv.data(), DType::kFloat32, dims, 4),
                                      TensorView::Host(kv.data(), DType::kFloat32, dims, 4),
                                      TensorView::Host(vv.data(), DType::kFloat32, dims, 4)};
  CheckViewsAgainstUnfused(m, c, in);
}

// timm's attention (ViT, Swin): qkv [B, S, 3 * H * D] -> Reshape [B, S, 3, H, D] ->
// Transpose(2, 0, 3, 1, 4) -> Q, K and V taken apart by `split` ("Split": Split then Squeeze,
// TorchScript; "Slice": Slice then Squeeze each, dynamo's unbind; "Gather") -> Q scaled,
// K transposed -> Softmax -> P V -> Transpose(0, 2, 1, 3) -> Reshape [B, S, H * D].
onnx::ModelProto TimmAttention(const std::string& split) {
  const int64_t b = 2, s = 5, h = 2, d = 6;
  auto m = MakeModel(18);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {std::to_string(b), std::to_string(s), std::to_string(3 * h * d)});
  AddInt64Init(g, "five", {5}, {b, s, 3, h, d});
  AddNode(g, "Reshape", {"x", "five"}, {"x5"}, "reshape");
  AttrInts(AddNode(g, "Transpose", {"x5"}, {"t"}, "permute"), "perm", {2, 0, 3, 1, 4});
  AddInt64Init(g, "axis0", {1}, {0});
  const char* parts[] = {"q", "k", "v"};
  if (split == "Split") {
    AddInt64Init(g, "ones", {3}, {1, 1, 1});
    AttrInt(AddNode(g, "Split", {"t", "ones"}, {"q1", "k1", "v1"}, "split"), "axis", 0);
  }
  for (int64_t p = 0; p < 3; ++p) {
    const std::string name = parts[p], one = name + "1";
    if (split == "Gather") {
      AddInt64Init(g, "i" + name, {}, {p});
      AttrInt(AddNode(g, "Gather", {"t", "i" + name}, {name}, "gather_" + name), "axis", 0);
      continue;
    }
    if (split == "Slice") {
      AddInt64Init(g, "start_" + name, {1}, {p});
      AddInt64Init(g, "end_" + name, {1}, {p + 1});
      AddNode(g, "Slice", {"t", "start_" + name, "end_" + name, "axis0"}, {one}, "slice_" + name);
    }
    AddNode(g, "Squeeze", {one, "axis0"}, {name}, "squeeze_" + name);
  }
  AddFloatInit(g, "scale", {}, {0.5f});
  AddNode(g, "Mul", {"q", "scale"}, {"qs"}, "q_scale");
  AttrInts(AddNode(g, "Transpose", {"k"}, {"kt"}, "kt"), "perm", {0, 1, 3, 2});
  AddNode(g, "MatMul", {"qs", "kt"}, {"s"}, "qk");
  AttrInt(AddNode(g, "Softmax", {"s"}, {"p"}, "softmax"), "axis", -1);
  AddNode(g, "MatMul", {"p", "v"}, {"y4"}, "pv");
  AttrInts(AddNode(g, "Transpose", {"y4"}, {"yt"}, "yt"), "perm", {0, 2, 1, 3});
  AddInt64Init(g, "three", {3}, {b, s, h * d});
  AddNode(g, "Reshape", {"yt", "three"}, {"y"}, "merge");
  AddOutput(g, "y");
  return m;
}

TEST_CASE("attention: timm's packed qkv (Split, Slice or Gather) becomes one Attention reading it in place") {
  for (const char* split : {"Split", "Slice", "Gather"}) {
    INFO(split);
    const onnx::ModelProto m = TimmAttention(split);
    const CompiledWithLog c = CompileWithLog(m);
    INFO(c.fusion_trace);
    CHECK(c.Logged("attention: 1 scaled dot-product attentions -> Attention"));
    // Q, K and V are x's thirds: no Reshape, Transpose, Split, Slice, Gather or Squeeze is left.
    CHECK(c.fusion_trace.find("y = Attention(x, x, x, scale=0.5, masked_rows_nan=1, q_num_heads=2, kv_num_heads=2, "
                              "packed_qkv=1)") != std::string::npos);
    for (const char* gone : {"Transpose", "Reshape", "Split", "Slice", "Gather", "Squeeze", "kiln.Fused"})
      CHECK(c.fusion_trace.find(gone) == std::string::npos);
    const std::vector<float> xv = kiln::testing::RandomFloats(2 * 5 * 36, 31);
    const int64_t dims[] = {2, 5, 36};
    CheckViewsAgainstUnfused(m, c, {TensorView::Host(xv.data(), DType::kFloat32, dims, 3)});
  }
}

TEST_CASE("attention: a mask added before the scale, or a Softmax over another axis, stays op by op and says why") {
  for (const bool axis2 : {false, true}) {
    auto m = MakeModel(18);
    auto* g = m.mutable_graph();
    AddQkv(g, true);
    AttrInts(AddNode(g, "Transpose", {"k"}, {"kt"}, "kt"), "perm", {0, 1, 3, 2});
    AddNode(g, "MatMul", {"q", "kt"}, {"s"}, "qk");
    AddNode(g, "Add", {"s", "m"}, {"s1"}, "mask");
    AddFloatInit(g, "scale", {}, {0.5f});
    AddNode(g, "Mul", {"s1", "scale"}, {"s2"}, "scale");
    AttrInt(AddNode(g, "Softmax", {"s2"}, {"p"}, "softmax"), "axis", axis2 ? 2 : -1);
    AddNode(g, "MatMul", {"p", "v"}, {"y"}, "pv");
    AddOutput(g, "y");
    const CompiledWithLog c = CompileWithLog(m);
    INFO(c.fusion_trace);
    CHECK(c.fusion_trace.find("Attention(") == std::string::npos);
    CHECK(c.Logged(axis2 ? "attention not fused: Softmax 'softmax': its axis is 2, not the last"
                          : "attention not fused: Softmax 'softmax': Add 'mask' masks the scores before they are "
                            "scaled"));
  }
}

TEST_CASE("attention: a KV cache's Concats become the Attention node's past and present, computed as written out") {
  const onnx::ModelProto m = KvCacheAttention();
  const CompiledWithLog c = CompileWithLog(m);
  INFO(c.fusion_trace);
  CHECK(c.Logged("attention: 1 with their KV cache's Concats (present = Concat(past, new)) -> Attention's past_key, "
                 "past_value, present_key and present_value"));
  CHECK(c.fusion_trace.find("y, present_key, present_value = Attention(q, k, v, _, past_key, past_value") !=
        std::string::npos);
  CHECK(c.fusion_trace.find("Concat(past_key") == std::string::npos);
  // Every output against the written-out graph, past 5 rows and 2 new ones.
  constexpr int64_t past = 5, seq = 2;
  const std::vector<float> q = RandomFloats(kKvHeads * seq * kKvHead, 11), k = RandomFloats(kKvHeads * seq * kKvHead, 12),
                           v = RandomFloats(kKvHeads * seq * kKvHead, 13),
                           pk = RandomFloats(kKvHeads * past * kKvHead, 14), pv = RandomFloats(kKvHeads * past * kKvHead, 15);
  const int64_t new_dims[] = {1, kKvHeads, seq, kKvHead}, past_dims[] = {1, kKvHeads, past, kKvHead};
  const std::vector<TensorView> in = {TensorView::Host(q.data(), DType::kFloat32, new_dims, 4),
                                      TensorView::Host(k.data(), DType::kFloat32, new_dims, 4),
                                      TensorView::Host(v.data(), DType::kFloat32, new_dims, 4),
                                      TensorView::Host(pk.data(), DType::kFloat32, past_dims, 4),
                                      TensorView::Host(pv.data(), DType::kFloat32, past_dims, 4)};
  ContextOptions options;
  options.device = Device::kCpu;
  const auto want = RunFloat(CompileModel(m, OptionsFor(Device::kCpu, false)), in, options);
  const auto got = RunFloat(c.bytes, in, options);
  REQUIRE(got.size() == 3);
  for (size_t o = 0; o < 3; ++o) {
    REQUIRE(got[o].size() == want[o].size());
    for (size_t i = 0; i < got[o].size(); ++i) {
      INFO("output " << o << " element " << i);
      if (o == 0) CHECK(got[o][i] == doctest::Approx(want[o][i]).epsilon(1e-5).scale(1.0));
      else CHECK(got[o][i] == want[o][i]);  // the present is a copy of its rows
    }
  }
}

TEST_CASE("attention: where the backend refuses the KV cache form, its Concats stay and the attention reads them") {
  auto canonical = Canonical(KvCacheAttention());
  REQUIRE(canonical.ok());
  std::vector<std::string> log;
  // A backend whose attention takes no past (cuDNN's, runtime/cuda/sdpa.h).
  const passes::AttentionFilter keep = [](const ir::Trace&, const ir::Node& n) {
    return n.inputs.size() > 4 ? std::string("a past key/value cache") : std::string();
  };
  auto fused = passes::FuseAttention(canonical->trace, &log, keep);
  REQUIRE(fused.ok());
  const std::vector<std::string> ops = Ops(*fused);
  CHECK(std::count(ops.begin(), ops.end(), "Concat") == 2);
  CHECK(std::count(ops.begin(), ops.end(), "Attention") == 1);
  for (const ir::Node& n : fused->body.nodes)
    if (n.op == "Attention") CHECK(n.inputs.size() == 3);  // Q, and K and V the Concats' outputs
  CHECK(std::find(log.begin(), log.end(), "attention: 1 scaled dot-product attentions -> Attention") != log.end());
  for (const std::string& line : log) CHECK(line.find("KV cache") == std::string::npos);
}

}  // namespace kiln::testing
