// CopyStore: the offline copy behind `kls-server --migrate-from DIR --store URI`.
// Generic over the Store interface: it reads through the source's public
// methods (so every artifact is checksum-verified on the way out) and writes
// through the destination's Import* methods, which keep ids and versions.
#include <string>

#include "server/store/store.h"

namespace kls::store {
namespace {

/// OK, or ALREADY_EXISTS counted as skipped (a re-run of an interrupted copy).
Status CountImport(const Status& s, int64_t* copied, int64_t* skipped) {
  if (s.ok()) {
    ++*copied;
    return OkStatus();
  }
  if (s.code() == StatusCode::kAlreadyExists) {
    ++*skipped;
    return OkStatus();
  }
  return s;
}

}  // namespace

StatusOr<MigrationReport> CopyStore(Store& from, Store& to) {
  MigrationReport report;
  KLS_ASSIGN_OR_RETURN(std::vector<DatasetRecord> datasets, from.ListDatasets());
  for (const DatasetRecord& r : datasets) {
    KLS_ASSIGN_OR_RETURN(StoredDataset data, from.LoadDataset(r.id));
    KLS_RETURN_IF_ERROR(CountImport(to.ImportDataset(r, data), &report.datasets, &report.skipped_existing)
                            .WithContext("copying data set " + r.id));
    // Attributes: the latest table (its version number restarts on the target).
    KLS_ASSIGN_OR_RETURN(std::optional<StoredAttributes> attributes, from.GetDatasetAttributes(r.id));
    if (attributes) {
      KLS_RETURN_IF_ERROR(to.PutDatasetAttributes(r.id, attributes->summary, attributes->bytes)
                              .status()
                              .WithContext("copying the attributes of data set " + r.id));
    }
  }
  KLS_ASSIGN_OR_RETURN(std::vector<KernelRecord> kernels, from.ListKernels());
  for (const KernelRecord& r : kernels) {
    KLS_ASSIGN_OR_RETURN(StoredModel model, from.LoadModel(r.name, r.version));
    KLS_RETURN_IF_ERROR(CountImport(to.ImportKernel(r, model), &report.kernels, &report.skipped_existing)
                            .WithContext("copying kernel " + r.name + " v" + std::to_string(r.version)));
  }
  KLS_ASSIGN_OR_RETURN(std::vector<Store::AliasRecord> aliases, from.ListAliases());
  for (const Store::AliasRecord& a : aliases) {
    KLS_RETURN_IF_ERROR(to.SetAlias(a.name, a.alias, a.version).WithContext("copying alias " + a.name + "@" + a.alias));
    ++report.aliases;
  }
  JobFilter all;
  all.page_size = 1000;
  for (;;) {
    std::string next;
    KLS_ASSIGN_OR_RETURN(std::vector<JobRecord> page, from.ListJobs(all, &next));
    for (JobRecord j : page) {
      if (j.state == JobState::kRunning) {
        j.state = JobState::kQueued;
        j.started_unix_ms = 0;
      }
      j.owner.clear();
      j.lease_expires_unix_ms = 0;
      KLS_RETURN_IF_ERROR(CountImport(to.ImportJob(j), &report.jobs, &report.skipped_existing)
                              .WithContext("copying job " + j.id));
    }
    if (next.empty()) break;
    all.page_token = next;
  }
  return report;
}

}  // namespace kls::store
