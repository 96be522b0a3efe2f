// GPT-2's byte-to-unicode map, which byte-level BPE vocabularies (GPT-2,
// Llama 3, Qwen2/2.5/3, SmolLM) are written in: every byte becomes one
// printable code point, so a token's string in tokenizer.json's vocab or
// merges is the bytes it stands for, each mapped (Radford et al., 2019,
// "Language Models are Unsupervised Multitask Learners", section 2.2; the
// table is `bytes_to_unicode` of GPT-2's encoder.py and HF tokenizers'
// ByteLevel).
//
// How it works: the 188 printable bytes ('!'..'~', 0xA1..0xAC, 0xAE..0xFF)
// map to themselves; the other 68 map, in byte order, to U+0100, U+0101, ...
// Thread safety: pure functions over a table built once.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace zeroshard::tokenizer {

// The code point byte `b` is written as.
char32_t ByteToCodePoint(uint8_t b);
// The UTF-8 of ByteToCodePoint(b) (1 or 2 bytes).
const std::string& ByteToUtf8(uint8_t b);
// The bytes a mapped string stands for; nullopt when `mapped` is not valid
// UTF-8 or holds a code point outside the map.
std::optional<std::string> UnmapBytes(std::string_view mapped);
// `raw` with every byte mapped (UTF-8 of the code points).
std::string MapBytes(std::string_view raw);

// The code point at s[*pos] (UTF-8), advancing *pos; nullopt (and *pos
// unchanged) on an invalid, truncated, overlong or surrogate sequence or one
// past U+10FFFF.
std::optional<char32_t> NextCodePoint(std::string_view s, size_t* pos);
// The length of the longest valid UTF-8 prefix of s (s.size() when all of it
// is valid).
size_t ValidUtf8Prefix(std::string_view s);
// Appends s to *out with every maximal invalid subpart replaced by U+FFFD,
// as Python's errors="replace" and Rust's from_utf8_lossy (HF tokenizers'
// decode) do. A character cut short at the end of s is replaced too when
// `final`; else it is left out (more bytes may complete it). Returns the
// bytes of s consumed.
size_t AppendValidUtf8(std::string_view s, bool final, std::string* out);
// AppendValidUtf8 of all of s (final) into a new string.
std::string ToValidUtf8(std::string_view s);

}  // namespace zeroshard::tokenizer
