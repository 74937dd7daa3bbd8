#include "store/manifest.hpp"

#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/checksum.hpp"
#include "common/contained_path.hpp"
#include "common/error.hpp"
#include "store/hdf5_util.hpp"

namespace trillion {

using nlohmann::json;

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::optional<uint64_t> parse_checksum(const std::string& s) {
  static const std::string kPrefix = "xxh64:";
  if (s.size() != kPrefix.size() + 16 || s.compare(0, kPrefix.size(), kPrefix) != 0) return std::nullopt;
  uint64_t v = 0;
  for (size_t i = kPrefix.size(); i < s.size(); ++i) {
    char c = s[i];
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return std::nullopt;
    v = v << 4 | uint64_t(d);
  }
  return v;
}

void Manifest::add_shard(ShardInfo s) {
  if (shard_index_.count(s.file)) throw FormatError("manifest: shard '" + s.file + "' listed twice");
  shard_index_.emplace(s.file, shards_.size());
  shards_.push_back(std::move(s));
  shard_tensors_.emplace_back();
}

void Manifest::add_tensor(TensorInfo t) {
  auto shard = shard_index_.find(t.shard);
  if (shard == shard_index_.end())
    throw FormatError("manifest: tensor '" + t.name + "' names unknown shard '" + t.shard + "'");
  if (tensor_index_.count(t.name)) throw FormatError("manifest: tensor '" + t.name + "' listed twice");
  shard_tensors_[shard->second].push_back(tensors_.size());
  tensor_index_.emplace(t.name, tensors_.size());
  tensors_.push_back(std::move(t));
}

ShardInfo& Manifest::shard_mut(const std::string& file) {
  auto it = shard_index_.find(file);
  if (it == shard_index_.end()) throw FormatError("manifest: unknown shard '" + file + "'");
  return shards_[it->second];
}

const ShardInfo* Manifest::find_shard(const std::string& file) const {
  auto it = shard_index_.find(file);
  return it == shard_index_.end() ? nullptr : &shards_[it->second];
}

const TensorInfo* Manifest::find_tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

std::vector<const TensorInfo*> Manifest::tensors_of(const std::string& file) const {
  std::vector<const TensorInfo*> out;
  auto it = shard_index_.find(file);
  if (it == shard_index_.end()) return out;
  for (size_t i : shard_tensors_[it->second]) out.push_back(&tensors_[i]);
  std::sort(out.begin(), out.end(), [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
  return out;
}

json Manifest::to_json() const {
  json shards = json::array();
  for (const ShardInfo& s : shards_) {
    json e = {{"file", s.file}, {"bytes", s.bytes}, {"role", to_string(s.role)}};
    if (s.layer >= 0) e["layer"] = s.layer;
    if (s.expert_first >= 0) e["experts"] = {s.expert_first, s.expert_last};
    if (s.metadata_checksum) e["metadata_checksum"] = checksum_string(*s.metadata_checksum);
    shards.push_back(std::move(e));
  }
  json tensors = json::object();
  for (const TensorInfo& t : tensors_) {
    json e = {{"shard", t.shard},   {"dtype", dtype_name(t.dtype)}, {"shape", t.shape},
              {"offset", t.offset}, {"nbytes", t.nbytes},           {"checksum", checksum_string(t.checksum)}};
    if (!t.weight_shape.empty()) e["weight_shape"] = t.weight_shape;
    tensors[t.name] = std::move(e);
  }
  json out{{"format", kFormatName},
           {"format_version", kFormatVersion},
           {"weight_format", to_string(weight_format)},
           {"experts_per_shard", experts_per_shard},
           {"source", {{"path", source_path}}},
           {"shards", std::move(shards)},
           {"tensors", std::move(tensors)}};
  if (!quantized_from.empty()) out["quantized_from"] = quantized_from;
  return out;
}

namespace {

// Field access that names the manifest and the entry on every failure.
struct Fields {
  const json& j;
  const std::string& where;  // "manifest.json: shard 'x.h5'"

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw FormatError(where + ": '" + key + "' " + what);
  }
  const json& need(const std::string& key) const {
    auto it = j.find(key);
    if (it == j.end()) fail(key, "is missing");
    return *it;
  }
  std::string str(const std::string& key) const {
    const json& v = need(key);
    if (!v.is_string()) fail(key, "must be a string, got " + v.dump());
    return v.get<std::string>();
  }
  int64_t integer(const std::string& key, int64_t min) const {
    const json& v = need(key);
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)))
      fail(key, "must be an integer, got " + v.dump());
    int64_t x = v.get<int64_t>();
    if (x < min) fail(key, "must be >= " + std::to_string(min) + ", got " + std::to_string(x));
    return x;
  }
  std::vector<int64_t> ints(const std::string& key, int64_t min) const {
    const json& v = need(key);
    if (!v.is_array()) fail(key, "must be an array, got " + v.dump());
    std::vector<int64_t> out;
    for (const json& e : v) {
      if (!e.is_number_integer() || e.get<int64_t>() < min)
        fail(key, "must hold integers >= " + std::to_string(min) + ", got " + v.dump());
      out.push_back(e.get<int64_t>());
    }
    return out;
  }
};

}  // namespace

