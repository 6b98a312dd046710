// oneDNN 2.6 against oneDNN 3.x on the primitives Kiln's CPU backend uses, one binary per version.
//
// Built twice by benchmarks/onednn_versions.sh (plain g++ -O2, once against Debian's libdnnl 2.6,
// once against a oneDNN 3.x tree such as PyPI's onednn-devel-cpu-gomp wheel unpacked under
// build/onednn-3.2); neither build is part of Kiln's CMake build or CI. It compiles against both
// C++ APIs: where they differ (primitive descriptors, int8 scales) the code says
// `#if DNNL_VERSION_MAJOR >= 3`.
//
// Each case prints one line, tab-separated: case, median milliseconds, the fastest call's
// milliseconds, the implementation oneDNN chose (impl_info_str), and the largest relative error of
// a few sampled outputs against a double-precision reference (an int8 case against the exact
// integer result). The thread count is oneDNN's OpenMP team: set OMP_NUM_THREADS.
//
//   onednn_versions              every case but the graph API's
//   onednn_versions --sdpa       only the graph API's attention (oneDNN 3.x)
//   onednn_versions --only NAME  the cases whose name starts with NAME
//   onednn_versions --seconds S  time budget per case (default 0.4 s, at least 5 and at most 400 calls)
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "oneapi/dnnl/dnnl.h"
#include "oneapi/dnnl/dnnl.hpp"
#if DNNL_VERSION_MAJOR >= 3
#include "oneapi/dnnl/dnnl_graph.hpp"
#endif

namespace {

using dnnl::memory;
using Tag = memory::format_tag;
using DT = memory::data_type;

double g_seconds = 0.4;
double g_last_min = 0;  // the fastest call of the last MedianMs

// Median of the call's wall time in milliseconds: 3 warm-up calls, then calls until the budget is
// spent (at least 5, at most 400). The fastest call goes to g_last_min.
double MedianMs(const std::function<void()>& call) {
  for (int i = 0; i < 3; ++i) call();
  std::vector<double> t;
  const auto start = std::chrono::steady_clock::now();
  while (t.size() < 400) {
    const auto a = std::chrono::steady_clock::now();
    call();
    const auto b = std::chrono::steady_clock::now();
    t.push_back(std::chrono::duration<double, std::milli>(b - a).count());
    if (t.size() >= 5 && std::chrono::duration<double>(b - start).count() > g_seconds) break;
  }
  g_last_min = *std::min_element(t.begin(), t.end());
  std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
  return t[t.size() / 2];
}

// One line: case, median ms, fastest ms (of the same calls), implementation, sampled error.
void Report(const std::string& name, double ms, const std::string& impl, double err) {
  std::printf("%s\t%.4f\t%.4f\t%s\t%.2e\n", name.c_str(), ms, std::isnan(ms) ? NAN : g_last_min, impl.c_str(), err);
  std::fflush(stdout);
}

std::vector<float> RandomF32(size_t n, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

dnnl::engine& Engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}
dnnl::stream& Stream() {
  static dnnl::stream s(Engine());
  return s;
}

// Sampled output positions for the checks: corners and a few random ones.
std::vector<std::pair<int64_t, int64_t>> Samples(int64_t rows, int64_t cols) {
  std::vector<std::pair<int64_t, int64_t>> s = {{0, 0}, {rows - 1, cols - 1}, {rows / 2, cols / 3}};
  std::mt19937 rng(7);
  for (int i = 0; i < 13; ++i) s.push_back({int64_t(rng() % rows), int64_t(rng() % cols)});
  return s;
}

double RelErr(double got, double want) { return std::fabs(got - want) / std::max(1.0, std::fabs(want)); }

// --- float32 matmul, weights reordered once into the layout oneDNN picks (Kiln's MatMulOp) ----------

void MatMulF32(int64_t m, int64_t k, int64_t n) {
  auto& eng = Engine();
  const memory::desc x_md({m, k}, DT::f32, Tag::ab), w_plain({k, n}, DT::f32, Tag::ab);
  const memory::desc w_md({k, n}, DT::f32, Tag::any), b_md({1, n}, DT::f32, Tag::ab), y_md({m, n}, DT::f32, Tag::ab);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
#if DNNL_VERSION_MAJOR >= 3
  dnnl::matmul::primitive_desc pd(eng, x_md, w_md, b_md, y_md, attr);
#else
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(x_md, w_md, b_md, y_md), attr, eng);
#endif
  auto xv = RandomF32(m * k, 1), wv = RandomF32(k * n, 2), bv = RandomF32(n, 3);
  std::vector<float> yv(m * n);
  memory x(x_md, eng, xv.data()), wu(w_plain, eng, wv.data()), b(b_md, eng, bv.data()), y(y_md, eng, yv.data());
  memory w(pd.weights_desc(), eng);
  dnnl::reorder(wu, w).execute(Stream(), wu, w);
  memory scratch(pd.scratchpad_desc(), eng);
  dnnl::matmul prim(pd);
  std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_BIAS, b},
                                          {DNNL_ARG_DST, y}, {DNNL_ARG_SCRATCHPAD, scratch}};
  const double ms = MedianMs([&] {
    prim.execute(Stream(), args);
    Stream().wait();
  });
  double err = 0;
  for (auto [i, j] : Samples(m, n)) {
    double want = bv[j];
    for (int64_t p = 0; p < k; ++p) want += double(xv[i * k + p]) * wv[p * n + j];
    err = std::max(err, RelErr(yv[i * n + j], want));
  }
  Report("matmul_f32 " + std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n), ms,
         pd.impl_info_str(), err);
}

