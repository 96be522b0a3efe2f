// Keeps the zeroshard_server library non-empty until the coordinator lands.
namespace zeroshard::server_internal {
int Placeholder() { return 0; }
}  // namespace zeroshard::server_internal
