#include "common/tokenizer/pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace zeroshard::tokenizer {
namespace {

using nlohmann::json;

// GPT-2's pattern (encoder.py), which ByteLevel's use_regex applies.
constexpr char kGpt2Pattern[] =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

enum class Behavior { kIsolated, kRemoved, kMergedWithPrevious, kMergedWithNext, kContiguous };

absl::StatusOr<Behavior> ParseBehavior(const std::string& name) {
  if (name == "Isolated") return Behavior::kIsolated;
  if (name == "Removed") return Behavior::kRemoved;
  if (name == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return Behavior::kMergedWithNext;
  if (name == "Contiguous") return Behavior::kContiguous;
  return absl::InvalidArgumentError(absl::StrCat("Split behavior \"", name, "\" is not known"));
}

struct CodeDeleter {
  void operator()(pcre2_code* c) const { pcre2_code_free(c); }
};
struct MatchDataDeleter {
  void operator()(pcre2_match_data* m) const { pcre2_match_data_free(m); }
};

// One span of a piece: a match of the pattern or the gap between two.
struct Span {
  size_t begin, end;
  bool match;
};

class SplitStep final : public PreTokenizer {
 public:
  SplitStep(pcre2_code* code, Behavior behavior, bool invert)
      : code_(code), behavior_(behavior), invert_(invert) {}

  void Run(std::vector<Piece>* pieces, PieceStorage*) const override {
    std::unique_ptr<pcre2_match_data, MatchDataDeleter> md(
        pcre2_match_data_create_from_pattern(code_.get(), nullptr));
    std::vector<Piece> out;
    out.reserve(pieces->size() * 4);
    std::vector<Span> spans;
    for (const Piece& p : *pieces) {
      Spans(p, md.get(), &spans);
      Emit(p, spans, &out);
    }
    *pieces = std::move(out);
  }

 private:
  // The matches of the pattern in `text` and the gaps between them.
  void Spans(std::string_view text, pcre2_match_data* md, std::vector<Span>* spans) const {
    spans->clear();
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    size_t at = 0, gap = 0;
    while (at <= text.size()) {
      const int rc =
          pcre2_match(code_.get(), subject, text.size(), at, PCRE2_NO_UTF_CHECK, md, nullptr);
      if (rc < 0) break;  // No further match (the text was checked as UTF-8).
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      const size_t b = ov[0], e = ov[1];
      if (e == b) {  // An empty match: step one character on.
        at = b + 1;
        while (at < text.size() && (static_cast<uint8_t>(text[at]) & 0xC0) == 0x80) ++at;
        continue;
      }
      if (b > gap) spans->push_back({gap, b, invert_});
      spans->push_back({b, e, !invert_});
      gap = at = e;
    }
    if (gap < text.size()) spans->push_back({gap, text.size(), invert_});
  }

  // HF's SplitDelimiterBehavior over the spans ("match" = the delimiter).
  void Emit(const Piece& p, const std::vector<Span>& spans, std::vector<Piece>* out) const {
    auto add = [&](size_t b, size_t e) { out->push_back(p.substr(b, e - b)); };
    size_t pending = std::string_view::npos;  // Start of a piece still open.
    for (size_t i = 0; i < spans.size(); ++i) {
      const Span& s = spans[i];
      switch (behavior_) {
        case Behavior::kIsolated:
          add(s.begin, s.end);
          break;
        case Behavior::kRemoved:
          if (!s.match) add(s.begin, s.end);
          break;
        case Behavior::kMergedWithPrevious:
          if (pending == std::string_view::npos) pending = s.begin;
          if (s.match || i + 1 == spans.size()) {
            add(pending, s.end);
            pending = std::string_view::npos;
          }
          break;
        case Behavior::kMergedWithNext:
          if (s.match && pending != std::string_view::npos) add(pending, s.begin);
          if (s.match || pending == std::string_view::npos) pending = s.begin;
          if (i + 1 == spans.size()) add(pending, s.end);
          break;
        case Behavior::kContiguous:
          if (pending != std::string_view::npos && (!s.match || !spans[i - 1].match)) {
            add(pending, s.begin);
            pending = std::string_view::npos;
          }
          if (pending == std::string_view::npos) pending = s.begin;
          if (i + 1 == spans.size()) add(pending, s.end);
          break;
      }
    }
  }

  std::unique_ptr<pcre2_code, CodeDeleter> code_;
  Behavior behavior_;
  bool invert_;
};

class PrefixSpaceStep final : public PreTokenizer {
 public:
  void Run(std::vector<Piece>* pieces, PieceStorage* storage) const override {
    for (Piece& p : *pieces) {
      if (!p.empty() && p[0] == ' ') continue;
      storage->push_back(" " + std::string(p));
      p = storage->back();
    }
  }
};

class SequenceStep final : public PreTokenizer {
 public:
  explicit SequenceStep(std::vector<std::unique_ptr<PreTokenizer>> steps)
      : steps_(std::move(steps)) {}
  void Run(std::vector<Piece>* pieces, PieceStorage* storage) const override {
    for (const auto& s : steps_) s->Run(pieces, storage);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

absl::StatusOr<std::unique_ptr<PreTokenizer>> MakeSplit(const std::string& pattern, bool literal,
                                                        Behavior behavior, bool invert) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  // PCRE2_LITERAL takes no PCRE2_UCP (a literal has no classes to widen).
  const uint32_t flags = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   flags, &error, &offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    return absl::InvalidArgumentError(absl::StrCat(
        "Split pattern: ", reinterpret_cast<const char*>(message), " at offset ", offset));
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // Interpreted where JIT is unavailable.
  return std::make_unique<SplitStep>(code, behavior, invert);
}

absl::StatusOr<std::unique_ptr<PreTokenizer>> MakeStep(const json& spec) {
  const std::string type = spec.value("type", "");
  if (type == "Sequence") {
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    for (const json& s : spec.at("pretokenizers")) {
      ZS_ASSIGN_OR_RETURN(std::unique_ptr<PreTokenizer> step, MakeStep(s));
      steps.push_back(std::move(step));
    }
    return std::make_unique<SequenceStep>(std::move(steps));
  }
  if (type == "Split") {
    const json& pattern = spec.at("pattern");
    const bool literal = pattern.contains("String");
    ZS_ASSIGN_OR_RETURN(const Behavior b, ParseBehavior(spec.at("behavior").get<std::string>()));
    return MakeSplit(pattern.at(literal ? "String" : "Regex").get<std::string>(), literal, b,
                     spec.value("invert", false));
  }
  if (type == "ByteLevel") {
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    if (spec.value("add_prefix_space", false)) steps.push_back(std::make_unique<PrefixSpaceStep>());
    if (spec.value("use_regex", true)) {
      ZS_ASSIGN_OR_RETURN(std::unique_ptr<PreTokenizer> split,
                          MakeSplit(kGpt2Pattern, false, Behavior::kIsolated, false));
      steps.push_back(std::move(split));
    }
    return std::make_unique<SequenceStep>(std::move(steps));
  }
  return absl::InvalidArgumentError(absl::StrCat("pre_tokenizer type \"", type,
                                                 "\" is not supported (byte-level BPE uses "
                                                 "Split, ByteLevel and Sequence)"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<PreTokenizer>> CreatePreTokenizer(const json& spec) {
  if (spec.is_null())
    return std::make_unique<SequenceStep>(std::vector<std::unique_ptr<PreTokenizer>>{});
  try {
    return MakeStep(spec);
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("pre_tokenizer: ", e.what()));
  }
}

}  // namespace zeroshard::tokenizer
