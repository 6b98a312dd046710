// The fusion rules: for every op, how it fuses. Its kind and note are its row in the op table
// (runtime/op_table.h); the generated kinds add their lowering here.
//
//  - kElementwise: one output element from the same element of each (broadcast) input.
//    Joins any region, before or after its reduction.
//  - kIndexMap: data movement; an output element reads its input elsewhere (Transpose,
//    Slice, Gather, Resize, ...). Joins a region before its reduction or in a region
//    without one; after a reduction it would read other rows, so it cuts.
//  - kReduction: a reduction family (Softmax, LayerNormalization, ReduceSum, ...). At most
//    one per region; it fixes the region's iteration domain.
//  - kLibrary: never fused: a library call where the backend has one (its claims,
//    runtime/claims.h); MatMul, Gemm and Conv carry epilogues instead (compiler/passes/epilogue.h).
//  - kCpuOnly: no generated kernel yet; `note` says why. Its CPU kernel runs it on every backend.
//
// Why a region is cut (the compile log prints one of these for each cut):
//  - the producer is not fusible (library, CPU-only, or its lowering refused these attrs);
//  - the value is a model output, or feeds consumers in more than one region;
//  - a second reduction would join the region;
//  - an index map would sit after the reduction, or a broadcast would read another row.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/fusion/lower.h"
#include "runtime/op_table.h"

namespace kiln::fusion {

struct FusionRule {
  std::string_view op;
  FusionKind kind = FusionKind::kCpuOnly;
  LowerFn lower = nullptr;    // kElementwise, kIndexMap, kReduction
  DomainFn domain = nullptr;  // kReduction
  std::string_view note;      // kCpuOnly: why no generated kernel takes it
};

// The rule for `op`, or nullptr if the op has no row in the op table (the executors stage
// treats it as CPU-only). Thread-safe.
const FusionRule* FindRule(std::string_view op);
// Every rule, one per op table row, sorted by op.
std::span<const FusionRule> AllRules();

// A generated kind's lowering, in the per-file tables merged by rules.cc.
struct Lowering {
  std::string_view op;
  LowerFn lower = nullptr;
  DomainFn domain = nullptr;  // kReduction ops only
};
std::span<const Lowering> ElementwiseLowerings();   // lower_elementwise.cc
std::span<const Lowering> DataMovementLowerings();  // lower_data_movement.cc
std::span<const Lowering> ReductionLowerings();     // lower_reduction.cc
std::span<const Lowering> MathLowerings();          // lower_math.cc

// What disagrees between the op table and the lowerings, one line each (empty when they
// agree): a generated kind without a lowering (or a reduction without its domain), a lowering
// of an op whose kind is not generated or that has no row, an op lowered twice.
std::vector<std::string> LoweringProblems();

}  // namespace kiln::fusion
