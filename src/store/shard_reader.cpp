#include "store/shard_reader.hpp"

#include <algorithm>

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/checksum.hpp"
#include "common/error.hpp"
#include "format/hf_tensors.hpp"
#include "store/hdf5_util.hpp"

namespace trillion {

namespace {

// Checks one dataset against its manifest entry; returns "" or the problem.
std::string dataset_problem(hid_t file, const TensorInfo& t) {
  if (H5Lexists(file, t.name.c_str(), H5P_DEFAULT) <= 0) return "dataset is missing from the file";
  // A soft or external link would have HDF5 open other objects or files
  // (outside the model directory): a shard holds its data itself.
  H5L_info_t link{};
  if (H5Lget_info(file, t.name.c_str(), &link, H5P_DEFAULT) < 0 || link.type != H5L_TYPE_HARD)
    return "dataset is a soft or external link, not data of this file (not written by trillion convert?)";
  H5Id ds(H5Dopen2(file, t.name.c_str(), H5P_DEFAULT), H5Dclose);
  if (!ds.valid()) return "dataset cannot be opened (damaged file?)";
  H5Id dcpl(H5Dget_create_plist(ds.get()), H5Pclose);
  if (!dcpl.valid() || H5Pget_layout(dcpl.get()) != H5D_CONTIGUOUS || H5Pget_nfilters(dcpl.get()) != 0)
    return "dataset is not contiguous and unfiltered (not written by trillion convert?)";
  const haddr_t off = H5Dget_offset(ds.get());
  if (off == HADDR_UNDEF || off != t.offset)
    return "data offset in the file is " + (off == HADDR_UNDEF ? std::string("undefined") : std::to_string(off)) +
           ", manifest.json says " + std::to_string(t.offset);
  if (H5Dget_storage_size(ds.get()) != t.nbytes)
    return "storage size is " + std::to_string(H5Dget_storage_size(ds.get())) + " bytes, manifest.json says " +
           std::to_string(t.nbytes);
  H5Id space(H5Dget_space(ds.get()), H5Sclose);
  const int rank = space.valid() ? H5Sget_simple_extent_ndims(space.get()) : -1;
  if (rank < 0 || rank > 8) return "dataspace cannot be read";
  std::vector<hsize_t> dims(size_t(rank) + 1);
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  dims.resize(size_t(rank));
  std::vector<int64_t> shape(dims.begin(), dims.end());
  if (shape != t.shape) return "shape is " + shape_string(shape) + ", manifest.json says " + shape_string(t.shape);
  H5Id type(H5Dget_type(ds.get()), H5Tclose);
  if (!type.valid() || H5Tequal(type.get(), hdf5_type(t.dtype)) <= 0)
    return "HDF5 storage type does not match dtype " + std::string(dtype_name(t.dtype));
  auto dt = read_string_attr(ds.get(), "dtype");
  if (!dt || *dt != dtype_name(t.dtype))
    return "dtype attribute is '" + dt.value_or("(missing)") + "', manifest.json says " + dtype_name(t.dtype);
  auto sum = read_string_attr(ds.get(), "checksum");
  if (!sum || *sum != checksum_string(t.checksum))
    return "checksum attribute is '" + sum.value_or("(missing)") + "', manifest.json says " +
           checksum_string(t.checksum) + " (shard and manifest are from different conversions?)";
  if (!t.weight_shape.empty()) {
    auto ws = read_int64_attr(ds.get(), "weight_shape");
    if (!ws || *ws != t.weight_shape)
      return "weight_shape attribute is " + (ws ? shape_string(*ws) : std::string("(missing)")) +
             ", manifest.json says " + shape_string(t.weight_shape);
  }
  return "";
}

}  // namespace

std::string shard_file_problem(const std::string& path, const ShardInfo& shard) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return errno == ENOENT ? "shard file is missing (copy it to this host; see trillion plan)"
                           : std::string("cannot stat shard file: ") + std::strerror(errno);
  if (!S_ISREG(st.st_mode)) return "shard is not a regular file";
  if (uint64_t(st.st_size) != shard.bytes)
    return "shard file is " + std::to_string(st.st_size) + " bytes, manifest.json says " +
           std::to_string(shard.bytes) + " (truncated or incomplete copy?)";
  return "";
}

