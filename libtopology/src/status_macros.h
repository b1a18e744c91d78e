// Private helpers for propagating Status values.
#ifndef TOPOLOGY_SRC_STATUS_MACROS_H_
#define TOPOLOGY_SRC_STATUS_MACROS_H_

#include "topology/status.h"

#define TOPOLOGY_STATUS_CONCAT_INNER(a, b) a##b
#define TOPOLOGY_STATUS_CONCAT(a, b) TOPOLOGY_STATUS_CONCAT_INNER(a, b)

// Returns the Status of `expr` from the enclosing function when it is not OK.
#define TOPOLOGY_RETURN_IF_ERROR(expr)                   \
  do {                                                   \
    ::topology::Status topology_status_ = (expr);        \
    if (!topology_status_.ok()) return topology_status_; \
  } while (false)

// Evaluates a StatusOr<T> expression; on error returns its Status, otherwise
// moves the value into `lhs` (which may be a declaration).
#define TOPOLOGY_ASSIGN_OR_RETURN(lhs, expr) \
  TOPOLOGY_ASSIGN_OR_RETURN_IMPL(            \
      TOPOLOGY_STATUS_CONCAT(topology_statusor_, __LINE__), lhs, expr)

// `statusor` is a name and `lhs` a declaration: neither can be
// parenthesised.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define TOPOLOGY_ASSIGN_OR_RETURN_IMPL(statusor, lhs, expr) \
  auto statusor = (expr);                                   \
  if (!statusor.ok()) return statusor.status();             \
  lhs = std::move(statusor).value()
// NOLINTEND(bugprone-macro-parentheses)

#endif  // TOPOLOGY_SRC_STATUS_MACROS_H_
