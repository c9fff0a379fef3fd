#include "core/data/constraints_file.h"

#include <charconv>
#include <fstream>
#include <string_view>
#include <vector>

namespace kls {
namespace {

std::string_view Trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

bool ParseIndex(std::string_view text, int* out) {
  const std::string_view t = Trim(text);
  if (t.empty()) return false;
  const auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), *out);
  return ec == std::errc() && ptr == t.data() + t.size();
}

/// `line` up to 200 bytes, for an error message.
std::string Excerpt(std::string_view line) {
  return line.size() <= 200 ? std::string(line) : std::string(line.substr(0, 200)) + "...";
}

}  // namespace

StatusOr<PairwiseConstraints> ParseConstraints(std::istream& in, const std::string& source) {
  PairwiseConstraints c;
  std::string raw;
  int64_t line_no = 0;
  while (std::getline(in, raw)) {
    ++line_no;
    const std::string where = source + " line " + std::to_string(line_no) + ": ";
    const std::string_view line = Trim(std::string_view(raw).substr(0, raw.find('#')));
    if (line.empty()) continue;
    std::vector<std::string_view> f;
    size_t start = 0;
    for (;;) {
      const size_t comma = line.find(',', start);
      f.push_back(line.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    if (f.size() != 3) return InvalidArgumentError(where + "expected 'i,j,kind', got '" + Excerpt(line) + "'");
    int i = 0, j = 0;
    if (!ParseIndex(f[0], &i) || !ParseIndex(f[1], &j)) {
      if (c.pairs.empty() && line_no == 1) continue;  // header
      return InvalidArgumentError(where + "i and j must be integers, got '" + Excerpt(line) + "'");
    }
    const std::string_view kind = Trim(f[2]);
    PairKind k;
    if (kind == "1" || kind == "+1" || kind == "must") {
      k = PairKind::kMustLink;
    } else if (kind == "-1" || kind == "cannot") {
      k = PairKind::kCannotLink;
    } else {
      return InvalidArgumentError(where + "kind '" + Excerpt(kind) + "' is not 1, -1, must or cannot");
    }
    c.pairs.push_back(Pair{i, j, k});
  }
  return c;
}

StatusOr<PairwiseConstraints> ReadConstraintsFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFoundError("cannot read constraints file '" + path + "'");
  return ParseConstraints(in, path);
}

}  // namespace kls
