#include "common/contained_path.hpp"

#include <system_error>

namespace trillion {

namespace fs = std::filesystem;

namespace {

// Whether `p` is `root` or lies below it (both canonical, absolute).
bool within(const fs::path& p, const fs::path& root) {
  auto r = root.begin(), q = p.begin();
  for (; r != root.end(); ++r, ++q)
    if (q == p.end() || *q != *r) return false;
  return true;
}

}  // namespace

std::string file_name_problem(const std::string& name) {
  if (name.empty()) return "is empty";
  if (name.find('\0') != std::string::npos) return "contains a NUL byte";
  if (fs::path(name).is_absolute() || name.front() == '/') return "is an absolute path";
  for (const fs::path& part : fs::path(name))
    if (part == "..") return "has a '..' component";
  if (name.find('/') != std::string::npos || name.find('\\') != std::string::npos || name == ".")
    return "is not a file name (no directories allowed)";
  return "";
}

std::string outside_reason(const fs::path& dir, const std::string& name, const fs::path& also_inside) {
  if (std::string why = file_name_problem(name); !why.empty()) return why;
  // Lexically a plain name; a symlink may still lead elsewhere.
  std::error_code ec;
  const fs::path root = fs::canonical(dir, ec);
  if (ec) return "";  // the directory itself is unreadable: opening the file reports that
  const fs::path real = fs::weakly_canonical(root / name, ec);
  if (ec) return "cannot be resolved: " + ec.message();
  if (within(real, root)) return "";
  if (!also_inside.empty()) {
    const fs::path extra = fs::weakly_canonical(also_inside, ec);
    if (!ec && within(real, extra)) return "";
  }
  return "is a symlink to " + real.string() + ", outside " + root.string();
}

}  // namespace trillion
