#include "server/upload_assembler.h"

#include <set>

#include <algorithm>
#include <cmath>
#include <new>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>

#include "core/common/names.h"
#include "core/data/constraint_generators.h"

namespace kls::server {
namespace {

std::string Num(double v) {
  std::ostringstream out;
  out << v;  // "nan", "inf", "-inf" for the non-finite values we report
  return out.str();
}

}  // namespace

Status CheckDeclaredShape(int64_t num_points, int64_t dim, int64_t max_points, int64_t max_dim, int64_t max_values) {
  if (num_points < 1) {
    return InvalidArgumentError("header.num_points = " + std::to_string(num_points) + " must be >= 1");
  }
  if (dim < 1) return InvalidArgumentError("header.dim = " + std::to_string(dim) + " must be >= 1");
  if (num_points > max_points) {
    return ResourceExhaustedError("header.num_points = " + std::to_string(num_points) + " exceeds the limit of " +
                                  std::to_string(max_points));
  }
  if (dim > max_dim) {
    return ResourceExhaustedError("header.dim = " + std::to_string(dim) + " exceeds the limit of " +
                                  std::to_string(max_dim));
  }
  // Both factors are bounded above, so the product cannot overflow int64.
  if (num_points * dim > max_values) {
    return ResourceExhaustedError("header.num_points × header.dim = " + std::to_string(num_points) + " × " +
                                  std::to_string(dim) + " = " + std::to_string(num_points * dim) +
                                  " values exceeds the limit of " + std::to_string(max_values));
  }
  return OkStatus();
}

Status UploadAssembler::Add(const kls::v1::UploadDatasetRequest& message) {
  if (!error_.ok()) return error_;
  error_ = Next(message, messages_++);
  return error_;
}

Status UploadAssembler::Next(const kls::v1::UploadDatasetRequest& message, int64_t index) {
  switch (message.part_case()) {
    case kls::v1::UploadDatasetRequest::kHeader:
      if (have_header_) return InvalidArgumentError("message " + std::to_string(index) + " is a second header");
      have_header_ = true;
      return Header(message.header());
    case kls::v1::UploadDatasetRequest::kFeatures:
    case kls::v1::UploadDatasetRequest::kConstraints:
    case kls::v1::UploadDatasetRequest::kSocial:
    case kls::v1::UploadDatasetRequest::kAttributes:
      if (!have_header_) {
        return InvalidArgumentError("message " + std::to_string(index) +
                                    " is not a header; an upload must start with a DatasetHeader");
      }
      if (message.part_case() == kls::v1::UploadDatasetRequest::kFeatures) return Features(message.features());
      if (message.part_case() == kls::v1::UploadDatasetRequest::kSocial) return Social(message.social());
      if (message.part_case() == kls::v1::UploadDatasetRequest::kAttributes) {
        return AppendAttributesCsv(message.attributes(), &attributes_csv_);
      }
      return Constraints(message.constraints());
    case kls::v1::UploadDatasetRequest::PART_NOT_SET:
      break;
  }
  return InvalidArgumentError("message " + std::to_string(index) + " is empty (no header, features or constraints)");
}

Status AppendAttributesCsv(const kls::v1::AttributesChunk& chunk, std::string* csv) {
  if (static_cast<int64_t>(csv->size() + chunk.csv().size()) > kMaxAttributesCsvBytes) {
    return ResourceExhaustedError("attributes: the CSV exceeds " + std::to_string(kMaxAttributesCsvBytes >> 20) +
                                  " MiB");
  }
  csv->append(chunk.csv());
  return OkStatus();
}

Status UploadAssembler::Header(const kls::v1::DatasetHeader& h) {
  if (static_cast<int64_t>(h.name().size()) > limits_.max_name_bytes) {
    return InvalidArgumentError("header.name is " + std::to_string(h.name().size()) + " bytes; at most " +
                                std::to_string(limits_.max_name_bytes) + " are allowed");
  }
  if (!h.name().empty()) {  // the name is optional
    KLS_RETURN_IF_ERROR(ValidateName("header.name", h.name()));
  }
  KLS_RETURN_IF_ERROR(
      CheckDeclaredShape(h.num_points(), h.dim(), limits_.max_points, limits_.max_dim, limits_.max_values));
  if (h.num_constraints() < 0) {
    return InvalidArgumentError("header.num_constraints = " + std::to_string(h.num_constraints()) +
                                " must be >= 0");
  }
  if (h.num_constraints() > limits_.max_constraints) {
    return ResourceExhaustedError("header.num_constraints = " + std::to_string(h.num_constraints()) +
                                  " exceeds the limit of " + std::to_string(limits_.max_constraints));
  }
  if (!h.base_dataset_id().empty()) {  // an append: constraints only (datasets.proto)
    if (h.has_social() || h.has_labels() || h.has_item_keys()) {
      return InvalidArgumentError("header.base_dataset_id = \"" + h.base_dataset_id() +
                                  "\" appends constraints only; header.social, has_labels and has_item_keys must "
                                  "be unset (they are the base data set's)");
    }
  }
  if (h.has_protocol()) {
    KLS_RETURN_IF_ERROR(ProtocolFromProto(h.protocol()).Validate("header.protocol"));
    if (h.has_social() || (!h.has_labels() && h.base_dataset_id().empty())) {
      return InvalidArgumentError("header.protocol.name = '" + h.protocol().name() +
                                  "' draws pairs from the labels: it needs has_labels (or a labelled "
                                  "base_dataset_id) and no social header");
    }
    if (h.num_constraints() != 0) {
      return InvalidArgumentError("header.protocol and header.num_constraints = " +
                                  std::to_string(h.num_constraints()) + ": send constraints or a protocol, not both");
    }
  }
  header_ = h;
  n_ = static_cast<int>(h.num_points());
  dim_ = h.dim();
  if (h.has_social()) KLS_RETURN_IF_ERROR(SocialHeader(h.social()));
  return OkStatus();
}

ConstraintProtocol ProtocolFromProto(const kls::v1::ConstraintProtocol& p) {
  ConstraintProtocol out;
  out.name = p.name();
  out.seed = p.seed() == 0 ? 1 : p.seed();
  if (p.has_fraction()) out.fraction = p.fraction();
  if (p.has_must_fraction()) out.must_fraction = p.must_fraction();
  if (p.has_cannot_fraction()) out.cannot_fraction = p.cannot_fraction();
  if (p.has_self_pairs()) out.self_pairs = p.self_pairs();
  if (p.has_component_ratio()) out.component_ratio = p.component_ratio();
  return out;
}

namespace {

// What was generated: counts by kind and the must-link graph's components.
void ReportGenerated(const ConstraintProtocol& protocol, const PairwiseConstraints& pairs, int n,
                     kls::v1::GeneratedConstraints* report) {
  int64_t must = 0;
  for (const Pair& p : pairs.pairs) must += p.kind == PairKind::kMustLink ? 1 : 0;
  report->set_protocol(protocol.name);
  report->set_seed(protocol.seed);
  report->set_must_link(must);
  report->set_cannot_link(static_cast<int64_t>(pairs.pairs.size()) - must);
  report->set_components(CountConstraintComponents(pairs, n));
}

}  // namespace

Status UploadAssembler::GenerateProtocolPairs(kls::v1::GeneratedConstraints* report) {
  // An append draws from the base's labels (AppendProtocolPairs).
  if (!header_.has_protocol() || !header_.base_dataset_id().empty()) return OkStatus();
  const ConstraintProtocol protocol = ProtocolFromProto(header_.protocol());
  KLS_ASSIGN_OR_RETURN(data_.constraints, GenerateProtocol(protocol, data_.data.labels, "header.protocol"));
  ReportGenerated(protocol, data_.constraints, data_.data.num_points(), report);
  return OkStatus();
}

StatusOr<PairwiseConstraints> AppendProtocolPairs(const kls::v1::DatasetHeader& header,
                                                  const store::StoredDataset& base,
                                                  kls::v1::GeneratedConstraints* report) {
  if (base.data.labels.empty()) {
    return InvalidArgumentError("header.protocol.name = '" + header.protocol().name() +
                                "' draws pairs from the labels, but header.base_dataset_id = \"" +
                                header.base_dataset_id() + "\" has none");
  }
  const ConstraintProtocol protocol = ProtocolFromProto(header.protocol());
  KLS_ASSIGN_OR_RETURN(PairwiseConstraints drawn, GenerateProtocol(protocol, base.data.labels, "header.protocol"));
  // Pairs the base already has are not repeated (either order).
  std::set<std::pair<int, int>> present;
  for (const Pair& p : base.constraints.pairs) present.insert({std::min(p.i, p.j), std::max(p.i, p.j)});
  PairwiseConstraints fresh;
  for (const Pair& p : drawn.pairs) {
    if (present.insert({std::min(p.i, p.j), std::max(p.i, p.j)}).second) fresh.pairs.push_back(p);
  }
  ReportGenerated(protocol, fresh, base.data.num_points(), report);
  return fresh;
}

Status UploadAssembler::SocialHeader(const kls::v1::SocialHeader& s) {
  if (s.num_users() < 2 || s.num_users() > kMaxCommunityUsers) {
    return InvalidArgumentError("header.social.num_users = " + std::to_string(s.num_users()) + " must be in [2, " +
                                std::to_string(kMaxCommunityUsers) + "]");
  }
  if (s.num_groups() < 0 || s.num_groups() > kMaxCommunityGroups) {
    return InvalidArgumentError("header.social.num_groups = " + std::to_string(s.num_groups()) + " must be in [0, " +
                                std::to_string(kMaxCommunityGroups) + "]");
  }
  if (s.vocabulary() < 1 || s.vocabulary() > kMaxCommunityVocabulary) {
    return InvalidArgumentError("header.social.vocabulary = " + std::to_string(s.vocabulary()) + " must be in [1, " +
                                std::to_string(kMaxCommunityVocabulary) + "]");
  }
  Community& c = data_.social.emplace();
  c.num_users = s.num_users();
  c.num_groups = s.num_groups();
  c.contacts.resize(c.num_users);
  c.groups.resize(c.num_users);
  return OkStatus();
}

Status UploadAssembler::Social(const kls::v1::SocialChunk& c) {
  if (!data_.social) {
    return InvalidArgumentError("a social chunk arrived but header.social is not set (not a social data set)");
  }
  Community& d = *data_.social;
  const int users = d.num_users, groups = d.num_groups, vocabulary = header_.social().vocabulary();
  const int count = c.owner_size();
  if (count > 0 || c.day_size() > 0 || c.latitude_size() > 0 || c.longitude_size() > 0) {
    if (c.day_size() != count || c.latitude_size() != count || c.longitude_size() != count) {
      return InvalidArgumentError("social chunk has " + std::to_string(count) + " owner, " +
                                  std::to_string(c.day_size()) + " day, " + std::to_string(c.latitude_size()) +
                                  " latitude and " + std::to_string(c.longitude_size()) +
                                  " longitude values; the four arrays must have equal length");
    }
    if (c.first_photo() != static_cast<int64_t>(d.photo_owner.size())) {
      return InvalidArgumentError("social.first_photo = " + std::to_string(c.first_photo()) + " but " +
                                  std::to_string(d.photo_owner.size()) +
                                  " photos were received so far (photos must arrive in order)");
    }
    if (static_cast<int64_t>(d.photo_owner.size()) + count > n_) {
      return InvalidArgumentError("social chunk brings the photos to " +
                                  std::to_string(d.photo_owner.size() + count) +
                                  ", beyond header.num_points = " + std::to_string(n_));
    }
    for (int t = 0; t < count; ++t) {
      const std::string at = "social.photos[" + std::to_string(c.first_photo() + t) + "]";
      if (c.owner(t) < 0 || c.owner(t) >= users) {
        return InvalidArgumentError(at + ": owner = " + std::to_string(c.owner(t)) + " is out of range for " +
                                    std::to_string(users) + " users");
      }
      if (!(std::isfinite(c.latitude(t)) && std::abs(c.latitude(t)) <= 90.0)) {
        return InvalidArgumentError(at + ": latitude = " + Num(c.latitude(t)) + " is not in [-90, 90]");
      }
      if (!(std::isfinite(c.longitude(t)) && std::abs(c.longitude(t)) <= 180.0)) {
        return InvalidArgumentError(at + ": longitude = " + Num(c.longitude(t)) + " is not in [-180, 180]");
      }
      d.photo_owner.push_back(c.owner(t));
      d.photo_day.push_back(c.day(t));
      d.photo_latitude.push_back(c.latitude(t));
      d.photo_longitude.push_back(c.longitude(t));
    }
  }
  auto pairs = [&](const char* name, const auto& a, const auto& b, const char* a_name, int a_limit,
                   const char* b_name, int b_limit, auto&& add) -> Status {
    if (a.size() != b.size()) {
      return InvalidArgumentError(std::string("social.") + name + ": " + std::to_string(a.size()) + " " + a_name +
                                  " but " + std::to_string(b.size()) + " " + b_name + " values");
    }
    for (int t = 0; t < a.size(); ++t) {
      for (const auto& [field, value, limit] :
           {std::tuple{a_name, a.Get(t), a_limit}, std::tuple{b_name, b.Get(t), b_limit}}) {
        if (value < 0 || value >= limit) {
          return InvalidArgumentError(std::string("social.") + name + "[" + std::to_string(t) + "]: " + field +
                                      " = " + std::to_string(value) + " is out of range [0, " +
                                      std::to_string(limit) + ")");
        }
      }
      add(a.Get(t), b.Get(t));
    }
    return OkStatus();
  };
  KLS_RETURN_IF_ERROR(pairs("tags", c.tag_photo(), c.tag_id(), "tag_photo", n_, "tag_id", vocabulary,
                            [&](int p, int tag) { tags_.emplace_back(p, tag, 1.0); }));
  KLS_RETURN_IF_ERROR(pairs("comments", c.comment_photo(), c.comment_author(), "comment_photo", n_,
                            "comment_author", users, [&](int p, int a) { d.comments.push_back({p, a}); }));
  KLS_RETURN_IF_ERROR(pairs("contacts", c.contact_a(), c.contact_b(), "contact_a", users, "contact_b", users,
                            [&](int a, int b) {
                              if (a == b) return;  // a self-contact carries no information
                              d.contacts[a].push_back(b);
                              d.contacts[b].push_back(a);
                            }));
  KLS_RETURN_IF_ERROR(pairs("memberships", c.member_user(), c.member_group(), "member_user", users,
                            "member_group", groups, [&](int u, int g) { d.groups[u].push_back(g); }));
  KLS_RETURN_IF_ERROR(pairs("favourites", c.fave_user(), c.fave_photo(), "fave_user", users, "fave_photo", n_,
                            [&](int u, int p) { d.favourites.emplace_back(u, p); }));
  if (tags_.size() > static_cast<size_t>(limits_.max_values)) {
    return ResourceExhaustedError("social.tags: more than " + std::to_string(limits_.max_values) + " tag entries");
  }
  return OkStatus();
}

Status UploadAssembler::FinishSocial() {
  Community& d = *data_.social;
  if (static_cast<int>(d.photo_owner.size()) != n_) {
    return InvalidArgumentError("the stream ended after " + std::to_string(d.photo_owner.size()) +
                                " of header.num_points = " + std::to_string(n_) +
                                " photos' social fields (truncated upload); nothing was stored");
  }
  auto sort_unique = [](std::vector<int>& v) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
  };
  for (auto& v : d.contacts) sort_unique(v);
  for (auto& v : d.groups) sort_unique(v);
  d.photo_tags.resize(n_, header_.social().vocabulary());
  d.photo_tags.setFromTriplets(tags_.begin(), tags_.end(), [](double a, double) { return a; });
  tags_.clear();
  d.photo_visual = data_.data.features;
  KLS_RETURN_IF_ERROR(d.Validate());
  d.photo_visual.resize(0, 0);  // the store keeps the visual features once, as the feature rows
  return OkStatus();
}

