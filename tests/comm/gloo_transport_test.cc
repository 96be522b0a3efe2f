// gloo_transport.h's device policy: a device on a loopback address, made
// from a SCHED_OTHER thread, starts its event-loop thread under SCHED_BATCH
// ([Note: batch loop threads on loopback]); on any other address, or from a
// thread under another policy, the loop thread keeps the caller's policy,
// and the caller's own policy never changes.
#include "worker/comm/gloo_transport.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <ifaddrs.h>
#include <pthread.h>
#include <sched.h>
#include <sys/types.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <thread>

#include "common/infra/loopback.h"
#include "gtest/gtest.h"

namespace zeroshard::testing {
namespace {

// Threads of this process under `policy` (/proc/self/task).
int ThreadsUnder(int policy) {
  int n = 0;
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return -1;
  while (dirent* e = readdir(dir)) {
    const pid_t tid = static_cast<pid_t>(std::atoi(e->d_name));
    if (tid > 0 && sched_getscheduler(tid) == policy) ++n;
  }
  closedir(dir);
  return n;
}

// An IPv4 address of this host outside 127.0.0.0/8, if it has one.
std::optional<std::string> NonLoopbackAddress() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return std::nullopt;
  std::optional<std::string> found;
  for (ifaddrs* a = list; a != nullptr && !found; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    char text[INET_ADDRSTRLEN] = {};
    const auto* in = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
    if (inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text)) && !IsLoopbackHost(text)) {
      found = text;
    }
  }
  freeifaddrs(list);
  return found;
}

// Whether this sandbox lets a thread take SCHED_BATCH (a seccomp filter or a
// user-space kernel may refuse; the product then carries on unchanged).
bool BatchAllowed() {
  bool allowed = false;
  std::thread([&allowed] {
    const sched_param zero{};
    allowed = pthread_setschedparam(pthread_self(), SCHED_BATCH, &zero) == 0;
  }).join();
  return allowed;
}

TEST(GlooTransportTest, LoopbackDeviceLoopThreadRunsBatch) {
  if (sched_getscheduler(0) != SCHED_OTHER) GTEST_SKIP() << "this test runs under another policy";
  if (!BatchAllowed()) GTEST_SKIP() << "this sandbox refuses SCHED_BATCH";
  const int before = ThreadsUnder(SCHED_BATCH);
  auto device = CreateTcpDevice("127.0.0.1");
  EXPECT_EQ(ThreadsUnder(SCHED_BATCH), before + 1) << "the device's loop thread";
  EXPECT_EQ(sched_getscheduler(0), SCHED_OTHER) << "the caller's policy is restored";
}

TEST(GlooTransportTest, OtherAddressKeepsThePolicy) {
  const std::optional<std::string> address = NonLoopbackAddress();
  if (!address) GTEST_SKIP() << "this host has no IPv4 address outside 127.0.0.0/8";
  if (sched_getscheduler(0) != SCHED_OTHER) GTEST_SKIP() << "this test runs under another policy";
  const int before = ThreadsUnder(SCHED_BATCH);
  auto device = CreateTcpDevice(*address);
  EXPECT_EQ(ThreadsUnder(SCHED_BATCH), before) << *address;
  EXPECT_EQ(sched_getscheduler(0), SCHED_OTHER);
}

// An operator's choice of policy (here SCHED_IDLE, which needs no privilege)
// is kept: the loop thread inherits it, not SCHED_BATCH.
TEST(GlooTransportTest, CallerUnderAnotherPolicyIsLeftAlone) {
  std::thread([] {
    const sched_param zero{};
    if (pthread_setschedparam(pthread_self(), SCHED_IDLE, &zero) != 0) {
      GTEST_SKIP() << "this sandbox refuses SCHED_IDLE";
    }
    const int batch = ThreadsUnder(SCHED_BATCH), idle = ThreadsUnder(SCHED_IDLE);
    auto device = CreateTcpDevice("127.0.0.1");
    EXPECT_EQ(ThreadsUnder(SCHED_BATCH), batch);
    EXPECT_EQ(ThreadsUnder(SCHED_IDLE), idle + 1) << "the loop thread inherits SCHED_IDLE";
    EXPECT_EQ(sched_getscheduler(0), SCHED_IDLE);
  }).join();
}

}  // namespace
}  // namespace zeroshard::testing
