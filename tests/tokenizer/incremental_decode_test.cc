// IncrementalDecoder against decoding every id at once, on a tokenizer that
// decodes as SentencePiece does (the space of the first word dropped;
// byte-fallback pieces that make a character only together, U+FFFD for an
// unfinished one) and on the byte tokenizer (raw bytes), in runs of every
// size from one id (generate) to many (tokenize --decode).
#include "common/tokenizer/incremental_decode.h"

#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/tokenizer/tokenizer.h"
#include "gtest/gtest.h"

namespace zeroshard::tokenizer {
namespace {

// Ids 0-2: words with a leading "▁"; 3: a word without; 4: a control id
// (no text); 5-7: the bytes of "€" (E2 82 AC) as byte-fallback pieces.
class SentencePieceLike : public Tokenizer {
 public:
  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view) const override {
    return absl::UnimplementedError("not needed");
  }
  absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids) const override {
    static const std::vector<std::string> pieces = {" the", " cat", " sat", "s",
                                                    "",     "\xE2", "\x82", "\xAC"};
    std::string bytes;
    for (int32_t id : ids) {
      if (id < 0 || id >= vocab_size()) return absl::InvalidArgumentError(absl::StrCat(id));
      bytes += pieces[id];
    }
    if (!bytes.empty() && bytes[0] == ' ') bytes.erase(0, 1);
    return Repaired(bytes);
  }
  int32_t vocab_size() const override { return 8; }
  int32_t IdOfToken(std::string_view) const override { return -1; }
  std::string Describe() const override { return "SentencePiece-like"; }

 private:
  // Only "€" is multi-byte here: its 3 bytes in order, else U+FFFD a byte.
  static std::string Repaired(const std::string& bytes) {
    std::string out;
    for (size_t i = 0; i < bytes.size();) {
      if (bytes.compare(i, 3, "\xE2\x82\xAC") == 0) {
        out += "\xE2\x82\xAC";
        i += 3;
      } else if (static_cast<unsigned char>(bytes[i]) >= 0x80) {
        out += "\xEF\xBF\xBD";
        ++i;
      } else {
        out += bytes[i++];
      }
    }
    return out;
  }
};

std::vector<int32_t> RandomIds(int n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> ids;
  while (static_cast<int>(ids.size()) < n) {
    // Mostly whole characters: "€" as its three pieces in order.
    if (vocab == 8 && rng() % 4 == 0) {
      ids.insert(ids.end(), {5, 6, 7});
    } else {
      ids.push_back(static_cast<int32_t>(rng() % (vocab == 8 ? 5 : vocab)));
    }
  }
  return ids;
}

std::string InRuns(const Tokenizer& tok, const std::vector<int32_t>& ids, uint32_t seed,
                   int max_run) {
  std::mt19937 rng(seed);
  IncrementalDecoder decoder(tok);
  std::string text;
  for (size_t at = 0; at < ids.size();) {
    const size_t n = std::min<size_t>(1 + rng() % max_run, ids.size() - at);
    absl::StatusOr<std::string> part = decoder.Append(absl::MakeConstSpan(ids).subspan(at, n));
    EXPECT_TRUE(part.ok()) << part.status();
    text += part.value_or("");
    at += n;
  }
  text += decoder.Finish().value_or("?");
  return text;
}

TEST(IncrementalDecoder, RunsOfAnySizeGiveTheWholeDecoding) {
  const SentencePieceLike sp;
  const std::unique_ptr<Tokenizer> bytes = ByteTokenizer();
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    for (const Tokenizer* tok : std::vector<const Tokenizer*>{&sp, bytes.get()}) {
      const std::vector<int32_t> ids = RandomIds(300, tok->vocab_size(), seed);
      const std::string whole = *tok->Decode(ids);
      for (int max_run : {1, 2, 5, 50, 1000}) {
        EXPECT_EQ(InRuns(*tok, ids, seed, max_run), whole)
            << tok->Describe() << ", seed " << seed << ", runs up to " << max_run;
      }
    }
  }
}

TEST(IncrementalDecoder, RunsDecodedApartWouldNotBe) {
  // What the decoder exists for: apart, the second run loses " cat"'s space
  // and the split "€" becomes two U+FFFD.
  const SentencePieceLike sp;
  EXPECT_EQ(*sp.Decode({0, 1}), "the cat");
  EXPECT_EQ(*sp.Decode({0}) + *sp.Decode({1}), "thecat");
  IncrementalDecoder decoder(sp);
  EXPECT_EQ(*decoder.Append({0}), "the");
  EXPECT_EQ(*decoder.Append({1, 5}), " cat");  // "€" unfinished: its byte held.
  EXPECT_EQ(*decoder.Append({6}), "");
  EXPECT_EQ(*decoder.Append({7}), "\xE2\x82\xAC");
  EXPECT_EQ(*decoder.Finish(), "");
}

TEST(IncrementalDecoder, ACompletionContinuesThePromptsText) {
  // Decoded alone the completion " cat sat" loses its first space; after
  // the prompt it is what the prompt's text is followed by in the whole.
  const SentencePieceLike sp;
  const std::vector<int32_t> prompt = {0, 1, 0}, completion = {1, 2, 5, 6, 7};
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), completion.begin(), completion.end());
  const std::string whole = *sp.Decode(all), shown = *sp.Decode(prompt);
  ASSERT_EQ(whole.substr(0, shown.size()), shown);
  for (int max_run : {1, 3}) {
    IncrementalDecoder decoder(sp);
    decoder.ContinueAfter(prompt);
    std::string text;
    for (size_t at = 0; at < completion.size(); at += max_run) {
      const size_t n = std::min<size_t>(max_run, completion.size() - at);
      text += *decoder.Append(absl::MakeConstSpan(completion).subspan(at, n));
    }
    text += *decoder.Finish();
    EXPECT_EQ(text, whole.substr(shown.size())) << "runs of " << max_run;
    EXPECT_EQ(text, " cat sat\xE2\x82\xAC");
  }
  EXPECT_EQ(*sp.Decode(completion), "cat sat\xE2\x82\xAC") << "alone: no first space";
}

TEST(IncrementalDecoder, TextThatEndsInReplacementCharactersIsGivenOutAfterTheHoldLimit) {
  // Lone first bytes of "€": each decodes to U+FFFD, so every run's text
  // ends in one; the ids are held until kMaxHeldIds, then given as they are.
  const SentencePieceLike sp;
  IncrementalDecoder decoder(sp);
  const std::vector<int32_t> ids(IncrementalDecoder::kMaxHeldIds + 10, 5);
  std::string text;
  size_t first_text_at = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    text += *decoder.Append({ids[i]});
    if (first_text_at == 0 && !text.empty()) first_text_at = i + 1;
  }
  EXPECT_EQ(first_text_at, IncrementalDecoder::kMaxHeldIds);
  text += *decoder.Finish();
  EXPECT_EQ(text, *sp.Decode(ids));
}

TEST(IncrementalDecoder, AnUnknownIdIsAnErrorAndTheStreamGoesOn) {
  const SentencePieceLike sp;
  IncrementalDecoder decoder(sp);
  EXPECT_EQ(*decoder.Append({0}), "the");
  EXPECT_EQ(decoder.Append({99}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*decoder.Append({2}), " sat");
  // A character never finished comes out as U+FFFD at the end.
  EXPECT_EQ(*decoder.Append({5}), "");
  EXPECT_EQ(*decoder.Finish(), "\xEF\xBF\xBD");
}

}  // namespace
}  // namespace zeroshard::tokenizer
