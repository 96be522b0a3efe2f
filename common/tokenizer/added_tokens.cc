#include "common/tokenizer/added_tokens.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"

namespace zeroshard::tokenizer {
namespace {

bool IsSpace(char c) { return absl::ascii_isspace(static_cast<unsigned char>(c)); }
// A byte of a word: ASCII letters, digits, '_', and any byte of a non-ASCII
// character (letters of other scripts; HF asks char::is_alphanumeric).
bool IsWordByte(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u >= 0x80 || absl::ascii_isalnum(u) || c == '_';
}

}  // namespace

AddedTokenSplitter::AddedTokenSplitter(std::vector<AddedToken> tokens)
    : tokens_(std::move(tokens)) {
  for (size_t i = 0; i < tokens_.size(); ++i) {
    if (tokens_[i].content.empty()) continue;
    by_first_[static_cast<uint8_t>(tokens_[i].content[0])].push_back(static_cast<int>(i));
  }
  for (std::vector<int>& list : by_first_) {
    std::stable_sort(list.begin(), list.end(), [this](int a, int b) {
      return tokens_[a].content.size() > tokens_[b].content.size();
    });
  }
}

int AddedTokenSplitter::Longest(std::string_view text, size_t at) const {
  for (int i : by_first_[static_cast<uint8_t>(text[at])]) {
    const AddedToken& t = tokens_[i];
    if (text.compare(at, t.content.size(), t.content) != 0) continue;
    if (t.single_word) {
      const size_t end = at + t.content.size();
      if ((at > 0 && IsWordByte(text[at - 1])) || (end < text.size() && IsWordByte(text[end]))) {
        continue;
      }
    }
    return i;
  }
  return -1;
}

void AddedTokenSplitter::Split(std::string_view text, std::vector<Segment>* out) const {
  size_t plain = 0;  // Start of the plain stretch not yet emitted.
  size_t at = 0;
  while (at < text.size()) {
    const int i = tokens_.empty() ? -1 : Longest(text, at);
    if (i < 0) {
      ++at;
      continue;
    }
    const AddedToken& t = tokens_[i];
    size_t begin = at, end = at + t.content.size();
    if (t.lstrip) {
      while (begin > plain && IsSpace(text[begin - 1])) --begin;
    }
    if (t.rstrip) {
      while (end < text.size() && IsSpace(text[end])) ++end;
    }
    if (begin > plain) out->push_back({text.substr(plain, begin - plain), -1});
    out->push_back({text.substr(begin, end - begin), t.id});
    plain = at = end;
  }
  if (plain < text.size()) out->push_back({text.substr(plain), -1});
}

}  // namespace zeroshard::tokenizer
