// Which tokenizer reads a job's text (JobConfig::tokenizer): "bytes" none;
// a path, that tokenizer; "" the model directory's own (tokenizer.json or
// tokenizer.model beside config.json) where it has one, else none (each
// byte a token, as for the presets).
//
// ResolveJobTokenizer is what `zeroshard launch` calls before any worker
// starts: it turns "" into the absolute path of what it found, or "bytes",
// so every worker reads the text the same way, and a worker that cannot
// open that path fails instead of falling back.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/model/job_config.h"
#include "common/tokenizer/tokenizer.h"

namespace zeroshard::tokenizer {

inline constexpr char kBytesTokenizer[] = "bytes";

// The tokenizer of `job`; null for bytes. The loader's errors (NOT_FOUND,
// INVALID_ARGUMENT naming the file) for a path that does not load.
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadJobTokenizer(const JobConfig& job);

// Sets job->tokenizer to the absolute path LoadJobTokenizer would use, or
// "bytes"; returns the tokenizer (null for bytes).
absl::StatusOr<std::unique_ptr<Tokenizer>> ResolveJobTokenizer(JobConfig* job);

}  // namespace zeroshard::tokenizer
