#include "store/converter.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "common/error.hpp"
#include "config/model_config.hpp"
#include "format/hf_checkpoint.hpp"
#include "store/convert_plan.hpp"
#include "store/manifest.hpp"
#include "store/progress.hpp"
#include "store/shard_writer.hpp"
#include "store/staging_dir.hpp"

namespace trillion {

namespace fs = std::filesystem;

namespace {

// Copied verbatim when present: the tokenizer and chat template of both families.
const char* const kSideFiles[] = {"config.json",           "tokenizer.json",          "tokenizer_config.json",
                                  "tiktoken.model",        "special_tokens_map.json", "generation_config.json",
                                  "chat_template.jinja"};

void sync_path(const fs::path& p) {
  int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::fsync(fd) != 0) {
    if (fd >= 0) ::close(fd);
    throw SystemError(p.string() + ": cannot sync to disk");
  }
  ::close(fd);
}

std::string gigabytes(uint64_t b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GB", double(b) / 1e9);
  return buf;
}

void warn(const ConvertOptions& o, ConvertReport& r, const std::string& w) {
  r.warnings.push_back(w);
  if (o.log) *o.log << "convert: warning: " << w << "\n";
}

// Writes one planned shard and adds it and its tensors to the manifest.
void write_shard(const PlannedShard& s, const fs::path& dir, Manifest& m, ProgressMeter& meter) {
  ShardWriter w((dir / s.key.file).string());
  std::vector<TensorInfo> infos;
  for (const PlannedTensor& t : s.tensors) {
    const SafetensorsEntry& e = *t.entry;
    t.file->mapping().advise_sequential(e.begin, e.nbytes());
    StoredTensor st = w.write(ShardTensor{e.name, e.dtype, e.shape, t.file->data(e), t.weight_shape},
                              [&](uint64_t n) { meter.add_bytes(n); });
    t.file->mapping().advise_done(e.begin, e.nbytes());
    infos.push_back(TensorInfo{e.name, s.key.file, e.dtype, e.shape, st.offset, st.nbytes, st.checksum,
                               t.weight_shape});
    meter.item_done();
  }
  const uint64_t bytes = w.finish();
  m.add_shard(ShardInfo{s.key.file, bytes, s.key.role, s.key.layer, s.key.expert_first, s.key.expert_last});
  for (TensorInfo& i : infos) m.add_tensor(std::move(i));
}

}  // namespace

ConvertReport convert_checkpoint(const ConvertOptions& o) {
  if (o.input_dir.empty() || o.output_dir.empty()) throw InputError("convert needs an input and an output directory");
  if (o.experts_per_shard < 1)
    throw InputError("--experts-per-shard must be >= 1, got " + std::to_string(o.experts_per_shard));
  const fs::path in = fs::absolute(o.input_dir).lexically_normal();
  if (!fs::is_directory(in)) throw InputError(o.input_dir + ": not a directory");
  if (fs::exists(o.output_dir) && fs::equivalent(in, o.output_dir))
    throw InputError("output directory is the input directory");

  ConvertReport report;
  // Everything is validated before the output is touched.
  const ModelConfig cfg = ModelConfig::from_file((in / "config.json").string());
  const HfCheckpoint ckpt(in.string());
  ConvertPlan plan = plan_conversion(ckpt, cfg, o.experts_per_shard);
  for (const std::string& w : ckpt.warnings()) warn(o, report, w);
  for (const std::string& w : plan.warnings) warn(o, report, w);

  bool tokenizer = false;
  for (const char* f : {"tokenizer.json", "tiktoken.model"}) tokenizer |= fs::exists(in / f);
  if (!tokenizer)
    warn(o, report, "no tokenizer.json or tiktoken.model in " + in.string() +
                        ": the model can score token ids but not read or write text");

  StagingDir stage(o.output_dir, o.force, o.log);
  const fs::path dir = stage.path();
  // Fail now rather than hours in: the shards need the tensor bytes plus HDF5's
  // metadata and alignment padding (at most a few pages per tensor).
  const uint64_t needed = plan.bytes + uint64_t(plan.tensors) * 3 * 4096 + (64ull << 20);
  std::error_code ec;
  const fs::space_info space = fs::space(dir, ec);
  if (!ec && space.available < needed)
    throw SystemError(dir.string() + ": not enough disk space: the model needs " + gigabytes(needed) + ", " +
                      gigabytes(space.available) + " available");
  Manifest m;
  m.weight_format = cfg.weight_format;
  m.experts_per_shard = o.experts_per_shard;
  m.source_path = in.string();

  if (o.log)
    *o.log << "convert: " << in.string() << " (" << to_string(cfg.weight_format) << ", " << plan.tensors
           << " tensors, " << gigabytes(plan.bytes) << ") -> " << plan.shards.size() << " shards in "
           << dir.string() << "\n";
  ProgressMeter meter(o.log, "convert", plan.tensors, plan.bytes);
  for (const PlannedShard& s : plan.shards) write_shard(s, dir, m, meter);

  for (const char* f : kSideFiles) {
    if (!fs::exists(in / f)) continue;
    if (!fs::copy_file(in / f, dir / f, fs::copy_options::overwrite_existing, ec) || ec)
      throw SystemError((in / f).string() + ": cannot copy into the model: " + ec.message());
    sync_path(dir / f);
    report.copied_files.push_back(f);
  }
  m.write((dir / "manifest.json").string());
  sync_path(dir / "manifest.json");
  meter.finish();
  stage.commit();

  report.tensors = plan.tensors;
  report.shards = int64_t(plan.shards.size());
  report.bytes = plan.bytes;
  report.seconds = meter.seconds();
  return report;
}

}  // namespace trillion
