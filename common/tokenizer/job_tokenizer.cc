#include "common/tokenizer/job_tokenizer.h"

#include <filesystem>

#include "common/model/hf_model_config.h"

namespace zeroshard::tokenizer {
namespace {

// The model directory's own tokenizer, when it has one.
bool HasOwnTokenizer(const std::string& model) {
  std::error_code ec;
  namespace fs = std::filesystem;
  return IsHfModelDir(model) && (fs::exists(fs::path(model) / "tokenizer.json", ec) ||
                                 fs::exists(fs::path(model) / "tokenizer.model", ec));
}

std::string Chosen(const JobConfig& job) {
  if (!job.tokenizer.empty()) return job.tokenizer;
  return HasOwnTokenizer(job.model) ? job.model : kBytesTokenizer;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadJobTokenizer(const JobConfig& job) {
  const std::string path = Chosen(job);
  if (path == kBytesTokenizer) return std::unique_ptr<Tokenizer>();
  return LoadTokenizer(path);
}

absl::StatusOr<std::unique_ptr<Tokenizer>> ResolveJobTokenizer(JobConfig* job) {
  std::string path = Chosen(*job);
  if (path != kBytesTokenizer) {
    std::error_code ec;
    path = std::filesystem::absolute(path, ec).string();
  }
  job->tokenizer = path;
  return LoadJobTokenizer(*job);
}

}  // namespace zeroshard::tokenizer
