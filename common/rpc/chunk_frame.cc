#include "common/rpc/chunk_frame.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "grpcpp/support/proto_buffer_reader.h"

namespace zeroshard::chunk_frame_internal {
namespace {

namespace pio = google::protobuf::io;

constexpr uint32_t kLengthDelimited = 2;

grpc::Status ParseError(absl::string_view what) {
  return grpc::Status(grpc::StatusCode::INTERNAL, absl::StrCat("malformed chunk message: ", what));
}

// Reads a varint of at most 5 bytes (the generated parser's limit for tags
// and lengths): false at the end of the input or when a fifth byte goes
// on; `*bytes` says how many were read.
bool ReadShortVarint(pio::CodedInputStream& in, uint64_t* value, int* bytes) {
  *value = 0;
  for (*bytes = 0; *bytes < 5;) {
    uint8_t byte = 0;
    if (!in.ReadRaw(&byte, 1)) return false;
    *value |= static_cast<uint64_t>(byte & 0x7f) << (7 * (*bytes)++);
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

// Reads a tag as the generated parser does: bits beyond 32 dropped, field
// number not 0. False at the end of the input (`*end` set) or on a
// malformed tag (`*end` clear).
bool ReadTag(pio::CodedInputStream& in, uint32_t* tag, bool* end) {
  uint64_t value = 0;
  int bytes = 0;
  const bool read = ReadShortVarint(in, &value, &bytes);
  *end = !read && bytes == 0;
  *tag = static_cast<uint32_t>(value);
  return read && (*tag >> 3) != 0;
}

// Reads a length prefix as the generated parser does: at most INT_MAX - 16
// (protobuf's slop bytes; it also refuses a fifth byte of 8 or more, which
// this bound covers). False otherwise or at the end of the input.
bool ReadSize(pio::CodedInputStream& in, int* size) {
  uint64_t value = 0;
  int bytes = 0;
  if (!ReadShortVarint(in, &value, &bytes) || value > static_cast<uint64_t>(INT_MAX - 16)) {
    return false;
  }
  *size = static_cast<int>(value);
  return true;
}

// The generated parser's nesting limit (protobuf's default recursion limit).
constexpr int kMaxGroupDepth = 100;

// Copies one field (its tag already read) from `in` to `out`, re-encoded;
// false on a truncated field, an invalid wire type or an end-group tag
// without its group, as the generated parser refuses them.
bool CopyField(uint32_t tag, pio::CodedInputStream& in, pio::CodedOutputStream& out, int depth) {
  out.WriteTag(tag);
  switch (tag & 7) {
    case 3: {  // A group (an unknown field here): its fields up to its end tag.
      if (depth >= kMaxGroupDepth) return false;
      const uint32_t end_tag = (tag & ~7u) | 4;
      uint32_t t = 0;
      bool end = false;
      while (ReadTag(in, &t, &end)) {
        if (t == end_tag) {
          out.WriteTag(t);
          return true;
        }
        if (!CopyField(t, in, out, depth + 1)) return false;
      }
      return false;
    }
    case 0: {
      uint64_t v = 0;
      if (!in.ReadVarint64(&v)) return false;
      out.WriteVarint64(v);
      return true;
    }
    case 1: {
      uint64_t v = 0;
      if (!in.ReadLittleEndian64(&v)) return false;
      out.WriteLittleEndian64(v);
      return true;
    }
    case kLengthDelimited: {
      int n = 0;
      std::string bytes;
      if (!ReadSize(in, &n) || !in.ReadString(&bytes, n)) return false;
      out.WriteVarint32(static_cast<uint32_t>(n));
      out.WriteString(bytes);
      return true;
    }
    case 5: {
      uint32_t v = 0;
      if (!in.ReadLittleEndian32(&v)) return false;
      out.WriteLittleEndian32(v);
      return true;
    }
    default:
      return false;
  }
}

// Views of bytes [offset, offset + size) of `slices` taken in order.
bool ViewsOf(const std::vector<grpc::Slice>& slices, size_t offset, size_t size,
             std::vector<absl::string_view>* pieces) {
  for (const grpc::Slice& s : slices) {
    if (size == 0) break;
    if (offset >= s.size()) {
      offset -= s.size();
      continue;
    }
    const size_t n = std::min(size, s.size() - offset);
    pieces->emplace_back(reinterpret_cast<const char*>(s.begin()) + offset, n);
    size -= n;
    offset = 0;
  }
  return size == 0;
}

}  // namespace

grpc::Status Serialize(const google::protobuf::MessageLite& header, int data_field,
                       const grpc::Slice& data, grpc::ByteBuffer* out) {
  std::string head;
  if (!header.SerializeToString(&head)) return ParseError("header does not serialise");
  if (data.size() > 0) {  // proto3 leaves an empty bytes field out.
    pio::StringOutputStream stream(&head);
    pio::CodedOutputStream coded(&stream);
    coded.WriteTag((static_cast<uint32_t>(data_field) << 3) | kLengthDelimited);
    coded.WriteVarint32(static_cast<uint32_t>(data.size()));
  }
  const grpc::Slice slices[2] = {grpc::Slice(head), data};
  grpc::ByteBuffer buffer(slices, 2);
  out->Swap(&buffer);
  return grpc::Status::OK;
}

grpc::Status Parse(grpc::ByteBuffer* in, int data_field, google::protobuf::MessageLite* header,
                   grpc::ByteBuffer* keep, std::vector<grpc::Slice>* slices,
                   std::vector<absl::string_view>* pieces, size_t* data_size) {
  // gRPC leaves the received buffer to the deserialiser to free, on
  // success and on failure alike.
  absl::Cleanup free_input = [in] { in->Clear(); };
  slices->clear();
  pieces->clear();
  *data_size = 0;
  size_t data_offset = 0;
  std::string head;
  {
    grpc::ProtoBufferReader reader(in);
    if (!reader.status().ok()) return reader.status();
    pio::CodedInputStream coded(&reader);
    pio::StringOutputStream head_stream(&head);
    pio::CodedOutputStream head_out(&head_stream);
    const uint32_t data_tag = (static_cast<uint32_t>(data_field) << 3) | kLengthDelimited;
    uint32_t tag = 0;
    bool end = false;
    while (ReadTag(coded, &tag, &end)) {
      if (tag != data_tag) {
        if (!CopyField(tag, coded, head_out, 0))
          return ParseError(absl::StrCat("field ", tag >> 3));
        continue;
      }
      int n = 0;
      if (!ReadSize(coded, &n)) return ParseError("data length");
      data_offset = static_cast<size_t>(coded.CurrentPosition());
      *data_size = static_cast<size_t>(n);
      if (!coded.Skip(n)) return ParseError("data is truncated");
    }
    if (!end) return ParseError("bad tag");
  }
  if (!header->ParseFromString(head)) return ParseError("header fields");
  if (grpc::Status st = in->Dump(slices); !st.ok()) return st;
  if (!ViewsOf(*slices, data_offset, *data_size, pieces)) return ParseError("data is truncated");
  keep->Swap(in);
  return grpc::Status::OK;
}

}  // namespace zeroshard::chunk_frame_internal

namespace zeroshard {

grpc::Slice BorrowedSlices::Borrow(const void* data, size_t size) {
  if (size == 0) return grpc::Slice();  // Nothing to borrow, nothing to wait for.
  {
    absl::MutexLock lock(&mu_);
    ++live_;
  }
  // grpc_slice_new_with_user_data: Release(this) runs when the last ref goes.
  return grpc::Slice(const_cast<void*>(data), size, &BorrowedSlices::Release, this);
}

void BorrowedSlices::Release(void* self) {
  auto* slices = static_cast<BorrowedSlices*>(self);
  absl::MutexLock lock(&slices->mu_);
  --slices->live_;
}

void BorrowedSlices::Wait() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(this, &BorrowedSlices::AllReleased));
}

}  // namespace zeroshard
