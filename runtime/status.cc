// Status: an OK Status is a null pointer; errors carry a code and a message on the heap.
#include "kiln/status.h"

namespace kiln {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "INVALID_ARGUMENT";
    case StatusCode::kNotFound: return "NOT_FOUND";
    case StatusCode::kOutOfRange: return "OUT_OF_RANGE";
    case StatusCode::kResourceExhausted: return "RESOURCE_EXHAUSTED";
    case StatusCode::kFailedPrecondition: return "FAILED_PRECONDITION";
    case StatusCode::kDataLoss: return "DATA_LOSS";
    case StatusCode::kIncompatible: return "INCOMPATIBLE";
    case StatusCode::kUnimplemented: return "UNIMPLEMENTED";
    case StatusCode::kInternal: return "INTERNAL";
    case StatusCode::kDeviceError: return "DEVICE_ERROR";
  }
  return "UNKNOWN";
}

Status::Status(StatusCode code, std::string message) {
  // A Status built with kOk is OK whatever the message: ok() must mean code() == kOk.
  if (code != StatusCode::kOk) rep_ = std::make_unique<Rep>(Rep{code, std::move(message)});
}

const std::string& Status::message() const& {
  static const std::string kEmpty;
  return rep_ ? rep_->message : kEmpty;
}

std::string Status::message() && { return rep_ ? std::move(rep_->message) : std::string(); }

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string out(StatusCodeName(rep_->code));
  out += ": ";
  out += rep_->message;
  return out;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return Status();
  std::string msg(context);
  msg += ": ";
  msg += rep_->message;
  return Status(rep_->code, std::move(msg));
}

Status InvalidArgument(std::string message) { return Status(StatusCode::kInvalidArgument, std::move(message)); }
Status NotFound(std::string message) { return Status(StatusCode::kNotFound, std::move(message)); }
Status OutOfRange(std::string message) { return Status(StatusCode::kOutOfRange, std::move(message)); }
Status ResourceExhausted(std::string message) {
  return Status(StatusCode::kResourceExhausted, std::move(message));
}
Status FailedPrecondition(std::string message) {
  return Status(StatusCode::kFailedPrecondition, std::move(message));
}
Status DataLoss(std::string message) { return Status(StatusCode::kDataLoss, std::move(message)); }
Status Incompatible(std::string message) { return Status(StatusCode::kIncompatible, std::move(message)); }
Status Unimplemented(std::string message) { return Status(StatusCode::kUnimplemented, std::move(message)); }
Status Internal(std::string message) { return Status(StatusCode::kInternal, std::move(message)); }

}  // namespace kiln
