#include "calibrate/kernel_probe.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>
#include <random>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/error.hpp"
#include "common/page_arena.hpp"
#include "common/numeric.hpp"
#include "kernels/matmul.hpp"
#include "kernels/matmul_bf16.hpp"
#include "kernels/matmul_q8.hpp"
#include "platform/file_sync.hpp"
#include "platform/memory_advice.hpp"

namespace trillion {

// One thread: CPU time of this thread (robust when other jobs share the
// cores); more threads: wall time.
double probe_clock(bool cpu_time) {
  if (!cpu_time) return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

Owned make_matrix(MatFormat f, int64_t rows, int64_t cols) {
  std::mt19937_64 rng(1);
  Owned o;
  o.m.format = f;
  o.m.rows = rows;
  o.m.cols = cols;
  const int64_t n = rows * cols;
  const int64_t bytes = f == MatFormat::F32 ? 4 * n : f == MatFormat::BF16 ? 2 * n : (f == MatFormat::FP8_B128 || f == MatFormat::INT8_G32) ? n : n / 2;
  o.data.resize(size_t(bytes));
  for (auto& b : o.data) b = uint8_t(rng() & 0x3f);  // small finite values of the integer formats
  // Float formats get normal values like a model's weights: random bytes
  // would make 1 in 64 of them subnormal, and x86 FMAs on subnormals take
  // microcode assists (F32/BF16 then ran at a small fraction of their rate at every batch).
  if (f == MatFormat::F32 || f == MatFormat::BF16) {
    std::normal_distribution<float> g(0.0f, 0.02f);
    for (int64_t i = 0; i < n; ++i) {
      const float v = g(rng);
      if (f == MatFormat::F32) {
        std::memcpy(&o.data[size_t(4 * i)], &v, 4);
      } else {
        const uint16_t h = f32_to_bf16(v);
        std::memcpy(&o.data[size_t(2 * i)], &h, 2);
      }
    }
  } else if (f == MatFormat::FP8_B128) {  // e4m3 codes with exponent 1..14: normal, finite
    for (auto& b : o.data) b = uint8_t((rng() & 0x80) | ((1 + rng() % 14) << 3) | (rng() & 7));
  }
  if (f == MatFormat::FP8_B128) {
    o.m.scale_cols = (cols + 127) / 128;
    o.scale.resize(size_t(4 * ((rows + 127) / 128) * o.m.scale_cols));
    float* s = reinterpret_cast<float*>(o.scale.data());
    for (size_t i = 0; i < o.scale.size() / 4; ++i) s[i] = 1e-3f;
  } else if (f == MatFormat::INT4_G32 || f == MatFormat::INT8_G32) {
    o.m.scale_cols = (cols + 31) / 32;
    o.scale.resize(size_t(2 * rows * o.m.scale_cols));
    uint16_t* s = reinterpret_cast<uint16_t*>(o.scale.data());
    for (size_t i = 0; i < o.scale.size() / 2; ++i) s[i] = f32_to_bf16(0.05f);
  }
  o.m.data = o.data.data();
  o.m.scale = o.scale.empty() ? nullptr : o.scale.data();
  return o;
}

// q8: the integer-dot path, activations quantized in every call (as a model step does).
double seconds_per_call(const std::vector<Owned>& Ws, const std::vector<float>& x, int64_t n, std::vector<float>& y,
                        ThreadPool& pool, ProbePath path, double min_trial_seconds, bool wall_clock) {
  const bool cpu_time = pool.size() == 1 && !wall_clock;
  size_t next = 0;
  Q8Rows xq;
  Bf16Rows xb;
  auto call = [&] {
    switch (path) {
      case ProbePath::kQ8:
        quantize_q8(x.data(), n, Ws[next].m.cols, xq, Ws[next].m.format);
        matmul_q8(Ws[next].m, xq, y.data(), pool);
        break;
      case ProbePath::kBf16:
        round_bf16_rows(x.data(), n, Ws[next].m.cols, xb);
        matmul_bf16(Ws[next].m, xb, y.data(), pool);
        break;
      case ProbePath::kFloat: matmul(Ws[next].m, x.data(), n, y.data(), pool); break;
    }
    next = (next + 1) % Ws.size();
  };
  return best_seconds_per_call(call, cpu_time, min_trial_seconds);
}

// Activations like a model's (random signs and sizes), so quantization sees real groups.
std::vector<float> random_x(int64_t count) {
  std::mt19937 rng(1);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(count));
  for (float& v : x) v = g(rng);
  return x;
}



namespace {
size_t page_up(size_t n) {
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  return (n + page - 1) / page * page;
}
}  // namespace

FileBackedMatrices::FileBackedMatrices(const Owned& one, int copies, const std::string& dir) {
  const size_t data = page_up(one.data.size()), scale = page_up(one.scale.size());
  size_ = (data + scale) * size_t(copies);
  std::string path = dir + "/trillion-calibrate-XXXXXX";
  const int fd = mkstemp(path.data());
  if (fd < 0) throw Error("calibrate: cannot make a scratch file in " + dir);
  ::unlink(path.c_str());
  auto put = [&](const std::vector<uint8_t>& bytes, size_t at) {
    for (size_t done = 0; done < bytes.size();) {
      const ssize_t n = ::pwrite(fd, bytes.data() + done, bytes.size() - done, off_t(at + done));
      if (n <= 0) {
        ::close(fd);
        throw Error("calibrate: cannot write the scratch file in " + dir + " (" + std::to_string(size_ >> 20) +
                    " MiB)");
      }
      done += size_t(n);
    }
  };
  for (int i = 0; i < copies; ++i) {
    put(one.data, size_t(i) * (data + scale));
    put(one.scale, size_t(i) * (data + scale) + data);
  }
  if (::ftruncate(fd, off_t(size_)) != 0) {
    ::close(fd);
    throw Error("calibrate: cannot size the scratch file in " + dir);
  }
  // The engine reads its shards in through a mapping advised for 2 MiB pages
  // (format/mapped_file.hpp); the pages written here would keep whatever size
  // the write path gave them. So the file goes to disk and leaves the page
  // cache, and is read back through such a mapping. (Where the cache cannot
  // drop it, tmpfs say, the pages stay as written: a hint, as for the engine.)
  if (platform::can_drop_file_cache() && platform::sync_file_data(fd))
    platform::drop_file_cache(fd, 0, int64_t(size_));
  base_ = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (base_ == MAP_FAILED) {
    base_ = nullptr;
    throw Error("calibrate: cannot map the scratch file");
  }
  if (huge_pages_wanted()) platform::advise(base_, size_, platform::Advice::huge_pages);
  const auto* b = static_cast<const uint8_t*>(base_);
  // Map every page now, as a model's shards are by the time steps run (its
  // load reads them): otherwise the first trials, at one row, time page
  // faults, not the kernel: on a VM whose faults are slow, a rate several
  // times too low, and plan's predictions with it.
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  volatile uint8_t sink = 0;
  for (size_t at = 0; at < size_; at += page) sink = sink + b[at];
  for (int i = 0; i < copies; ++i) {
    Owned v;
    v.m = one.m;
    v.m.data = b + size_t(i) * (data + scale);
    v.m.scale = one.scale.empty() ? nullptr : b + size_t(i) * (data + scale) + data;
    views_.push_back(std::move(v));
  }
}

FileBackedMatrices::~FileBackedMatrices() {
  if (base_) ::munmap(base_, size_);
}

}  // namespace trillion
