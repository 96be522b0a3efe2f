// Command-line parsing shared by the three binaries (CLI11).
// Exit codes: 0 after --help / --version, 2 for an unknown flag or a bad
// value (one line on stderr naming it). Thread-compatible.
#pragma once

#include <optional>

#include "CLI/CLI.hpp"

namespace zeroshard {

// The project version, e.g. "0.1.0".
const char* Version();

// Adds --version to `app` (prints "<name> <version>").
void AddVersionFlag(CLI::App& app);

// Parses argv. Returns std::nullopt when the program should go on, or the
// exit code it should return now (0: help or version printed; 2: error).
std::optional<int> ParseCommandLine(CLI::App& app, int argc, char** argv);

}  // namespace zeroshard
