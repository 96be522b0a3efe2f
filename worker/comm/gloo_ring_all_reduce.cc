#include "worker/comm/gloo_ring_all_reduce.h"

#include <cstring>
#include <vector>

#include "worker/comm/gloo_ring_all_gather.h"
#include "worker/comm/reduce_math.h"

namespace zeroshard {
namespace {

// Control values: gathered from every rank, then folded in rank order.
void GatherAndFold(const GlooLinks& links, const RingAllReduceArgs& args,
                   RingAllReduceScratch& scratch) {
  const int n = links.size();
  const size_t bytes = static_cast<size_t>(args.count * DTypeSize(args.dtype));
  if (scratch.padded.size() < bytes * n) scratch.padded.resize(bytes * n);
  char* gathered = scratch.padded.data();
  RingAllGather(links, RingAllGatherArgs{gathered, bytes, args.send, args.all_gather_slot,
                                         args.timeout, args.waits});
  std::vector<const void*> blocks(n);
  for (int q = 0; q < n; ++q) blocks[q] = gathered + q * bytes;
  FoldInRankOrder(blocks, args.count, args.dtype, args.op, args.recv);
}

}  // namespace

void RingAllReduce(const GlooLinks& links, const RingAllReduceArgs& args,
                   RingAllReduceScratch& scratch) {
  const int n = links.size(), r = links.rank();
  const int64_t elem = DTypeSize(args.dtype);
  const size_t bytes = static_cast<size_t>(args.count * elem);
  if (args.count == 0) return;  // Its buffers may be null.
  if (n > 1 && IsControlDType(args.dtype)) {
    GatherAndFold(links, args, scratch);
    return;
  }
  if (args.recv != args.send) std::memmove(args.recv, args.send, bytes);
  if (n == 1) return;
  // Each rank reduces one chunk of ceil(count / n) elements; the data is
  // padded with zeros to n chunks where it is not a multiple (the padding's
  // sums and maxima are never read).
  const int64_t chunk = (args.count + n - 1) / n;
  const size_t padded_bytes = static_cast<size_t>(chunk * n * elem);
  char* data = static_cast<char*>(args.recv);
  if (padded_bytes != bytes) {
    if (scratch.padded.size() < padded_bytes) scratch.padded.resize(padded_bytes);
    std::memcpy(scratch.padded.data(), data, bytes);
    std::memset(scratch.padded.data() + bytes, 0, padded_bytes - bytes);
    data = scratch.padded.data();
  }
  char* own = data + r * chunk * elem;
  RingReduceScatter(links,
                    RingReduceScatterArgs{data, own, chunk, args.dtype, args.op,
                                          args.reduce_scatter_slot, args.timeout, args.waits},
                    scratch.ring);
  RingAllGather(links, RingAllGatherArgs{data, static_cast<size_t>(chunk * elem), own,
                                         args.all_gather_slot, args.timeout, args.waits});
  if (data != args.recv) std::memcpy(args.recv, data, bytes);
}

}  // namespace zeroshard
