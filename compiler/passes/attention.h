// Scaled dot-product attention recognised in the graphs exporters write, and rewritten into
// ONNX's Attention op (opset 23, 4-D form; compiler/ops/meta_transformer.cc, and its CPU
// kernel in runtime/kernels/transformer.cc, which never holds the whole score matrix).
//
// Matched (walking back from a Softmax over the last axis of a rank-4 float tensor):
//   S  = MatMul(Q', B')                      Q' [b, h, Sq, D], B' [b, h, D, T]
//        Q' = Q or Mul(Q, c) or Div(Q, c);  B' = Kt or Mul(Kt, c) or Div(Kt, c)
//                                            (TorchScript's Whisper, dynamo: the scale split
//                                            over Q and K)
//   S' = S, or Mul(S, c), Div(S, c)          the scale (c a one-element float constant)
//   S" = S', or Where(cond, S', f)           a boolean mask (GPT-2's causal triangle), f a
//                                            one-element constant <= -1e4 (finfo.min, -inf)
//   X  = S", or Add(S", M) or Add(M, S")     an additive mask of Q's dtype that broadcasts into
//                                            S (BERT's (1 - mask) * min, an extended mask),
//                                            its last dim T (it does not broadcast over keys);
//                                            several Adds where every M is a constant (Swin's
//                                            relative-position bias), and Swin's window mask:
//                                            Reshape(Add(Reshape(S', [1] + its shape), M5),
//                                            its shape), M5 a constant [1, windows, 1|h, T, T]
//   P  = Softmax(X, axis = -1)
//   P' = P, or Where(IsNaN(P), 0, P)         PyTorch's SDPA export: fully masked rows give 0
//   Y  = MatMul(P', V)                       V [b, h, T, Dv]
// with every value between the first MatMul and the last read by the next op only and no
// model output. b and h must be the same symbols in Q, Kt and V.
//
// Written: Y = Attention(Q, K, V[, mask]) with attribute `scale` the product of the scales
// (1/c for a Div). K is Kt's untransposed form: the input of the Transpose that made Kt (its
// perm composed), the [b, h, T, D] tensor behind dynamo's Reshape/Transpose/Reshape, or else a
// new Transpose(Kt, [0, 1, 3, 2]). Constant masks are summed at compile time into one constant
// (of their broadcast shape, at most 4-D). A Where alone gives the boolean mask (false: -inf); a
// Where and an Add give the additive mask Where(cond, M, -inf). Without PyTorch's NaN guard the
// node gets Kiln's attribute `masked_rows_nan` 1: a query row whose every score is -inf (an -inf
// mask, or an infinity in Q or K) then gives NaN, as the written-out Softmax does, instead of
// ONNX Attention's zeros (the guard's value too). A row a boolean mask masks throughout averages
// V in the written-out graph with a finite fill; the Attention node gives NaN or zeros there.
// The 3-D form: where Q, K and V are each Transpose(Reshape(x, [b, S, H, D]), [0, 2, 1, 3]) of a
// [b, S, H * D] tensor x, and Y goes back through Transpose(0, 2, 1, 3) and Reshape to
// [b, Sq, H * Dv], the node reads and writes those 3-D tensors (q_num_heads, kv_num_heads) and
// the Reshapes and Transposes go. Its packed form: where Q, K and V are the parts 0, 1 and 2 of
// one [b, S, 3 * H * D] tensor x (PyTorch's packed in-projection, timm's `qkv` Linear) taken by
// Reshape(x, [b, S, 3, H, D]), Transpose(2, 0, 3, 1, 4), then Split on axis 0 and Squeeze, Slice
// on axis 0 and Squeeze (dynamo's unbind), or Gather on axis 0, the node is Attention(x, x, x)
// with Kiln's attribute `packed_qkv` 1: each input [b, S, 3 * hidden], Q read from its first
// third of columns, K from its second, V from its third (no copy of any of them).
// The KV cache: where K and V are Concat(past_key, K_new) and Concat(past_value, V_new) on axis 2
// (a decoder exported with past and present, whose present outputs are those Concats), each
// Concat read by the chain's ops alone (and perhaps as a model output), the Concats go and the
// node is Attention(Q, K_new, V_new, mask, past_key, past_value) -> (Y, present_key,
// present_value): the kernel writes the present rows itself, into the caller's cache where one is
// bound (kiln/runtime.h, ExecutionContext::BindCache). Where `keep` refuses that form, the match
// is tried again with the Concats written out.
// The Attention node takes the first MatMul's name; it sits where the last MatMul was.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "compiler/ir/trace.h"
#include "kiln/status.h"

namespace kiln::passes {

// Whether FuseAttention would rewrite an attention in `trace`.
bool AttentionChanges(const ir::Trace& trace);

// Whether a backend runs the Attention node `attention` of `trace` (its operands' dtypes and
// symbolic shapes there): "" when it does, else why not.
using AttentionFilter = std::function<std::string(const ir::Trace& trace, const ir::Node& attention)>;

// `trace` with each matched attention one Attention node, except those whose node `keep` (when
// set) refuses, which stay written out. Appends to `log` a line with how many were fused, one
// line for each Softmax of a rank-4 tensor that did not match, saying why, one for each
// attention `keep` refused, with its reason, and one for each of the trace's own Attention nodes
// `keep` refuses (it runs on its CPU kernel there). kInternal when an Attention node's shape disagrees
// with its meta function (a bug).
Result<ir::Trace> FuseAttention(const ir::Trace& trace, std::vector<std::string>* log,
                                const AttentionFilter& keep = {});

}  // namespace kiln::passes
