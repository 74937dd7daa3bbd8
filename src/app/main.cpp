// trillion: batch inference of DeepSeek-V3-family MoE models over MPI.
// main() only dispatches to a subcommand and turns exceptions into messages
// and exit codes (libraries throw typed errors; only the application exits).
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include <boost/program_options/errors.hpp>

#include "app/commands.hpp"
#include "common/error.hpp"
#include "platform/allocator.hpp"

namespace {

struct Command {
  const char* name;
  int (*run)(const trillion::app::Args&);
  const char* summary;
};

const Command kCommands[] = {
    {"convert", trillion::app::run_convert, "convert a Hugging Face checkpoint to sharded HDF5"},
    {"inspect", trillion::app::run_inspect, "show a converted model: config, sizes, shards (--verify)"},
    {"score", trillion::app::run_score, "log-probabilities and logits of token sequences"},
    {"generate", trillion::app::run_generate, "generate continuations for a prompt file"},
    {"plan", trillion::app::run_plan, "which rank holds which layers/experts; memory, files, predicted tokens/s"},
    {"calibrate", trillion::app::run_calibrate, "measure this host (and link, under mpirun) into a profile"},
    {"tokenize", trillion::app::run_tokenize, "JSONL text -> token ids (--decode: ids -> text)"},
};

void usage(std::FILE* out) {
  std::fprintf(out, "usage: trillion <command> [options]   (trillion <command> --help)\n\ncommands:\n");
  for (const auto& c : kCommands) std::fprintf(out, "  %-10s %s\n", c.name, c.summary);
}

}  // namespace

int main(int argc, char** argv) {
  trillion::platform::configure_allocator();  // before any step allocates (platform/allocator.hpp)
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string name = argv[1];
  for (const auto& c : kCommands) {
    if (name != c.name) continue;
    trillion::app::Args args(argv + 2, argv + argc);
    try {
      return c.run(args);
    } catch (const boost::program_options::error& e) {
      std::fprintf(stderr, "trillion %s: %s (see trillion %s --help)\n", c.name, e.what(), c.name);
      return 2;
    } catch (const trillion::Error& e) {
      std::fprintf(stderr, "trillion %s: error: %s\n", c.name, e.what());
      return 1;
    } catch (const std::bad_alloc&) {
      std::fprintf(stderr, "trillion %s: error: out of memory\n", c.name);
      return 1;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "trillion %s: internal error: %s\n", c.name, e.what());
      return 3;
    }
  }
  std::fprintf(stderr, "trillion: unknown command '%s'\n", name.c_str());
  usage(stderr);
  return 2;
}
