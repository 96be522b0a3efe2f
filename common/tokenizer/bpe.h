// Byte-pair encoding by merge rank, over bytes (Sennrich et al., 2016,
// "Neural Machine Translation of Rare Words with Subword Units", section 3.1;
// the byte-level form of GPT-2, Radford et al., 2019, section 2.2). One
// pre-tokenized piece ("word") at a time.
//
// How it works: the word starts as one symbol per byte (the token of that
// byte's mapped character); every adjacent pair that is a merge goes into a
// min-heap keyed by (rank, position). The lowest is merged into one symbol,
// unless it went stale (a neighbour already merged away), and the new
// symbol's pairs with its neighbours enter the heap; until no pair is a
// merge. Lowest rank first, leftmost among equals: the order HF tokenizers'
// `Word::merge_all` and tiktoken's `byte_pair_merge` apply, so the ids are
// theirs. With ignore_merges (Llama 3's tokenizer.json) a word that is a
// token itself is that token. A byte with no token is dropped, as HF does
// without an unk token.
//
// Thread safety: immutable after Create; EncodeWord is safe from any thread
// (it caches words per thread).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

namespace zeroshard::tokenizer {

class BpeModel {
 public:
  struct Options {
    bool ignore_merges = false;
  };
  // vocab: (token as its raw bytes, id); merges: pairs of raw-byte tokens,
  // rank = index. INVALID_ARGUMENT naming the entry when an id is negative
  // or repeated, or a merge's parts or result are not in the vocab.
  static absl::StatusOr<std::unique_ptr<BpeModel>> Create(
      const std::vector<std::pair<std::string, int32_t>>& vocab,
      const std::vector<std::pair<std::string, std::string>>& merges, Options options);

  // Appends the ids of one piece (raw bytes) to *out.
  void EncodeWord(std::string_view raw, std::vector<int32_t>* out) const;
  // The raw bytes of `id`; null when the vocab has no such id.
  const std::string* TokenBytes(int32_t id) const;
  // The id of the token whose raw bytes are `raw`; -1 when none.
  int32_t IdOf(std::string_view raw) const;
  // One past the largest id.
  int32_t id_limit() const { return static_cast<int32_t>(bytes_of_.size()); }

 private:
  struct Merge {
    int32_t rank;
    int32_t result;
  };
  static uint64_t PairKey(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  const Merge* FindMerge(int32_t a, int32_t b) const;
  void MergeAll(std::string_view raw, std::vector<int32_t>* out) const;

  Options options_;
  uint64_t instance_ = 0;  // Keys the per-thread word cache.
  int32_t byte_token_[256];
  absl::flat_hash_map<std::string, int32_t> id_of_;
  std::vector<std::string> bytes_of_;
  std::vector<bool> known_;
  absl::flat_hash_map<uint64_t, Merge> merges_;
};

}  // namespace zeroshard::tokenizer
