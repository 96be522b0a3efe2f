#include "cli/link_measure.h"

#include <algorithm>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "worker/comm/communicator_factory.h"
#include "worker/comm/in_memory_store.h"

namespace zeroshard::cli {
namespace {

constexpr int kRanks = 2;
constexpr int64_t kCount = int64_t{4} << 20;  // fp32 per rank: 16 MiB in, 32 MiB out.
constexpr int kIterations = 5;                // After one warm-up.

absl::StatusOr<double> Rank(const std::string& backend, InMemoryStore& store, int rank) {
  ZS_ASSIGN_OR_RETURN(
      std::unique_ptr<Communicator> comm,
      CreateCommunicator(backend, store, "link/", rank, kRanks, {"127.0.0.1", absl::Seconds(30)}));
  std::vector<float> send(kCount, 1.0f), recv(kCount * kRanks);
  absl::Time start;
  for (int i = 0; i <= kIterations; ++i) {
    if (i == 1) start = absl::Now();
    ZS_RETURN_IF_ERROR(
        comm->AllGather(send.data(), recv.data(), kCount, DType::kFp32, {absl::Seconds(30)})
            ->Wait(absl::Seconds(30)));
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start) / kIterations;
  const double bytes = static_cast<double>(kCount) * 4 * kRanks;
  return bytes * (kRanks - 1) / kRanks / seconds;
}

}  // namespace

absl::StatusOr<double> MeasureLoopbackBusBandwidth(const std::string& backend) {
  if (backend != "gloo" && backend != "shm") {
    return absl::InvalidArgumentError(
        absl::StrCat("link backend '", backend, "' (expected gloo or shm)"));
  }
  InMemoryStore store;
  std::vector<absl::StatusOr<double>> results(kRanks, 0.0);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] { results[r] = Rank(backend, store, r); });
  }
  for (std::thread& t : threads) t.join();
  for (const auto& r : results) ZS_RETURN_IF_ERROR(r.status());
  return std::min(*results[0], *results[1]);
}

}  // namespace zeroshard::cli
