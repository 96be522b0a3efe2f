// The Hugging Face GPT-2 mapping (server/checkpoint/hf_gpt2_layout.h) on a
// hand-written small case, and ExportHfGpt2 end to end over a sharded
// checkpoint of the tiny model: every exported tensor equals the seeded
// master values, indexed by hand from the unit's flat state ([out, in]
// transposed to Conv1D's [in, out]), not through the mapping code.
#include "server/checkpoint/hf_gpt2_layout.h"

#include <fstream>

#include "common/formats/safetensors.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/checkpoint/checkpoint_export.h"
#include "server/checkpoint/checkpoint_store.h"
#include "tests/server/checkpoint/checkpoint_test_util.h"
#include "tests/support/subprocess.h"

namespace zeroshard::testing {
namespace {

using server::HfTensor;

TEST(HfGpt2LayoutTest, TransposeOfATwoByThree) {
  const float src[] = {1, 2, 3, 4, 5, 6};  // [[1,2,3],[4,5,6]]
  float dst[6] = {};
  server::TransposeInto(src, 2, 3, dst);
  EXPECT_EQ(std::vector<float>(dst, dst + 6), (std::vector<float>{1, 4, 2, 5, 3, 6}));
}

TEST(HfGpt2LayoutTest, OneLayerNamesShapesAndLayouts) {
  const ModelConfig c = Gpt2Config(5, 1, 4, 2, 3);  // vocab 5, 1 layer, C 4, 2 heads, ctx 3.
  struct Want {
    const char* hf;
    const char* zs;
    std::vector<int64_t> shape;
    bool transpose;
  };
  const std::vector<Want> want = {
      {"transformer.wte.weight", "wte", {5, 4}, false},
      {"transformer.wpe.weight", "wpe", {3, 4}, false},
      {"transformer.h.0.ln_1.weight", "block.0.ln_1.weight", {4}, false},
      {"transformer.h.0.ln_1.bias", "block.0.ln_1.bias", {4}, false},
      {"transformer.h.0.attn.c_attn.weight", "block.0.attn.qkv.weight", {4, 12}, true},
      {"transformer.h.0.attn.c_attn.bias", "block.0.attn.qkv.bias", {12}, false},
      {"transformer.h.0.attn.c_proj.weight", "block.0.attn.proj.weight", {4, 4}, true},
      {"transformer.h.0.attn.c_proj.bias", "block.0.attn.proj.bias", {4}, false},
      {"transformer.h.0.ln_2.weight", "block.0.ln_2.weight", {4}, false},
      {"transformer.h.0.ln_2.bias", "block.0.ln_2.bias", {4}, false},
      {"transformer.h.0.mlp.c_fc.weight", "block.0.mlp.fc.weight", {4, 16}, true},
      {"transformer.h.0.mlp.c_fc.bias", "block.0.mlp.fc.bias", {16}, false},
      {"transformer.h.0.mlp.c_proj.weight", "block.0.mlp.proj.weight", {16, 4}, true},
      {"transformer.h.0.mlp.c_proj.bias", "block.0.mlp.proj.bias", {4}, false},
      {"transformer.ln_f.weight", "ln_f.weight", {4}, false},
      {"transformer.ln_f.bias", "ln_f.bias", {4}, false},
  };
  const std::vector<HfTensor> got = server::HfGpt2Tensors(c);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].hf_name, want[i].hf) << i;
    EXPECT_EQ(got[i].source, want[i].zs) << i;
    EXPECT_EQ(got[i].shape, want[i].shape) << want[i].hf;
    EXPECT_EQ(got[i].transpose, want[i].transpose) << want[i].hf;
  }
  // 2 + 12 per layer + 2: GPT2LMHeadModel's 28 stored tensors at 2 layers.
  EXPECT_EQ(server::HfGpt2Tensors(*ModelPreset("tiny")).size(), 28u);
}

TEST(HfGpt2LayoutTest, ConfigJsonDescribesTheModel) {
  const nlohmann::json j = nlohmann::json::parse(server::HfGpt2ConfigJson(*ModelPreset("tiny")));
  EXPECT_EQ(j.at("model_type"), "gpt2");
  EXPECT_EQ(j.at("architectures")[0], "GPT2LMHeadModel");
  EXPECT_EQ(j.at("vocab_size"), 256);
  EXPECT_EQ(j.at("n_layer"), 2);
  EXPECT_EQ(j.at("n_embd"), 32);
  EXPECT_EQ(j.at("n_head"), 2);
  EXPECT_EQ(j.at("n_positions"), 16);
  EXPECT_EQ(j.at("activation_function"), "gelu_new");
  EXPECT_EQ(j.at("layer_norm_epsilon"), 1e-5);
  EXPECT_EQ(j.at("tie_word_embeddings"), true);
  for (const char* d : {"resid_pdrop", "embd_pdrop", "attn_pdrop"}) {
    EXPECT_EQ(j.at(d), 0.0) << d;
  }
}

