// The NPKL families (KL-ADMM, BCDNPKL, SimpleNPKL): they learn from the data
// set's pairwise constraints over a k-NN graph Laplacian, so the dispatcher's
// generic pairwise run (cross-validation of the loss weight, warm starts)
// serves them; each family file says only how to convert its options and
// which core solver to call.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "server/jobs/families/family_util.h"
#include "server/jobs/solver_family.h"

namespace kls::server::families {

/// `Core` must have num_threads and initial_factor members and a Validate().
template <class Proto, class Core>
class PairwiseFamily : public SolverFamily {
 public:
  PairwiseFamily(std::string name, Traits traits) : SolverFamily(std::move(name), Proto::descriptor(), [&] {
    traits.pairwise = true;
    return std::move(traits);
  }()) {}

  Status ToSpec(const google::protobuf::Message& options, JobSpec* spec) const final {
    Proto p;
    p.CopyFrom(options);
    KLS_ASSIGN_OR_RETURN(Core core, Convert(p));
    KLS_RETURN_IF_ERROR(core.Validate(name()));
    spec->options = std::move(core);
    return OkStatus();
  }

  StatusOr<JobOutput> Run(const JobSpec& spec, const store::StoredDataset& data, store::Store* store,
                          const SolveControl& control) const final {
    return InternalError(name() + " runs through the dispatcher's pairwise path");
  }

  StatusOr<NpklResult> RunWithWeight(const JobSpec& spec, const NpklProblem& problem, std::optional<double> weight,
                                     bool single_thread, const std::shared_ptr<const Eigen::MatrixXd>& warm,
                                     const SolveControl& control) const final {
    Core o = spec.Options<Core>();
    if (weight) SetWeight(&o, *weight);
    if (single_thread) o.num_threads = 1;
    o.initial_factor = warm;
    return Solve(problem, o, control);
  }

 protected:
  /// Proto → core (validated afterwards by Core::Validate).
  virtual StatusOr<Core> Convert(const Proto& p) const = 0;
  /// Sets the loss weight cross-validation chooses (C or γ).
  virtual void SetWeight(Core* o, double weight) const = 0;
  virtual StatusOr<NpklResult> Solve(const NpklProblem& problem, const Core& o, const SolveControl& control) const = 0;
};

}  // namespace kls::server::families
