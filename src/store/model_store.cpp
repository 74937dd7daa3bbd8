#include "store/model_store.hpp"

#include <filesystem>
#include <mutex>
#include <unordered_map>

#include "common/contained_path.hpp"
#include "common/error.hpp"
#include "format/config_extent.hpp"
#include "format/hf_tensors.hpp"
#include "store/manifest.hpp"
#include "store/shard_reader.hpp"

namespace trillion {

namespace {

// The manifest must hold every tensor config.json implies, as the converter
// would have stored it; so code downstream never meets a half-described model.
void check_complete(const Manifest& m, const ModelConfig& cfg, const std::string& config_path,
                    const std::string& source) {
  if (m.weight_format != cfg.weight_format)
    throw FormatError(source + ": weight_format is " + to_string(m.weight_format) + " but config.json describes a " +
                      to_string(cfg.weight_format) + " checkpoint");
  if (m.quantized_from.empty() == cfg.requantized)
    throw FormatError(source + (cfg.requantized ? ": quantized_from is missing but config.json says the weights were"
                                                  " quantized by trillion convert --quantize"
                                                : ": quantized_from is set but config.json has no trillion"
                                                  " quantization_config"));
  if (cfg.requantized && m.quantized_from != to_string(cfg.requantized_from))
    throw FormatError(source + ": quantized_from is " + m.quantized_from + " but config.json says " +
                      to_string(cfg.requantized_from));
  std::vector<std::string> names;
  names.reserve(m.tensors().size());
  for (const TensorInfo& t : m.tensors()) names.push_back(t.name);
  check_config_extent(cfg, names, config_path, source);  // before the table the config's counts size
  for (const ExpectedTensor& e : expected_hf_tensors(cfg)) {
    if (e.attribute_only) {
      const TensorInfo* packed = m.find_tensor(packed_name_for_shape(e.name));
      if (packed && (packed->weight_shape.size() != 2 || packed->shape.size() != 2 ||
                     packed->weight_shape != std::vector<int64_t>{packed->shape[0], packed->shape[1] * 8}))
        throw FormatError(source + ": tensor '" + packed->name + "': weight_shape " +
                          shape_string(packed->weight_shape) + " does not match its packed shape " +
                          shape_string(packed->shape));
      continue;
    }
    const TensorInfo* t = m.find_tensor(e.name);
    if (!t) throw FormatError(source + ": tensor '" + e.name + "' is missing (config.json expects it)");
    if (t->shape != e.shape)
      throw FormatError(source + ": tensor '" + e.name + "' has shape " + shape_string(t->shape) +
                        ", config.json implies " + shape_string(e.shape));
    bool dtype_ok = false;
    for (DType d : e.dtypes) dtype_ok |= d == t->dtype;
    if (!dtype_ok)
      throw FormatError(source + ": tensor '" + e.name + "' has dtype " + dtype_name(t->dtype) + ", expected " +
                        dtype_name(e.dtypes.front()));
  }
}

// The one link out of a model directory that is allowed: a shard linked
// from another converted model (a directory with its own manifest.json),
// as a variant of a model with other tokenizer files, or a host's shards
// kept on another disk, shares them. Its directory, or empty.
std::filesystem::path shared_model_dir(const std::string& dir, const std::string& file) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path p = fs::path(dir) / file;
  if (!fs::is_symlink(p, ec)) return {};
  const fs::path real = fs::canonical(p, ec);
  if (ec || !fs::is_regular_file(real, ec) || !fs::exists(real.parent_path() / "manifest.json", ec)) return {};
  return real.parent_path();
}

}  // namespace

struct ModelStore::Impl {
  std::string dir;
  std::string manifest_path;
  StoreOptions opts;
  ModelConfig config;
  Manifest manifest;

  // Guards everything below: shards are opened lazily from any thread.
  mutable std::mutex mu;
  std::unordered_map<std::string, std::unique_ptr<MappedShard>> shards;
  std::vector<std::string> opened;    // in opening order
  std::vector<uint8_t> verified;      // per manifest tensor: checksum already confirmed
  size_t mapped = 0;

  const MappedShard& shard(const TensorInfo& t) {
    auto it = shards.find(t.shard);
    if (it != shards.end()) return *it->second;
    const ShardInfo* info = manifest.find_shard(t.shard);  // from_json guarantees it exists
    auto s = std::make_unique<MappedShard>(dir, *info, manifest.tensors_of(t.shard));
    mapped += s->size();
    opened.push_back(t.shard);
    return *shards.emplace(t.shard, std::move(s)).first->second;
  }
};

ModelStore::ModelStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ModelStore::~ModelStore() = default;

std::unique_ptr<ModelStore> ModelStore::open(const std::string& dir, StoreOptions opts) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(dir)) throw FormatError(dir + ": not a directory (expected a converted model)");
  auto impl = std::make_unique<Impl>();
  impl->dir = dir;
  impl->opts = opts;
  const std::string config_path = (fs::path(dir) / "config.json").string();
  impl->config = ModelConfig::from_file(config_path);
  impl->manifest_path = (fs::path(dir) / "manifest.json").string();
  impl->manifest = Manifest::read(impl->manifest_path);
  check_complete(impl->manifest, impl->config, config_path, impl->manifest_path);
  // The manifest names its shards; none may lead out of the model directory
  // (Manifest::from_json has refused separators; this catches symlinks).
  for (const ShardInfo& s : impl->manifest.shards())
    if (const std::string why = outside_reason(dir, s.file, shared_model_dir(dir, s.file)); !why.empty())
      throw FormatError(impl->manifest_path + ": shard '" + s.file + "' " + why +
                        ": not a file name of the model directory");
  impl->verified.assign(impl->manifest.tensors().size(), 0);
  return std::unique_ptr<ModelStore>(new ModelStore(std::move(impl)));
}

const std::string& ModelStore::dir() const { return impl_->dir; }
const ModelConfig& ModelStore::config() const { return impl_->config; }
const Manifest& ModelStore::manifest() const { return impl_->manifest; }

bool ModelStore::has(const std::string& name) const { return impl_->manifest.find_tensor(name) != nullptr; }

TensorView ModelStore::tensor(const std::string& name) {
  Impl& m = *impl_;
  const TensorInfo* t = m.manifest.find_tensor(name);
  if (!t) throw FormatError(m.manifest_path + ": no tensor '" + name + "' in this model");
  std::lock_guard<std::mutex> lock(m.mu);
  const MappedShard* shard_ptr = nullptr;
  try {
    shard_ptr = &m.shard(*t);
  } catch (const FormatError& e) {
    const std::string msg = e.what();
    if (msg.find("'" + name + "'") != std::string::npos) throw;
    throw FormatError(msg + " (needed for tensor '" + name + "')");
  }
  const MappedShard& shard = *shard_ptr;
  const std::byte* data = shard.data(*t);
  const size_t index = size_t(t - m.manifest.tensors().data());
  if (m.opts.verify_checksums && !m.verified[index]) {
    verify_checksum(shard.path(), *t, data);
    m.verified[index] = 1;
  }
  return TensorView{t->name, t->dtype, t->shape, data, t->nbytes};
}

std::vector<std::string> ModelStore::opened_shards() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->opened;
}

size_t ModelStore::mapped_bytes() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->mapped;
}

}  // namespace trillion
