// npk_ranking: non-parametric kernel ranking (core/ranking/npk_ranking.h),
// options kls.v1.NpkRankingOptions. Reads a second data set: the items' tag
// counts (npk_ranking.text_dataset_id), whose tf-idf cosine is the text kernel.
#include "core/ranking/npk_ranking.h"
#include "core/ranking/text_kernel.h"
#include "server/jobs/families/family_util.h"
#include "server/jobs/solver_family.h"

namespace kls::server {
namespace {

struct NpkRankingJobOptions {
  NpkRankingOptions options;
  std::string text_dataset_id;  ///< the items' tag counts, same number of rows
};

class NpkRankingFamily : public TypedFamily<kls::v1::NpkRankingOptions, NpkRankingJobOptions> {
 public:
  NpkRankingFamily() : TypedFamily("npk_ranking", [] {
    Traits t;
    t.all_defaults_valid = false;  // text_dataset_id is required
    return t;
  }()) {}

  Status CheckDataset(const JobSpec& spec, const store::DatasetRecord& d, store::Store* store) const override {
    const NpkRankingJobOptions& o = spec.Options<NpkRankingJobOptions>();
    const int n = static_cast<int>(d.num_points);
    if (o.options.low_rank > n) {
      return InvalidArgumentError("npk_ranking.low_rank = " + std::to_string(o.options.low_rank) + " exceeds n = " +
                                  std::to_string(n));
    }
    for (int k : {o.options.constraint_neighbors, o.options.laplacian_neighbors}) {
      if (k >= n) {
        return InvalidArgumentError("npk_ranking neighbours = " + std::to_string(k) + " must be < n = " +
                                    std::to_string(n));
      }
    }
    StatusOr<store::DatasetRecord> text = store->GetDatasetRecord(o.text_dataset_id);
    if (!text.ok()) {
      return Status(text.status().code(), "npk_ranking.text_dataset_id: " + text.status().message());
    }
    if (text->num_points != d.num_points) {
      return InvalidArgumentError("npk_ranking.text_dataset_id = \"" + o.text_dataset_id + "\" has " +
                                  std::to_string(text->num_points) + " rows but the data set has " +
                                  std::to_string(d.num_points) + " items");
    }
    return OkStatus();
  }

 protected:
  StatusOr<NpkRankingJobOptions> Convert(const kls::v1::NpkRankingOptions& p, const JobSpec&) const override {
    if (p.text_dataset_id().empty()) {
      return InvalidArgumentError("npk_ranking.text_dataset_id is required (the items' tag counts)");
    }
    NpkRankingJobOptions o;
    o.text_dataset_id = p.text_dataset_id();
    NpkRankingOptions& n = o.options;
    if (p.has_c()) n.c = p.c();
    if (p.has_b()) n.b = p.b();
    if (p.has_constraint_neighbors()) n.constraint_neighbors = p.constraint_neighbors();
    if (p.has_laplacian_neighbors()) n.laplacian_neighbors = p.laplacian_neighbors();
    if (p.has_low_rank()) n.low_rank = p.low_rank();
    if (p.has_distance_ratio()) n.distance_ratio = p.distance_ratio();
    if (p.has_max_iterations()) n.max_iterations = p.max_iterations();
    if (p.has_tolerance()) n.tolerance = p.tolerance();
    KLS_RETURN_IF_ERROR(n.Validate(name()));
    return o;
  }

  StatusOr<JobOutput> RunTyped(const NpkRankingJobOptions& o, const JobSpec&, const store::StoredDataset& data,
                               store::Store* store, const SolveControl& control) const override {
    KLS_ASSIGN_OR_RETURN(store::StoredDataset text, store->LoadDataset(o.text_dataset_id));
    const Eigen::MatrixXd& counts = text.data.features;
    if (counts.rows() != data.data.features.rows()) {
      return InvalidArgumentError("npk_ranking.text_dataset_id has " + std::to_string(counts.rows()) +
                                  " rows, the data set " + std::to_string(data.data.features.rows()));
    }
    if ((counts.array() < 0).any()) {
      return InvalidArgumentError("npk_ranking.text_dataset_id: tag counts must be >= 0");
    }
    KLS_ASSIGN_OR_RETURN(Eigen::MatrixXd kt, TextKernel(counts));
    KLS_ASSIGN_OR_RETURN(NpkRankingResult r, SolveNpkRanking(data.data.features, kt, o.options, control));
    JobOutput out;
    out.stats = r.stats;
    out.certificate = r.stats.certificate;
    if (out.stats.termination == Termination::kCancelled) return out;
    out.kernel = std::move(r.kernel);
    return out;
  }
};

KLS_REGISTER_SOLVER_FAMILY(NpkRankingFamily);

}  // namespace
}  // namespace kls::server