Status UploadAssembler::Features(const kls::v1::FeatureChunk& c) {
  if (!header_.base_dataset_id().empty()) {
    return InvalidArgumentError("header.base_dataset_id = \"" + header_.base_dataset_id() +
                                "\" is set: the features are the base data set's, no FeatureChunk may follow");
  }
  if (c.first_row() != rows_) {
    return InvalidArgumentError("features.first_row = " + std::to_string(c.first_row()) + " but " +
                                std::to_string(rows_) + " rows were received so far (rows must arrive in order)");
  }
  const bool dense = c.values_size() > 0;
  if (dense && c.sparse_rows_size() > 0) {
    return InvalidArgumentError("features chunk at first_row " + std::to_string(c.first_row()) +
                                " has both dense values and sparse_rows; use one encoding per chunk");
  }
  if (dense && c.values_size() % dim_ != 0) {
    return InvalidArgumentError("features chunk at first_row " + std::to_string(c.first_row()) + " has " +
                                std::to_string(c.values_size()) + " values, not a multiple of dim = " +
                                std::to_string(dim_) + " (ragged rows)");
  }
  const int64_t rows = dense ? c.values_size() / dim_ : c.sparse_rows_size();
  if (rows_ + rows > n_) {
    return InvalidArgumentError("features chunk at first_row " + std::to_string(c.first_row()) + " carries " +
                                std::to_string(rows) + " rows, beyond header.num_points = " + std::to_string(n_));
  }
  if (header_.has_labels() ? c.labels_size() != rows : c.labels_size() != 0) {
    return InvalidArgumentError(
        "features chunk at first_row " + std::to_string(c.first_row()) + " has " + std::to_string(c.labels_size()) +
        " labels for " + std::to_string(rows) + " rows" +
        (header_.has_labels() ? " (one per row is required)" : " but header.has_labels is false"));
  }
  if (header_.has_item_keys() ? c.item_keys_size() != rows : c.item_keys_size() != 0) {
    return InvalidArgumentError(
        "features chunk at first_row " + std::to_string(c.first_row()) + " has " +
        std::to_string(c.item_keys_size()) + " item_keys for " + std::to_string(rows) + " rows" +
        (header_.has_item_keys() ? " (one per row is required)" : " but header.has_item_keys is false"));
  }
  if (rows == 0) return OkStatus();
  KLS_RETURN_IF_ERROR(Allocate());
  KLS_RETURN_IF_ERROR(GrowFeatureRows(rows_ + rows));

  for (int64_t r = 0; r < rows; ++r) {
    const int row = static_cast<int>(rows_ + r);
    if (dense) {
      for (int col = 0; col < dim_; ++col) {
        const double v = c.values(static_cast<int>(r * dim_ + col));
        if (!std::isfinite(v)) return NotFinite(row, col, v);
        data_.data.features(row, col) = v;
      }
    } else {
      KLS_RETURN_IF_ERROR(SparseRow(c.sparse_rows(static_cast<int>(r)), row));
    }
  }
  for (int64_t r = 0; r < c.labels_size(); ++r) {
    const int row = static_cast<int>(rows_ + r);
    if (c.labels(static_cast<int>(r)) < 0) {
      return InvalidArgumentError("labels[" + std::to_string(row) + "] = " +
                                  std::to_string(c.labels(static_cast<int>(r))) + " must be >= 0");
    }
    data_.data.labels.push_back(c.labels(static_cast<int>(r)));
  }
  for (int64_t r = 0; r < c.item_keys_size(); ++r) {
    const int row = static_cast<int>(rows_ + r);
    const std::string& key = c.item_keys(static_cast<int>(r));
    if (key.empty()) return InvalidArgumentError("item_keys[" + std::to_string(row) + "] is empty");
    if (!seen_keys_.insert(key).second) {
      return InvalidArgumentError("item_keys[" + std::to_string(row) + "] = '" + key +
                                  "' repeats an earlier key (keys must be unique)");
    }
    data_.data.item_keys.push_back(key);
  }
  rows_ += rows;
  return OkStatus();
}

