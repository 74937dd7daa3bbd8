#include "synthetic_hf.hpp"

#include <stdlib.h>
#include <unistd.h>  // mkdtemp: glibc declares it in stdlib.h, macOS here

#include <filesystem>
#include <stdexcept>

#include "common/dtype.hpp"
#include "config/model_config.hpp"
#include "format/hf_tensors.hpp"

namespace trillion::test {

namespace fs = std::filesystem;

TempDir::TempDir() {
  std::string tmpl = (fs::temp_directory_path() / "trillion-store-test-XXXXXX").string();
  if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

nlohmann::json tiny_config(const std::string& format, int mtp_layers) {
  nlohmann::json c = {
      {"architectures", {"DeepseekV3ForCausalLM"}},
      {"model_type", "deepseek_v3"},
      {"vocab_size", 64},
      {"hidden_size", 64},
      {"intermediate_size", 96},
      {"moe_intermediate_size", 32},
      {"num_hidden_layers", 3},
      {"num_nextn_predict_layers", mtp_layers},
      {"first_k_dense_replace", 1},
      {"moe_layer_freq", 1},
      {"num_attention_heads", 2},
      {"num_key_value_heads", 2},
      {"q_lora_rank", 48},
      {"kv_lora_rank", 32},
      {"qk_nope_head_dim", 16},
      {"qk_rope_head_dim", 8},
      {"v_head_dim", 16},
      {"n_routed_experts", 10},
      {"n_shared_experts", 1},
      {"num_experts_per_tok", 2},
      {"n_group", 2},
      {"topk_group", 1},
      {"norm_topk_prob", true},
      {"routed_scaling_factor", 2.5},
      {"scoring_func", "sigmoid"},
      {"topk_method", "noaux_tc"},
      {"rms_norm_eps", 1e-6},
      {"rope_theta", 10000},
      {"max_position_embeddings", 256},
      {"bos_token_id", 0},
      {"eos_token_id", 1},
      {"tie_word_embeddings", false},
  };
  if (format == "fp8") {
    c["quantization_config"] = {{"quant_method", "fp8"},
                                {"fmt", "e4m3"},
                                {"activation_scheme", "dynamic"},
                                {"weight_block_size", {128, 128}}};
  } else if (format == "int4") {
    c["model_type"] = "kimi_k2";
    c["quantization_config"] = {
        {"quant_method", "compressed-tensors"},
        {"format", "pack-quantized"},
        {"config_groups",
         {{"group_0",
           {{"targets", {"Linear"}},
            {"weights",
             {{"num_bits", 4}, {"group_size", 32}, {"symmetric", true}, {"type", "int"}, {"strategy", "group"}}}}}}},
        {"ignore", {"lm_head", "re:.*self_attn.*", "re:.*shared_experts.*", "re:.*mlp\\.(gate|up|gate_up|down)_proj.*"}}};
  } else if (format != "bf16") {
    throw std::invalid_argument("format " + format);
  }
  return c;
}

std::vector<std::string> mtp_tensor_names(int64_t l) {
  const std::string p = "model.layers." + std::to_string(l) + ".";
  return {p + "enorm.weight", p + "hnorm.weight", p + "eh_proj.weight", p + "input_layernorm.weight",
          p + "mlp.gate.weight", p + "mlp.experts.0.gate_proj.weight", p + "mlp.experts.5.down_proj.weight"};
}

std::vector<StTensor> write_synthetic_checkpoint(const std::string& dir, const nlohmann::json& config,
                                                 const SyntheticOptions& opts) {
  fs::create_directories(dir);
  write_text(dir + "/config.json", config.dump(2));
  write_text(dir + "/tokenizer.json", "{\"model\": {\"type\": \"BPE\"}}");
  write_text(dir + "/tokenizer_config.json", "{\"bos_token\": \"<s>\"}");
  write_text(dir + "/generation_config.json", "{\"temperature\": 0.6}");

  const ModelConfig cfg = ModelConfig::from_json(config, "config.json");
  std::vector<StTensor> tensors;
  uint64_t seed = 1;
  for (const ExpectedTensor& e : expected_hf_tensors(cfg)) {
    StTensor t{e.name, dtype_name(e.dtypes.front()), e.shape, {}};
    if (e.attribute_only) {  // weight_shape: the unpacked [out, in] of its weight_packed sibling
      const StTensor& packed = tensors[tensors.size() - 2];
      int32_t v[2] = {int32_t(packed.shape[0]), int32_t(packed.shape[1] * 8)};
      t.data.assign(reinterpret_cast<uint8_t*>(v), reinterpret_cast<uint8_t*>(v) + 8);
    } else {
      size_t n = dtype_size(e.dtypes.front());
      for (int64_t d : e.shape) n *= size_t(d);
      t.data = random_bytes(n, seed++);
    }
    tensors.push_back(std::move(t));
  }
  if (opts.mtp) {
    const int64_t l = cfg.num_hidden_layers, d = cfg.hidden_size, m = cfg.moe_intermediate_size;
    const auto names = mtp_tensor_names(l);
    const std::vector<std::vector<int64_t>> shapes = {{d}, {d}, {d, 2 * d}, {d}, {cfg.n_routed_experts, d},
                                                      {m, d}, {d, m}};
    for (size_t i = 0; i < names.size(); ++i) {
      size_t n = 2;
      for (int64_t x : shapes[i]) n *= size_t(x);
      tensors.push_back(StTensor{names[i], "BF16", shapes[i], random_bytes(n, seed++)});
    }
  }
  if (opts.mutate) opts.mutate(tensors);

  if (opts.files == 1) {
    write_safetensors(dir + "/model.safetensors", tensors);
    return tensors;
  }
  // Round-robin over files, as HF's sharding spreads a model; the index maps each name.
  std::vector<std::vector<StTensor>> parts(size_t(opts.files));
  nlohmann::json weight_map = nlohmann::json::object();
  uint64_t total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const size_t f = i % parts.size();
    char name[64];
    std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", f + 1, parts.size());
    weight_map[tensors[i].name] = name;
    total += tensors[i].data.size();
    parts[f].push_back(tensors[i]);
  }
  for (size_t f = 0; f < parts.size(); ++f) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", f + 1, parts.size());
    write_safetensors(dir + "/" + name, parts[f]);
  }
  write_text(dir + "/model.safetensors.index.json",
             nlohmann::json{{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}}.dump(1));
  return tensors;
}

}  // namespace trillion::test
