#include "worker/comm/shm_collectives.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "worker/comm/reduce_math.h"

namespace zeroshard {
namespace {

const float* SlotFloats(const ShmGroup& g, int q) {
  return reinterpret_cast<const float*>(g.slot(q));
}

// acc[i] = op over ranks 0..N-1, in order, of their slot's float at first + i.
// N >= 2: a rank alone never runs rounds (Alone below).
void ReduceSlots(const ShmGroup& g, int64_t first, int64_t n, ReduceOp op, float* acc) {
  Combine(acc, SlotFloats(g, 0) + first, SlotFloats(g, 1) + first, n, op);
  for (int q = 2; q < g.world_size(); ++q) Combine(acc, acc, SlotFloats(g, q) + first, n, op);
}

float* Scratch(ShmScratch& scratch, int64_t n) {
  if (static_cast<int64_t>(scratch.acc.size()) < n) scratch.acc.resize(n);
  return scratch.acc.data();
}

const char* At(const void* base, int64_t elements, DType dtype) {
  return static_cast<const char*>(base) + elements * DTypeSize(dtype);
}
char* At(void* base, int64_t elements, DType dtype) {
  return static_cast<char*>(base) + elements * DTypeSize(dtype);
}

// Every rank reduces the whole chunk: one round per slot of fp32.
absl::Status AllReduceOneRound(ShmGroup& g, const void* send, void* recv, int64_t count,
                               DType dtype, ReduceOp op, ShmScratch& scratch, absl::Time deadline) {
  const int64_t per = static_cast<int64_t>(g.slot_bytes() / sizeof(float));
  float* acc = Scratch(scratch, std::min(per, count));
  for (int64_t off = 0; off < count; off += per) {
    const int64_t len = std::min(per, count - off);
    ZS_RETURN_IF_ERROR(g.Round(
        deadline,
        [&](char* slot) {
          ToFloat(At(send, off, dtype), dtype, reinterpret_cast<float*>(slot), len);
        },
        [&] {
          ReduceSlots(g, 0, len, op, acc);
          FromFloat(acc, dtype, At(recv, off, dtype), len);
        }));
  }
  return absl::OkStatus();
}

// Rank r reduces segment r of each chunk, then every rank copies them all.
absl::Status AllReduceTwoRounds(ShmGroup& g, const void* send, void* recv, int64_t count,
                                DType dtype, ReduceOp op, ShmScratch& scratch,
                                absl::Time deadline) {
  const int n = g.world_size(), r = g.rank();
  const int64_t per = static_cast<int64_t>(g.slot_bytes() / sizeof(float));
  float* acc = Scratch(scratch, per / n + 1);
  for (int64_t off = 0; off < count; off += per) {
    const int64_t len = std::min(per, count - off);
    auto begin = [&](int q) { return len * q / n; };
    const int64_t mine = begin(r + 1) - begin(r);
    ZS_RETURN_IF_ERROR(g.Round(
        deadline,
        [&](char* slot) {
          ToFloat(At(send, off, dtype), dtype, reinterpret_cast<float*>(slot), len);
        },
        [&] { ReduceSlots(g, begin(r), mine, op, acc); }));
    ZS_RETURN_IF_ERROR(g.Round(
        deadline,
        [&](char* slot) {
          std::memcpy(reinterpret_cast<float*>(slot) + begin(r), acc, mine * sizeof(float));
        },
        [&] {
          for (int q = 0; q < n; ++q) {
            FromFloat(SlotFloats(g, q) + begin(q), dtype, At(recv, off + begin(q), dtype),
                      begin(q + 1) - begin(q));
          }
        }));
  }
  return absl::OkStatus();
}

// Control values (int64, fp64) in their own type, folded in rank order.
absl::Status AllReduceNative(ShmGroup& g, const void* send, void* recv, int64_t count, DType dtype,
                             ReduceOp op, absl::Time deadline) {
  const int64_t elem = DTypeSize(dtype);
  const int64_t per = static_cast<int64_t>(g.slot_bytes()) / elem;
  std::vector<const void*> slots(g.world_size());
  for (int64_t off = 0; off < count; off += per) {
    const int64_t len = std::min(per, count - off);
    ZS_RETURN_IF_ERROR(g.Round(
        deadline,
        [&](char* slot) {
          std::memcpy(slot, static_cast<const char*>(send) + off * elem, len * elem);
        },
        [&] {
          for (int q = 0; q < g.world_size(); ++q) slots[q] = g.slot(q);
          FoldInRankOrder(slots, len, dtype, op, static_cast<char*>(recv) + off * elem);
        }));
  }
  return absl::OkStatus();
}

// Rounds over `bytes` in slot-sized pieces: each copies in[off, off + len)
// into this rank's slot (when `in` is not null), then runs read(off, len).
template <typename Read>
absl::Status PieceRounds(ShmGroup& g, const char* in, size_t bytes, absl::Time deadline,
                         Read&& read) {
  for (size_t off = 0; off < bytes; off += g.slot_bytes()) {
    const size_t len = std::min(g.slot_bytes(), bytes - off);
    ZS_RETURN_IF_ERROR(g.Round(
        deadline,
        [&](char* slot) {
          if (in != nullptr) std::memcpy(slot, in + off, len);
        },
        [&] { read(off, len); }));
  }
  return absl::OkStatus();
}

// At world size 1 every collective's result is the rank's own input: a copy
// when the buffers differ (bf16 through fp32 and back is exact), no rounds.
bool Alone(const ShmGroup& g, const void* send, void* recv, size_t bytes) {
  if (g.world_size() != 1) return false;
  if (send != recv) std::memmove(recv, send, bytes);
  return true;
}

// The members of a grouped collective laid end to end, per rank: member i
// covers [start(i), start(i) + length(i)) of one virtual buffer, in units of
// `unit` bytes per element (1: elements, the element size: bytes).
class MemberStarts {
 public:
  MemberStarts(absl::Span<const CollectiveArgs> group, int64_t unit) {
    starts_.push_back(0);
    for (const CollectiveArgs& a : group) starts_.push_back(starts_.back() + a.count * unit);
  }
  int64_t total() const { return starts_.back(); }
  int64_t length(size_t i) const { return starts_[i + 1] - starts_[i]; }
  // fn(i, at, pos, n) for each member i overlapping [off, off + len): n
  // units at offset `at` of member i, offset `pos` of the range.
  template <typename Fn>
  void ForEach(int64_t off, int64_t len, Fn&& fn) const {
    size_t i = static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), off) -
                                   starts_.begin()) -
               1;
    for (; i + 1 < starts_.size() && starts_[i] < off + len; ++i) {
      const int64_t lo = std::max(off, starts_[i]), hi = std::min(off + len, starts_[i + 1]);
      if (hi > lo) fn(i, lo - starts_[i], lo - off, hi - lo);
    }
  }

 private:
  std::vector<int64_t> starts_;
};

}  // namespace

