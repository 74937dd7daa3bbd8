// An Open MPI hostfile, read by read_hostfile and mapped to ranks as
// `trillion plan` does.
#include "fuzz_util.hpp"
#include "plan/hostfile.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trillion;
  const std::string path = fuzz::write_scratch("hostfile", fuzz::as_text(data, size));
  fuzz::expect_clean([&] {
    const std::vector<HostEntry> hosts = read_hostfile(path);
    for (int ranks : {1, 4, 1000}) {
      fuzz::expect_clean([&] {
        if (map_ranks(hosts, ranks, path).size() != size_t(ranks)) __builtin_trap();
      });
    }
  });
  return 0;
}