TEST(HfGpt2LayoutTest, ModelOfJobAndPlanChecks) {
  EXPECT_EQ(server::ModelConfigOfJob(R"({"model":"tiny","steps":3})")->n_embd, 32);
  EXPECT_EQ(server::ModelConfigOfJob(R"({"d_model":8})").status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(server::ModelConfigOfJob("not json").status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(server::ModelConfigOfJob(R"({"model":"huge"})").status().code(),
            absl::StatusCode::kNotFound);
  const ModelConfig tiny = *ModelPreset("tiny");
  EXPECT_TRUE(server::CheckPlanIsModel(*MakeShardPlan(ModelUnits(tiny), 3, 4), tiny).ok());
  std::vector<UnitSpec> units = ModelUnits(tiny);
  units[1].params[2].shape = {32, 96};  // qkv stored [in, out]: not the model's.
  const absl::Status st = server::CheckPlanIsModel(*MakeShardPlan(units, 1, 1), tiny);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("block.0.attn.qkv.weight [32, 96]"), std::string::npos) << st;
  EXPECT_FALSE(server::CheckPlanIsModel(*MakeShardPlan(OddUnits(), 1, 1), tiny).ok());
}

// A committed checkpoint of `units` at step 4 over 3 ranks, with the given
// job config; returns the directory.
std::string WriteCheckpoint(const std::vector<UnitSpec>& units, const ModelState& state,
                            const std::string& job_json) {
  const std::string dir = MakeTempDir("hf_export");
  const ShardPlan plan = *MakeShardPlan(units, 3, 4);
  auto store = *server::CheckpointStore::Open({dir, 0, nullptr, nullptr});
  std::string id;
  for (int r = 0; r < 3; ++r) {
    v1::BeginCheckpointRequest begin = MakeBegin(plan, 4, r);
    begin.set_model_config_json(job_json);
    id = *store->Begin(begin);
  }
  for (int r = 0; r < 3; ++r) {
    for (const auto& c : RankChunks(id, plan, state, r, 100)) {
      EXPECT_TRUE(store->WriteChunk(c).ok());
    }
  }
  EXPECT_TRUE(store->Commit(id, 0)->committed());
  return dir;
}

TEST(HfGpt2ExportTest, TensorsAreTheMasterValuesInGpt2Layout) {
  const ModelConfig tiny = *ModelPreset("tiny");
  const ModelState state = RandomState(ModelUnits(tiny), 5);
  const std::string dir = WriteCheckpoint(ModelUnits(tiny), state, R"({"model":"tiny"})");
  auto r = server::ExportHfGpt2(dir, dir + "/hf");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->tensors, 28);
  EXPECT_EQ(r->bytes, ModelParamBytes(tiny));
  const std::string file = dir + "/hf/model.safetensors";
  auto info = ReadSafetensorsInfo(file);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->metadata.at("format"), "pt");
  const auto& block1 = state.at("block.1")[0];  // Flat master of unit block.1.
  // block.1 flat order: ln_1.w [32] ln_1.b [32] qkv.w [96, 32] at 64, ...
  auto c_attn = ReadSafetensorsF32(file, *info, "transformer.h.1.attn.c_attn.weight");
  ASSERT_TRUE(c_attn.ok()) << c_attn.status();
  ASSERT_EQ(c_attn->size(), 96u * 32u);
  for (int i = 0; i < 32; ++i) {    // in
    for (int o = 0; o < 96; ++o) {  // out
      ASSERT_EQ((*c_attn)[i * 96 + o], block1[64 + o * 32 + i]) << i << "," << o;
    }
  }
  // mlp.proj.weight [32, 128] follows ln_1 (64), qkv (3072 + 96), proj
  // (1024 + 32), ln_2 (64), fc (4096 + 128): at 8576.
  auto c_proj = ReadSafetensorsF32(file, *info, "transformer.h.1.mlp.c_proj.weight");
  ASSERT_TRUE(c_proj.ok()) << c_proj.status();
  for (int i = 0; i < 128; ++i) {
    for (int o = 0; o < 32; ++o) {
      ASSERT_EQ((*c_proj)[i * 32 + o], block1[8576 + o * 128 + i]) << i << "," << o;
    }
  }
  const auto& embed = state.at("embed")[0];  // wte [256, 32], wpe [16, 32], ln_f.
  auto lnf_b = ReadSafetensorsF32(file, *info, "transformer.ln_f.bias");
  ASSERT_TRUE(lnf_b.ok());
  EXPECT_EQ(*lnf_b, std::vector<float>(embed.begin() + 8192 + 512 + 32, embed.end()));
  const nlohmann::json cfg = nlohmann::json::parse(std::ifstream(dir + "/hf/config.json"));
  EXPECT_EQ(cfg.at("n_layer"), 2);
}

TEST(HfGpt2ExportTest, RefusesACheckpointThatIsNotTheModel) {
  const std::string dir =
      WriteCheckpoint(OddUnits(), RandomState(OddUnits(), 2), R"({"model":"tiny"})");
  auto r = server::ExportHfGpt2(dir, dir + "/hf");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_EQ(r.status().message().find('\n'), std::string::npos);
  EXPECT_FALSE(std::ifstream(dir + "/hf/model.safetensors").good());
  const std::string nameless =
      WriteCheckpoint(OddUnits(), RandomState(OddUnits(), 2), R"({"d_model":8})");
  auto n = server::ExportHfGpt2(nameless, nameless + "/hf");
  EXPECT_NE(n.status().message().find("names no model preset"), std::string::npos) << n.status();
}

}  // namespace
}  // namespace zeroshard::testing
