#include "runtime/executor/runtime_dims.h"

#include <string>
#include <utility>

#include "runtime/artifact_header.h"

namespace kiln {

Status RuntimeDims::Set(int32_t dim, int64_t value, bool* rebound) {
  const int32_t symbol = binder_.RuntimeSymbol(entry_, dim);
  int64_t& bound = state_.scratch.symbol_values[static_cast<size_t>(symbol)];
  *rebound = bound != value;
  if (*rebound) {
    bound = value;
    ++stats_.runtime_dim_binds;
    KILN_RETURN_IF_ERROR(binder_.Bind(entry_, inputs_, /*runtime_dims_set=*/true));
  }
  return binder_.CheckRuntimeGuards(entry_, dim);
}

Status RuntimeDims::Reset(int32_t dim, bool* rebound) {
  int64_t& value = state_.scratch.symbol_values[static_cast<size_t>(binder_.RuntimeSymbol(entry_, dim))];
  const int64_t bound = binder_.RuntimeBound(entry_, dim);
  *rebound = value != bound;
  if (!*rebound) return Status::Ok();
  value = bound;
  ++stats_.runtime_dim_binds;
  return binder_.Bind(entry_, inputs_, /*runtime_dims_set=*/true);
}

Status RuntimeDims::Grow(int32_t dim, Status full) {
  const PreparedEntry& pe = binder_.entry(entry_);
  const int32_t room = pe.runtime_dims[static_cast<size_t>(dim)].room;
  if (room < 0) return full;
  int64_t& rows = state_.scratch.symbol_values[static_cast<size_t>(pe.rooms[static_cast<size_t>(room)].symbol)];
  if (rows >= kMaxRoom) return full;
  grown_ = &rows;
  rows *= 2;
  ++stats_.room_growths;
  grew_ = true;
  return ResourceExhausted("the room grew to " + std::to_string(rows) + " rows; the call runs again");
}

bool RuntimeDims::TakeGrowth() { return std::exchange(grew_, false); }

void RuntimeDims::UndoGrowth() {
  if (grown_ != nullptr) *grown_ /= 2;
  grown_ = nullptr;
}

}  // namespace kiln
