// Error-propagation helpers. Debian's abseil (20220623) has no
// RETURN_IF_ERROR, so zeroshard keeps these two small macros.
//
// ZS_RETURN_IF_ERROR(expr): evaluates an absl::Status expression and returns
//   it from the enclosing function when it is not OK.
// ZS_ASSIGN_OR_RETURN(lhs, expr): evaluates an absl::StatusOr<T> expression;
//   returns its status when not OK, else assigns/declares lhs from its value.
// ZS_CHECK(cond): a broken invariant (a bug, never bad input): prints the
//   condition with file:line and aborts.
#pragma once

#include <cstdio>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define ZS_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::absl::Status zs_status_ = (expr);      \
    if (!zs_status_.ok()) return zs_status_; \
  } while (0)

#define ZS_CONCAT_INNER_(a, b) a##b
#define ZS_CONCAT_(a, b) ZS_CONCAT_INNER_(a, b)
#define ZS_ASSIGN_OR_RETURN(lhs, expr) \
  ZS_ASSIGN_OR_RETURN_IMPL_(ZS_CONCAT_(zs_statusor_, __LINE__), lhs, expr)
#define ZS_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()

#define ZS_CHECK(cond)                                                              \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                 \
    }                                                                               \
  } while (0)