Status UploadAssembler::Constraints(const kls::v1::ConstraintChunk& c) {
  if (c.i_size() != c.j_size() || c.i_size() != c.kind_size()) {
    return InvalidArgumentError("constraints chunk has " + std::to_string(c.i_size()) + " i, " +
                                std::to_string(c.j_size()) + " j and " + std::to_string(c.kind_size()) +
                                " kind values; the three arrays must have equal length");
  }
  if (constraints_ + c.i_size() > header_.num_constraints()) {
    return InvalidArgumentError("constraints chunk brings the total to " +
                                std::to_string(constraints_ + c.i_size()) +
                                ", beyond header.num_constraints = " + std::to_string(header_.num_constraints()));
  }
  for (int t = 0; t < c.i_size(); ++t) {
    const std::string at = "constraints[" + std::to_string(constraints_ + t) + "]";
    for (const auto& [field, value] : {std::pair{"i", c.i(t)}, std::pair{"j", c.j(t)}}) {
      if (value < 0 || value >= n_) {
        return InvalidArgumentError(at + ": " + field + " = " + std::to_string(value) + " is out of range for " +
                                    std::to_string(n_) + " points");
      }
    }
    if (c.kind(t) != 1 && c.kind(t) != -1) {
      return InvalidArgumentError(at + ": kind = " + std::to_string(c.kind(t)) +
                                  " is neither must-link (+1) nor cannot-link (-1)");
    }
    data_.constraints.pairs.push_back(
        Pair{c.i(t), c.j(t), c.kind(t) == 1 ? PairKind::kMustLink : PairKind::kCannotLink});
  }
  constraints_ += c.i_size();
  return OkStatus();
}

