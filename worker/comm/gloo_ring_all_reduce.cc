#include "worker/comm/gloo_ring_all_reduce.h"

#include <cstring>

#include "worker/comm/gloo_ring_all_gather.h"

namespace zeroshard {

void RingAllReduce(const GlooLinks& links, const RingAllReduceArgs& args,
                   RingAllReduceScratch& scratch) {
  const int n = links.size(), r = links.rank();
  const int64_t elem = DTypeSize(args.dtype);
  const size_t bytes = static_cast<size_t>(args.count * elem);
  if (args.recv != args.send) std::memmove(args.recv, args.send, bytes);
  if (n == 1 || args.count == 0) return;
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
