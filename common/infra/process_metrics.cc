#include "common/infra/process_metrics.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/numbers.h"
#include "common/infra/process_memory.h"

namespace zeroshard {
namespace {

std::optional<double> OpenFds() {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return std::nullopt;
  double n = 0;
  while (const dirent* e = ::readdir(dir)) {
    if (e->d_name[0] != '.') ++n;
  }
  ::closedir(dir);
  return n - 1;  // Not counting the descriptor opendir itself holds.
}

// Field 22 of /proc/self/stat (starttime, clock ticks after boot) plus the
// boot time from /proc/stat. The command name (field 2) may hold spaces, so
// fields are counted after its closing parenthesis.
std::optional<double> StartTimeSeconds() {
  std::ifstream stat("/proc/self/stat");
  std::string line;
  if (!std::getline(stat, line)) return std::nullopt;
  const size_t paren = line.rfind(')');
  if (paren == std::string::npos) return std::nullopt;
  std::istringstream fields(line.substr(paren + 2));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
    if (i < 22) continue;
    std::ifstream sys("/proc/stat");
    std::string key;
    double btime = -1;
    while (sys >> key) {
      if (key == "btime") {
        sys >> btime;
        break;
      }
    }
    if (btime < 0) return std::nullopt;
    double ticks = 0;
    if (!absl::SimpleAtod(field, &ticks)) return std::nullopt;
    return btime + ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
  }
  return std::nullopt;
}

prometheus::MetricFamily One(const char* name, const char* help, prometheus::MetricType type,
                             double value) {
  prometheus::MetricFamily f;
  f.name = name;
  f.help = help;
  f.type = type;
  prometheus::ClientMetric m;
  if (type == prometheus::MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  f.metric.push_back(m);
  return f;
}

}  // namespace

std::vector<prometheus::MetricFamily> ProcessMetrics::Collect() const {
  using prometheus::MetricType;
  std::vector<prometheus::MetricFamily> out;
  rusage ru{};
  if (::getrusage(RUSAGE_SELF, &ru) == 0) {
    const double cpu = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                       static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
    out.push_back(One("process_cpu_seconds_total",
                      "CPU seconds the coordinator process has used, user plus system.",
                      MetricType::Counter, cpu));
  }
  if (const std::optional<ProcessMemory> mem = ReadProcessMemory()) {
    out.push_back(One("process_resident_memory_bytes", "Bytes of the process resident in RAM.",
                      MetricType::Gauge, mem->resident_bytes));
    out.push_back(One("process_virtual_memory_bytes",
                      "Bytes of the process's virtual address space.", MetricType::Gauge,
                      mem->virtual_bytes));
  }
  if (std::optional<double> fds = OpenFds()) {
    out.push_back(
        One("process_open_fds", "File descriptors the process has open.", MetricType::Gauge, *fds));
  }
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY) {
    out.push_back(One("process_max_fds", "The process's soft limit on open file descriptors.",
                      MetricType::Gauge, static_cast<double>(lim.rlim_cur)));
  }
  if (std::optional<double> start = StartTimeSeconds()) {
    out.push_back(One("process_start_time_seconds",
                      "When the process started, seconds since the Unix epoch.", MetricType::Gauge,
                      *start));
  }
  return out;
}

}  // namespace zeroshard
