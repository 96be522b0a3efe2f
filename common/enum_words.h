// Enums that are words in JSON, on the command line and in logs: one table
// per enum (value, word) answers both ways, so a value's word is written in
// one place. Header-only; constexpr tables; thread-safe.
//
//   inline constexpr EnumWords<Color, 2> kColorWords{{{Color::kRed, "red"},
//                                                    {Color::kBlue, "blue"}}};
//   WordOf(kColorWords, Color::kRed)  -> "red"
//   FromWord(kColorWords, "blue")     -> Color::kBlue (nullopt for others)
//   WordList(kColorWords)             -> "red or blue" (for error messages)
//   WordMap(kColorWords)              -> {"red": kRed, ...} (CLI11's
//                                         CheckedTransformer)
#pragma once

#include <array>
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace zeroshard {

template <typename E>
struct EnumWord {
  E value;
  std::string_view word;
};
template <typename E, size_t N>
using EnumWords = std::array<EnumWord<E>, N>;

// The value's word; "?" for a value the table lacks (a table bug).
template <typename E, size_t N>
constexpr std::string_view WordOf(const EnumWords<E, N>& words, E value) {
  for (const EnumWord<E>& w : words) {
    if (w.value == value) return w.word;
  }
  return "?";
}

template <typename E, size_t N>
constexpr std::optional<E> FromWord(const EnumWords<E, N>& words, std::string_view word) {
  for (const EnumWord<E>& w : words) {
    if (w.word == word) return w.value;
  }
  return std::nullopt;
}

// "a, b or c", in table order.
template <typename E, size_t N>
std::string WordList(const EnumWords<E, N>& words) {
  std::string out;
  for (size_t i = 0; i < N; ++i) {
    if (i > 0) out += i + 1 == N ? " or " : ", ";
    out += words[i].word;
  }
  return out;
}

template <typename E, size_t N>
std::map<std::string, E> WordMap(const EnumWords<E, N>& words) {
  std::map<std::string, E> out;
  for (const EnumWord<E>& w : words) out.emplace(std::string(w.word), w.value);
  return out;
}

}  // namespace zeroshard
