// Subcommands of the `zeroshard` CLI. Each lives in its own file
// (cli/<name>_command.cc), registers its flags on the app and runs when
// selected. Not thread-safe (called once from main).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"

namespace zeroshard::cli {

struct Command {
  CLI::App* app;             // The subcommand, owned by the parent app.
  std::function<int()> run;  // Returns the process exit code.
};

void RegisterCommands(CLI::App& app);

// The coordinator a command talks to when --coordinator is not given:
// $ZEROSHARD_COORDINATOR, else this (the coordinator's default --listen).
inline constexpr char kDefaultCoordinator[] = "127.0.0.1:50051";
// Adds --coordinator HOST:PORT to `sub`, defaulting as above, into `*target`.
CLI::Option* AddCoordinatorOption(CLI::App* sub, std::string* target);
// Runs the parsed subcommand; returns the process exit code.
int RunSelected(CLI::App& app);

void RegisterLaunchCommand(CLI::App& app, std::vector<Command>& commands);
void RegisterStatusCommand(CLI::App& app, std::vector<Command>& commands);
void RegisterStopCommand(CLI::App& app, std::vector<Command>& commands);
void RegisterCheckpointCommand(CLI::App& app, std::vector<Command>& commands);
void RegisterPlanCommand(CLI::App& app, std::vector<Command>& commands);
void RegisterTokenizeCommand(CLI::App& app, std::vector<Command>& commands);
void RegisterGenerateCommand(CLI::App& app, std::vector<Command>& commands);

}  // namespace zeroshard::cli
