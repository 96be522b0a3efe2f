// The tokenizer's parts on hand-made inputs, for what the parity test's real
// vocabularies do not reach: GPT-2's byte map; BPE's merge order (lowest rank
// first, leftmost among equals) and ignore_merges; every Split behavior and
// invert; ByteLevel's add_prefix_space; added tokens' leftmost-longest match,
// single_word, lstrip and rstrip; the template's prefix and suffix; UTF-8
// checks.
#include <memory>
#include <string>
#include <vector>

#include "common/tokenizer/added_tokens.h"
#include "common/tokenizer/bpe.h"
#include "common/tokenizer/byte_level.h"
#include "common/tokenizer/hf_tokenizer.h"
#include "common/tokenizer/pre_tokenizer.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace zeroshard::tokenizer {
namespace {

using nlohmann::json;

TEST(ByteLevel, PrintableBytesMapToThemselvesTheRestFromU0100) {
  EXPECT_EQ(ByteToCodePoint('A'), U'A');
  EXPECT_EQ(ByteToCodePoint(0), char32_t{0x100});
  EXPECT_EQ(ByteToCodePoint(' '), char32_t{0x120});  // GPT-2's "Ġ".
  for (int b = 0; b < 256; ++b) {
    const std::string raw(1, static_cast<char>(b));
    EXPECT_EQ(UnmapBytes(MapBytes(raw)), raw) << b;
  }
  EXPECT_FALSE(UnmapBytes("\xE2\x82\xAC").has_value());  // U+20AC is not in the map.
}

TEST(Utf8, ValidPrefixStopsAtOverlongSurrogateAndTruncated) {
  EXPECT_EQ(ValidUtf8Prefix("ab\xC3\xA9"), 4u);
  EXPECT_EQ(ValidUtf8Prefix("ab\xC0\xAF"), 2u);     // Overlong '/'.
  EXPECT_EQ(ValidUtf8Prefix("a\xED\xA0\x80"), 1u);  // A surrogate.
  EXPECT_EQ(ValidUtf8Prefix("a\xF0\x9F\x98"), 1u);  // Truncated.
  EXPECT_EQ(ToValidUtf8("a\xFF"
                        "b"),
            "a\xEF\xBF\xBD"
            "b");
}

std::unique_ptr<BpeModel> Bpe(std::vector<std::pair<std::string, std::string>> merges,
                              bool ignore_merges = false) {
  std::vector<std::pair<std::string, int32_t>> vocab;
  for (int b = 0; b < 256; ++b) vocab.emplace_back(std::string(1, static_cast<char>(b)), b);
  for (const auto& [l, r] : merges) vocab.emplace_back(l + r, static_cast<int32_t>(vocab.size()));
  vocab.emplace_back("abc", static_cast<int32_t>(vocab.size()));  // A token no merge makes.
  auto m = BpeModel::Create(vocab, merges, {.ignore_merges = ignore_merges});
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *std::move(m) : nullptr;
}

std::vector<std::string> Words(const BpeModel& m, const std::string& word) {
  std::vector<int32_t> ids;
  m.EncodeWord(word, &ids);
  std::vector<std::string> out;
  for (int32_t id : ids) out.push_back(*m.TokenBytes(id));
  return out;
}

TEST(Bpe, LowestRankFirstLeftmostAmongEquals) {
  std::unique_ptr<BpeModel> m = Bpe({{"b", "c"}, {"a", "b"}, {"a", "a"}});
  EXPECT_EQ(Words(*m, "abc"), (std::vector<std::string>{"a", "bc"}));  // (b,c) ranks first.
  EXPECT_EQ(Words(*m, "aaa"), (std::vector<std::string>{"aa", "a"}));  // Leftmost pair.
  EXPECT_EQ(Words(*m, "aab"), (std::vector<std::string>{"a", "ab"}));  // (a,b) before (a,a).
  std::unique_ptr<BpeModel> whole = Bpe({{"b", "c"}}, /*ignore_merges=*/true);
  EXPECT_EQ(Words(*whole, "abc"), (std::vector<std::string>{"abc"}));  // A token itself.
  auto bad = BpeModel::Create({{"a", 0}}, {{"a", "z"}}, {});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("merges[0]: its right part"), std::string::npos);
}

std::vector<std::string> Split(const json& spec, const std::string& text) {
  auto pre = CreatePreTokenizer(spec);
  EXPECT_TRUE(pre.ok()) << pre.status();
  std::vector<Piece> pieces = {text};
  PieceStorage storage;
  (*pre)->Run(&pieces, &storage);
  return std::vector<std::string>(pieces.begin(), pieces.end());
}

