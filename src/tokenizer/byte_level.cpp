#include "tokenizer/byte_level.hpp"

#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>

namespace trillion {

namespace {

std::string encode_utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += char(cp);
  } else if (cp < 0x800) {
    s += char(0xC0 | (cp >> 6));
    s += char(0x80 | (cp & 0x3F));
  } else {
    s += char(0xE0 | (cp >> 12));
    s += char(0x80 | ((cp >> 6) & 0x3F));
    s += char(0x80 | (cp & 0x3F));
  }
  return s;
}

// GPT-2 bytes_to_unicode(): printable Latin-1 bytes spell themselves, the
// other 68 bytes take code points 256, 257, ... in byte order.
struct ByteMap {
  std::array<std::string, 256> to_unicode;
  std::unordered_map<uint32_t, unsigned char> from_code_point;
  ByteMap() {
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      const uint32_t cp = printable ? b : next++;
      to_unicode[b] = encode_utf8(cp);
      from_code_point[cp] = static_cast<unsigned char>(b);
    }
  }
};

const ByteMap& byte_map() {
  static const ByteMap m;
  return m;
}

// Length of the UTF-8 sequence a lead byte starts (0: not a lead byte).
int utf8_length(unsigned char c) {
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return 2;
  if (c >= 0xE0 && c <= 0xEF) return 3;
  if (c >= 0xF0 && c <= 0xF4) return 4;
  return 0;
}

}  // namespace

const std::string& byte_to_unicode(unsigned char b) { return byte_map().to_unicode[b]; }

std::optional<std::string> unicode_to_bytes(std::string_view token) {
  const auto& m = byte_map().from_code_point;
  std::string out;
  out.reserve(token.size());
  for (size_t i = 0; i < token.size();) {
    const auto c = static_cast<unsigned char>(token[i]);
    const int n = utf8_length(c);
    if (n == 0 || n > 3 || i + size_t(n) > token.size()) return std::nullopt;
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : (c & 0x0F);
    for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(token[i + size_t(k)]) & 0x3F);
    const auto it = m.find(cp);
    if (it == m.end()) return std::nullopt;
    out += char(it->second);
    i += size_t(n);
  }
  return out;
}

size_t incomplete_utf8_tail(std::string_view s) {
  // Look back at most 3 bytes for the lead byte of the last character.
  for (size_t back = 1; back <= 3 && back <= s.size(); ++back) {
    const auto c = static_cast<unsigned char>(s[s.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking
    const int n = utf8_length(c);
    return n > int(back) ? back : 0;
  }
  return 0;
}

bool is_valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const int n = utf8_length(c);
    if (n == 0 || i + size_t(n) > s.size()) return false;
    for (int k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + size_t(k)]) & 0xC0) != 0x80) return false;
    if (n >= 3) {
      const auto c1 = static_cast<unsigned char>(s[i + 1]);
      if (c == 0xE0 && c1 < 0xA0) return false;   // overlong
      if (c == 0xED && c1 >= 0xA0) return false;  // surrogate
      if (c == 0xF0 && c1 < 0x90) return false;   // overlong
      if (c == 0xF4 && c1 >= 0x90) return false;  // > U+10FFFF
    }
    i += size_t(n);
  }
  return true;
}

}  // namespace trillion