// --- float32 convolution, every layout `any`, the reorders outside the timed loop -------------------

void ConvF32(int64_t c, int64_t hw, int64_t oc, int64_t kk) {
  auto& eng = Engine();
  const int64_t pad = kk / 2;
  const memory::dims xd{1, c, hw, hw}, wd{oc, c, kk, kk}, yd{1, oc, hw, hw};
  const memory::desc x_any(xd, DT::f32, Tag::any), w_any(wd, DT::f32, Tag::any), y_any(yd, DT::f32, Tag::any);
  const memory::desc b_md({oc}, DT::f32, Tag::a);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
#if DNNL_VERSION_MAJOR >= 3
  dnnl::convolution_forward::primitive_desc pd(eng, dnnl::prop_kind::forward_inference,
                                               dnnl::algorithm::convolution_direct, x_any, w_any, b_md, y_any,
                                               {1, 1}, {pad, pad}, {pad, pad}, attr);
#else
  dnnl::convolution_forward::primitive_desc pd(
      dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                      x_any, w_any, b_md, y_any, {1, 1}, {pad, pad}, {pad, pad}),
      attr, eng);
#endif
  auto xv = RandomF32(c * hw * hw, 4), wv = RandomF32(oc * c * kk * kk, 5), bv = RandomF32(oc, 6);
  std::vector<float> yv(oc * hw * hw);
  memory xu({xd, DT::f32, Tag::nchw}, eng, xv.data()), wu({wd, DT::f32, Tag::oihw}, eng, wv.data());
  memory yu({yd, DT::f32, Tag::nchw}, eng, yv.data()), b(b_md, eng, bv.data());
  memory x(pd.src_desc(), eng), w(pd.weights_desc(), eng), y(pd.dst_desc(), eng), scratch(pd.scratchpad_desc(), eng);
  dnnl::reorder(xu, x).execute(Stream(), xu, x);
  dnnl::reorder(wu, w).execute(Stream(), wu, w);
  dnnl::convolution_forward prim(pd);
  std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_BIAS, b},
                                          {DNNL_ARG_DST, y}, {DNNL_ARG_SCRATCHPAD, scratch}};
  const double ms = MedianMs([&] {
    prim.execute(Stream(), args);
    Stream().wait();
  });
  dnnl::reorder(y, yu).execute(Stream(), y, yu);
  Stream().wait();
  double err = 0;
  for (auto [o, pix] : Samples(oc, hw * hw)) {
    const int64_t oy = pix / hw, ox = pix % hw;
    double want = bv[o];
    for (int64_t ci = 0; ci < c; ++ci)
      for (int64_t ky = 0; ky < kk; ++ky)
        for (int64_t kx = 0; kx < kk; ++kx) {
          const int64_t iy = oy + ky - pad, ix = ox + kx - pad;
          if (iy < 0 || ix < 0 || iy >= hw || ix >= hw) continue;
          want += double(xv[(ci * hw + iy) * hw + ix]) * wv[((o * c + ci) * kk + ky) * kk + kx];
        }
    err = std::max(err, RelErr(yv[o * hw * hw + pix], want));
  }
  Report("conv_f32 " + std::to_string(c) + "x" + std::to_string(hw) + "x" + std::to_string(hw) + " k" +
             std::to_string(kk) + " ->" + std::to_string(oc),
         ms, pd.impl_info_str(), err);
}

