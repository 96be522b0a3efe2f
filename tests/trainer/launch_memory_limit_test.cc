// `zeroshard launch --model medium` under a memory limit too small for its
// optimizer state (RLIMIT_DATA set by prlimit, which every process of the
// job inherits): with --offload-optimizer nvme it completes; without offload
// the worker's fit check refuses it before training, in one line, and launch
// exits 2 (no abort, no hang in a failed malloc).
//
// The limit comes from the worker's own figures: a first run under a low
// limit is refused and names what the engine needs and what is free, which
// gives the worker's footprint before the check (limit - free). The test's
// limit is that footprint plus the NVMe run's need plus half the gap to the
// device-memory run's need.
#include <regex>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/support/subprocess.h"
#include "tests/trainer/step_log.h"

namespace zeroshard {
namespace {

using testing::BinPath;
using testing::CommandResult;
using testing::MakeTempDir;
using testing::ReadStepRecords;
using testing::RunCommand;

struct FitFigures {
  int64_t needed = -1, free = -1;
};

// "the engine needs N bytes on cpu (...); F are free"; -1s when absent.
FitFigures ParseRefusal(const std::string& output) {
  static const std::regex kRefusal(R"(the engine needs (\d+) bytes on cpu .*; (\d+) are free)");
  std::smatch m;
  FitFigures f;
  if (std::regex_search(output, m, kRefusal)) {
    EXPECT_TRUE(absl::SimpleAtoi(m[1].str(), &f.needed));
    EXPECT_TRUE(absl::SimpleAtoi(m[2].str(), &f.free));
  }
  return f;
}

class LaunchMemoryLimitTest : public ::testing::Test {
 protected:
  CommandResult Launch(int64_t limit, const std::string& offload, const std::string& tag) {
    return RunCommand(
        absl::StrCat("prlimit --data=", limit, " ", BinPath("zeroshard"),
                     " launch --model medium --workers 1 --stage 3 --steps 2 --global-batch 2"
                     " --micro-batch 2 --threads 1 --eval-every 0 --offload-optimizer ",
                     offload, " --offload-dir ", dir_, " --run-dir ", dir_, "/", tag, " --log ",
                     dir_, "/", tag, ".jsonl"));
  }

  // Refused at `limit`, with the engine's figures. Starts low and raises the
  // limit in 64 MiB steps (less than the engine's need, so no step jumps
  // past the window) while the job fails before the worker's fit check:
  // launch's own plan refuses it (its memory is capped by the limit too), or
  // the worker has no room for a thread (gloo, EAGAIN) or the matmuls' scratch.
  FitFigures Probe(const std::string& offload, int64_t* limit) {
    for (int attempt = 0; attempt < 12; ++attempt, *limit += int64_t{64} << 20) {
      const CommandResult r = Launch(*limit, offload, absl::StrCat("probe-", offload));
      if (r.output.find("does not fit at stage") != std::string::npos ||
          r.output.find("matmuls' scratch") != std::string::npos ||
          r.output.find("Resource temporarily unavailable") != std::string::npos) {
        continue;
      }
      EXPECT_EQ(r.exit_code, 2) << r.output;
      const FitFigures f = ParseRefusal(r.output);
      EXPECT_GE(f.needed, 0) << r.output;
      return f;
    }
    ADD_FAILURE() << "no limit up to " << *limit << " got past the worker's start";
    return {};
  }

  // The worker's footprint at its fit check (limit - free) is larger just
  // above the limits where its start fails, so it is measured again 16 MiB
  // short of fitting, near the limit the test then uses.
  FitFigures Measure(const std::string& offload, int64_t* limit) {
    const FitFigures first = Probe(offload, limit);
    if (first.needed < 0) return first;
    *limit += first.needed - first.free - (int64_t{16} << 20);
    const CommandResult r = Launch(*limit, offload, absl::StrCat("measure-", offload));
    EXPECT_EQ(r.exit_code, 2) << r.output;
    return ParseRefusal(r.output);
  }

  std::string dir_ = MakeTempDir("zs_memory_limit");
};

TEST_F(LaunchMemoryLimitTest, NvmeOffloadCompletesWhereDeviceMemoryIsRefused) {
  int64_t nvme_limit = int64_t{256} << 20, none_limit = nvme_limit;
  const FitFigures nvme = Measure("nvme", &nvme_limit);
  const FitFigures none = Measure("none", &none_limit);
  ASSERT_GT(nvme.needed, 0);
  ASSERT_GT(none.needed, nvme.needed) << "offload must lower the fit check's figure";
  const int64_t footprint = nvme_limit - nvme.free;
  std::printf("footprint without offload %lld B\n", static_cast<long long>(none_limit - none.free));
  const int64_t limit = footprint + nvme.needed + (none.needed - nvme.needed) / 2;
  std::printf("footprint %lld B; engine needs %lld B (nvme) / %lld B (none); limit %lld B\n",
              static_cast<long long>(footprint), static_cast<long long>(nvme.needed),
              static_cast<long long>(none.needed), static_cast<long long>(limit));

  const CommandResult refused = Launch(limit, "none", "none");
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("the engine needs"), std::string::npos) << refused.output;
  EXPECT_TRUE(ReadStepRecords(dir_ + "/none.jsonl").empty()) << "refused before training";

  const CommandResult offloaded = Launch(limit, "nvme", "nvme");
  ASSERT_EQ(offloaded.exit_code, 0) << offloaded.output;
  EXPECT_EQ(ReadStepRecords(dir_ + "/nvme.jsonl").size(), 2u) << offloaded.output;
}

}  // namespace
}  // namespace zeroshard
