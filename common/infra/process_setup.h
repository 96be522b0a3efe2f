// Process-wide settings every zeroshard binary applies first thing in main.
//
// Abseil's Mutex deadlock detection is turned off. Debian builds abseil
// without NDEBUG, which leaves detection on, so every lock taken while
// another is held (gRPC 1.51 locks through absl::Mutex) updates a global
// lock graph and often records a stack trace. Upstream release builds have
// it off. In coordinator_bench (1,000 simulated workers, 2 cores) turning it
// off raised heartbeats/s from 2,618 to 3,099 and 1-byte KvGet calls/s from
// 2,469 to 3,837. Tests keep it on: they link no main of these.
//
// The soft limit on open files is raised to the hard one: a server's
// connections, streams and files each take a descriptor.
//
// A crash writes its signal and stack to stderr (crash_report.h).
//
// Thread safety: call once, before any other thread starts.
#pragma once

#include <signal.h>

namespace zeroshard {

// `argv0`: main's argv[0], for naming the binary in a crash report.
void SetUpProcess(const char* argv0);

// Blocks SIGTERM and SIGINT in the calling thread and every thread it starts
// afterwards, so only the caller's sigwait on the returned set sees them
// (servers that stop on either). Call before any other thread starts.
sigset_t BlockStopSignals();

}  // namespace zeroshard
