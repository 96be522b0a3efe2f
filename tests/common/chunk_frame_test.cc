// Chunk frames (common/rpc/chunk_frame.h) against the generated protobuf
// messages, the reference: an OutgoingChunk serialises to exactly the bytes
// of the same ShardChunk / RangeChunk, and an IncomingChunk parses whatever
// the generated parser accepts to the same fields and data (split across any
// slices), and refuses what it refuses: every prefix of a message, random
// byte corruptions, fields in any order and repeated. And BorrowedSlices
// waits for the last reference to a borrowed slice.
#include "common/rpc/chunk_frame.h"

#include <atomic>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "google/protobuf/stubs/logging.h"
#include "gtest/gtest.h"
#include "zeroshard/v1/checkpoint.pb.h"

namespace zeroshard {
namespace {

std::string Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

v1::ShardChunk FullChunk(size_t data_bytes) {
  v1::ShardChunk c;
  c.set_checkpoint_id("step-00000007.2.abcdef");
  c.set_rank(3);
  c.set_unit("block.1");
  c.set_kind(v1::TENSOR_KIND_EXP_AVG_SQ);
  c.set_offset(123456789012);
  c.set_length(static_cast<int64_t>(data_bytes / 4));
  c.set_dtype(v1::DTYPE_FP32);
  c.set_xxhash64(0xfedcba9876543210ull);
  c.set_data(Random(data_bytes, 7));
  return c;
}

std::string BytesOf(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string out;
  for (const grpc::Slice& s : slices)
    out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

// `bytes` as a ByteBuffer of slices cut at `cuts` (sorted offsets).
grpc::ByteBuffer Sliced(const std::string& bytes, const std::vector<size_t>& cuts) {
  std::vector<grpc::Slice> slices;
  size_t from = 0;
  for (size_t cut : cuts) {
    slices.emplace_back(bytes.data() + from, cut - from);
    from = cut;
  }
  slices.emplace_back(bytes.data() + from, bytes.size() - from);
  return grpc::ByteBuffer(slices.data(), slices.size());
}

std::string DataOf(const IncomingChunk<v1::ShardChunk>& in) {
  std::string out;
  for (absl::string_view p : in.pieces()) out.append(p.data(), p.size());
  EXPECT_EQ(out.size(), in.data_size());
  return out;
}

// Parses `bytes` both ways and checks they agree: both refuse, or both
// accept with equal fields and data.
void ExpectParsesLikeGenerated(const std::string& bytes, const std::vector<size_t>& cuts) {
  v1::ShardChunk ref;
  const bool ref_ok = ref.ParseFromString(bytes);
  grpc::ByteBuffer buffer = Sliced(bytes, cuts);
  IncomingChunk<v1::ShardChunk> in;
  const grpc::Status st = in.ParseFrom(&buffer);
  ASSERT_EQ(st.ok(), ref_ok) << st.error_message() << " (" << bytes.size() << " bytes) "
                             << ::testing::PrintToString(bytes);
  if (!ref_ok) {
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INTERNAL);
    return;
  }
  EXPECT_EQ(DataOf(in), ref.data());
  v1::ShardChunk header = in.header();
  header.set_data(ref.data());
  EXPECT_EQ(header.SerializeAsString(), ref.SerializeAsString());
}

TEST(ChunkFrameTest, OutgoingIsTheGeneratedMessagesBytes) {
  for (size_t n : {0, 4, 1000, 1 << 20}) {
    const v1::ShardChunk full = FullChunk(n);
    OutgoingChunk<v1::ShardChunk> out;
    out.header = full;
    out.header.clear_data();
    out.data = grpc::Slice(full.data());
    grpc::ByteBuffer buffer;
    bool own = false;
    ASSERT_TRUE(
        grpc::SerializationTraits<OutgoingChunk<v1::ShardChunk>>::Serialize(out, &buffer, &own)
            .ok());
    EXPECT_TRUE(own);
    EXPECT_EQ(BytesOf(buffer), full.SerializeAsString()) << n << " data bytes";
  }
  v1::RangeChunk range;
  range.set_step(9);
  range.set_offset(4);
  range.set_length(3);
  range.set_xxhash64(77);
  range.set_data(Random(12, 3));
  OutgoingChunk<v1::RangeChunk> out{range, grpc::Slice(range.data())};
  out.header.clear_data();
  grpc::ByteBuffer buffer;
  bool own = false;
  ASSERT_TRUE(
      grpc::SerializationTraits<OutgoingChunk<v1::RangeChunk>>::Serialize(out, &buffer, &own).ok());
  EXPECT_EQ(BytesOf(buffer), range.SerializeAsString());
}

TEST(ChunkFrameTest, OutgoingReferencesTheDataInsteadOfCopyingIt) {
  const std::string data = Random(1 << 16, 5);
  OutgoingChunk<v1::ShardChunk> out;
  out.data = grpc::Slice(data.data(), data.size(), grpc::Slice::STATIC_SLICE);
  grpc::ByteBuffer buffer;
  bool own = false;
  ASSERT_TRUE(
      grpc::SerializationTraits<OutgoingChunk<v1::ShardChunk>>::Serialize(out, &buffer, &own).ok());
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(buffer.Dump(&slices).ok());
  ASSERT_EQ(slices.size(), 2u);
  EXPECT_EQ(reinterpret_cast<const char*>(slices[1].begin()), data.data());
}

TEST(ChunkFrameTest, BorrowedSlicesWaitUntilTheLastReferenceIsGone) {
  const std::string data = Random(4096, 2);
  auto borrowed = std::make_unique<BorrowedSlices>();
  grpc::Slice a = borrowed->Borrow(data.data(), 100);
  grpc::Slice b = borrowed->Borrow(data.data() + 100, 200);
  EXPECT_EQ(reinterpret_cast<const char*>(b.begin()), data.data() + 100);
  grpc::Slice a_again = a;  // A second reference, as a transport would hold.
  EXPECT_EQ(borrowed->Borrow(data.data(), 0).size(), 0u);
  std::atomic<bool> waited{false};
  std::thread waiter([&] {
    borrowed->Wait();
    waited = true;
  });
  a = grpc::Slice();
  b = grpc::Slice();
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_FALSE(waited) << "Wait returned while a reference was still held";
  a_again = grpc::Slice();
  waiter.join();
  EXPECT_TRUE(waited);
}

TEST(ChunkFrameTest, IncomingMatchesTheGeneratedParserAcrossSlices) {
  const std::string bytes = FullChunk(4096).SerializeAsString();
  std::mt19937 rng(11);
  ExpectParsesLikeGenerated(bytes, {});
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<size_t> cuts;
    const int n = static_cast<int>(rng() % 12);
    for (int i = 0; i < n; ++i) cuts.push_back(rng() % (bytes.size() + 1));
    std::sort(cuts.begin(), cuts.end());
    ExpectParsesLikeGenerated(bytes, cuts);
  }
  // One byte a slice: the data spans 4096 slices.
  std::vector<size_t> every;
  for (size_t i = 1; i < bytes.size(); ++i) every.push_back(i);
  ExpectParsesLikeGenerated(bytes, every);
}

TEST(ChunkFrameTest, EveryPrefixParsesOrFailsAsTheGeneratedParserDoes) {
  const std::string bytes = FullChunk(64).SerializeAsString();
  for (size_t n = 0; n <= bytes.size(); ++n) ExpectParsesLikeGenerated(bytes.substr(0, n), {n / 2});
}

TEST(ChunkFrameTest, CorruptedBytesParseOrFailAsTheGeneratedParserDoes) {
  // Corrupted string fields make protobuf log a line each; the parse result
  // is what is compared.
  google::protobuf::LogHandler* previous = google::protobuf::SetLogHandler(nullptr);
  const std::string bytes = FullChunk(32).SerializeAsString();
  std::mt19937 rng(3);
  for (int trial = 0; trial < 3000; ++trial) {
    std::string bad = bytes;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) bad[rng() % bad.size()] = static_cast<char>(rng());
    ExpectParsesLikeGenerated(bad, {rng() % (bad.size() + 1)});
  }
  google::protobuf::SetLogHandler(previous);
}

