// SplitMix64 (Steele, Lea, Flood, "Fast Splittable Pseudorandom Number
// Generators", OOPSLA 2014; the constants of Vigna's splitmix64.c): a
// bijective 64-bit mixer. Used wherever zeroshard needs randomness that is a
// pure function of its inputs (data sampling, weight initialisation), so the
// same job gives the same bits at any world size. Thread-safe: pure.
#pragma once

#include <cstdint>
#include <initializer_list>

namespace zeroshard {

inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Order-sensitive hash of several words: chain each through the mixer.
inline uint64_t HashWords(std::initializer_list<uint64_t> words) {
  uint64_t h = 0x6a09e667f3bcc908ull;
  for (uint64_t w : words) h = SplitMix64(h ^ SplitMix64(w));
  return h;
}

// Uniform double in [0, 1) from the top 53 bits.
inline double UnitInterval(uint64_t bits) {
  return static_cast<double>(bits >> 11) * (1.0 / 9007199254740992.0);
}

}  // namespace zeroshard
