// context_pool.h: a fixed set of ExecutionContexts over one Model, lent to one request at a time.
//
//   KILN_ASSIGN_OR_RETURN(auto pool, ContextPool::Create(model, 4, {.device = kiln::Device::kCpu, .cpu = {.threads = 2}}));
//   if (std::optional<ContextPool::Lease> lease = pool->Borrow(std::chrono::milliseconds(5000))) {
//     kiln::Status st = lease->context().Run(inputs, outputs);
//   }  // the context goes back to the pool here
//
// A context is thread-compatible (kiln/runtime.h), so the pool hands each to one borrower at a
// time; K contexts serve K requests at once. The pool is thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "kiln/runtime.h"

class ContextPool {
 public:
  // Creates `size` contexts (>= 1) with `options`. Errors: ExecutionContext::Create's, naming
  // the context.
  static kiln::Result<std::unique_ptr<ContextPool>> Create(const kiln::Model& model, int size,
                                                           const kiln::ContextOptions& options);

  // Exclusive use of one context until destroyed. Movable, not copyable.
  class Lease {
   public:
    Lease(Lease&& other) noexcept : pool_(other.pool_), index_(other.index_) { other.pool_ = nullptr; }
    Lease& operator=(Lease&&) = delete;
    ~Lease();
    kiln::ExecutionContext& context() const;
    int index() const { return index_; }  // 0..size()-1, stable per context

   private:
    friend class ContextPool;
    Lease(ContextPool* pool, int index) : pool_(pool), index_(index) {}
    ContextPool* pool_;
    int index_;
  };

  // Waits up to `timeout` for a free context; nullopt if none came free in time (0: do not wait).
  std::optional<Lease> Borrow(std::chrono::milliseconds timeout);

  int size() const { return static_cast<int>(contexts_.size()); }
  int busy() const;  // contexts lent now

 private:
  explicit ContextPool(std::vector<kiln::ExecutionContext> contexts);
  void Return(int index);

  std::vector<kiln::ExecutionContext> contexts_;
  mutable std::mutex mu_;
  std::condition_variable freed_;
  std::vector<int> free_;  // indices of contexts not lent, guarded by mu_
};
