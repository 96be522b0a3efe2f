#include "server/kv/kv_owner.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"

namespace zeroshard::server {

namespace {

// The key's last component without a "rank_" prefix, when it is all digits.
std::optional<absl::string_view> RankDigits(absl::string_view key) {
  const size_t slash = key.rfind('/');
  absl::string_view last = slash == absl::string_view::npos ? key : key.substr(slash + 1);
  absl::ConsumePrefix(&last, "rank_");
  if (last.empty()) return std::nullopt;
  for (char c : last) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return std::nullopt;
  }
  return last;
}

}  // namespace

bool KvKeyNamesRank(absl::string_view key) { return RankDigits(key).has_value(); }

std::optional<int> KvKeyOwner(absl::string_view key) {
  const std::optional<absl::string_view> digits = RankDigits(key);
  if (!digits.has_value()) return 0;
  const absl::string_view last = *digits;
  int rank = 0;
  if (last.size() > 9 || !absl::SimpleAtoi(last, &rank)) return std::nullopt;
  return rank;
}

}  // namespace zeroshard::server
