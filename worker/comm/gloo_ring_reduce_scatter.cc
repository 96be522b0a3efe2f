#include "worker/comm/gloo_ring_reduce_scatter.h"

#include <algorithm>
#include <cstring>
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

// Messages of at most kRingSegmentBytes of fp32 (1 MiB, as Gloo's ring
// all-reduce), so reducing one segment overlaps receiving the next.
constexpr int64_t kSegmentElements = kRingSegmentBytes / sizeof(float);

int64_t Mod(int64_t a, int64_t n) { return ((a % n) + n) % n; }

// One op's state; the steps of "How it works" as its methods.
class Ring {
 public:
  Ring(const GlooLinks& links, const RingReduceScatterArgs& args, RingScratch& scratch);
  void Run();

 private:
  const char* Block(int64_t b) const { return send_ + b * args_.count * elem_; }
  const float* AsFp32(int64_t block, float* scratch) const;
  void Exchange(int step, const float* sending);
  int64_t SegBegin(int64_t k) const { return k * kSegmentElements; }
  int64_t SegLen(int64_t k) const { return std::min(kSegmentElements, args_.count - SegBegin(k)); }
  std::chrono::milliseconds Remaining() const { return deadline_.Remaining(); }
  bool RecvApartFromInput() const {
    return BytesApart(args_.recv, args_.count * elem_, send_, world_ * args_.count * elem_);
  }

  const GlooLinks& links_;
  const RingReduceScatterArgs& args_;
  RingScratch& scratch_;
  const int world_, rank_;
  const int64_t elem_;
  const bool fp32_;
  const char* const send_;
  const int64_t segments_;
  const OpDeadline deadline_;
  float* outgoing_ = nullptr;
  float* incoming_ = nullptr;
};

Ring::Ring(const GlooLinks& links, const RingReduceScatterArgs& args, RingScratch& scratch)
    : links_(links),
      args_(args),
      scratch_(scratch),
      world_(links.size()),
      rank_(links.rank()),
      elem_(DTypeSize(args.dtype)),
      fp32_(args.dtype == DType::kFp32),
      send_(static_cast<const char*>(args.send)),
      segments_((args.count + kSegmentElements - 1) / kSegmentElements),
      deadline_(args.timeout) {
  auto fit = [count = args.count](std::vector<float>& v) {
    if (static_cast<int64_t>(v.size()) < count) v.resize(count);
  };
  fit(scratch.outgoing);
  fit(scratch.incoming);
  if (!fp32_) fit(scratch.own);  // bf16 only: our block in fp32.
  outgoing_ = scratch.outgoing.data();
  incoming_ = scratch.incoming.data();
}

// Input block `block` as fp32: read in place for fp32, converted into
// `scratch` for bf16.
const float* Ring::AsFp32(int64_t block, float* scratch) const {
  if (fp32_) return reinterpret_cast<const float*>(Block(block));
  ToFloat(Block(block), args_.dtype, scratch, args_.count);
  return scratch;
}

void Ring::Run() {
  if (world_ == 1) {
    ToFloat(Block(0), args_.dtype, outgoing_, args_.count);
    FromFloat(outgoing_, args_.dtype, args_.recv, args_.count);
    return;
  }
  // fp32 skips two copies: step 0 sends straight from the input, and the
  // last step reduces straight into recv.
  const float* first = AsFp32(Mod(rank_ - 1, world_), outgoing_);
  for (int step = 0; step < world_ - 1; ++step) {
    Exchange(step, step == 0 ? first : outgoing_);
    std::swap(outgoing_, incoming_);
  }
  // The last block reduced is block `rank` (see above): fp32 wrote it to recv;
  // bf16 has it in `outgoing` and rounds it now, once.
  if (!fp32_) FromFloat(outgoing_, args_.dtype, args_.recv, args_.count);
}

// Step `step`: send `sending` to next while prev's partial arrives in
// `incoming`, reducing each segment with our own block as it lands.
void Ring::Exchange(int step, const float* sending) {
  const int next = (rank_ + 1) % world_;
  const int prev = (rank_ + world_ - 1) % world_;
  const size_t bytes = static_cast<size_t>(args_.count) * sizeof(float);
  const bool last = step == world_ - 2;
  // fp32's last step lands in recv and reduces there, where recv is apart
  // from the input: the sum is then written over bytes just received, still
  // in cache, instead of into a cold recv.
  float* landing =
      last && fp32_ && RecvApartFromInput() ? static_cast<float*>(args_.recv) : incoming_;
  // Gloo only reads a send buffer.
  auto out_buf = links_.Edge(rank_, next)->createUnboundBuffer(const_cast<float*>(sending), bytes);
  auto in_buf = links_.Edge(prev, rank_)->createUnboundBuffer(landing, bytes);
  const PendingWaitScope scope(args_.waits, {in_buf.get(), out_buf.get()});
  for (int64_t k = 0; k < segments_; ++k) {
    in_buf->recv(prev, args_.slot + k, SegBegin(k) * sizeof(float), SegLen(k) * sizeof(float));
    out_buf->send(next, args_.slot + k, SegBegin(k) * sizeof(float), SegLen(k) * sizeof(float));
  }
  // Our own contribution to the arriving block; fp32 is read in place.
  const float* mine = AsFp32(Mod(rank_ - step - 2, world_), scratch_.own.data());
  float* reduced = last && fp32_ ? static_cast<float*>(args_.recv) : incoming_;
  // Segments complete in order (one TCP connection from prev): reduce each
  // while the next one is still arriving.
  for (int64_t k = 0; k < segments_; ++k) {
    ThrowIfWaitAborted(in_buf->waitRecv(Remaining()), "recv");
    const int64_t b = SegBegin(k);
    Combine(reduced + b, landing + b, mine + b, SegLen(k), args_.op);
  }
  for (int64_t k = 0; k < segments_; ++k)
    ThrowIfWaitAborted(out_buf->waitSend(Remaining()), "send");
}

}  // namespace

void RingReduceScatter(const GlooLinks& links, const RingReduceScatterArgs& args,
                       RingScratch& scratch) {
  Ring(links, args, scratch).Run();
}

void RingShiftBytes(const GlooLinks& links, const void* send, void* recv, size_t bytes,
                    uint64_t slot, std::chrono::milliseconds timeout, PendingWaits* waits) {
  const int n = links.size(), r = links.rank();
  const int left = (r + n - 1) % n, right = (r + 1) % n;
  if (n == 1) {
    std::memcpy(recv, send, bytes);
    return;
  }
  // Gloo only reads a send buffer.
  auto out_buf = links.Edge(r, left)->createUnboundBuffer(const_cast<void*>(send), bytes);
  auto in_buf = links.Edge(right, r)->createUnboundBuffer(recv, bytes);
  const PendingWaitScope scope(waits, {in_buf.get(), out_buf.get()});
  in_buf->recv(right, slot, 0, bytes);
  out_buf->send(left, slot, 0, bytes);
  ThrowIfWaitAborted(in_buf->waitRecv(timeout), "recv");
  ThrowIfWaitAborted(out_buf->waitSend(timeout), "send");
}

}  // namespace zeroshard
