#include "compiler/passes/cudnn_sdpa_filter.h"

#include <map>
#include <string>
#include <vector>

#if KILN_HAVE_CUDA
#include "runtime/cuda/sdpa.h"
#endif

namespace kiln::passes {

#if KILN_HAVE_CUDA
AttentionFilter CudnnSdpaFilter(int compute_capability) {
  return [compute_capability](const ir::Trace& t, const ir::Node& node) -> std::string {
    // A boolean mask the pass made additive (Where(cond, M, -inf)) may mask a query's every key:
    // cuDNN's softmax gives NaN there, ONNX's Attention zeros (runtime/cuda/sdpa.h), unless the
    // node keeps the written-out Softmax's NaN (masked_rows_nan, passes/attention.h), as cuDNN does.
    if (node.inputs.size() > 3 && node.inputs[3] != ir::kNoValue && node.attrs.GetInt("masked_rows_nan", 0) == 0)
      for (const ir::Node& n : t.body.nodes)
        if (n.op == "Where" && !n.outputs.empty() && n.outputs[0] == node.inputs[3])
          return "a boolean mask made -inf (a query whose every key is masked would get NaN from cuDNN, zeros from "
                 "ONNX's Attention)";
    std::map<std::string, int64_t> stand_ins;  // dim expression -> its value here
    std::vector<std::vector<int64_t>> dims;
    dims.reserve(node.inputs.size() + node.outputs.size());  // the views point into it
    auto view = [&](ir::ValueId id) {
      if (id == ir::kNoValue) return cuda::DeviceTensor{};
      const ir::Value& v = t.value(id);
      std::vector<int64_t>& d = dims.emplace_back();
      int64_t n = 1;
      for (const ir::Sym& s : v.shape) {
        if (std::optional<int64_t> c = s.value()) {
          d.push_back(*c);
        } else {
          auto [it, added] = stand_ins.emplace(s.ToString(), 0);
          if (added) it->second = 8 * (1 + static_cast<int64_t>(stand_ins.size() - 1) % 16);
          d.push_back(it->second);
        }
        n *= d.back();
      }
      return cuda::DeviceTensor{0, v.dtype, v.rank(), d.data(), n};
    };
    std::vector<cuda::DeviceTensor> ins, outs;
    for (ir::ValueId id : node.inputs) ins.push_back(view(id));
    for (ir::ValueId id : node.outputs) outs.push_back(view(id));
    cuda::SdpaOptions options;
    options.compute_capability = compute_capability;
    const Status st = cuda::SdpaLibrary::SupportsWith(options, node.op, node.attrs, ins, outs);
    return st.ok() ? std::string() : std::string(st.message());
  };
}
#else
AttentionFilter CudnnSdpaFilter(int) {
  return [](const ir::Trace&, const ir::Node&) { return std::string("this build has no CUDA backend"); };
}
#endif

}  // namespace kiln::passes
