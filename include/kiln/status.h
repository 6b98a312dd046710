// kiln/status.h: error handling for every fallible Kiln call.
//
//   kiln::Result<kiln::Model> model = kiln::Model::Load("net.kiln");
//   if (!model.ok()) { std::cerr << model.status().ToString() << "\n"; return 1; }
//
// Kiln never throws across its public API and never aborts. Every fallible call returns a
// `Status` (OK, or a code plus a message saying what was expected, what was found and
// where) or a `Result<T>` (a value, or a non-OK Status). An OK Status holds no heap memory,
// so checking it is one pointer compare. Status and Result are thread-compatible values.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "kiln/export.h"

namespace kiln {

// The short code set. The detail is always in the message.
enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument = 1,     // a caller's input is wrong (tensor shape, dtype, option value)
  kNotFound = 2,            // a file, input name or entry does not exist
  kOutOfRange = 3,          // an index or size is outside its valid range
  kResourceExhausted = 4,   // memory or a configured limit is exhausted
  kFailedPrecondition = 5,  // the system is not in a state to do this (e.g. no CUDA device)
  kDataLoss = 6,            // an artifact or model file is corrupt or truncated
  kIncompatible = 7,        // a valid file this build cannot run (newer format, missing arch)
  kUnimplemented = 8,       // an op, attribute or feature Kiln does not support yet
  kInternal = 9,            // a Kiln bug: an invariant did not hold
  kDeviceError = 10,        // a CUDA driver or library call failed
};

// Name of a code, e.g. "INVALID_ARGUMENT".
KILN_API std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] KILN_API Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message);

  static Status Ok() { return Status(); }

  bool ok() const { return rep_ == nullptr; }
  StatusCode code() const { return rep_ ? rep_->code : StatusCode::kOk; }
  // Empty for OK. Of a temporary Status, a copy, so that a reference kept from it never dangles.
  const std::string& message() const&;
  std::string message() &&;
  // "INVALID_ARGUMENT: message", or "OK".
  std::string ToString() const;

  // Returns a copy whose message is "context: message"; OK stays OK. Used as an error
  // travels up, so the final message says where it happened.
  Status WithContext(std::string_view context) const;

  Status(const Status& other) : rep_(other.rep_ ? std::make_unique<Rep>(*other.rep_) : nullptr) {}
  Status& operator=(const Status& other) {
    rep_ = other.rep_ ? std::make_unique<Rep>(*other.rep_) : nullptr;
    return *this;
  }
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;

 private:
  struct Rep {
    StatusCode code;
    std::string message;
  };
  std::unique_ptr<Rep> rep_;
};

// Shorthands, e.g. `return InvalidArgument("input 'x' dim 0 = 3, expected 1")`.
KILN_API Status InvalidArgument(std::string message);
KILN_API Status NotFound(std::string message);
KILN_API Status OutOfRange(std::string message);
KILN_API Status ResourceExhausted(std::string message);
KILN_API Status FailedPrecondition(std::string message);
KILN_API Status DataLoss(std::string message);
KILN_API Status Incompatible(std::string message);
KILN_API Status Unimplemented(std::string message);
KILN_API Status Internal(std::string message);

// A value of type T, or a non-OK Status. Accessing value() of an error Result is a bug in
// the caller; it is checked in debug builds only.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}                // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {          // NOLINT: implicit by design
    if (std::get<Status>(v_).ok()) v_ = Status(StatusCode::kInternal, "Result built from OK status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  // A reference into the Result (an OK Status for a value); of a temporary Result, its Status
  // moved out, so that a reference kept from it never dangles.
  const Status& status() const& {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  Status status() && { return ok() ? Status() : std::get<Status>(std::move(v_)); }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<Status, T> v_;
};

}  // namespace kiln

#define KILN_CONCAT_INNER_(a, b) a##b
#define KILN_CONCAT_(a, b) KILN_CONCAT_INNER_(a, b)

// Returns the Status of `expr` from the enclosing function if it is not OK.
#define KILN_RETURN_IF_ERROR(expr)                      \
  do {                                                  \
    ::kiln::Status kiln_status_ = (expr);               \
    if (!kiln_status_.ok()) return kiln_status_;        \
  } while (0)

// Same, adding "context: " in front of the message.
#define KILN_RETURN_IF_ERROR_CTX(expr, context)                             \
  do {                                                                      \
    ::kiln::Status kiln_status_ = (expr);                                   \
    if (!kiln_status_.ok()) return kiln_status_.WithContext(context);       \
  } while (0)

// `KILN_ASSIGN_OR_RETURN(auto x, MakeX());` declares x from a Result or returns its Status.
#define KILN_ASSIGN_OR_RETURN(lhs, rexpr) \
  KILN_ASSIGN_OR_RETURN_IMPL_(KILN_CONCAT_(kiln_result_, __LINE__), lhs, rexpr)
#define KILN_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                                \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()
