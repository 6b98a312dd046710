#include "runtime/cuda/graphs.h"

namespace kiln::cuda {

GraphCache::~GraphCache() {
  for (auto& [key, exec] : graphs_) drv_->GraphExecDestroy(exec);
}

GraphCache::Step GraphCache::Find(Stats& stats) {
  current_ = nullptr;
  if (auto it = graphs_.find(key_); it != graphs_.end()) {
    ++stats.graph_hits;
    current_ = it->second;
    return Step::kReplay;
  }
  if (seen_.find(key_) == seen_.end()) {
    seen_.emplace(key_, 1);  // the first run of a key is not captured
    return Step::kRun;
  }
  ++stats.graph_misses;
  return Step::kCapture;
}

Status GraphCache::BeginCapture(CUstream stream) {
  return Check(*drv_, drv_->StreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "cuStreamBeginCapture");
}

Status GraphCache::EndCapture(CUstream stream, Status enqueued, bool keep) {
  const Driver& drv = *drv_;
  CUgraph graph = nullptr;
  Status ended = Check(drv, drv.StreamEndCapture(stream, &graph), "cuStreamEndCapture");
  if (!enqueued.ok() || !ended.ok() || !keep) {
    if (graph) drv.GraphDestroy(graph);
    KILN_RETURN_IF_ERROR(enqueued);
    return ended;
  }
  CUgraphExec exec = nullptr;
  Status inst = Check(drv, drv.GraphInstantiate(&exec, graph, 0), "cuGraphInstantiate");
  drv.GraphDestroy(graph);
  KILN_RETURN_IF_ERROR(inst);
  current_ = graphs_.emplace(key_, exec).first->second;
  return Status::Ok();
}

Status GraphCache::Replay(CUstream stream) { return Check(*drv_, drv_->GraphLaunch(current_, stream), "cuGraphLaunch"); }

}  // namespace kiln::cuda
