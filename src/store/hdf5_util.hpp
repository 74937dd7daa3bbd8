// Small RAII and attribute helpers over the HDF5 C API, shared by the shard
// writer and reader. HDF5 is not built thread-safe here, so every use holds
// Hdf5Session, which also silences HDF5's own error-stack printing: failures
// are reported by us, naming the file: clear errors, never noise.
#pragma once
#include <hdf5.h>

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/dtype.hpp"

namespace trillion {

// Owns one HDF5 identifier (file, dataset, dataspace, property list, ...).
class H5Id {
 public:
  using Closer = herr_t (*)(hid_t);
  H5Id() = default;
  H5Id(hid_t id, Closer close) : id_(id), close_(close) {}
  ~H5Id() { reset(); }
  H5Id(H5Id&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = -1; }
  H5Id& operator=(H5Id&& o) noexcept;
  H5Id(const H5Id&) = delete;
  H5Id& operator=(const H5Id&) = delete;

  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  // Closes now and reports whether HDF5 succeeded (H5Fclose flushes metadata).
  bool close();

 private:
  void reset() noexcept;
  hid_t id_ = -1;
  Closer close_ = nullptr;
};

// Holds the process-wide HDF5 lock and turns off automatic error printing.
class Hdf5Session {
 public:
  Hdf5Session();
  ~Hdf5Session();
  Hdf5Session(const Hdf5Session&) = delete;
  Hdf5Session& operator=(const Hdf5Session&) = delete;

 private:
  std::unique_lock<std::recursive_mutex> lock_;
  H5E_auto2_t saved_func_ = nullptr;
  void* saved_data_ = nullptr;
};

// File-access properties for shards: page alignment (for writing) and no
// file locking (shards are immutable once converted, many ranks read them, and
// network filesystems without lock support would otherwise refuse to open them).
H5Id shard_file_access();

// The HDF5 error stack as one line ("unable to open file: file signature not
// found"), to append to our own messages; call right after a failed HDF5 call.
std::string hdf5_error_detail();

// The HDF5 storage type of a dtype (docs/format.md): the bytes are the
// checkpoint's, so bf16 is stored as u16 and e4m3 as u8.
hid_t hdf5_type(DType t);

// Attributes. Strings are fixed-length, null-padded ASCII.
bool write_string_attr(hid_t obj, const char* name, const std::string& value);
bool overwrite_string_attr(hid_t obj, const char* name, const std::string& value);  // same length
bool write_int64_attr(hid_t obj, const char* name, const std::vector<int64_t>& values, bool scalar);
std::optional<std::string> read_string_attr(hid_t obj, const char* name);
std::optional<std::vector<int64_t>> read_int64_attr(hid_t obj, const char* name);

// Values written into every shard (docs/format.md "File attributes").
inline constexpr const char* kFormatName = "trillion-hdf5";
inline constexpr int64_t kFormatVersion = 1;
inline constexpr uint64_t kAlignment = 4096;

}  // namespace trillion
