#include "server/core/validation.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace zeroshard::server {
namespace {

std::string Shape(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

// Keeps echoed client text short and printable in error messages.
std::string Quote(const std::string& s) {
  std::string out;
  for (char c : s.substr(0, 64)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  return absl::StrCat("\"", out, s.size() > 64 ? "...\"" : "\"");
}

}  // namespace

absl::Status CheckJobId(const std::string& job_id, const std::string& expected, bool allow_empty) {
  if (job_id.empty()) {
    if (allow_empty) return absl::OkStatus();
    return absl::InvalidArgumentError("job_id is empty");
  }
  if (job_id != expected) {
    return absl::FailedPreconditionError(
        absl::StrCat("job_id ", Quote(job_id), " is not this coordinator's job ", Quote(expected)));
  }
  return absl::OkStatus();
}

absl::Status CheckToken(const std::string& value, const char* field, size_t max_bytes,
                        bool required) {
  if (value.empty()) {
    return required ? absl::InvalidArgumentError(absl::StrCat(field, " is empty"))
                    : absl::OkStatus();
  }
  if (value.size() > max_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " is ", value.size(), " bytes; the limit is ", max_bytes));
  }
  for (char c : value) {
    if (c <= 0x20 || c >= 0x7f) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, " ", Quote(value), " has a character outside printable ASCII"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckRange(int64_t offset, int64_t length, int64_t total, const char* what,
                        int64_t min_length) {
  // [Note: overflow-safe ranges] total - offset cannot overflow once
  // 0 <= offset <= total.
  if (offset < 0 || length < min_length || total < 0 || offset > total || length > total - offset) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": offset ", offset, " and length ",
                                                   length, " are not a range of at least ",
                                                   min_length, " inside [0, ", total, ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckStep(int64_t step, int64_t job_steps, const char* field) {
  const int64_t limit = job_steps > 0 ? job_steps : kMaxStep;
  if (step < 0 || step > limit) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, " ", step, " is outside [0, ", limit, "] (",
        job_steps > 0 ? "the job config's steps" : "no steps in the job config; the limit", ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckLoss(double loss, const char* field) {
  if (std::isnan(loss) || (std::isfinite(loss) && loss >= 0)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(field, " ", loss, " is neither NaN nor a finite value >= 0"));
}

absl::Status CheckBetween(int64_t value, int64_t lo, int64_t hi, const char* field) {
  if (value < lo || value > hi) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " ", value, " is outside [", lo, ", ", hi, "]"));
  }
  return absl::OkStatus();
}

absl::Status CheckMemberId(uint64_t member_id) {
  if (member_id == 0) return absl::InvalidArgumentError("member_id is 0 (unset)");
  return absl::OkStatus();
}

std::string DescribeUnitsDifference(const std::vector<UnitSpec>& job,
                                    const std::vector<UnitSpec>& joiner) {
  if (job.size() != joiner.size()) {
    return absl::StrCat("units has ", joiner.size(), " entries, the job has ", job.size());
  }
  for (size_t u = 0; u < job.size(); ++u) {
    const std::string unit = absl::StrCat("units[", u, "]");
    if (job[u].name != joiner[u].name) {
      return absl::StrCat(unit, ".name is ", Quote(joiner[u].name), ", the job has ",
                          Quote(job[u].name));
    }
    if (job[u].params.size() != joiner[u].params.size()) {
      return absl::StrCat(unit, " (", job[u].name, ") has ", joiner[u].params.size(),
                          " params, the job has ", job[u].params.size());
    }
    for (size_t p = 0; p < job[u].params.size(); ++p) {
      const TensorSpec& a = job[u].params[p];
      const TensorSpec& b = joiner[u].params[p];
      const std::string param = absl::StrCat(unit, ".params[", p, "]");
      if (a.name != b.name) {
        return absl::StrCat(param, ".name is ", Quote(b.name), ", the job has ", Quote(a.name));
      }
      if (a.shape != b.shape) {
        return absl::StrCat(param, " (", a.name, ").shape is ", Shape(b.shape), ", the job has ",
                            Shape(a.shape));
      }
      if (a.dtype != b.dtype) {
        return absl::StrCat(param, " (", a.name, ").dtype is ", DTypeName(b.dtype),
                            ", the job has ", DTypeName(a.dtype));
      }
    }
  }
  return "";
}

}  // namespace zeroshard::server
