// Typed exceptions with context. Libraries throw these; only src/app turns
// them into messages and exit codes: a bad input is a clear error naming the
// problem and the place, never a crash.
#pragma once
#include <stdexcept>
#include <string>

namespace trillion {

// Base of every error trillion reports to a user.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A file's contents are wrong: safetensors header, HDF5 shard, manifest.
// The message names the file (and the tensor when there is one).
struct FormatError : Error {
  using Error::Error;
};

// config.json is missing a field or has a value trillion cannot run.
struct ConfigError : Error {
  using Error::Error;
};

// A request, prompt file or flag the user wrote is wrong.
struct InputError : Error {
  using Error::Error;
};

// An operating-system call failed (open, mmap, write).
struct SystemError : Error {
  using Error::Error;
};

}  // namespace trillion
