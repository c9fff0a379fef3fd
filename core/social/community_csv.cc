#include "core/social/community_csv.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <limits>
#include <map>
#include <sstream>
#include <vector>

namespace kls {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> SplitComma(const std::string& line) {
  std::vector<std::string> out;
  std::string cell;
  std::istringstream in(line);
  while (std::getline(in, cell, ',')) out.push_back(cell);
  if (!line.empty() && line.back() == ',') out.emplace_back();
  return out;
}

// Rows of a CSV file after its header, each with exactly `columns` cells
// (0 = at least 1). A file absent from `files` is an empty table if
// `missing_ok`, NOT_FOUND otherwise.
StatusOr<std::vector<std::vector<std::string>>> ReadTable(const std::map<std::string, std::string>& files,
                                                          const std::string& name, int columns, bool missing_ok) {
  const auto file = files.find(name);
  if (file == files.end()) {
    if (missing_ok) return std::vector<std::vector<std::string>>{};
    return NotFoundError("cannot read " + name);
  }
  std::istringstream in(file->second);
  std::string line;
  std::getline(in, line);  // header
  std::vector<std::vector<std::string>> rows;
  int number = 1;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    std::vector<std::string> cells = SplitComma(line);
    if (columns > 0 && static_cast<int>(cells.size()) != columns) {
      return InvalidArgumentError(name + " line " + std::to_string(number) + ": " + std::to_string(cells.size()) +
                                  " fields, expected " + std::to_string(columns));
    }
    rows.push_back(std::move(cells));
  }
  return rows;
}

StatusOr<double> Number(const std::string& cell, const std::string& where) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(cell.c_str(), &end);
  if (cell.empty() || end == cell.c_str() || *end != '\0' || errno == ERANGE || !std::isfinite(v)) {
    return InvalidArgumentError(where + " = '" + cell + "' is not a finite number");
  }
  return v;
}

// A non-negative integer id below `limit`.
StatusOr<int> Id(const std::string& cell, const std::string& where, int limit) {
  KLS_ASSIGN_OR_RETURN(double v, Number(cell, where));
  if (v < 0 || v != std::floor(v) || v >= limit) {
    return InvalidArgumentError(where + " = '" + cell + "' is not an integer id in [0, " + std::to_string(limit) + ")");
  }
  return static_cast<int>(v);
}

struct PairFile {
  const char* file;
  const char* a;
  int a_limit;
  const char* b;
  int b_limit;
};

// Pairs of ids from a two-column file.
StatusOr<std::vector<std::pair<int, int>>> ReadPairs(const std::map<std::string, std::string>& files,
                                                     const PairFile& spec) {
  KLS_ASSIGN_OR_RETURN(auto rows, ReadTable(files, spec.file, 2, true));
  std::vector<std::pair<int, int>> out;
  out.reserve(rows.size());
  for (size_t r = 0; r < rows.size(); ++r) {
    const std::string where = std::string(spec.file) + " row " + std::to_string(r + 1) + ": ";
    KLS_ASSIGN_OR_RETURN(int x, Id(rows[r][0], where + spec.a, spec.a_limit));
    KLS_ASSIGN_OR_RETURN(int y, Id(rows[r][1], where + spec.b, spec.b_limit));
    out.emplace_back(x, y);
  }
  return out;
}

constexpr const char* kCommunityFiles[] = {"photos.csv",   "tags.csv",   "comments.csv",
                                           "contacts.csv", "groups.csv", "faves.csv"};

}  // namespace

Status WriteCommunityCsv(const Community& d, const std::string& dir_name) {
  KLS_RETURN_IF_ERROR(d.Validate());
  const fs::path dir(dir_name);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return InvalidArgumentError("cannot create directory " + dir_name + ": " + ec.message());
  auto open = [&](const char* file, const std::string& header, std::ofstream* out) -> Status {
    out->open(dir / file);
    if (!*out) return InvalidArgumentError("cannot write " + (dir / file).string());
    *out << std::setprecision(17) << header << "\n";
    return OkStatus();
  };
  std::ofstream photos, tags, comments, contacts, groups, faves;
  std::string header = "owner,day,latitude,longitude";
  for (Eigen::Index j = 0; j < d.photo_visual.cols(); ++j) header += ",v" + std::to_string(j);
  KLS_RETURN_IF_ERROR(open("photos.csv", header, &photos));
  for (int p = 0; p < d.num_photos(); ++p) {
    photos << d.photo_owner[p] << ',' << d.photo_day[p] << ',' << d.photo_latitude[p] << ',' << d.photo_longitude[p];
    for (Eigen::Index j = 0; j < d.photo_visual.cols(); ++j) photos << ',' << d.photo_visual(p, j);
    photos << '\n';
  }
  KLS_RETURN_IF_ERROR(open("tags.csv", "photo,tag", &tags));
  for (int k = 0; k < d.photo_tags.outerSize(); ++k)
    for (Eigen::SparseMatrix<double>::InnerIterator it(d.photo_tags, k); it; ++it)
      tags << it.row() << ',' << it.col() << '\n';
  KLS_RETURN_IF_ERROR(open("comments.csv", "photo,author", &comments));
  for (const Comment& c : d.comments) comments << c.photo << ',' << c.author << '\n';
  KLS_RETURN_IF_ERROR(open("contacts.csv", "user_a,user_b", &contacts));
  KLS_RETURN_IF_ERROR(open("groups.csv", "user,group", &groups));
  for (int u = 0; u < d.num_users; ++u) {
    for (int v : d.contacts[u])
      if (u < v) contacts << u << ',' << v << '\n';
    for (int g : d.groups[u]) groups << u << ',' << g << '\n';
  }
  KLS_RETURN_IF_ERROR(open("faves.csv", "user,photo", &faves));
  for (const auto& [u, p] : d.favourites) faves << u << ',' << p << '\n';
  for (std::ofstream* f : {&photos, &tags, &comments, &contacts, &groups, &faves}) {
    f->flush();
    if (!*f) return InvalidArgumentError("writing the community files in " + dir_name + " failed");
  }
  return OkStatus();
}

