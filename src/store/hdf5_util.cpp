#include "store/hdf5_util.hpp"

#include <algorithm>

namespace trillion {

H5Id& H5Id::operator=(H5Id&& o) noexcept {
  if (this != &o) {
    reset();
    id_ = o.id_;
    close_ = o.close_;
    o.id_ = -1;
  }
  return *this;
}

void H5Id::reset() noexcept {
  if (id_ >= 0 && close_) close_(id_);
  id_ = -1;
}

bool H5Id::close() {
  if (id_ < 0) return true;
  herr_t r = close_(id_);
  id_ = -1;
  return r >= 0;
}

namespace {
// Recursive: a reader validating a shard may call helpers that take it again.
std::recursive_mutex& hdf5_mutex() {
  static std::recursive_mutex m;
  return m;
}
}  // namespace

Hdf5Session::Hdf5Session() : lock_(hdf5_mutex()) {
  H5Eget_auto2(H5E_DEFAULT, &saved_func_, &saved_data_);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

Hdf5Session::~Hdf5Session() { H5Eset_auto2(H5E_DEFAULT, saved_func_, saved_data_); }

H5Id shard_file_access() {
  H5Id fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  if (!fapl.valid() || H5Pset_alignment(fapl.get(), 1, kAlignment) < 0) return H5Id();
#if H5_VERSION_GE(1, 10, 7)
  if (H5Pset_file_locking(fapl.get(), false, true) < 0) return H5Id();
#endif
  return fapl;
}

std::string hdf5_error_detail() {
  std::vector<std::string> parts;
  auto collect = [](unsigned, const H5E_error2_t* e, void* data) -> herr_t {
    if (e->desc && *e->desc) static_cast<std::vector<std::string>*>(data)->push_back(e->desc);
    return 0;
  };
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, collect, &parts);
  if (parts.empty()) return "";
  // The outermost says what failed, the innermost why.
  return parts.size() == 1 ? parts.front() : parts.front() + ": " + parts.back();
}

hid_t hdf5_type(DType t) {
  switch (t) {
    case DType::F32: return H5T_IEEE_F32LE;
    case DType::BF16: case DType::F16: return H5T_STD_U16LE;
    case DType::F8_E4M3: case DType::U8: return H5T_STD_U8LE;
    case DType::I8: return H5T_STD_I8LE;
    case DType::I32: return H5T_STD_I32LE;
    case DType::I64: return H5T_STD_I64LE;
  }
  return H5T_STD_U8LE;
}

namespace {

H5Id string_type(size_t len) {
  H5Id t(H5Tcopy(H5T_C_S1), H5Tclose);
  if (!t.valid() || H5Tset_size(t.get(), std::max<size_t>(len, 1)) < 0 ||
      H5Tset_strpad(t.get(), H5T_STR_NULLPAD) < 0)
    return H5Id();
  return t;
}

}  // namespace

bool write_string_attr(hid_t obj, const char* name, const std::string& value) {
  H5Id type = string_type(value.size());
  H5Id space(H5Screate(H5S_SCALAR), H5Sclose);
  if (!type.valid() || !space.valid()) return false;
  H5Id attr(H5Acreate2(obj, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  std::string buf = value.empty() ? std::string(1, '\0') : value;
  return attr.valid() && H5Awrite(attr.get(), type.get(), buf.data()) >= 0;
}

bool overwrite_string_attr(hid_t obj, const char* name, const std::string& value) {
  H5Id attr(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose);
  H5Id type = string_type(value.size());
  if (!attr.valid() || !type.valid()) return false;
  H5Id stored(H5Aget_type(attr.get()), H5Tclose);
  if (!stored.valid() || H5Tget_size(stored.get()) != std::max<size_t>(value.size(), 1)) return false;
  return H5Awrite(attr.get(), type.get(), value.data()) >= 0;
}

bool write_int64_attr(hid_t obj, const char* name, const std::vector<int64_t>& values, bool scalar) {
  hsize_t n = values.size();
  H5Id space(scalar ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &n, nullptr), H5Sclose);
  if (!space.valid() || (scalar && values.size() != 1)) return false;
  H5Id attr(H5Acreate2(obj, name, H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  return attr.valid() && H5Awrite(attr.get(), H5T_NATIVE_INT64, values.data()) >= 0;
}

std::optional<std::string> read_string_attr(hid_t obj, const char* name) {
  if (H5Aexists(obj, name) <= 0) return std::nullopt;
  H5Id attr(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose);
  if (!attr.valid()) return std::nullopt;
  H5Id type(H5Aget_type(attr.get()), H5Tclose);
  if (!type.valid() || H5Tget_class(type.get()) != H5T_STRING || H5Tis_variable_str(type.get()) != 0)
    return std::nullopt;
  H5Id space(H5Aget_space(attr.get()), H5Sclose);
  if (!space.valid() || H5Sget_simple_extent_npoints(space.get()) != 1) return std::nullopt;
  const size_t size = H5Tget_size(type.get());
  if (size == 0 || size > 4096) return std::nullopt;  // our attributes are short names and checksums
  H5Id mem = string_type(size);
  std::string buf(size, '\0');
  if (!mem.valid() || H5Aread(attr.get(), mem.get(), buf.data()) < 0) return std::nullopt;
  buf.erase(std::find(buf.begin(), buf.end(), '\0'), buf.end());
  return buf;
}

std::optional<std::vector<int64_t>> read_int64_attr(hid_t obj, const char* name) {
  if (H5Aexists(obj, name) <= 0) return std::nullopt;
  H5Id attr(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose);
  if (!attr.valid()) return std::nullopt;
  H5Id type(H5Aget_type(attr.get()), H5Tclose);
  if (!type.valid() || H5Tget_class(type.get()) != H5T_INTEGER) return std::nullopt;
  H5Id space(H5Aget_space(attr.get()), H5Sclose);
  if (!space.valid()) return std::nullopt;
  const hssize_t n = H5Sget_simple_extent_npoints(space.get());
  if (n < 1 || n > 64) return std::nullopt;
  std::vector<int64_t> v(static_cast<size_t>(n));
  if (H5Aread(attr.get(), H5T_NATIVE_INT64, v.data()) < 0) return std::nullopt;
  return v;
}

}  // namespace trillion
