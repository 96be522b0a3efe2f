// Subcommands of the `zeroshard` CLI. Each registers its flags on the app and
// runs when selected. Not thread-safe (called once from main).
#pragma once

#include "CLI/CLI.hpp"

namespace zeroshard::cli {

void RegisterCommands(CLI::App& app);
// Runs the parsed subcommand; returns the process exit code.
int RunSelected(CLI::App& app);

}  // namespace zeroshard::cli
