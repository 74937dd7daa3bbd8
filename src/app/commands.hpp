// The subcommands of the `trillion` binary. Each parses its own flags
// (Boost.Program_options) and returns the process exit code; errors are
// thrown as trillion::Error and reported by main().
#pragma once
#include <string>
#include <vector>

namespace trillion::app {

using Args = std::vector<std::string>;  // arguments after the subcommand name

int run_convert(const Args& args);   // HF safetensors -> HDF5 model directory
int run_inspect(const Args& args);   // summary of a converted model, --verify checksums
int run_score(const Args& args);     // log-probabilities / logits of given token sequences
int run_generate(const Args& args);  // batch generation from a prompt file
int run_plan(const Args& args);      // which rank holds what, memory and files per host, predicted tokens/s
int run_calibrate(const Args& args); // measure this host (and the link under mpirun) into a profile
int run_tokenize(const Args& args);  // JSONL text <-> token ids with a model's tokenizer

}  // namespace trillion::app
