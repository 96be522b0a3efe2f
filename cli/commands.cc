#include "cli/commands.h"

#include <functional>
#include <iostream>
#include <memory>
#include <vector>

namespace zeroshard::cli {
namespace {

struct Command {
  CLI::App* app;
  std::function<int()> run;
};
std::vector<Command>& Registry() {
  static std::vector<Command> commands;
  return commands;
}

}  // namespace

void RegisterCommands(CLI::App& app) {
  auto* launch = app.add_subcommand("launch", "train with an embedded coordinator and local workers");
  Registry().push_back({launch, [] {
    std::cerr << "zeroshard launch: training is not available in this build yet\n";
    return 1;
  }});
  auto* status = app.add_subcommand("status", "show a job's generation, members, step and loss");
  Registry().push_back({status, [] {
    std::cerr << "zeroshard status: not available in this build yet\n";
    return 1;
  }});
  auto* checkpoint = app.add_subcommand("checkpoint", "save, list and export checkpoints");
  Registry().push_back({checkpoint, [] {
    std::cerr << "zeroshard checkpoint: not available in this build yet\n";
    return 1;
  }});
}

int RunSelected(CLI::App& app) {
  for (const Command& c : Registry()) {
    if (c.app->parsed()) return c.run();
  }
  std::cerr << app.get_name() << ": no subcommand given (see --help)\n";
  return 2;
}

}  // namespace zeroshard::cli
