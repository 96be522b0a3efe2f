// The `medium` preset's shard plan (worker/model, 6.4M parameters) under an
// RLIMIT_DATA too small for its optimizer state, in a forked child: without
// offload the engine refuses cleanly at Create (RESOURCE_EXHAUSTED from its
// fit check, naming the bytes; the CPU device's free memory is capped by
// the limit), and with the NVMe store it is created and completes 3 steps
// (synthetic gradients: the engine, its update and its I/O, not the model's
// kernels, run under the limit). The limit is set from this process's own
// VmData: headroom = the NVMe engine's model state and buffer bound + 40 MiB
// (the I/O threads' stacks and malloc slack; one malloc arena, so threads
// add no arenas of their own), which is 8.5 MiB less than the
// device-memory engine needs.
#include <malloc.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "common/model/model_config.h"
#include "common/zero_memory.h"
#include "gtest/gtest.h"
#include "worker/comm/gloo_communicator.h"
#include "worker/comm/in_memory_store.h"
#include "worker/engine/sharded_engine.h"

namespace zeroshard {
namespace {

int64_t VmDataBytes() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    std::istringstream f(line);
    std::string key;
    int64_t kib = 0;
    if (f >> key >> kib && key == "VmData:") return kib * 1024;
  }
  return -1;
}

// The child's body; returns its exit code (0 = as expected).
int Child() {
  const ShardPlan plan = *MakeShardPlan(ModelUnits(*ModelPreset("medium")), 1, 1);
  InMemoryStore store;
  auto comm = CreateGlooCommunicator(store, "limit", 0, 1, {"127.0.0.1", absl::Seconds(20)});
  if (!comm.ok()) return 10;
  std::vector<std::vector<float>> init;
  for (const UnitPlan& u : plan.units) init.emplace_back(u.numel, 0.01f);
  EngineOptions o;
  o.stage = 1;
  o.optimizer_threads = 1;
  const MemoryByKind formula = ZeroFormulaBytes(1, plan.total_padded_numel(), 1, 4, 4);
  int64_t max_n = 0;
  for (const UnitPlan& u : plan.units) max_n = std::max(max_n, u.padded_numel);
  o.offload = {OffloadTarget::kNvme, "/tmp", "", false};
  const int64_t staging = StagingBytesFor(o.offload, {max_n}, DeviceKind::kCpu);
  // The engine's BufferBytesBound at stage 1, fp32: 8 bytes per element + 8.
  const int64_t nvme_needs = formula.params + formula.grads + staging + 8 * max_n + 8;
  const int64_t headroom = nvme_needs + (int64_t{40} << 20);
  std::printf("optimizer state %lld B, staging %lld B, limit = VmData + %lld B\n",
              static_cast<long long>(formula.optimizer), static_cast<long long>(staging),
              static_cast<long long>(headroom));
  if (formula.optimizer - staging <= (int64_t{40} << 20)) return 11;  // Not a real test.
  mallopt(M_ARENA_MAX, 1);
  const rlimit limit{static_cast<rlim_t>(VmDataBytes() + headroom),
                     static_cast<rlim_t>(VmDataBytes() + headroom)};
  if (setrlimit(RLIMIT_DATA, &limit) != 0) return 12;
  EngineOptions device_o = o;
  device_o.offload = {};
  auto refused = ShardedEngine::Create(plan, comm->get(), device_o, init);
  std::printf("without offload: %s\n",
              refused.ok() ? "created" : refused.status().ToString().c_str());
  if (refused.ok() || !absl::IsResourceExhausted(refused.status())) return 13;
  auto engine = ShardedEngine::Create(plan, comm->get(), o, init);
  if (!engine.ok()) {
    std::printf("nvme: %s\n", engine.status().ToString().c_str());
    return 14;
  }
  for (int step = 0; step < 3; ++step) {
    for (int u = 0; u < static_cast<int>(plan.units.size()); ++u) {
      UnitBackwardView view = (*engine)->PreBackward(u);
      for (int64_t i = 0; i < plan.units[u].numel; ++i) view.grads[i] += std::sin(0.001f * i);
      (*engine)->PostBackward(u);
    }
    if (!(*engine)->Step().ok()) return 15;
  }
  std::printf("nvme: 3 steps, resident optimizer %lld B, offloaded %lld B\n",
              static_cast<long long>((*engine)->memory().optimizer),
              static_cast<long long>((*engine)->memory().offloaded));
  return 0;
}

TEST(EngineOffloadLimitTest, MediumRunsUnderALimitWithNvmeAndIsRefusedWithout) {
  std::fflush(stdout);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const int code = Child();
    std::fflush(stdout);
    _exit(code);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "child killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace zeroshard