Manifest Manifest::from_json(const json& j, const std::string& source) {
  if (!j.is_object()) throw FormatError(source + ": not a JSON object");
  Fields top{j, source};
  if (top.str("format") != kFormatName) top.fail("format", "must be \"" + std::string(kFormatName) + "\"");
  if (int64_t v = top.integer("format_version", 0); v != kFormatVersion)
    top.fail("format_version", "is " + std::to_string(v) + "; this trillion reads version " +
                                   std::to_string(kFormatVersion) + " (convert the model again)");
  Manifest m;
  try {
    m.weight_format = weight_format_from_string(top.str("weight_format"));
  } catch (const ConfigError& e) {
    throw FormatError(source + ": " + e.what());
  }
  m.experts_per_shard = top.integer("experts_per_shard", 1);
  if (j.contains("quantized_from")) {
    m.quantized_from = top.str("quantized_from");
    if (m.quantized_from != "bf16" && m.quantized_from != "fp8")
      top.fail("quantized_from", "must be \"bf16\" or \"fp8\" (the formats trillion quantizes from)");
    if (const std::string why =
            quantization_path_refused(weight_format_from_string(m.quantized_from), m.weight_format);
        !why.empty())
      top.fail("quantized_from", "is " + m.quantized_from + " with weight_format " + to_string(m.weight_format) + ": " +
                                     why);
  }
  if (auto s = j.find("source"); s != j.end() && s->is_object() && s->contains("path") && (*s)["path"].is_string())
    m.source_path = (*s)["path"].get<std::string>();

  const json& shards = top.need("shards");
  if (!shards.is_array()) top.fail("shards", "must be an array");
  for (const json& e : shards) {
    if (!e.is_object()) top.fail("shards", "must hold objects, got " + e.dump());
    const std::string file = e.contains("file") && e["file"].is_string() ? e["file"].get<std::string>() : "?";
    const std::string where = source + ": shard '" + file + "'";
    Fields f{e, where};
    ShardInfo s;
    s.file = f.str("file");
    if (const std::string why = file_name_problem(s.file); !why.empty())
      f.fail("file", why + ": must be a file name inside the model directory");
    s.bytes = uint64_t(f.integer("bytes", 0));
    try {
      s.role = tensor_role_from_string(f.str("role"));
    } catch (const FormatError&) {
      f.fail("role", "is not one of embed, head, layer, experts, mtp, mtp_experts");
    }
    const bool in_layer = s.role != TensorRole::embed && s.role != TensorRole::head;
    if (in_layer) s.layer = f.integer("layer", 0);
    if (s.role == TensorRole::experts || s.role == TensorRole::mtp_experts) {
      std::vector<int64_t> r = f.ints("experts", 0);
      if (r.size() != 2 || r[0] > r[1]) f.fail("experts", "must be [first, last] with first <= last");
      s.expert_first = r[0];
      s.expert_last = r[1];
    }
    if (e.contains("metadata_checksum")) {
      auto sum = parse_checksum(f.str("metadata_checksum"));
      if (!sum) f.fail("metadata_checksum", "must be \"xxh64:\" and 16 lowercase hex digits");
      s.metadata_checksum = *sum;
    }
    if (m.find_shard(s.file)) throw FormatError(where + ": listed twice");
    m.add_shard(std::move(s));
  }

  const json& tensors = top.need("tensors");
  if (!tensors.is_object()) top.fail("tensors", "must be an object");
  std::vector<TensorInfo> list;
  list.reserve(tensors.size());
  for (const auto& [name, e] : tensors.items()) {
    const std::string where = source + ": tensor '" + name + "'";
    if (!e.is_object()) throw FormatError(where + ": entry is not an object");
    Fields f{e, where};
    TensorInfo t;
    t.name = name;
    t.shard = f.str("shard");
    const ShardInfo* shard = m.find_shard(t.shard);
    if (!shard) f.fail("shard", "names '" + t.shard + "', which is not in \"shards\"");
    try {
      t.dtype = dtype_from_name(f.str("dtype"));
    } catch (const FormatError&) {
      f.fail("dtype", "is not a known dtype");
    }
    t.shape = f.ints("shape", 1);
    t.offset = uint64_t(f.integer("offset", 0));
    t.nbytes = uint64_t(f.integer("nbytes", 1));
    uint64_t expect = dtype_size(t.dtype);
    for (int64_t d : t.shape)
      if (__builtin_mul_overflow(expect, uint64_t(d), &expect)) f.fail("shape", "overflows 64 bits");
    if (t.nbytes != expect)
      f.fail("nbytes", "is " + std::to_string(t.nbytes) + " but the shape and dtype need " + std::to_string(expect));
    if (t.offset > shard->bytes || t.nbytes > shard->bytes - t.offset)
      f.fail("offset", "range [" + std::to_string(t.offset) + ", +" + std::to_string(t.nbytes) +
                           ") lies outside shard '" + t.shard + "' (" + std::to_string(shard->bytes) + " bytes)");
    auto sum = parse_checksum(f.str("checksum"));
    if (!sum) f.fail("checksum", "must be \"xxh64:\" and 16 lowercase hex digits");
    t.checksum = *sum;
    if (e.contains("weight_shape")) {
      t.weight_shape = f.ints("weight_shape", 1);
      if (t.weight_shape.size() != 2) f.fail("weight_shape", "must be [out, in]");
    }
    list.push_back(std::move(t));
  }
  // Shard order, then file order: iteration follows the bytes on disk.
  std::unordered_map<std::string, size_t> rank;
  for (size_t i = 0; i < m.shards_.size(); ++i) rank[m.shards_[i].file] = i;
  std::sort(list.begin(), list.end(), [&](const TensorInfo& a, const TensorInfo& b) {
    size_t ra = rank[a.shard], rb = rank[b.shard];
    return ra != rb ? ra < rb : a.offset < b.offset;
  });
  for (TensorInfo& t : list) m.add_tensor(std::move(t));
  return m;
}

Manifest Manifest::read(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw FormatError(path + ": cannot open (not a converted trillion model directory?)");
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& e) {
    throw FormatError(path + ": not valid JSON: " + e.what());
  }
  return from_json(j, path);
}

void Manifest::write(const std::string& path) const {
  std::ofstream out(path, std::ios::trunc);
  out << to_json().dump(1) << "\n";
  out.flush();
  if (!out) throw SystemError(path + ": cannot write");
}

}  // namespace trillion
