#include "common/tokenizer/incremental_decode.h"

#include <algorithm>
#include <string_view>

#include "common/status_macros.h"

namespace zeroshard::tokenizer {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD in UTF-8.

}  // namespace

absl::StatusOr<std::string> IncrementalDecoder::Append(absl::Span<const int32_t> ids) {
  const size_t before = held_.size();
  held_.insert(held_.end(), ids.begin(), ids.end());
  absl::StatusOr<std::string> text = Emit(/*force=*/false);
  if (!text.ok()) held_.resize(before);  // The stream goes on without them.
  return text;
}

void IncrementalDecoder::ContinueAfter(absl::Span<const int32_t> shown) {
  const size_t keep = std::min(shown.size(), kContextIds);
  context_.assign(shown.end() - static_cast<std::ptrdiff_t>(keep), shown.end());
}

absl::StatusOr<std::string> IncrementalDecoder::Finish() { return Emit(/*force=*/true); }

// How many held ids end on a whole character: the most whose last
// kContextIds ids' decoding does not end in U+FFFD (how a decoding ends
// depends only on its last ids; UTF-8 resynchronises). 0: none.
absl::StatusOr<size_t> IncrementalDecoder::Finished() const {
  for (size_t end = held_.size(); end > 0 && end + kContextIds > held_.size(); --end) {
    const size_t from = end > kContextIds ? end - kContextIds : 0;
    ZS_ASSIGN_OR_RETURN(const std::string tail,
                        tok_.Decode(absl::MakeConstSpan(held_).subspan(from, end - from)));
    if (!std::string_view(tail).ends_with(kReplacement)) return end;
  }
  return 0;
}

absl::StatusOr<std::string> IncrementalDecoder::Emit(bool force) {
  if (held_.empty()) return std::string();
  size_t take = held_.size();
  if (!force) {
    ZS_ASSIGN_OR_RETURN(take, Finished());
    if (take == 0 && held_.size() < kMaxHeldIds) return std::string();
    if (take == 0) take = held_.size();  // Held long enough: given as it is.
  }
  std::vector<int32_t> all = context_;
  all.insert(all.end(), held_.begin(), held_.begin() + static_cast<std::ptrdiff_t>(take));
  ZS_ASSIGN_OR_RETURN(std::string text, tok_.Decode(all));
  std::string head;
  if (!context_.empty()) {
    ZS_ASSIGN_OR_RETURN(head, tok_.Decode(context_));
  }
  // The context's text is not where this decoding starts (no tokenizer here
  // does that): the ids' own decoding, so no text is lost.
  if (std::string_view(text).substr(0, head.size()) != head) {
    ZS_ASSIGN_OR_RETURN(text, tok_.Decode(absl::MakeConstSpan(all).subspan(context_.size())));
    head.clear();
  }
  const size_t keep = std::min(all.size(), kContextIds);
  context_.assign(all.end() - static_cast<std::ptrdiff_t>(keep), all.end());
  held_.erase(held_.begin(), held_.begin() + static_cast<std::ptrdiff_t>(take));
  return text.substr(head.size());
}

}  // namespace zeroshard::tokenizer
