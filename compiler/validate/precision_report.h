// The accuracy report of `kiln compile --precision fp16|bf16 --validate DIR`: how far a
// reduced-precision artifact's outputs are from float32, and which of its values overflowed.
//
// Inputs. DIR is one input set (the layout of `kiln run --inputs`: ONNX test data
// input_N.pb, or NAME.npy per input, read by io::ReadInputDir) or a model folder whose
// test_data_set_* subfolders are input sets (each is run, in name order). A float input is
// converted to the dtype each artifact declares (float32 for the reference, float16 or
// bfloat16 under --io-precision; round to nearest even); values that overflow in that
// conversion are reported as an overflow of the input itself. Other dtypes must match.
//
// Runs. Both run on the CPU backend (ContextOptions::device kCpu), whatever archs the
// artifact holds (the CPU backend runs the portable programs):
//  - the tested artifact: the caller's bytes, as written;
//  - the float32 reference: the same model and options compiled again with precision fp32,
//    float32 I/O, no fusion and no archs (no NVRTC), so that every value of the model is
//    stored by an instruction of its own. Fusion only reorders float32 rounding, so against
//    a float32 artifact the report shows fusion's rounding alone (~1e-7 relative).
//
// Output figures (per input set and model output): max abs error, max rel error and cosine
// similarity, as defined in tensor_compare.h, and the count of elements that are inf or NaN
// in the artifact but finite in float32.
//
// How overflow detection works. Both runs are instrumented: an internal hook of the CPU
// backend (SetInstructionObserver, runtime/instruction_observer.h; not runtime API) is called
// after every instruction with its output tensors, and the report counts the inf and NaN
// elements of each under the tensor's value name. Every value the tested artifact stores is
// thus checked in the type it is stored in: float16 overflows above 65504, bfloat16 keeps
// float32's range. A value of the tested run that holds inf or NaN is looked up in the
// reference by name: its own, else the float32 value it stands for by the precision stage's
// naming (passes/precision.h: "<value>.fp16", "<value>.to_bf16_2", "<value>.fp32" and the like
// map back to <value>); model inputs count as reference values with the inf and NaN read from
// DIR. It is an overflow unless that reference value held inf or NaN too; a value with no
// reference counterpart is an overflow whenever it holds inf or NaN. Overflows are reported
// where they start, at an instruction none of whose inputs had overflowed already: the value,
// its dtype, the instruction (index, node name, op) and the count; values that are inf or NaN
// only because an input was are counted as its downstream values. What is checked is what
// the artifact stores: a generated (fused) kernel keeps the values inside it in float32
// registers and stores only its outputs in the precision type (the CUDA kernels too), so a
// value inside one cannot overflow float16, and a warning names the fused instruction. To
// find the op of a fused region that overflowed, compile with --no-fuse as well: every op is
// then an instruction of its own.
//
// Quantized models. A model with QuantizeLinear and DequantizeLinear (or onnxruntime's quantized
// ops, written as them at import) is compiled with its groups folded into integer ops (passes/
// qdq.h); the reference, unfused, computes each QuantizeLinear and DequantizeLinear as ONNX
// defines them, as onnxruntime's unoptimised session does (tests/python/test_contrib_ops.py
// holds the two to each other). An output the graph writes quantized gets its error in steps
// as well (OutputReport::step): one step apart is rounding, more is a folding's error.
//
// Warnings never fail the validation: only unreadable input, inputs that do not match the
// model, and failed compiles or runs are errors.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "compiler/compile.h"
#include "compiler/validate/tensor_compare.h"
#include "kiln/status.h"

namespace kiln::validate {

// One model output on one input set.
struct OutputReport {
  std::string set;     // the input set's folder name (DIR's own name when DIR is the set)
  std::string output;  // the model output's name
  DType dtype = DType::kUndefined;  // the tested artifact's output dtype
  ErrorMetrics metrics;
  // The output's quantization step, where the model's graph writes it quantized: 1 for an
  // integer output of QuantizeLinear (its unit), the scale of the DequantizeLinear that writes
  // a float output (a constant of one element); 0 for any other output.
  double step = 0;
};

// A value of the tested artifact that holds inf or NaN where the float32 reference is finite,
// and whose inputs were all finite (the start of an overflow).
struct Overflow {
  std::string set;
  std::string value;        // the value (tensor) name; a model input's name for an input
  std::string instruction;  // "instruction 3 'big' (Mul)"; "input conversion" for a model input
  DType dtype = DType::kUndefined;
  int64_t nonfinite = 0;    // inf or NaN elements
  int64_t elements = 0;
  int64_t downstream = 0;   // later values of this run that are inf or NaN because of it
};

struct PrecisionReport {
  std::string precision;          // the artifact's: "fp16", "bf16" or "fp32" (Model::precision)
  std::vector<std::string> sets;  // input set names, in run order
  std::vector<OutputReport> outputs;  // set by set, in model output order
  std::vector<Overflow> overflows;    // set by set, in execution order
};

// Runs `artifact` (compiled from `model_path` with `options`) and a float32 reference
// compiled here on the inputs in `dir`, as described above. Errors: kNotFound for a missing
// DIR or input file, kInvalidArgument for an input whose dtype or shape the model does not
// take (naming the set's folder and the input); the reference compile's errors after
// "float32 reference: ", a run's after "<set folder>: float32 reference: " or
// "<set folder>: fp16 artifact: " (the shape check of a prologue miss among them).
Result<PrecisionReport> ValidatePrecision(const std::string& model_path, const compiler::CompileOptions& options,
                                          std::span<const uint8_t> artifact, const std::string& dir);

// The report as text: a table with one row per set and output and a line defining its
// columns ("-" for the errors and cosine of an output with no element finite in both), a line
// starting with "note: " for each output with elements left out of the errors and cosine (inf
// or NaN in either run: how many were compared), then the warnings, each a line starting with
// "warning: ": an output with inf or NaN where float32 has none, then each overflow. Where an
// output is quantized, a column gives its max abs error in steps.
std::string FormatPrecisionReport(const PrecisionReport& report);

}  // namespace kiln::validate