absl::Status ShmAllGatherGroup(ShmGroup& g, absl::Span<const CollectiveArgs> group,
                               size_t elem_bytes, absl::Time deadline) {
  const MemberStarts starts(group, static_cast<int64_t>(elem_bytes));
  auto send = [&](size_t i) { return static_cast<const char*>(group[i].send); };
  auto recv = [&](size_t i, int q, int64_t at) {
    return static_cast<char*>(group[i].recv) + q * starts.length(i) + at;
  };
  if (g.world_size() == 1) {
    for (size_t i = 0; i < group.size(); ++i) Alone(g, send(i), recv(i, 0, 0), starts.length(i));
    return absl::OkStatus();
  }
  for (int64_t off = 0; off < starts.total(); off += g.slot_bytes()) {
    const int64_t len = std::min<int64_t>(g.slot_bytes(), starts.total() - off);
    ZS_RETURN_IF_ERROR(g.Round(
        deadline,
        [&](char* slot) {
          starts.ForEach(off, len, [&](size_t i, int64_t at, int64_t pos, int64_t n) {
            std::memcpy(slot + pos, send(i) + at, n);
          });
        },
        [&] {
          for (int q = 0; q < g.world_size(); ++q) {
            starts.ForEach(off, len, [&](size_t i, int64_t at, int64_t pos, int64_t n) {
              char* dst = recv(i, q, at);
              if (q != g.rank()) {
                std::memcpy(dst, g.slot(q) + pos, n);
              } else if (dst != send(i) + at) {
                std::memcpy(dst, send(i) + at, n);
              }
            });
          }
        }));
  }
  return absl::OkStatus();
}

