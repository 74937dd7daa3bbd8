#include "store/converter.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/thread_pool.hpp"
#include "config/model_config.hpp"
#include "format/hf_checkpoint.hpp"
#include "format/mapped_file.hpp"
#include "platform/file_sync.hpp"
#include "store/convert_plan.hpp"
#include "store/convert_quantizer.hpp"
#include "store/manifest.hpp"
#include "store/model_store.hpp"
#include "store/progress.hpp"
#include "store/shard_reader.hpp"
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
  if (fd < 0 || !platform::sync_file(fd)) {
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
void write_shard(const PlannedShard& s, const fs::path& dir, Manifest& m, ProgressMeter& meter, Quantizer* quant) {
  ShardWriter w((dir / s.key.file).string());
  std::vector<TensorInfo> infos;
  for (const PlannedTensor& t : s.tensors) {
    const SafetensorsEntry& e = *t.entry;
    t.file->mapping().advise_sequential(e.begin, e.nbytes());
    const Rewrite what = quant ? quant->rewrite(t) : Rewrite::keep;
    if (what == Rewrite::drop) {  // an fp8 matrix's scale_inv: its int8 groups carry their own
      meter.add_bytes(e.nbytes());
    } else if (what == Rewrite::quantize) {
      const QuantizedMatrix q = quant->take(t);
      for (const QuantTensor& qt : q.tensors) {
        StoredTensor st = w.write(ShardTensor{qt.name, qt.dtype, qt.shape, qt.data.data(), qt.weight_shape});
        infos.push_back(TensorInfo{qt.name, s.key.file, qt.dtype, qt.shape, st.offset, st.nbytes, st.checksum,
                                   qt.weight_shape});
      }
      meter.add_bytes(e.nbytes());
    } else {
      if (quant) quant->kept(t);
      StoredTensor st = w.write(ShardTensor{e.name, e.dtype, e.shape, t.file->data(e), t.weight_shape},
                                [&](uint64_t n) { meter.add_bytes(n); });
      infos.push_back(TensorInfo{e.name, s.key.file, e.dtype, e.shape, st.offset, st.nbytes, st.checksum,
                                 t.weight_shape});
    }
    t.file->mapping().advise_done(e.begin, e.nbytes());
    meter.item_done();
  }
  const uint64_t bytes = w.finish();
  ShardInfo info{s.key.file, bytes, s.key.role, s.key.layer, s.key.expert_first, s.key.expert_last, std::nullopt};
  {
    std::vector<const TensorInfo*> ptrs;
    for (const TensorInfo& i : infos) ptrs.push_back(&i);
    const MappedFile written((dir / s.key.file).string());
    info.metadata_checksum = shard_metadata_checksum(written.data(), written.size(), ptrs);
  }
  m.add_shard(std::move(info));
  for (TensorInfo& i : infos) m.add_tensor(std::move(i));
}

// config.json of a quantized model: the checkpoint's, in its key order, with
// trillion's quantization_config (docs/format.md).
void write_quantized_config(const fs::path& in, const fs::path& out, WeightFormat format, WeightFormat from) {
  std::ifstream f(in);
  nlohmann::ordered_json j;
  try {
    j = nlohmann::ordered_json::parse(f);
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(in.string() + ": not valid JSON: " + e.what());
  }
  nlohmann::ordered_json q = {{"quant_method", "trillion"},
                              {"weight_format", to_string(format)},
                              {"quantized_from", to_string(from)}};
  if (format == WeightFormat::fp8_block) {
    q["fmt"] = "e4m3";
    q["weight_block_size"] = {128, 128};
  } else {
    q["group_size"] = 32;
    q["symmetric"] = true;
  }
  q["modules"] = "every linear layer and lm_head; embedding, norms, router and MTP layers unchanged";
  q["method"] = quantization_method(format);
  j["quantization_config"] = std::move(q);
  std::ofstream o(out, std::ios::trunc);
  o << j.dump(2) << "\n";
  o.flush();
  if (!o) throw SystemError(out.string() + ": cannot write");
}

void write_json(const fs::path& path, const nlohmann::json& j) {
  std::ofstream o(path, std::ios::trunc);
  o << j.dump(1) << "\n";
  o.flush();
  if (!o) throw SystemError(path.string() + ": cannot write");
}

}  // namespace