// --- dnnl_sgemm (row-major), as Kiln's runtime/kernels/gemm.cc calls it ------------------------------

void Sgemm(char ta, char tb, int64_t m, int64_t n, int64_t k) {
  auto av = RandomF32(m * k, 8), bv = RandomF32(k * n, 9);
  std::vector<float> cv(m * n);
  const int64_t lda = ta == 'N' ? k : m, ldb = tb == 'N' ? n : k;
  const double ms = MedianMs([&] {
    dnnl_sgemm(ta, tb, m, n, k, 1.f, av.data(), lda, bv.data(), ldb, 0.f, cv.data(), n);
  });
  double err = 0;
  for (auto [i, j] : Samples(m, n)) {
    double want = 0;
    for (int64_t p = 0; p < k; ++p) {
      const float a = ta == 'N' ? av[i * lda + p] : av[p * lda + i];
      const float b = tb == 'N' ? bv[p * ldb + j] : bv[j * ldb + p];
      want += double(a) * b;
    }
    err = std::max(err, RelErr(cv[i * n + j], want));
  }
  Report(std::string("sgemm ") + ta + tb + " " + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k),
         ms, "dnnl_sgemm", err);
}

// --- int8: u8 activations (with a zero point or without), s8 weights per output channel, s32
// accumulation, f32 output. oneDNN 2.6: one output scale per column (the source's scale times the
// column's weight scale, computed by the caller at run time); 3.x: per-argument scales. -------------

struct Int8Scales {
  float src_scale = 0.02f;
  int32_t src_zp = 0;
  std::vector<float> w_scale;
  memory src_scale_mem, w_scale_mem, out_scale_mem, zp_mem;
  std::vector<float> out_scale;
  int32_t zp_value = 0;
  float src_scale_value = 0;

  bool baked = false;  // 2.6 only: the output scales given at creation, not at run time

