// The solver-family registry: one object per family (server/jobs/families/,
// one file each) says everything the job layer needs to know about it — its
// name, its options message, the conversion to core options, the data-set
// check and the run. proto_convert.cc and solver_dispatch.cc are generic over
// these objects and name no family.
//
// A family is found by its name (JobRecord::method, the field name in
// SubmitJobRequest's `solver` oneof) or by its options message type (the
// message packed in SubmitJobRequest.family_options). Adding one is three
// files: the core solver, its options message (a oneof field, or its own
// .proto with option (kls.v1.family)), and its family file here
// (docs/ADDING_A_SOLVER.md).
//
// Thread safety: families register during static initialization; afterwards
// the registry and the family objects are read-only and shared by every thread.
#pragma once

#include <any>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include "core/common/certificate.h"
#include "core/common/solve_control.h"
#include "core/common/status.h"
#include "core/data/feature_scaling.h"
#include "core/graph/connect.h"
#include "core/graph/laplacian.h"
#include "core/model/learned_kernel.h"
#include "core/npkl/cross_validation.h"
#include "core/npkl/npkl_problem.h"
#include "server/store/store.h"

namespace kls::server {

class SolverFamily;

/// A job's settings in core terms: what the family's Run receives.
struct JobSpec {
  std::string method;                  ///< the family's name
  const SolverFamily* family = nullptr;
  /// Graph settings (families with Traits::pairwise; defaults resolved:
  /// k = 5, the family's default weight, δ per family).
  GraphOptions graph;
  /// The family's core options, as its ToSpec stored them; read with Options<T>().
  std::any options;
  /// Feature scaling fitted on the data set before the solver runs (not for
  /// families without Traits::uses_features). Unset = none for every family:
  /// each family's paper tables are reproduced on raw features.
  FeatureScaling scaling = FeatureScaling::kNone;
  /// graph.connect, for families that need a connected graph.
  ConnectMode connect = ConnectMode::kMst;
  /// SubmitJobRequest.cross_validation (Traits::pairwise families only): the
  /// loss weight is chosen by CrossValidate before the final learn.
  std::optional<CrossValidationOptions> cross_validation;
  /// graph.delta unset and the family's δ follows C (Traits::delta_follows_c).
  bool delta_follows_c = false;
  /// SubmitJobRequest.warm_start (Traits::pairwise families only): the kernel
  /// to start from (version 0 = latest), resolved by the worker from the store.
  struct WarmStartRef {
    std::string kernel_name;
    int64_t version = 0;
  };
  std::optional<WarmStartRef> warm_start;
  /// SubmitJobRequest.baseline_guard (Traits::pairwise families only; unset =
  /// on): score the learned kernel against plain kernels on held-out pairs
  /// (core/npkl/baseline_guard.h, solver_dispatch.cc).
  bool baseline_guard = true;
  /// SubmitJobRequest.scaling was left unspecified (spec.scaling is then kNone);
  /// a Traits::meta family may try several scalings.
  bool scaling_unset = true;
  /// The kls.v1.SubmitJobRequest this spec was made from (its graph, scaling
  /// and options), for Traits::meta families, which make their candidates'
  /// specs from it (SpecFromRequest, proto_convert.h).
  std::shared_ptr<const google::protobuf::Message> request;

  /// The family's core options; std::bad_any_cast if `T` is not its type.
  template <class T>
  const T& Options() const {
    return std::any_cast<const T&>(options);
  }
  template <class T>
  T& MutableOptions() {
    return std::any_cast<T&>(options);
  }
};

/// What a finished job stores.
struct JobOutput {
  LearnedKernel kernel;
  std::vector<store::Attachment> attachments;
  SolveReport stats;              ///< termination, iterations, objective, timings
  double primal_residual = 0.0;  ///< family-specific residuals (KernelSummaryJson)
  double dual_residual = 0.0;
  /// The optimality certificate, as the core solver returned it (NPKL:
  /// KL-ADMM's and BCDNPKL's Burer–Monteiro bound, SimpleNPKL's duality gap;
  /// RegPCP/RegMVU: gap, lower bound and KKT residual; NaN and not certified
  /// where the family has none). `certified` has one meaning everywhere: the
  /// gap is finite and within the solver's tolerance (Certificate::CheckAgainst).
  Certificate certificate;
  std::optional<ConnectReport> connect;  ///< graph connectivity check / repair
  std::optional<CrossValidationResult> cross_validation;  ///< the loss weight chosen by cross-validation
  /// Further members of the kernel's summary_json (KernelSummaryJson notes),
  /// each starting with a comma. A family may set its own (embedding MVE:
  /// "mve_start_guard"); RunSolverJob puts its members in front of them: the
  /// scaling used, a hint when unscaled feature ranges differ by > 100×,
  /// graph_connect, cross_validation, warm_start.
  std::string summary_notes;
};

/// One solver family. Subclasses override ToSpec and Run, and CheckDataset
/// where the family needs more than the generic checks.
class SolverFamily {
 public:
  struct Traits {
    /// Learns from the data set's pairwise constraints over a k-NN graph
    /// Laplacian built from SubmitJobRequest.graph; cross_validation and
    /// warm_start apply (override RunWithWeight).
    bool pairwise = false;
    /// Reads the data set's feature columns (SubmitJobRequest.scaling applies).
    bool uses_features = true;
    /// graph.weight when unset.
    EdgeWeight default_weight = EdgeWeight::kBinary;
    /// graph.delta when unset is C/2 and follows the C being tried.
    bool delta_follows_c = false;
    /// The options field cross_validation chooses ("c", "gamma"); empty = none.
    std::string loss_weight_field;
    /// An options message with every field unset is a valid request.
    bool all_defaults_valid = true;
    /// Names of the attachments its kernels carry (solver_dispatch.h), which
    /// the model queries need.
    std::vector<std::string> attachments;
    /// A family that runs other families (auto): RunSolverJob gives it the
    /// unscaled data set and returns its output as it is (complete: kernel,
    /// attachments, certificate, every summary member); the family scales,
    /// runs RunSolverJob for the family it picks, and writes the summary.
    bool meta = false;
  };

