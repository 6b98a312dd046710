// The `precision` stage: lowers a canonical float32 trace to float16 or bfloat16
// (`kiln compile --precision`), keeping the parts that would lose range or accuracy in
// float32. It runs after guard pruning and before fusion, so the Casts it inserts fuse
// into the generated kernels next to them.
//
// Each node gets one of four classes from its op's precision column in the op table
// (runtime/op_table.h; the table in docs/precision.md prints it):
//  - kLow: its float32 inputs are converted to the precision type and its float outputs
//    are stored in it. The kernels accumulate in float32 (cuBLASLt CUBLAS_COMPUTE_32F,
//    the CPU backend's GEMM and conv, and the generated kernels' float registers), so a
//    reduction, a Softmax or a normalisation computes its statistics and exponentials in
//    float32 and only stores its result in the precision type. Conv, MatMul, Gemm,
//    Softmax, LayerNormalization, ReduceMean, ...
//  - kFollow: elementwise, activation and data-movement ops run in the type their inputs
//    arrive in: low when a non-constant float input arrives low or when all float inputs are
//    constants, float32 when the non-constant ones come from float32 ops (constants do not
//    vote, so Exp(x) * 0.1 stays float32 after the float32 Exp). They never add a Cast of
//    their own to leave float32. A follower stays float32 when one of its constants has a
//    nonzero element the precision type rounds to 0 or to infinity (an epsilon of 1e-12), and
//    a Cast to float32 goes low only from a half type (integers such as positions and indices
//    keep float32's exactness).
//  - kFloat32: float inputs converted to float32, outputs float32. Ops whose results leave
//    the float16 range or lose accuracy there (Exp, Pow, Reciprocal, ReduceSum, CumSum,
//    ...), the recurrent ops, detection post-processing, and every op the table does not
//    name.
//  - integer, bool and shape paths are untouched whatever the class: only float32 values
//    are ever converted.
// A node named in `keep_fp32` (by node name or op type) is kFloat32. A node whose meta
// function rejects the lowered types stays kFloat32, with a log line saying why, as does a
// follower whose constant would not survive.
//
// Constants are converted at compile time (round to nearest even, runtime/half.h); a
// constant read both by low and by float32 nodes is stored in both types. A Cast is inserted
// once per (value, type), right before its first reader, and shows in every later stage's
// trace, as a member of the fused kernel that absorbed it or as an instruction of its own.
//
// Names (so the trace and `--validate` can relate a value to its float32 original): a value
// keeps its name and id in its declared dtype. A node that now writes a value in the
// precision type writes a new value "<name>.fp16" ("<name>.bf16"); a converted constant is
// "<name>.fp16" too. A Cast to another type writes "<name>.to_fp16" ("to_bf16"), and one back
// to the declared float32 writes the declared value itself (its node is "<name>.to_fp32").
// A name taken already gets "_1", "_2", ... appended. Model inputs and outputs keep their
// names whatever their dtype: under --io-precision the declared float32 value is renamed
// "<name>.to_fp32" (an input) or "<name>.fp32" (an output).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "compiler/ir/trace.h"
#include "kiln/status.h"

namespace kiln::passes {

enum class Precision { kFp32, kFp16, kBf16 };

// "fp32", "fp16", "bf16": the `--precision` spelling, also stored in the artifact.
const char* PrecisionName(Precision p);
// The DType activations take: kFloat32, kFloat16 or kBFloat16.
DType PrecisionDType(Precision p);

struct PrecisionOptions {
  Precision precision = Precision::kFp32;
  // Node names or op types kept in float32 (`--keep-fp32`). A name that matches no node of
  // this trace is ignored here: the driver checks each against the imported model, If
  // branches included (compile.cc), since canonicalisation folds nodes and inlines branches.
  std::vector<std::string> keep_fp32;
  // The dtype float32 model inputs and outputs take (`--io-precision`): kFloat32 keeps them
  // as declared, kFloat16 / kBFloat16 changes them (the prologue then checks that dtype).
  // Inputs and outputs of other dtypes never change.
  DType io_dtype = DType::kFloat32;
};

// Returns the lowered trace (stage "precision"). With Precision::kFp32 and io_dtype kFloat
// it returns `canonical` unchanged. Appends one line per kept-in-float32 decision that was
// not the table's (keep_fp32 hits, meta rejections) and a summary line to `log` (when not
// null). Errors: kInternal only (a trace with subgraphs, which the canonical stage never makes).
Result<ir::Trace> LowerPrecision(const ir::Trace& canonical, const PrecisionOptions& options,
                                 std::vector<std::string>* log);

}  // namespace kiln::passes
