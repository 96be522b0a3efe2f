#include "worker/data/fine_tune_samples.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "worker/data/jsonl.h"

namespace zeroshard {
namespace {

constexpr int32_t kIgnore = -1;  // worker/model/kernel_constants.h's kIgnoreTarget.

absl::StatusOr<FineTuneSample> Tokenize(const nlohmann::json& j, const tokenizer::Tokenizer& tok,
                                        int context, const std::string& where) {
  ZS_ASSIGN_OR_RETURN(const std::string prompt, JsonlString(j, "prompt", where));
  ZS_ASSIGN_OR_RETURN(const std::string completion, JsonlString(j, "completion", where));
  const tokenizer::SpecialTokens& sp = tok.specials();
  FineTuneSample s;
  s.ids = sp.prefix;
  ZS_ASSIGN_OR_RETURN(const std::vector<int32_t> p, tok.Encode(prompt));
  s.ids.insert(s.ids.end(), p.begin(), p.end());
  s.counted_from = static_cast<int32_t>(std::max<size_t>(s.ids.size(), 1));
  ZS_ASSIGN_OR_RETURN(const std::vector<int32_t> c, tok.Encode(completion));
  s.ids.insert(s.ids.end(), c.begin(), c.end());
  s.ids.insert(s.ids.end(), sp.suffix.begin(), sp.suffix.end());
  if (sp.suffix.empty() && sp.eos >= 0) s.ids.push_back(sp.eos);
  if (CountedTargets(s, context) == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": the prompt is ", s.counted_from, " tokens with the template, which leaves no ",
        "completion token inside the context of ", context));
  }
  return s;
}

}  // namespace

bool IsPromptCompletionFile(const std::string& file) {
  if (!absl::EndsWith(file, ".jsonl")) return false;
  absl::StatusOr<JsonlReader> r = JsonlReader::Open(file);
  nlohmann::json obj;
  std::string where;
  absl::StatusOr<bool> first = r.ok() ? r->Next(&obj, &where) : r.status();
  return first.ok() && *first && obj.contains("prompt");
}

absl::StatusOr<std::vector<FineTuneSample>> ReadPromptCompletion(const std::string& file,
                                                                 const tokenizer::Tokenizer& tok,
                                                                 int context) {
  ZS_ASSIGN_OR_RETURN(JsonlReader reader, JsonlReader::Open(file));
  std::vector<FineTuneSample> out;
  nlohmann::json obj;
  std::string where;
  for (;;) {
    ZS_ASSIGN_OR_RETURN(const bool more, reader.Next(&obj, &where));
    if (!more) return out;
    ZS_ASSIGN_OR_RETURN(FineTuneSample s, Tokenize(obj, tok, context, where));
    out.push_back(std::move(s));
  }
}

int64_t CountedTargets(const FineTuneSample& s, int T) {
  const int64_t len = std::min<int64_t>(static_cast<int64_t>(s.ids.size()), int64_t{T} + 1);
  return std::max<int64_t>(0, len - s.counted_from);
}

int64_t FillSample(const FineTuneSample& s, int T, int32_t* inputs, int32_t* targets) {
  const int64_t len = std::min<int64_t>(static_cast<int64_t>(s.ids.size()), int64_t{T} + 1);
  for (int t = 0; t < T; ++t) {
    inputs[t] = t < len ? s.ids[t] : 0;
    targets[t] = t + 1 < len && t + 1 >= s.counted_from ? s.ids[t + 1] : kIgnore;
  }
  return CountedTargets(s, T);
}

}  // namespace zeroshard
