#include "worker/comm/in_memory_store.h"

#include <thread>

#include "gtest/gtest.h"

namespace zeroshard {
namespace {

std::vector<uint8_t> Bytes(const std::string& s) { return {s.begin(), s.end()}; }

TEST(InMemoryStoreTest, SetGetOverwriteAndMissing) {
  InMemoryStore store;
  EXPECT_EQ(store.Get("k").status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(store.Set("k", Bytes("a")).ok());
  ASSERT_TRUE(store.Set("k", Bytes("bc")).ok());
  EXPECT_EQ(*store.Get("k"), Bytes("bc"));
}

TEST(InMemoryStoreTest, WaitReturnsWhenAnotherThreadSets) {
  InMemoryStore store;
  std::thread setter([&] {
    absl::SleepFor(absl::Milliseconds(50));
    EXPECT_TRUE(store.Set("a", Bytes("1")).ok());
    EXPECT_TRUE(store.Set("b", Bytes("2")).ok());
  });
  EXPECT_TRUE(store.Wait({"a", "b"}, absl::Seconds(10)).ok());
  setter.join();
}

TEST(InMemoryStoreTest, WaitTimesOutNamingTheMissingKey) {
  InMemoryStore store;
  ASSERT_TRUE(store.Set("a", Bytes("1")).ok());
  const absl::Time start = absl::Now();
  absl::Status s = store.Wait({"a", "missing"}, absl::Milliseconds(100));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(s.message().find("missing"), absl::string_view::npos) << s;
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(90));
}

TEST(InMemoryStoreTest, AddIsAtomicAcrossThreads) {
  InMemoryStore store;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) ASSERT_TRUE(store.Add("n", 1).ok());
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(*store.Add("n", 0), 4000);
  EXPECT_EQ(*store.Get("n"), Bytes("4000"));
  ASSERT_TRUE(store.Set("text", Bytes("x")).ok());
  EXPECT_EQ(store.Add("text", 1).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace zeroshard
