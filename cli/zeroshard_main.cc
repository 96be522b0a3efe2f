// zeroshard: the user's command line (launch, status, checkpoint, plan).
#include <iostream>

#include "cli/commands.h"
#include "common/infra/cli.h"
#include "common/infra/process_setup.h"
#include "common/rpc/grpc_log_limit.h"

int main(int argc, char** argv) {
  zeroshard::SetUpProcess(argv[0]);
  zeroshard::InstallGrpcLogLimit();  // No log flood from connections anyone can open.
  CLI::App app{"zeroshard: ZeRO-style sharded training", "zeroshard"};
  zeroshard::AddVersionFlag(app);
  app.require_subcommand(1);
  zeroshard::cli::RegisterCommands(app);
  if (auto code = zeroshard::ParseCommandLine(app, argc, argv)) return *code;
  return zeroshard::cli::RunSelected(app);
}
