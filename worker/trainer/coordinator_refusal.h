// A coordinator RPC's refusal of this worker's credential, marked so that
// RunGenerations (worker_runtime.cc) can tell it from a local permission
// error (a step log or offload directory it may not write): a restarted
// coordinator refuses every member credential of the members it forgot
// until they join again. The mark is a status payload, so it survives
// ZS_RETURN_IF_ERROR but not a status rebuilt from code and message.
// Thread safety: pure functions.
#pragma once

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/string_view.h"

namespace zeroshard {

inline constexpr absl::string_view kCoordinatorRefusalPayload =
    "type.zeroshard.dev/coordinator-refusal";

// `s` itself unless it is PERMISSION_DENIED or UNAUTHENTICATED; then `s`
// with the mark. Call only on statuses a coordinator RPC returned.
inline absl::Status MarkCoordinatorRefusal(absl::Status s) {
  if (absl::IsPermissionDenied(s) || absl::IsUnauthenticated(s)) {
    s.SetPayload(kCoordinatorRefusalPayload, absl::Cord("1"));
  }
  return s;
}

inline bool IsCoordinatorRefusal(const absl::Status& s) {
  return s.GetPayload(kCoordinatorRefusalPayload).has_value();
}

}  // namespace zeroshard
