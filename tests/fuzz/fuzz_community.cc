// Fuzz target: the social data set reader (core/social/community_csv.h,
// what `kls upload --social DIR` reads). The input is split at bytes 0x01 into
// up to six files — photos.csv, tags.csv, comments.csv, contacts.csv,
// groups.csv, faves.csv in that order; a file after the last split is missing.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "core/social/community_csv.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const char* const kFiles[] = {"photos.csv",   "tags.csv",   "comments.csv",
                                       "contacts.csv", "groups.csv", "faves.csv"};
  std::map<std::string, std::string> files;
  const std::string input(reinterpret_cast<const char*>(data), size);
  size_t begin = 0;
  for (const char* name : kFiles) {
    if (begin > input.size()) break;
    const size_t end = std::min(input.find('\x01', begin), input.size());
    files[name] = input.substr(begin, end - begin);
    begin = end + 1;
  }
  (void)kls::ParseCommunityCsv(files);
  return 0;
}
