// zeroshard-worker: one training process (one accelerator, or CPU).
#include <iostream>

#include "common/cli.h"

int main(int argc, char** argv) {
  CLI::App app{"zeroshard worker: joins a coordinator and trains its shard", "zeroshard-worker"};
  zeroshard::AddVersionFlag(app);
  std::string coordinator;
  app.add_option("--coordinator", coordinator, "coordinator address HOST:PORT")->required();
  if (auto code = zeroshard::ParseCommandLine(app, argc, argv)) return *code;
  std::cerr << "zeroshard-worker: training is not available in this build yet\n";
  return 1;
}
