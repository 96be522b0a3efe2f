#include "bench/comm/rank_processes.h"

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "tests/support/file_store.h"
#include "worker/comm/communicator_factory.h"

namespace zeroshard {
namespace {

// The child's side: connect, run, write the values to `out`; never returns.
[[noreturn]] void RunChild(const std::string& dir, const std::string& backend, int rank, int n,
                           const std::function<std::vector<double>(Communicator&)>& body) {
  testing::FileStore store(dir + "/store");
  absl::StatusOr<std::unique_ptr<Communicator>> comm =
      CreateCommunicator(backend, store, "bench/", rank, n);
  if (!comm.ok()) {
    std::fprintf(stderr, "rank %d: connect %s: %s\n", rank, backend.c_str(),
                 comm.status().ToString().c_str());
    _exit(2);
  }
  const std::vector<double> values = body(**comm);
  std::ofstream out(dir + "/rank" + std::to_string(rank), std::ios::binary);
  out.write(reinterpret_cast<const char*>(values.data()),
            static_cast<std::streamsize>(values.size() * sizeof(double)));
  out.close();
  comm->reset();
  _exit(out ? 0 : 3);
}

std::vector<double> ReadValues(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  const std::streamsize size = in ? static_cast<std::streamsize>(in.tellg()) : 0;
  std::vector<double> values(static_cast<size_t>(size) / sizeof(double));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(values.data()),
          static_cast<std::streamsize>(values.size() * sizeof(double)));
  return values;
}

}  // namespace

std::vector<std::vector<double>> RunRankProcesses(
    const std::string& backend, int world_size,
    const std::function<std::vector<double>(Communicator&)>& body) {
  char tmpl[] = "/tmp/zeroshard_comm_bench_XXXXXX";
  std::error_code ec;
  if (mkdtemp(tmpl) == nullptr ||
      !std::filesystem::create_directories(std::string(tmpl) + "/store", ec)) {
    std::perror("comm_bandwidth_bench: a directory for the ranks' store");
    return {};
  }
  const std::string dir = tmpl;
  std::vector<pid_t> pids;
  for (int r = 0; r < world_size; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // Never outlive the bench.
      RunChild(dir, backend, r, world_size, body);
    }
    pids.push_back(pid);
  }
  bool ok = true;
  for (pid_t pid : pids) {
    int status = 0;
    ok &=
        pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  std::vector<std::vector<double>> per_rank;
  for (int r = 0; ok && r < world_size; ++r) {
    per_rank.push_back(ReadValues(dir + "/rank" + std::to_string(r)));
    ok = per_rank.back().size() == per_rank.front().size() && !per_rank.back().empty();
  }
  std::filesystem::remove_all(dir);
  if (!ok)
    std::fprintf(stderr, "%s ranks as processes at N = %d failed\n", backend.c_str(), world_size);
  return ok ? per_rank : std::vector<std::vector<double>>{};
}

}  // namespace zeroshard
