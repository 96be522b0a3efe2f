// Parity of the sharded engine with unsharded training (STYLE.md point 16):
// for N = 1..4 ranks as forked processes over loopback Gloo (rendezvous via
// a FileStore in a temp dir), stages 0-3, fp32 and bf16 compute, gradient
// accumulation over 2 micro-batches, a tied unit bracketed twice per pass,
// units not divisible by N and one smaller than N, clipping active, and at
// stages 2-3 also with 256-byte buckets (grouped collectives), at stage 0
// also all-reducing every micro-batch in its backward (not only the last): the
// parameters after 10 AdamW steps equal the single-process reference
// (tests/engine/test_mlp.h: independent AdamW in double) within
//   fp32 compute and reduce: max over elements |a - b| / max(|b|, 0.1) <= 1e-5
//   bf16 compute:            the same measure <= 1e-2
// (the 0.1 floor keeps the relative measure meaningful for elements that
// pass near zero; initial parameters have standard deviation 0.5). Adam is
// nearly invariant to a constant gradient scale, so the reported global
// gradient norm of every step is also checked against the reference's
// (relative 1e-5 fp32, 1e-2 bf16): that catches averaging mistakes.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/engine/engine_runner.h"
#include "tests/support/file_store.h"
#include "tests/support/subprocess.h"
#include "worker/comm/gloo_communicator.h"

