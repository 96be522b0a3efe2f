// Token files (worker/data/token_file.h) and the corpus over them: llm.c
// shards of both versions and .npy arrays read back as written; a wrong
// magic, a truncated body, a 2-D or float .npy, and an id outside the
// vocabulary are errors naming the file and the place; the corpus samples a
// token file's ids and refuses text mixed with tokens.
#include "worker/data/token_file.h"

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/subprocess.h"
#include "worker/data/batch_sampler.h"
#include "worker/data/text_corpus.h"

namespace zeroshard {
namespace {

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::vector<int32_t> Ramp(int n, int32_t scale) {
  std::vector<int32_t> v(n);
  for (int i = 0; i < n; ++i) v[i] = (i * scale) % 50000;
  return v;
}

// Writes ids with TokenFileWriter and returns the path.
std::string WriteShard(const std::string& dir, const std::string& name,
                       const std::vector<int32_t>& ids, int64_t vocab) {
  const std::string path = dir + "/" + name;
  absl::StatusOr<TokenFileWriter> w = TokenFileWriter::Open(path, vocab);
  EXPECT_TRUE(w.ok()) << w.status();
  EXPECT_TRUE(w->Append(ids).ok());
  EXPECT_TRUE(w->Close().ok());
  return path;
}

std::string Npy(const std::string& descr, const std::string& shape, const std::string& body) {
  std::string header =
      "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  return out + header + body;
}

TEST(TokenFile, LlmcShardsOfBothVersionsRoundTrip) {
  const std::string dir = testing::MakeTempDir("token_file");
  const std::vector<int32_t> ids = Ramp(1000, 37);
  for (int64_t vocab : {int64_t{50257}, int64_t{128256}}) {
    const std::string path = WriteShard(dir, "s.bin", ids, vocab);
    std::ifstream in(path, std::ios::binary);
    int32_t header[3];
    in.read(reinterpret_cast<char*>(header), sizeof(header));
    EXPECT_EQ(header[0], vocab <= 65536 ? kLlmcMagicU16 : kLlmcMagicU32);
    EXPECT_EQ(header[1], vocab <= 65536 ? 1 : 7);
    EXPECT_EQ(header[2], 1000);
    absl::StatusOr<TokenFile> f = ReadTokenFile(path, vocab);
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_EQ(f->width, vocab <= 65536 ? 2 : 4);
    ASSERT_EQ(f->count(), 1000);
    for (int i = 0; i < 1000; ++i) ASSERT_EQ(f->at(i), static_cast<uint32_t>(ids[i]));
    EXPECT_TRUE(LooksLikeTokenFile(path));
  }
}

TEST(TokenFile, NpyOfUint16AndUint32) {
  const std::string dir = testing::MakeTempDir("token_npy");
  const uint16_t a[3] = {1, 65535, 7};
  const uint32_t b[2] = {70000, 3};
  WriteBytes(dir + "/a.npy", Npy("<u2", "(3,)", std::string(reinterpret_cast<const char*>(a), 6)));
  WriteBytes(dir + "/b.npy", Npy("<u4", "(2,)", std::string(reinterpret_cast<const char*>(b), 8)));
  absl::StatusOr<TokenFile> fa = ReadTokenFile(dir + "/a.npy");
  ASSERT_TRUE(fa.ok()) << fa.status();
  EXPECT_EQ(fa->count(), 3);
  EXPECT_EQ(fa->at(1), 65535u);
  absl::StatusOr<TokenFile> fb = ReadTokenFile(dir + "/b.npy");
  ASSERT_TRUE(fb.ok()) << fb.status();
  EXPECT_EQ(fb->at(0), 70000u);
}

// Each bad file's error names the file and says what is wrong.
TEST(TokenFile, BadFilesNameTheFileAndThePlace) {
  const std::string dir = testing::MakeTempDir("token_bad");
  const std::string good = WriteShard(dir, "good.bin", Ramp(100, 3), 50257);
  std::string bytes;
  {
    std::ifstream in(good, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::string magic = bytes;
  magic[0] = 'X';
  WriteBytes(dir + "/magic.bin", magic);
  WriteBytes(dir + "/short.bin", bytes.substr(0, bytes.size() - 10));
  WriteBytes(dir + "/header.bin", bytes.substr(0, 100));
  WriteBytes(dir + "/2d.npy", Npy("<u2", "(2, 1)", std::string(4, '\0')));
  WriteBytes(dir + "/float.npy", Npy("<f4", "(1,)", std::string(4, '\0')));
  const std::pair<std::string, std::string> cases[] = {{"magic.bin", "magic"},
                                                       {"short.bin", "truncated"},
                                                       {"header.bin", "header truncated"},
                                                       {"2d.npy", "not 1-D"},
                                                       {"float.npy", "dtype"}};
  for (const auto& [name, what] : cases) {
    absl::StatusOr<TokenFile> f = ReadTokenFile(dir + "/" + name);
    ASSERT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_NE(f.status().message().find(dir + "/" + name), std::string::npos) << f.status();
    EXPECT_NE(f.status().message().find(what), std::string::npos) << f.status();
  }
  absl::StatusOr<TokenFile> f = ReadTokenFile(good, 250);  // Ramp(100, 3) reaches 297.
  ASSERT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(f.status().message().find("token 84 is 252"), std::string::npos) << f.status();
}

TEST(TokenFile, CorpusSamplesTheFilesIdsAndRefusesMixing) {
  const std::string dir = testing::MakeTempDir("token_corpus");
  const std::vector<int32_t> ids = Ramp(5000, 7919);
  const std::string shard = WriteShard(dir, "a.bin", ids, 50257);
  absl::StatusOr<TextCorpus> c = TextCorpus::Load({shard}, {.vocab_size = 50257});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->token_width(), 2);
  const TokenView train = c->tokens(Split::kTrain);
  EXPECT_EQ(train.count + c->tokens(Split::kValidation).count, 5000);
  BatchSampler sampler(*c, Split::kTrain, 1);
  std::vector<int32_t> in(2 * 16), out(2 * 16);
  ASSERT_TRUE(sampler.FillBatch(3, 0, 2, 16, in.data(), out.data()).ok());
  for (int s = 0; s < 2; ++s) {
    const int64_t at = sampler.SampleOffset(3, s, 16);
    for (int t = 0; t < 16; ++t) {
      ASSERT_EQ(in[s * 16 + t], ids[at + t]);
      ASSERT_EQ(out[s * 16 + t], ids[at + t + 1]);
    }
  }
  WriteBytes(dir + "/b.txt", "some text here");
  absl::StatusOr<TextCorpus> mixed = TextCorpus::Load({dir});
  ASSERT_EQ(mixed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(mixed.status().message().find("b.txt holds text"), std::string::npos) << mixed.status();
}

}  // namespace
}  // namespace zeroshard
