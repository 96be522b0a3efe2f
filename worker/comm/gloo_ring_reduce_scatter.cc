#include "worker/comm/gloo_ring_reduce_scatter.h"

#include <algorithm>
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
// Each block travels as segments with consecutive slots (args.slot + k).
namespace {

// Messages of at most 1 MiB (as Gloo's ring all-reduce), so reducing one
// segment overlaps receiving the next.
constexpr int64_t kSegmentElements = int64_t{1} << 18;

int64_t Mod(int64_t a, int64_t n) { return ((a % n) + n) % n; }

void ThrowIfAborted(bool ok, const char* what) {
  if (!ok) throw ::gloo::IoException(std::string("ring reduce-scatter ") + what + " aborted");
}

}  // namespace

void RingReduceScatter(const std::shared_ptr<gloo::Context>& context,
                       const RingReduceScatterArgs& args, RingScratch& scratch) {
  const int world = context->size;
  const int rank = context->rank;
  const int64_t count = args.count;
  const int64_t elem = DTypeSize(args.dtype);
  const bool fp32 = args.dtype == DType::kFp32;
  const char* send = static_cast<const char*>(args.send);
  auto block_of = [&](int64_t b) { return send + b * count * elem; };

  auto fit = [count](std::vector<float>& v) {
    if (static_cast<int64_t>(v.size()) < count) v.resize(count);
  };
  fit(scratch.outgoing);
  fit(scratch.incoming);
  if (!fp32) fit(scratch.own);  // bf16 only: our block in fp32.
  float* outgoing = scratch.outgoing.data();
  float* incoming = scratch.incoming.data();
  if (world == 1) {
    ToFloat(block_of(0), args.dtype, outgoing, count);
    FromFloat(outgoing, args.dtype, args.recv, count);
    return;
  }
  const int next = (rank + 1) % world;
  const int prev = (rank + world - 1) % world;
  const int64_t segments = (count + kSegmentElements - 1) / kSegmentElements;
  auto seg_begin = [&](int64_t k) { return k * kSegmentElements; };
  auto seg_len = [&](int64_t k) { return std::min(kSegmentElements, count - seg_begin(k)); };
  const auto deadline = std::chrono::steady_clock::now() + args.timeout;
  auto remaining = [&] {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    // Zero would mean "no wait"; 1 ms still times out promptly.
    return left.count() > 0 ? left : std::chrono::milliseconds(1);
  };

  // fp32 skips two copies: step 0 sends straight from the input, and the
  // last step reduces straight into recv.
  const float* first = reinterpret_cast<const float*>(block_of(Mod(rank - 1, world)));
  if (!fp32) {
    ToFloat(block_of(Mod(rank - 1, world)), args.dtype, outgoing, count);
    first = outgoing;
  }
  for (int step = 0; step < world - 1; ++step) {
    const bool last = step == world - 2;
    float* sending = step == 0 ? const_cast<float*>(first) : outgoing;  // Gloo only reads it.
    auto out_buf = context->createUnboundBuffer(sending, count * sizeof(float));
    auto in_buf = context->createUnboundBuffer(incoming, count * sizeof(float));
    for (int64_t k = 0; k < segments; ++k) {
      in_buf->recv(prev, args.slot + k, seg_begin(k) * sizeof(float), seg_len(k) * sizeof(float));
      out_buf->send(next, args.slot + k, seg_begin(k) * sizeof(float), seg_len(k) * sizeof(float));
    }
    // Our own contribution to the arriving block; fp32 is read in place.
    const int64_t block = Mod(rank - step - 2, world);
    const float* mine = reinterpret_cast<const float*>(block_of(block));
    if (!fp32) {
      ToFloat(block_of(block), args.dtype, scratch.own.data(), count);
      mine = scratch.own.data();
    }
    float* reduced = last && fp32 ? static_cast<float*>(args.recv) : incoming;
    // Segments complete in order (one TCP connection from prev): reduce each
    // while the next one is still arriving.
    for (int64_t k = 0; k < segments; ++k) {
      ThrowIfAborted(in_buf->waitRecv(remaining()), "recv");
      const int64_t b = seg_begin(k);
      Combine(reduced + b, incoming + b, mine + b, seg_len(k), args.op);
    }
    for (int64_t k = 0; k < segments; ++k) ThrowIfAborted(out_buf->waitSend(remaining()), "send");
    std::swap(outgoing, incoming);
  }
  // The last block reduced is block `rank` (see above): fp32 wrote it to recv;
  // bf16 has it in `outgoing` and rounds it now, once.
  if (!fp32) FromFloat(outgoing, args.dtype, args.recv, count);
}

}  // namespace zeroshard