TEST(ChunkFrameTest, FieldOrderRepeatsAndUnknownFieldsAsTheGeneratedParser) {
  v1::ShardChunk a = FullChunk(16), b;
  b.set_data(Random(8, 9));  // A second data field: the last one wins.
  b.set_rank(5);
  v1::ShardChunk data_only;
  data_only.set_data(a.data());
  v1::ShardChunk rest = a;
  rest.clear_data();
  std::string unknown;
  unknown.push_back(static_cast<char>(((99 << 3 | 2) & 0x7f) | 0x80));
  unknown.push_back(static_cast<char>(99 >> 4));
  unknown += std::string("\x03xyz", 4);
  // An unknown group (field 50) holding a field-9 bytes field: not the data.
  const std::string group("\x93\x03\x08\x05\x4a\x02hi\x94\x03", 10);
  for (const std::string& bytes :
       {data_only.SerializeAsString() + rest.SerializeAsString(),  // Data first.
        a.SerializeAsString() + b.SerializeAsString(),             // Repeats.
        unknown + a.SerializeAsString() + unknown, a.SerializeAsString() + group,
        group + a.SerializeAsString(),
        a.SerializeAsString() + group.substr(0, 8),  // A group never closed.
        // Length prefixes the generated parser refuses: six bytes, a fifth
        // byte of 8 or more; and the longest it takes.
        std::string("\x0a\x82\x80\x80\x80\x80\x00"
                    "ab",
                    9),
        std::string("\x0a\x82\x80\x80\x80\x10"
                    "ab",
                    8),
        std::string("\x4a\x82\x80\x80\x80\x80\x00"
                    "ab",
                    9),
        std::string("\x4a\x82\x80\x80\x80\x10"
                    "ab",
                    8),
        std::string("\x4a\x82\x80\x80\x80\x00"
                    "ab",
                    8),
        std::string("\x4a\xef\xff\xff\xff\x07"
                    "ab",
                    8)}) {
    ExpectParsesLikeGenerated(bytes, {bytes.size() / 3});
  }
}

TEST(ChunkFrameTest, AFrameIsReusableAcrossParses) {
  IncomingChunk<v1::ShardChunk> in;
  for (size_t n : {1000, 8, 0, 300}) {
    const std::string bytes = FullChunk(n).SerializeAsString();
    grpc::ByteBuffer buffer = Sliced(bytes, {bytes.size() / 2});
    ASSERT_TRUE(in.ParseFrom(&buffer).ok());
    EXPECT_EQ(DataOf(in), FullChunk(n).data());
    EXPECT_EQ(in.header().length(), static_cast<int64_t>(n / 4));
  }
}

}  // namespace
}  // namespace zeroshard
