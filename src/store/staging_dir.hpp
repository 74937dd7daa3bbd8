// A conversion is written into "<output>.partial" and renamed to <output>
// only when every file is complete and synced, so an interrupted conversion
// never leaves a directory that looks like a finished model.
#pragma once
#include <ostream>
#include <string>

namespace trillion {

class StagingDir {
 public:
  // Checks that `output` may be written: absent or an empty directory, or with
  // `force` an existing trillion model (has manifest.json); anything else is an
  // InputError. Removes a stale "<output>.partial" left by an interrupted run
  // (recognized by its marker file) and creates a fresh one.
  StagingDir(const std::string& output, bool force, std::ostream* log);
  ~StagingDir();  // removes the partial directory unless committed
  StagingDir(const StagingDir&) = delete;
  StagingDir& operator=(const StagingDir&) = delete;

  const std::string& path() const { return partial_; }
  // Renames the partial directory to `output`, replacing an existing model.
  void commit();

 private:
  std::string output_, partial_;
  bool committed_ = false;
};

}  // namespace trillion
