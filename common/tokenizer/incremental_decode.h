// Decoding a stream of ids a run at a time, with the text of every run
// together equal to Tokenizer::Decode of all the ids at once.
//
// Decoding runs apart is not that: a SentencePiece decoder drops the space
// of a sequence's first word (so each run would lose one), and its
// byte-fallback pieces make a character only together (a run ending inside
// one would decode to U+FFFD). IncrementalDecoder decodes each run after the
// last kContextIds ids before it and keeps only the text past theirs, as
// HF's streamers and vLLM's incremental detokenizer do. It holds back a
// run's last ids while their text ends in U+FFFD (a character whose bytes
// have not all arrived) and gives them with the next run, or as they are
// once kMaxHeldIds are held, or at Finish.
//
// Its one blind spot: a context whose ids have no text at all (eight control
// ids in a row) looks like the sequence's start, so a SentencePiece word
// after it loses its space.
//
// Errors: Decode's (INVALID_ARGUMENT naming an id the vocabulary has not).
// Thread safety: none; one decoder per stream. The tokenizer must outlive it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/tokenizer/tokenizer.h"

namespace zeroshard::tokenizer {

class IncrementalDecoder {
 public:
  static constexpr size_t kContextIds = 8;
  static constexpr size_t kMaxHeldIds = 64;

  explicit IncrementalDecoder(const Tokenizer& tok) : tok_(tok) {}

  // Makes the stream continue text already shown: its last kContextIds ids
  // become the context, so Append gives what Decode(shown + ids) adds to
  // Decode(shown) (a SentencePiece completion's first word keeps its
  // space, as vLLM's detokenizer gives it). Call before the first Append.
  void ContinueAfter(absl::Span<const int32_t> shown);

  // The bytes `ids` add to the text (may be empty while ids are held). On
  // an error `ids` are dropped, and the stream goes on without them.
  absl::StatusOr<std::string> Append(absl::Span<const int32_t> ids);
  // The bytes of the ids still held; the stream ends.
  absl::StatusOr<std::string> Finish();

 private:
  absl::StatusOr<std::string> Emit(bool force);
  absl::StatusOr<size_t> Finished() const;

  const Tokenizer& tok_;
  std::vector<int32_t> context_;  // The last ids given out, at most kContextIds.
  std::vector<int32_t> held_;     // Ids not given out yet.
};

}  // namespace zeroshard::tokenizer