json SplitOn(const std::string& behavior, bool invert = false) {
  return {{"type", "Split"},
          {"pattern", {{"String", "-"}}},
          {"behavior", behavior},
          {"invert", invert}};
}

// HF tokenizers' own documented example, "the-final--countdown" cut on "-".
TEST(PreTokenizer, EveryBehaviorOfHfsExample) {
  const std::string t = "the-final--countdown";
  using V = std::vector<std::string>;
  EXPECT_EQ(Split(SplitOn("Removed"), t), (V{"the", "final", "countdown"}));
  EXPECT_EQ(Split(SplitOn("Isolated"), t), (V{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(Split(SplitOn("MergedWithPrevious"), t), (V{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(Split(SplitOn("MergedWithNext"), t), (V{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(Split(SplitOn("Contiguous"), t), (V{"the", "-", "final", "--", "countdown"}));
  // Inverted, the gaps are the delimiters; each match stays its own piece, as
  // HF flips the is-match flag of every span its pattern finds.
  EXPECT_EQ(Split(SplitOn("Removed", /*invert=*/true), t), (V{"-", "-", "-"}));
  EXPECT_FALSE(CreatePreTokenizer(SplitOn("Sideways")).ok());
}

TEST(PreTokenizer, ByteLevelPrefixSpaceAndGpt2Pattern) {
  const json bl = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}};
  EXPECT_EQ(Split(bl, "'s it  ok"), (std::vector<std::string>{" '", "s", " it", " ", " ok"}));
  const json seq = {{"type", "Sequence"},
                    {"pretokenizers",
                     {SplitOn("Isolated"),
                      {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", false}}}}};
  EXPECT_EQ(Split(seq, "a-b"), (std::vector<std::string>{" a", " -", " b"}));
}

TEST(AddedTokens, LeftmostLongestWordRuleAndStrips) {
  AddedTokenSplitter s({{1, "<s>"},
                        {2, "<s><s>"},
                        {3, "cat", /*single_word=*/true},
                        {4, "[X]", false, /*lstrip=*/true, /*rstrip=*/true}});
  std::vector<Segment> seg;
  s.Split("a<s><s><s>b concat cat  [X]  c", &seg);
  std::vector<std::pair<std::string, int>> got;
  for (const Segment& g : seg) got.emplace_back(std::string(g.text), g.id);
  EXPECT_EQ(got, (std::vector<std::pair<std::string, int>>{{"a", -1},
                                                           {"<s><s>", 2},
                                                           {"<s>", 1},
                                                           {"b concat ", -1},
                                                           {"cat", 3},
                                                           {"  [X]  ", 4},
                                                           {"c", -1}}));
}

TEST(HfTokenizer, TemplateGivesPrefixAndSuffixAndUnsupportedPartsAreNamed) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[MapBytes(std::string(1, static_cast<char>(b)))] = b;
  json spec = {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}}},
               {"added_tokens",
                {{{"id", 256}, {"content", "<bos>"}, {"special", true}},
                 {{"id", 257}, {"content", "<eos>"}, {"special", true}}}},
               {"pre_tokenizer", {{"type", "ByteLevel"}, {"use_regex", true}}},
               {"decoder", {{"type", "ByteLevel"}}},
               {"post_processor",
                {{"type", "TemplateProcessing"},
                 {"single",
                  {{{"SpecialToken", {{"id", "<bos>"}}}},
                   {{"Sequence", {{"id", "A"}}}},
                   {{"SpecialToken", {{"id", "<eos>"}}}}}},
                 {"special_tokens", {{"<bos>", {{"ids", {256}}}}, {"<eos>", {{"ids", {257}}}}}}}}};
  auto tok = CreateHfTokenizer(spec);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ(*(*tok)->EncodeWithSpecials("hi"), (std::vector<int32_t>{256, 'h', 'i', 257}));
  EXPECT_EQ(*(*tok)->Decode({256, 'h', 'i'}), "<bos>hi");
  EXPECT_EQ((*tok)->Encode("a\xFF").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*tok)->Decode({999}).status().code(), absl::StatusCode::kInvalidArgument);
  spec["decoder"] = {{"type", "Metaspace"}};
  EXPECT_NE(CreateHfTokenizer(spec).status().message().find("decoder \"Metaspace\""),
            std::string::npos);
  spec["decoder"] = {{"type", "ByteLevel"}};
  spec["normalizer"] = {{"type", "Lowercase"}};
  EXPECT_NE(CreateHfTokenizer(spec).status().message().find("normalizer \"Lowercase\""),
            std::string::npos);
}

}  // namespace
}  // namespace zeroshard::tokenizer
