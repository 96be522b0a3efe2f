#include "common/tokenizer/bpe.h"

#include <algorithm>
#include <atomic>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace zeroshard::tokenizer {
namespace {

// Words cached per thread, for the model that filled the cache last (a
// process-wide instance number, never an address that a later model could
// reuse). Cleared when it grows past kMaxWords.
constexpr size_t kMaxWords = size_t{1} << 18;
struct WordCache {
  uint64_t owner = 0;
  absl::flat_hash_map<std::string, std::vector<int32_t>> words;
};

std::atomic<uint64_t> g_next_instance{1};

struct Symbol {
  int32_t id;
  int32_t prev;
  int32_t next;
  bool gone;
};
struct Candidate {
  int32_t rank;
  int32_t pos;
  bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};

}  // namespace

absl::StatusOr<std::unique_ptr<BpeModel>> BpeModel::Create(
    const std::vector<std::pair<std::string, int32_t>>& vocab,
    const std::vector<std::pair<std::string, std::string>>& merges, Options options) {
  auto m = std::unique_ptr<BpeModel>(new BpeModel());
  m->options_ = options;
  m->instance_ = g_next_instance.fetch_add(1);
  int32_t limit = 0;
  for (const auto& [bytes, id] : vocab) {
    if (id < 0) return absl::InvalidArgumentError(absl::StrCat("vocab: token id ", id, " < 0"));
    limit = std::max(limit, id + 1);
  }
  m->bytes_of_.assign(limit, std::string());
  m->known_.assign(limit, false);
  for (const auto& [bytes, id] : vocab) {
    if (m->known_[id]) {
      return absl::InvalidArgumentError(absl::StrCat("vocab: id ", id, " given twice"));
    }
    m->known_[id] = true;
    m->bytes_of_[id] = bytes;
    m->id_of_[bytes] = id;
  }
  for (int b = 0; b < 256; ++b) m->byte_token_[b] = m->IdOf(std::string(1, static_cast<char>(b)));
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [left, right] = merges[rank];
    const int32_t a = m->IdOf(left), b = m->IdOf(right), r = m->IdOf(left + right);
    if (a < 0 || b < 0 || r < 0) {
      return absl::InvalidArgumentError(absl::StrCat("merges[", rank, "]: ",
                                                     a < 0   ? "its left part"
                                                     : b < 0 ? "its right part"
                                                             : "its result",
                                                     " is not in the vocab"));
    }
    m->merges_.try_emplace(PairKey(a, b), Merge{static_cast<int32_t>(rank), r});
  }
  return m;
}

const std::string* BpeModel::TokenBytes(int32_t id) const {
  if (id < 0 || id >= id_limit() || !known_[id]) return nullptr;
  return &bytes_of_[id];
}

int32_t BpeModel::IdOf(std::string_view raw) const {
  auto it = id_of_.find(absl::string_view(raw.data(), raw.size()));
  return it == id_of_.end() ? -1 : it->second;
}

const BpeModel::Merge* BpeModel::FindMerge(int32_t a, int32_t b) const {
  auto it = merges_.find(PairKey(a, b));
  return it == merges_.end() ? nullptr : &it->second;
}

void BpeModel::EncodeWord(std::string_view raw, std::vector<int32_t>* out) const {
  if (raw.size() == 1) {
    if (const int32_t id = byte_token_[static_cast<uint8_t>(raw[0])]; id >= 0) out->push_back(id);
    return;
  }
  if (options_.ignore_merges) {
    if (const int32_t id = IdOf(raw); id >= 0) {
      out->push_back(id);
      return;
    }
  }
  thread_local WordCache cache;
  if (cache.owner != instance_ || cache.words.size() >= kMaxWords) {
    cache.words.clear();
    cache.owner = instance_;
  }
  if (auto it = cache.words.find(absl::string_view(raw.data(), raw.size()));
      it != cache.words.end()) {
    out->insert(out->end(), it->second.begin(), it->second.end());
    return;
  }
  std::vector<int32_t> ids;
  MergeAll(raw, &ids);
  out->insert(out->end(), ids.begin(), ids.end());
  cache.words.emplace(std::string(raw), std::move(ids));
}

void BpeModel::MergeAll(std::string_view raw, std::vector<int32_t>* out) const {
  std::vector<Symbol> sym;
  sym.reserve(raw.size());
  for (char c : raw) {
    const int32_t id = byte_token_[static_cast<uint8_t>(c)];
    if (id < 0) continue;  // No token for this byte: dropped.
    const int32_t i = static_cast<int32_t>(sym.size());
    sym.push_back({id, i - 1, -1, false});
    if (i > 0) sym[i - 1].next = i;
  }
  std::vector<Candidate> heap;
  auto push = [&](int32_t pos) {
    const int32_t next = sym[pos].next;
    if (next < 0) return;
    if (const Merge* m = FindMerge(sym[pos].id, sym[next].id)) {
      heap.push_back({m->rank, pos});
      std::push_heap(heap.begin(), heap.end(), std::greater<>());
    }
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(sym.size()); ++i) push(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>());
    const Candidate top = heap.back();
    heap.pop_back();
    Symbol& s = sym[top.pos];
    if (s.gone || s.next < 0) continue;
    const Merge* m = FindMerge(s.id, sym[s.next].id);
    if (m == nullptr || m->rank != top.rank) continue;  // Stale: a neighbour changed.
    Symbol& right = sym[s.next];
    right.gone = true;
    s.id = m->result;
    s.next = right.next;
    if (s.next >= 0) sym[s.next].prev = top.pos;
    if (s.prev >= 0) push(s.prev);
    push(top.pos);
  }
  for (int32_t i = sym.empty() ? -1 : 0; i >= 0; i = sym[i].next) out->push_back(sym[i].id);
}

}  // namespace zeroshard::tokenizer
