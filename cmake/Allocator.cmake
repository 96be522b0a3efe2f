# The coordinator's malloc: gperftools' tcmalloc, its minimal build (no heap
# profiler; Debian libgoogle-perftools-dev, runtime libtcmalloc-minimal4).
# Why, and what it changed: common/infra/allocator.h and bench/README.md
# (checkpoint/). Workers and tests keep glibc's malloc: the planner's
# per-worker RSS figures are measured with it (common/run_plan.h). The worker
# runs it on one arena (SetUpWorkerMalloc in common/infra/allocator.h).
# Off with the sanitizers, which bring their own allocator.
option(ZEROSHARD_TCMALLOC "Link the coordinator's binaries with tcmalloc (gperftools)" ON)
set(ZEROSHARD_COORDINATOR_MALLOC glibc)
if(ZEROSHARD_TCMALLOC AND NOT ZEROSHARD_SANITIZE)
  pkg_check_modules(TCMALLOC_MINIMAL REQUIRED IMPORTED_TARGET libtcmalloc_minimal)
  set(ZEROSHARD_COORDINATOR_MALLOC tcmalloc)
endif()

# zeroshard_coordinator_malloc(target): links `target` (an executable) with
# the coordinator's malloc. --no-as-needed (the binary's whole link, as
# Debian's default is): nothing calls tcmalloc by name, so a linker that
# drops unreferenced libraries would drop it.
function(zeroshard_coordinator_malloc target)
  if(ZEROSHARD_COORDINATOR_MALLOC STREQUAL "tcmalloc")
    target_link_options(${target} PRIVATE "LINKER:--no-as-needed")
    target_link_libraries(${target} PRIVATE PkgConfig::TCMALLOC_MINIMAL)
  endif()
endfunction()
