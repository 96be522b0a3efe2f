// Keeps the zeroshard_worker library non-empty until the runtime lands.
namespace zeroshard::worker_internal {
int Placeholder() { return 0; }
}  // namespace zeroshard::worker_internal
