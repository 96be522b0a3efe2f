// A crash writes its signal, thread and a symbolized stack that reaches the
// function that crashed, then dies of the same signal (crash_report.h).
// Death tests: each case runs in a forked child.
#include "common/infra/crash_report.h"

#include <signal.h>

#include <cstdlib>
#include <latch>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace zeroshard {
namespace {

// Not inlined and not a tail call, so each has a frame of its own to find.
[[gnu::noinline]] void AbortHere() {
  std::abort();
  asm volatile("");
}

void AbortInWorkerThread() { std::thread(&AbortHere).join(); }

// Four threads abort at the same moment: one writes the whole report.
void AbortInFourThreadsAtOnce() {
  std::latch start(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&start] {
      start.arrive_and_wait();
      AbortHere();
    });
  }
  for (std::thread& t : threads) t.join();
}

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

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kUnderSanitizer = true;
#else
constexpr bool kUnderSanitizer = false;
#endif

class CrashReportTest : public testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
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

TEST_F(CrashReportTest, ThreadsCrashingTogetherLeaveOneWholeReport) {
  EXPECT_EXIT(
      {
        InstallCrashReport("crash_report_test");
        AbortInFourThreadsAtOnce();
      },
      testing::KilledBySignal(SIGABRT),
      "SIGABRT \\(Aborted\\) in thread [0-9]+; stack:(.|\n)*AbortHere(.|\n)*"
      "std::thread::_State_impl");
}

TEST_F(CrashReportTest, SegfaultNamesTheFaultingFunction) {
  if (kUnderSanitizer) GTEST_SKIP() << "the sanitizer reports this itself";
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
  if (kUnderSanitizer) GTEST_SKIP() << "the sanitizer reports this itself";
  EXPECT_EXIT(
      {
        InstallCrashReport("crash_report_test");
        FreeTwice();
      },
      testing::KilledBySignal(SIGABRT), "free(.|\n)*FreeTwice");
}

}  // namespace
}  // namespace zeroshard