StatusOr<Community> ReadCommunityCsv(const std::string& dir_name) {
  const fs::path dir(dir_name);
  std::map<std::string, std::string> files;
  for (const char* name : kCommunityFiles) {
    std::ifstream in(dir / name, std::ios::binary);
    if (!in) {
      if (fs::exists(dir / name)) return NotFoundError("cannot read " + (dir / name).string());
      if (std::string(name) == "photos.csv") return NotFoundError("cannot read " + (dir / name).string());
      continue;
    }
    std::ostringstream content;
    content << in.rdbuf();
    files[name] = content.str();
  }
  return ParseCommunityCsv(files);
}

StatusOr<Community> ParseCommunityCsv(const std::map<std::string, std::string>& files) {
  KLS_ASSIGN_OR_RETURN(auto photos, ReadTable(files, "photos.csv", 0, false));
  if (photos.empty()) return InvalidArgumentError("photos.csv has no rows");
  const int dim = static_cast<int>(photos[0].size()) - 4;
  if (dim < 1) return InvalidArgumentError("photos.csv needs owner,day,latitude,longitude and at least one feature");
  Community d;
  const int n = static_cast<int>(photos.size());
  d.photo_visual.resize(n, dim);
  int max_user = -1, max_group = -1, max_tag = -1;
  for (int p = 0; p < n; ++p) {
    const std::string where = "photos.csv row " + std::to_string(p + 1) + ": ";
    if (static_cast<int>(photos[p].size()) != dim + 4) {
      return InvalidArgumentError(where + std::to_string(photos[p].size()) + " fields, expected " +
                                  std::to_string(dim + 4));
    }
    KLS_ASSIGN_OR_RETURN(int owner, Id(photos[p][0], where + "owner", kMaxCommunityUsers));
    KLS_ASSIGN_OR_RETURN(double day, Number(photos[p][1], where + "day"));
    if (day != std::floor(day) || std::abs(day) > std::numeric_limits<int>::max()) {
      return InvalidArgumentError(where + "day = '" + photos[p][1] + "' is not an integer day number");
    }
    KLS_ASSIGN_OR_RETURN(double lat, Number(photos[p][2], where + "latitude"));
    KLS_ASSIGN_OR_RETURN(double lon, Number(photos[p][3], where + "longitude"));
    d.photo_owner.push_back(owner);
    d.photo_day.push_back(static_cast<int>(day));
    d.photo_latitude.push_back(lat);
    d.photo_longitude.push_back(lon);
    max_user = std::max(max_user, owner);
    for (int j = 0; j < dim; ++j) {
      KLS_ASSIGN_OR_RETURN(d.photo_visual(p, j), Number(photos[p][4 + j], where + "v" + std::to_string(j)));
    }
  }
  constexpr int kUsers = kMaxCommunityUsers;
  KLS_ASSIGN_OR_RETURN(auto tags, ReadPairs(files, {"tags.csv", "photo", n, "tag", kMaxCommunityVocabulary}));
  KLS_ASSIGN_OR_RETURN(auto comments, ReadPairs(files, {"comments.csv", "photo", n, "author", kUsers}));
  KLS_ASSIGN_OR_RETURN(auto contacts, ReadPairs(files, {"contacts.csv", "user_a", kUsers, "user_b", kUsers}));
  KLS_ASSIGN_OR_RETURN(auto groups, ReadPairs(files, {"groups.csv", "user", kUsers, "group", kMaxCommunityGroups}));
  KLS_ASSIGN_OR_RETURN(auto faves, ReadPairs(files, {"faves.csv", "user", kUsers, "photo", n}));
  for (const auto& [p, t] : tags) max_tag = std::max(max_tag, t);
  for (const auto& [p, a] : comments) max_user = std::max(max_user, a);
  for (const auto& [a, b] : contacts) max_user = std::max({max_user, a, b});
  for (const auto& [u, g] : groups) {
    max_user = std::max(max_user, u);
    max_group = std::max(max_group, g);
  }
  for (const auto& [u, p] : faves) max_user = std::max(max_user, u);
  d.num_users = max_user + 1;
  d.num_groups = max_group + 1;
  std::vector<Eigen::Triplet<double>> t;
  for (const auto& [p, tag] : tags) t.emplace_back(p, tag, 1.0);
  d.photo_tags.resize(n, max_tag + 1 > 0 ? max_tag + 1 : 1);
  d.photo_tags.setFromTriplets(t.begin(), t.end(), [](double a, double) { return a; });
  for (const auto& [p, a] : comments) d.comments.push_back({p, a});
  d.contacts.resize(d.num_users);
  d.groups.resize(d.num_users);
  for (const auto& [a, b] : contacts) {
    if (a == b) continue;
    d.contacts[a].push_back(b);
    d.contacts[b].push_back(a);
  }
  for (const auto& [u, g] : groups) d.groups[u].push_back(g);
  for (auto* lists : {&d.contacts, &d.groups})
    for (auto& v : *lists) {
      std::sort(v.begin(), v.end());
      v.erase(std::unique(v.begin(), v.end()), v.end());
    }
  d.favourites = faves;
  KLS_RETURN_IF_ERROR(d.Validate());
  return d;
}

}  // namespace kls
