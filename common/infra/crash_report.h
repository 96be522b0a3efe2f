// A crash says where it happened: on SIGSEGV, SIGBUS, SIGILL, SIGFPE and
// SIGABRT (glibc's heap checks and failed assertions abort) the process
// writes, to stderr, the signal, the crashing thread's id and its stack, one
// frame a line:
//
//   *** zeroshard-worker: SIGABRT (Aborted) in thread 4711; stack: ***
//     #3 zeroshard::Foo()   /path/bin/zeroshard-worker(+0x1a2b3c)[0x55d...]
//
// and then dies of the same signal, so its exit status is unchanged
// (128 + signal number). The second column is what glibc's
// backtrace_symbols_fd writes: the module and the offset that
// `addr2line -Cfe MODULE OFFSET` turns into a file and line (the builds
// keep debug information).
//
// How: glibc's backtrace() walks the stack with the unwind tables, so it
// passes through glibc's own frames (abort, free), which have no frame
// pointers; Abseil's symbolizer (async-signal-safe: no allocation) names the
// frames, static functions included. Abseil's own failure handler walks frame
// pointers only, which these builds and glibc omit: its stack ends at the
// first frame.
//
// Several threads: the first to crash writes its report; any other that
// crashes meanwhile waits in the handler until the first ends the process.
// A crash inside the report itself (a stack too corrupt to walk) ends the
// process at once with the report cut short. Not covered: a stack overflow
// (the handler runs on the overflowed stack). Under a sanitizer (ASan,
// TSan) the sanitizer keeps the faults it reports (SIGSEGV, SIGBUS, SIGFPE)
// and this takes only SIGABRT and SIGILL, which it leaves alone.
//
// Thread safety: call once, from main, before other threads start. The
// handler calls nothing that allocates or takes a lock of this process's
// own: write(2), snprintf with %s/%d/%ld, Abseil's symbolizer, and glibc's
// backtrace() (libgcc_s loaded up front by InstallCrashReport) and
// backtrace_symbols_fd (which may take the dynamic loader's lock; a crash
// inside the loader would hang there, a risk glibc's own handlers share).
#pragma once

namespace zeroshard {

// `argv0`: main's argv[0] (the symbolizer finds the binary through
// /proc/self/exe; argv0 is only its fallback). Returns false under a
// sanitizer, where only SIGABRT and SIGILL are taken.
bool InstallCrashReport(const char* argv0);

}  // namespace zeroshard
