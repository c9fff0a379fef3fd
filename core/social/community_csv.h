// A social data set as a directory of CSV files — what `kls upload --social
// DIR` reads and `kls-bench community --out DIR` writes. Each file has a
// header line; ids are 0-based integers.
//
//   photos.csv    owner,day,latitude,longitude,v0,…,v{d−1}   one row per photo (row = photo id)
//   tags.csv      photo,tag
//   comments.csv  photo,author
//   contacts.csv  user_a,user_b      (undirected; each friendship once)
//   groups.csv    user,group
//   faves.csv     user,photo
//
// Counts are inferred: users = 1 + the largest user id in any file, groups =
// 1 + the largest group id, vocabulary = 1 + the largest tag. photos.csv is
// required; a missing relation file means "none".
#pragma once

#include <map>
#include <string>

#include "core/common/status.h"
#include "core/social/community.h"

namespace kls {

/// Writes the six files into `dir` (created if missing). Planted truth is not written.
Status WriteCommunityCsv(const Community& data, const std::string& dir);

/// Reads them back. Errors name the file, line and field: INVALID_ARGUMENT
/// for malformed numbers, ragged rows, negative ids or out-of-range photos;
/// NOT_FOUND when photos.csv is missing. The result passes Community::Validate.
/// Ids are bounded (users < kMaxCommunityUsers, groups < kMaxCommunityGroups,
/// tags < kMaxCommunityVocabulary; days are integers): an id beyond them is
/// INVALID_ARGUMENT naming the file, row and field, not an allocation of its size.
StatusOr<Community> ReadCommunityCsv(const std::string& dir);

/// The same from the files' contents, keyed by file name ("photos.csv", …);
/// a name absent from the map is a missing file.
StatusOr<Community> ParseCommunityCsv(const std::map<std::string, std::string>& files);

}  // namespace kls
