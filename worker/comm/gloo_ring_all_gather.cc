#include "worker/comm/gloo_ring_all_gather.h"

#include <algorithm>
#include <cstring>

#include "gloo/transport/unbound_buffer.h"

namespace zeroshard {

// How it works (pipelined ring all-gather).
// Rank r sends to next = r + 1 and receives from prev = r - 1. In step
// s = 0 .. N-2 it sends block (r - s) mod N and receives block
// (r - s - 1) mod N, which is the block it sends in step s + 1; after N - 1
// steps every block has reached every rank, each rank having sent and
// received (N-1)/N of the output (the bus-bandwidth optimum).
// Each block travels as segments; message (s, k) takes slot
// args.slot + s * segments + k. Every receive is posted up front, and since
// prev sends in (s, k) order over one TCP connection, the i-th completed
// receive is message i: segment k of step s is forwarded as step s + 1's as
// soon as it has landed.
namespace {

int64_t Mod(int64_t a, int64_t n) { return ((a % n) + n) % n; }

// Copies args.own to its place in the output unless it is null or there.
void CopyOwnBlock(const RingAllGatherArgs& args, int rank) {
  char* place = static_cast<char*>(args.out) + rank * args.block_bytes;
  if (args.own != nullptr && args.own != place) std::memmove(place, args.own, args.block_bytes);
}

// Whether args.own can be sent from where it lies while the output fills:
// it is not in place and shares no byte with the output. Otherwise it is
// copied first and sent in place.
bool SendFromOwn(const RingAllGatherArgs& args, int world_size, int rank) {
  const char* out = static_cast<const char*>(args.out);
  if (args.own == nullptr || args.own == out + rank * args.block_bytes) return false;
  return BytesApart(args.own, args.block_bytes, out, world_size * args.block_bytes);
}

}  // namespace

void RingAllGather(const GlooLinks& links, const RingAllGatherArgs& args) {
  const int n = links.size(), r = links.rank();
  if (n == 1 || args.block_bytes == 0) {
    CopyOwnBlock(args, r);
    return;
  }
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  const int64_t segments = RingSegments(args.block_bytes);
  const size_t block = args.block_bytes;
  auto seg_len = [&](int64_t k) {
    return std::min(kRingSegmentBytes, block - k * kRingSegmentBytes);
  };
  auto offset = [&](int64_t b, int64_t k) { return b * block + k * kRingSegmentBytes; };
  auto slot = [&](int s, int64_t k) { return args.slot + s * segments + k; };
  // One buffer over the output per direction's context (the same memory),
  // and one over our own block where it is not yet in place.
  const bool staged = SendFromOwn(args, n, r);
  if (!staged) CopyOwnBlock(args, r);  // In place already, or overlapping.
  auto in = links.Edge(prev, r)->createUnboundBuffer(args.out, block * n);
  auto out = links.Edge(r, next)->createUnboundBuffer(args.out, block * n);
  // Gloo only reads a send buffer.
  auto own = staged ? links.Edge(r, next)->createUnboundBuffer(const_cast<void*>(args.own), block)
                    : nullptr;
  const PendingWaitScope scope(args.waits, {in.get(), out.get(), own.get()});
  const OpDeadline deadline(args.timeout);
  for (int s = 0; s < n - 1; ++s) {
    const int64_t b = Mod(r - s - 1, n);
    for (int64_t k = 0; k < segments; ++k) in->recv(prev, slot(s, k), offset(b, k), seg_len(k));
  }
  // Step 0 sends our block: from `own` (block 0 of it) or in place.
  gloo::transport::UnboundBuffer* const first = staged ? own.get() : out.get();
  const int64_t first_block = staged ? 0 : r;
  for (int64_t k = 0; k < segments; ++k) {
    first->send(next, slot(0, k), offset(first_block, k), seg_len(k));
  }
  if (staged) CopyOwnBlock(args, r);  // While step 0 is on the wire.
  for (int s = 0; s < n - 1; ++s) {
    const int64_t b = Mod(r - s - 1, n);
    for (int64_t k = 0; k < segments; ++k) {
      ThrowIfWaitAborted(in->waitRecv(deadline.Remaining()), "all-gather recv");
      if (s + 1 < n - 1) out->send(next, slot(s + 1, k), offset(b, k), seg_len(k));
    }
  }
  for (int64_t i = 0; i < (n - 1) * segments; ++i) {
    gloo::transport::UnboundBuffer* const sent = i < segments ? first : out.get();
    ThrowIfWaitAborted(sent->waitSend(deadline.Remaining()), "all-gather send");
  }
}

}  // namespace zeroshard
