// KernelCache: learned kernels loaded from the store, shared by the query and
// export handlers, keyed by (name, version) and evicted least-recently-used
// beyond a memory budget (config key kernel_cache_mb).
//
// Resolution: a reference with an explicit version (> 0) and no alias is
// answered from the cache without touching the store; "latest" (version 0)
// and aliases are resolved through the store once and then remembered until
// the store reports a change of that kernel name (OnKernelChanged: a new
// version, a deletion or an alias move, from this replica or — through the
// shared store's events — any other). The first call for a changed name
// re-resolves and re-checks that its cached versions still exist, so a
// deleted version is never served after its event arrived, and a cached
// kernel otherwise answers without waiting on the store.
// A kernel the store cannot verify (DATA_LOSS: corrupted artifact) is
// returned as that error and never cached or served.
//
// Item keys: the data set's item keys (for TopK by key and for naming the
// results) and labels (Kernels.Inspect) are loaded lazily, once per cached
// kernel, on the first call that needs them; data sets are immutable, so the
// copy never goes stale.
//
// Top-k index: every loaded kernel gets its TopKIndex (core/model/topk_index.h,
// an int8 screening copy, exact answers identical to LearnedKernel::TopK),
// built once at load outside the mutex; TopK queries go through it.
//
// Memory: a kernel is charged n·r·8 bytes for the embedding, the index's
// memory_bytes() (about 14 % more at rank 128), its attachments, and its keys
// and labels once loaded. A kernel larger than the whole budget is still
// served, but not kept.
//
// Thread safety: all methods are safe to call concurrently. The mutex is held
// only for map and list updates; loading from the store and all query
// computation run outside it, on shared_ptr<const> snapshots, so concurrent
// queries never serialize on the cache.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/common/status.h"
#include "core/data/feature_scaling.h"
#include "core/model/item_attributes.h"
#include "core/model/learned_kernel.h"
#include "core/model/topk_index.h"
#include "core/serving/kernel_servable.h"
#include "server/store/store.h"

namespace kls::server {

/// The item keys of a data set and the inverse map key → point index, and
/// its labels (Kernels.Inspect), loaded together.
struct ItemKeys {
  std::vector<std::string> keys;  ///< empty when the data set has no keys
  std::unordered_map<std::string, int> index;
  std::vector<int> labels;        ///< empty when the data set has no labels
  bool empty() const { return keys.empty(); }
};

/// Which kernel: `name` plus `version` (0 = latest) or `alias` (non-empty).
struct KernelKey {
  std::string name;
  int64_t version = 0;
  std::string alias;
};

/// The parsed attachments of a kernel (solver_dispatch.h names them): what
/// Classify and the social queries need besides the embedding. `bytes` is
/// charged to the cache budget.
using ModelExtras = ModelAttachments;

class KernelCache {
 public:
  /// A resolved, loaded kernel. `kernel` stays valid for as long as the
  /// caller holds it, even if the entry is evicted or the kernel deleted.
  struct Handle {
    store::KernelRecord record;
    std::shared_ptr<const LearnedKernel> kernel;
    std::shared_ptr<const ModelExtras> extras;  ///< never null (empty when none)
    std::shared_ptr<const TopKIndex> index;     ///< null only if building it ran out of memory

    /// The kernel with its index and attachments, answering the queries.
    KernelServable servable() const { return KernelServable(kernel, index, extras); }
  };

  /// `store` must outlive the cache. `budget_bytes` ≥ 1.
  KernelCache(store::Store* store, int64_t budget_bytes);
  KernelCache(const KernelCache&) = delete;
  KernelCache& operator=(const KernelCache&) = delete;

  /// Resolves and loads a kernel. NOT_FOUND for an unknown name, version or
  /// alias; DATA_LOSS for a corrupted artifact; INVALID_ARGUMENT for a
  /// malformed reference (empty name, negative version, alias with version).
  StatusOr<Handle> Get(const KernelKey& key);

  /// The handle Get would return when answering needs neither the store nor
  /// a load: the reference is already resolved (an explicit version, or a
  /// cached "latest" / alias resolution), no change notification is pending
  /// for the name, and the kernel is in memory (counted as a hit). nullopt
  /// otherwise — including a malformed reference — and the caller takes Get's
  /// path, which may block on the store. Never blocks on I/O; the query
  /// handlers that run on gRPC's callback threads use it.
  std::optional<Handle> GetCached(const KernelKey& key);

  /// The item keys (and labels) of the data set `record` was learned on
  /// (empty ItemKeys when it has none). NOT_FOUND when that data set was
  /// deleted. Cached with the kernel entry when the kernel is cached.
  StatusOr<std::shared_ptr<const ItemKeys>> GetItemKeys(const store::KernelRecord& record);

