#include "tests/support/subprocess.h"

#include <stdlib.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>

#include "absl/time/clock.h"
#include "tests/support/file_watch.h"

namespace zeroshard::testing {

std::string BinPath(const std::string& name) {
  const char* dir = std::getenv("ZEROSHARD_BIN_DIR");
  return std::string(dir ? dir : ".") + "/" + name;
}

CommandResult RunCommand(const std::string& shell_command) {
  std::string cmd = shell_command + " 2>&1 </dev/null";
  FILE* pipe = popen(cmd.c_str(), "r");
  CommandResult result;
  if (pipe == nullptr) return result;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), pipe)) result.output.append(buf.data(), n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

std::string WaitForGrpcAddress(const std::string& log, absl::Duration timeout,
                               ChildProcess* process) {
  const std::regex listen_line(R"(listening on (127\.0\.0\.1:[0-9]+) \(grpc\))");
  // The log's file events wake the wait; a dead process is checked for
  // every 100 ms, since it writes nothing more.
  std::string address;
  WaitForFiles(
      DirOf(log),
      [&] {
        std::smatch m;
        const std::string text = ReadFile(log);
        if (std::regex_search(text, m, listen_line)) address = m[1].str();
        return !address.empty() || (process != nullptr && !process->Running());
      },
      timeout, absl::Milliseconds(100));
  return address;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string MakeTempDir(const std::string& prefix) {
  const char* tmp = std::getenv("TMPDIR");
  std::string templ = std::string(tmp ? tmp : "/tmp") + "/" + prefix + "XXXXXX";
  char* dir = mkdtemp(templ.data());
  return dir ? std::string(dir) : std::string();
}

}  // namespace zeroshard::testing
