// Files a reader may open at any moment (--metrics, score's logits .npy) are
// written beside their target under a name of this process's own and renamed
// over it when complete: a reader, a crash or a second run sees the previous
// complete file or the new one, never a torn one, and writing never follows a
// symlink that sits at the target's name (the rename replaces the link).
#pragma once
#include <string>

namespace trillion {

// "<path>.partial-<pid>": unique among concurrent runs on one host.
std::string temp_path_for(const std::string& path);

// Creates `tmp` exclusively (a stale file of a dead process with the same
// pid is removed first); returns a FILE* opened "wb"; throws SystemError.
void* create_temp_file(const std::string& tmp);

// Flushes, fsyncs and closes `file` (a FILE* from create_temp_file), then
// renames `tmp` over `path`; removes `tmp` and throws SystemError on failure.
void publish_temp_file(void* file, const std::string& tmp, const std::string& path);

// All three: `contents` replaces `path` atomically.
void write_file_atomically(const std::string& path, const std::string& contents);

}  // namespace trillion
