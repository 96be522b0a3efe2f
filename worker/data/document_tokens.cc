#include "worker/data/document_tokens.h"

#include <algorithm>
#include <atomic>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace zeroshard {

absl::Status EncodeDocuments(const tokenizer::Tokenizer& tok, absl::Span<const Document> docs,
                             int threads, std::vector<std::vector<int32_t>>* ids) {
  ids->assign(docs.size(), {});
  threads = std::max(1, std::min<int>(threads, static_cast<int>(docs.size())));
  const tokenizer::SpecialTokens& sp = tok.specials();
  const bool add_eos = sp.prefix.empty() && sp.suffix.empty() && sp.eos >= 0;
  std::atomic<size_t> next{0};
  std::vector<absl::Status> errors(threads);
  auto work = [&](int t) {
    for (size_t i; (i = next.fetch_add(1)) < docs.size();) {
      absl::StatusOr<std::vector<int32_t>> r = tok.EncodeWithSpecials(docs[i].text);
      if (!r.ok()) {
        errors[t] =
            absl::InvalidArgumentError(absl::StrCat(docs[i].origin, ": ", r.status().message()));
        return;
      }
      (*ids)[i] = *std::move(r);
      if (add_eos) (*ids)[i].push_back(sp.eos);
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work, t);
  work(0);
  for (std::thread& th : pool) th.join();
  for (const absl::Status& s : errors) ZS_RETURN_IF_ERROR(s);
  return absl::OkStatus();
}

}  // namespace zeroshard
