// Channels-last layout for the CPU backend's plan (docs/architecture.md, "Layouts on the CPU").
//
// oneDNN's convolutions on x86-64 run in NHWC (its `acdb`), while ONNX tensors are NCHW. Left
// to the runtime, every Conv whose neighbours are not oneDNN ops reorders its X into NHWC and
// its Y back (EfficientNet-B0: 1.8 ms of 8 ms at one thread), and an isolated pointwise Conv
// runs on Kiln's NCHW GEMM instead. This pass decides the layout at compile time instead, as
// onnxruntime's NHWC transformer and OpenVINO's layout propagation do:
//
//  - a 2-D Conv (X of rank 4, a float type, no predicate, outside run-time Loops) whose X is
//    NHWC or whose Y a reader takes in NHWC (a Conv, or the ops below on their way to one)
//    becomes `kiln.NhwcConv`: X, Y and the epilogue residual in NHWC, W and B as ONNX has them
//    (runtime/kernels/nhwc_conv.h states the op); at the boundary, the side that meets NCHW
//    stays NCHW (x_layout, y_layout) and oneDNN reorders it inside the op (a network's first
//    Conv, whose X is the model's input; a detector head's last Convs, whose maps are reshaped);
//  - the ops around it follow the NHWC values where the same op computes the same elements
//    in NHWC: elementwise ops (constants transposed at compile time), reductions and
//    GlobalAveragePool / GlobalMaxPool (axes remapped), Concat and Split (axis remapped),
//    Resize (scales or sizes permuted), a Transpose of an NHWC value (perms composed; one
//    that only undoes the layout disappears), and Flatten and Reshape of [N, C, 1, 1];
//  - a Transpose (perm [0, 2, 3, 1]) makes an NHWC value where a follower reads one and only
//    NCHW is there, and a Transpose (perm [0, 3, 1, 2]) makes the NCHW value back where any other
//    op or a model output reads it. The fusion stage fuses both into the regions around them.
//
// The values keep their dtypes; a value `v` in NHWC is `v#nhwc`. The pass changes no result
// (every rewritten op computes the same elements), so one plan serves the interpreter, the
// native code and Kiln's kernels alike. The CUDA plan keeps NCHW (cuDNN's choice is its own),
// and so does `kiln compile --cpu-layout nchw` (CompileOptions::cpu_channels_last).
#pragma once

#include <string>
#include <vector>

#include "compiler/ir/trace.h"
#include "kiln/status.h"

namespace kiln::passes {

// Whether ToChannelsLast changes `trace` (after epilogue folding): whether a 2-D Conv of a
// float type, at the top level and unpredicated, has a reader that would take its Y in NHWC.
bool ChannelsLastChanges(const ir::Trace& trace);

// `trace` (after epilogue folding, passes/epilogue.h) with its 2-D Convs in NHWC and the ops
// around them following, as the header says. Appends a line to `log`: how many Convs, how many
// ops follow their NHWC values, and how many Transposes it made. kInternal when a rewritten op's
// shape disagrees with its meta function (a bug).
Result<ir::Trace> ToChannelsLast(const ir::Trace& trace, std::vector<std::string>* log);

}  // namespace kiln::passes
