#include "runtime/collectives.hpp"

#include <climits>
#include <utility>

namespace trillion {
namespace {

// MPI counts are int: larger buffers move in pieces.
constexpr size_t kPiece = size_t(1) << 30;

void bcast_raw(const MpiEnv& env, void* data, size_t bytes, int root) {
  auto* p = static_cast<char*>(data);
  for (size_t done = 0; done < bytes; done += kPiece) {
    const int n = int(std::min(kPiece, bytes - done));
    mpi_check(MPI_Bcast(p + done, n, MPI_BYTE, root, env.comm()), "MPI_Bcast");
  }
}

void check_root(const MpiEnv& env, int root) {
  if (root < 0 || root >= env.size())
    throw Error(env.where() + ": collective root " + std::to_string(root) + " out of range");
}

// The root's size, then its bytes: every rank returns the root's `data`.
template <class Bytes>
Bytes broadcast_sized(const MpiEnv& env, Bytes data, int root) {
  check_root(env, root);
  unsigned long long size = data.size();
  auto guard = env.lock();
  mpi_check(MPI_Bcast(&size, 1, MPI_UNSIGNED_LONG_LONG, root, env.comm()), "MPI_Bcast(size)");
  data.resize(size_t(size));
  bcast_raw(env, data.data(), data.size(), root);
  return data;
}

template <class T>
std::vector<T> allreduce(const MpiEnv& env, std::vector<T> values, MPI_Datatype type, MPI_Op op, const char* what) {
  // Equal lengths everywhere, or the reduction would read past a buffer.
  long long len[2] = {(long long)values.size(), -(long long)values.size()}, ext[2];
  auto guard = env.lock();
  mpi_check(MPI_Allreduce(len, ext, 2, MPI_LONG_LONG, MPI_MAX, env.comm()), what);
  guard.unlock();
  env.check_all(ext[0] == -ext[1], std::string(what) + ": ranks passed vectors of different lengths");
  if (values.size() > size_t(INT_MAX)) throw Error(env.where() + ": " + what + ": vector too long");
  std::vector<T> out(values.size());
  guard.lock();
  mpi_check(MPI_Allreduce(values.data(), out.data(), int(values.size()), type, op, env.comm()), what);
  return out;
}

}  // namespace

std::vector<std::byte> broadcast_bytes(const MpiEnv& env, std::vector<std::byte> data, int root) {
  return broadcast_sized(env, std::move(data), root);
}

std::string broadcast_string(const MpiEnv& env, std::string text, int root) {
  return broadcast_sized(env, std::move(text), root);
}

std::vector<std::string> gather_strings(const MpiEnv& env, const std::string& mine, int root) {
  check_root(env, root);
  if (mine.size() > size_t(INT_MAX)) throw Error(env.where() + ": gather_strings: string too long");
  const int n = env.size();
  int length = int(mine.size());
  std::vector<int> lengths(static_cast<size_t>(n)), offsets(static_cast<size_t>(n));
  auto guard = env.lock();
  mpi_check(MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, root, env.comm()), "MPI_Gather(lengths)");
  long long total = 0;
  for (int r = 0; r < n; ++r) {
    offsets[size_t(r)] = int(total);
    total += lengths[size_t(r)];
  }
  if (env.rank() == root && total > INT_MAX) throw Error(env.where() + ": gather_strings: more than 2 GiB in total");
  std::string all(env.rank() == root ? size_t(total) : 0, '\0');
  mpi_check(MPI_Gatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, root,
                        env.comm()),
            "MPI_Gatherv(strings)");
  std::vector<std::string> out;
  if (env.rank() == root)
    for (int r = 0; r < n; ++r) out.push_back(all.substr(size_t(offsets[size_t(r)]), size_t(lengths[size_t(r)])));
  return out;
}

std::vector<double> allreduce_sum(const MpiEnv& env, std::vector<double> values) {
  return allreduce(env, std::move(values), MPI_DOUBLE, MPI_SUM, "MPI_Allreduce(sum)");
}
std::vector<double> allreduce_max(const MpiEnv& env, std::vector<double> values) {
  return allreduce(env, std::move(values), MPI_DOUBLE, MPI_MAX, "MPI_Allreduce(max)");
}
std::vector<int64_t> allreduce_sum(const MpiEnv& env, std::vector<int64_t> values) {
  return allreduce(env, std::move(values), MPI_INT64_T, MPI_SUM, "MPI_Allreduce(sum)");
}

}  // namespace trillion
