// Meta functions of Attention, RotaryEmbedding, RMSNormalization and LinearAttention: output
// shapes (static and symbolic) and the messages for invalid or unsupported attributes.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "compiler/ir/trace.h"
#include "compiler/ops/registry.h"

namespace kiln::ir {
namespace {

struct TransformerGraph {
  Trace t;
  Node node;

  ValueId In(DType dt, SymShape shape) {
    Value v;
    v.name = "in" + std::to_string(t.values.size());
    v.dtype = dt;
    v.shape = std::move(shape);
    return t.AddValue(std::move(v));
  }
  // Runs the meta function of `op`; `used` says which outputs the model reads.
  Status Run(const std::string& op, std::vector<ValueId> inputs, AttrMap attrs, std::vector<bool> used = {true}) {
    node = Node();
    node.op = op;
    node.name = "n";
    node.inputs = std::move(inputs);
    node.attrs = std::move(attrs);
    for (bool u : used) {
      Value v;
      v.name = "out";
      node.outputs.push_back(u ? t.AddValue(std::move(v)) : kNoValue);
    }
    return InferNode(t, node);
  }
  std::string Shape(int i) const { return ShapeToString(t.value(node.outputs[i]).shape); }
};

AttrMap Ints(std::initializer_list<std::pair<const char*, int64_t>> kv) {
  AttrMap a;
  for (const auto& [k, v] : kv) a.SetInt(k, v);
  return a;
}

const Sym B = Sym::Var("B");
const Sym S = Sym::Var("S");
const Sym P = Sym::Var("P");

TEST_CASE("Attention meta: 4-D with a past cache, all four outputs, symbolic sizes") {
  TransformerGraph g;
  const DType f = DType::kFloat32;
  ValueId q = g.In(f, {B, 8, S, 16}), k = g.In(f, {B, 2, S, 16}), v = g.In(f, {B, 2, S, 32});
  ValueId pk = g.In(f, {B, 2, P, 16}), pv = g.In(f, {B, 2, P, 32}), mask = g.In(DType::kBool, {S, P + S});
  REQUIRE(g.Run("Attention", {q, k, v, mask, pk, pv}, {}, {true, true, true, true}).ok());
  CHECK(g.Shape(0) == "[B, 8, S, 32]");
  CHECK(g.Shape(1) == "[B, 2, (P+S), 16]");
  CHECK(g.Shape(2) == "[B, 2, (P+S), 32]");
  CHECK(g.Shape(3) == "[B, 8, S, (P+S)]");
}

TEST_CASE("Attention meta: 3-D inputs take their head counts from the attributes") {
  TransformerGraph g;
  const DType h = DType::kFloat16;
  ValueId q = g.In(h, {2, 4, 72}), k = g.In(h, {2, 6, 24}), v = g.In(h, {2, 6, 30});
  REQUIRE(g.Run("Attention", {q, k, v}, Ints({{"q_num_heads", 9}, {"kv_num_heads", 3}})).ok());
  CHECK(g.Shape(0) == "[2, 4, 90]");
  CHECK(g.t.value(g.node.outputs[0]).dtype == h);

  Status s = g.Run("Attention", {q, k, v}, Ints({{"kv_num_heads", 3}}));
  CHECK(s.message() == "node 'n' (Attention): attribute 'q_num_heads' is required for 3-D inputs");
  s = g.Run("Attention", {q, k, v}, Ints({{"q_num_heads", 5}, {"kv_num_heads", 3}}));
  CHECK(s.message() == "node 'n' (Attention): input Q dim 2 (hidden size) 72: expected a multiple of 5 (the number of heads)");
  ValueId q32 = g.In(h, {2, 4, 32});  // 4 heads of 8, against 3 kv heads of 8
  s = g.Run("Attention", {q32, k, v}, Ints({{"q_num_heads", 4}, {"kv_num_heads", 3}}));
  CHECK(s.message() == "node 'n' (Attention): q heads 4: expected a multiple of the kv heads 3");
}

TEST_CASE("Attention meta: packed_qkv, each input [B, S, 3 * H * D] holding Q, K and V in thirds") {
  TransformerGraph g;
  const DType f = DType::kFloat32;
  ValueId x = g.In(f, {2, 5, 3 * 4 * 8});  // 4 heads of 8
  REQUIRE(g.Run("Attention", {x, x, x}, Ints({{"q_num_heads", 4}, {"kv_num_heads", 4}, {"packed_qkv", 1}})).ok());
  CHECK(g.Shape(0) == "[2, 5, 32]");
  Status s = g.Run("Attention", {x, x, x}, Ints({{"q_num_heads", 4}, {"kv_num_heads", 2}, {"packed_qkv", 1}}));
  CHECK(s.message() == "node 'n' (Attention): attribute 'packed_qkv': expected q_num_heads (4) equal to kv_num_heads (2)");
  s = g.Run("Attention", {x, x, x}, Ints({{"q_num_heads", 4}, {"kv_num_heads", 4}, {"packed_qkv", 2}}));
  CHECK(s.message() == "node 'n' (Attention): attribute 'packed_qkv': expected 0 or 1, found 2");
  ValueId q4 = g.In(f, {1, 2, 4, 24});
  s = g.Run("Attention", {q4, q4, q4}, Ints({{"packed_qkv", 1}}));
  CHECK(s.message() == "node 'n' (Attention): attribute 'packed_qkv': expected 3-D inputs");
  ValueId odd = g.In(f, {2, 5, 40});  // 40 is not 3 parts of 4 heads
  s = g.Run("Attention", {odd, odd, odd}, Ints({{"q_num_heads", 4}, {"kv_num_heads", 4}, {"packed_qkv", 1}}));
  CHECK(s.message() == "node 'n' (Attention): input Q dim 2 (hidden size) 40: expected a multiple of 12 (3 times the number of heads, packed_qkv)");
}

TEST_CASE("Attention meta: invalid and unsupported attributes and inputs") {
  TransformerGraph g;
  const DType f = DType::kFloat32;
  ValueId q = g.In(f, {1, 2, 4, 8}), k = g.In(f, {1, 2, 6, 8}), v = g.In(f, {1, 2, 6, 8});
  Status s = g.Run("Attention", {q, k, v}, Ints({{"qk_matmul_output_mode", 4}}));
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK(s.message() == "node 'n' (Attention): attribute 'qk_matmul_output_mode': expected 0, 1, 2 or 3, found 4");
  s = g.Run("Attention", {q, k, v}, Ints({{"softmax_precision", 11}}));
  CHECK(s.code() == StatusCode::kUnimplemented);
  CHECK(s.message() == "node 'n' (Attention): softmax_precision 11 (double): the softmax runs in float32");
  AttrMap cap;
  cap.SetFloat("softcap", -1.0f);
  s = g.Run("Attention", {q, k, v}, cap);
  CHECK(s.message().find("node 'n' (Attention): attribute 'softcap': expected a finite number >= 0") == 0);
  ValueId long_mask = g.In(f, {4, 7});
  s = g.Run("Attention", {q, k, v, long_mask}, {});
  CHECK(s.message() == "node 'n' (Attention): input attn_mask last dim 7: expected at most the total sequence 6");
  ValueId int_mask = g.In(DType::kInt32, {4, 6});
  s = g.Run("Attention", {q, k, v, int_mask}, {});
  CHECK(s.message() == "node 'n' (Attention): input attn_mask: expected dtype bool or float32 (Q's), found int32");
  ValueId pk = g.In(f, {1, 2, 3, 8}), pv = g.In(f, {1, 2, 3, 8}), nonpad = g.In(DType::kInt64, {1});
  s = g.Run("Attention", {q, k, v, kNoValue, pk}, {});
  CHECK(s.message() == "node 'n' (Attention): inputs past_key and past_value: expected both or neither");
  s = g.Run("Attention", {q, k, v, kNoValue, pk, pv, nonpad}, {});
  CHECK(s.message() ==
        "node 'n' (Attention): input nonpad_kv_seqlen: expected no past_key/past_value with it (an external cache)");
  ValueId qd = g.In(DType::kFloat64, {1, 2, 4, 8});
  s = g.Run("Attention", {qd, qd, qd}, {});
  CHECK(s.code() == StatusCode::kUnimplemented);
  CHECK(s.message() == "node 'n' (Attention): input Q: dtype float64 is not supported (float32, float16, bfloat16)");
}

TEST_CASE("LinearAttention meta: both outputs' shapes and dtypes, grouped heads, symbolic sizes") {
  TransformerGraph g;
  const DType h = DType::kFloat16, f = DType::kFloat32;
  // 8 query heads of 8 on 4 kv heads, dk = 8, dv = 12; a float32 state with float16 activations.
  ValueId q = g.In(h, {B, S, 64}), k = g.In(h, {B, S, 32}), v = g.In(h, {B, S, 48}), past = g.In(f, {B, 4, 8, 12});
  ValueId decay = g.In(h, {B, S, 4}), beta = g.In(h, {B, S, 1});
  const AttrMap heads = Ints({{"q_num_heads", 8}, {"kv_num_heads", 4}});
  REQUIRE(g.Run("LinearAttention", {q, k, v, past, decay, beta}, heads, {true, true}).ok());
  CHECK(g.Shape(0) == "[B, S, 96]");
  CHECK(g.Shape(1) == "[B, 4, 8, 12]");
  CHECK(g.t.value(g.node.outputs[0]).dtype == h);
  CHECK(g.t.value(g.node.outputs[1]).dtype == f);
  // Without past_state the state takes query's dtype; decay per key dim.
  AttrMap gated = heads;
  gated.SetString("update_rule", "gated");
  ValueId per_dim = g.In(h, {B, S, 32});
  REQUIRE(g.Run("LinearAttention", {q, k, v, kNoValue, per_dim}, gated, {true, true}).ok());
  CHECK(g.Shape(1) == "[B, 4, 8, 12]");
  CHECK(g.t.value(g.node.outputs[1]).dtype == h);
}

TEST_CASE("LinearAttention meta: shape and attribute errors name what was expected") {
  TransformerGraph g;
  const DType f = DType::kFloat32;
  ValueId q = g.In(f, {2, 3, 30}), k = g.In(f, {2, 3, 8}), v = g.In(f, {2, 3, 8}), beta = g.In(f, {2, 3, 2});
  AttrMap a = Ints({{"q_num_heads", 4}, {"kv_num_heads", 2}});
  a.SetString("update_rule", "delta");
  Status s = g.Run("LinearAttention", {q, k, v, kNoValue, kNoValue, beta}, a, {true, true});
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK(s.message() ==
        "node 'n' (LinearAttention): input query dim 2 (hidden size) 30: expected a multiple of 4 (q_num_heads)");
  ValueId q16 = g.In(f, {2, 3, 16});  // dk = 4 against the key's 8 / 2 = 4: fits
  REQUIRE(g.Run("LinearAttention", {q16, k, v, kNoValue, kNoValue, beta}, a, {true, true}).ok());
  ValueId q24 = g.In(f, {2, 3, 24});  // dk = 6
  s = g.Run("LinearAttention", {q24, k, v, kNoValue, kNoValue, beta}, a, {true, true});
  CHECK(s.message() == "node 'n' (LinearAttention): key's head size against query's: expected 6, found 4");
  s = g.Run("LinearAttention", {q16, k, v}, a, {true, true});
  CHECK(s.message() == "node 'n' (LinearAttention): input beta: update_rule 'delta' requires it");
  ValueId beta3 = g.In(f, {2, 3, 3});
  s = g.Run("LinearAttention", {q16, k, v, kNoValue, kNoValue, beta3}, a, {true, true});
  CHECK(s.message() == "node 'n' (LinearAttention): input beta dim 2 (kv_num_heads, or 1): expected 2, found 3");
  ValueId past = g.In(f, {2, 2, 4, 3});
  s = g.Run("LinearAttention", {q16, k, v, past, kNoValue, beta}, a, {true, true});
  CHECK(s.message() == "node 'n' (LinearAttention): input past_state dim 3: expected 4, found 3");
  AttrMap three = Ints({{"q_num_heads", 3}, {"kv_num_heads", 2}});
  three.SetString("update_rule", "linear");
  s = g.Run("LinearAttention", {q16, k, v}, three, {true, true});
  CHECK(s.message() == "node 'n' (LinearAttention): attribute 'q_num_heads' 3: expected a multiple of kv_num_heads 2");
  AttrMap bad = a;
  bad.SetString("update_rule", "slow");
  s = g.Run("LinearAttention", {q16, k, v}, bad, {true, true});
  CHECK(s.message() == "node 'n' (LinearAttention): attribute 'update_rule': expected 'linear', 'gated', 'delta' or "
                       "'gated_delta', found 'slow'");
}

TEST_CASE("RotaryEmbedding meta") {
  TransformerGraph g;
  const DType f = DType::kFloat32;
  ValueId x4 = g.In(f, {B, 4, S, 8}), cos = g.In(f, {50, 2}), sin = g.In(f, {50, 2}), pos = g.In(DType::kInt64, {B, S});
  REQUIRE(g.Run("RotaryEmbedding", {x4, cos, sin, pos}, Ints({{"rotary_embedding_dim", 4}})).ok());
  CHECK(g.Shape(0) == "[B, 4, S, 8]");
  Status s = g.Run("RotaryEmbedding", {x4, cos, sin, pos}, {});
  CHECK(s.message() == "node 'n' (RotaryEmbedding): input in1 last dim (rotary dim / 2): expected 4, found 2");
  s = g.Run("RotaryEmbedding", {x4, cos, sin, pos}, Ints({{"rotary_embedding_dim", 3}}));
  CHECK(s.message() == "node 'n' (RotaryEmbedding): attribute 'rotary_embedding_dim': expected 0 (the head size) or "
                       "a positive even number, found 3");
  s = g.Run("RotaryEmbedding", {x4, cos, sin, pos}, Ints({{"rotary_embedding_dim", 10}}));
  CHECK(s.message() == "node 'n' (RotaryEmbedding): attribute 'rotary_embedding_dim' 10: expected at most the head size 8");
  ValueId x3 = g.In(f, {2, 3, 32});
  s = g.Run("RotaryEmbedding", {x3, cos, sin}, {});
  CHECK(s.message() == "node 'n' (RotaryEmbedding): attribute 'num_heads' is required for a 3-D input");
  ValueId c3 = g.In(f, {2, 3, 4}), s3 = g.In(f, {2, 3, 4});
  REQUIRE(g.Run("RotaryEmbedding", {x3, c3, s3}, Ints({{"num_heads", 4}})).ok());
  CHECK(g.Shape(0) == "[2, 3, 32]");
}

TEST_CASE("RMSNormalization meta") {
  TransformerGraph g;
  const DType f = DType::kFloat32;
  ValueId x = g.In(f, {B, S, 64}), scale = g.In(f, {64});
  REQUIRE(g.Run("RMSNormalization", {x, scale}, {}).ok());
  CHECK(g.Shape(0) == "[B, S, 64]");
  ValueId wide = g.In(f, {S, 32});
  Status s = g.Run("RMSNormalization", {x, wide}, Ints({{"axis", 1}}));
  CHECK(s.message() == "node 'n' (RMSNormalization): input scale [S, 32] against the normalised shape [S, 64]: "
                       "expected 64, found 32");
  s = g.Run("RMSNormalization", {x, scale}, Ints({{"stash_type", 11}}));
  CHECK(s.code() == StatusCode::kUnimplemented);
  CHECK(s.message() == "node 'n' (RMSNormalization): stash_type 11: only 1 (float32) is supported");
  s = g.Run("RMSNormalization", {x, scale}, Ints({{"axis", 3}}));
  CHECK(s.message() == "node 'n' (RMSNormalization): axis: expected a value in [-3, 2], found 3");
  ValueId half_scale = g.In(DType::kFloat16, {64});
  s = g.Run("RMSNormalization", {x, half_scale}, {});
  CHECK(s.code() == StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace kiln::ir
