#include "common/tokenizer/byte_level.h"

#include <array>

#include "absl/container/flat_hash_map.h"

namespace zeroshard::tokenizer {
namespace {

void AppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool Printable(int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; }

struct Table {
  std::array<char32_t, 256> code_point{};
  std::array<std::string, 256> utf8;
  absl::flat_hash_map<char32_t, uint8_t> byte_of;
  Table() {
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      code_point[b] = Printable(b) ? static_cast<char32_t>(b) : next++;
      AppendUtf8(code_point[b], &utf8[b]);
      byte_of[code_point[b]] = static_cast<uint8_t>(b);
    }
  }
};

const Table& TheTable() {
  static const Table* table = new Table();
  return *table;
}

}  // namespace

char32_t ByteToCodePoint(uint8_t b) { return TheTable().code_point[b]; }
const std::string& ByteToUtf8(uint8_t b) { return TheTable().utf8[b]; }

std::optional<char32_t> NextCodePoint(std::string_view s, size_t* pos) {
  const size_t i = *pos;
  if (i >= s.size()) return std::nullopt;
  const auto c0 = static_cast<uint8_t>(s[i]);
  int len = c0 < 0x80 ? 1 : (c0 >> 5) == 0x6 ? 2 : (c0 >> 4) == 0xE ? 3 : (c0 >> 3) == 0x1E ? 4 : 0;
  if (len == 0 || i + len > s.size()) return std::nullopt;
  char32_t cp = len == 1 ? c0 : len == 2 ? (c0 & 0x1F) : len == 3 ? (c0 & 0x0F) : (c0 & 0x07);
  for (int k = 1; k < len; ++k) {
    const auto c = static_cast<uint8_t>(s[i + k]);
    if ((c & 0xC0) != 0x80) return std::nullopt;
    cp = (cp << 6) | (c & 0x3F);
  }
  static constexpr char32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return std::nullopt;
  *pos = i + len;
  return cp;
}

size_t ValidUtf8Prefix(std::string_view s) {
  size_t pos = 0;
  while (pos < s.size()) {
    if (static_cast<uint8_t>(s[pos]) < 0x80) {
      ++pos;
    } else if (!NextCodePoint(s, &pos)) {
      break;
    }
  }
  return pos;
}

// Where s (not starting with a valid character) goes wrong: the length of
// its maximal invalid subpart (1-3 bytes: a lead byte and the continuation
// bytes that still fit it; Unicode 15, section 3.9, "U+FFFD Substitution of
// Maximal Subparts"), or 0 when s is the valid start of a character cut
// short (more bytes may complete it).
static size_t Utf8InvalidLength(std::string_view s) {
  const auto c0 = static_cast<uint8_t>(s[0]);
  const int len = c0 >= 0xC2 && c0 <= 0xDF   ? 2
                  : c0 >= 0xE0 && c0 <= 0xEF ? 3
                  : c0 >= 0xF0 && c0 <= 0xF4 ? 4
                                             : 0;
  if (len == 0) return 1;
  // The second byte's range narrows for E0, ED, F0 and F4 (no overlongs,
  // surrogates or code points past U+10FFFF).
  const uint8_t lo = c0 == 0xE0 ? 0xA0 : c0 == 0xF0 ? 0x90 : 0x80;
  const uint8_t hi = c0 == 0xED ? 0x9F : c0 == 0xF4 ? 0x8F : 0xBF;
  for (int i = 1; i < len; ++i) {
    if (static_cast<size_t>(i) >= s.size()) return 0;  // Cut short.
    const auto c = static_cast<uint8_t>(s[i]);
    if (c < (i == 1 ? lo : 0x80) || c > (i == 1 ? hi : 0xBF)) return static_cast<size_t>(i);
  }
  return static_cast<size_t>(len);  // Not reached for a string that starts invalid.
}

size_t AppendValidUtf8(std::string_view s, bool final, std::string* out) {
  size_t pos = 0;
  while (pos < s.size()) {
    const size_t good = ValidUtf8Prefix(s.substr(pos));
    out->append(s.substr(pos, good));
    pos += good;
    if (pos == s.size()) break;
    const size_t bad = Utf8InvalidLength(s.substr(pos));
    if (bad == 0 && !final) break;  // Cut short: more bytes may complete it.
    out->append("\xEF\xBF\xBD");    // U+FFFD.
    pos += bad == 0 ? s.size() - pos : bad;
  }
  return pos;
}

std::string ToValidUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  AppendValidUtf8(s, /*final=*/true, &out);
  return out;
}

std::optional<std::string> UnmapBytes(std::string_view mapped) {
  const Table& t = TheTable();
  std::string raw;
  raw.reserve(mapped.size());
  size_t pos = 0;
  while (pos < mapped.size()) {
    const std::optional<char32_t> cp = NextCodePoint(mapped, &pos);
    if (!cp) return std::nullopt;
    auto it = t.byte_of.find(*cp);
    if (it == t.byte_of.end()) return std::nullopt;
    raw.push_back(static_cast<char>(it->second));
  }
  return raw;
}

std::string MapBytes(std::string_view raw) {
  std::string out;
  out.reserve(raw.size() * 2);
  for (char c : raw) out += ByteToUtf8(static_cast<uint8_t>(c));
  return out;
}

}  // namespace zeroshard::tokenizer
