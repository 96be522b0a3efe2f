#include <iostream>

#include "cli/commands.h"

namespace zeroshard::cli {

void RegisterLaunchCommand(CLI::App& app, std::vector<Command>& commands) {
  CLI::App* sub = app.add_subcommand("launch", "train with an embedded coordinator and local workers");
  commands.push_back({sub, [] {
    std::cerr << "zeroshard launch: not available in this build yet\n";
    return 1;
  }});
}

}  // namespace zeroshard::cli