  // Sets the attribute's scales (mask for the weights/output channel dim) and zero point.
  void Attr(dnnl::primitive_attr& attr, int w_mask, int dst_mask, bool zp) {
#if DNNL_VERSION_MAJOR >= 3
    (void)dst_mask;
    attr.set_scales_mask(DNNL_ARG_SRC, 0);
    attr.set_scales_mask(DNNL_ARG_WEIGHTS, w_mask);
    if (zp) attr.set_zero_points_mask(DNNL_ARG_SRC, 0);
#else
    (void)w_mask;
    if (baked) {
      out_scale.resize(w_scale.size());
      for (size_t j = 0; j < w_scale.size(); ++j) out_scale[j] = src_scale * w_scale[j];
      attr.set_output_scales(dst_mask, out_scale);
    } else {
      attr.set_output_scales(dst_mask, {DNNL_RUNTIME_F32_VAL});
    }
    if (zp) attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
#endif
  }
  // Adds the run-time scale and zero-point memories to args.
  void Args(std::unordered_map<int, memory>& args, bool zp) {
    auto& eng = Engine();
    const int64_t n = int64_t(w_scale.size());
    src_scale_value = src_scale;
    zp_value = src_zp;
#if DNNL_VERSION_MAJOR >= 3
    src_scale_mem = memory({{1}, DT::f32, Tag::a}, eng, &src_scale_value);
    w_scale_mem = memory({{n}, DT::f32, Tag::a}, eng, w_scale.data());
    args[DNNL_ARG_ATTR_SCALES | DNNL_ARG_SRC] = src_scale_mem;
    args[DNNL_ARG_ATTR_SCALES | DNNL_ARG_WEIGHTS] = w_scale_mem;
#else
    if (!baked) {
      out_scale.resize(n);
      for (int64_t j = 0; j < n; ++j) out_scale[j] = src_scale * w_scale[j];
      out_scale_mem = memory({{n}, DT::f32, Tag::a}, eng, out_scale.data());
      args[DNNL_ARG_ATTR_OUTPUT_SCALES] = out_scale_mem;
    }
#endif
    if (zp) {
      zp_mem = memory({{1}, DT::s32, Tag::a}, eng, &zp_value);
      args[DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC] = zp_mem;
    }
  }
};

std::vector<uint8_t> RandomU8(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& x : v) x = uint8_t(rng() & 0xff);
  return v;
}
std::vector<int8_t> RandomS8(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int8_t> v(n);
  for (auto& x : v) x = int8_t(int(rng() % 255) - 127);
  return v;
}

void MatMulInt8(int64_t m, int64_t k, int64_t n, bool zp, bool baked = false) {
  auto& eng = Engine();
  const memory::desc x_md({m, k}, DT::u8, Tag::ab), w_plain({k, n}, DT::s8, Tag::ab);
  const memory::desc w_md({k, n}, DT::s8, Tag::any), y_md({m, n}, DT::f32, Tag::ab);
  Int8Scales sc;
  sc.src_zp = zp ? 128 : 0;
  sc.baked = baked;
  sc.w_scale = RandomF32(n, 10, 0.001f, 0.01f);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  sc.Attr(attr, /*w_mask=*/1 << 1, /*dst_mask=*/1 << 1, zp);
#if DNNL_VERSION_MAJOR >= 3
  dnnl::matmul::primitive_desc pd(eng, x_md, w_md, y_md, attr);
#else
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(x_md, w_md, y_md), attr, eng);
#endif
  auto xv = RandomU8(m * k, 11);
  auto wv = RandomS8(k * n, 12);
  std::vector<float> yv(m * n);
  memory x(x_md, eng, xv.data()), wu(w_plain, eng, wv.data()), y(y_md, eng, yv.data());
  memory w(pd.weights_desc(), eng), scratch(pd.scratchpad_desc(), eng);
  dnnl::reorder(wu, w).execute(Stream(), wu, w);
  dnnl::matmul prim(pd);
  std::unordered_map<int, memory> args = {
      {DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, y}, {DNNL_ARG_SCRATCHPAD, scratch}};
  sc.Args(args, zp);
  const double ms = MedianMs([&] {
    prim.execute(Stream(), args);
    Stream().wait();
  });
  double err = 0;
  for (auto [i, j] : Samples(m, n)) {
    int64_t acc = 0;
    for (int64_t p = 0; p < k; ++p) acc += (int64_t(xv[i * k + p]) - sc.src_zp) * wv[p * n + j];
    err = std::max(err, RelErr(yv[i * n + j], double(acc) * sc.src_scale * sc.w_scale[j]));
  }
  Report(std::string("matmul_u8s8") + (zp ? "_zp" : "") + (baked ? "_baked" : "") + " " + std::to_string(m) + "x" +
             std::to_string(k) + "x" + std::to_string(n),
         ms, pd.impl_info_str(), err);
}

