#include "bench/checkpoint/server_child.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "absl/time/time.h"
#include "tests/support/subprocess.h"

namespace zeroshard::bench {
namespace {

// The directory this binary was run from (/proc/self/exe).
std::string OwnDirectory() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : exe.parent_path().string();
}

}  // namespace

ServerChild::ServerChild(const std::string& dir, const TlsFiles& tls, const std::string& log) {
  std::vector<std::string> argv = {OwnDirectory() + "/checkpoint_bench_server", "--dir", dir};
  if (tls.enabled()) {
    argv.insert(argv.end(), {"--tls-ca", tls.ca, "--tls-cert", tls.cert, "--tls-key", tls.key});
  }
  process_ = std::make_unique<ChildProcess>(argv, log);
  const std::string address = testing::WaitForGrpcAddress(log, absl::Seconds(30), process_.get());
  if (address.empty()) {
    std::fprintf(stderr, "checkpoint_bench: %s did not serve within 30 s; its log: %s\n%s\n",
                 argv[0].c_str(), log.c_str(), testing::ReadFile(log).c_str());
    std::exit(1);
  }
  port_ = std::atoi(address.substr(address.rfind(':') + 1).c_str());
}

ServerChild::~ServerChild() { process_->Stop(absl::Seconds(5)); }

}  // namespace zeroshard::bench
