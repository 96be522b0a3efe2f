#include "common/job_refusal.h"

#include "absl/strings/cord.h"

namespace zeroshard {
namespace {

constexpr char kRefusalUrl[] = "type.zeroshard.dev/job-refusal";

}  // namespace

absl::Status AsJobRefusal(absl::Status status) {
  if (!status.ok()) status.SetPayload(kRefusalUrl, absl::Cord("1"));
  return status;
}

bool IsJobRefusal(const absl::Status& status) {
  return !status.ok() && status.GetPayload(kRefusalUrl).has_value();
}

}  // namespace zeroshard
