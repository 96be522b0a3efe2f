#include "common/infra/crash_report.h"

#include <execinfo.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/ucontext.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>

#include "absl/debugging/symbolize.h"

namespace zeroshard {
namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kUnderSanitizer = true;
#else
constexpr bool kUnderSanitizer = false;
#endif

// A sanitizer reports faults itself (handle_segv, handle_sigbus,
// handle_sigfpe) but not aborts or illegal instructions.
constexpr int kCrashSignals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
constexpr int kSanitizerLeavesSignals[] = {SIGILL, SIGABRT};
constexpr int kMaxFrames = 64;

const char* g_program = "zeroshard";
// The thread writing the report (0: none yet).
std::atomic<long> g_reporter{0};

void Write(const char* text) { (void)!::write(STDERR_FILENO, text, strlen(text)); }

// "SIGABRT (Aborted) in thread 4711": snprintf with %s and %ld only, which
// glibc formats without allocating.
void WriteHeader(int sig, long thread) {
  char line[256];
  const char* abbrev = sigabbrev_np(sig);
  std::snprintf(line, sizeof(line), "\n*** %s: SIG%s (%s) in thread %ld; stack: ***\n", g_program,
                abbrev != nullptr ? abbrev : "?", sigdescr_np(sig), thread);
  Write(line);
}

// The stack from the interrupted frame on: frames up to the signal's
// trampoline are the handler's own. `fault_pc` is where the signal struck
// (null when unknown: every frame is written).
void WriteStack(const void* fault_pc) {
  void* frames[kMaxFrames];
  const int n = ::backtrace(frames, kMaxFrames);
  int first = 0;
  for (int i = 0; i < n; ++i) {
    if (frames[i] != fault_pc) continue;
    first = i;  // The first match: outer frames may return to the same address.
    break;
  }
  for (int i = first; i < n; ++i) {
    char name[512];
    // A return address points past its call, maybe into the next function:
    // one byte back names the caller. The interrupted frame's is exact.
    const void* pc = static_cast<const char*>(frames[i]) - (frames[i] == fault_pc ? 0 : 1);
    if (!absl::Symbolize(pc, name, sizeof(name))) std::snprintf(name, sizeof(name), "?");
    char prefix[600];
    std::snprintf(prefix, sizeof(prefix), "  #%d %s   ", i - first, name);
    Write(prefix);
    ::backtrace_symbols_fd(&frames[i], 1, STDERR_FILENO);  // Module(+offset)[pc]\n
  }
}

const void* FaultPc(const void* context) {
#if defined(__x86_64__)
  return reinterpret_cast<const void*>(
      static_cast<const ucontext_t*>(context)->uc_mcontext.gregs[REG_RIP]);
#elif defined(__aarch64__)
  return reinterpret_cast<const void*>(static_cast<const ucontext_t*>(context)->uc_mcontext.pc);
#else
  (void)context;
  return nullptr;
#endif
}

// Dies of `sig` at once: its default action, and SA_NODEFER left it unblocked.
[[noreturn]] void DieOf(int sig) {
  ::signal(sig, SIG_DFL);
  ::raise(sig);
  ::_exit(128 + sig);  // Only if the signal did not end the process.
}

void OnCrash(int sig, siginfo_t*, void* context) {
  const long me = ::syscall(SYS_gettid);
  long none = 0;
  if (!g_reporter.compare_exchange_strong(none, me)) {
    // The reporter itself crashed while writing (a stack too corrupt to
    // walk): it dies now. Any other thread waits for the reporter, which
    // ends the process.
    if (none == me) DieOf(sig);
    for (;;) ::pause();
  }
  WriteHeader(sig, me);
  WriteStack(context != nullptr ? FaultPc(context) : nullptr);
  DieOf(sig);
}

}  // namespace

bool InstallCrashReport(const char* argv0) {
  if (argv0 != nullptr) {
    const char* slash = strrchr(argv0, '/');
    g_program = slash != nullptr ? slash + 1 : argv0;
  }
  absl::InitializeSymbolizer(argv0);
  void* warm[1];
  (void)::backtrace(warm, 1);  // Loads libgcc_s now, not inside the handler.
  struct sigaction action = {};
  action.sa_sigaction = OnCrash;
  sigemptyset(&action.sa_mask);
  // The handler stays installed (no SA_RESETHAND): a second thread that
  // crashes meanwhile must wait in it, not die before the report is out.
  action.sa_flags = SA_SIGINFO | SA_NODEFER;
  if (kUnderSanitizer) {
    for (int sig : kSanitizerLeavesSignals) ::sigaction(sig, &action, nullptr);
  } else {
    for (int sig : kCrashSignals) ::sigaction(sig, &action, nullptr);
  }
  return !kUnderSanitizer;
}

}  // namespace zeroshard
