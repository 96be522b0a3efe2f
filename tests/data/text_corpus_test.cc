// TextCorpus: files and directories, binary skipping, the validation split,
// errors naming the path, and the default data paths on this machine.
#include "worker/data/text_corpus.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "tests/support/subprocess.h"

namespace zeroshard {
namespace {

void Write(const std::string& path, const std::string& data) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << data;
}

TEST(TextCorpusTest, DirectoryIsWalkedInSortedOrderSkippingBinary) {
  const std::string dir = testing::MakeTempDir("corpus");
  Write(dir + "/b.txt", "bbbb\n");
  Write(dir + "/a/z.py", "print('z')\n");
  Write(dir + "/a/bin.pyc", std::string("\x00\x01\x02zz", 5));
  Write(dir + "/c.dat", std::string(200, '\x01') + "text");  // Control bytes: binary.
  Write(dir + "/empty.txt", "");
  absl::StatusOr<TextCorpus> c = TextCorpus::Load({dir});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->skipped_binary_files(), 2);
  ASSERT_EQ(c->files().size(), 2u);
  EXPECT_EQ(c->files()[0], dir + "/a/z.py");
  const std::string all =
      std::string(c->split(Split::kTrain)) + std::string(c->split(Split::kValidation));
  EXPECT_EQ(all, "print('z')\nbbbb\n");
}

TEST(TextCorpusTest, ValidationIsTheTailAndDisjoint) {
  const std::string dir = testing::MakeTempDir("corpus");
  std::string text;
  for (int i = 0; i < 1000; ++i) text += static_cast<char>('a' + i % 26);
  Write(dir + "/t.txt", text);
  CorpusOptions opt;
  opt.validation_fraction = 0.1;
  absl::StatusOr<TextCorpus> c = TextCorpus::Load({dir + "/t.txt"}, opt);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->split(Split::kTrain), text.substr(0, 900));
  EXPECT_EQ(c->split(Split::kValidation), text.substr(900));
  opt.max_bytes = 100;  // Truncates: the split follows the bytes kept.
  c = TextCorpus::Load({dir + "/t.txt"}, opt);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->total_bytes(), 100);
  EXPECT_EQ(c->split(Split::kValidation).size(), 10u);
}

TEST(TextCorpusTest, ErrorsNameThePath) {
  absl::StatusOr<TextCorpus> c = TextCorpus::Load({"/nonexistent/zeroshard-data"});
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(c.status().message().find("/nonexistent/zeroshard-data"), std::string::npos);
  const std::string dir = testing::MakeTempDir("corpus_empty");
  c = TextCorpus::Load({dir});
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find(dir), std::string::npos);
  Write(dir + "/x.bin", std::string("\x00\x00", 2));
  c = TextCorpus::Load({dir});
  EXPECT_NE(c.status().message().find("1 binary"), std::string::npos) << c.status();
  EXPECT_EQ(TextCorpus::Load({}).status().code(), absl::StatusCode::kInvalidArgument);
  CorpusOptions opt;
  opt.validation_fraction = 0.0;
  EXPECT_NE(TextCorpus::Load({dir}, opt).status().message().find("validation_fraction"),
            std::string::npos);
}

TEST(TextCorpusTest, DefaultPathsHoldRealText) {
  const std::vector<std::string> paths = DefaultDataPaths();
  if (paths.empty()) GTEST_SKIP() << "neither /usr/lib/python3.* nor /usr/share/doc exists";
  CorpusOptions opt;
  opt.max_bytes = 1 << 20;  // Enough to check, quick to read.
  absl::StatusOr<TextCorpus> c = TextCorpus::Load(paths, opt);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->total_bytes(), 1 << 20);
  EXPECT_GT(c->split(Split::kValidation).size(), 1000u);
}

}  // namespace
}  // namespace zeroshard