void ConvInt8(int64_t c, int64_t hw, int64_t oc, bool zp, bool baked = false) {
  auto& eng = Engine();
  const memory::dims xd{1, c, hw, hw}, wd{oc, c, 1, 1}, yd{1, oc, hw, hw};
  const memory::desc x_any(xd, DT::u8, Tag::any), w_any(wd, DT::s8, Tag::any), y_any(yd, DT::f32, Tag::any);
  Int8Scales sc;
  sc.src_zp = zp ? 128 : 0;
  sc.baked = baked;
  sc.w_scale = RandomF32(oc, 13, 0.001f, 0.01f);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  sc.Attr(attr, /*w_mask=*/1 << 0, /*dst_mask=*/1 << 1, zp);
#if DNNL_VERSION_MAJOR >= 3
  dnnl::convolution_forward::primitive_desc pd(eng, dnnl::prop_kind::forward_inference,
                                               dnnl::algorithm::convolution_direct, x_any, w_any, y_any, {1, 1},
                                               {0, 0}, {0, 0}, attr);
#else
  dnnl::convolution_forward::primitive_desc pd(
      dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                      x_any, w_any, y_any, {1, 1}, {0, 0}, {0, 0}),
      attr, eng);
#endif
  auto xv = RandomU8(c * hw * hw, 14);
  auto wv = RandomS8(oc * c, 15);
  std::vector<float> yv(oc * hw * hw);
  memory xu({xd, DT::u8, Tag::nchw}, eng, xv.data()), wu({wd, DT::s8, Tag::oihw}, eng, wv.data());
  memory yu({yd, DT::f32, Tag::nchw}, eng, yv.data());
  memory x(pd.src_desc(), eng), w(pd.weights_desc(), eng), y(pd.dst_desc(), eng), scratch(pd.scratchpad_desc(), eng);
  dnnl::reorder(xu, x).execute(Stream(), xu, x);
  dnnl::reorder(wu, w).execute(Stream(), wu, w);
  dnnl::convolution_forward prim(pd);
  std::unordered_map<int, memory> args = {
      {DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, y}, {DNNL_ARG_SCRATCHPAD, scratch}};
  sc.Args(args, zp);
  const double ms = MedianMs([&] {
    prim.execute(Stream(), args);
    Stream().wait();
  });
  dnnl::reorder(y, yu).execute(Stream(), y, yu);
  Stream().wait();
  double err = 0;
  for (auto [o, pix] : Samples(oc, hw * hw)) {
    int64_t acc = 0;
    for (int64_t ci = 0; ci < c; ++ci) acc += (int64_t(xv[ci * hw * hw + pix]) - sc.src_zp) * wv[o * c + ci];
    err = std::max(err, RelErr(yv[o * hw * hw + pix], double(acc) * sc.src_scale * sc.w_scale[o]));
  }
  Report(std::string("conv_u8s8") + (zp ? "_zp" : "") + (baked ? "_baked" : "") + " " + std::to_string(c) + "x" +
             std::to_string(hw) + "x" + std::to_string(hw) + " k1 ->" + std::to_string(oc),
         ms, pd.impl_info_str(), err);
#if DNNL_VERSION_MAJOR < 3
  if (baked) {
    // With dynamic quantization the source's scale changes every call, so baked output scales mean
    // a new primitive per call: the cost of making one (a new scale each time, so the primitive
    // cache misses).
    float next = sc.src_scale;
    const double create_ms = MedianMs([&] {
      next *= 1.0001f;
      dnnl::primitive_attr a;
      a.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      std::vector<float> os(oc);
      for (int64_t j = 0; j < oc; ++j) os[j] = next * sc.w_scale[j];
      a.set_output_scales(1 << 1, os);
      if (zp) a.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
      dnnl::convolution_forward::primitive_desc p2(
          dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                          x_any, w_any, y_any, {1, 1}, {0, 0}, {0, 0}),
          a, eng);
      dnnl::convolution_forward prim2(p2);
    });
    Report(std::string("conv_u8s8") + (zp ? "_zp" : "") + "_baked_create " + std::to_string(c) + "x" +
               std::to_string(hw) + "x" + std::to_string(hw) + " k1 ->" + std::to_string(oc),
           create_ms, "pd + primitive, new scale each", 0);
  }
