// --offload-optimizer / --offload-params / --offload-dir on `zeroshard
// launch` and zeroshard-worker: a bad value (--offload-prefetch outside
// 0..64 too), nvme without a dir, params nvme below stage 3, a missing
// dir, and (where this test may mount a 1 MiB tmpfs, as root) a dir on a
// disk too small for the offload files each exit 2 with one line naming what
// was wrong, before anything trains.
#include <sys/mount.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "gtest/gtest.h"
#include "tests/support/subprocess.h"

namespace {

using zeroshard::testing::BinPath;
using zeroshard::testing::CommandResult;

void ExpectUsageError(const std::string& args, const std::string& names) {
  CommandResult r = zeroshard::testing::RunCommand(BinPath("") + args);
  EXPECT_EQ(r.exit_code, 2) << args << ": " << r.output;
  EXPECT_NE(r.output.find(names), std::string::npos) << args << ": " << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << args << ": " << r.output;
}

const std::string kRun = "zeroshard launch --steps 1 -n 1 --run-dir /tmp/zs_offload_flags ";
const std::string kLaunch = kRun + "--model tiny ";

TEST(OffloadFlagsTest, LaunchRefusesBadOffloadSettings) {
  ExpectUsageError(kLaunch + "--offload-optimizer disk", "--offload-optimizer");
  ExpectUsageError(kLaunch + "--offload-params host --stage 3", "--offload-params");
  ExpectUsageError(kLaunch + "--offload-params nvme --stage 2 --offload-dir /tmp", "stage 3");
  ExpectUsageError(kLaunch + "--offload-params nvme --stage 3", "offload_dir");
  ExpectUsageError(
      kLaunch + "--offload-params nvme --stage 3 --offload-dir /tmp --offload-prefetch 65",
      "--offload-prefetch");
  ExpectUsageError(kLaunch + "--offload-optimizer nvme", "offload_dir");
  ExpectUsageError(kLaunch + "--offload-optimizer nvme --offload-dir /nonexistent/zs",
                   "--offload-dir /nonexistent/zs");
}

TEST(OffloadFlagsTest, WorkerRefusesBadOffloadSettings) {
  ExpectUsageError("zeroshard-worker --coordinator 127.0.0.1:9 --offload-optimizer disk",
                   "--offload-optimizer");
  ExpectUsageError("zeroshard-worker --coordinator 127.0.0.1:9 --offload-prefetch -1",
                   "--offload-prefetch");
  ExpectUsageError("zeroshard-worker --coordinator 127.0.0.1:9 --offload-dir /nonexistent/zs",
                   "--offload-dir /nonexistent/zs");
}

TEST(OffloadFlagsTest, LaunchRefusesADiskTooSmall) {
  char tmpl[] = "/tmp/zs_offload_small_XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  if (geteuid() != 0 || ::mount("tmpfs", dir.c_str(), "tmpfs", 0, "size=1m") != 0) {
    ::rmdir(dir.c_str());
    GTEST_SKIP() << "cannot mount a small tmpfs here (needs root): the full-disk refusal is "
                    "covered by offload_io_test's CheckOffloadDir case";
  }
  ExpectUsageError(kRun + "--model medium --offload-optimizer nvme --offload-dir " + dir,
                   "GiB free, offload needs");
  ::umount(dir.c_str());
  ::rmdir(dir.c_str());
}

}  // namespace