Status UploadAssembler::Finish() {
  if (!error_.ok()) return error_;
  if (!have_header_) return InvalidArgumentError("empty upload: no DatasetHeader was sent");
  if (rows_ != n_ && header_.base_dataset_id().empty()) {
    return InvalidArgumentError("the stream ended after " + std::to_string(rows_) + " of header.num_points = " +
                                std::to_string(n_) + " rows (truncated upload); nothing was stored");
  }
  if (constraints_ != header_.num_constraints()) {
    return InvalidArgumentError("the stream ended after " + std::to_string(constraints_) +
                                " of header.num_constraints = " + std::to_string(header_.num_constraints()) +
                                " constraints (truncated upload); nothing was stored");
  }
  if (data_.social) return FinishSocial();
  return OkStatus();
}

Status UploadAssembler::Allocate() {
  if (allocated_) return OkStatus();
  try {
    // Features grow with the rows that arrive (GrowFeatureRows), not with
    // the header's promise: a header declaring 10^7 × 100 values followed
    // by one row must not make the server zero 8 GB.
    if (header_.has_labels()) data_.data.labels.reserve(n_);
    if (header_.has_item_keys()) data_.data.item_keys.reserve(n_);
    data_.constraints.pairs.reserve(static_cast<size_t>(header_.num_constraints()));
  } catch (const std::bad_alloc&) {
    return ResourceExhaustedError("not enough memory for the labels, keys and constraints of header.num_points = " +
                                  std::to_string(n_) + " rows");
  }
  allocated_ = true;
  return OkStatus();
}

