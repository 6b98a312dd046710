// compiler/onnx/importer.h: the ONNX frontend. Turns an ONNX ModelProto into the `import`
// stage trace, op for op, with no shape inference (a later pass runs the op registry's meta
// functions).
//
//   kiln::onnx_import::ImportOptions opts;
//   opts.input_shapes["x"] = {1, -1, 224, 224};  // fix N = 1, keep dim 1 as declared
//   KILN_ASSIGN_OR_RETURN(kiln::ir::Trace trace, kiln::onnx_import::ImportOnnxFile("m.onnx", opts));
//   std::cout << trace.Print();
//
// What the importer does (details in importer.cc):
//  - Initializers and Constant nodes become constant Values (data owned by the trace);
//    external data is read from files relative to the model's folder, never outside it.
//  - Initializers that are also listed in graph.input (old exporters list every weight as
//    an input; IR < 4 gives them "default value" semantics) are FROZEN as constants: they
//    are not runtime inputs and cannot be overridden at run time.
//  - Graph inputs become runtime inputs with a symbolic shape: dim_value -> constant,
//    dim_param -> Sym::Var(dim_param), unknown dim -> Sym::Var("<input>_dim<i>").
//  - Older-opset op forms are rewritten to the newest opset's form, the one the CPU kernels
//    implement (attributes moved to constant inputs, Upsample -> Resize, Dropout ->
//    Identity, ...).
//  - Intermediate Values keep dtype/shape from the model's value_info when present, else
//    kUndefined and an empty shape.
// Errors: kDataLoss for malformed or inconsistent files, kUnimplemented for valid ONNX Kiln
// does not support, kInvalidArgument for bad options, kNotFound for missing files,
// kResourceExhausted for files over max_file_bytes, constants over max_constant_bytes,
// subgraphs nested deeper than max_subgraph_depth, or memory running out. Never throws, never
// aborts.
// Thread-compatible: calls share no state.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "compiler/ir/trace.h"
#include "kiln/status.h"

namespace kiln::onnx_import {

// Default-domain opsets the importer accepts. A newer opset may change the semantics of an
// op silently, so it is refused rather than guessed at. Within the range, an op version
// whose form Kiln does not implement is refused per node (op_versions.h has the table).
inline constexpr int64_t kMinOpset = 1;
inline constexpr int64_t kMaxOpset = 27;

// Subgraph nesting: the default limit, and the largest limit an option may set (parsing,
// importing and shape inference recurse once per level, so the stack bounds it).
inline constexpr int kDefaultMaxSubgraphDepth = 32;
inline constexpr int kMaxSubgraphDepthLimit = 256;

struct ImportOptions {
  // Fixes dims of runtime inputs: name -> dims, -1 keeps the declared dim. Rank must match
  // the declaration and a fixed declared dim must agree, else InvalidArgument naming the input.
  std::map<std::string, std::vector<int64_t>> input_shapes;
  // Binds runtime inputs to constants (name -> value): the input is no longer a runtime
  // input, and everything computed from it folds, such as a Reduce's `axes` or a Resize's
  // `sizes` fed as inputs. dtype must match and dims the declared constant dims, else
  // InvalidArgument.
  std::map<std::string, std::shared_ptr<const ir::ConstData>> constant_inputs;
  // Largest model file (and largest external-data file) read.
  uint64_t max_file_bytes = 4ull << 30;
  // Largest total of constant data the model holds: initializers and Constant nodes, embedded
  // or external (several may name the same external bytes: each copy counts). Checked before
  // each tensor is copied.
  uint64_t max_constant_bytes = 16ull << 30;
  // Deepest subgraph nesting accepted (If/Loop/Scan bodies; the main graph is level 0), 0 to
  // kMaxSubgraphDepthLimit. Deeper models are ResourceExhausted naming the path to the first
  // subgraph over it, checked on the bytes before they are parsed (subgraph_depth.h).
  int max_subgraph_depth = kDefaultMaxSubgraphDepth;
};

// Reads an ONNX model file (and its external-data files, relative to the model's folder).
kiln::Result<kiln::ir::Trace> ImportOnnxFile(const std::string& path, const ImportOptions& options);

// Same, from the serialized ModelProto. `base_dir` is the folder external-data locations are
// relative to; empty when the model has no external data (a model that does have it is
// then rejected with kInvalidArgument).
kiln::Result<kiln::ir::Trace> ImportOnnxBytes(std::span<const uint8_t> bytes,
                                              const std::string& base_dir,
                                              const ImportOptions& options);

}  // namespace kiln::onnx_import
