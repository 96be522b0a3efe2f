// The checkpoint service registered as an extra service of CoordinatorServer
// (one port for the coordinator and checkpoints): save from 2 ranks, list,
// restore at N = 1.
#include "gtest/gtest.h"
#include "server/checkpoint/checkpoint_host.h"
#include "server/rpc/coordinator_server.h"
#include "tests/server/checkpoint/checkpoint_test_util.h"
#include "tests/support/subprocess.h"
#include "worker/checkpoint/checkpoint_client.h"
#include "worker/checkpoint/reshard.h"

namespace zeroshard::testing {
namespace {

TEST(CheckpointOnCoordinatorTest, SaveListRestoreThroughTheCoordinatorPort) {
  const std::string dir = MakeTempDir("ckpt_coord");
  auto host = server::CheckpointHost::Open(dir + "/ckpt", 2);
  ASSERT_TRUE(host.ok()) << host.status();
  CoordinatorOptions o;
  o.metrics_listen = "";
  o.state_dir = dir + "/state";
  o.checkpoint_dir = dir + "/ckpt";
  auto server = CoordinatorServer::Start(o, {(*host)->service()});
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = *checkpoint::CheckpointClient::Connect((*server)->address());
  const absl::Time deadline = absl::Now() + absl::Seconds(20);

  const ShardPlan plan = *MakeShardPlan(OddUnits(), 2, 4);
  const ModelState state = RandomState(OddUnits(), 21);
  for (int r = 0; r < 2; ++r) {
    std::vector<std::vector<float>> bufs;
    bufs.reserve(plan.units.size() * 3);
    std::vector<checkpoint::UnitShardView> views;
    auto ranges = checkpoint::SaveRanges(plan, r);
    for (size_t u = 0; u < plan.units.size(); ++u) {
      const float* p[3];
      for (int k = 0; k < 3; ++k) {
        auto& b = bufs.emplace_back(static_cast<size_t>(ranges[u].length));
        for (int64_t i = 0; i < ranges[u].length; ++i)
          b[i] = At(state.at(plan.units[u].name), k, ranges[u].offset + i);
        p[k] = b.data();
      }
      views.push_back({plan.units[u].name, ranges[u], p[0], p[1], p[2]});
    }
    checkpoint::SaveMetadata m;
    m.job_id = o.core.job_id;
    m.step = 6;
    m.rank = r;
    m.stage = 3;
    m.plan = plan;
    auto res = client->Save(m, views, deadline);
    ASSERT_TRUE(res.ok()) << res.status();
    EXPECT_EQ(res->committed, r == 1);
  }
  auto list = client->List(o.core.job_id, deadline);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->checkpoints_size(), 1);
  auto info = client->GetInfo(o.core.job_id, std::nullopt, deadline);
  ASSERT_TRUE(info.ok()) << info.status();
  const ShardPlan one = *MakeShardPlan(OddUnits(), 1, 16);
  for (const UnitPlan& u : one.units) {
    std::vector<float> got(static_cast<size_t>(u.padded_numel));
    ASSERT_TRUE(client
                    ->Restore(*info, one,
                              {{u.name, v1::TENSOR_KIND_EXP_AVG, {0, u.padded_numel}, got.data()}},
                              deadline)
                    .ok());
    for (int64_t e = 0; e < u.padded_numel; ++e)
      ASSERT_EQ(got[e], At(state.at(u.name), 1, e)) << u.name << e;
  }
  (*server)->Shutdown();
}

}  // namespace
}  // namespace zeroshard::testing
