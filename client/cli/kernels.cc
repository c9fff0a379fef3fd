// kls kernels: the learned kernels, every version.
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

}  // namespace

KLS_CLI_SUBCOMMAND(110, "kernels", "List learned kernels", SetupKernels);

}  // namespace kls::cli
