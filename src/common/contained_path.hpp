// A file name read from a model directory's own data (a manifest's shard, an
// HF index's weight_map entry) must name a file of that directory: the
// directory is data, and data never decides which other files trillion opens
// (docs/reliability.md). One check for every such name.
#pragma once
#include <filesystem>
#include <string>

namespace trillion {

// Why `name`, read from a file in `dir`, does not name a file inside `dir`,
// or "" when it does. Refused: an empty name, an absolute path, a '..'
// component or any other path separator, a NUL byte, and a name whose real
// path (symlinks resolved; the file need not exist) lies outside `dir`.
// `also_inside`, when not empty, is one more directory the real path may lie
// in (the blobs of a Hugging Face hub cache, see hf_checkpoint.cpp).
// The lexical half: why `name` is not one plain file name, or "".
std::string file_name_problem(const std::string& name);

std::string outside_reason(const std::filesystem::path& dir, const std::string& name,
                           const std::filesystem::path& also_inside = {});

}  // namespace trillion
