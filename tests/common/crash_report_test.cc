// A crash writes its signal, thread and a symbolized stack that reaches the
// function that crashed, then dies of the same signal (crash_report.h).
// Death tests: each case runs in a forked child.
#include "common/infra/crash_report.h"

#include <signal.h>

#include <cstdlib>
#include <thread>

#include "gtest/gtest.h"

namespace zeroshard {
namespace {

// Not inlined and not a tail call, so each has a frame of its own to find.
[[gnu::noinline]] void AbortHere() {
  std::abort();
  asm volatile("");
}

void AbortInWorkerThread() { std::thread(&AbortHere).join(); }

[[gnu::noinline]] int WriteThroughNull(volatile int* p) {
  *p = 1;
  return *p + 1;
}

// glibc's own check: a double free aborts from inside free().
[[gnu::noinline]] void FreeTwice() {
  void* volatile p = std::malloc(64);
  std::free(p);
  std::free(p);
  asm volatile("");
}

class CrashReportTest : public testing::Test {
 protected:
  void SetUp() override {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    GTEST_SKIP() << "under a sanitizer the sanitizer's own crash reports stay installed";
#endif
  }
};

TEST_F(CrashReportTest, AbortInAThreadNamesTheSignalAndTheThreadsFunction) {
  EXPECT_EXIT(
      {
        InstallCrashReport("crash_report_test");
        AbortInWorkerThread();
      },
      testing::KilledBySignal(SIGABRT),
      "crash_report_test: SIGABRT \\(Aborted\\) in thread [0-9]+; stack:(.|\n)*#[0-9]+ "
      "abort(.|\n)*AbortHere");
}

TEST_F(CrashReportTest, SegfaultNamesTheFaultingFunction) {
  EXPECT_EXIT(
      {
        InstallCrashReport("crash_report_test");
        WriteThroughNull(nullptr);
      },
      testing::KilledBySignal(SIGSEGV),
      "SIGSEGV \\(Segmentation fault\\)(.|\n)*#0 "
      "zeroshard::\\(anonymous "
      "namespace\\)::WriteThroughNull\\(\\)(.|\n)*crash_report_test\\(\\+0x");
}

TEST_F(CrashReportTest, HeapCorruptionFoundByGlibcReachesTheCaller) {
  EXPECT_EXIT(
      {
        InstallCrashReport("crash_report_test");
        FreeTwice();
      },
      testing::KilledBySignal(SIGABRT), "free(.|\n)*FreeTwice");
}

}  // namespace
}  // namespace zeroshard
