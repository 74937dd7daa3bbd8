#include "requests/jsonl.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>

#include <fcntl.h>
#include <unistd.h>

#include "common/error.hpp"
#include "common/fault.hpp"

namespace trillion {

std::vector<JsonlLine> read_jsonl_lines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot open: " + std::strerror(errno));
  std::vector<JsonlLine> lines;
  std::string text;
  int64_t number = 0;
  while (std::getline(in, text)) {
    ++number;
    if (!text.empty() && text.back() == '\r') text.pop_back();
    if (text.find_first_not_of(" \t") == std::string::npos) continue;
    lines.push_back({number, text});
  }
  if (in.bad()) throw InputError(path + ": read error after line " + std::to_string(number));
  return lines;
}

JsonlWriter::JsonlWriter(const std::string& path, bool append) : path_(path) {
  // O_APPEND either way: after a failed write is cut back, the next write
  // lands at the new end, not at the old offset past it (a hole of zeros).
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_APPEND | (append ? 0 : O_TRUNC), 0644);
  if (fd_ < 0) throw SystemError(path + ": cannot open for writing: " + std::strerror(errno));
  const off_t end = ::lseek(fd_, 0, SEEK_END);
  if (end < 0) {
    const int err = errno;
    ::close(fd_);
    throw SystemError(path + ": cannot seek: " + std::strerror(err));
  }
  size_ = end;
}

JsonlWriter::~JsonlWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void JsonlWriter::write(const nlohmann::json& record) {
  // Invalid UTF-8 in user-supplied strings is replaced rather than thrown on.
  std::string line = record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  line += '\n';
  // Straight to the kernel (no stdio buffer): a record is in the file when
  // write() returns, and a failed one leaves nothing buffered that a later
  // flush could add after the cut below.
  size_t done = 0;
  if (fault_armed("write")) {  // test hook: stop with half a record in the file (common/fault.hpp)
    const ssize_t n = ::write(fd_, line.data(), line.size() / 2);
    done = n > 0 ? size_t(n) : 0;
    fault_point("write");
  }
  while (done < line.size()) {
    const ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
    if (n > 0) {
      done += size_t(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      // A full disk (ENOSPC), a file size limit (EFBIG), an I/O error: cut
      // the part written, so the file ends with a complete record and a
      // rerun resumes after it.
      const int err = n < 0 ? errno : ENOSPC;
      std::string what = path_ + ": write failed: " + std::strerror(err);
      if (::ftruncate(fd_, size_) != 0)
        what += " (and cutting the partial record failed: " + std::string(std::strerror(errno)) + ")";
      throw SystemError(what);
    }
  }
  size_ += off_t(line.size());
  ++records_;
}

}  // namespace trillion