namespace zeroshard::testing {
namespace {

const MlpDims kDims{3, 7};  // Units of 28, 56 and 3 elements.

std::vector<RunConfig> Configs() {
  std::vector<RunConfig> configs;
  for (int stage = 0; stage <= 3; ++stage) {
    for (auto [c, r] :
         {std::pair{DType::kFp32, DType::kFp32}, std::pair{DType::kBf16, DType::kBf16},
          std::pair{DType::kBf16, DType::kFp32}}) {
      RunConfig config;
      config.stage = stage;
      config.compute = c;
      config.reduce = r;
      configs.push_back(config);
      // Stages 2-3 with buckets of 256 bytes: units share all-gathers and
      // reduce-scatters, and the tied unit's brackets one reduction.
      if (stage >= 2 && r == c) {
        config.bucket_bytes = 256;
        configs.push_back(config);
      }
      // Stage 0 all-reducing every micro-batch's gradients in its backward
      // (the others: the last micro-batch's only).
      if (stage == 0 && r == DType::kFp32) {
        config.sync_every_micro_batch = true;
        configs.push_back(config);
      }
    }
  }
  return configs;
}

std::string Name(const RunConfig& c) {
  return absl::StrCat("stage", c.stage, "_", DTypeName(c.compute), "_reduce_", DTypeName(c.reduce),
                      c.bucket_bytes > 0 ? absl::StrCat("_bucket", c.bucket_bytes) : "",
                      c.sync_every_micro_batch ? "_syncall" : "");
}

// The body of one forked rank: every config in turn over one communicator.
// Rank 0 writes each config's parameters to dir/<name>.bin. Returns the exit
// code; never returns into gtest.
int RankMain(const std::string& dir, int rank, int n) {
  FileStore store(dir);
  absl::StatusOr<std::unique_ptr<Communicator>> comm =
      CreateGlooCommunicator(store, "equivalence", rank, n, {"127.0.0.1", absl::Seconds(20)});
  if (!comm.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rank, comm.status().ToString().c_str());
    return 2;
  }
  for (const RunConfig& config : Configs()) {
    absl::StatusOr<RankResult> result = TrainRank(kDims, RefAdamW{}, config, comm->get());
    if (!result.ok()) {
      std::fprintf(stderr, "rank %d %s: %s\n", rank, Name(config).c_str(),
                   result.status().ToString().c_str());
      return 3;
    }
    if (rank == 0) {
      std::ofstream out(dir + "/" + Name(config) + ".bin", std::ios::binary);
      for (const auto& unit : result->params) {
        out.write(reinterpret_cast<const char*>(unit.data()), unit.size() * 4);
      }
      out.write(reinterpret_cast<const char*>(result->grad_norms.data()),
                result->grad_norms.size() * 8);
    }
  }
  return 0;
}

// Forks n ranks running RankMain and reaps them within a deadline, killing
// stragglers.
::testing::AssertionResult RunForkedRanks(const std::string& dir, int n) {
  std::vector<pid_t> pids;
  for (int rank = 0; rank < n; ++rank) {
    const pid_t pid = fork();
    if (pid < 0) return ::testing::AssertionFailure() << "fork failed";
    if (pid == 0) _exit(RankMain(dir, rank, n));
    pids.push_back(pid);
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(50);
  for (pid_t pid : pids) {
    int status = 0;
    if (!ReapBy(pid, deadline, &status)) {
      for (pid_t p : pids) kill(p, SIGKILL);
      waitpid(pid, &status, 0);
      return ::testing::AssertionFailure()
             << "rank pid " << pid << " did not finish within the deadline";
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      return ::testing::AssertionFailure() << "rank pid " << pid << " failed, status " << status;
    }
  }
  return ::testing::AssertionSuccess();
}

// Unit parameters in `bytes` from `*offset` on against the reference.
void ExpectParamsMatch(int n, const RunConfig& config, const std::vector<std::vector<float>>& ref,
                       const std::string& bytes, size_t* offset, double tol) {
  for (size_t u = 0; u < ref.size(); ++u) {
    ASSERT_LE(*offset + ref[u].size() * 4, bytes.size()) << Name(config);
    std::vector<float> got(ref[u].size());
    std::memcpy(got.data(), bytes.data() + *offset, got.size() * 4);
    *offset += got.size() * 4;
    double max_rel = 0.0, diff2 = 0.0, ref2 = 0.0;
    for (size_t i = 0; i < got.size(); ++i) {
      const double d = std::fabs(static_cast<double>(got[i]) - ref[u][i]);
      max_rel = std::max(max_rel, d / std::max(std::fabs(static_cast<double>(ref[u][i])), 0.1));
      diff2 += d * d;
      ref2 += static_cast<double>(ref[u][i]) * ref[u][i];
    }
    const double norm_rel = std::sqrt(diff2 / ref2);
    std::printf("N=%d %-26s unit %zu: max elementwise rel %.2e, norm rel %.2e\n", n,
                Name(config).c_str(), u, max_rel, norm_rel);
    EXPECT_LE(max_rel, tol) << Name(config) << " unit " << u;
  }
}

// The per-step gradient norms after the parameters against the reference's.
void ExpectNormsMatch(int n, const RunConfig& config, const std::vector<double>& norms,
                      const std::string& bytes, size_t offset, double tol) {
  ASSERT_EQ(bytes.size(), offset + norms.size() * 8) << Name(config);
  double worst = 0.0;
  for (size_t s = 0; s < norms.size(); ++s) {
    double got;
    std::memcpy(&got, bytes.data() + offset + s * 8, 8);
    worst = std::max(worst, std::fabs(got - norms[s]) / norms[s]);
  }
  std::printf("N=%d %-26s grad norm max rel %.2e (reference step-1 norm %.3f)\n", n,
              Name(config).c_str(), worst, norms[0]);
  EXPECT_LE(worst, tol) << Name(config) << " gradient norms";
}

class EngineEquivalenceTest : public ::testing::TestWithParam<int> {};

TEST_P(EngineEquivalenceTest, TenStepsMatchUnshardedReference) {
  const int n = GetParam();
  const std::string dir = MakeTempDir("engine_equivalence");
  ASSERT_TRUE(RunForkedRanks(dir, n));

  absl::StatusOr<ShardPlan> plan = MakeShardPlan(MlpUnits(kDims), 1, 1);
  ASSERT_TRUE(plan.ok());
  std::vector<double> norms, coefs;
  const RunConfig defaults;
  const auto ref = ReferenceTrain(kDims, *plan, RefAdamW{}, defaults.steps, defaults.global_batch,
                                  &norms, &coefs);
  ASSERT_LT(*std::min_element(coefs.begin(), coefs.end()), 0.9) << "clipping must be active";
  for (const RunConfig& config : Configs()) {
    const std::string bytes = ReadFile(dir + "/" + Name(config) + ".bin");
    const bool fp32 = config.compute == DType::kFp32 && config.reduce == DType::kFp32;
    const double tol = fp32 ? 1e-5 : 1e-2;
    size_t offset = 0;
    ExpectParamsMatch(n, config, ref, bytes, &offset, tol);
    ExpectNormsMatch(n, config, norms, bytes, offset, tol);
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, EngineEquivalenceTest, ::testing::Values(1, 2, 3, 4),
                         [](const auto& info) { return absl::StrCat("N", info.param); });

}  // namespace
}  // namespace zeroshard::testing
