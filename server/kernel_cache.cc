#include "server/kernel_cache.h"

#include <spdlog/spdlog.h>

#include "server/jobs/solver_dispatch.h"

#include <climits>
#include <new>
#include <optional>

namespace kls::server {
namespace {

int64_t KernelBytes(const LearnedKernel& k) {
  return static_cast<int64_t>(k.num_points()) * k.rank() * static_cast<int64_t>(sizeof(double)) + 256;
}

int64_t KeyBytes(const ItemKeys& keys) {
  int64_t bytes = 0;
  // Each key lives twice (vector and map) plus node and bucket overhead.
  for (const std::string& k : keys.keys) bytes += 2 * static_cast<int64_t>(k.size()) + 96;
  return bytes + static_cast<int64_t>(keys.labels.size() * sizeof(int));
}

}  // namespace

Status ValidateKernelKey(const KernelKey& key, const std::string& field) {
  if (key.name.empty()) return InvalidArgumentError(field + ".name must not be empty");
  if (key.version < 0) {
    return InvalidArgumentError(field + ".version = " + std::to_string(key.version) +
                                " must be >= 0 (0 = latest)");
  }
  if (!key.alias.empty() && key.version != 0) {
    return InvalidArgumentError(field + ": give either version (" + std::to_string(key.version) +
                                ") or alias ('" + key.alias + "'), not both");
  }
  return OkStatus();
}

namespace {

// Attachments → parsed models; a malformed one is DATA_LOSS (never served).
StatusOr<ModelExtras> ParseExtras(const store::StoredModel& model, const std::string& name, int64_t version) {
  std::vector<AttachmentView> views;
  for (const store::Attachment& a : model.attachments) views.push_back({a.name, &a.bytes});
  StatusOr<ModelExtras> parsed = ParseAttachments(model.kernel, views);
  if (!parsed.ok()) return Status(parsed.status().code(), "kernel " + name + " v" + std::to_string(version) + ": " +
                                                              parsed.status().message());
  return parsed;
}

}  // namespace

KernelCache::KernelCache(store::Store* store, int64_t budget_bytes)
    : store_(store), budget_bytes_(budget_bytes < 1 ? 1 : budget_bytes) {}

StatusOr<KernelCache::Handle> KernelCache::Get(const KernelKey& key) {
  KLS_RETURN_IF_ERROR(ValidateKernelKey(key, "kernel"));

  RevalidateIfChanged(key.name);
  // An explicit version names immutable content: answer from memory.
  std::optional<store::KernelRecord> record;
  int64_t version = key.version;
  if (version == 0 || !key.alias.empty()) {
    const std::pair<std::string, std::string> rkey{key.name, key.alias};
    uint64_t generation;
    {
      std::lock_guard<std::mutex> lock(mu_);
      generation = generation_;
      if (auto it = resolutions_.find(rkey); it != resolutions_.end()) record = it->second;
    }
    if (!record) {
      KLS_ASSIGN_OR_RETURN(store::KernelRecord resolved, store_->GetKernelRecord(key.name, key.version, key.alias));
      std::lock_guard<std::mutex> lock(mu_);
      if (generation == generation_) resolutions_[rkey] = resolved;  // not if a change raced the read
      record = std::move(resolved);
    }
    version = record->version;
  }
  const MapKey map_key{key.name, version};
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (std::optional<Handle> hit = HitLocked(map_key)) return std::move(*hit);
    ++counters_.misses;
  }

  // Miss: load outside the lock. Two concurrent misses may both load; the
  // second insertion finds the first and keeps it (same immutable content).
  if (!record) {
    KLS_ASSIGN_OR_RETURN(store::KernelRecord resolved, store_->GetKernelRecord(key.name, version));
    record = std::move(resolved);
  }
  std::shared_ptr<const LearnedKernel> kernel;
  std::shared_ptr<const ModelExtras> extras;
  std::shared_ptr<const TopKIndex> index;
  try {
    KLS_ASSIGN_OR_RETURN(store::StoredModel loaded, store_->LoadModel(key.name, version));
    KLS_ASSIGN_OR_RETURN(ModelExtras parsed, ParseExtras(loaded, key.name, version));
    kernel = std::make_shared<const LearnedKernel>(std::move(loaded.kernel));
    extras = std::make_shared<const ModelExtras>(std::move(parsed));
    StatusOr<TopKIndex> built = TopKIndex::Build(kernel);
    if (built.ok()) {
      index = std::make_shared<const TopKIndex>(std::move(built).value());
    } else {
      spdlog::warn("kernel {} v{}: no top-k index ({}); top-k queries scan the embedding", key.name, version,
                   built.status().ToString());
    }
  } catch (const std::bad_alloc&) {
    return ResourceExhaustedError("not enough memory to load kernel " + key.name + " v" +
                                  std::to_string(version));
  }

