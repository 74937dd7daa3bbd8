#include "format/safetensors.hpp"

#include <algorithm>
#include <cstring>

#include <nlohmann/json.hpp>

#include "common/error.hpp"

namespace trillion {

namespace {

using nlohmann::json;

// The safetensors library refuses headers above 100 MB; a larger length is a
// corrupt or non-safetensors file, not a real header (DeepSeek-V3's are < 1 MB).
constexpr uint64_t kMaxHeader = 100ull << 20;

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw FormatError(path + ": " + what);
}
[[noreturn]] void fail_tensor(const std::string& path, const std::string& name, const std::string& what) {
  throw FormatError(path + ": tensor '" + name + "': " + what);
}

// A JSON value that must be a non-negative integer fitting in 64 bits.
uint64_t non_negative(const std::string& path, const std::string& name, const json& v, const char* field) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return uint64_t(v.get<int64_t>());
  fail_tensor(path, name, std::string(field) + " must hold non-negative integers, got " + v.dump());
}

SafetensorsEntry parse_entry(const std::string& path, const std::string& name, const json& v) {
  if (!v.is_object()) fail_tensor(path, name, "header entry is not an object: " + v.dump());
  SafetensorsEntry t;
  t.name = name;

  auto dt = v.find("dtype");
  if (dt == v.end() || !dt->is_string()) fail_tensor(path, name, "missing or non-string 'dtype'");
  try {
    t.dtype = dtype_from_name(dt->get<std::string>());
  } catch (const FormatError&) {
    fail_tensor(path, name, "unknown dtype '" + dt->get<std::string>() +
                                "' (known: F32, BF16, F16, F8_E4M3, I32, I64, U8, I8)");
  }

  auto sh = v.find("shape");
  if (sh == v.end() || !sh->is_array()) fail_tensor(path, name, "missing or non-array 'shape'");
  uint64_t numel = 1;
  bool overflow = false;
  for (const json& d : *sh) {
    uint64_t n = non_negative(path, name, d, "shape");
    if (n > uint64_t(INT64_MAX)) overflow = true;
    t.shape.push_back(int64_t(n));
    overflow |= __builtin_mul_overflow(numel, n, &numel);
  }
  uint64_t expected = 0;
  overflow |= __builtin_mul_overflow(numel, uint64_t(dtype_size(t.dtype)), &expected);
  if (overflow) fail_tensor(path, name, "shape " + sh->dump() + " overflows 64 bits");

  auto off = v.find("data_offsets");
  if (off == v.end() || !off->is_array() || off->size() != 2)
    fail_tensor(path, name, "'data_offsets' must be an array [begin, end]");
  uint64_t b = non_negative(path, name, (*off)[0], "data_offsets");
  uint64_t e = non_negative(path, name, (*off)[1], "data_offsets");
  if (e < b) fail_tensor(path, name, "data_offsets " + off->dump() + " end before begin");
  if (e - b != expected)
    fail_tensor(path, name, "data_offsets " + off->dump() + " span " + std::to_string(e - b) +
                                " bytes but shape " + sh->dump() + " of " + dt->get<std::string>() +
                                " needs " + std::to_string(expected));
  t.begin = b;  // relative for now; made absolute by the caller
  t.end = e;
  return t;
}

}  // namespace

std::vector<SafetensorsEntry> parse_safetensors_header(const std::string& path, const char* header,
                                                       uint64_t header_len, uint64_t file_size,
                                                       std::map<std::string, std::string>* metadata) {
  json j;
  try {
    j = json::parse(header, header + header_len);
  } catch (const json::exception& e) {
    fail(path, std::string("safetensors header is not valid JSON: ") + e.what());
  }
  if (!j.is_object()) fail(path, "safetensors header is not a JSON object");

  const uint64_t data_start = 8 + header_len;
  const uint64_t data_size = file_size - data_start;  // caller guarantees header fits
  std::vector<SafetensorsEntry> tensors;
  tensors.reserve(j.size());
  for (const auto& [key, value] : j.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) fail(path, "__metadata__ is not an object");
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string()) fail(path, "__metadata__['" + mk + "'] is not a string");
        if (metadata) (*metadata)[mk] = mv.get<std::string>();
      }
      continue;
    }
    SafetensorsEntry t = parse_entry(path, key, value);
    if (t.end > data_size)
      fail_tensor(path, key, "data_offsets [" + std::to_string(t.begin) + ", " + std::to_string(t.end) +
                                 "] reach past the data section (" + std::to_string(data_size) +
                                 " bytes; file truncated?)");
    tensors.push_back(std::move(t));
  }

  // The format (and the reference loader) requires the tensors to tile the data
  // section exactly: no overlap, no hole, nothing after the last one.
  std::sort(tensors.begin(), tensors.end(), [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t pos = 0;
  const std::string* prev = nullptr;
  for (const SafetensorsEntry& t : tensors) {
    if (t.begin < pos)
      fail_tensor(path, t.name, "data_offsets [" + std::to_string(t.begin) + ", " + std::to_string(t.end) +
                                    "] overlap tensor '" + *prev + "' (ends at " + std::to_string(pos) + ")");
    if (t.begin > pos)
      fail_tensor(path, t.name, "data_offsets begin at " + std::to_string(t.begin) + " leaving a hole after " +
                                    (prev ? "tensor '" + *prev + "'" : std::string("the header")) +
                                    " (ends at " + std::to_string(pos) + ")");
    pos = t.end;
    prev = &t.name;
  }
  if (pos != data_size)
    fail(path, "tensors cover " + std::to_string(pos) + " bytes of a " + std::to_string(data_size) +
                   "-byte data section (trailing bytes: wrong header or corrupt file)");

  for (SafetensorsEntry& t : tensors) {
    t.begin += data_start;
    t.end += data_start;
  }
  return tensors;
}

SafetensorsFile::SafetensorsFile(const std::string& path) : map_(path) {
  const uint64_t size = map_.size();
  if (size < 8)
    fail(path, "file is " + std::to_string(size) + " bytes, too short for a safetensors header (truncated?)");
  uint64_t n = 0;
  std::memcpy(&n, map_.data(), 8);  // little-endian on every platform trillion targets
  if (n > kMaxHeader) fail(path, "header length " + std::to_string(n) + " is implausible (not a safetensors file?)");
  if (n > size - 8)
    fail(path, "header length " + std::to_string(n) + " exceeds the file (" + std::to_string(size) +
                   " bytes; truncated?)");
  tensors_ = parse_safetensors_header(path, reinterpret_cast<const char*>(map_.data()) + 8, n, size, &metadata_);
  data_start_ = 8 + n;
  index_.reserve(tensors_.size());
  for (size_t i = 0; i < tensors_.size(); ++i) index_.emplace(tensors_[i].name, i);
}

const SafetensorsEntry* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace trillion
