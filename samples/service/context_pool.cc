#include "context_pool.h"

#include <string>

kiln::Result<std::unique_ptr<ContextPool>> ContextPool::Create(const kiln::Model& model, int size,
                                                               const kiln::ContextOptions& options) {
  if (size < 1) return kiln::InvalidArgument("a pool needs at least one context, asked for " + std::to_string(size));
  std::vector<kiln::ExecutionContext> contexts;
  for (int i = 0; i < size; ++i) {
    kiln::Result<kiln::ExecutionContext> ctx = kiln::ExecutionContext::Create(model, options);
    if (!ctx.ok()) return ctx.status().WithContext("context " + std::to_string(i));
    contexts.push_back(std::move(*ctx));
  }
  return std::unique_ptr<ContextPool>(new ContextPool(std::move(contexts)));
}

ContextPool::ContextPool(std::vector<kiln::ExecutionContext> contexts) : contexts_(std::move(contexts)) {
  for (int i = size(); i-- > 0;) free_.push_back(i);
}

std::optional<ContextPool::Lease> ContextPool::Borrow(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!freed_.wait_for(lock, timeout, [&] { return !free_.empty(); })) return std::nullopt;
  const int index = free_.back();
  free_.pop_back();
  return Lease(this, index);
}

int ContextPool::busy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return size() - static_cast<int>(free_.size());
}

void ContextPool::Return(int index) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(index);
  }
  freed_.notify_one();
}

ContextPool::Lease::~Lease() {
  if (pool_) pool_->Return(index_);
}

kiln::ExecutionContext& ContextPool::Lease::context() const { return pool_->contexts_[index_]; }
