// The fusion rules, in one table: for every op the CPU backend runs, how it reaches a GPU.
//
//  - kElementwise: one output element from the same element of each (broadcast) input.
//    Joins any region, before or after its reduction.
//  - kIndexMap: data movement; an output element reads its input elsewhere (Transpose,
//    Slice, Gather, Resize, ...). Joins a region before its reduction or in a region
//    without one; after a reduction it would read other rows, so it cuts.
//  - kReduction: a reduction family (Softmax, LayerNormalization, ReduceSum, ...). At most
//    one per region; it fixes the region's iteration domain.
//  - kLibrary: run by a library executor (cuBLASLt, cuDNN); `note` names it. Never fused;
//    MatMul, Gemm and Conv carry epilogues instead (compiler/passes/epilogue.h).
//  - kCpuOnly: no GPU path yet; `note` says why. The executors stage runs these on the CPU.
//
// Why a region is cut (the compile log prints one of these for each cut):
//  - the producer is not fusible (library, CPU-only, or its lowering refused these attrs);
//  - the value is a model output, or feeds consumers in more than one region;
//  - a second reduction would join the region;
//  - an index map would sit after the reduction, or a broadcast would read another row.
#pragma once

#include <span>
#include <string_view>

#include "compiler/fusion/lower.h"

namespace kiln::fusion {

enum class FusionKind : uint8_t { kElementwise, kIndexMap, kReduction, kLibrary, kCpuOnly };

struct FusionRule {
  std::string_view op;
  FusionKind kind = FusionKind::kCpuOnly;
  LowerFn lower = nullptr;    // kElementwise, kIndexMap, kReduction
  DomainFn domain = nullptr;  // kReduction
  std::string_view note = {};  // kLibrary: what the library call does; kCpuOnly: why there is no GPU path
  // kLibrary: the library, by the executor name the artifact records for the instruction and
  // the CUDA backend reads (runtime/cuda/runner.cc): "cublaslt" or "cudnn".
  std::string_view library = {};
};

// The rule for `op`, or nullptr if the op has none (the executors stage treats it as
// CPU-only). Thread-safe.
const FusionRule* FindRule(std::string_view op);
// Every rule, sorted by op.
std::span<const FusionRule> AllRules();
const char* KindName(FusionKind kind);

// Per-file tables merged by rules.cc.
std::span<const FusionRule> ElementwiseRules();   // lower_elementwise.cc
std::span<const FusionRule> DataMovementRules();  // lower_data_movement.cc
std::span<const FusionRule> ReductionRules();     // lower_reduction.cc
std::span<const FusionRule> MathRules();          // lower_math.cc

}  // namespace kiln::fusion
