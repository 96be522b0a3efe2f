// Which malloc this process runs on, for zeroshard_build_info: the
// coordinator's binaries link gperftools' tcmalloc (cmake/Allocator.cmake);
// the workers and the tests keep glibc's.
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

}  // namespace zeroshard
