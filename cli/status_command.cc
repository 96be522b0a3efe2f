#include <iostream>

#include "cli/commands.h"

namespace zeroshard::cli {

void RegisterStatusCommand(CLI::App& app, std::vector<Command>& commands) {
  CLI::App* sub = app.add_subcommand("status", "show a job's generation, members, step and loss");
  commands.push_back({sub, [] {
    std::cerr << "zeroshard status: not available in this build yet\n";
    return 1;
  }});
}

}  // namespace zeroshard::cli
