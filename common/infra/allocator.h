// Which malloc this process runs on, for zeroshard_build_info: the
// coordinator's binaries link gperftools' tcmalloc (cmake/Allocator.cmake);
// the workers and the tests keep glibc's, the workers with one arena
// (SetUpWorkerMalloc).
//
// Why the coordinator: checkpoint traffic through gRPC allocates and frees
// MiB-sized receive and send buffers at a high rate. glibc hands freed top
// chunks of its per-thread arenas back to the kernel, so the next buffer is
// faulted in page by page (~6% of a restore's samples in recvmsg alone);
// tcmalloc keeps freed spans for reuse (bench/README.md, checkpoint/).
//
// Thread safety: any thread.
#pragma once

namespace zeroshard {

// "tcmalloc" when gperftools' tcmalloc is this process's malloc (linked or
// LD_PRELOADed: its tc_malloc symbol is loaded), else "glibc".
const char* MallocName();

// The worker's malloc settings, applied first thing in main by the worker and
// by the benches that stand in for its ranks (model_load_client,
// checkpoint_bench). On glibc: one arena for every thread (mallopt
// M_ARENA_MAX 1); on tcmalloc or in a sanitizer build, nothing.
//
// Why: a rank receives its model weights and checkpoint ranges as gRPC
// messages, whose buffers gRPC's threads allocate and the rank's threads
// free. glibc gives each thread an arena of 64 MiB heaps and unmaps a heap
// once all of it is free, so every load faults the next buffers in again,
// page by page. On the main arena alone freed memory is reused, and
// glibc's dynamic mmap and trim thresholds stay as they are (the mallopt
// thresholds would freeze them). Measured (bench/README.md, "The workers
// on one malloc arena"): a 2 GB model directory loads in 0.92-1.06 s
// against 1.26-1.94 s (the two builds alternating), as fast as tcmalloc;
// step times and every worker's VmHWM (peak_rss_test) are unchanged
// within noise.
//
// Returns false where glibc refused the setting. Call before any other
// thread starts: arenas made before it stay in use, by the threads that
// have them and by new threads glibc hands them to.
bool SetUpWorkerMalloc();

}  // namespace zeroshard