Status UploadAssembler::GrowFeatureRows(int64_t rows_needed) {
  Eigen::MatrixXd& f = data_.data.features;
  const int64_t old_rows = f.rows();
  if (rows_needed <= old_rows) return OkStatus();
  // Capacity doubles while the rows that arrived are a small part of the
  // header's promise; once doubling would pass n/8 (so at least n/16 rows
  // have arrived, or n <= 8,192) it goes straight to n. Growing a
  // column-major matrix by rows copies it, so the peak is the old plus the
  // new matrix: under 1.125 n rows this way, against up to 2 n for doubling
  // to the end; a header's promise is trusted once a 16th of it was sent.
  int64_t new_rows = std::max<int64_t>({rows_needed, 2 * old_rows, 1024});
  if (new_rows >= n_ / 8) new_rows = n_;
  new_rows = std::min<int64_t>(n_, new_rows);
  try {
    f.conservativeResize(new_rows, dim_);
    f.bottomRows(new_rows - old_rows).setZero();
  } catch (const std::bad_alloc&) {
    return ResourceExhaustedError("not enough memory for " + std::to_string(new_rows) + " × " +
                                  std::to_string(dim_) + " features");
  }
  return OkStatus();
}

Status UploadAssembler::SparseRow(const kls::v1::SparseRow& s, int row) {
  if (s.indices_size() != s.values_size()) {
    return InvalidArgumentError("features[" + std::to_string(row) + "] (sparse) has " +
                                std::to_string(s.indices_size()) + " indices but " +
                                std::to_string(s.values_size()) + " values");
  }
  int previous = -1;
  for (int k = 0; k < s.indices_size(); ++k) {
    const int col = s.indices(k);
    if (col < 0 || col >= dim_) {
      return InvalidArgumentError("features[" + std::to_string(row) + "] (sparse): index " + std::to_string(col) +
                                  " is out of range for dim = " + std::to_string(dim_));
    }
    if (col <= previous) {
      return InvalidArgumentError("features[" + std::to_string(row) + "] (sparse): index " + std::to_string(col) +
                                  " follows " + std::to_string(previous) + " (indices must be strictly ascending)");
    }
    previous = col;
    if (!std::isfinite(s.values(k))) return NotFinite(row, col, s.values(k));
    data_.data.features(row, col) = s.values(k);
  }
  return OkStatus();
}

