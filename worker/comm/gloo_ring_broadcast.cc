#include "worker/comm/gloo_ring_broadcast.h"

#include <algorithm>
#include <memory>

#include "gloo/transport/unbound_buffer.h"

namespace zeroshard {

// How it works. A rank's place in the chain is p = (rank - root) mod N.
// Every rank but the root receives segment k from prev into its own bytes
// at slot args.slot + k; every rank but the last (p = N - 1) sends segment k
// to next from the same bytes, the root at once, the others as soon as
// segment k has landed. prev sends in k order over one TCP connection, so
// the k-th completed receive is segment k.
void RingBroadcast(const GlooLinks& links, const RingBroadcastArgs& args) {
  const int n = links.size(), r = links.rank();
  if (n == 1 || args.bytes == 0) return;
  const int place = (r - args.root + n) % n;
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  const bool receives = place != 0, sends = place != n - 1;
  const int64_t segments = RingSegments(args.bytes);
  auto seg_offset = [](int64_t k) { return static_cast<size_t>(k) * kRingSegmentBytes; };
  auto seg_len = [&](int64_t k) { return std::min(kRingSegmentBytes, args.bytes - seg_offset(k)); };
  std::unique_ptr<gloo::transport::UnboundBuffer> in, out;
  if (receives) in = links.Edge(prev, r)->createUnboundBuffer(args.data, args.bytes);
  if (sends) out = links.Edge(r, next)->createUnboundBuffer(args.data, args.bytes);
  const PendingWaitScope scope(args.waits, {in.get(), out.get()});
  const OpDeadline deadline(args.timeout);
  if (receives) {
    for (int64_t k = 0; k < segments; ++k) in->recv(prev, args.slot + k, seg_offset(k), seg_len(k));
  }
  for (int64_t k = 0; k < segments; ++k) {
    if (receives) ThrowIfWaitAborted(in->waitRecv(deadline.Remaining()), "broadcast recv");
    if (sends) out->send(next, args.slot + k, seg_offset(k), seg_len(k));
  }
  if (!sends) return;
  for (int64_t k = 0; k < segments; ++k) {
    ThrowIfWaitAborted(out->waitSend(deadline.Remaining()), "broadcast send");
  }
}

}  // namespace zeroshard
