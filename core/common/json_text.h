// Small pieces of JSON text for the summaries core writes by hand (the
// cross-validation table, the baseline guard, the auto leaderboard): core
// has no JSON library, and these records are flat.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace kls {

/// `v` with `digits` significant digits (printf %g): 0.1, not 0.10000000000000001.
inline std::string JsonNumber(double v, int digits = 6) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.*g", digits, v);
  return buf;
}

/// [a,b,…] of JsonNumber(·, digits).
inline std::string JsonArray(const std::vector<double>& v, int digits = 6) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + JsonNumber(v[i], digits);
  return out + "]";
}

/// `text` as the inside of a JSON string: quotes, backslashes and control characters escaped.
inline std::string JsonEscaped(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace kls
