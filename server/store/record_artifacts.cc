#include "server/store/record_artifacts.h"

#include <cstring>

#include "core/social/social_model.h"

namespace kls::store {
namespace {

// rows × cols elements of `element_bytes` each fill the section exactly (the
// product checked for overflow: the bytes are from disk or a database).
bool Fills(const MappedArtifact::Section& s, DType dtype, uint64_t element_bytes) {
  uint64_t elements = 0, bytes = 0;
  return s.dtype == dtype && !__builtin_mul_overflow(s.rows, s.cols, &elements) &&
         !__builtin_mul_overflow(elements, element_bytes, &bytes) && bytes == s.bytes;
}

}  // namespace

namespace {

// What a data set's sections point to besides the data set itself.
struct DatasetScratch {
  std::string keys;
  std::vector<int32_t> pairs;
  std::string social;
};

// The data set's sections (validated first); `scratch` holds the bytes of
// those that are not laid out in the data set (keys, pairs, social).
StatusOr<std::vector<SectionView>> DatasetSections(const StoredDataset& d, DatasetScratch* scratch) {
  KLS_RETURN_IF_ERROR(d.data.Validate());
  KLS_RETURN_IF_ERROR(d.constraints.Validate(d.data.num_points()));
  const uint64_t n = static_cast<uint64_t>(d.data.num_points());
  std::string& keys = scratch->keys;
  std::vector<int32_t>& pairs = scratch->pairs;
  std::string& social = scratch->social;
  std::vector<SectionView> sections;
  sections.push_back({"features", DType::kFloat64, n, static_cast<uint64_t>(d.data.dim()), d.data.features.data(),
                      static_cast<uint64_t>(d.data.features.size()) * 8});
  if (d.data.has_labels()) {
    sections.push_back({"labels", DType::kInt32, n, 1, d.data.labels.data(), d.data.labels.size() * 4});
  }
  if (!d.data.item_keys.empty()) {
    for (const auto& k : d.data.item_keys) keys.append(k).push_back('\0');
    sections.push_back({"item_keys", DType::kBytes, n, 1, keys.data(), keys.size()});
  }
  pairs.reserve(3 * d.constraints.pairs.size());
  for (const Pair& p : d.constraints.pairs) {
    pairs.push_back(p.i);
    pairs.push_back(p.j);
    pairs.push_back(static_cast<int32_t>(p.kind));
  }
  if (!pairs.empty()) {
    sections.push_back({"constraints", DType::kInt32, static_cast<uint64_t>(d.constraints.size()), 3, pairs.data(),
                        pairs.size() * 4});
  }
  if (d.social) {
    social = SerializeCommunityRelations(*d.social);
    sections.push_back({"social", DType::kBytes, static_cast<uint64_t>(social.size()), 1, social.data(), social.size()});
  }
  return sections;
}

// The kernel's sections: the embedding, then one per attachment (names checked).
StatusOr<std::vector<SectionView>> KernelSections(const LearnedKernel& kernel,
                                                  const std::vector<Attachment>& attachments) {
  for (const auto& a : attachments) {
    if (a.name.empty() || a.name.size() > 40) {
      return InvalidArgumentError("attachment name \"" + a.name + "\" must have 1 to 40 bytes");
    }
  }
  const auto& v = kernel.embedding();  // row-major n × r
  std::vector<SectionView> sections = {{"embedding", DType::kFloat64, static_cast<uint64_t>(v.rows()),
                                        static_cast<uint64_t>(v.cols()), v.data(), static_cast<uint64_t>(v.size()) * 8}};
  for (const auto& a : attachments) {
    sections.push_back({kAttachmentSectionPrefix + a.name, DType::kBytes, static_cast<uint64_t>(a.bytes.size()), 1,
                        a.bytes.data(), static_cast<uint64_t>(a.bytes.size())});
  }
  return sections;
}

}  // namespace

StatusOr<std::string> EncodeDatasetArtifact(const StoredDataset& d) {
  DatasetScratch scratch;
  KLS_ASSIGN_OR_RETURN(const std::vector<SectionView> sections, DatasetSections(d, &scratch));
  return EncodeArtifact(sections);
}

Status WriteDatasetArtifact(const std::string& path, const StoredDataset& d) {
  DatasetScratch scratch;
  KLS_ASSIGN_OR_RETURN(const std::vector<SectionView> sections, DatasetSections(d, &scratch));
  return WriteArtifact(path, sections);
}

StatusOr<std::string> EncodeKernelArtifact(const LearnedKernel& kernel, const std::vector<Attachment>& attachments) {
  KLS_ASSIGN_OR_RETURN(const std::vector<SectionView> sections, KernelSections(kernel, attachments));
  return EncodeArtifact(sections);
}

Status WriteKernelArtifact(const std::string& path, const LearnedKernel& kernel,
                           const std::vector<Attachment>& attachments) {
  KLS_ASSIGN_OR_RETURN(const std::vector<SectionView> sections, KernelSections(kernel, attachments));
  return WriteArtifact(path, sections);
}

StatusOr<StoredDataset> DecodeDatasetArtifact(const MappedArtifact& a, const DatasetRecord& r) {
  StoredDataset out;
  const auto* f = a.Find("features");
  if (!f || !Fills(*f, DType::kFloat64, 8) || f->rows != static_cast<uint64_t>(r.num_points) ||
      f->cols != static_cast<uint64_t>(r.dim)) {
    return DataLossError("data set " + r.id + ": features section missing or mis-sized");
  }
  out.data.features.resize(r.num_points, r.dim);
  if (f->bytes) std::memcpy(out.data.features.data(), f->data, f->bytes);
  if (const auto* l = a.Find("labels")) {
    if (!Fills(*l, DType::kInt32, 4) || l->rows != static_cast<uint64_t>(r.num_points) || l->cols != 1) {
      return DataLossError("data set " + r.id + ": labels section mis-sized");
    }
    out.data.labels.resize(l->rows);
    if (l->bytes) std::memcpy(out.data.labels.data(), l->data, l->bytes);
  }
  if (const auto* k = a.Find("item_keys")) {
    const char* p = reinterpret_cast<const char*>(k->data);
    const char* end = p + k->bytes;
    while (p < end) {
      const size_t len = strnlen(p, end - p);
      out.data.item_keys.emplace_back(p, len);
      p += len + 1;
    }
  }
  if (const auto* c = a.Find("constraints")) {
    if (!Fills(*c, DType::kInt32, 4) || c->cols != 3) {
      return DataLossError("data set " + r.id + ": constraints section mis-sized");
    }
    std::vector<int32_t> v(c->rows * 3);
    if (c->bytes) std::memcpy(v.data(), c->data, c->bytes);
    for (uint64_t t = 0; t < c->rows; ++t) {
      out.constraints.pairs.push_back({v[3 * t], v[3 * t + 1], static_cast<PairKind>(v[3 * t + 2])});
    }
  }
  if (const auto* so = a.Find("social")) {
    StatusOr<Community> social = ParseCommunityRelations(
        std::string(reinterpret_cast<const char*>(so->data), so->bytes), out.data.features);
    if (!social.ok()) return DataLossError("data set " + r.id + ": " + social.status().message());
    out.social = std::move(social).value();
  }
  // What the encoder validated must still hold: a checksum-valid artifact
  // with wrong contents is damage too, and is never served.
  Status valid = out.data.Validate();
  if (valid.ok()) valid = out.constraints.Validate(out.data.num_points());
  if (!valid.ok()) return DataLossError("data set " + r.id + ": " + valid.message());
  return out;
}

StatusOr<StoredModel> DecodeKernelArtifact(const MappedArtifact& a, const KernelRecord& r) {
  const auto* e = a.Find("embedding");
  if (!e || !Fills(*e, DType::kFloat64, 8) || e->rows != static_cast<uint64_t>(r.num_points) ||
      e->cols != static_cast<uint64_t>(r.rank)) {
    return DataLossError("kernel " + r.name + " v" + std::to_string(r.version) +
                         ": embedding section missing or mis-sized");
  }
  LearnedKernel::Embedding v(r.num_points, r.rank);
  if (e->bytes) std::memcpy(v.data(), e->data, e->bytes);
  StoredModel model;
  KLS_ASSIGN_OR_RETURN(model.kernel, LearnedKernel::FromEmbedding(std::move(v)));
  const std::string prefix = kAttachmentSectionPrefix;
  for (const auto& sec : a.sections()) {
    if (sec.name.compare(0, prefix.size(), prefix) != 0) continue;
    model.attachments.push_back(
        {sec.name.substr(prefix.size()), std::string(reinterpret_cast<const char*>(sec.data), sec.bytes)});
  }
  return model;
}

}  // namespace kls::store
