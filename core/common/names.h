// Names users give to data sets, kernels and aliases.
//
// Rule: 1 to 128 characters from A–Z a–z 0–9 '.' '_' '-', the first a letter
// or a digit — the regular expression [A-Za-z0-9][A-Za-z0-9._-]{0,127}.
// A name is an identifier: it never holds a path separator (it may end up in
// a file name or a URL), nor ':' or '@' (which mean NAME:VERSION and
// NAME@ALIAS in a kernel reference), nor spaces or control characters (it is
// printed in logs and tables). Names stored before the rule existed keep
// being served; new writes are checked.
#pragma once

#include <string>
#include <string_view>

#include "core/common/status.h"

namespace kls {

inline constexpr size_t kMaxNameLength = 128;

inline bool IsNameChar(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
         c == '-';
}

/// Whether `name` follows the rule above.
inline bool IsValidName(std::string_view name) {
  if (name.empty() || name.size() > kMaxNameLength) return false;
  const char first = name.front();
  if (first == '.' || first == '_' || first == '-') return false;
  for (char c : name) {
    if (!IsNameChar(c)) return false;
  }
  return true;
}

/// `value` as it may appear in an error message: quoted, at most 64 bytes,
/// bytes outside printable ASCII as \xNN.
inline std::string QuoteForMessage(std::string_view value) {
  static const char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (size_t i = 0; i < value.size() && i < 64; ++i) {
    const unsigned char c = static_cast<unsigned char>(value[i]);
    if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (value.size() > 64) out += "...";
  return out + "\"";
}

/// OK, or INVALID_ARGUMENT naming `field` and the value.
inline Status ValidateName(std::string_view field, std::string_view value) {
  if (IsValidName(value)) return OkStatus();
  std::string why;
  if (value.empty()) {
    why = "must not be empty";
  } else if (value.size() > kMaxNameLength) {
    why = "is " + std::to_string(value.size()) + " characters long; at most " + std::to_string(kMaxNameLength) +
          " are allowed";
  } else {
    why = "is not a valid name";
  }
  return InvalidArgumentError(std::string(field) + " = " + QuoteForMessage(value) + " " + why +
                              " (names are 1 to 128 characters from A-Z a-z 0-9 . _ -, starting with a letter "
                              "or a digit)");
}

/// `text` made into a valid name: characters outside the rule become '_', a
/// leading '.', '_' or '-' is prefixed with "n", the result is cut to 128
/// characters; "" for an empty `text`. For defaults derived from file names.
inline std::string SanitizeName(std::string_view text) {
  if (text.empty()) return "";
  std::string out;
  for (char c : text) out += IsNameChar(c) ? c : '_';
  if (!(out.front() >= 'A' && out.front() <= 'Z') && !(out.front() >= 'a' && out.front() <= 'z') &&
      !(out.front() >= '0' && out.front() <= '9')) {
    out = "n" + out;
  }
  if (out.size() > kMaxNameLength) out.resize(kMaxNameLength);
  return out;
}

}  // namespace kls
