#include "runtime/cuda/profiler.h"

#include <utility>

namespace kiln::cuda {

Result<Profiler> Profiler::Create(const Driver& drv, bool per_instruction) {
  Profiler p(drv, per_instruction);
  KILN_RETURN_IF_ERROR(Check(drv, drv.EventCreate(&p.start_, CU_EVENT_DEFAULT), "cuEventCreate"));
  KILN_RETURN_IF_ERROR(Check(drv, drv.EventCreate(&p.stop_, CU_EVENT_DEFAULT), "cuEventCreate"));
  return p;
}

Profiler::Profiler(Profiler&& o) noexcept
    : drv_(o.drv_),
      per_instruction_(o.per_instruction_),
      start_(std::exchange(o.start_, nullptr)),
      stop_(std::exchange(o.stop_, nullptr)),
      timing_(o.timing_),
      marks_(std::move(o.marks_)),
      marked_(o.marked_),
      loop_ns_(std::move(o.loop_ns_)),
      begin_jumped_(std::move(o.begin_jumped_)) {
  o.marks_.clear();
}

Profiler::~Profiler() {
  for (CUevent ev : marks_) drv_->EventDestroy(ev);
  if (start_) drv_->EventDestroy(start_);
  if (stop_) drv_->EventDestroy(stop_);
}

Status Profiler::Start(const PreparedEntry& pe, CUstream stream) {
  const Driver& drv = *drv_;
  if (per_instruction_) {
    while (marks_.size() < pe.instructions.size() + 1) {
      CUevent ev = nullptr;
      KILN_RETURN_IF_ERROR(Check(drv, drv.EventCreate(&ev, CU_EVENT_DEFAULT), "cuEventCreate (profile)"));
      marks_.push_back(ev);
    }
    marked_ = pe.instructions.size() + 1;
    if (!pe.loop_pair.empty()) {  // no allocation once this size was seen
      loop_ns_.assign(pe.instructions.size(), 0);
      begin_jumped_.assign(pe.instructions.size(), 0);
    } else {
      loop_ns_.clear();
    }
  }
  return Check(drv, drv.EventRecord(start_, stream), "cuEventRecord");
}

Status Profiler::Staged(CUstream stream) {
  if (!per_instruction_) return Status::Ok();
  return Check(*drv_, drv_->EventRecord(marks_[0], stream), "cuEventRecord (profile)");
}

Status Profiler::Mark(const PreparedEntry& pe, size_t first, size_t last, CUstream stream) {
  if (!per_instruction_) return Status::Ok();
  for (size_t k = first; k < last; ++k) {
    if (pe.instructions[k].control == Control::kLoopBegin && !begin_jumped_.empty()) begin_jumped_[k] = 0;
    KILN_RETURN_IF_ERROR(Check(*drv_, drv_->EventRecord(marks_[k + 1], stream), "cuEventRecord (profile)"));
  }
  return Status::Ok();
}

Status Profiler::Repeat(size_t begin, size_t end, CUstream stream) {
  if (!per_instruction_) return Status::Ok();
  const Driver& drv = *drv_;
  KILN_RETURN_IF_ERROR(Check(drv, drv.StreamSynchronize(stream), "cuStreamSynchronize (profile)"));
  auto add = [&](size_t k) {
    float ms = 0;
    if (drv.EventElapsedTime(&ms, marks_[k], marks_[k + 1]) == CUDA_SUCCESS) loop_ns_[k] += static_cast<int64_t>(ms * 1e6);
  };
  if (!begin_jumped_[begin]) add(begin);
  begin_jumped_[begin] = 1;
  for (size_t k = begin + 1; k < end; ++k)
    if (!begin_jumped_[k]) add(k);  // an inner loop's LoopBegin that jumped has its time summed already
  return Check(drv, drv.EventRecord(marks_[begin + 1], stream), "cuEventRecord (profile)");
}

Status Profiler::Stop(CUstream stream) {
  KILN_RETURN_IF_ERROR(Check(*drv_, drv_->EventRecord(stop_, stream), "cuEventRecord"));
  timing_ = true;
  return Status::Ok();
}

void Profiler::Read(Stats& stats) {
  const Driver& drv = *drv_;
  if (timing_) {
    float ms = 0;
    if (drv.EventElapsedTime(&ms, start_, stop_) == CUDA_SUCCESS) stats.last_gpu_ns = static_cast<int64_t>(ms * 1e6);
    timing_ = false;
  }
  if (marked_ > 1) {
    stats.last_instruction_ns.assign(marked_ - 1, 0);
    for (size_t k = 1; k < marked_; ++k) {
      float ms = 0;
      if (drv.EventElapsedTime(&ms, marks_[k - 1], marks_[k]) == CUDA_SUCCESS)
        stats.last_instruction_ns[k - 1] = static_cast<int64_t>(ms * 1e6);
    }
    // A run-time Loop's earlier iterations (Repeat).
    for (size_t k = 0; k < loop_ns_.size() && k + 1 < marked_; ++k)
      stats.last_instruction_ns[k] = begin_jumped_[k] ? loop_ns_[k] : stats.last_instruction_ns[k] + loop_ns_[k];
    marked_ = 0;
  }
}

}  // namespace kiln::cuda
