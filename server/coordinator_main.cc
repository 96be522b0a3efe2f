// zeroshard-coordinator: the control plane of one job.
#include <iostream>

#include "common/cli.h"

int main(int argc, char** argv) {
  CLI::App app{"zeroshard coordinator: membership, shard plan, rendezvous, state, metrics",
               "zeroshard-coordinator"};
  zeroshard::AddVersionFlag(app);
  std::string listen = "127.0.0.1:50051";
  app.add_option("--listen", listen, "gRPC address to serve on (HOST:PORT; port 0 picks one)");
  if (auto code = zeroshard::ParseCommandLine(app, argc, argv)) return *code;
  std::cerr << "zeroshard-coordinator: serving is not available in this build yet\n";
  return 1;
}