uint64_t shard_metadata_checksum(const std::byte* file, size_t size, const std::vector<const TensorInfo*>& tensors) {
  std::vector<std::pair<uint64_t, uint64_t>> data;  // [begin, end) of each tensor's bytes
  for (const TensorInfo* t : tensors) data.emplace_back(t->offset, t->offset + t->nbytes);
  std::sort(data.begin(), data.end());
  Xxh64 h;
  uint64_t at = 0;
  for (const auto& [b, e] : data) {
    const uint64_t begin = std::min<uint64_t>(b, size), end = std::min<uint64_t>(e, size);
    if (begin > at) h.update(file + at, size_t(begin - at));
    at = std::max(at, end);
  }
  if (at < size) h.update(file + at, size_t(size - at));
  return h.digest();
}

std::vector<ShardProblem> check_shard(const std::string& path, const ShardInfo& shard,
                                      const std::vector<const TensorInfo*>& tensors) {
  if (std::string p = shard_file_problem(path, shard); !p.empty()) return {{"", p}};
  if (shard.metadata_checksum) {
    const MappedFile f(path);
    f.advise_huge_pages();  // this pass is the first to read the file: its read-ahead decides the page size
    const uint64_t h = shard_metadata_checksum(f.data(), f.size(), tensors);
    if (h != *shard.metadata_checksum)
      return {{"", "HDF5 metadata changed since conversion: it hashes to " + checksum_string(h) +
                       ", manifest.json says " + checksum_string(*shard.metadata_checksum) +
                       " (refused before the HDF5 library parses it)"}};
  }
  Hdf5Session s;
  H5Id fapl = shard_file_access();
  H5Id file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.valid() ? fapl.get() : H5P_DEFAULT), H5Fclose);
  if (!file.valid())
    return {{"", "not a readable HDF5 file (damaged or not a trillion shard): " + hdf5_error_detail()}};
  auto fmt = read_string_attr(file.get(), "trillion_format");
  auto ver = read_int64_attr(file.get(), "trillion_format_version");
  if (!fmt || *fmt != kFormatName)
    return {{"", "HDF5 file is not a trillion shard (attribute trillion_format missing or wrong)"}};
  if (!ver || ver->size() != 1 || (*ver)[0] != kFormatVersion)
    return {{"", "unsupported trillion_format_version (this trillion reads " + std::to_string(kFormatVersion) + ")"}};
  std::vector<ShardProblem> problems;
  for (const TensorInfo* t : tensors)
    if (std::string p = dataset_problem(file.get(), *t); !p.empty()) problems.push_back({t->name, p});
  return problems;
}

MappedShard::MappedShard(const std::string& dir, const ShardInfo& shard,
                         const std::vector<const TensorInfo*>& tensors) {
  const std::string path = (std::filesystem::path(dir) / shard.file).string();
  std::vector<ShardProblem> problems = check_shard(path, shard, tensors);
  if (!problems.empty()) {
    const ShardProblem& p = problems.front();
    throw FormatError(path + ": " + (p.tensor.empty() ? "" : "tensor '" + p.tensor + "': ") + p.message);
  }
  map_ = MappedFile(path);
  if (map_.size() != shard.bytes)  // changed between the check and the mapping
    throw FormatError(path + ": shard file changed size while being opened");
  map_.advise_huge_pages();  // before the checksum pass or a step first reads it
}

void verify_checksum(const std::string& path, const TensorInfo& t, const std::byte* data) {
  const uint64_t h = xxh64(data, t.nbytes);
  if (h != t.checksum)
    throw FormatError(path + ": tensor '" + t.name + "': checksum mismatch: data hash to " + checksum_string(h) +
                      ", manifest.json says " + checksum_string(t.checksum) + " (corrupted shard)");
}

}  // namespace trillion
