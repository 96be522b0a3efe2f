// Checkpoint data chunks (ShardChunk and RangeChunk in
// proto/zeroshard/v1/checkpoint.proto) on the wire without copying their
// data into or out of a protobuf message.
//
// The generated message types hold `data` in a std::string: a sender copies
// the bytes into it and gRPC copies them again into its send buffer; a
// receiver's parse copies them out of the received slices into the string.
// At a ~1 MiB chunk that is two memory passes per side that do nothing. These
// types carry the same wire bytes with the data as gRPC slices:
//
//   OutgoingChunk<Header>: `header` holds every field but the data (its data
//     field left empty); `data` is a grpc::Slice that is referenced, not
//     copied (a slice over the caller's memory, or one a server read a file
//     into). Serialises to the header's fields followed by the data field, so
//     a peer using the generated message reads it as usual.
//   IncomingChunk<Header>: parses the wire bytes of the full message. Every
//     field but the data is merged into `header()` exactly as the generated
//     parser would (unknown fields kept, the last occurrence wins); the data
//     stays in the received buffer, as `pieces()` in order.
//
// Used through gRPC's SerializationTraits (below): a ClientWriter, a
// ClientReader or a server handler typed on these structs moves them. A
// malformed message fails to parse with INTERNAL, as a generated message's
// parse failure does.
//
// Thread safety: none inside an object; distinct objects are independent.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "google/protobuf/message_lite.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "grpcpp/support/status.h"

namespace zeroshard {

// `Header` is a generated message with a bytes field named `data`.
template <class Header>
struct OutgoingChunk {
  Header header;     // Every field but data; header.data() must be empty.
  grpc::Slice data;  // The data field's bytes, referenced.
};

template <class Header>
class IncomingChunk {
 public:
  IncomingChunk() = default;
  // Not copyable: pieces() may point into slices this object holds.
  IncomingChunk(const IncomingChunk&) = delete;
  IncomingChunk& operator=(const IncomingChunk&) = delete;

  const Header& header() const { return header_; }
  // The data field's bytes, in order: views into the received buffer, valid
  // while this object lives and until the next parse into it.
  const std::vector<absl::string_view>& pieces() const { return pieces_; }
  size_t data_size() const { return data_size_; }

  // The parse behind SerializationTraits<IncomingChunk<Header>>::Deserialize.
  // Takes over `buffer` (left empty, also on failure, as gRPC expects).
  grpc::Status ParseFrom(grpc::ByteBuffer* buffer);

 private:
  Header header_;
  grpc::ByteBuffer buffer_;
  std::vector<grpc::Slice> slices_;
  std::vector<absl::string_view> pieces_;
  size_t data_size_ = 0;
};

// Slices over memory the caller owns, for OutgoingChunk::data, and a wait
// until gRPC has let go of all of them. A Write returns once the transport
// has taken the bytes into its send queue, not once they are on the
// socket, and a stream that fails (deadline, cancel, a server error) can
// end with bytes still queued: the memory must stay valid until Wait
// returns. Thread-safe.
class BorrowedSlices {
 public:
  BorrowedSlices() = default;
  BorrowedSlices(const BorrowedSlices&) = delete;
  BorrowedSlices& operator=(const BorrowedSlices&) = delete;
  ~BorrowedSlices() { Wait(); }

  // A slice over [data, data + size), not copied, counted until released.
  grpc::Slice Borrow(const void* data, size_t size);
  // Blocks until every slice Borrow made is released. Call it after the
  // call that used them is finished and destroyed (its objects hold refs).
  void Wait();

 private:
  static void Release(void* self);
  bool AllReleased() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return live_ == 0; }

  mutable absl::Mutex mu_;
  int64_t live_ ABSL_GUARDED_BY(mu_) = 0;
};

namespace chunk_frame_internal {

// Serialises `header` (data field empty) and then field `data_field`
// (length-delimited) holding `data`, into `out`: two slices, the data's
// referenced.
grpc::Status Serialize(const google::protobuf::MessageLite& header, int data_field,
                       const grpc::Slice& data, grpc::ByteBuffer* out);

// Parses the message in `in`: field `data_field` (its last occurrence) is
// located, not copied; every other field is re-encoded and parsed into
// `header`. On success `keep` owns the buffer, `slices` its slices and
// `pieces` views of the data within them.
grpc::Status Parse(grpc::ByteBuffer* in, int data_field, google::protobuf::MessageLite* header,
                   grpc::ByteBuffer* keep, std::vector<grpc::Slice>* slices,
                   std::vector<absl::string_view>* pieces, size_t* data_size);

}  // namespace chunk_frame_internal

template <class Header>
grpc::Status IncomingChunk<Header>::ParseFrom(grpc::ByteBuffer* buffer) {
  return chunk_frame_internal::Parse(buffer, Header::kDataFieldNumber, &header_, &buffer_, &slices_,
                                     &pieces_, &data_size_);
}

}  // namespace zeroshard

namespace grpc {

template <class Header>
class SerializationTraits<zeroshard::OutgoingChunk<Header>, void> {
 public:
  static Status Serialize(const zeroshard::OutgoingChunk<Header>& msg, ByteBuffer* bb,
                          bool* own_buffer) {
    *own_buffer = true;
    return zeroshard::chunk_frame_internal::Serialize(msg.header, Header::kDataFieldNumber,
                                                      msg.data, bb);
  }
};

template <class Header>
class SerializationTraits<zeroshard::IncomingChunk<Header>, void> {
 public:
  static Status Deserialize(ByteBuffer* buffer, zeroshard::IncomingChunk<Header>* msg) {
    return msg->ParseFrom(buffer);
  }
};

}  // namespace grpc
