// Pairwise-constraint files, as `kls upload --constraints FILE` reads them:
// one pair a line, "i,j,kind" with kind 1 / +1 / must (must-link) or
// -1 / cannot (cannot-link); '#' starts a comment; blank lines and a first
// line that is not numeric (a header) are skipped. Indices are checked
// against the data set later (by the server), not here.
#pragma once

#include <istream>
#include <string>

#include "core/common/status.h"
#include "core/data/constraints.h"

namespace kls {

/// Parses the format above from `in`; `source` names it in errors
/// ("FILE line N: ..."). INVALID_ARGUMENT for a malformed line.
StatusOr<PairwiseConstraints> ParseConstraints(std::istream& in, const std::string& source);

/// ParseConstraints of the file at `path`; NOT_FOUND when it cannot be read.
StatusOr<PairwiseConstraints> ReadConstraintsFile(const std::string& path);

}  // namespace kls
