// Writes synthetic HF checkpoints (bf16 with MTP, fp8, int4) under DIR and
// converts each: DIR/hf-<format>, DIR/model-<format>. Used by the h5py
// cross-check (check_model_h5py.py), which reads the result with an HDF5
// reader that shares no code with trillion.
#include <cstdio>
#include <filesystem>
#include <string>

#include "store/converter.hpp"
#include "synthetic_hf.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_store_fixture DIR\n");
    return 2;
  }
  namespace fs = std::filesystem;
  const std::string dir = argv[1];
  fs::remove_all(dir);
  fs::create_directories(dir);
  try {
    for (const std::string f : {"bf16", "fp8", "int4"}) {
      const bool mtp = f != "fp8";
      trillion::test::write_synthetic_checkpoint(dir + "/hf-" + f, trillion::test::tiny_config(f, mtp ? 1 : 0),
                                                 {.files = 2, .mtp = mtp});
      trillion::convert_checkpoint({dir + "/hf-" + f, dir + "/model-" + f, 4, false, nullptr});
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_store_fixture: %s\n", e.what());
    return 1;
  }
  return 0;
}
