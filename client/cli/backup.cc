// kls backup [NAME]: a snapshot of the server's embedded store into a new
// directory under its backup_dir (Admin.Backup; scope admin).
#include <sstream>

#include "client/cli/common.h"

namespace kls::cli {
namespace {

int RunBackup(kls::Client& client, const Output& out, const std::string& name) {
  const kls::StatusOr<kls::v1::BackupResponse> r = client.Backup(name);
  if (!r.ok()) return out.Failure(r.status(), name.empty() ? json::object() : json{{"name", name}});
  const json object = {
      {"path", r->path()},       {"datasets", r->datasets()},   {"kernels", r->kernels()},
      {"jobs", r->jobs()},       {"files", r->files()},         {"bytes", r->bytes()},
      {"linked", r->linked()},   {"schema_version", r->schema_version()},
      {"attempts", r->attempts()}, {"seconds", r->seconds()}, {"kls_version", r->kls_version()},
  };
  std::ostringstream text;
  text << r->path() << ": " << r->datasets() << " data sets, " << r->kernels() << " kernels, " << r->jobs()
       << " jobs; " << r->files() << " files, " << r->bytes() << " bytes (" << r->linked()
       << " hard-linked), schema " << r->schema_version() << ", " << r->seconds() << " s";
  return out.Success(object, text.str());
}

Runner SetupBackup(CLI::App& app) {
  auto name = std::make_shared<std::string>();
  app.add_option("name", *name,
                 "Snapshot directory under the server's backup_dir (A-Z a-z 0-9 . _ -); default "
                 "kls-backup-<UTC time>. Large stores: raise --timeout-seconds (the backup finishes on the "
                 "server even when the call times out)");
  return [name](kls::Client& client, const Output& out) { return RunBackup(client, out, *name); };
}

}  // namespace

KLS_CLI_SUBCOMMAND(35, "backup", "Snapshot the server's embedded store into its backup_dir (scope admin)",
                   SetupBackup);

}  // namespace kls::cli