  Entry entry;
  entry.record = *record;
  entry.kernel = kernel;
  entry.extras = extras;
  entry.index = index;
  entry.bytes = KernelBytes(*kernel) + extras->bytes + (index ? index->memory_bytes() : 0);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(map_key);
  if (it != entries_.end()) {
    TouchLocked(it->second);
    return Handle{it->second.record, it->second.kernel, it->second.extras, it->second.index};
  }
  if (entry.bytes <= budget_bytes_) InsertLocked(map_key, std::move(entry));
  return Handle{*record, kernel, extras, index};
}

template <typename T, typename Build, typename Bytes>
StatusOr<std::shared_ptr<const T>> KernelCache::FromDataset(const store::KernelRecord& record,
                                                            std::shared_ptr<const T> Entry::*slot, Build build,
                                                            Bytes bytes) {
  const MapKey map_key{record.name, record.version};
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(map_key);
    if (it != entries_.end() && it->second.*slot) return it->second.*slot;
  }

  StatusOr<store::StoredDataset> data = store_->LoadDataset(record.dataset_id);
  if (!data.ok()) {
    if (data.status().code() == StatusCode::kNotFound) {
      return NotFoundError("data set " + record.dataset_id + " that kernel " + record.name + " v" +
                           std::to_string(record.version) + " was learned on no longer exists");
    }
    return data.status();
  }
  std::shared_ptr<const T> value = build(*data);

  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(map_key);
  if (it == entries_.end()) return value;
  if (!(it->second.*slot)) {
    it->second.*slot = value;
    const int64_t extra = bytes(*value);
    it->second.bytes += extra;
    charged_bytes_ += extra;
    TouchLocked(it->second);
    EvictLocked();  // may drop this very entry; `value` keeps the data alive
    return value;
  }
  return it->second.*slot;
}

StatusOr<std::shared_ptr<const ItemKeys>> KernelCache::GetItemKeys(const store::KernelRecord& record) {
  return FromDataset<ItemKeys>(
      record, &Entry::keys,
      [](store::StoredDataset& data) {
        auto keys = std::make_shared<ItemKeys>();
        keys->keys = std::move(data.data.item_keys);
        keys->index.reserve(keys->keys.size());
        for (size_t i = 0; i < keys->keys.size(); ++i) keys->index.emplace(keys->keys[i], static_cast<int>(i));
        keys->labels = std::move(data.data.labels);
        return keys;
      },
      KeyBytes);
}

StatusOr<std::shared_ptr<const Eigen::MatrixXd>> KernelCache::GetTrainingFeatures(const Handle& handle) {
  const std::optional<FeatureScaler>& scaling = handle.extras->scaling;
  return FromDataset<Eigen::MatrixXd>(
      handle.record, &Entry::features,
      [&](store::StoredDataset& data) {
        // A width mismatch (not the data set the statistics were fitted on) is left
        // unscaled here and reported by the query, which scales its own rows.
        if (scaling && scaling->dim() == data.data.features.cols()) {
          StatusOr<Eigen::MatrixXd> scaled = scaling->Apply(data.data.features);
          if (scaled.ok()) return std::make_shared<Eigen::MatrixXd>(std::move(scaled).value());
        }
        return std::make_shared<Eigen::MatrixXd>(std::move(data.data.features));
      },
      [](const Eigen::MatrixXd& x) { return static_cast<int64_t>(x.size() * sizeof(double)); });
}

StatusOr<std::shared_ptr<const ItemAttributes>> KernelCache::GetAttributes(const std::string& dataset_id) {
  uint64_t generation = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = attributes_.find(dataset_id); it != attributes_.end()) return it->second;
    generation = attributes_generation_;
  }
  KLS_ASSIGN_OR_RETURN(std::optional<store::StoredAttributes> stored, store_->GetDatasetAttributes(dataset_id));
  std::shared_ptr<const ItemAttributes> attributes;
  if (stored) {
    StatusOr<ItemAttributes> decoded = ItemAttributes::Deserialize(stored->bytes);
    if (!decoded.ok()) {
      return DataLossError("the attributes of data set " + dataset_id + ": " + decoded.status().message());
    }
    attributes = std::make_shared<const ItemAttributes>(std::move(decoded).value());
  }
  std::lock_guard<std::mutex> lock(mu_);
  // A change reported while loading may postdate what was read: answer with
  // it, but keep nothing, so the next call reads again.
  if (generation == attributes_generation_) attributes_[dataset_id] = attributes;
  return attributes;
}

