// Channels-last layout for the CPU backend's plan (docs/architecture.md, "Layouts").
//
// oneDNN's convolutions on x86-64 run in NHWC (its `acdb`), while ONNX tensors are NCHW. Left
// to the runtime, every Conv whose neighbours are not oneDNN ops reorders its X into NHWC and
// its Y back (EfficientNet-B0: 1.8 ms of 8 ms at one thread), and an isolated pointwise Conv
// runs on Kiln's NCHW GEMM instead. This pass decides the layout at compile time instead, as
// onnxruntime's NHWC transformer and OpenVINO's layout propagation do:
//
//  - every 2-D Conv (X of rank 4, a float type, no predicate, outside run-time Loops) becomes
//    `kiln.NhwcConv`: X, Y and the epilogue residual in NHWC, W and B as ONNX has them
//    (runtime/kernels/nhwc_conv.h states the op);
//  - the ops around it follow the NHWC values where the same op computes the same elements
//    in NHWC: elementwise ops (constants transposed at compile time), reductions and
//    GlobalAveragePool / GlobalMaxPool (axes remapped), Concat and Split (axis remapped),
//    Resize (scales or sizes permuted), a Transpose of an NHWC value (perms composed; one
//    that only undoes the layout disappears), and Flatten and Reshape of [N, C, 1, 1];
//  - a Transpose (perm [0, 2, 3, 1]) makes an NHWC value where one is read and only NCHW is
//    there, and a Transpose (perm [0, 3, 1, 2]) makes the NCHW value back where any other op or
//    a model output reads it. The fusion stage fuses both into the regions around them.
//
// The values keep their dtypes; a value `v` in NHWC is `v#nhwc`. The pass changes no result
// (every rewritten op computes the same elements), so one plan serves the interpreter, the
// native code and Kiln's kernels alike. The CUDA plan keeps NCHW (cuDNN's choice is its own).
#pragma once

#include <string>
#include <vector>

#include "compiler/ir/trace.h"
#include "kiln/status.h"

namespace kiln::passes {

// Whether `trace` has a Conv that ToChannelsLast rewrites (a 2-D Conv of a float type, at the
// top level, unpredicated): where it has none, the pass returns the trace unchanged.
bool HasChannelsLastConv(const ir::Trace& trace);

// `trace` (after epilogue folding, passes/epilogue.h) with its 2-D Convs in NHWC and the ops
// around them following, as the header says. Appends one line per rewritten Conv chain summary
// to `log`: how many Convs, how many other ops follow NHWC values, and how many Transposes it
// made. kInternal when a rewritten op's shape disagrees with its meta function (a bug).
Result<ir::Trace> ToChannelsLast(const ir::Trace& trace, std::vector<std::string>* log);

}  // namespace kiln::passes
