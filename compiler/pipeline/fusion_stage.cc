// The fusion stage (pipeline.h, compile.h FusionStage): quantized groups as integer ops
// (passes/qdq.h; for each backend's plan), attention as one op (passes/attention.h;
// for the CUDA plan, where cuDNN's fused attention takes it: passes/cudnn_sdpa_filter.h); epilogues folded into MatMul, Gemm and Conv (passes/epilogue.h),
// for the CPU backend's plan its 2-D Convs in NHWC
// (passes/channels_last.h), then fused regions (fusion/fusion.h), each becoming one generated
// kernel.
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "compiler/fusion/fusion.h"
#include "compiler/passes/attention.h"
#include "compiler/passes/channels_last.h"
#include "compiler/passes/cudnn_sdpa_filter.h"
#include "compiler/passes/epilogue.h"
#include "compiler/passes/qdq.h"
#include "compiler/pipeline/stage_work.h"

namespace kiln::compiler {

Result<ir::Trace> FusionStage(const ir::Trace& canonical, std::vector<std::string>* log, int* kernels,
                              ir::Trace* folded, passes::EpilogueActivations activations, bool channels_last, bool attention,
                              const passes::AttentionFilter& attention_keep, passes::QdqTarget qdq) {
  std::vector<std::string> epilogues;
  KILN_ASSIGN_OR_RETURN(ir::Trace quantized, passes::FoldQdq(canonical, &epilogues, qdq));
  if (attention) {
    KILN_ASSIGN_OR_RETURN(quantized, passes::FuseAttention(quantized, &epilogues, attention_keep));
  }
  KILN_ASSIGN_OR_RETURN(ir::Trace with_epilogues, passes::FoldEpilogues(quantized, &epilogues, activations));
  if (channels_last) {
    KILN_ASSIGN_OR_RETURN(with_epilogues, passes::ToChannelsLast(with_epilogues, &epilogues));
  }
  fusion::FusionReport report;
  KILN_ASSIGN_OR_RETURN(ir::Trace fused, fusion::Fuse(with_epilogues, &report));
  if (log) {
    log->insert(log->end(), epilogues.begin(), epilogues.end());
    log->insert(log->end(), report.log.begin(), report.log.end());
  }
  if (kernels) *kernels = report.fused_kernels;
  if (folded) *folded = std::move(with_epilogues);
  return fused;
}

namespace {

// The newest compute capability of `archs` ("sm_90", "compute_90a": 90); 0 for none.
int NewestArch(const std::vector<std::string>& archs) {
  int newest = 0;
  for (const std::string& a : archs) {
    const size_t at = a.find('_');
    if (at == std::string::npos) continue;
    int cc = 0;
    for (size_t i = at + 1; i < a.size() && a[i] >= '0' && a[i] <= '9'; ++i) cc = cc * 10 + (a[i] - '0');
    newest = std::max(newest, cc);
  }
  return newest;
}

}  // namespace

Status RunFusion(StageWork& work, StageOutput& out) {
  EntryWork& e = *work.entry;
  std::vector<std::string> lines;
  int kernels = 0;
  const passes::AttentionFilter keep =
      e.cuda_attention ? passes::CudnnSdpaFilter(NewestArch(work.options.archs)) : passes::AttentionFilter{};
  KILN_ASSIGN_OR_RETURN(e.trace, FusionStage(e.trace, &lines, &kernels, nullptr, e.activations, e.channels_last,
                                               e.attention || e.cuda_attention, keep, e.qdq));
  e.ops_after_fusion = static_cast<int>(e.trace.body.nodes.size());
  out.print = [&e] { return e.trace.Print(); };
  const std::string label = EntryLabel(e.record);
  for (const std::string& line : lines) out.log.push_back(fmt::format("{}: fusion: {}", label, line));
  out.log.push_back(fmt::format("{}: fusion: {} ops -> {} ({} generated kernels)", label,
                                e.ops_before_fusion, e.ops_after_fusion, kernels));
  out.notes = std::move(lines);
  out.ops = e.ops_after_fusion;
  return Status::Ok();
}

}  // namespace kiln::compiler