absl::Status ShmReduceScatterGroup(ShmGroup& g, absl::Span<const CollectiveArgs> group, DType dtype,
                                   ReduceOp op, ShmScratch& scratch, absl::Time deadline) {
  const MemberStarts starts(group, 1);  // In elements.
  if (g.world_size() == 1) {
    for (const CollectiveArgs& a : group) Alone(g, a.send, a.recv, a.count * DTypeSize(dtype));
    return absl::OkStatus();
  }
  const int n = g.world_size(), r = g.rank();
  const int64_t per = static_cast<int64_t>(g.slot_bytes() / (sizeof(float) * n));
  const bool fp32 = dtype == DType::kFp32;
  for (int64_t off = 0; off < starts.total(); off += per) {
    const int64_t len = std::min(per, starts.total() - off);
    float* scratch_acc = fp32 ? nullptr : Scratch(scratch, len);
    ZS_RETURN_IF_ERROR(g.Round(
        deadline,
        [&](char* slot) {
          for (int p = 0; p < n; ++p) {
            starts.ForEach(off, len, [&](size_t i, int64_t at, int64_t pos, int64_t m) {
              ToFloat(At(group[i].send, p * group[i].count + at, dtype), dtype,
                      reinterpret_cast<float*>(slot) + p * per + pos, m);
            });
          }
        },
        [&] {
          starts.ForEach(off, len, [&](size_t i, int64_t at, int64_t pos, int64_t m) {
            // fp32 reduces straight into recv; bf16 through fp32 scratch.
            float* acc =
                fp32 ? reinterpret_cast<float*>(At(group[i].recv, at, dtype)) : scratch_acc + pos;
            ReduceSlots(g, r * per + pos, m, op, acc);
            if (!fp32) FromFloat(acc, dtype, At(group[i].recv, at, dtype), m);
          });
        }));
  }
  return absl::OkStatus();
}

absl::Status ShmAllReduce(ShmGroup& g, const void* send, void* recv, int64_t count, DType dtype,
                          ReduceOp op, ShmScratch& scratch, absl::Time deadline) {
  if (Alone(g, send, recv, count * DTypeSize(dtype))) return absl::OkStatus();
  if (IsControlDType(dtype)) {
    return AllReduceNative(g, send, recv, count, dtype, op, deadline);
  }
  if (count <= kShmOneRoundElements) {
    return AllReduceOneRound(g, send, recv, count, dtype, op, scratch, deadline);
  }
  return AllReduceTwoRounds(g, send, recv, count, dtype, op, scratch, deadline);
}

absl::Status ShmBroadcast(ShmGroup& g, const void* send, void* recv, size_t bytes, int root,
                          absl::Time deadline) {
  if (Alone(g, send, recv, bytes)) return absl::OkStatus();
  const bool is_root = g.rank() == root;
  char* out = static_cast<char*>(recv);
  if (is_root && send != recv) std::memmove(out, send, bytes);
  return PieceRounds(g, is_root ? out : nullptr, bytes, deadline, [&](size_t off, size_t len) {
    if (!is_root) std::memcpy(out + off, g.slot(root), len);
  });
}

absl::Status ShmRingShift(ShmGroup& g, const void* send, void* recv, size_t bytes,
                          absl::Time deadline) {
  if (Alone(g, send, recv, bytes)) return absl::OkStatus();
  const int right = (g.rank() + 1) % g.world_size();
  char* out = static_cast<char*>(recv);
  return PieceRounds(g, static_cast<const char*>(send), bytes, deadline,
                     [&](size_t off, size_t len) { std::memcpy(out + off, g.slot(right), len); });
}

absl::Status ShmBarrier(ShmGroup& g, absl::Time deadline) {
  return g.Round(
      deadline, [](char*) {}, [] {});
}

}  // namespace zeroshard
