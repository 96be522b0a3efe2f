// ParamStore (worker/offload/param_store.h) on its own: seven units of odd
// byte sizes (one over a block) streamed through the slots of prefetch 0, 1
// and 2, with io_uring and forced pread/pwrite, for three rounds of
// "write every unit, then read them back in forward and backward order with
// read-ahead": every read returns the pattern written last for that unit
// (generated independently per unit and round), so evictions, read-ahead
// and write-back never mix units or rounds. Accounting: params = slots,
// offloaded = files; both return to 0 with the store. Errors: a unit out
// of range, a missing dir.
#include "worker/offload/param_store.h"

#include <unistd.h>

#include <cstring>
#include <vector>

#include "common/memory_model.h"
#include "gtest/gtest.h"

namespace zeroshard {
namespace {

uint8_t Pattern(int u, int round, int64_t i) {
  return static_cast<uint8_t>(((i + 31 * u + 977 * round) * 2654435761u) >> 11);
}

void Stream(int prefetch, bool force_pread) {
  char tmpl[] = "/tmp/zs_param_store_XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::vector<int64_t> bytes = {1, 4095, 4097, 10000, 2, 8192, 3 * 4096 + 7};
  MemoryAccountant accountant;
  {
    auto store = ParamStore::Create({true, dir, "t-", force_pread, prefetch}, bytes, &accountant);
    ASSERT_TRUE(store.ok()) << store.status();
    ParamStore& s = **store;
    ASSERT_EQ(s.num_slots(), prefetch + 1);
    EXPECT_EQ(accountant.current().params, ParamStagingBytes(prefetch, 3 * 4096 + 7));
    EXPECT_EQ(accountant.current().params, (prefetch + 1) * 4 * 4096);
    EXPECT_EQ(accountant.current().offloaded, (1 + 1 + 2 + 3 + 1 + 2 + 4) * 4096);
    const int n = static_cast<int>(bytes.size());
    std::vector<int> order;
    for (int u = 0; u < n; ++u) order.push_back(u);
    for (int u = n - 1; u >= 0; --u) order.push_back(u);
    for (int round = 0; round < 3; ++round) {
      for (int u = 0; u < n; ++u) {
        auto out = s.BeginWrite(u);
        ASSERT_TRUE(out.ok()) << out.status();
        auto* p = static_cast<uint8_t*>(*out);
        for (int64_t i = 0; i < bytes[u]; ++i) p[i] = Pattern(u, round, i);
        ASSERT_TRUE(s.Commit(u).ok());
      }
      for (size_t k = 0; k < order.size(); ++k) {
        const int u = order[k];
        auto in = s.Acquire(u);
        ASSERT_TRUE(in.ok()) << in.status();
        const auto* p = static_cast<const uint8_t*>(*in);
        int64_t wrong = 0;
        for (int64_t i = 0; i < bytes[u]; ++i) wrong += p[i] != Pattern(u, round, i);
        EXPECT_EQ(wrong, 0) << "unit " << u << " round " << round << " prefetch " << prefetch;
        std::vector<int> ahead(order.begin() + k + 1, order.end());
        ASSERT_TRUE(s.Prefetch(ahead).ok());
      }
    }
    EXPECT_TRUE(s.Flush().ok());
    EXPECT_TRUE(absl::IsInvalidArgument(s.Acquire(n).status()));
    EXPECT_TRUE(absl::IsInvalidArgument(s.BeginWrite(-1).status()));
  }
  EXPECT_EQ(accountant.current().params, 0);
  EXPECT_EQ(accountant.current().offloaded, 0);
  ::rmdir(dir.c_str());  // Fails if a file was left behind.
  EXPECT_NE(::access(dir.c_str(), F_OK), 0) << dir << " not empty";
}

TEST(ParamStoreTest, StreamsEveryUnitBackBitExact) {
  for (int prefetch : {0, 1, 2}) {
    for (bool force_pread : {false, true}) Stream(prefetch, force_pread);
  }
}

TEST(ParamStoreTest, RefusesAMissingDirAndABadPrefetch) {
  MemoryAccountant accountant;
  auto s = ParamStore::Create({true, "/nonexistent/zs", "", false, 2}, {8}, &accountant);
  EXPECT_TRUE(absl::IsFailedPrecondition(s.status())) << s.status();
  EXPECT_NE(s.status().message().find("/nonexistent/zs"), std::string::npos) << s.status();
  s = ParamStore::Create({true, "/tmp", "", false, 65}, {8}, &accountant);
  EXPECT_TRUE(absl::IsInvalidArgument(s.status())) << s.status();
}

}  // namespace
}  // namespace zeroshard
