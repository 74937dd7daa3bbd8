#include "store/shard_writer.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/checksum.hpp"
#include "common/error.hpp"
#include "platform/file_sync.hpp"
#include "store/hdf5_util.hpp"

namespace trillion {

namespace {

// Bytes hashed and written per H5Dwrite: large enough to run at disk speed,
// small enough that the chunk is still in cache when the write reads it.
constexpr uint64_t kChunkBytes = 64ull << 20;

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw FormatError(path + ": " + what);
}

void sync_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || !platform::sync_file(fd)) {
    int e = errno;
    if (fd >= 0) ::close(fd);
    throw SystemError(path + ": cannot sync to disk: " + std::strerror(e));
  }
  ::close(fd);
}

}  // namespace

struct ShardWriter::Handles {
  H5Id file;
  H5Id dcpl;
};

ShardWriter::ShardWriter(const std::string& path) : path_(path), h_(std::make_unique<Handles>()) {
  Hdf5Session s;
  // Every allocation starts on a page, so each dataset can be used in place from an mmap.
  H5Id fapl = shard_file_access();
  if (!fapl.valid()) fail(path, "cannot set HDF5 file access properties");
  // No object timestamps (HDF5 tracks them by default): a shard's metadata,
  // which the manifest hashes, is then the same whenever it is converted, so
  // two conversions of one checkpoint give byte-identical files (shards
  // shared between model directories verify against either manifest).
  H5Id fcpl(H5Pcreate(H5P_FILE_CREATE), H5Pclose);
  if (!fcpl.valid() || H5Pset_obj_track_times(fcpl.get(), false) < 0)
    fail(path, "cannot set HDF5 file creation properties");
  h_->file = H5Id(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, fcpl.get(), fapl.get()), H5Fclose);
  if (!h_->file.valid()) fail(path, "cannot create HDF5 file: " + hdf5_error_detail());
  if (!write_string_attr(h_->file.get(), "trillion_format", kFormatName) ||
      !write_int64_attr(h_->file.get(), "trillion_format_version", {kFormatVersion}, true))
    fail(path, "cannot write file attributes");

  // Contiguous + allocated at creation => H5Dget_offset is valid and the bytes
  // are one run in the file. Fill NEVER: early allocation would otherwise
  // write zeros over every byte first, doubling the conversion's writes.
  h_->dcpl = H5Id(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  if (!h_->dcpl.valid() || H5Pset_layout(h_->dcpl.get(), H5D_CONTIGUOUS) < 0 ||
      H5Pset_alloc_time(h_->dcpl.get(), H5D_ALLOC_TIME_EARLY) < 0 ||
      H5Pset_fill_time(h_->dcpl.get(), H5D_FILL_TIME_NEVER) < 0 || H5Pset_obj_track_times(h_->dcpl.get(), false) < 0)
    fail(path, "cannot set HDF5 dataset properties");
}

ShardWriter::~ShardWriter() {
  if (h_ && h_->file.valid()) {
    Hdf5Session s;
    h_->dcpl = H5Id();
    h_->file = H5Id();
  }
}

StoredTensor ShardWriter::write(const ShardTensor& t, const std::function<void(uint64_t)>& progress) {
  if (!h_ || !h_->file.valid()) fail(path_, "write after finish");
  const std::string where = "tensor '" + t.name + "': ";
  uint64_t numel = 1;
  std::vector<hsize_t> dims;
  for (int64_t d : t.shape) {
    if (d <= 0) fail(path_, where + "has a zero-size dimension; trillion stores only non-empty tensors");
    dims.push_back(hsize_t(d));
    numel *= uint64_t(d);
  }
  const uint64_t nbytes = numel * dtype_size(t.dtype);
  const hid_t type = hdf5_type(t.dtype);

  Hdf5Session s;
  H5Id space(dims.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(int(dims.size()), dims.data(), nullptr),
             H5Sclose);
  if (!space.valid()) fail(path_, where + "cannot create dataspace");
  H5Id ds(H5Dcreate2(h_->file.get(), t.name.c_str(), type, space.get(), H5P_DEFAULT, h_->dcpl.get(), H5P_DEFAULT),
          H5Dclose);
  if (!ds.valid()) fail(path_, where + "cannot create dataset (duplicate name?)");

  // Attributes first, the checksum as a same-length placeholder: rewriting it
  // after the data keeps the object header's size, so nothing is reallocated.
  bool ok = write_string_attr(ds.get(), "dtype", dtype_name(t.dtype)) &&
            write_string_attr(ds.get(), "checksum", checksum_string(0));
  if (ok && !t.weight_shape.empty()) ok = write_int64_attr(ds.get(), "weight_shape", t.weight_shape, false);
  if (!ok) fail(path_, where + "cannot write attributes");

  const haddr_t offset = H5Dget_offset(ds.get());
  if (offset == HADDR_UNDEF || offset % kAlignment != 0)
    fail(path_, where + "dataset is not allocated at a 4096-aligned offset");

  Xxh64 hash;
  if (dims.empty()) {
    hash.update(t.data, nbytes);
    if (H5Dwrite(ds.get(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.data) < 0) fail(path_, where + "write failed");
    if (progress) progress(nbytes);
  } else {
    // Whole rows of the first dimension per chunk; memory type == file type,
    // so HDF5 writes straight from the source mapping without conversion.
    const uint64_t row_bytes = nbytes / dims[0];
    const hsize_t rows_per_chunk = std::max<hsize_t>(1, kChunkBytes / row_bytes);
    std::vector<hsize_t> start(dims.size(), 0), count = dims;
    for (hsize_t r = 0; r < dims[0]; r += rows_per_chunk) {
      start[0] = r;
      count[0] = std::min(rows_per_chunk, dims[0] - r);
      const std::byte* p = t.data + r * row_bytes;
      const uint64_t len = count[0] * row_bytes;
      hash.update(p, len);
      H5Id mem(H5Screate_simple(int(count.size()), count.data(), nullptr), H5Sclose);
      if (!mem.valid() ||
          H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr) < 0 ||
          H5Dwrite(ds.get(), type, mem.get(), space.get(), H5P_DEFAULT, p) < 0)
        fail(path_, where + "write failed: " + hdf5_error_detail());
      if (progress) progress(len);
    }
  }
  const uint64_t sum = hash.digest();
  if (!overwrite_string_attr(ds.get(), "checksum", checksum_string(sum)))
    fail(path_, where + "cannot write checksum attribute");
  if (!ds.close()) fail(path_, where + "cannot close dataset");
  return StoredTensor{uint64_t(offset), nbytes, sum};
}

uint64_t ShardWriter::finish() {
  {
    Hdf5Session s;
    h_->dcpl = H5Id();
    if (!h_->file.close()) fail(path_, "cannot close HDF5 file: " + hdf5_error_detail());
  }
  sync_file(path_);
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) throw SystemError(path_ + ": cannot stat: " + std::strerror(errno));
  return uint64_t(st.st_size);
}

}  // namespace trillion
