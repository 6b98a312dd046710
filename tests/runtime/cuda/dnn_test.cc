// The cuDNN library object (runtime/cuda/dnn.h).
//
// Without a GPU (every machine these tests were written on): the ONNX window geometry (auto_pad,
// pads, strides, dilations, output_padding, output_shape, ceil-mode pooling) against hand values;
// which ops Supports() accepts or refuses; the cuDNN mapping (1-D as 2-D, symmetric pads, the
// epilogue steps) against hand values; that mapping evaluated by a host model of the cuDNN calls'
// documented semantics (NCHW cross-correlation with zero padding and groups, backward data as
// its adjoint, max / average pooling) and compared with the CPU kernels; and that Create() fails
// cleanly without a driver.
//
// "[gpu]" cases run the library for real and compare with the CPU kernels: in CI on the
// emulated CUDA device (tests/emulated_cuda/), and on a real GPU by scripts/gpu-check.
#if KILN_HAVE_CUDA

#include "runtime/cuda/dnn.h"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "tests/gpu_test_util.h"
#include "tests/text_util.h"
#include "tests/runtime/cuda/library_test_util.h"

namespace kiln::cuda {
namespace {

using testing::Absent;
using testing::HostTensor;
using testing::MaxRelDiff;
using testing::Random;
using testing::RunCpu;
using testing::Shape;
using testing::Zeros;

using kiln::testing::Contains;

AttrMap Attrs(std::initializer_list<std::pair<const char*, std::vector<int64_t>>> ints,
              std::initializer_list<std::pair<const char*, const char*>> strings = {}) {
  AttrMap a;
  for (const auto& [name, v] : ints) {
    if (std::string(name) == "group" || std::string(name) == "count_include_pad" ||
        std::string(name) == "epilogue_residual" || std::string(name) == "ceil_mode") {
      a.SetInt(name, v.at(0));
    } else {
      a.SetInts(name, v);
    }
  }
  for (const auto& [name, v] : strings) a.SetString(name, v);
  return a;
}

Status PlanOf(std::string_view op, const AttrMap& attrs, const std::vector<const HostTensor*>& in,
              const std::vector<const HostTensor*>& out, DnnPlan* plan) {
  std::vector<DeviceTensor> ins = testing::DevViews(in), outs = testing::DevViews(out);
  return PlanDnn(op, attrs, ins, outs, plan);
}
Status DnnSupports(std::string_view op, const AttrMap& attrs, const std::vector<const HostTensor*>& in,
                const std::vector<const HostTensor*>& out) {
  std::vector<DeviceTensor> ins = testing::DevViews(in), outs = testing::DevViews(out);
  return DnnLibrary::Supports(op, attrs, ins, outs);
}

// ---- Geometry, by hand -------------------------------------------------------------------------

TEST_CASE("cuDNN geometry: Conv pads from auto_pad, explicit pads, strides and dilations") {
  WindowGeometry g;
  HostTensor x = Shape({1, 3, 224, 224}), w = Shape({8, 3, 3, 3}), y = Shape({1, 8, 112, 112});
  // SAME with stride 2 over an even extent: total pad 1, at the end (UPPER) or start (LOWER).
  REQUIRE(ResolveConvGeometry(Attrs({{"strides", {2, 2}}}, {{"auto_pad", "SAME_UPPER"}}), x.Dev(), w.Dev(),
                              y.Dev(), &g)
              .ok());
  CHECK(g.spatial == 2);
  CHECK(g.pad_begin[0] == 0);
  CHECK(g.pad_end[0] == 1);
  CHECK(g.stride[1] == 2);
  CHECK(g.kernel[0] == 3);
  REQUIRE(ResolveConvGeometry(Attrs({{"strides", {2, 2}}}, {{"auto_pad", "SAME_LOWER"}}), x.Dev(), w.Dev(),
                              y.Dev(), &g)
              .ok());
  CHECK(g.pad_begin[0] == 1);
  CHECK(g.pad_end[0] == 0);
  // Dilation 2 makes a 3-tap kernel span 5: SAME at stride 1 pads 2 on each side.
  HostTensor y1 = Shape({1, 8, 224, 224});
  REQUIRE(ResolveConvGeometry(Attrs({{"dilations", {2, 2}}}, {{"auto_pad", "SAME_UPPER"}}), x.Dev(), w.Dev(),
                              y1.Dev(), &g)
              .ok());
  CHECK(g.pad_begin[1] == 2);
  CHECK(g.pad_end[1] == 2);
  CHECK(g.dilation[0] == 2);
  // Explicit pads [begin..., end...]: out = (in + pb + pe - eff_k) / stride + 1.
  HostTensor x2 = Shape({2, 4, 10, 11}), w2 = Shape({6, 2, 3, 2}), y2 = Shape({2, 6, 6, 6});
  REQUIRE(ResolveConvGeometry(Attrs({{"pads", {1, 0, 2, 1}}, {"strides", {2, 2}}, {"group", {2}}}), x2.Dev(),
                              w2.Dev(), y2.Dev(), &g)
              .ok());
  CHECK(g.group == 2);
  CHECK(g.pad_begin[0] == 1);
  CHECK(g.pad_end[0] == 2);
  CHECK(g.pad_begin[1] == 0);
  CHECK(g.pad_end[1] == 1);
  CHECK(g.out[0] == 6);  // (10 + 1 + 2 - 3) / 2 + 1
  CHECK(g.out[1] == 6);  // (11 + 0 + 1 - 2) / 2 + 1
  // Errors name what was expected.
  HostTensor y_bad = Shape({2, 6, 6, 7});
  Status st = ResolveConvGeometry(Attrs({{"pads", {1, 0, 2, 1}}, {"strides", {2, 2}}, {"group", {2}}}),
                                  x2.Dev(), w2.Dev(), y_bad.Dev(), &g);
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(Contains(st.message(), "expected 6"));
  st = ResolveConvGeometry(Attrs({{"group", {3}}}), x2.Dev(), w2.Dev(), y2.Dev(), &g);
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(Contains(st.message(), "group 3"));
  st = ResolveConvGeometry(Attrs({{"strides", {2}}}), x2.Dev(), w2.Dev(), y2.Dev(), &g);
  CHECK(Contains(st.message(), "strides has 1 values, expected 2"));
  st = ResolveConvGeometry(Attrs({{"group", {2}}}, {{"auto_pad", "SAME"}}), x2.Dev(), w2.Dev(), y2.Dev(), &g);
  CHECK(Contains(st.message(), "unknown auto_pad 'SAME'"));
}

TEST_CASE("cuDNN geometry: ConvTranspose output_padding and output_shape") {
  WindowGeometry g;
  // out = stride * (in - 1) + output_padding + eff_k - pads = 2 * 3 + 1 + 3 - 2 = 8.
  HostTensor x = Shape({1, 3, 4, 4}), w = Shape({3, 2, 3, 3}), y = Shape({1, 2, 8, 8});
  AttrMap a = Attrs({{"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}, {"output_padding", {1, 1}}});
  REQUIRE(ResolveConvTransposeGeometry(a, x.Dev(), w.Dev(), y.Dev(), &g).ok());
  CHECK(g.output_padding[0] == 1);
  CHECK(g.pad_begin[1] == 1);
  CHECK(g.pad_end[1] == 1);
  // output_shape 8 without output_padding: full size 9, so 1 pad; without auto_pad the spec
  // puts total - floor(total / 2) at the start (asymmetric).
  AttrMap os = Attrs({{"strides", {2, 2}}, {"output_shape", {8, 8}}});
  REQUIRE(ResolveConvTransposeGeometry(os, x.Dev(), w.Dev(), y.Dev(), &g).ok());
  CHECK(g.pad_begin[0] == 1);
  CHECK(g.pad_end[0] == 0);
  AttrMap lower = Attrs({{"strides", {2, 2}}}, {{"auto_pad", "SAME_LOWER"}});
  REQUIRE(ResolveConvTransposeGeometry(lower, x.Dev(), w.Dev(), y.Dev(), &g).ok());
  CHECK(g.pad_begin[0] == 1);
  CHECK(g.pad_end[0] == 0);
  // With output_padding 1 the full size is 10: 2 pads, one on each side.
  AttrMap os2 = Attrs({{"strides", {2, 2}}, {"output_shape", {8, 8}}, {"output_padding", {1, 1}}});
  REQUIRE(ResolveConvTransposeGeometry(os2, x.Dev(), w.Dev(), y.Dev(), &g).ok());
  CHECK(g.pad_begin[0] == 1);
  CHECK(g.pad_end[0] == 1);
  HostTensor y_bad = Shape({1, 2, 9, 8});
  Status st = ResolveConvTransposeGeometry(a, x.Dev(), w.Dev(), y_bad.Dev(), &g);
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(Contains(st.message(), "expected 8"));
  HostTensor w_bad = Shape({2, 2, 3, 3});
  CHECK(ResolveConvTransposeGeometry(a, x.Dev(), w_bad.Dev(), y.Dev(), &g).code() ==
        StatusCode::kInvalidArgument);
}

TEST_CASE("cuDNN geometry: pooling pads, floor and ceil sizes") {
  WindowGeometry g;
  HostTensor x = Shape({1, 2, 6, 7});
  // in 6, k 3, s 2, pads 1: span 5 -> floor 3, ceil 4; in 7: span 6 -> 4 either way.
  AttrMap a = Attrs({{"kernel_shape", {3, 3}}, {"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}});
  HostTensor y_floor = Shape({1, 2, 3, 4}), y_ceil = Shape({1, 2, 4, 4}), y_bad = Shape({1, 2, 5, 4});
  CHECK(ResolvePoolGeometry("MaxPool", a, x.Dev(), y_floor.Dev(), &g).ok());
  CHECK(ResolvePoolGeometry("MaxPool", a, x.Dev(), y_ceil.Dev(), &g).ok());
  Status st = ResolvePoolGeometry("MaxPool", a, x.Dev(), y_bad.Dev(), &g);
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(Contains(st.message(), "expected 3 (or 4 with ceil_mode)"));
  // SAME pads come from the output: in 7, out 7, k 3, s 1: total 2.
  HostTensor x7 = Shape({1, 1, 7}), y7 = Shape({1, 1, 7});
  REQUIRE(ResolvePoolGeometry("AveragePool", Attrs({{"kernel_shape", {3}}}, {{"auto_pad", "SAME_UPPER"}}),
                              x7.Dev(), y7.Dev(), &g)
              .ok());
  CHECK(g.pad_begin[0] == 1);
  CHECK(g.pad_end[0] == 1);
  // In 7, out 4, k 2, s 2: total (4 - 1) * 2 + 2 - 7 = 1, at the end (UPPER).
  HostTensor x6 = Shape({1, 1, 7}), y4 = Shape({1, 1, 4});
  REQUIRE(ResolvePoolGeometry("AveragePool",
                              Attrs({{"kernel_shape", {2}}, {"strides", {2}}}, {{"auto_pad", "SAME_UPPER"}}),
                              x6.Dev(), y4.Dev(), &g)
              .ok());
  CHECK(g.pad_begin[0] == 0);
  CHECK(g.pad_end[0] == 1);
  CHECK(ResolvePoolGeometry("MaxPool", Attrs({{"kernel_shape", {3}}}), x.Dev(), y_floor.Dev(), &g).code() ==
        StatusCode::kInvalidArgument);
}

// ---- Supports and the mapping ------------------------------------------------------------------

TEST_CASE("cuDNN Supports: Conv forms, epilogues and refusals") {
  HostTensor x = Shape({1, 3, 8, 8}), w = Shape({4, 3, 3, 3}), y = Shape({1, 4, 8, 8}), b = Shape({4});
  HostTensor r = Shape({1, 4, 8, 8}), absent = Absent();
  const AttrMap pad1 = Attrs({{"pads", {1, 1, 1, 1}}});
  CHECK(DnnSupports("Conv", pad1, {&x, &w}, {&y}).ok());
  CHECK(DnnSupports("Conv", pad1, {&x, &w, &b}, {&y}).ok());
  AttrMap relu = pad1;
  relu.SetString("epilogue_activation", "Relu");
  CHECK(DnnSupports("Conv", relu, {&x, &w, &b}, {&y}).ok());
  CHECK(DnnSupports("Conv", relu, {&x, &w}, {&y}).ok());
  AttrMap res = relu;
  res.SetInt("epilogue_residual", 1);
  CHECK(DnnSupports("Conv", res, {&x, &w, &b, &r}, {&y}).ok());
  res.SetString("epilogue_order", "bias,residual,act");
  CHECK(DnnSupports("Conv", res, {&x, &w, &absent, &r}, {&y}).ok());
  for (const char* act : {"Gelu", "GeluTanh", "Sigmoid", "HardSwish", "SiLU"}) {
    AttrMap a = pad1;
    a.SetString("epilogue_activation", act);
    Status st = DnnSupports("Conv", a, {&x, &w, &b}, {&y});
    CHECK(st.code() == StatusCode::kUnimplemented);
    CHECK(Contains(st.message(), act));
  }
  // Asymmetric pads (SAME_UPPER at stride 2 over an even size) and float64 are refused.
  HostTensor y2 = Shape({1, 4, 4, 4});
  Status st = DnnSupports("Conv", Attrs({{"strides", {2, 2}}}, {{"auto_pad", "SAME_UPPER"}}), {&x, &w}, {&y2});
  CHECK(st.code() == StatusCode::kUnimplemented);
  CHECK(Contains(st.message(), "asymmetric pads"));
  HostTensor xd = Shape({1, 3, 8, 8}, DType::kFloat64), wd = Shape({4, 3, 3, 3}, DType::kFloat64),
             yd = Shape({1, 4, 8, 8}, DType::kFloat64);
  st = DnnSupports("Conv", pad1, {&xd, &wd}, {&yd});
  CHECK(st.code() == StatusCode::kUnimplemented);
  CHECK(Contains(st.message(), "float32, float16 and bfloat16 here, found float64"));
  // 4 spatial dims.
  HostTensor x4 = Shape({1, 1, 3, 3, 3, 3}), w4 = Shape({1, 1, 1, 1, 1, 1}), y4 = Shape({1, 1, 3, 3, 3, 3});
  CHECK(DnnSupports("Conv", {}, {&x4, &w4}, {&y4}).code() == StatusCode::kUnimplemented);
  // Malformed: wrong output, residual without the attribute, bias of the wrong size.
  CHECK(DnnSupports("Conv", {}, {&x, &w}, {&y}).code() == StatusCode::kInvalidArgument);  // no pads: out 6
  CHECK(DnnSupports("Conv", pad1, {&x, &w, &b, &r}, {&y}).code() == StatusCode::kInvalidArgument);
  HostTensor b3 = Shape({3});
  CHECK(DnnSupports("Conv", pad1, {&x, &w, &b3}, {&y}).code() == StatusCode::kInvalidArgument);
  CHECK(DnnSupports("Softmax", {}, {&x}, {&y}).code() == StatusCode::kUnimplemented);
}

TEST_CASE("cuDNN Supports: float16 and bfloat16 with float32 compute, one dtype per op") {
  for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
    CAPTURE(DTypeName(dt));
    HostTensor x = Shape({1, 3, 8, 8}, dt), w = Shape({4, 3, 3, 3}, dt), y = Shape({1, 4, 8, 8}, dt),
               b = Shape({4}, dt), r = Shape({1, 4, 8, 8}, dt);
    AttrMap relu = Attrs({{"pads", {1, 1, 1, 1}}});
    relu.SetString("epilogue_activation", "Relu");
    DnnPlan p;
    REQUIRE(PlanOf("Conv", relu, {&x, &w, &b}, {&y}, &p).ok());
    CHECK(p.dtype == dt);
    CHECK(p.bias);
    CHECK(p.relu);
    AttrMap res = relu;
    res.SetInt("epilogue_residual", 1);
    CHECK(DnnSupports("Conv", res, {&x, &w, &b, &r}, {&y}).ok());
    HostTensor cx = Shape({1, 3, 4, 4}, dt), cw = Shape({3, 2, 3, 3}, dt), cy = Shape({1, 2, 8, 8}, dt),
               cb = Shape({2}, dt);
    const AttrMap up = Attrs({{"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}, {"output_padding", {1, 1}}});
    REQUIRE(PlanOf("ConvTranspose", up, {&cx, &cw, &cb}, {&cy}, &p).ok());
    CHECK(p.dtype == dt);
    HostTensor px = Shape({1, 2, 6, 7}, dt), py = Shape({1, 2, 3, 4}, dt);
    const AttrMap pool = Attrs({{"kernel_shape", {3, 3}}, {"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}});
    REQUIRE(PlanOf("MaxPool", pool, {&px}, {&py}, &p).ok());
    CHECK(p.dtype == dt);
    CHECK(DnnSupports("AveragePool", pool, {&px}, {&py}).ok());
    // Equal plans of different dtypes are different cache entries.
    DnnPlan f32;
    HostTensor fx = Shape({1, 2, 6, 7}), fy = Shape({1, 2, 3, 4});
    REQUIRE(PlanOf("MaxPool", pool, {&fx}, {&fy}, &f32).ok());
    CHECK_FALSE(f32 == p);
    // Every tensor has X's dtype: a float32 bias, W or residual is malformed (the CPU kernels
    // reject it too).
    HostTensor b32 = Shape({4}), w32 = Shape({4, 3, 3, 3}), r32 = Shape({1, 4, 8, 8});
    Status st = DnnSupports("Conv", relu, {&x, &w, &b32}, {&y});
    CHECK(st.code() == StatusCode::kInvalidArgument);
    CHECK(Contains(st.message(), "bias [4] is float32, expected " + std::string(DTypeName(dt))));
    st = DnnSupports("Conv", relu, {&x, &w32}, {&y});
    CHECK(st.code() == StatusCode::kInvalidArgument);
    CHECK(Contains(st.message(), "is float32, expected " + std::string(DTypeName(dt)) + " (input X's dtype)"));
    CHECK(DnnSupports("Conv", res, {&x, &w, &b, &r32}, {&y}).code() == StatusCode::kInvalidArgument);
    CHECK(DnnSupports("ConvTranspose", up, {&cx, &cw, &b32}, {&cy}).code() == StatusCode::kInvalidArgument);
    HostTensor py32 = Shape({1, 2, 3, 4});
    CHECK(DnnSupports("MaxPool", pool, {&px}, {&py32}).code() == StatusCode::kInvalidArgument);
  }
}

TEST_CASE("cuDNN SupportsWith: bfloat16 needs compute capability 8.0, float16 and float32 run anywhere") {
  const AttrMap pad1 = Attrs({{"pads", {1, 1, 1, 1}}});
  auto conv = [&pad1](DType dt, int cc) {
    HostTensor x = Shape({1, 3, 8, 8}, dt), w = Shape({4, 3, 3, 3}, dt), y = Shape({1, 4, 8, 8}, dt);
    DnnOptions opt;
    opt.compute_capability = cc;
    opt.max_workspace_bytes = 4096;
    std::vector<DeviceTensor> in = testing::DevViews({&x, &w}), out = testing::DevViews({&y});
    const size_t ws = DnnLibrary::WorkspaceFor(opt, "Conv", pad1, in, out);
    Status st = DnnLibrary::SupportsWith(opt, "Conv", pad1, in, out);
    CHECK((st.ok() ? ws == 4096 : ws == 0));  // a refused op plans no workspace
    return st;
  };
  CHECK(conv(DType::kBFloat16, 80).ok());
  CHECK(conv(DType::kBFloat16, 90).ok());
  Status st = conv(DType::kBFloat16, 75);
  CHECK(st.code() == StatusCode::kUnimplemented);
  CHECK(Contains(st.message(), "bfloat16 needs compute capability 8.0 or later, the device has 7.5"));
  st = conv(DType::kBFloat16, 0);
  CHECK(st.code() == StatusCode::kUnimplemented);
  CHECK(Contains(st.message(), "an unknown one"));
  for (int cc : {0, 61, 75, 90}) {
    CHECK(conv(DType::kFloat16, cc).ok());
    CHECK(conv(DType::kFloat32, cc).ok());
  }
  // Malformed ops keep their own error whatever the device.
  HostTensor x = Shape({1, 3, 8, 8}, DType::kBFloat16), w = Shape({4, 3, 3, 3}, DType::kBFloat16),
             y = Shape({1, 4, 7, 7}, DType::kBFloat16);
  DnnOptions old;
  old.compute_capability = 70;
  CHECK(DnnLibrary::SupportsWith(old, "Conv", pad1, testing::DevViews({&x, &w}), testing::DevViews({&y})).code() ==
        StatusCode::kInvalidArgument);
}

TEST_CASE("cuDNN Supports: ConvTranspose and pooling refusals") {
  HostTensor x = Shape({1, 3, 4, 4}), w = Shape({3, 2, 3, 3}), y = Shape({1, 2, 8, 8});
  CHECK(DnnSupports("ConvTranspose",
                 Attrs({{"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}, {"output_padding", {1, 1}}}), {&x, &w},
                 {&y})
            .ok());
  Status st =
      DnnSupports("ConvTranspose", Attrs({{"strides", {2, 2}}, {"output_shape", {8, 8}}}), {&x, &w}, {&y});
  CHECK(st.code() == StatusCode::kUnimplemented);
  CHECK(Contains(st.message(), "asymmetric"));
  // output_padding not below the stride (valid ONNX when below the dilation).
  // out = 1 * 3 + 1 + 5 - 2 = 7.
  HostTensor y7 = Shape({1, 2, 7, 7});
  st = DnnSupports("ConvTranspose",
                Attrs({{"dilations", {2, 2}}, {"output_padding", {1, 1}}, {"pads", {1, 1, 1, 1}}}), {&x, &w},
                {&y7});
  CHECK(st.code() == StatusCode::kUnimplemented);
  CHECK(Contains(st.message(), "output_padding"));
  AttrMap relu = Attrs({{"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}, {"output_padding", {1, 1}}});
  relu.SetString("epilogue_activation", "Relu");
  CHECK(DnnSupports("ConvTranspose", relu, {&x, &w}, {&y}).code() == StatusCode::kUnimplemented);

  HostTensor px = Shape({1, 2, 6, 7}), py = Shape({1, 2, 3, 4}), py_ceil = Shape({1, 2, 4, 4});
  const AttrMap pool = Attrs({{"kernel_shape", {3, 3}}, {"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}});
  CHECK(DnnSupports("MaxPool", pool, {&px}, {&py}).ok());
  CHECK(DnnSupports("AveragePool", pool, {&px}, {&py}).ok());
  st = DnnSupports("MaxPool", pool, {&px}, {&py_ceil});
  CHECK(st.code() == StatusCode::kUnimplemented);
  CHECK(Contains(st.message(), "ceil_mode"));
  HostTensor indices = Shape({1, 2, 3, 4}, DType::kInt64);
  CHECK(DnnSupports("MaxPool", pool, {&px}, {&py, &indices}).code() == StatusCode::kUnimplemented);
  AttrMap dil = pool;
  dil.SetInts("dilations", {2, 2});
  HostTensor py_dil = Shape({1, 2, 2, 3});
  CHECK(DnnSupports("MaxPool", dil, {&px}, {&py_dil}).code() == StatusCode::kUnimplemented);
  HostTensor pxi = Shape({1, 2, 6, 7}, DType::kInt8), pyi = Shape({1, 2, 3, 4}, DType::kInt8);
  CHECK(DnnSupports("MaxPool", pool, {&pxi}, {&pyi}).code() == StatusCode::kUnimplemented);
  AttrMap big_pad = Attrs({{"kernel_shape", {2, 2}}, {"pads", {2, 2, 2, 2}}});
  HostTensor py_big = Shape({1, 2, 9, 10});
  CHECK(DnnSupports("MaxPool", big_pad, {&px}, {&py_big}).code() == StatusCode::kUnimplemented);
}

TEST_CASE("cuDNN mapping: dims, windows and paths by hand") {
  DnnPlan p;
  SUBCASE("1-D conv becomes 2-D with a unit height") {
    HostTensor x = Shape({2, 3, 20}), w = Shape({5, 3, 4}), y = Shape({2, 5, 7});
    REQUIRE(PlanOf("Conv", Attrs({{"strides", {3}}, {"pads", {1, 1}}}), {&x, &w}, {&y}, &p).ok());
    CHECK(p.nb_dims == 4);
    CHECK(p.x == std::array<int32_t, 5>{2, 3, 1, 20, 0});
    CHECK(p.w == std::array<int32_t, 5>{5, 3, 1, 4, 0});
    CHECK(p.y == std::array<int32_t, 5>{2, 5, 1, 7, 0});
    CHECK(p.pad == std::array<int32_t, 3>{0, 1, 0});
    CHECK(p.stride == std::array<int32_t, 3>{1, 3, 0});
    CHECK(p.dilation == std::array<int32_t, 3>{1, 1, 0});
    CHECK(p.group == 1);
  }
  SUBCASE("3-D conv, grouped and dilated, with a bias and Relu") {
    HostTensor x = Shape({1, 4, 9, 9, 9}), w = Shape({6, 2, 3, 3, 3}), y = Shape({1, 6, 5, 5, 5}),
               b = Shape({6});
    AttrMap a = Attrs({{"group", {2}}, {"dilations", {2, 2, 2}}, {"pads", {0, 0, 0, 0, 0, 0}}});
    a.SetString("epilogue_activation", "Relu");
    REQUIRE(PlanOf("Conv", a, {&x, &w, &b}, {&y}, &p).ok());
    CHECK(p.nb_dims == 5);
    CHECK(p.y == std::array<int32_t, 5>{1, 6, 5, 5, 5});
    CHECK(p.dilation == std::array<int32_t, 3>{2, 2, 2});
    CHECK(p.group == 2);
    CHECK(p.bias);
    CHECK(p.relu);
    CHECK_FALSE(p.residual);
  }
  SUBCASE("Relu without a bias, residuals in each order") {
    HostTensor x = Shape({1, 2, 5, 5}), w = Shape({2, 2, 1, 1}), y = Shape({1, 2, 5, 5}),
               r = Shape({1, 2, 5, 5});
    HostTensor absent = Absent();
    AttrMap a = Attrs({{"epilogue_residual", {1}}});
    a.SetString("epilogue_activation", "Relu");
    REQUIRE(PlanOf("Conv", a, {&x, &w, &absent, &r}, {&y}, &p).ok());
    CHECK(p.relu);
    CHECK(p.residual);
    CHECK_FALSE(p.residual_first);
    a.SetString("epilogue_order", "bias,residual,act");
    REQUIRE(PlanOf("Conv", a, {&x, &w, &absent, &r}, {&y}, &p).ok());
    CHECK(p.residual_first);
  }
  SUBCASE("ConvTranspose is the backward data of Y -> X") {
    HostTensor x = Shape({1, 4, 5}), w = Shape({4, 3, 3}), y = Shape({1, 6, 7});
    REQUIRE(PlanOf("ConvTranspose", Attrs({{"group", {2}}}), {&x, &w}, {&y}, &p).ok());
    CHECK(p.op == DnnOp::kConvTranspose);
    CHECK(p.x == std::array<int32_t, 5>{1, 4, 1, 5, 0});
    CHECK(p.w == std::array<int32_t, 5>{4, 3, 1, 3, 0});
    CHECK(p.y == std::array<int32_t, 5>{1, 6, 1, 7, 0});
    CHECK(p.group == 2);
  }
  SUBCASE("pooling") {
    HostTensor x = Shape({1, 2, 6, 7}), y = Shape({1, 2, 3, 4});
    AttrMap a = Attrs(
        {{"kernel_shape", {3, 3}}, {"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}, {"count_include_pad", {1}}});
    REQUIRE(PlanOf("AveragePool", a, {&x}, {&y}, &p).ok());
    CHECK(p.op == DnnOp::kAveragePool);
    CHECK(p.count_include_pad);
    CHECK(p.window == std::array<int32_t, 3>{3, 3, 0});
    CHECK(p.pad == std::array<int32_t, 3>{1, 1, 0});
    CHECK(p.stride == std::array<int32_t, 3>{2, 2, 0});
    REQUIRE(PlanOf("MaxPool", a, {&x}, {&y}, &p).ok());
    CHECK(p.op == DnnOp::kMaxPool);
    CHECK_FALSE(p.count_include_pad);
  }
  SUBCASE("empty outputs are accepted as no-ops") {
    HostTensor x = Shape({0, 3, 8, 8}), w = Shape({4, 3, 3, 3}), y = Shape({0, 4, 6, 6});
    REQUIRE(PlanOf("Conv", {}, {&x, &w}, {&y}, &p).ok());
    CHECK(p.empty);
  }
}

TEST_CASE("cuDNN int8: kiln.NhwcConvInt8 as INT8_EXT_CONFIG, NCHW-ordered dims, and its refusals") {
  constexpr std::string_view kOp = "kiln.NhwcConvInt8";
  // X [2, 9, 9, 8] NHWC, W [12, 3, 3, 8], stride 2, pad 1: Y [2, 5, 5, 12].
  HostTensor x = Shape({2, 9, 9, 8}, DType::kInt8), w = Shape({12, 3, 3, 8}, DType::kInt8);
  HostTensor y = Shape({2, 5, 5, 12});
  const AttrMap a = Attrs({{"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}});
  DnnPlan p;
  REQUIRE(PlanOf(kOp, a, {&x, &w}, {&y}, &p).ok());
  CHECK(p.op == DnnOp::kConvInt8);
  CHECK(p.dtype == DType::kInt8);
  CHECK(p.x == std::array<int32_t, 5>{2, 8, 9, 9, 0});
  CHECK(p.w == std::array<int32_t, 5>{12, 8, 3, 3, 0});
  CHECK(p.y == std::array<int32_t, 5>{2, 12, 5, 5, 0});
  CHECK((p.pad[0] == 1 && p.pad[1] == 1 && p.stride[0] == 2 && p.stride[1] == 2));
  DnnOptions pascal, turing;
  pascal.compute_capability = 60;
  turing.compute_capability = 75;
  std::vector<DeviceTensor> ins = testing::DevViews({&x, &w}), outs = testing::DevViews({&y});
  CHECK(DnnLibrary::SupportsWith(turing, kOp, a, ins, outs).ok());
  CHECK(DnnLibrary::SupportsWith(pascal, kOp, a, ins, outs).message() ==
        "kiln.NhwcConvInt8: cuDNN's int8 convolution needs compute capability 6.1 or later, the device has 6.0");
  // Refused: channels not multiples of 4; malformed: Y of the wrong size or dtype.
  HostTensor x6 = Shape({2, 9, 9, 6}, DType::kInt8), w6 = Shape({12, 3, 3, 6}, DType::kInt8);
  CHECK(PlanOf(kOp, a, {&x6, &w6}, {&y}, &p).message() ==
        "kiln.NhwcConvInt8: cuDNN's int8 convolution needs input and output channels that are multiples of 4, found "
        "6 and 12");
  HostTensor y4 = Shape({2, 4, 4, 12}), yi = Shape({2, 5, 5, 12}, DType::kInt32);
  CHECK(PlanOf(kOp, a, {&x, &w}, {&y4}, &p).code() == StatusCode::kInvalidArgument);
  CHECK(PlanOf(kOp, a, {&x, &w}, {&yi}, &p).code() == StatusCode::kInvalidArgument);
}

TEST_CASE("cuDNN Workspace: the cap for convolutions, 0 for pooling and refused ops") {
  DnnOptions opt;
  opt.max_workspace_bytes = 777;
  HostTensor x = Shape({1, 3, 8, 8}), w = Shape({4, 3, 3, 3}), y = Shape({1, 4, 6, 6});
  std::vector<DeviceTensor> in = testing::DevViews({&x, &w}), out = testing::DevViews({&y});
  CHECK(DnnLibrary::WorkspaceFor(opt, "Conv", {}, in, out) == 777);
  AttrMap sig;
  sig.SetString("epilogue_activation", "Sigmoid");
  CHECK(DnnLibrary::WorkspaceFor(opt, "Conv", sig, in, out) == 0);
  HostTensor py = Shape({1, 3, 4, 4});
  std::vector<DeviceTensor> pin = testing::DevViews({&x}), pout = testing::DevViews({&py});
  CHECK(DnnLibrary::WorkspaceFor(opt, "MaxPool", Attrs({{"kernel_shape", {2, 2}}, {"strides", {2, 2}}}), pin,
                                  pout) == 0);
}

// ---- The mapping, evaluated --------------------------------------------------------------------

// Offset of (n, c, s...) in a packed cuDNN tensor of dims d (nb dims).
int64_t Off(const std::array<int32_t, 5>& d, int nb, int64_t n, int64_t c, const int64_t* s) {
  int64_t o = n * d[1] + c;
  for (int i = 0; i < nb - 2; ++i) o = o * d[2 + i] + s[i];
  return o;
}
int64_t SpatialCount(const std::array<int32_t, 5>& d, int nb) {
  int64_t n = 1;
  for (int i = 2; i < nb; ++i) n *= d[i];
  return n;
}
void Unravel(int64_t flat, const std::array<int32_t, 5>& d, int nb, int64_t* s) {
  for (int i = nb - 3; i >= 0; --i) {
    s[i] = flat % d[2 + i];
    flat /= d[2 + i];
  }
}
// cuDNN's forward output size along a spatial axis, which its calls check against the descriptors.
int64_t ForwardOut(int64_t in, int32_t pad, int32_t k, int32_t stride, int32_t dil) {
  return (in + 2 * pad - ((k - 1) * dil + 1)) / stride + 1;
}

// cudnnConvolutionForward (CUDNN_CROSS_CORRELATION, zero padding, groups), then the epilogue
// steps the plan records in ONNX order: + bias[k], (+ R), Relu, (+ R).
void EvalConv(const DnnPlan& p, const float* x, const float* w, const float* bias, const float* r, float* y) {
  const int nb = p.nb_dims, sr = nb - 2;
  const int64_t N = p.x[0], C = p.x[1], K = p.w[0], Cg = p.w[1], G = p.group, Kg = K / G;
  REQUIRE(C == Cg * G);
  REQUIRE(p.y[0] == N);
  REQUIRE(p.y[1] == K);
  for (int i = 0; i < sr; ++i)
    REQUIRE(p.y[2 + i] == ForwardOut(p.x[2 + i], p.pad[i], p.w[2 + i], p.stride[i], p.dilation[i]));
  const int64_t taps = SpatialCount(p.w, nb), outs = SpatialCount(p.y, nb);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t k = 0; k < K; ++k) {
      const int64_t g = k / Kg;
      for (int64_t of = 0; of < outs; ++of) {
        int64_t o[3], t[3], in[3];
        Unravel(of, p.y, nb, o);
        double acc = 0;
        for (int64_t c = 0; c < Cg; ++c) {
          for (int64_t tf = 0; tf < taps; ++tf) {
            Unravel(tf, p.w, nb, t);
            bool inside = true;
            for (int i = 0; i < sr; ++i) {
              in[i] = o[i] * p.stride[i] - p.pad[i] + t[i] * p.dilation[i];
              inside = inside && in[i] >= 0 && in[i] < p.x[2 + i];
            }
            if (inside) acc += double(x[Off(p.x, nb, n, g * Cg + c, in)]) * double(w[Off(p.w, nb, k, c, t)]);
          }
        }
        const int64_t yo = Off(p.y, nb, n, k, o);
        if (p.bias) acc += bias[k];
        if (p.residual && p.residual_first) acc += r[yo];
        if (p.relu) acc = acc > 0 ? acc : 0;
        if (p.residual && !p.residual_first) acc += r[yo];
        y[yo] = static_cast<float>(acc);
      }
    }
  }
}

// cudnnConvolutionBackwardData: dx = the adjoint of the convolution dx -> dy with filter w
// (each dy element scatters w * dy onto the dx taps it was computed from), then + bias.
void EvalBackwardData(const DnnPlan& p, const float* dy, const float* w, const float* bias, float* dx) {
  const int nb = p.nb_dims, sr = nb - 2;
  const int64_t N = p.x[0], K = p.x[1], Cg = p.w[1], G = p.group, Kg = K / G;
  REQUIRE(p.w[0] == K);
  REQUIRE(p.y[1] == Cg * G);
  for (int i = 0; i < sr; ++i)
    REQUIRE(p.x[2 + i] == ForwardOut(p.y[2 + i], p.pad[i], p.w[2 + i], p.stride[i], p.dilation[i]));
  const int64_t taps = SpatialCount(p.w, nb), ins = SpatialCount(p.x, nb), outs = SpatialCount(p.y, nb);
  std::vector<double> acc(static_cast<size_t>(N * p.y[1] * outs), 0.0);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t k = 0; k < K; ++k) {
      const int64_t g = k / Kg;
      for (int64_t of = 0; of < ins; ++of) {
        int64_t o[3], t[3], pos[3];
        Unravel(of, p.x, nb, o);
        const double v = dy[Off(p.x, nb, n, k, o)];
        for (int64_t c = 0; c < Cg; ++c) {
          for (int64_t tf = 0; tf < taps; ++tf) {
            Unravel(tf, p.w, nb, t);
            bool inside = true;
            for (int i = 0; i < sr; ++i) {
              pos[i] = o[i] * p.stride[i] - p.pad[i] + t[i] * p.dilation[i];
              inside = inside && pos[i] >= 0 && pos[i] < p.y[2 + i];
            }
            if (inside) acc[Off(p.y, nb, n, g * Cg + c, pos)] += v * double(w[Off(p.w, nb, k, c, t)]);
          }
        }
      }
    }
  }
  for (int64_t i = 0; i < static_cast<int64_t>(acc.size()); ++i) {
    const int64_t ch = (i / outs) % p.y[1];
    dx[i] = static_cast<float>(acc[i] + (p.bias ? bias[ch] : 0.0f));
  }
}

// cudnnPoolingForward: MAX over the taps inside the input (padding never wins), AVERAGE over
// the window size (INCLUDE_PADDING) or the taps inside (EXCLUDE_PADDING).
void EvalPool(const DnnPlan& p, const float* x, float* y) {
  const int nb = p.nb_dims, sr = nb - 2;
  for (int i = 0; i < sr; ++i)
    REQUIRE(p.y[2 + i] == ForwardOut(p.x[2 + i], p.pad[i], p.window[i], p.stride[i], 1));
  std::array<int32_t, 5> win{1, 1, 0, 0, 0};
  int64_t window = 1;
  for (int i = 0; i < sr; ++i) {
    win[2 + i] = p.window[i];
    window *= p.window[i];
  }
  const int64_t outs = SpatialCount(p.y, nb);
  for (int64_t n = 0; n < p.x[0]; ++n) {
    for (int64_t c = 0; c < p.x[1]; ++c) {
      for (int64_t of = 0; of < outs; ++of) {
        int64_t o[3], t[3], pos[3];
        Unravel(of, p.y, nb, o);
        double sum = 0, best = -std::numeric_limits<double>::infinity();
        int64_t count = 0;
        for (int64_t tf = 0; tf < window; ++tf) {
          Unravel(tf, win, nb, t);
          bool inside = true;
          for (int i = 0; i < sr; ++i) {
            pos[i] = o[i] * p.stride[i] - p.pad[i] + t[i];
            inside = inside && pos[i] >= 0 && pos[i] < p.x[2 + i];
          }
          if (!inside) continue;
          const double v = x[Off(p.x, nb, n, c, pos)];
          sum += v;
          best = std::max(best, v);
          ++count;
        }
        double v = p.op == DnnOp::kMaxPool ? best : sum / double(p.count_include_pad ? window : count);
        y[Off(p.y, nb, n, c, o)] = static_cast<float>(v);
      }
    }
  }
}

struct DnnCase {
  std::string op;
  AttrMap attrs;
  std::vector<HostTensor> in;
  std::vector<int64_t> y;
};

void CheckDnnAgainstCpu(DnnCase c) {
  CAPTURE(c.op);
  std::vector<const HostTensor*> in;
  for (const HostTensor& t : c.in) in.push_back(&t);
  HostTensor want = Zeros(c.y), got = Zeros(c.y);
  DnnPlan p;
  Status st = PlanOf(c.op, c.attrs, in, {&want}, &p);
  REQUIRE_MESSAGE(st.ok(), st.ToString());
  std::vector<HostTensor*> cpu_in;
  for (HostTensor& t : c.in) cpu_in.push_back(&t);
  st = RunCpu(c.op, c.attrs, cpu_in, {&want});
  REQUIRE_MESSAGE(st.ok(), st.ToString());
  auto data = [&c](size_t i) -> const float* {
    return i < c.in.size() && c.in[i].present() ? c.in[i].v.data() : nullptr;
  };
  if (p.op == DnnOp::kConv) {
    EvalConv(p, data(0), data(1), data(2), data(3), got.v.data());
  } else if (p.op == DnnOp::kConvTranspose) {
    EvalBackwardData(p, data(0), data(1), data(2), got.v.data());
  } else {
    EvalPool(p, data(0), got.v.data());
  }
  CHECK(MaxRelDiff(got.v, want.v) < 1e-5);
}

TEST_CASE("cuDNN mapping evaluated per the documented semantics equals the CPU Conv") {
  uint32_t seed = 1;
  auto r = [&seed](std::vector<int64_t> dims) { return Random(std::move(dims), seed++); };
  CheckDnnAgainstCpu(
      {"Conv", Attrs({{"pads", {1, 1, 1, 1}}}), {r({1, 3, 9, 9}), r({4, 3, 3, 3}), r({4})}, {1, 4, 9, 9}});
  CheckDnnAgainstCpu(
      {"Conv",
       Attrs({{"pads", {2, 2, 2, 2}}, {"strides", {2, 2}}, {"dilations", {2, 2}}, {"group", {2}}}),
       {r({2, 4, 11, 10}), r({6, 2, 3, 3})},
       {2, 6, 6, 5}});
  CheckDnnAgainstCpu({"Conv",
                   Attrs({{"pads", {1, 1}}, {"strides", {3}}}),
                   {r({2, 3, 20}), r({5, 3, 4}), r({5})},
                   {2, 5, 7}});
  CheckDnnAgainstCpu({"Conv",
                   Attrs({{"pads", {1, 1, 1, 1, 1, 1}}}),
                   {r({1, 2, 5, 6, 7}), r({3, 2, 3, 3, 3})},
                   {1, 3, 5, 6, 7}});
  CheckDnnAgainstCpu(
      {"Conv", Attrs({}, {{"auto_pad", "SAME_LOWER"}}), {r({1, 2, 6, 6}), r({3, 2, 3, 3})}, {1, 3, 6, 6}});
  CheckDnnAgainstCpu({"Conv",
                   Attrs({{"pads", {1, 1, 1, 1}}, {"group", {4}}}),
                   {r({1, 4, 8, 8}), r({4, 1, 3, 3}), r({4})},
                   {1, 4, 8, 8}});
  // The epilogue steps: bias + Relu, Relu alone, and residuals in each order.
  for (const char* order : {"bias,act,residual", "bias,residual,act"}) {
    CAPTURE(std::string(order));
    AttrMap a = Attrs({{"pads", {1, 1, 1, 1}}});
    a.SetString("epilogue_activation", "Relu");
    CheckDnnAgainstCpu({"Conv", a, {r({1, 3, 7, 7}), r({4, 3, 3, 3}), r({4})}, {1, 4, 7, 7}});
    CheckDnnAgainstCpu({"Conv", a, {r({1, 3, 7, 7}), r({4, 3, 3, 3})}, {1, 4, 7, 7}});
    a.SetInt("epilogue_residual", 1);
    a.SetString("epilogue_order", order);
    CheckDnnAgainstCpu({"Conv", a, {r({1, 3, 7, 7}), r({4, 3, 3, 3}), r({4}), r({1, 4, 7, 7})}, {1, 4, 7, 7}});
    CheckDnnAgainstCpu({"Conv", a, {r({1, 3, 7, 7}), r({4, 3, 3, 3}), Absent(), r({1, 4, 7, 7})}, {1, 4, 7, 7}});
    AttrMap no_act = Attrs({{"pads", {1, 1, 1, 1}}, {"epilogue_residual", {1}}});
    no_act.SetString("epilogue_order", order);
    CheckDnnAgainstCpu(
        {"Conv", no_act, {r({1, 3, 7, 7}), r({4, 3, 3, 3}), r({4}), r({1, 4, 7, 7})}, {1, 4, 7, 7}});
  }
}

TEST_CASE("cuDNN mapping evaluated per the documented semantics equals the CPU ConvTranspose") {
  uint32_t seed = 200;
  auto r = [&seed](std::vector<int64_t> dims) { return Random(std::move(dims), seed++); };
  CheckDnnAgainstCpu({"ConvTranspose",
                   Attrs({{"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}, {"output_padding", {1, 1}}}),
                   {r({1, 3, 4, 4}), r({3, 2, 3, 3}), r({2})},
                   {1, 2, 8, 8}});
  CheckDnnAgainstCpu({"ConvTranspose", Attrs({{"group", {2}}}), {r({2, 4, 5}), r({4, 3, 3})}, {2, 6, 7}});
  CheckDnnAgainstCpu(
      {"ConvTranspose", Attrs({{"dilations", {2, 2}}}), {r({1, 2, 3, 3}), r({2, 2, 2, 2})}, {1, 2, 5, 5}});
  CheckDnnAgainstCpu({"ConvTranspose",
                   Attrs({{"strides", {2, 2}}, {"output_shape", {8, 8}}, {"output_padding", {1, 1}}}),
                   {r({1, 1, 4, 4}), r({1, 1, 3, 3}), r({1})},
                   {1, 1, 8, 8}});
  CheckDnnAgainstCpu({"ConvTranspose",
                   Attrs({{"strides", {2, 1, 2}}, {"pads", {0, 1, 0, 0, 1, 0}}}),
                   {r({1, 2, 3, 4, 3}), r({2, 3, 2, 3, 2})},
                   {1, 3, 6, 4, 6}});
}

TEST_CASE("cuDNN mapping evaluated per the documented semantics equals the CPU pooling") {
  uint32_t seed = 300;
  auto r = [&seed](std::vector<int64_t> dims) { return Random(std::move(dims), seed++); };
  const AttrMap k3s2p1 = Attrs({{"kernel_shape", {3, 3}}, {"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}});
  CheckDnnAgainstCpu({"MaxPool", k3s2p1, {r({2, 3, 7, 8})}, {2, 3, 4, 4}});
  CheckDnnAgainstCpu({"AveragePool", k3s2p1, {r({2, 3, 7, 8})}, {2, 3, 4, 4}});
  AttrMap include = k3s2p1;
  include.SetInt("count_include_pad", 1);
  CheckDnnAgainstCpu({"AveragePool", include, {r({2, 3, 7, 8})}, {2, 3, 4, 4}});
  CheckDnnAgainstCpu(
      {"MaxPool", Attrs({{"kernel_shape", {3}}}, {{"auto_pad", "SAME_UPPER"}}), {r({1, 2, 9})}, {1, 2, 9}});
  CheckDnnAgainstCpu({"AveragePool",
                   Attrs({{"kernel_shape", {2, 2, 2}}, {"strides", {2, 2, 2}}}),
                   {r({1, 2, 4, 6, 5})},
                   {1, 2, 2, 3, 2}});
  // All-negative input: the max must ignore the padding's zeros.
  HostTensor neg = r({1, 1, 5, 5});
  for (float& v : neg.v) v = -1.0f - std::fabs(v);
  CheckDnnAgainstCpu(
      {"MaxPool", Attrs({{"kernel_shape", {3, 3}}, {"pads", {1, 1, 1, 1}}}), {neg}, {1, 1, 5, 5}});
}

// ---- Create without a device --------------------------------------------------------------------

TEST_CASE("cuDNN: Create fails cleanly without a driver or device") {
  Result<const Dnn*> dnn = LoadDnn();
  if (!dnn.ok()) {
    MESSAGE("cuDNN not loadable here (" << dnn.status().ToString() << "); nothing to create");
    CHECK(dnn.status().code() == StatusCode::kFailedPrecondition);
    return;
  }
  Result<std::unique_ptr<DnnLibrary>> ex = DnnLibrary::Create(**dnn);
  if (kiln::testing::GpuAvailable()) {
    MESSAGE("GPU present; Create: " << (ex.ok() ? "OK" : ex.status().ToString()));
    return;
  }
  REQUIRE_FALSE(ex.ok());
  CHECK(ex.status().code() == StatusCode::kDeviceError);
  CHECK(Contains(ex.status().message(), "cudnnCreate"));
  CHECK(Contains(ex.status().message(), "cuDNN"));
  MESSAGE(ex.status().ToString());
}

// ---- On a GPU (never run yet) ---------------------------------------------------------------

// Runs the case on the GPU with every tensor in `dt` (its values rounded to it) and compares with
// the CPU kernel's float32 result on the same (rounded) values.
void CheckDnnOnGpu(testing::GpuSession& gpu, DnnLibrary& ex, DnnCase c, double tolerance,
                DType dt = DType::kFloat32) {
  CAPTURE(c.op);
  CAPTURE(DTypeName(dt));
  for (HostTensor& t : c.in) t = testing::Rounded(std::move(t), dt);
  std::vector<HostTensor> ref;
  for (const HostTensor& t : c.in) ref.push_back(testing::AsFloat32(t));
  std::vector<HostTensor*> cpu_in;
  for (HostTensor& t : ref) cpu_in.push_back(&t);
  HostTensor want = Zeros(c.y);
  Status st = RunCpu(c.op, c.attrs, cpu_in, {&want});
  REQUIRE_MESSAGE(st.ok(), st.ToString());
  std::vector<DeviceTensor> in;
  for (const HostTensor& t : c.in) in.push_back(t.Dev(gpu.Upload(t)));
  HostTensor y = Zeros(c.y);
  y.dtype = dt;
  const CUdeviceptr y_dev = gpu.Alloc(y.v.size() * DTypeSize(dt));
  DeviceTensor out[] = {y.Dev(y_dev)};
  Result<size_t> exact = ex.Prepare(c.op, c.attrs, in, out);
  REQUIRE_MESSAGE(exact.ok(), exact.status().ToString());
  CHECK(*exact <= ex.Workspace(c.op, c.attrs, in, out));
  const size_t ws_bytes = *exact;
  const CUdeviceptr ws = ws_bytes ? gpu.Alloc(ws_bytes) : 0;
  OpCall call{c.attrs, in, out, gpu.stream(), ws, ws_bytes};
  st = ex.Run(c.op, call, "gpu_test");
  REQUIRE_MESSAGE(st.ok(), st.ToString());
  std::vector<float> got = gpu.Download(y_dev, y.count(), dt);
  CHECK(MaxRelDiff(got, want.v) < tolerance);
}

TEST_CASE("[gpu] cuDNN Conv, ConvTranspose and pooling match the CPU kernels") {
  KILN_REQUIRE_GPU();
  testing::GpuSession gpu;
  Result<const Dnn*> dnn = LoadDnn();
  REQUIRE_MESSAGE(dnn.ok(), dnn.status().ToString());
  auto created = DnnLibrary::Create(*dnn.value());
  REQUIRE_MESSAGE(created.ok(), created.status().ToString());
  DnnLibrary& ex = **created;
  uint32_t seed = 5000;
  auto r = [&seed](std::vector<int64_t> dims) { return Random(std::move(dims), seed++); };
  constexpr double kTol = 1e-4;
  const AttrMap pad1 = Attrs({{"pads", {1, 1, 1, 1}}});
  CheckDnnOnGpu(gpu, ex, {"Conv", pad1, {r({2, 16, 28, 28}), r({32, 16, 3, 3}), r({32})}, {2, 32, 28, 28}},
             kTol);
  CheckDnnOnGpu(gpu, ex,
             {"Conv",
              Attrs({{"pads", {2, 2, 2, 2}}, {"strides", {2, 2}}, {"dilations", {2, 2}}, {"group", {2}}}),
              {r({2, 8, 21, 20}), r({12, 4, 3, 3})},
              {2, 12, 11, 10}},
             kTol);
  CheckDnnOnGpu(gpu, ex,
             {"Conv",
              Attrs({{"pads", {1, 1}}, {"strides", {3}}}),
              {r({2, 3, 50}), r({5, 3, 4}), r({5})},
              {2, 5, 17}},
             kTol);
  CheckDnnOnGpu(gpu, ex,
             {"Conv",
              Attrs({{"pads", {1, 1, 1, 1}}, {"group", {8}}}),
              {r({1, 8, 16, 16}), r({8, 1, 3, 3})},
              {1, 8, 16, 16}},
             kTol);
  for (const char* order : {"bias,act,residual", "bias,residual,act"}) {
    CAPTURE(std::string(order));
    AttrMap a = pad1;
    a.SetString("epilogue_activation", "Relu");
    CheckDnnOnGpu(gpu, ex, {"Conv", a, {r({1, 8, 14, 14}), r({16, 8, 3, 3}), r({16})}, {1, 16, 14, 14}}, kTol);
    CheckDnnOnGpu(gpu, ex, {"Conv", a, {r({1, 8, 14, 14}), r({16, 8, 3, 3})}, {1, 16, 14, 14}}, kTol);
    a.SetInt("epilogue_residual", 1);
    a.SetString("epilogue_order", order);
    CheckDnnOnGpu(
        gpu, ex,
        {"Conv", a, {r({1, 8, 14, 14}), r({16, 8, 3, 3}), r({16}), r({1, 16, 14, 14})}, {1, 16, 14, 14}},
        kTol);
    CheckDnnOnGpu(
        gpu, ex,
        {"Conv", a, {r({1, 8, 14, 14}), r({16, 8, 3, 3}), Absent(), r({1, 16, 14, 14})}, {1, 16, 14, 14}},
        kTol);
  }
  CheckDnnOnGpu(gpu, ex,
             {"ConvTranspose",
              Attrs({{"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}, {"output_padding", {1, 1}}}),
              {r({1, 8, 10, 10}), r({8, 4, 3, 3}), r({4})},
              {1, 4, 20, 20}},
             kTol);
  CheckDnnOnGpu(gpu, ex, {"ConvTranspose", Attrs({{"group", {2}}}), {r({2, 4, 15}), r({4, 3, 3})}, {2, 6, 17}},
             kTol);
  const AttrMap k3s2p1 = Attrs({{"kernel_shape", {3, 3}}, {"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}});
  CheckDnnOnGpu(gpu, ex, {"MaxPool", k3s2p1, {r({2, 16, 27, 28})}, {2, 16, 14, 14}}, kTol);
  CheckDnnOnGpu(gpu, ex, {"AveragePool", k3s2p1, {r({2, 16, 27, 28})}, {2, 16, 14, 14}}, kTol);
  AttrMap include = k3s2p1;
  include.SetInt("count_include_pad", 1);
  CheckDnnOnGpu(gpu, ex, {"AveragePool", include, {r({2, 16, 27, 28})}, {2, 16, 14, 14}}, kTol);
  const size_t before = ex.cached_plans();
  CheckDnnOnGpu(gpu, ex, {"MaxPool", k3s2p1, {r({2, 16, 27, 28})}, {2, 16, 14, 14}}, kTol);
  CHECK(ex.cached_plans() == before);
}

TEST_CASE("[gpu] cuDNN float16 and bfloat16 Conv, ConvTranspose and pooling match the CPU kernels") {
  KILN_REQUIRE_GPU();
  testing::GpuSession gpu;
  Result<const Dnn*> dnn = LoadDnn();
  REQUIRE_MESSAGE(dnn.ok(), dnn.status().ToString());
  Result<const Driver*> drv = LoadDriver();
  REQUIRE_MESSAGE(drv.ok(), drv.status().ToString());
  Result<DeviceInfo> dev = QueryDevice(**drv, 0);
  REQUIRE_MESSAGE(dev.ok(), dev.status().ToString());
  DnnOptions options;
  options.compute_capability = dev->cc_major * 10 + dev->cc_minor;
  auto created = DnnLibrary::Create(*dnn.value(), options);
  REQUIRE_MESSAGE(created.ok(), created.status().ToString());
  DnnLibrary& ex = **created;
  uint32_t seed = 7000;
  auto r = [&seed](std::vector<int64_t> dims) { return Random(std::move(dims), seed++); };
  // The reference is float32 on the same rounded inputs, so the difference is the output's
  // rounding (2^-11 relative for float16, 2^-8 for bfloat16; MaxRelDiff is relative to 1 + |ref|)
  // plus, where the epilogue takes separate calls, the rounding of the intermediate Y.
  for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
    if (dt == DType::kBFloat16 && options.compute_capability < 80) {
      MESSAGE("bfloat16 skipped: compute capability " << options.compute_capability << " (needs 80)");
      continue;
    }
    const double tol = dt == DType::kFloat16 ? 4e-3 : 3e-2;
    const AttrMap pad1 = Attrs({{"pads", {1, 1, 1, 1}}});
    CheckDnnOnGpu(gpu, ex, {"Conv", pad1, {r({2, 16, 28, 28}), r({32, 16, 3, 3}), r({32})}, {2, 32, 28, 28}}, tol,
               dt);
    CheckDnnOnGpu(gpu, ex,
               {"Conv",
                Attrs({{"pads", {2, 2, 2, 2}}, {"strides", {2, 2}}, {"dilations", {2, 2}}, {"group", {2}}}),
                {r({2, 8, 21, 20}), r({12, 4, 3, 3})},
                {2, 12, 11, 10}},
               tol, dt);
    CheckDnnOnGpu(gpu, ex, {"Conv", Attrs({{"pads", {1, 1}}, {"strides", {3}}}), {r({2, 3, 50}), r({5, 3, 4}), r({5})},
                         {2, 5, 17}},
               tol, dt);
    for (const char* order : {"bias,act,residual", "bias,residual,act"}) {
      CAPTURE(std::string(order));
      AttrMap a = pad1;
      a.SetString("epilogue_activation", "Relu");
      CheckDnnOnGpu(gpu, ex, {"Conv", a, {r({1, 8, 14, 14}), r({16, 8, 3, 3}), r({16})}, {1, 16, 14, 14}}, tol, dt);
      a.SetInt("epilogue_residual", 1);
      a.SetString("epilogue_order", order);
      CheckDnnOnGpu(gpu, ex,
                 {"Conv", a, {r({1, 8, 14, 14}), r({16, 8, 3, 3}), r({16}), r({1, 16, 14, 14})}, {1, 16, 14, 14}},
                 tol, dt);
    }
    CheckDnnOnGpu(gpu, ex,
               {"ConvTranspose",
                Attrs({{"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}, {"output_padding", {1, 1}}}),
                {r({1, 8, 10, 10}), r({8, 4, 3, 3}), r({4})},
                {1, 4, 20, 20}},
               tol, dt);
    const AttrMap k3s2p1 = Attrs({{"kernel_shape", {3, 3}}, {"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}});
    CheckDnnOnGpu(gpu, ex, {"MaxPool", k3s2p1, {r({2, 16, 27, 28})}, {2, 16, 14, 14}}, tol, dt);
    CheckDnnOnGpu(gpu, ex, {"AveragePool", k3s2p1, {r({2, 16, 27, 28})}, {2, 16, 14, 14}}, tol, dt);
  }
}

}  // namespace
}  // namespace kiln::cuda

#endif  // KILN_HAVE_CUDA
