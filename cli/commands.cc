#include "cli/commands.h"

#include <iostream>

namespace zeroshard::cli {
namespace {

std::vector<Command>& Registry() {
  static std::vector<Command> commands;
  return commands;
}

}  // namespace

CLI::Option* AddCoordinatorOption(CLI::App* sub, std::string* target) {
  if (target->empty()) *target = kDefaultCoordinator;
  return sub->add_option("--coordinator", *target, "coordinator address HOST:PORT")
      ->envname("ZEROSHARD_COORDINATOR")
      ->capture_default_str();
}

void RegisterCommands(CLI::App& app) {
  RegisterLaunchCommand(app, Registry());
  RegisterStatusCommand(app, Registry());
  RegisterStopCommand(app, Registry());
  RegisterCheckpointCommand(app, Registry());
  RegisterPlanCommand(app, Registry());
  RegisterTokenizeCommand(app, Registry());
  RegisterGenerateCommand(app, Registry());
}

int RunSelected(CLI::App& app) {
  for (const Command& c : Registry()) {
    if (c.app->parsed()) return c.run();
  }
  std::cerr << app.get_name() << ": no subcommand given (see --help)\n";
  return 2;
}

}  // namespace zeroshard::cli
