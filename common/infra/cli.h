// Command-line parsing shared by the three binaries (CLI11).
// Exit codes: 0 after --help / --version, 2 for an unknown flag or a bad
// value (one line on stderr naming it). Thread-compatible.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "common/enum_words.h"

namespace zeroshard {

// The project version, e.g. "0.1.0".
const char* Version();

// Adds --version to `app` (prints "<name> <version>").
void AddVersionFlag(CLI::App& app);

// Parses argv. Returns std::nullopt when the program should go on, or the
// exit code it should return now (0: help or version printed; 2: error).
std::optional<int> ParseCommandLine(CLI::App& app, int argc, char** argv);

// `name WORD` into the enum `value` through its table (enum_words.h): a
// word outside the table is refused as any bad value is (exit 2, naming
// the flag); the help shows the current value's word as the default.
// `value` and `words` must outlive the parse.
template <typename E, size_t N>
CLI::Option* AddEnumOption(CLI::App* app, const std::string& name, E& value,
                           const EnumWords<E, N>& words, const std::string& help) {
  std::vector<std::string> allowed;
  for (const EnumWord<E>& w : words) allowed.emplace_back(w.word);
  return app
      ->add_option_function<std::string>(
          name, [&value, &words](const std::string& word) { value = *FromWord(words, word); }, help)
      ->check(CLI::IsMember(allowed))
      ->default_str(std::string(WordOf(words, value)));
}

}  // namespace zeroshard