void KernelCache::OnDatasetChanged(const std::string& dataset_id) {
  std::lock_guard<std::mutex> lock(mu_);
  ++attributes_generation_;
  if (dataset_id.empty()) {
    attributes_.clear();
  } else {
    attributes_.erase(dataset_id);
  }
}

void KernelCache::Invalidate(const std::string& name, int64_t version) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = entries_.lower_bound({name, version == 0 ? INT64_MIN : version}); it != entries_.end();) {
    if (it->first.first != name || (version != 0 && it->first.second != version)) break;
    charged_bytes_ -= it->second.bytes;
    lru_.erase(it->second.lru_position);
    it = entries_.erase(it);
  }
}

void KernelCache::OnKernelChanged(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  ++generation_;
  if (name.empty()) {
    all_changed_ = true;
    resolutions_.clear();
    return;
  }
  changed_.insert(name);
  for (auto it = resolutions_.lower_bound({name, ""}); it != resolutions_.end() && it->first.first == name;) {
    it = resolutions_.erase(it);
  }
}

std::optional<KernelCache::Handle> KernelCache::HitLocked(const MapKey& key) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  ++counters_.hits;
  TouchLocked(it->second);
  return Handle{it->second.record, it->second.kernel, it->second.extras, it->second.index};
}

std::optional<KernelCache::Handle> KernelCache::GetCached(const KernelKey& key) {
  if (!ValidateKernelKey(key, "kernel").ok()) return std::nullopt;  // Get reports the error
  std::lock_guard<std::mutex> lock(mu_);
  if (all_changed_ || changed_.count(key.name) != 0) return std::nullopt;
  int64_t version = key.version;
  if (version == 0 || !key.alias.empty()) {
    auto resolved = resolutions_.find({key.name, key.alias});
    if (resolved == resolutions_.end()) return std::nullopt;
    version = resolved->second.version;
  }
  return HitLocked(MapKey{key.name, version});
}

void KernelCache::RevalidateIfChanged(const std::string& name) {
  std::vector<int64_t> versions;
  uint64_t generation;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!all_changed_ && changed_.count(name) == 0) return;
    generation = generation_;
    for (auto it = entries_.lower_bound({name, INT64_MIN}); it != entries_.end() && it->first.first == name; ++it) {
      versions.push_back(it->first.second);
    }
  }
  for (int64_t v : versions) {
    const StatusOr<store::KernelRecord> r = store_->GetKernelRecord(name, v);
    if (r.ok()) continue;
    if (r.status().code() != StatusCode::kNotFound) return;  // store unreachable: keep serving, check later
    Invalidate(name, v);
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (all_changed_) {
    // Every name must be re-checked; mark them individually.
    for (const auto& [k, e] : entries_) changed_.insert(k.first);
    all_changed_ = false;
  }
  if (generation == generation_) changed_.erase(name);  // a change that raced this check is checked next time
}

int64_t KernelCache::charged_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return charged_bytes_;
}

KernelCache::Counters KernelCache::counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counters_;
}

int KernelCache::entry_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(entries_.size());
}

void KernelCache::InsertLocked(const MapKey& key, Entry entry) {
  lru_.push_front(key);
  entry.lru_position = lru_.begin();
  charged_bytes_ += entry.bytes;
  entries_.emplace(key, std::move(entry));
  EvictLocked();
}

void KernelCache::EvictLocked() {
  // Never evict the most recently used entry: it is the one being served.
  while (charged_bytes_ > budget_bytes_ && lru_.size() > 1) {
    auto it = entries_.find(lru_.back());
    charged_bytes_ -= it->second.bytes;
    entries_.erase(it);
    lru_.pop_back();
    ++counters_.evictions;
  }
}

void KernelCache::TouchLocked(Entry& entry) { lru_.splice(lru_.begin(), lru_, entry.lru_position); }

}  // namespace kls::server
