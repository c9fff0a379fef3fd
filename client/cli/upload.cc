// kls upload | datasets: data sets in (streamed, with constraints) and listed.
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "client/cli/common.h"
#include "core/common/names.h"
#include "core/data/constraints_file.h"
#include "core/data/row_reader.h"
#include "core/social/community_csv.h"

namespace kls::cli {
namespace {

struct UploadArgs {
  std::string file;
  std::string name;
  std::string format = "auto";
  std::string constraints_file;
  std::string protocol;
  uint64_t seed = 1;
  bool social = false;       ///< `file` is a directory of social CSV files
  std::string append_to;     ///< --append-constraints BASE: `file` is a constraints file
  int num_features = 0;      ///< --num-features: LIBSVM d (0: the largest index in the file)
  std::string attributes;    ///< --attributes FILE: item attributes CSV
  bool progress = false;     ///< --progress: always show the progress bar
  bool no_progress = false;  ///< --no-progress: never (default: unless --json on a non-terminal)
};

// The data set's default name: the file's stem ("data/iris.csv" → "iris";
// "pairs" for "new-pairs.csv" → "new-pairs"; a directory's own name).
std::string DefaultName(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  std::string base = path.substr(path.find_last_of('/') + 1);
  const size_t dot = base.find_last_of('.');
  if (dot != std::string::npos && dot > 0) base = base.substr(0, dot);
  return kls::SanitizeName(base);
}

kls::StatusOr<std::string> ReadWholeFile(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return kls::NotFoundError(what + ": cannot read '" + path + "'");
  std::ostringstream content;
  content << in.rdbuf();
  return content.str();
}


int RunUploadSocial(kls::Client& client, const Output& out, const UploadArgs& a) {
  auto community = kls::ReadCommunityCsv(a.file);
  if (!community.ok()) return out.Failure(community.status().WithContext(a.file));
  kls::Dataset data;
  data.features = community->photo_visual;
  kls::UploadOptions options;
  options.name = a.name.empty() ? DefaultName(a.file) : a.name;
  const kls::StatusOr<kls::v1::DatasetInfo> info =
      client.UploadDataset(data, kls::PairwiseConstraints(), options, &*community);
  if (!info.ok()) return out.Failure(info.status());
  std::ostringstream text;
  text << info->id() << "  '" << info->name() << "': social data set, " << community->num_users << " users, "
       << community->num_groups << " groups, " << info->num_points() << " photos × " << info->dim()
       << " visual features";
  json j = DatasetJson(*info);
  j["users"] = community->num_users;
  j["groups"] = community->num_groups;
  return out.Success(j, text.str());
}

// `kls upload --append-constraints BASE pairs.csv`: a new data set with BASE's
// features and its pairs followed by the file's (the server merges them).
// `kls upload --append-constraints BASE --protocol P [--seed S]`: the pairs
// protocol P draws from BASE's labels instead (those BASE has are skipped).
int RunAppendConstraints(kls::Client& client, const Output& out, const UploadArgs& a) {
  if (a.social || !a.constraints_file.empty()) {
    return out.Failure(kls::InvalidArgumentError(
        "--append-constraints takes the constraints file as FILE (or --protocol); --social and --constraints do "
        "not apply"));
  }
  if (a.file.empty() == a.protocol.empty()) {
    return out.Failure(kls::InvalidArgumentError(
        "--append-constraints BASE needs either FILE (a constraints file) or --protocol, not both"));
  }
  kls::PairwiseConstraints pairs;
  if (!a.file.empty()) {
    auto read = kls::ReadConstraintsFile(a.file);
    if (!read.ok()) return out.Failure(read.status());
    pairs = std::move(read).value();
  }
  kls::UploadOptions options;
  options.name = !a.name.empty() ? a.name
                 : !a.file.empty() ? DefaultName(a.file)
                                   : kls::SanitizeName(a.append_to + "-" + a.protocol);
  if (!a.protocol.empty()) {
    options.protocol.set_name(a.protocol);
    options.protocol.set_seed(a.seed);
  }
  const auto base = ResolveDataset(client, a.append_to, "--append-constraints");
  if (!base.ok()) return out.Failure(base.status());
  options.base_dataset_id = *base;
  const kls::StatusOr<kls::v1::DatasetInfo> info = client.UploadDataset(kls::Dataset(), pairs, options);
  if (!info.ok()) return out.Failure(info.status());
  const int64_t appended = info->has_generated() ? info->generated().must_link() + info->generated().cannot_link()
                                                 : static_cast<int64_t>(pairs.size());
  std::ostringstream text;
  text << info->id() << "  '" << info->name() << "': " << info->num_points() << " points × " << info->dim()
       << " features (shared with " << *base << "), " << info->num_constraints() << " constraints (" << appended
       << " appended";
  if (info->has_generated()) {
    text << " by protocol " << info->generated().protocol() << ", seed " << info->generated().seed() << ": "
         << info->generated().must_link() << " must-link, " << info->generated().cannot_link() << " cannot-link";
  }
  text << ")";
  json j = DatasetJson(*info);
  j["base_dataset_id"] = *base;
  j["appended_constraints"] = appended;
  return out.Success(j, text.str());
}

int RunUpload(kls::Client& client, const Output& out, const UploadArgs& a) {
  if (!a.append_to.empty()) return RunAppendConstraints(client, out, a);
  if (a.file.empty()) return out.Failure(kls::InvalidArgumentError("FILE is required: the data set to upload"));
  if (a.social) {
    if (!a.constraints_file.empty() || !a.protocol.empty()) {
      return out.Failure(kls::InvalidArgumentError("--social data sets take no --constraints or --protocol"));
    }
    return RunUploadSocial(client, out, a);
  }
  const kls::DataFormat format = a.format == "auto"  ? kls::GuessDataFormat(a.file)
                                 : a.format == "csv" ? kls::DataFormat::kCsv
                                                     : kls::DataFormat::kLibsvm;
  if (!a.constraints_file.empty() && !a.protocol.empty()) {
    return out.Failure(kls::InvalidArgumentError("give either --constraints or --protocol, not both"));
  }
  if (a.num_features != 0 && format != kls::DataFormat::kLibsvm) {
    return out.Failure(kls::InvalidArgumentError("--num-features applies to LIBSVM files only"));
  }
  const bool show_progress = a.progress || (!a.no_progress && (!out.json_mode || ProgressBar::StderrIsTerminal()));
  ProgressBar bar(show_progress);
  // Pass 1: sizes, flags and labels, no features (bounded memory).
  const auto scan_start = Clock::now();
  bar.Show("scanning " + a.file + " ...", true);
  const auto on_scan = [&](int64_t done, int64_t total) {
    std::ostringstream line;
    line << "scanning " << a.file << " " << ProgressBar::Bar(total > 0 ? double(done) / total : 0.0) << " "
         << std::fixed << std::setprecision(1) << done / 1e6 << "/" << total / 1e6 << " MB" << std::defaultfloat;
    const double seconds = std::chrono::duration<double>(Clock::now() - scan_start).count();
    if (done > 0 && total > done) line << "  " << ProgressBar::Eta(seconds / done * (total - done));
    bar.Show(line.str());
  };
  kls::StatusOr<kls::DataFileScan> scan = kls::ScanDataFile(a.file, format, a.num_features, {}, on_scan);
  const double scan_seconds = std::chrono::duration<double>(Clock::now() - scan_start).count();
  if (scan.ok()) {
    std::ostringstream line;
    line << "scanned " << a.file << ": " << scan->num_points << " rows × " << scan->dim << " features, " << std::fixed
         << std::setprecision(1) << scan->file_bytes / 1e6 << " MB in " << scan_seconds << " s";
    bar.Show(line.str(), true);
  }
  bar.Finish();  // the upload bar starts on a line of its own
  if (!scan.ok()) return out.Failure(scan.status());

  kls::PairwiseConstraints constraints;
  if (!a.constraints_file.empty()) {
    auto read = kls::ReadConstraintsFile(a.constraints_file);
    if (!read.ok()) return out.Failure(read.status());
    constraints = std::move(read).value();
  } else if (!a.protocol.empty() && scan->labels.empty()) {
    return out.Failure(kls::InvalidArgumentError("--protocol " + a.protocol + " needs labels, but the file has none"));
  }
  // Check locally first: the message then names the file, not a stream position.
  if (const kls::Status s = constraints.Validate(static_cast<int>(scan->num_points));
      !s.ok() && !constraints.pairs.empty()) {
    return out.Failure(s.WithContext(a.constraints_file));
  }

  // Pass 2: the rows, a chunk at a time as they are parsed, then the pairs
  // (or the protocol, which the server draws the pairs by).
  kls::UploadOptions options;
  if (!a.protocol.empty()) {
    options.protocol.set_name(a.protocol);
    options.protocol.set_seed(a.seed);
  }
  if (!a.attributes.empty()) {
    auto csv = ReadWholeFile(a.attributes, "--attributes");
    if (!csv.ok()) return out.Failure(csv.status());
    options.attributes_csv = std::move(csv).value();
  }
  options.name = a.name.empty() ? DefaultName(a.file) : a.name;
  const auto send_start = Clock::now();
  options.on_progress = [&](const kls::UploadProgress& p) {
    const double seconds = std::chrono::duration<double>(Clock::now() - send_start).count();
    const bool rows_done = p.rows_sent == p.num_points;
    const bool last = rows_done && p.constraints_sent == p.num_constraints;
    std::ostringstream line;
    line << "upload " << ProgressBar::Bar(p.num_points > 0 ? double(p.rows_sent) / p.num_points : 1.0) << " "
         << p.rows_sent << "/" << p.num_points << " rows";
    if (p.num_constraints > 0) line << ", " << p.constraints_sent << "/" << p.num_constraints << " pairs";
    line << "  " << std::fixed << std::setprecision(1) << p.bytes_sent / 1e6 << " MB";
    if (seconds > 0) line << "  " << p.bytes_sent / 1e6 / seconds << " MB/s";
    line << std::defaultfloat;
    if (!last && p.rows_sent > 0 && !rows_done) {
      line << "  " << ProgressBar::Eta(seconds / p.rows_sent * (p.num_points - p.rows_sent));
    }
    bar.Show(line.str(), last);
  };
  const kls::StatusOr<kls::v1::DatasetInfo> info = client.UploadDataFile(*scan, constraints, options);
  const double send_seconds = std::chrono::duration<double>(Clock::now() - send_start).count();
  bar.Finish();
  if (!info.ok()) return out.Failure(info.status());
  std::ostringstream text;
  text << info->id() << "  '" << info->name() << "': " << info->num_points() << " points × " << info->dim()
       << " features, " << info->num_classes() << " classes, " << info->num_constraints() << " constraints";
  if (info->has_generated()) {
    text << " (protocol " << info->generated().protocol() << ", seed " << info->generated().seed() << ": "
         << info->generated().must_link() << " must-link, " << info->generated().cannot_link() << " cannot-link, "
         << info->generated().components() << " components)";
  }
  if (!info->attributes().empty()) text << "; attributes " << info->attributes();
  json j = DatasetJson(*info);
  j["upload"] = {{"file_bytes", scan->file_bytes}, {"scan_seconds", scan_seconds}, {"send_seconds", send_seconds}};
  return out.Success(j, text.str());
}

int RunDatasets(kls::Client& client, const Output& out) {
  const auto list = client.ListDatasets();
  if (!list.ok()) return out.Failure(list.status());
  json items = json::array();
  std::vector<std::vector<std::string>> rows = {
      {"ID", "NAME", "POINTS", "DIM", "CLASSES", "CONSTRAINTS", "ATTRIBUTES"}};
  for (const auto& d : *list) {
    items.push_back(DatasetJson(d));
    rows.push_back({d.id(), d.name(), std::to_string(d.num_points()), std::to_string(d.dim()),
                    std::to_string(d.num_classes()), std::to_string(d.num_constraints()),
                    d.attributes().empty() ? "-" : d.attributes()});
  }
  return out.Success({{"datasets", items}}, Table(rows));
}

Runner SetupUpload(CLI::App& app) {
  auto a = std::make_shared<UploadArgs>();
  app.add_option("file", a->file,
                 "CSV (header; last column 'label') or LIBSVM file; with --append-constraints the pairs file "
                 "(or none, with --protocol)");
  app.add_option("--name", a->name, "Data-set name (default: the file name)");
  app.add_option("--format", a->format, "auto (by extension: .csv → csv), csv or libsvm")
      ->check(CLI::IsMember({"auto", "csv", "libsvm"}))
      ->capture_default_str();
  app.add_option("--constraints", a->constraints_file,
                 "Pairwise constraints, lines 'i,j,kind' with kind 1/-1 or must/cannot");
  app.add_option("--protocol", a->protocol, "Generate constraints from the labels: admm, bcd, simplenpkl")
      ->check(CLI::IsMember({"admm", "bcd", "simplenpkl"}));
  app.add_option("--seed", a->seed, "Seed of the constraint protocol")->capture_default_str();
  app.add_option("--append-constraints", a->append_to,
                 "BASE (data-set id or name): FILE is a constraints file ('i,j,kind' lines), or --protocol draws "
                 "pairs from BASE's labels; store a new data set sharing BASE's features with BASE's pairs plus "
                 "the new ones");
  app.add_option("--attributes", a->attributes,
                 "Item attributes CSV: first column 'key' (item keys) or 'row' (0-based index), then one column per "
                 "attribute, optionally typed 'name:string|int|float|bool'");
  app.add_option("--num-features", a->num_features,
                 "LIBSVM: the number of features d (default: the largest index in the file)")
      ->check(CLI::NonNegativeNumber);
  CLI::Option* progress_flag = app.add_flag(
      "--progress", a->progress,
      "Always show the progress bar on stderr (rows sent, MB/s, ETA); default: shown, except with --json when "
      "stderr is not a terminal");
  app.add_flag("--no-progress", a->no_progress, "Never show the progress bar")->excludes(progress_flag);
  app.add_flag("--social", a->social,
               "FILE is a directory of social CSV files (photos.csv, tags.csv, comments.csv, contacts.csv, "
               "groups.csv, faves.csv; README)");
  return [a](kls::Client& client, const Output& out) { return RunUpload(client, out, *a); };
}

int RunSetAttributes(kls::Client& client, const Output& out, const std::string& dataset, const std::string& file,
                     bool clear) {
  std::string csv;
  if (!clear) {
    auto read = ReadWholeFile(file, "FILE");
    if (!read.ok()) return out.Failure(read.status());
    csv = std::move(read).value();
  }
  const auto info = client.SetAttributes(dataset, csv);
  if (!info.ok()) return out.Failure(info.status(), {{"dataset", dataset}});
  std::ostringstream text;
  text << info->id() << "  '" << info->name() << "': attributes version " << info->attributes_version() << ": "
       << (info->attributes().empty() ? "none" : info->attributes());
  return out.Success(DatasetJson(*info), text.str());
}

Runner SetupAttributes(CLI::App& app) {
  auto dataset = std::make_shared<std::string>();
  auto file = std::make_shared<std::string>();
  auto clear = std::make_shared<bool>(false);
  app.add_option("dataset", *dataset, "Data-set id or name (the newest of that name)")->required();
  CLI::Option* file_opt =
      app.add_option("file", *file, "Attributes CSV ('key' or 'row' column first, as for upload --attributes)");
  app.add_flag("--clear", *clear, "Remove the attributes instead")->excludes(file_opt);
  return [dataset, file, clear](kls::Client& client, const Output& out) {
    if (file->empty() && !*clear) return out.Failure(kls::InvalidArgumentError("give FILE or --clear"));
    return RunSetAttributes(client, out, *dataset, *file, *clear);
  };
}

Runner SetupDatasets(CLI::App& app) {
  return [](kls::Client& client, const Output& out) { return RunDatasets(client, out); };
}

}  // namespace

KLS_CLI_SUBCOMMAND(40, "upload", "Upload a CSV or LIBSVM data set (with constraints)", SetupUpload);
KLS_CLI_SUBCOMMAND(50, "datasets", "List the stored data sets", SetupDatasets);
KLS_CLI_SUBCOMMAND(55, "attributes", "Replace a data set's item attributes (no re-learning)", SetupAttributes);

}  // namespace kls::cli