#endif
}

#if DNNL_VERSION_MAJOR >= 3
// --- the graph API's attention: MatMul(Q, K^T), Divide by sqrt(D), Add mask, SoftMax, MatMul(., V);
// with `out_transpose` also StaticTranspose to [1, S, H, D] and StaticReshape to [1, S, H*D], the
// form the dnnl backend's f32_MHA_fusion pattern asks for. Prints the partitions, and times running
// them all in order. -----------------------------------------------------------------------------------

void Sdpa(int64_t h, int64_t s, int64_t d, bool out_transpose) {
  using namespace dnnl::graph;
  using LT = logical_tensor;
  const auto f32 = LT::data_type::f32;
  const auto strided = LT::layout_type::strided;
  enum : size_t { kQ, kK, kV, kScale, kMask, kScores, kScaled, kMasked, kProbs, kOut, kOutT, kOutR };
  const LT q(kQ, f32, {1, h, s, d}, strided), k(kK, f32, {1, h, s, d}, strided), v(kV, f32, {1, h, s, d}, strided);
  // The scale as [1, 1, 1, 1]: as [1] (a scalar broadcast the numpy way, which the op's spec
  // allows) the partition fails to compile in 3.2 (invalid_arguments).
  const LT scale(kScale, f32, {1, 1, 1, 1}, strided), mask(kMask, f32, {1, 1, 1, s}, strided);
  const LT scores(kScores, f32, {1, h, s, s}, strided), scaled(kScaled, f32, {1, h, s, s}, strided);
  const LT masked(kMasked, f32, {1, h, s, s}, strided), probs(kProbs, f32, {1, h, s, s}, strided);
  const LT out(kOut, f32, {1, h, s, d}, strided), out_t(kOutT, f32, {1, s, h, d}, strided);
  const LT out_r(kOutR, f32, {1, s, h * d}, strided);
  op mm1(0, op::kind::MatMul, {q, k}, {scores}, "matmul_qk");
  mm1.set_attr<bool>(op::attr::transpose_b, true);
  op div(1, op::kind::Divide, {scores, scale}, {scaled}, "scale");
  op add(2, op::kind::Add, {scaled, mask}, {masked}, "mask");
  op sm(3, op::kind::SoftMax, {masked}, {probs}, "softmax");
  sm.set_attr<int64_t>(op::attr::axis, -1);
  op mm2(4, op::kind::MatMul, {probs, v}, {out}, "matmul_v");
  op tr(5, op::kind::StaticTranspose, {out}, {out_t}, "transpose_out");
  tr.set_attr<std::vector<int64_t>>(op::attr::order, {0, 2, 1, 3});
  op rs(6, op::kind::StaticReshape, {out_t}, {out_r}, "reshape_out");
  rs.set_attr<std::vector<int64_t>>(op::attr::shape, {1, s, h * d});
  rs.set_attr<bool>(op::attr::special_zero, false);

  graph g(dnnl::engine::kind::cpu);
  for (op* o : {&mm1, &div, &add, &sm, &mm2}) g.add_op(*o);
  if (out_transpose) {
    g.add_op(tr);
    g.add_op(rs);
  }
  g.finalize();
  auto parts = g.get_partitions();
  const std::string name = std::string("sdpa_graph") + (out_transpose ? "+transpose" : "") + " " + std::to_string(h) +
                           "x" + std::to_string(s) + "x" + std::to_string(d);
  std::string layout = std::to_string(parts.size()) + " partitions:";
  for (auto& p : parts) {
    layout += " [" + std::to_string(p.get_ops_num()) + " ops" + (p.is_supported() ? "" : ", unsupported") + ":";
    for (size_t id : p.get_ops()) layout += " " + std::to_string(id);
    layout += "]";
  }
  for (auto& p : parts)
    if (!p.is_supported()) {
      Report(name, NAN, layout, NAN);
      return;
    }
  auto& eng = Engine();
  std::unordered_map<size_t, std::vector<float>> buf;
  auto qv = RandomF32(h * s * d, 20), kv = RandomF32(h * s * d, 21), vv = RandomF32(h * s * d, 22);
  std::vector<float> sv = {std::sqrt(float(d))}, mv(s, 0.f);
  for (int64_t j = s - s / 4; j < s; ++j) mv[j] = -10000.f;  // the last quarter padded out, as attention.py
  buf[kQ] = qv, buf[kK] = kv, buf[kV] = vv, buf[kScale] = sv, buf[kMask] = mv;
  std::vector<compiled_partition> cps;
  std::vector<std::vector<tensor>> ins, outs;
  for (auto& p : parts) {
    auto in_lts = p.get_input_ports();
    auto out_lts = p.get_output_ports();
    try {
      cps.push_back(p.compile(in_lts, out_lts, eng));
    } catch (const dnnl::error& e) {
      std::string ports = " inputs";
      for (auto& lt : in_lts) ports += " " + std::to_string(lt.get_id());
      ports += " outputs";
      for (auto& lt : out_lts) ports += " " + std::to_string(lt.get_id());
      Report(name, NAN, layout + "; compiling the partition of" + ports + " failed: " + e.what(), NAN);
      return;
    }
    std::vector<tensor> ti, to;
    for (auto& lt : out_lts) {
      const LT c = cps.back().query_logical_tensor(lt.get_id());
      buf[lt.get_id()].resize(c.get_mem_size() / sizeof(float));
      to.emplace_back(c, eng, buf[lt.get_id()].data());
    }
    for (auto& lt : in_lts) ti.emplace_back(lt, eng, buf.at(lt.get_id()).data());
    ins.push_back(ti);
    outs.push_back(to);
  }
  auto& strm = Stream();
  const double ms = MedianMs([&] {
    for (size_t i = 0; i < cps.size(); ++i) cps[i].execute(strm, ins[i], outs[i]);
    strm.wait();
  });
  // Check a few query rows of a few heads against a double-precision reference.
  const std::vector<float>& y = buf.at(out_transpose ? kOutR : kOut);
  double err = 0;
  for (auto [hh, i] : Samples(h, s)) {
    std::vector<double> p(s);
    double mx = -1e300, sum = 0;
    for (int64_t j = 0; j < s; ++j) {
      double dot = 0;
      for (int64_t e = 0; e < d; ++e) dot += double(qv[(hh * s + i) * d + e]) * kv[(hh * s + j) * d + e];
      p[j] = dot / sv[0] + mv[j];
      mx = std::max(mx, p[j]);
    }
    for (auto& x : p) sum += (x = std::exp(x - mx));
    for (int64_t e = 0; e < d; ++e) {
      double want = 0;
      for (int64_t j = 0; j < s; ++j) want += p[j] / sum * vv[(hh * s + j) * d + e];
      const float got = out_transpose ? y[(i * h + hh) * d + e] : y[(hh * s + i) * d + e];
      err = std::max(err, RelErr(got, want));
    }
  }
  Report(name, ms, layout, err);
}
#endif

}  // namespace

