// SetUpWorkerMalloc (common/infra/allocator.h): on glibc every thread
// allocates from one arena after it, where without it each new thread gets
// an arena of its own. Each case runs in a forked child, since arenas last
// for the process; the child reports the arenas it has (malloc_info's
// <heap> entries) after 4 threads have each allocated while all are alive.
#include "common/infra/allocator.h"

#include <malloc.h>
#include <sys/wait.h>
#include <unistd.h>

#include <barrier>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace zeroshard {
namespace {

constexpr int kThreads = 4;

// Why a case cannot run here, or "" where it can: glibc's arenas exist only
// under glibc's own malloc (a sanitizer brings its own).
std::string NoGlibcArenas() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return "built with a sanitizer, whose malloc has no glibc arenas";
#else
  const std::string name = MallocName();
  return name == "glibc" ? "" : "not glibc's malloc: " + name;
#endif
}

int ArenasInThisProcess() {
  char* text = nullptr;
  size_t size = 0;
  FILE* f = open_memstream(&text, &size);
  if (f == nullptr || malloc_info(0, f) != 0) return -1;
  std::fclose(f);
  int heaps = 0;
  for (size_t at = 0;
       (at = std::string_view(text, size).find("<heap nr=", at)) != std::string::npos; ++at)
    ++heaps;
  std::free(text);
  return heaps;
}

// In a forked child: optionally the worker's settings, then kThreads threads
// that each allocate 1 MiB while all are alive. Returns the child's arena
// count (its exit code), or -1.
int ArenasAfterThreads(bool worker_settings) {
  const pid_t pid = fork();
  if (pid == 0) {
    // Without the worker's settings, a limit above the thread count, so an
    // arena limit from the environment (MALLOC_ARENA_MAX) does not decide.
    if (worker_settings ? !SetUpWorkerMalloc() : mallopt(M_ARENA_MAX, 8 * kThreads) != 1)
      _exit(100);
    std::barrier all(kThreads);
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i)
      threads.emplace_back([&all] {
        std::vector<char> block(1 << 20, 1);
        all.arrive_and_wait();  // Every thread holds its block at once.
      });
    for (std::thread& t : threads) t.join();
    _exit(ArenasInThisProcess());
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

TEST(AllocatorTest, TheWorkersSettingsKeepEveryThreadOnOneArena) {
  if (const std::string why = NoGlibcArenas(); !why.empty()) GTEST_SKIP() << why;
  EXPECT_EQ(ArenasAfterThreads(true), 1);
}

TEST(AllocatorTest, WithoutThemEachThreadHasAnArenaOfItsOwn) {
  if (const std::string why = NoGlibcArenas(); !why.empty()) GTEST_SKIP() << why;
  // 5 here (the main arena and one per thread); glibc may also reuse one.
  EXPECT_GT(ArenasAfterThreads(false), 1);
}

}  // namespace
}  // namespace zeroshard
