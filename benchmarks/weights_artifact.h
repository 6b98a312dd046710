// The benchmarks' artifact of one weight (load_benchmark, signature_benchmark): y = Add(x, w)
// over float32, its weight `mb` MB of bytes that compress badly, built with the test artifact
// builder; and the timing of its Model::Load.
#pragma once

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/runtime.h"
#include "runtime/artifact_header.h"
#include "tests/runtime/artifact_builder_test_util.h"

namespace kiln {

inline constexpr int64_t kMB = 1'000'000;

// y = Add(x, w) over float32[n], n = mb * 250000: one weight of `mb` MB.
inline testing::ArtifactSpec WeightsSpec(int64_t mb) {
  using testing::E;
  using testing::T;
  const int64_t n = mb * kMB / 4;
  testing::ArtifactSpec a;
  a.format_version = kFormatVersion;  // the checksum the compiler writes today
  a.inputs = {{"x", DType::kFloat32, {n}, {""}}};
  a.outputs = {{"y", DType::kFloat32, {n}, {""}}};
  std::vector<uint8_t> bytes(static_cast<size_t>(mb * kMB));
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 131 + 7);
  a.weights = {{"w", DType::kFloat32, {n}, std::move(bytes)}};
  testing::EntrySpec e;
  e.checks = {{"x", DType::kFloat32, {testing::Const(n)}}};
  // Exprs: 0 n, 1 0 (y's offset), 2 n * 4 (arena bytes).
  e.exprs = {E(fb::ExprOp::Const, n), E(fb::ExprOp::Const, 0), E(fb::ExprOp::Const, n * 4)};
  e.tensors = {T("x", DType::kFloat32, {0}, fb::Storage::Input, 0),
               T("w", DType::kFloat32, {0}, fb::Storage::Weight, 0),
               T("y", DType::kFloat32, {0}, fb::Storage::Arena, 0, 1)};
  e.instructions = {{"Add", "add0", {0, 1}, {2}, {}, -1, {}, {}}};
  e.inputs = {0};
  e.outputs = {2};
  e.arena_bytes = 2;
  a.entries = {e};
  return a;
}

// One Model::Load of `path`, its wall time set as the iteration's manual time and added to
// *seconds; false, the benchmark skipped with Load's error, when it fails.
inline bool TimedLoad(benchmark::State& state, const std::string& path, const LoadOptions& options, double* seconds) {
  const auto start = std::chrono::steady_clock::now();
  Result<Model> m = Model::Load(path, options);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!m.ok()) {
    state.SkipWithError(m.status().ToString().c_str());
    return false;
  }
  state.SetIterationTime(s);
  *seconds += s;
  return true;
}

}  // namespace kiln
