// trillion inspect MODEL_DIR [--verify] [--json]
#include <iostream>

#include <nlohmann/json.hpp>

#include "app/commands.hpp"
#include "app/run_options.hpp"
#include "store/inspect.hpp"

namespace po = boost::program_options;

namespace trillion::app {

int run_inspect(const Args& args) {
  std::string dir;
  bool verify = false, as_json = false;
  po::options_description desc("options");
  desc.add_options()
      ("model", po::value(&dir)->required(), "converted model directory (also the first positional argument)")
      ("verify", po::bool_switch(&verify), "re-hash every tensor and check it against manifest.json")
      ("json", po::bool_switch(&as_json), "print one JSON object instead of text");
  po::positional_options_description pos;
  pos.add("model", 1);
  if (!parse_args(args,
                  "usage: trillion inspect MODEL_DIR [--verify] [--json]\n\n"
                  "Config summary, parameter counts, bytes per dtype and role, shard files.\n"
                  "--verify exits with status 1 if any shard is missing, damaged or fails its checksum.",
                  desc, &pos))
    return 0;

  const ModelSummary s = summarize_model(dir);
  bool ok = true;
  for (const std::string& p : s.shard_problems) ok &= p.empty();
  VerifyReport report;
  if (verify) {
    report = verify_model(*s.store, &std::cerr);
    ok = report.ok();
  }
  if (as_json) {
    nlohmann::json j = summary_json(s);
    if (verify) j["verify"] = verify_json(report);
    std::cout << j.dump(2) << "\n";
  } else {
    print_summary(std::cout, s);
    if (verify) print_verify(std::cout, report);
  }
  // Missing or damaged shards matter only when asked to verify: a host holds a subset.
  return verify && !ok ? 1 : 0;
}

}  // namespace trillion::app
