// An artifact whose cost is almost all entry selection, shared by the run-allocation test
// and benchmarks/prologue_benchmark.cc:
//
//   ArtifactSpec spec = MultiEntrySpec(/*inputs=*/4, /*entries=*/16);
//   // x0..x3: float32[N, 3, H, W]; y = Identity(x0)
//   // entries 0..14 fix N to 2..16, entry 15 takes N in [1, 64]
//
// Every input has the same shape and shares the symbols N, H, W, so the first input binds
// them and each later one checks equality. Entry e < entries-1 fixes N to e + 2, so a call
// with N = 1 fails every one of them on input 0 dim 0 and hits the last entry; a call with
// N = e + 2 hits entry e.
#pragma once

#include <string>

#include "tests/runtime/artifact_builder_test_util.h"

namespace kiln::testing {

inline ArtifactSpec MultiEntrySpec(int num_inputs, int num_entries) {
  ArtifactSpec a;
  for (int k = 0; k < num_inputs; ++k)
    a.inputs.push_back({"x" + std::to_string(k), DType::kFloat32, {-1, 3, -1, -1}, {"N", "", "H", "W"}});
  a.outputs = {{"y", DType::kFloat32, {-1, 3, -1, -1}, {"N", "", "H", "W"}}};
  for (int e = 0; e < num_entries; ++e) {
    const bool last = e == num_entries - 1;
    EntrySpec s;
    s.name = last ? "default" : "N=" + std::to_string(e + 2);
    s.symbols = {"N", "H", "W"};
    const DimSpec n = last ? Sym(0, 1, 64) : Const(e + 2);
    // Exprs: 0 N, 1 3, 2 H, 3 W, 4 0 (y's offset), 5 12, 6..8 N*12*H*W (arena bytes).
    s.exprs = {last ? E(fb::ExprOp::Var, 0) : E(fb::ExprOp::Const, e + 2),
               E(fb::ExprOp::Const, 3), E(fb::ExprOp::Var, 1), E(fb::ExprOp::Var, 2),
               E(fb::ExprOp::Const, 0), E(fb::ExprOp::Const, 12), E(fb::ExprOp::Mul, 0, 5),
               E(fb::ExprOp::Mul, 6, 2), E(fb::ExprOp::Mul, 7, 3)};
    for (int k = 0; k < num_inputs; ++k) {
      s.checks.push_back({"x" + std::to_string(k), DType::kFloat32, {n, Const(3), Sym(1, 1, 1024), Sym(2)}});
      s.tensors.push_back(T("x" + std::to_string(k), DType::kFloat32, {0, 1, 2, 3}, fb::Storage::Input, k));
      s.inputs.push_back(k);
    }
    s.tensors.push_back(T("y", DType::kFloat32, {0, 1, 2, 3}, fb::Storage::Arena, 0, 4));
    InstructionSpec identity;
    identity.op = "Identity";
    identity.name = "identity0";
    identity.inputs = {0};
    identity.outputs = {num_inputs};
    s.instructions = {identity};
    s.outputs = {num_inputs};
    s.arena_bytes = 8;
    a.entries.push_back(std::move(s));
  }
  return a;
}

}  // namespace kiln::testing