  /// The feature rows of that data set (n × d) as the solver saw them (with
  /// the kernel's feature scaling applied), for extending the kernel to
  /// unseen points. Same errors and caching as GetItemKeys; loaded only when
  /// first asked for (charged to the budget with the entry).
  StatusOr<std::shared_ptr<const Eigen::MatrixXd>> GetTrainingFeatures(const Handle& handle);

  /// The item attributes of data set `dataset_id` (null when it has none),
  /// decoded once and kept until the store reports a change of that data set
  /// (OnDatasetChanged: SetAttributes or a delete, on any replica). NOT_FOUND
  /// for a deleted data set; DATA_LOSS for stored bytes that do not decode.
  /// Not charged to the kernel budget (one table per data set, shared by
  /// all its kernels).
  StatusOr<std::shared_ptr<const ItemAttributes>> GetAttributes(const std::string& dataset_id);

  /// The store reports that data set `dataset_id` changed (empty: anything
  /// may have changed). Cheap; safe to call from the store's event thread.
  void OnDatasetChanged(const std::string& dataset_id);

  /// Drops the cached `name` at `version` (0 = every version). Call after
  /// deleting a kernel from the store, since a later kernel of the same name
  /// may reuse the version number.
  void Invalidate(const std::string& name, int64_t version);

  /// The store reports that kernel `name` changed (empty: anything may have
  /// changed, e.g. events were missed while the store was unreachable).
  /// Cheap; safe to call from the store's event thread.
  void OnKernelChanged(const std::string& name);

  /// Bytes currently charged and entries held (for tests and metrics).
  int64_t charged_bytes() const;
  int entry_count() const;
  int64_t budget_bytes() const { return budget_bytes_; }

  /// Counters since construction (metrics): Get() calls answered from a
  /// cached entry, Get() calls that loaded the kernel from the store, and
  /// entries evicted for the budget (not counting invalidations).
  struct Counters {
    uint64_t hits = 0, misses = 0, evictions = 0;
  };
  Counters counters() const;

 private:
  using MapKey = std::pair<std::string, int64_t>;
  struct Entry {
    store::KernelRecord record;
    std::shared_ptr<const LearnedKernel> kernel;
    std::shared_ptr<const ModelExtras> extras;
    std::shared_ptr<const TopKIndex> index;
    std::shared_ptr<const ItemKeys> keys;  ///< null until first needed
    std::shared_ptr<const Eigen::MatrixXd> features;  ///< null until first needed
    int64_t bytes = 0;
    std::list<MapKey>::iterator lru_position;
  };

  /// Inserts (or finds an equal concurrent insertion) and evicts beyond the
  /// budget. Requires mu_.
  /// Loads `record`'s data set, derives a T from it with `build` and caches
  /// it in the entry's `slot` (charging `bytes(T)`), once per entry.
  template <typename T, typename Build, typename Bytes>
  StatusOr<std::shared_ptr<const T>> FromDataset(const store::KernelRecord& record,
                                                 std::shared_ptr<const T> Entry::*slot, Build build, Bytes bytes);

  /// Re-checks a changed name: drops its resolutions and the cached versions
  /// the store no longer has. Called without mu_.
  void RevalidateIfChanged(const std::string& name);

  void InsertLocked(const MapKey& key, Entry entry);
  /// The entry's handle, counted as a hit and made most recent; nullopt if absent.
  std::optional<Handle> HitLocked(const MapKey& key);
  void EvictLocked();
  void TouchLocked(Entry& entry);

  store::Store* const store_;
  const int64_t budget_bytes_;

  mutable std::mutex mu_;
  std::map<MapKey, Entry> entries_;
  std::list<MapKey> lru_;  ///< front = most recently used
  int64_t charged_bytes_ = 0;
  /// (name, alias) → resolved record; alias "" = latest version.
  std::map<std::pair<std::string, std::string>, store::KernelRecord> resolutions_;
  std::set<std::string> changed_;  ///< names changed since last revalidated
  bool all_changed_ = false;       ///< OnKernelChanged("")
  uint64_t generation_ = 0;        ///< bumped by every OnKernelChanged
  Counters counters_;              ///< guarded by mu_
  /// data set id → its attributes (a null pointer: it has none).
  std::map<std::string, std::shared_ptr<const ItemAttributes>> attributes_;
  uint64_t attributes_generation_ = 0;  ///< bumped by every OnDatasetChanged
};

/// Checks the shape of a reference: non-empty name, version ≥ 0, not both an
/// alias and a version. `field` prefixes the message ("kernel.version = -1 ...").
Status ValidateKernelKey(const KernelKey& key, const std::string& field);

}  // namespace kls::server
