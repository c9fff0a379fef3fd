// kls kernels | alias | delete-kernel | delete-dataset | embed: the stored
// kernels and data sets, and rows of a kernel's embedding.
#include <sstream>

#include "client/cli/common.h"

namespace kls::cli {
namespace {

int RunKernels(kls::Client& client, const Output& out, const std::string& name) {
  const auto list = client.ListKernels(name);
  if (!list.ok()) return out.Failure(list.status());
  json items = json::array();
  std::vector<std::vector<std::string>> rows = {{"NAME", "VERSION", "METHOD", "DATASET", "POINTS", "RANK", "JOB"}};
  for (const auto& k : *list) {
    items.push_back(KernelJson(k));
    rows.push_back({k.name(), std::to_string(k.version()), k.method(), k.dataset_id(), std::to_string(k.num_points()),
                    std::to_string(k.rank()), k.job_id()});
  }
  return out.Success({{"kernels", items}}, Table(rows));
}

Runner SetupKernels(CLI::App& app) {
  auto name = std::make_shared<std::string>();
  app.add_option("--name", *name, "Only versions of this name");
  return [name](kls::Client& client, const Output& out) { return RunKernels(client, out, *name); };
}

Runner SetupAlias(CLI::App& app) {
  auto name = std::make_shared<std::string>();
  auto alias = std::make_shared<std::string>();
  auto version = std::make_shared<int64_t>(0);
  app.add_option("name", *name, "Kernel name")->required();
  app.add_option("alias", *alias, "Alias, e.g. prod (then NAME@prod)")->required();
  app.add_option("version", *version, "The version the alias points to")->required();
  return [name, alias, version](kls::Client& client, const Output& out) {
    const auto info = client.SetAlias(*name, *alias, *version);
    if (!info.ok()) return out.Failure(info.status(), {{"kernel", *name}});
    return out.Success(KernelJson(*info), *name + "@" + *alias + " -> v" + std::to_string(*version));
  };
}

Runner SetupDeleteKernel(CLI::App& app) {
  auto ref = std::make_shared<std::string>();
  app.add_option("kernel", *ref, "NAME (every version) or NAME:VERSION")->required();
  return [ref](kls::Client& client, const Output& out) {
    const auto parsed = kls::ParseKernelRef(*ref);
    if (!parsed.ok()) return out.Failure(parsed.status());
    if (!parsed->alias().empty()) {
      return out.Failure(kls::InvalidArgumentError("kernel = '" + *ref + "': delete NAME or NAME:VERSION, not an alias"));
    }
    const kls::Status deleted = client.DeleteKernel(parsed->name(), parsed->version());
    if (!deleted.ok()) return out.Failure(deleted, {{"kernel", *ref}});
    const std::string what = parsed->version() == 0 ? "every version of " + parsed->name()
                                                    : parsed->name() + ":" + std::to_string(parsed->version());
    return out.Success({{"deleted", {{"name", parsed->name()}, {"version", parsed->version()}}}}, "deleted " + what);
  };
}

Runner SetupDeleteDataset(CLI::App& app) {
  auto ref = std::make_shared<std::string>();
  app.add_option("dataset", *ref, "Data-set id or name (the newest of that name)")->required();
  return [ref](kls::Client& client, const Output& out) {
    const auto id = ResolveDataset(client, *ref, "dataset");
    if (!id.ok()) return out.Failure(id.status());
    const kls::Status deleted = client.DeleteDataset(*id);
    if (!deleted.ok()) return out.Failure(deleted, {{"dataset", *ref}});
    return out.Success({{"deleted", {{"id", *id}}}}, "deleted data set " + *id);
  };
}

Runner SetupEmbed(CLI::App& app) {
  auto kernel = std::make_shared<std::string>();
  auto rows = std::make_shared<std::string>();
  auto features = std::make_shared<std::string>();
  app.add_option("--kernel", *kernel, "NAME, NAME:VERSION or NAME@ALIAS")->required();
  CLI::Option* rows_opt = app.add_option("--rows", *rows, "Item indices '0,5,9': their rows of V");
  app.add_option("--features", *features,
                 "Items the kernel was not trained on, raw features 'x,y,...;x,y,...': their extended rows")
      ->excludes(rows_opt);
  return [kernel, rows, features](kls::Client& client, const Output& out) {
    const auto ref = kls::ParseKernelRef(*kernel);
    if (!ref.ok()) return out.Failure(ref.status());
    kls::v1::EmbedRequest request;
    *request.mutable_kernel() = *ref;
    if (rows->empty() == features->empty()) {
      return out.Failure(kls::InvalidArgumentError("give --rows or --features"));
    }
    std::vector<std::string> labels;
    if (!rows->empty()) {
      const auto indices = ParseIndices(*rows, "--rows");
      if (!indices.ok()) return out.Failure(indices.status());
      for (int i : *indices) {
        request.add_rows(i);
        labels.push_back(std::to_string(i));
      }
    } else {
      std::stringstream in(*features);
      std::string part;
      int dim = -1;
      while (std::getline(in, part, ';')) {
        const auto v = ParseNumbers(part, "--features");
        if (!v.ok()) return out.Failure(v.status());
        if (dim >= 0 && static_cast<int>(v->size()) != dim) {
          return out.Failure(kls::InvalidArgumentError("--features: rows have " + std::to_string(dim) + " and " +
                                                       std::to_string(v->size()) + " values"));
        }
        dim = static_cast<int>(v->size());
        request.mutable_features()->Add(v->begin(), v->end());
        labels.push_back("new-" + std::to_string(labels.size()));
      }
      request.set_dim(dim);
    }
    const auto response = client.Embed(request);
    if (!response.ok()) return out.Failure(response.status(), {{"kernel", *kernel}});
    const int rank = std::max(1, response->rank());
    json out_rows = json::array();
    std::vector<std::vector<std::string>> table = {{"ROW"}};
    for (int c = 0; c < response->rank(); ++c) table[0].push_back("v" + std::to_string(c));
    for (int t = 0; t * rank < response->values_size(); ++t) {
      std::vector<double> row(response->values().begin() + t * rank, response->values().begin() + (t + 1) * rank);
      out_rows.push_back(row);
      table.push_back({t < static_cast<int>(labels.size()) ? labels[t] : std::to_string(t)});
      for (double x : row) table.back().push_back(Fixed(x, 10));
    }
    return out.Success({{"kernel", RefText(*ref)}, {"rank", response->rank()}, {"rows", out_rows}}, Table(table));
  };
}

}  // namespace

KLS_CLI_SUBCOMMAND(110, "kernels", "List learned kernels", SetupKernels);
KLS_CLI_SUBCOMMAND(112, "alias", "Point NAME@ALIAS at a version of a kernel", SetupAlias);
KLS_CLI_SUBCOMMAND(114, "delete-kernel", "Delete a kernel version (NAME:VERSION) or every version (NAME)",
                   SetupDeleteKernel);
KLS_CLI_SUBCOMMAND(116, "delete-dataset", "Delete a data set (id or name)", SetupDeleteDataset);
KLS_CLI_SUBCOMMAND(118, "embed", "Rows of a kernel's embedding V, or of unseen items by their features", SetupEmbed);

}  // namespace kls::cli
