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

constexpr int kCrashSignals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
constexpr int kMaxFrames = 64;

const char* g_program = "zeroshard";
std::atomic<bool> g_crashing{false};

void Write(const char* text) { (void)!::write(STDERR_FILENO, text, strlen(text)); }

// "SIGABRT (Aborted) in thread 4711": snprintf with %d and %s only, which
// glibc formats without allocating.
void WriteHeader(int sig) {
  char line[256];
  const char* abbrev = sigabbrev_np(sig);
  std::snprintf(line, sizeof(line), "\n*** %s: SIG%s (%s) in thread %ld; stack: ***\n", g_program,
                abbrev != nullptr ? abbrev : "?", sigdescr_np(sig),
                static_cast<long>(::syscall(SYS_gettid)));
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
    if (frames[i] == fault_pc) first = i;
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

void OnCrash(int sig, siginfo_t*, void* context) {
  if (g_crashing.exchange(true)) {
    // Another thread is already writing its report and will end the process.
    for (;;) ::pause();
  }
  WriteHeader(sig);
  WriteStack(context != nullptr ? FaultPc(context) : nullptr);
  // Die of the same signal: SA_RESETHAND put the default action back, and
  // the signal is unblocked again once this handler returns.
  ::raise(sig);
}

}  // namespace

bool InstallCrashReport(const char* argv0) {
  if (kUnderSanitizer) return false;
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
  action.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_NODEFER;
  for (int sig : kCrashSignals) ::sigaction(sig, &action, nullptr);
  return true;
}

}  // namespace zeroshard
