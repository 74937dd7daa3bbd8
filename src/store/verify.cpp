// verify_model and its printing: the --verify half of `trillion inspect`.
#include <filesystem>

#include <nlohmann/json.hpp>

#include "common/checksum.hpp"
#include "store/inspect.hpp"
#include "store/progress.hpp"
#include "store/shard_reader.hpp"

namespace trillion {

VerifyReport verify_model(const ModelStore& store, std::ostream* progress) {
  const Manifest& m = store.manifest();
  uint64_t total = 0;
  for (const TensorInfo& t : m.tensors()) total += t.nbytes;
  ProgressMeter meter(progress, "verify", int64_t(m.tensors().size()), total);
  VerifyReport r;
  for (const ShardInfo& sh : m.shards()) {
    const std::string path = (std::filesystem::path(store.dir()) / sh.file).string();
    const std::vector<const TensorInfo*> tensors = m.tensors_of(sh.file);
    std::vector<ShardProblem> problems = check_shard(path, sh, tensors);
    bool file_ok = true;
    for (const ShardProblem& p : problems) {
      r.problems.push_back({path, p.tensor, p.message});
      file_ok &= !p.tensor.empty();
    }
    if (!file_ok) continue;  // missing, wrong size or not HDF5: nothing to hash
    const MappedFile map(path);
    for (const TensorInfo* t : tensors) {
      bool dataset_bad = false;
      for (const ShardProblem& p : problems) dataset_bad |= p.tensor == t->name;
      if (dataset_bad) continue;
      const uint64_t h = xxh64(map.data() + t->offset, t->nbytes);
      map.advise_done(t->offset, t->nbytes);  // stream: a model larger than RAM must not pile up
      if (h != t->checksum)
        r.problems.push_back({path, t->name, "checksum mismatch: data hash to " + checksum_string(h) +
                                                 ", manifest.json says " + checksum_string(t->checksum)});
      else
        ++r.tensors;
      r.bytes += t->nbytes;
      meter.add_bytes(t->nbytes);
      meter.item_done();
    }
  }
  meter.finish();
  r.seconds = meter.seconds();
  return r;
}

void print_verify(std::ostream& out, const VerifyReport& r) {
  for (const VerifyProblem& p : r.problems)
    out << "FAILED " << p.file << (p.tensor.empty() ? "" : ": tensor '" + p.tensor + "'") << ": " << p.message << "\n";
  char buf[160];
  std::snprintf(buf, sizeof buf, "verify: %lld tensors, %.2f GB hashed in %.1f s (%.0f MB/s): ", (long long)r.tensors,
                double(r.bytes) / 1e9, r.seconds, r.seconds > 0 ? double(r.bytes) / 1e6 / r.seconds : 0.0);
  out << buf << (r.ok() ? "OK" : std::to_string(r.problems.size()) + " problem(s)") << "\n";
}

nlohmann::json verify_json(const VerifyReport& r) {
  nlohmann::json problems = nlohmann::json::array();
  for (const VerifyProblem& p : r.problems)
    problems.push_back({{"file", p.file}, {"tensor", p.tensor}, {"message", p.message}});
  return {{"ok", r.ok()}, {"tensors", r.tensors}, {"bytes", r.bytes}, {"seconds", r.seconds}, {"problems", problems}};
}

}  // namespace trillion
