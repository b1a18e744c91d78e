// Status and StatusOr<T>: the one error vocabulary of libtopology.
//
// No exception crosses a libtopology API. A function that can fail returns a
// Status, or a StatusOr<T> holding either a value or a non-OK Status. Codes
// are a subset of the canonical codes and keep their google.rpc.Code numbers,
// so the plugin maps them to grpc::Status in one place. "The policy rejects
// this pod" is not an error: it is a successful result carrying a verdict.
//
// Thread safety: values; const methods may be called concurrently.
#ifndef TOPOLOGY_STATUS_H_
#define TOPOLOGY_STATUS_H_

#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "topology/export.h"

namespace topology {

// Numbers are those of google.rpc.Code.
enum class StatusCode : int {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
};

// Returns the canonical upper-case name ("INVALID_ARGUMENT").
TOPOLOGY_EXPORT std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] TOPOLOGY_EXPORT Status {
 public:
  // An OK status.
  Status() = default;
  // A status with `code` and `message`. A kOk code drops the message.
  Status(StatusCode code, std::string message);

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "OK" or "INVALID_ARGUMENT: message".
  std::string ToString() const;

  // Returns a copy whose message is "context: message". OK stays OK.
  Status WithContext(std::string_view context) const;

  // A word for programs, as gRPC's ErrorInfo.reason: e.g. the kubelet's
  // admission reason ("SMTAlignmentError") that a resource manager's
  // refusal is reported under. Empty unless set; OK stays OK.
  const std::string& reason() const { return reason_; }
  Status WithReason(std::string reason) const;

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_ &&
           a.reason_ == b.reason_;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  std::string reason_;
};

inline Status OkStatus() { return Status(); }
TOPOLOGY_EXPORT Status InvalidArgumentError(std::string message);
TOPOLOGY_EXPORT Status NotFoundError(std::string message);
TOPOLOGY_EXPORT Status FailedPreconditionError(std::string message);
TOPOLOGY_EXPORT Status OutOfRangeError(std::string message);
TOPOLOGY_EXPORT Status DataLossError(std::string message);
TOPOLOGY_EXPORT Status InternalError(std::string message);
TOPOLOGY_EXPORT Status UnavailableError(std::string message);
TOPOLOGY_EXPORT Status PermissionDeniedError(std::string message);
TOPOLOGY_EXPORT Status ResourceExhaustedError(std::string message);
TOPOLOGY_EXPORT Status DeadlineExceededError(std::string message);
TOPOLOGY_EXPORT Status CancelledError(std::string message);

// Either a T or a non-OK Status. Shaped like std::expected so that a move to
// C++23 stays cheap.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  // REQUIRES: !status.ok(). An OK status becomes an INTERNAL error, since it
  // carries no value.
  StatusOr(Status status)  // NOLINT(google-explicit-constructor)
      : status_(std::move(status)) {
    if (status_.ok()) {
      status_ = Status(StatusCode::kInternal, "StatusOr built from OK status");
    }
  }
  StatusOr(const T& value) : value_(value) {}        // NOLINT
  StatusOr(T&& value) : value_(std::move(value)) {}  // NOLINT

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }

  // REQUIRES: ok().
  const T& value() const& { return *value_; }
  T& value() & { return *value_; }
  T&& value() && { return std::move(*value_); }
  const T& operator*() const& { return *value_; }
  T& operator*() & { return *value_; }
  T&& operator*() && { return std::move(*value_); }
  const T* operator->() const { return &*value_; }
  T* operator->() { return &*value_; }

  template <typename U>
  T value_or(U&& fallback) const& {
    return ok() ? *value_ : static_cast<T>(std::forward<U>(fallback));
  }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace topology

#endif  // TOPOLOGY_STATUS_H_
