// hf_logits: runs the forward pass on a Hugging Face checkpoint directory (no
// conversion: safetensors read in place) and writes each request's logits, for
// comparison with the float64 reference (compare_reference.py).
//   hf_logits MODEL_DIR REQUESTS.jsonl OUT_DIR [threads] [f32|int8|bf16] [ROWS_DIR]
// REQUESTS: one {"id": "...", "token_ids": [...]} per line. All requests run
// as one batch (one slot each, all prefill rows together), then each is
// decoded again alone token by token; writes OUT_DIR/<id>.npy (float32
// [len, vocab]) and exits 1 if decode and batched prefill differ in any bit.
// ROWS_DIR (bf16): the batched prefill's rounded activation rows of every
// linear on the bf16 path, ROWS_DIR/<linear>.npy (float32 [rows, cols], in
// the order computed), which the reference follows where it meets a near
// tie (tests/reference/bf16_path.py, EngineRows).
#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/npy.hpp"
#include "common/numeric.hpp"
#include "format/hf_checkpoint.hpp"
#include "kernels/matmul_bf16.hpp"
#include "model/linear.hpp"
#include "model/transformer.hpp"
#include "store/int8_source.hpp"

using namespace trillion;

namespace {

// Each tensor's name by its bytes' address (the weights are read in place).
std::map<const void*, std::string> tensor_names;

class HfSource : public TensorSource {
 public:
  explicit HfSource(const std::string& dir) : ckpt_(dir) {}
  bool has(const std::string& name) const override { return ckpt_.find(name) != nullptr; }
  TensorView tensor(const std::string& name) override {
    const HfCheckpoint::Tensor* t = ckpt_.find(name);
    if (!t) throw FormatError(ckpt_.index_path() + ": no tensor " + name);
    const SafetensorsEntry& e = *t->entry;
    tensor_names[t->file->data(e)] = name;
    return TensorView{name, e.dtype, e.shape, t->file->data(e), size_t(e.nbytes())};
  }

 private:
  HfCheckpoint ckpt_;
};

// The bf16 path's rounded rows per linear (set_bf16_observer), as floats.
struct Recorded {
  int64_t cols = 0;
  std::vector<float> rows;
};
std::mutex recorded_mutex;
std::map<std::string, Recorded> recorded;

// Products of weights no tensor holds: counted, reported after the forward
// (the observer runs on pool threads, where a throw would end the process
// with no message).
std::atomic<int> unnamed_products{0};

void record(const QMatrix& W, const Bf16Rows& xb) {
  auto it = tensor_names.find(W.data);
  if (it == tensor_names.end()) {
    ++unnamed_products;
    return;
  }
  std::string name = it->second;
  if (name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0) name.resize(name.size() - 7);
  std::lock_guard<std::mutex> lock(recorded_mutex);
  Recorded& r = recorded[name];
  r.cols = xb.cols;
  for (int64_t t = 0; t < xb.n; ++t)
    for (int64_t c = 0; c < xb.cols; ++c) r.rows.push_back(bf16_to_f32(xb.row(t)[c]));
}

struct Request {
  std::string id;
  std::vector<int32_t> tokens;
};

}  // namespace

int main(int argc, char** argv) try {
  if (argc < 4) {
    std::fprintf(stderr,
                 "usage: hf_logits MODEL_DIR REQUESTS.jsonl OUT_DIR [threads] [f32|int8|bf16] [ROWS_DIR] [x86|arm]\n");
    return 2;
  }
  const std::string dir = argv[1], out_dir = argv[3];
  const ModelConfig cfg = ModelConfig::from_file(dir + "/config.json");
  std::vector<Request> reqs;
  std::ifstream in(argv[2]);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line);
    reqs.push_back({j.at("id").get<std::string>(), j.at("token_ids").get<std::vector<int32_t>>()});
  }
  HfSource hf(dir);
  ThreadPool pool(argc > 4 ? std::atoi(argv[4]) : 0);
  const LayerRange all{0, cfg.num_hidden_layers, true, true};
  const Activations act = argc > 5 ? parse_activations(argv[5]) : Activations::f32;  // the compute path
  // As the engine does (app/cluster.cpp): on the integer path an FP8 model's
  // linears and its BF16 lm_head run as int8 groups.
  Int8FromFp8Source int8(hf, &pool);
  TensorSource& source = requantizes_fp8(act, cfg.weight_format) ? static_cast<TensorSource&>(int8) : hf;
  Transformer model(cfg, all, source, pool, nullptr, act);
  int32_t max_len = 1;
  for (const auto& r : reqs) max_len = std::max<int32_t>(max_len, int32_t(r.tokens.size()));
  const int64_t d = cfg.hidden_size, V = cfg.vocab_size;

  Batch batch;
  std::vector<int32_t> tokens;
  for (size_t s = 0; s < reqs.size(); ++s)
    for (size_t p = 0; p < reqs[s].tokens.size(); ++p) {
      batch.rows.push_back({int32_t(s), int32_t(p)});
      tokens.push_back(reqs[s].tokens[p]);
    }
  const int64_t n = batch.size();
  KvCache cache(cfg, all, int32_t(reqs.size()), max_len);
  std::vector<float> x(size_t(n * d)), logits(size_t(n * V));
  const std::string rows_dir = argc > 6 ? argv[6] : "";
  // bf16: the definition of this family (default: the build's; the other in scalar code).
  if (argc > 7) {
    const std::string fam = argv[7];
    if (fam != "x86" && fam != "arm") throw Error("hf_logits: the bf16 family must be x86 or arm, not " + fam);
    set_bf16_family(fam == "arm" ? Bf16Family::arm : Bf16Family::x86);
  }
  if (!rows_dir.empty()) set_bf16_observer(record);
  model.embed(tokens.data(), n, x.data());
  model.forward(batch, x.data(), cache);
  model.logits(x.data(), n, logits.data());
  set_bf16_observer(nullptr);
  if (unnamed_products > 0)
    throw Error("hf_logits: " + std::to_string(unnamed_products.load()) +
                " bf16 products had weights no checkpoint tensor holds: their rows cannot be recorded");
  for (const auto& [name, r] : recorded)
    write_npy_f32(rows_dir + "/" + name + ".npy", r.rows.data(), {int64_t(r.rows.size()) / r.cols, r.cols});

  int mismatches = 0;
  int64_t row0 = 0;
  for (const Request& r : reqs) {
    const int64_t len = int64_t(r.tokens.size());
    write_npy_f32(out_dir + "/" + r.id + ".npy", &logits[size_t(row0 * V)], {len, V});
    KvCache alone(cfg, all, 1, max_len);
    std::vector<float> x1(static_cast<size_t>(d)), l1(static_cast<size_t>(V));
    for (int64_t p = 0; p < len; ++p) {
      model.embed(&r.tokens[size_t(p)], 1, x1.data());
      model.forward(Batch{{{0, int32_t(p)}}}, x1.data(), alone);
      model.logits(x1.data(), 1, l1.data());
      if (std::memcmp(l1.data(), &logits[size_t((row0 + p) * V)], size_t(V) * sizeof(float)) != 0) {
        std::fprintf(stderr, "%s: token %lld decoded alone differs from the batched prefill\n", r.id.c_str(),
                     static_cast<long long>(p));
        ++mismatches;
      }
    }
    row0 += len;
  }
  return mismatches ? 1 : 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "hf_logits: %s\n", e.what());
  return 1;
}
