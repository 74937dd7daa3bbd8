// Byte-level helpers: GPT-2's byte <-> printable-unicode map (how byte-level
// BPE vocabularies spell raw bytes, e.g. ' ' as 'Ġ') and UTF-8 boundaries.
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace trillion {

// The vocabulary spelling of a raw byte (a UTF-8 string of one code point).
const std::string& byte_to_unicode(unsigned char b);

// A vocabulary token spelled in GPT-2 byte-level form back to raw bytes;
// nullopt when a code point is not one of the 256 byte spellings.
std::optional<std::string> unicode_to_bytes(std::string_view token);

// Number of bytes at the end of `s` that start a UTF-8 character whose
// remaining bytes have not arrived yet (0 when `s` ends on a boundary).
size_t incomplete_utf8_tail(std::string_view s);

// True when `s` is well-formed UTF-8.
bool is_valid_utf8(std::string_view s);

}  // namespace trillion
