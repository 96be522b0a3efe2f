// tokenizer.json's "added_tokens" (the special tokens such as Llama 3's
// <|begin_of_text|>, and others added after training): before anything
// else, the text is cut at every occurrence of one, and each occurrence
// becomes its id directly, as HF tokenizers' encode does by default
// (split_special_tokens=False). Matching is leftmost-longest, as HF's
// Aho-Corasick automaton (MatchKind::LeftmostLongest); single_word asks for
// no word character on either side; lstrip and rstrip take the whitespace on
// that side into the token.
//
// Thread safety: immutable after construction.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace zeroshard::tokenizer {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool special = false;
};

// A stretch of the text: plain text (id < 0) for the model, or one added
// token (its id).
struct Segment {
  std::string_view text;
  int32_t id = -1;
};

class AddedTokenSplitter {
 public:
  explicit AddedTokenSplitter(std::vector<AddedToken> tokens);
  // Appends text's segments, in order, to *out; empty plain stretches are
  // left out.
  void Split(std::string_view text, std::vector<Segment>* out) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  // The longest token that matches at `at` with its word rule; -1 if none.
  int Longest(std::string_view text, size_t at) const;

  std::vector<AddedToken> tokens_;
  std::vector<int> by_first_[256];  // Token indexes by first byte, longest first.
};

}  // namespace zeroshard::tokenizer