Status UploadAssembler::NotFinite(int row, int col, double v) {
  return InvalidArgumentError("features[" + std::to_string(row) + "][" + std::to_string(col) + "] = " + Num(v) +
                              " is not finite");
}

StatusOr<store::StoredDataset> MergeAppend(const kls::v1::DatasetHeader& header, store::StoredDataset base,
                                           const PairwiseConstraints& appended) {
  const std::string field = "header.base_dataset_id = \"" + header.base_dataset_id() + "\"";
  if (base.social) return InvalidArgumentError(field + " is a social data set; constraints cannot be appended to it");
  const Eigen::MatrixXd& x = base.data.features;
  if (header.num_points() != x.rows() || header.dim() != x.cols()) {
    return InvalidArgumentError("header.num_points × header.dim = " + std::to_string(header.num_points()) + " × " +
                                std::to_string(header.dim()) + " but " + field + " has " + std::to_string(x.rows()) +
                                " × " + std::to_string(x.cols()));
  }
  const int base_pairs = base.constraints.size();
  base.constraints.pairs.insert(base.constraints.pairs.end(), appended.pairs.begin(), appended.pairs.end());
  if (Status s = base.constraints.Validate(static_cast<int>(x.rows())); !s.ok()) {
    return InvalidArgumentError(field + ": the merged constraints (the base's " + std::to_string(base_pairs) +
                                " first) are not valid: " + s.message());
  }
  return base;
}

}  // namespace kls::server
