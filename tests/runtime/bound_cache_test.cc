// ExecutionContext::BindCache (kiln/runtime.h, runtime/bound_cache.h): a KV cache appended in place
// in the caller's buffers, step after step, against the written-out graph (compiled with
// --no-fuse: Concat, MatMul and Softmax op by op) fed the cache the usual way; and its errors.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "kiln/runtime.h"
#include "tests/compiler/compile_util.h"
#include "tests/kv_cache_model.h"
#include "tests/random_floats.h"
#include "tests/runtime/count_allocations.h"

namespace kiln::testing {
namespace {

constexpr float kUntouched = 777.0f;  // what the bound buffers hold past the rows in use
constexpr int64_t kCapacity = 9;      // rows per head of the bound buffers

// A CPU context on the artifact `bytes` (it keeps the Model alive).
ExecutionContext CacheContext(const std::vector<uint8_t>& bytes) {
  auto model = Model::Load(bytes);
  REQUIRE(model.ok());
  ContextOptions options;
  options.device = Device::kCpu;
  auto ctx = ExecutionContext::Create(*model, options);
  REQUIRE(ctx.ok());
  return std::move(*ctx);
}

// The bindings of the model's two caches: past_key -> present_key, past_value -> present_value.
std::vector<ExecutionContext::CacheBinding> BothCaches(int64_t capacity = kCapacity) {
  return {{3, 1, capacity}, {4, 2, capacity}};
}

// One step's new rows: q, k and v [1, kKvHeads, seq, kKvHead].
struct Step {
  int64_t seq;
  std::vector<float> q, k, v;
  Step(int64_t s, uint32_t seed)
      : seq(s),
        q(RandomFloats(kKvHeads * s * kKvHead, seed)),
        k(RandomFloats(kKvHeads * s * kKvHead, seed + 1)),
        v(RandomFloats(kKvHeads * s * kKvHead, seed + 2)) {}
};

// Views of a step in the bound layout: the past's and the present's views point at `key` and
// `value`; y into `y`.
struct BoundViews {
  int64_t new_dims[4], past_dims[4], total_dims[4];
  std::vector<TensorView> in, out;
  BoundViews(const Step& s, int64_t past, std::vector<float>& key, std::vector<float>& value, std::vector<float>& y)
      : new_dims{1, kKvHeads, s.seq, kKvHead}, past_dims{1, kKvHeads, past, kKvHead},
        total_dims{1, kKvHeads, past + s.seq, kKvHead} {
    y.assign(static_cast<size_t>(kKvHeads * s.seq * kKvHead), 0.0f);
    in = {TensorView::Host(s.q.data(), DType::kFloat32, new_dims, 4),
          TensorView::Host(s.k.data(), DType::kFloat32, new_dims, 4),
          TensorView::Host(s.v.data(), DType::kFloat32, new_dims, 4),
          TensorView::Host(key.data(), DType::kFloat32, past_dims, 4),
          TensorView::Host(value.data(), DType::kFloat32, past_dims, 4)};
    out = {TensorView::Host(y.data(), DType::kFloat32, new_dims, 4),
           TensorView::Host(key.data(), DType::kFloat32, total_dims, 4),
           TensorView::Host(value.data(), DType::kFloat32, total_dims, 4)};
  }
};

// Checks that `st` failed with `code` and a message holding `text`.
void CheckRefused(const Status& st, StatusCode code, const std::string& text) {
  INFO(st.ToString());
  CHECK(st.code() == code);
  CHECK(std::string(st.message()).find(text) != std::string::npos);
}

}  // namespace

TEST_CASE("BindCache: each step appends its rows in the caller's buffers, and matches the written-out graph") {
  const onnx::ModelProto m = KvCacheAttention();
  ExecutionContext bound = CacheContext(CompileModel(m));
  ExecutionContext reference = CacheContext(CompileModel(m, OptionsFor(Device::kCpu, false)));
  REQUIRE(bound.BindCache(BothCaches()).ok());
  std::vector<float> key(kKvHeads * kCapacity * kKvHead, kUntouched), value = key, y;
  // The reference's present, [1, kKvHeads, total, kKvHead] (one element before the first step: a
  // view of no elements still needs a data pointer).
  std::vector<float> ref_key(1), ref_value(1);
  int64_t past = 0;
  uint32_t seed = 100;
  for (const int64_t seq : {3, 1, 1, 2}) {  // a prompt on an empty cache, then steps
    INFO("past " << past << ", seq " << seq);
    const Step step(seq, seed += 3);
    BoundViews views(step, past, key, value, y);
    const Status st = bound.Run(views.in, views.out);
    REQUIRE_MESSAGE(st.ok(), st.ToString());
    // The same step again, at the shapes the entry has seen: no allocation (the rows it writes
    // are the same).
    bool again = false;
    const long allocations = CountAllocations([&] { again = bound.Run(views.in, views.out).ok(); });
    CHECK(again);
    CHECK(allocations == 0);
    const int64_t past_dims[] = {1, kKvHeads, past, kKvHead};
    const std::vector<TensorView> ref_in = {views.in[0], views.in[1], views.in[2],
                                            TensorView::Host(ref_key.data(), DType::kFloat32, past_dims, 4),
                                            TensorView::Host(ref_value.data(), DType::kFloat32, past_dims, 4)};
    std::vector<TensorView> ref_out;
    REQUIRE(reference.Run(ref_in, ref_out).ok());
    const std::vector<std::vector<float>> want = FloatCopies(ref_out);
    for (size_t i = 0; i < y.size(); ++i) CHECK(y[i] == doctest::Approx(want[0][i]).epsilon(1e-5).scale(1.0));
    const int64_t total = past + seq;
    for (int64_t h = 0; h < kKvHeads; ++h)
      for (int64_t r = 0; r < kCapacity; ++r)
        for (int64_t d = 0; d < kKvHead; ++d) {
          INFO("head " << h << " row " << r << " dim " << d);
          const size_t at = static_cast<size_t>((h * kCapacity + r) * kKvHead + d);
          const size_t want_at = static_cast<size_t>((h * total + r) * kKvHead + d);
          CHECK(key[at] == (r < total ? want[1][want_at] : kUntouched));
          CHECK(value[at] == (r < total ? want[2][want_at] : kUntouched));
        }
    ref_key = want[1], ref_value = want[2];
    past = total;
  }
  // Unbound again: the context hands out its own views, as before.
  REQUIRE(bound.BindCache({}).ok());
  const Step step(1, 200);
  std::vector<float> contiguous_key(ref_key), contiguous_value(ref_value);
  BoundViews views(step, past, contiguous_key, contiguous_value, y);
  std::vector<TensorView> own;
  REQUIRE(bound.Run(views.in, own).ok());
  REQUIRE(own.size() == 3);
  CHECK(own[1].dims[2] == past + 1);
  CHECK(static_cast<const float*>(own[1].data)[0] == ref_key[0]);
}

TEST_CASE("BindCache: bad bindings, views that miss the buffer and a cache too short are refused, writing nothing") {
  const onnx::ModelProto m = KvCacheAttention();
  ExecutionContext ctx = CacheContext(CompileModel(m));
  auto refused = [&](std::vector<ExecutionContext::CacheBinding> b, const std::string& text) {
    CheckRefused(ctx.BindCache(b), StatusCode::kInvalidArgument, text);
  };
  refused({{5, 1, 4}}, "past_input 5 is not an input index (the model has 5)");
  refused({{3, 3, 4}}, "present_output 3 is not an output index (the model has 3)");
  refused({{3, 1, 0}}, "capacity 0, expected at least 1");
  refused({{3, 1, 4}, {3, 2, 4}}, "input 'past_key' or output 'present_value' is bound twice");
  refused({{3, 2, 4}, {4, 1, 4}}, "input 'past_key' -> output 'present_value': the present is computed by");
  refused({{3, 1, 4}}, "only one of its present_key and present_value is bound: bind both");
  refused({{3, 1, 4}, {4, 2, 5}}, "its capacity differs from that of the other present");
  refused({{0, 0, 4}}, "input 'q' -> output 'y': the present is computed by");

  // The written-out graph: its presents are Concats.
  ExecutionContext written_out = CacheContext(CompileModel(m, OptionsFor(Device::kCpu, false)));
  CheckRefused(written_out.BindCache(BothCaches()), StatusCode::kInvalidArgument,
               "(Concat), not as the present_key or present_value of an Attention");

  REQUIRE(ctx.BindCache(BothCaches(4)).ok());
  std::vector<float> key(kKvHeads * 4 * kKvHead, kUntouched), value = key, y;
  const Step prompt(3, 1);
  BoundViews views(prompt, 0, key, value, y);
  std::vector<TensorView> own;
  CheckRefused(ctx.Run(views.in, own), StatusCode::kInvalidArgument, "Run needs the caller's output views");

  std::vector<float> elsewhere(key.size());
  views.out[2].data = elsewhere.data();
  CheckRefused(ctx.Run(views.in, views.out), StatusCode::kInvalidArgument,
               "output 2 'present_value' is a bound KV cache: its view must point at the buffer of input 4 "
               "'past_value'");
  views.out[2].data = value.data();
  REQUIRE(ctx.Run(views.in, views.out).ok());
  CheckRefused(ctx.CopyOutputs(views.out), StatusCode::kFailedPrecondition,
               "CopyOutputs: a KV cache is bound (ExecutionContext::BindCache)");

  const std::vector<float> before = key;
  const Step two(2, 7);  // past 3 + 2 rows > 4
  BoundViews too_long(two, 3, key, value, y);
  CheckRefused(ctx.Run(too_long.in, too_long.out), StatusCode::kInvalidArgument,
               "output 1 'present_key' [1, 3, 5, 4] needs 5 rows per head; its bound cache has 4");
  CHECK(key == before);

  // A capacity whose buffer no int64 offset spans: refused before the kernel computes one.
  REQUIRE(ctx.BindCache(BothCaches(int64_t{1} << 62)).ok());
  BoundViews huge(prompt, 0, key, value, y);
  CheckRefused(ctx.Run(huge.in, huge.out), StatusCode::kInvalidArgument,
               "a buffer of 4611686018427387904 rows per head would be more bytes than an int64 counts");
  CHECK(key == before);
}

TEST_CASE("BindCache through the C API: kiln_context_bind_cache gives the C++ API's bits, and refuses bad bindings") {
  const std::vector<uint8_t> bytes = CompileModel(KvCacheAttention());
  ExecutionContext cpp = CacheContext(bytes);
  REQUIRE(cpp.BindCache(BothCaches(6)).ok());
  kiln_model* model = nullptr;
  REQUIRE(kiln_model_load_bytes(bytes.data(), bytes.size(), nullptr, &model) == KILN_STATUS_OK);
  kiln_context_options o;
  REQUIRE(kiln_context_options_init(&o) == KILN_STATUS_OK);
  o.device = KILN_DEVICE_CPU;
  kiln_context* ctx = nullptr;
  REQUIRE(kiln_context_create(model, &o, &ctx) == KILN_STATUS_OK);
  CHECK(kiln_context_bind_cache(ctx, nullptr, 1) == KILN_STATUS_INVALID_ARGUMENT);
  CHECK(std::string(kiln_context_last_error(ctx)) == "kiln_context_bind_cache: caches is NULL");
  const kiln_cache_binding bad[] = {{3, 7, 6}};
  CHECK(kiln_context_bind_cache(ctx, bad, 1) == KILN_STATUS_INVALID_ARGUMENT);
  CHECK(std::string(kiln_context_last_error(ctx)).find("present_output 7 is not an output index") != std::string::npos);
  const kiln_cache_binding both[] = {{3, 1, 6}, {4, 2, 6}};
  REQUIRE(kiln_context_bind_cache(ctx, both, 2) == KILN_STATUS_OK);

  std::vector<float> key(kKvHeads * 6 * kKvHead, kUntouched), value = key, y;
  std::vector<float> c_key = key, c_value = value, c_y;
  int64_t past = 0;
  for (const int64_t seq : {4, 1}) {
    const Step step(seq, 40 + static_cast<uint32_t>(seq));
    BoundViews views(step, past, key, value, y);
    REQUIRE(cpp.Run(views.in, views.out).ok());
    BoundViews c_views(step, past, c_key, c_value, c_y);
    std::vector<kiln_tensor> in, out;
    auto c_tensor = [](const TensorView& v) {
      kiln_tensor t{};
      t.data = v.data;
      t.dtype = static_cast<kiln_dtype>(v.dtype);
      t.rank = v.rank;
      std::copy(v.dims, v.dims + v.rank, t.dims);
      t.memory = KILN_MEMORY_HOST;
      return t;
    };
    for (const TensorView& v : c_views.in) in.push_back(c_tensor(v));
    for (const TensorView& v : c_views.out) out.push_back(c_tensor(v));
    REQUIRE_MESSAGE(kiln_context_run_into(ctx, in.data(), in.size(), out.data(), out.size(), nullptr) == KILN_STATUS_OK,
                    kiln_context_last_error(ctx));
    CHECK(c_y == y);
    CHECK(c_key == key);
    CHECK(c_value == value);
    past += seq;
  }
  REQUIRE(kiln_context_bind_cache(ctx, nullptr, 0) == KILN_STATUS_OK);  // unbound
  kiln_context_destroy(ctx);
  kiln_model_destroy(model);
}

}  // namespace kiln::testing
