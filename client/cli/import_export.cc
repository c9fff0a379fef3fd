// kls export | import: a kernel's embedding V (K = V Vᵀ) to and from CSV.
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <sstream>

#include "client/cli/common.h"
#include "core/data/csv_reader.h"

namespace kls::cli {
namespace {

int RunExport(kls::Client& client, const Output& out, const std::string& kernel, const std::string& path) {
  const auto ref = kls::ParseKernelRef(kernel);
  if (!ref.ok()) return out.Failure(ref.status());
  const auto exported = client.ExportKernel(*ref);
  if (!exported.ok()) return out.Failure(exported.status(), {{"kernel", kernel}});
  const auto& v = exported->embedding;
  // Header v0..v{r-1}, one row per point, 17 significant digits: core's
  // ReadCsvFile reads it back as an n × r matrix bit for bit.
  const std::string tmp = path + ".tmp";
  {
    std::ofstream file(tmp);
    if (!file) return out.Failure(kls::Status(kls::StatusCode::kPermissionDenied, "cannot write '" + path + "'"));
    file << std::setprecision(17);
    for (Eigen::Index c = 0; c < v.cols(); ++c) file << (c ? "," : "") << "v" << c;
    file << "\n";
    for (Eigen::Index r = 0; r < v.rows(); ++r) {
      for (Eigen::Index c = 0; c < v.cols(); ++c) file << (c ? "," : "") << v(r, c);
      file << "\n";
    }
    file.flush();
    if (!file) return out.Failure(kls::InternalError("writing '" + tmp + "' failed"));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return out.Failure(kls::InternalError("cannot rename '" + tmp + "' to '" + path + "'"));
  }
  json object = KernelJson(exported->info);
  object["out"] = path;
  std::ostringstream text;
  text << "wrote " << path << ": kernel " << exported->info.name() << ":" << exported->info.version() << ", "
       << v.rows() << " × " << v.cols() << " embedding";
  return out.Success(object, text.str());
}

// CSV rows → Kernels.Import. The file is the layout `export` writes (header,
// one embedding row per line), optionally with a first column `key`.
int RunImport(kls::Client& client, const Output& out, const std::string& path, const std::string& name) {
  kls::StatusOr<kls::Dataset> data = kls::ReadCsvFile(path);
  if (!data.ok()) return out.Failure(data.status());
  if (data->has_labels()) {
    return out.Failure(kls::InvalidArgumentError(
        "'" + path + "' has a label column; import takes embedding rows only (remove the 'label' column)"));
  }
  const kls::LearnedKernel::Embedding v = data->features;  // column-major → row-major
  const auto info = client.ImportKernel(name, v, data->item_keys);
  if (!info.ok()) return out.Failure(info.status(), {{"file", path}});
  json object = KernelJson(*info);
  object["file"] = path;
  std::ostringstream text;
  text << "imported " << path << " as kernel " << info->name() << ":" << info->version() << " (" << info->num_points()
       << " × " << info->rank() << (data->item_keys.empty() ? "" : ", with item keys") << ")";
  return out.Success(object, text.str());
}

Runner SetupExport(CLI::App& app) {
  auto args = std::make_shared<std::pair<std::string, std::string>>();  // kernel, path
  app.add_option("--kernel", args->first, "NAME, NAME:VERSION or NAME@ALIAS")->required();
  app.add_option("--out", args->second, "CSV file to write (header v0..v{r-1})")->required();
  return [args](kls::Client& client, const Output& out) { return RunExport(client, out, args->first, args->second); };
}

Runner SetupImport(CLI::App& app) {
  auto args = std::make_shared<std::pair<std::string, std::string>>();  // file, name
  app.add_option("file", args->first, "CSV: header, one row per item; optional first column 'key'")->required();
  app.add_option("--name", args->second, "Kernel name (the next version of it is created)")->required();
  return [args](kls::Client& client, const Output& out) { return RunImport(client, out, args->first, args->second); };
}

}  // namespace

KLS_CLI_SUBCOMMAND(180, "export", "Download a kernel's embedding V (K = V Vᵀ) as CSV", SetupExport);
KLS_CLI_SUBCOMMAND(190, "import", "Store an embedding V (CSV rows) as a kernel K = V Vᵀ", SetupImport);

}  // namespace kls::cli
