#include "common/rpc/grpc_log_limit.h"

#include <grpc/support/log.h>

#include <cstdio>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

namespace zeroshard {
namespace {

struct SourceCount {
  absl::Time window_start;
  int printed = 0;
  int64_t suppressed = 0;
};

struct Limits {
  absl::Mutex mu;
  int per_window ABSL_GUARDED_BY(mu) = 5;
  absl::Duration window ABSL_GUARDED_BY(mu) = absl::Seconds(60);
  absl::flat_hash_map<std::string, SourceCount> sources ABSL_GUARDED_BY(mu);
};

Limits& TheLimits() {
  static Limits* limits = new Limits();  // Never destroyed: gRPC may log at exit.
  return *limits;
}

// How many lines of this source were suppressed before this one, or -1 when
// this one is suppressed too.
int64_t Admit(const std::string& source) {
  Limits& l = TheLimits();
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&l.mu);
  SourceCount& c = l.sources[source];
  if (now - c.window_start >= l.window) {
    c.window_start = now;
    c.printed = 0;
  }
  if (c.printed >= l.per_window) {
    ++c.suppressed;
    return -1;
  }
  ++c.printed;
  const int64_t before = c.suppressed;
  c.suppressed = 0;
  return before;
}

void LimitedLog(gpr_log_func_args* args) {
  const std::string source = std::string(args->file) + ":" + std::to_string(args->line);
  const int64_t suppressed = Admit(source);
  if (suppressed < 0) return;
  const char* severity = gpr_log_severity_string(args->severity);
  if (suppressed > 0) {
    std::fprintf(stderr, "grpc %s %s] (%lld more like it suppressed)\n", severity, source.c_str(),
                 static_cast<long long>(suppressed));
  }
  std::fprintf(stderr, "grpc %s %s] %s\n", severity, source.c_str(), args->message);
}

}  // namespace

void InstallGrpcLogLimit(int per_window, absl::Duration window) {
  {
    Limits& l = TheLimits();
    absl::MutexLock lock(&l.mu);
    l.per_window = per_window < 1 ? 1 : per_window;
    l.window = window;
  }
  gpr_set_log_function(LimitedLog);
}

}  // namespace zeroshard
