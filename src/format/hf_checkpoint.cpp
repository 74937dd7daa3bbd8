#include "format/hf_checkpoint.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/contained_path.hpp"
#include "common/error.hpp"

namespace trillion {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A Hugging Face hub cache keeps a revision in <repo>/snapshots/<rev>/ as
// symlinks to <repo>/blobs/<hash>: links out of the directory that are the
// cache's own layout, so the index's files may resolve there too.
fs::path hub_blobs(const std::string& dir) {
  std::error_code ec;
  const fs::path real = fs::canonical(dir, ec);
  if (ec || real.parent_path().filename() != "snapshots") return {};
  return real.parent_path().parent_path() / "blobs";
}

}  // namespace

HfCheckpoint::HfCheckpoint(const std::string& dir) : dir_(dir) {
  if (!fs::is_directory(dir)) throw FormatError(dir + ": not a directory (expected a Hugging Face checkpoint)");
  const std::string index = (fs::path(dir) / "model.safetensors.index.json").string();
  const std::string single = (fs::path(dir) / "model.safetensors").string();
  if (fs::exists(index)) {
    read_index(index);
  } else if (fs::exists(single)) {
    read_single(single);
  } else {
    throw FormatError(dir + ": neither model.safetensors.index.json nor model.safetensors found");
  }
  names_.reserve(tensors_.size());
  for (const auto& [name, t] : tensors_) names_.push_back(name);
  std::sort(names_.begin(), names_.end());
}

const HfCheckpoint::Tensor* HfCheckpoint::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

const SafetensorsFile& HfCheckpoint::open_file(const std::string& file_name) {
  auto it = file_index_.find(file_name);
  if (it != file_index_.end()) return *files_[it->second];
  const std::string path = (fs::path(dir_) / file_name).string();
  if (!fs::exists(path))
    throw FormatError(index_path_ + ": names file '" + file_name + "', which does not exist in " + dir_);
  files_.push_back(std::make_unique<SafetensorsFile>(path));
  file_index_.emplace(file_name, files_.size() - 1);
  return *files_.back();
}

void HfCheckpoint::read_index(const std::string& path) {
  index_path_ = path;
  json j;
  {
    std::ifstream in(path);
    if (!in) throw FormatError(path + ": cannot open");
    try {
      j = json::parse(in);
    } catch (const json::exception& e) {
      throw FormatError(path + ": not valid JSON: " + e.what());
    }
  }
  if (!j.is_object()) throw FormatError(path + ": not a JSON object");
  auto wm = j.find("weight_map");
  if (wm == j.end() || !wm->is_object()) throw FormatError(path + ": missing 'weight_map' object");

  for (const auto& [name, file] : wm->items()) {
    if (!file.is_string()) throw FormatError(path + ": weight_map['" + name + "'] is not a file name");
    const std::string f = file.get<std::string>();
    // Files live beside the index; a path elsewhere is a corrupt or hostile index.
    if (const std::string why = outside_reason(dir_, f, hub_blobs(dir_)); !why.empty())
      throw FormatError(path + ": weight_map['" + name + "'] = '" + f + "' " + why +
                        ": not a file name of the checkpoint directory");
    const SafetensorsFile& sf = open_file(f);
    const SafetensorsEntry* e = sf.find(name);
    if (!e)
      throw FormatError(path + ": places tensor '" + name + "' in " + f + ", but " + sf.path() +
                        " has no such tensor");
    tensors_.emplace(name, Tensor{&sf, e});
    total_bytes_ += e->nbytes();
  }

  // Tensors present in a file but absent from the index are invisible to HF's
  // loader too; say so rather than silently dropping or adding them.
  size_t unlisted = 0;
  std::string example;
  for (const auto& f : files_)
    for (const SafetensorsEntry& e : f->tensors()) {
      auto it = tensors_.find(e.name);
      if (it == tensors_.end() || it->second.file != f.get()) {
        if (!unlisted++) example = e.name + " in " + f->path();
      }
    }
  if (unlisted)
    warnings_.push_back(path + ": " + std::to_string(unlisted) +
                        " tensor(s) in the safetensors files are not in the index and are ignored (e.g. " +
                        example + ")");

  if (auto md = j.find("metadata"); md != j.end() && md->is_object()) {
    auto ts = md->find("total_size");
    if (ts != md->end() && ts->is_number() && ts->get<double>() != double(total_bytes_))
      warnings_.push_back(path + ": metadata.total_size is " + ts->dump() + " but the indexed tensors hold " +
                          std::to_string(total_bytes_) + " bytes");
  }
}

void HfCheckpoint::read_single(const std::string& path) {
  index_path_ = path;
  files_.push_back(std::make_unique<SafetensorsFile>(path));
  file_index_.emplace("model.safetensors", 0);
  for (const SafetensorsEntry& e : files_[0]->tensors()) {
    tensors_.emplace(e.name, Tensor{files_[0].get(), &e});
    total_bytes_ += e.nbytes();
  }
}

}  // namespace trillion
