#include "worker/comm/gloo_ring_reduce_scatter.h"

#include <vector>

#include "common/status_macros.h"
#include "gloo/common/error.h"
#include "gloo/transport/unbound_buffer.h"
#include "worker/comm/reduce_math.h"

namespace zeroshard {

// How it works (ring reduce-scatter).
// The input is world_size blocks of `count` elements; rank r must end with
// block r reduced over all ranks. Ranks form a ring: each sends to `next`
// (r+1) and receives from `prev` (r-1). In step s = 0 .. N-2, rank r sends its
// partial of block (r - s - 1) mod N to next and receives prev's partial of
// block (r - s - 2) mod N, which it reduces with its own copy of that block.
// That block then holds s + 2 ranks' contributions and is what r sends in
// step s + 1. After N - 1 steps the block received last is (r - N) mod N = r,
// holding every rank's contribution. Each rank sends and receives
// (N-1)/N of the input, which is the bus-bandwidth optimum.
//
// `outgoing` holds what this rank sends in the current step, `incoming` what
// arrives; after the exchange incoming becomes outgoing for the next step
// (a swap, no copy). Partials are fp32 so bf16 rounds once, at the end.
namespace {

int64_t Mod(int64_t a, int64_t n) { return ((a % n) + n) % n; }

void ThrowIfAborted(bool ok, const char* what) {
  if (!ok) throw ::gloo::IoException(std::string("ring reduce-scatter ") + what + " aborted");
}

}  // namespace

void RingReduceScatter(const std::shared_ptr<gloo::Context>& context,
                       const RingReduceScatterArgs& args) {
  const int world = context->size;
  const int rank = context->rank;
  const int64_t count = args.count;
  const int64_t elem = DTypeSize(args.dtype);
  const char* send = static_cast<const char*>(args.send);
  auto block_of = [&](int64_t b) { return send + b * count * elem; };

  std::vector<float> outgoing(count);
  std::vector<float> incoming(count);
  std::vector<float> own(count);
  if (world == 1) {
    ToFloat(block_of(0), args.dtype, outgoing.data(), count);
    FromFloat(outgoing.data(), args.dtype, args.recv, count);
    return;
  }
  const int next = (rank + 1) % world;
  const int prev = (rank + world - 1) % world;
  const size_t bytes = static_cast<size_t>(count) * sizeof(float);
  const auto deadline = std::chrono::steady_clock::now() + args.timeout;
  auto remaining = [&] {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    // Zero would mean "no wait"; 1 ms still times out promptly.
    return left.count() > 0 ? left : std::chrono::milliseconds(1);
  };

  ToFloat(block_of(Mod(rank - 1, world)), args.dtype, outgoing.data(), count);
  for (int step = 0; step < world - 1; ++step) {
    auto out_buf = context->createUnboundBuffer(outgoing.data(), bytes);
    auto in_buf = context->createUnboundBuffer(incoming.data(), bytes);
    in_buf->recv(prev, args.slot);
    out_buf->send(next, args.slot);
    // Convert our own copy of the arriving block while the bytes travel.
    const int64_t block = Mod(rank - step - 2, world);
    ToFloat(block_of(block), args.dtype, own.data(), count);
    ThrowIfAborted(in_buf->waitRecv(remaining()), "recv");
    ThrowIfAborted(out_buf->waitSend(remaining()), "send");
    ReduceInto(incoming.data(), own.data(), count, args.op);
    outgoing.swap(incoming);
  }
  // The last block reduced is block `rank` (see above); it is in `outgoing`.
  FromFloat(outgoing.data(), args.dtype, args.recv, count);
}

}  // namespace zeroshard
