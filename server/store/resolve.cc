#include "server/store/store.h"

namespace kls::store {

StatusOr<DatasetRecord> ResolveDataset(Store* store, const std::string& ref, const char* field) {
  if (ref.empty()) return InvalidArgumentError(std::string(field) + " must not be empty");
  StatusOr<DatasetRecord> by_id = store->GetDatasetRecord(ref);
  if (by_id.ok() || by_id.status().code() != StatusCode::kNotFound) return by_id;
  KLS_ASSIGN_OR_RETURN(std::vector<DatasetRecord> all, store->ListDatasets());
  const DatasetRecord* newest = nullptr;
  for (const DatasetRecord& r : all) {
    if (r.name == ref && (!newest || r.created_unix_ms >= newest->created_unix_ms)) newest = &r;
  }
  if (!newest) return NotFoundError(std::string(field) + " = \"" + ref + "\": no data set has that id or name");
  return *newest;
}

}  // namespace kls::store