ConvertReport convert_checkpoint(const ConvertOptions& o) {
  if (o.input_dir.empty() || o.output_dir.empty()) throw InputError("convert needs an input and an output directory");
  if (o.experts_per_shard < 1)
    throw InputError("--experts-per-shard must be >= 1, got " + std::to_string(o.experts_per_shard));
  if (o.threads > thread_limit())  // before any thread starts (pid_max is finite)
    throw InputError("--threads " + std::to_string(o.threads) + " exceeds the limit of " +
                     std::to_string(thread_limit()) + " threads (8 per hardware thread, at most " +
                     std::to_string(kMaxThreads) + ")");
  const fs::path in = fs::absolute(o.input_dir).lexically_normal();
  if (!fs::is_directory(in)) throw InputError(o.input_dir + ": not a directory");
  if (fs::exists(o.output_dir) && fs::equivalent(in, o.output_dir))
    throw InputError("output directory is the input directory");

  if (o.quantize && *o.quantize != WeightFormat::int8_group && *o.quantize != WeightFormat::int4_group &&
      *o.quantize != WeightFormat::fp8_block)
    throw InputError(std::string("--quantize must be int8, int4 or fp8, got ") + to_string(*o.quantize));

  ConvertReport report;
  // Everything is validated before the output is touched.
  const ModelConfig cfg = ModelConfig::from_file((in / "config.json").string());
  if (o.quantize)
    if (const std::string why = quantization_refused(cfg, *o.quantize); !why.empty())
      throw InputError("--quantize " + std::string(to_string(*o.quantize)) + ": " + why + " (" +
                       (in / "config.json").string() + " describes a " + to_string(cfg.weight_format) +
                       (cfg.requantized ? " model quantized by trillion" : " checkpoint") +
                       "); convert it without --quantize to keep its " + to_string(cfg.weight_format) + " weights");
  const HfCheckpoint ckpt(in.string());
  ConvertPlan plan = plan_conversion(ckpt, cfg, o.experts_per_shard);
  // What the model directory will hold: with --quantize, the config of the result.
  ModelConfig out_cfg = cfg;
  uint64_t out_bytes = plan.bytes;
  if (o.quantize) {
    out_cfg.weight_format = *o.quantize;
    out_cfg.requantized = true;
    out_cfg.requantized_from = cfg.weight_format;
    out_bytes = quantized_output_bytes(plan, *o.quantize, cfg.weight_format);
  }
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
  const uint64_t needed = out_bytes + uint64_t(plan.tensors) * 2 * 3 * 4096 + (64ull << 20);
  std::error_code ec;
  const fs::space_info space = fs::space(dir, ec);
  if (!ec && space.available < needed)
    throw SystemError(dir.string() + ": not enough disk space: the model needs " + gigabytes(needed) + ", " +
                      gigabytes(space.available) + " available");
  Manifest m;
  m.weight_format = out_cfg.weight_format;
  if (o.quantize) m.quantized_from = to_string(cfg.weight_format);
  m.experts_per_shard = o.experts_per_shard;
  m.source_path = in.string();

  if (o.log) {
    *o.log << "convert: " << in.string() << " (" << to_string(cfg.weight_format) << ", " << plan.tensors
           << " tensors, " << gigabytes(plan.bytes) << ") -> " << plan.shards.size() << " shards in "
           << dir.string();
    if (o.quantize) *o.log << ", linear layers quantized to " << to_string(*o.quantize) << " (" << gigabytes(out_bytes) << ")";
    *o.log << "\n";
  }
  std::optional<ThreadPool> pool;
  std::optional<Quantizer> quant;
  if (o.quantize) {
    pool.emplace(o.threads);
    report.quantization.emplace();
    report.quantization->format = *o.quantize;
    report.quantization->from = cfg.weight_format;
    quant.emplace(*o.quantize, cfg.weight_format, &*pool, &*report.quantization, plan);
  }
  ProgressMeter meter(o.log, "convert", plan.tensors, plan.bytes);
  uint64_t written = 0;
  for (const PlannedShard& s : plan.shards) write_shard(s, dir, m, meter, quant ? &*quant : nullptr);
  for (const TensorInfo& t : m.tensors()) written += t.nbytes;

  for (const char* f : kSideFiles) {
    if (!fs::exists(in / f)) continue;
    if (o.quantize && std::string(f) == "config.json") {
      write_quantized_config(in / f, dir / f, *o.quantize, cfg.weight_format);
      sync_path(dir / f);
      report.copied_files.push_back(f);
      continue;
    }
    if (!fs::copy_file(in / f, dir / f, fs::copy_options::overwrite_existing, ec) || ec)
      throw SystemError((in / f).string() + ": cannot copy into the model: " + ec.message());
    sync_path(dir / f);
    report.copied_files.push_back(f);
  }
  if (report.quantization) {
    write_json(dir / "quantization.json", quantization_json(*report.quantization, in.string()));
    sync_path(dir / "quantization.json");
  }
  m.write((dir / "manifest.json").string());
  sync_path(dir / "manifest.json");
  meter.finish();
  // The result must open as the loader will open it: config.json, manifest
  // and the table of expected tensors agree (checked before publishing).
  if (o.quantize) ModelStore::open(dir.string(), StoreOptions{false});
  // Out of the page cache, so the first run reads the shards in afresh on
  // 2 MiB pages instead of mapping the small ones the writes left
  // (drop_cached_pages says why).
  for (const ShardInfo& s : m.shards()) drop_cached_pages((dir / s.file).string());
  stage.commit();

  report.tensors = int64_t(m.tensors().size());
  report.shards = int64_t(plan.shards.size());
  report.bytes = written;
  report.input_bytes = plan.bytes;
  report.seconds = meter.seconds();
  return report;
}

}  // namespace trillion
