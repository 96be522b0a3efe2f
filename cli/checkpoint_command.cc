#include <iostream>

#include "cli/commands.h"

namespace zeroshard::cli {

void RegisterCheckpointCommand(CLI::App& app, std::vector<Command>& commands) {
  CLI::App* sub = app.add_subcommand("checkpoint", "save, list and export checkpoints");
  commands.push_back({sub, [] {
    std::cerr << "zeroshard checkpoint: not available in this build yet\n";
    return 1;
  }});
}

}  // namespace zeroshard::cli
