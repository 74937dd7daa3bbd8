// An HDF5 shard file, checked by check_shard against fixed manifest entries
// and, when it passes, mapped and hashed as ModelStore loads a tensor. The
// entries are those of a reference shard written by ShardWriter at start-up
// (a BF16 matrix and an int4-style I32 tensor with weight_shape); the
// committed seed is that file (TRILLION_FUZZ_SHARD_SEED=path writes it out).
// The manifest's size is the input's, so the fuzzer gets past the size check;
// its metadata checksum is the reference's, as convert writes it.
#include <cstdlib>
#include <filesystem>

#include "fuzz_util.hpp"
#include "store/shard_reader.hpp"
#include "store/shard_writer.hpp"

namespace {

using namespace trillion;

struct Reference {
  std::vector<TensorInfo> tensors;
  std::vector<const TensorInfo*> pointers;
  uint64_t metadata_checksum = 0;  // as convert records it
};

const Reference& reference() {
  static const Reference ref = [] {
    Reference r;
    const std::string path = (fuzz::scratch_dir() / "reference.h5").string();
    std::vector<std::byte> a(4 * 6 * 2), b(2 * 3 * 4);
    for (size_t i = 0; i < a.size(); ++i) a[i] = std::byte(i * 7);
    for (size_t i = 0; i < b.size(); ++i) b[i] = std::byte(i * 13 + 1);
    const std::vector<ShardTensor> in = {
        {"model.layers.0.mlp.down_proj.weight", DType::BF16, {4, 6}, a.data(), {}},
        {"model.layers.0.mlp.experts.0.up_proj.weight_packed", DType::I32, {2, 3}, b.data(), {2, 24}}};
    ShardWriter w(path);
    for (const ShardTensor& t : in) {
      const StoredTensor s = w.write(t);
      r.tensors.push_back({t.name, "fuzz.h5", t.dtype, t.shape, s.offset, s.nbytes, s.checksum, t.weight_shape});
    }
    w.finish();
    if (const char* out = std::getenv("TRILLION_FUZZ_SHARD_SEED"))
      std::filesystem::copy_file(path, out, std::filesystem::copy_options::overwrite_existing);
    for (const TensorInfo& t : r.tensors) r.pointers.push_back(&t);
    const MappedFile f(path);
    r.metadata_checksum = shard_metadata_checksum(f.data(), f.size(), r.pointers);
    return r;
  }();
  return ref;
}

}  // namespace

// libhdf5 (Debian's, not instrumented) loses memory inside itself: an object
// header per dataset ShardWriter creates, and metadata-cache entries on the
// error paths of a damaged file (H5Dopen2 -> H5C_protect). trillion holds
// HDF5 objects only through H5Id (closed on every path), so leaks allocated
// inside libhdf5 are excused; memory errors and crashes there still count.
extern "C" const char* __lsan_default_suppressions() { return "leak:libhdf5\n"; }

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Reference& ref = reference();
  fuzz::write_scratch("fuzz.h5", fuzz::as_text(data, size));
  ShardInfo shard;
  shard.file = "fuzz.h5";
  shard.bytes = size;
  // The manifest's metadata checksum is what keeps a crafted header away
  // from libhdf5 (its own memory errors: findings/); every input meets it.
  shard.metadata_checksum = ref.metadata_checksum;
  fuzz::expect_clean([&] {
    const MappedShard m(fuzz::scratch_dir().string(), shard, ref.pointers);
    for (const TensorInfo* t : ref.pointers) {
      if (t->offset + t->nbytes > m.size()) __builtin_trap();  // check_shard let through a tensor past the end
      verify_checksum(m.path(), *t, m.data(*t));
    }
  });
  return 0;
}