int main(int argc, char** argv) {
  bool sdpa = false;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--sdpa")) sdpa = true;
    else if (!std::strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
    else if (!std::strcmp(argv[i], "--seconds") && i + 1 < argc) g_seconds = std::atof(argv[++i]);
    else {
      std::fprintf(stderr, "usage: %s [--sdpa] [--only PREFIX] [--seconds S]\n", argv[0]);
      return 2;
    }
  }
  const dnnl_version_t* v = dnnl_version();
  const char* omp = std::getenv("OMP_NUM_THREADS");
  std::printf("# oneDNN %d.%d.%d (%s), OMP_NUM_THREADS=%s\n", v->major, v->minor, v->patch, v->hash,
              omp ? omp : "unset");
  struct Case {
    std::string name;
    std::function<void()> run;
  };
  std::vector<Case> cases;
  if (!sdpa) {
    // The zoo's linear layers: Whisper-tiny fc1 and fc2, BERT-base's FFN up, ViT-B's qkv, Swin-T's
    // stage-1 MLP, a classifier head.
    for (auto [m, k, n] : std::vector<std::array<int64_t, 3>>{{1500, 384, 1536},
                                                               {1500, 1536, 384},
                                                               {128, 768, 3072},
                                                               {197, 768, 2304},
                                                               {3136, 96, 384},
                                                               {1, 2048, 1000}})
      cases.push_back({"matmul_f32 " + std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n),
                       [=] { MatMulF32(m, k, n); }});
    // ResNet-50 stage 1: the 3x3 and a 1x1.
    cases.push_back({"conv_f32 64x56x56 k3 ->64", [] { ConvF32(64, 56, 64, 3); }});
    cases.push_back({"conv_f32 256x56x56 k1 ->64", [] { ConvF32(256, 56, 64, 1); }});
    cases.push_back({"sgemm NT 128x512x64", [] { Sgemm('N', 'T', 128, 512, 64); }});
    cases.push_back({"sgemm NN 1024x1024x1024", [] { Sgemm('N', 'N', 1024, 1024, 1024); }});
    cases.push_back({"matmul_u8s8 128x768x3072", [] { MatMulInt8(128, 768, 3072, false); }});
    cases.push_back({"matmul_u8s8_zp 128x768x3072", [] { MatMulInt8(128, 768, 3072, true); }});
    cases.push_back({"conv_u8s8 256x56x56 k1 ->64", [] { ConvInt8(256, 56, 64, false); }});
    cases.push_back({"conv_u8s8_zp 256x56x56 k1 ->64", [] { ConvInt8(256, 56, 64, true); }});
#if DNNL_VERSION_MAJOR < 3
    // 2.6 also takes output scales fixed when the primitive is made (3.x's scales are always
    // run-time arguments): a model's constant scales, or a primitive made again per source scale.
    cases.push_back({"matmul_u8s8_baked 128x768x3072", [] { MatMulInt8(128, 768, 3072, false, true); }});
    cases.push_back({"matmul_u8s8_zp_baked 128x768x3072", [] { MatMulInt8(128, 768, 3072, true, true); }});
    cases.push_back({"conv_u8s8_baked 256x56x56 k1 ->64", [] { ConvInt8(256, 56, 64, false, true); }});
    cases.push_back({"conv_u8s8_zp_baked 256x56x56 k1 ->64", [] { ConvInt8(256, 56, 64, true, true); }});
#endif
  } else {
#if DNNL_VERSION_MAJOR >= 3
    for (bool t : {false, true}) {
      const std::string n = t ? "sdpa_graph+transpose " : "sdpa_graph ";
      cases.push_back({n + "12x512x64", [=] { Sdpa(12, 512, 64, t); }});
      cases.push_back({n + "6x1500x64", [=] { Sdpa(6, 1500, 64, t); }});
    }
#else
    std::printf("# oneDNN %d has no graph API\n", v->major);
#endif
  }
  for (auto& c : cases) {
    if (!only.empty() && c.name.rfind(only, 0) != 0) continue;
    try {
      c.run();
    } catch (const dnnl::error& e) {
      std::printf("%s\tnan\tnan\terror: %s (status %d)\tnan\n", c.name.c_str(), e.what(), int(e.status));
      std::fflush(stdout);
    }
  }
  return 0;
}