  SolverFamily(std::string name, const google::protobuf::Descriptor* options_type, Traits traits)
      : name_(std::move(name)), options_type_(options_type), traits_(std::move(traits)) {}
  virtual ~SolverFamily() = default;
  SolverFamily(const SolverFamily&) = delete;
  SolverFamily& operator=(const SolverFamily&) = delete;

  const std::string& name() const { return name_; }
  const google::protobuf::Descriptor* options_type() const { return options_type_; }
  const Traits& traits() const { return traits_; }

  /// Converts and validates the options message (of options_type()) into
  /// spec->options; errors are INVALID_ARGUMENT naming "<name>.<field> = value".
  /// spec->method, family and connect are set; graph is resolved after.
  virtual Status ToSpec(const google::protobuf::Message& options, JobSpec* spec) const = 0;

  /// The loss weight (C) spec->options resolve to, for Traits::delta_follows_c
  /// (δ = C/2 when graph.delta is unset); 0 for other families.
  virtual double LossWeight(const JobSpec& spec) const { return 0.0; }

  /// The checks that need the data set (sizes, labels, constraints, other
  /// data sets it reads, via `store`): INVALID_ARGUMENT for an option the
  /// data set cannot satisfy, FAILED_PRECONDITION for what the data set lacks.
  virtual Status CheckDataset(const JobSpec& spec, const store::DatasetRecord& dataset, store::Store* store) const;

  /// Runs the solver on the (already scaled) data set. `store` serves
  /// further reads (a second data set, a warm-start kernel).
  virtual StatusOr<JobOutput> Run(const JobSpec& spec, const store::StoredDataset& data, store::Store* store,
                                  const SolveControl& control) const = 0;

  /// Traits::pairwise families: one learn on `problem` with the loss weight
  /// replaced by `weight` (when set), capped at one thread when
  /// `single_thread`, started from `warm` (may be null). Cross-validation
  /// calls it once per fold and value.
  virtual StatusOr<NpklResult> RunWithWeight(const JobSpec& spec, const NpklProblem& problem,
                                             std::optional<double> weight, bool single_thread,
                                             const std::shared_ptr<const Eigen::MatrixXd>& warm,
                                             const SolveControl& control) const;

 private:
  std::string name_;
  const google::protobuf::Descriptor* options_type_;
  Traits traits_;
};

/// Every registered family.
class FamilyRegistry {
 public:
  static FamilyRegistry& Global();

  /// Registers `family`; a second family of the same name or options type
  /// aborts the program (a build error in disguise, found at start-up).
  void Add(std::unique_ptr<SolverFamily> family);

  /// nullptr when unknown.
  const SolverFamily* Find(std::string_view name) const;
  const SolverFamily* FindByType(const google::protobuf::Descriptor* options_type) const;
  /// By the full name of the options message ("kls.v1.KlAdmmOptions").
  const SolverFamily* FindByTypeName(std::string_view full_name) const;

  /// The families in the order of SubmitJobRequest's oneof, then the others by name.
  std::vector<const SolverFamily*> All() const;
  /// The names of All(), comma-separated, for messages.
  std::string Names() const;
  /// The names of the families whose kernels carry `attachment`, joined by " or ".
  std::string NamesStoring(std::string_view attachment) const;

 private:
  std::vector<std::unique_ptr<SolverFamily>> families_;
};

/// Registers a family at static initialization; in its family file, at
/// namespace scope: KLS_REGISTER_SOLVER_FAMILY(KlAdmmFamily);
/// (the class must be default-constructible).
#define KLS_REGISTER_SOLVER_FAMILY(Class)                                   \
  [[maybe_unused]] static const bool kls_registered_##Class = [] {          \
    ::kls::server::FamilyRegistry::Global().Add(std::make_unique<Class>()); \
    return true;                                                            \
  }()

/// A family whose options message is `Proto` and core options `Core`: the
/// subclass implements Convert and RunTyped over the concrete types.
template <class Proto, class Core>
class TypedFamily : public SolverFamily {
 public:
  TypedFamily(std::string name, Traits traits)
      : SolverFamily(std::move(name), Proto::descriptor(), std::move(traits)) {}

  Status ToSpec(const google::protobuf::Message& options, JobSpec* spec) const final {
    const Proto* p = dynamic_cast<const Proto*>(&options);
    Proto copy;
    if (p == nullptr) {  // e.g. a DynamicMessage of the same type
      copy.CopyFrom(options);
      p = &copy;
    }
    KLS_ASSIGN_OR_RETURN(Core core, Convert(*p, *spec));
    spec->options = std::move(core);
    return OkStatus();
  }

  StatusOr<JobOutput> Run(const JobSpec& spec, const store::StoredDataset& data, store::Store* store,
                          const SolveControl& control) const override {
    return RunTyped(spec.Options<Core>(), spec, data, store, control);
  }

 protected:
  /// Proto → core, validated.
  virtual StatusOr<Core> Convert(const Proto& p, const JobSpec& spec) const = 0;
  virtual StatusOr<JobOutput> RunTyped(const Core& options, const JobSpec& spec, const store::StoredDataset& data,
                                       store::Store* store, const SolveControl& control) const = 0;
};

}  // namespace kls::server
