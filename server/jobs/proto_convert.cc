#include "server/jobs/proto_convert.h"

#include <google/protobuf/util/json_util.h>

#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/common/names.h"

namespace kls::server {
namespace {

namespace pbu = google::protobuf::util;

std::string Num(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

// Core validators name fields "options.x"; the client wrote "kl_admm.x".
Status RenameOptionsField(const Status& s, const std::string& method) {
  if (s.ok()) return s;
  std::string msg = s.message();
  const std::string prefix = "options.";
  if (msg.compare(0, prefix.size(), prefix) == 0) msg = method + "." + msg.substr(prefix.size());
  return Status(s.code(), msg);
}

// Names a core validator's field the way the client wrote it: "qsdp.m = 0 ...".
Status Prefixed(const Status& s, const std::string& method) {
  if (s.ok()) return s;
  std::string msg = s.message();
  for (const std::string prefix : {"options.", "onk.onk ", "onk ", "onk."}) {
    if (msg.compare(0, prefix.size(), prefix) == 0) {
      msg = msg.substr(prefix.size());
      break;
    }
  }
  return Status(s.code(), method + "." + msg);
}

Status CheckEnum(bool valid, const std::string& field, int value, const char* allowed) {
  if (valid) return OkStatus();
  return InvalidArgumentError(field + " = " + std::to_string(value) + " is not one of " + allowed);
}

NpklLoss LossToCore(kls::v1::Loss loss, NpklLoss fallback) {
  switch (loss) {
    case kls::v1::LINEAR: return NpklLoss::kLinear;
    case kls::v1::HINGE: return NpklLoss::kHinge;
    case kls::v1::SQUARE_HINGE: return NpklLoss::kSquareHinge;
    case kls::v1::SQUARE: return NpklLoss::kSquare;
    default: return fallback;  // LOSS_UNSPECIFIED (or an unknown future value): core default
  }
}

kls::v1::Loss LossToProto(NpklLoss loss) {
  switch (loss) {
    case NpklLoss::kLinear: return kls::v1::LINEAR;
    case NpklLoss::kHinge: return kls::v1::HINGE;
    case NpklLoss::kSquareHinge: return kls::v1::SQUARE_HINGE;
    case NpklLoss::kSquare: return kls::v1::SQUARE;
  }
  return kls::v1::LOSS_UNSPECIFIED;
}

Status ValidateLossEnum(const std::string& method, kls::v1::Loss loss) {
  if (!kls::v1::Loss_IsValid(loss)) {
    return InvalidArgumentError(method + ".loss = " + std::to_string(static_cast<int>(loss)) +
                                " is not a known loss (linear, hinge, square_hinge, square)");
  }
  return OkStatus();
}

using Submit = kls::v1::SubmitJobRequest;

// SubmitJobRequest.scaling → core; UNSPECIFIED is none (also every record
// stored before the field existed). social_strength has no feature columns to scale.
StatusOr<FeatureScaling> ScalingToCore(Submit::Scaling s, const std::string& method) {
  KLS_RETURN_IF_ERROR(CheckEnum(Submit::Scaling_IsValid(s), "scaling", s, "NONE, ZSCORE, MINMAX"));
  const FeatureScaling out = s == Submit::ZSCORE   ? FeatureScaling::kZScore
                             : s == Submit::MINMAX ? FeatureScaling::kMinMax
                                                    : FeatureScaling::kNone;
  if (out != FeatureScaling::kNone && method == kMethodSocialStrength) {
    return InvalidArgumentError("scaling = " + Submit::Scaling_Name(s) +
                                " does not apply to social_strength (its kernels come from social records, not "
                                "feature columns)");
  }
  return out;
}

ConnectMode ConnectToCore(kls::v1::GraphSpec::Connect c) {
  switch (c) {
    case kls::v1::GraphSpec::CONNECT_ERROR: return ConnectMode::kError;
    case kls::v1::GraphSpec::GROW_K: return ConnectMode::kGrowK;
    default: return ConnectMode::kMst;  // MST, CONNECT_UNSPECIFIED
  }
}

pbu::JsonPrintOptions PrintOptions() {
  pbu::JsonPrintOptions o;
  o.preserve_proto_field_names = true;
  return o;
}

}  // namespace

// ---- Solver options ---------------------------------------------------------

KlAdmmOptions ToCore(const kls::v1::KlAdmmOptions& p) {
  KlAdmmOptions o;
  if (p.has_gamma()) o.gamma = p.gamma();
  if (p.has_rank()) o.rank = p.rank();
  if (p.has_rho_initial()) o.rho_initial = p.rho_initial();
  if (p.has_rho_min()) o.rho_min = p.rho_min();
  if (p.has_adaptive_rho()) o.adaptive_rho = p.adaptive_rho();
  if (p.has_max_iterations()) o.max_iterations = p.max_iterations();
  if (p.has_tolerance()) o.tolerance = p.tolerance();
  if (p.has_seed()) o.seed = p.seed();
  if (p.has_num_threads()) o.num_threads = p.num_threads();
  return o;
}

BcdNpklOptions ToCore(const kls::v1::BcdNpklOptions& p) {
  BcdNpklOptions o;
  o.loss = LossToCore(p.loss(), o.loss);
  if (p.has_c()) o.c = p.c();
  if (p.has_rank()) o.rank = p.rank();
  if (p.has_max_iterations()) o.max_iterations = p.max_iterations();
  if (p.has_tolerance()) o.tolerance = p.tolerance();
  if (p.has_seed()) o.seed = p.seed();
  return o;
}

SimpleNpklOptions ToCore(const kls::v1::SimpleNpklOptions& p) {
  SimpleNpklOptions o;
  o.loss = LossToCore(p.loss(), o.loss);
  if (p.has_c()) o.c = p.c();
  if (p.has_b()) o.b = p.b();
  if (p.has_p()) o.p = p.p();
  if (p.has_max_iterations()) o.max_iterations = p.max_iterations();
  if (p.has_tolerance()) o.tolerance = p.tolerance();
  if (p.has_active_set()) o.active_set = p.active_set();
  if (p.has_low_rank()) o.low_rank = p.low_rank();
  if (p.has_num_threads()) o.num_threads = p.num_threads();
  if (p.has_accelerated()) o.accelerated = p.accelerated();
  if (p.has_start_rank()) o.start_rank = p.start_rank();
  return o;
}

StatusOr<QsdpJobOptions> ToCore(const kls::v1::QsdpKernelOptions& p) {
  KLS_RETURN_IF_ERROR(CheckEnum(kls::v1::QsdpKernelOptions::Problem_IsValid(p.problem()), "qsdp.problem",
                                p.problem(), "REGPCP, REGMVU"));
  if (p.problem() == kls::v1::QsdpKernelOptions::PROBLEM_UNSPECIFIED) {
    return InvalidArgumentError("qsdp.problem is required: REGPCP or REGMVU");
  }
  QsdpJobOptions o;
  o.mvu = p.problem() == kls::v1::QsdpKernelOptions::REGMVU;
  if (p.has_m()) o.pcp.m = o.mvu_options.m = p.m();
  if (p.has_neighbors()) o.pcp.neighbors = o.mvu_options.neighbors = p.neighbors();
  if (p.has_nu()) o.mvu_options.nu = p.nu();
  if (p.has_gap_tolerance()) o.solver.gap_tolerance = o.solver.ipm.gap_tolerance = p.gap_tolerance();
  if (p.has_max_iterations()) o.solver.ipm.max_iterations = p.max_iterations();
  if (p.has_nu() && !(std::isfinite(p.nu()) && p.nu() > 0)) {
    return InvalidArgumentError("qsdp.nu = " + Num(p.nu()) + " must be finite and > 0");
  }
  if (p.has_m() && p.m() < 1) return InvalidArgumentError("qsdp.m = " + std::to_string(p.m()) + " must be >= 1");
  if (p.has_neighbors() && p.neighbors() < 1) {
    return InvalidArgumentError("qsdp.neighbors = " + std::to_string(p.neighbors()) + " must be >= 1");
  }
  KLS_RETURN_IF_ERROR(Prefixed(o.solver.Validate(), kMethodQsdp));
  return o;
}

StatusOr<EmbeddingJobOptions> ToCore(const kls::v1::EmbeddingOptions& p) {
  KLS_RETURN_IF_ERROR(CheckEnum(kls::v1::EmbeddingOptions::Method_IsValid(p.method()), "embedding.method",
                                p.method(), "CMVU, MVE, SPE, KPCA"));
  EmbeddingJobOptions o;
  switch (p.method()) {
    case kls::v1::EmbeddingOptions::CMVU: o.method = EmbeddingJobOptions::Method::kCmvu; break;
    case kls::v1::EmbeddingOptions::MVE: o.method = EmbeddingJobOptions::Method::kMve; break;
    case kls::v1::EmbeddingOptions::SPE: o.method = EmbeddingJobOptions::Method::kSpe; break;
    case kls::v1::EmbeddingOptions::KPCA: o.method = EmbeddingJobOptions::Method::kKpca; break;
    default: return InvalidArgumentError("embedding.method is required: CMVU, MVE, SPE or KPCA");
  }
  if (p.has_dims()) o.mve.dims = o.kpca.dims = p.dims();
  if (p.has_neighbors()) o.neighbors = p.neighbors();
  if (p.has_c()) o.inner.c = p.c();
  if (p.has_b()) o.b = p.b();
  if (p.has_max_iterations()) o.inner.max_iterations = p.max_iterations();
  if (p.has_tolerance()) o.inner.tolerance = p.tolerance();
  if (p.kpca_rbf()) o.kpca.kernel = KpcaOptions::Kernel::kRbf;
  if (p.has_kpca_sigma()) o.kpca.rbf_sigma = p.kpca_sigma();
  if (p.has_relative_slack()) o.inner.relative_slack = p.relative_slack();
  if (o.neighbors < 1) return InvalidArgumentError("embedding.neighbors = " + std::to_string(o.neighbors) + " must be >= 1");
  if (p.has_b()) KLS_RETURN_IF_ERROR(Prefixed(CheckPositiveOption("b", o.b), kMethodEmbedding));
  KLS_RETURN_IF_ERROR(Prefixed(o.inner.Validate(), kMethodEmbedding));
  KLS_RETURN_IF_ERROR(Prefixed(o.mve.Validate(), kMethodEmbedding));
  KLS_RETURN_IF_ERROR(Prefixed(o.kpca.Validate(), kMethodEmbedding));
  return o;
}

StatusOr<ClassifierTrainingOptions> ToCore(const kls::v1::OnkOptions& p) {
  KLS_RETURN_IF_ERROR(CheckEnum(kls::v1::OnkOptions::Solver_IsValid(p.solver()), "onk.solver", p.solver(),
                                "GRADIENT, ACCELERATED, LEVEL"));
  ClassifierTrainingOptions o;
  o.method = ClassifierMethod::kOnk;
  if (p.has_c()) o.c = p.c();
  if (p.has_c() && !(std::isfinite(p.c()) && p.c() > 0)) {
    return InvalidArgumentError("onk.c = " + Num(p.c()) + " must be finite and > 0 (unset = cross-validation)");
  }
  if (p.has_rho()) o.onk.rho = p.rho();
  if (p.solver() == kls::v1::OnkOptions::ACCELERATED) o.onk.method = OnkMethod::kAccelerated;
  if (p.solver() == kls::v1::OnkOptions::LEVEL) o.onk.method = OnkMethod::kLevel;
  if (p.has_tolerance()) o.onk.tolerance = p.tolerance();
  if (p.has_max_iterations()) o.onk.max_iterations = p.max_iterations();
  if (p.has_sigma_k()) o.sigma_k = p.sigma_k();
  if (p.has_positive_class()) o.positive_class = p.positive_class();
  if (p.has_folds()) o.folds = p.folds();
  if (p.has_seed()) o.seed = p.seed();
  KLS_RETURN_IF_ERROR(Prefixed(o.Validate(), kMethodOnk));
  return o;
}

StatusOr<ClassifierTrainingOptions> ToCore(const kls::v1::MklOptions& p) {
  KLS_RETURN_IF_ERROR(CheckEnum(kls::v1::MklOptions::Method_IsValid(p.method()), "mkl.method", p.method(),
                                "KTA, SVM, TWO_LAYER, TWO_LAYER_INFINITE, UNSUPERVISED"));
  ClassifierTrainingOptions o;
  switch (p.method()) {
    case kls::v1::MklOptions::SVM: o.method = ClassifierMethod::kSvm; break;
    case kls::v1::MklOptions::TWO_LAYER: o.method = ClassifierMethod::kTwoLayer; break;
    case kls::v1::MklOptions::TWO_LAYER_INFINITE: o.method = ClassifierMethod::kTwoLayerInfinite; break;
    case kls::v1::MklOptions::UNSUPERVISED: o.method = ClassifierMethod::kUnsupervised; break;
    default: o.method = ClassifierMethod::kKta; break;
  }
  if (p.has_c()) o.c = p.c();
  if (p.has_c() && !(std::isfinite(p.c()) && p.c() > 0)) {
    return InvalidArgumentError("mkl.c = " + Num(p.c()) + " must be finite and > 0 (unset = cross-validation)");
  }
  if (p.has_single_features()) o.single_features = p.single_features();
  if (p.has_positive_class()) o.positive_class = p.positive_class();
  if (p.has_folds()) o.folds = p.folds();
  if (p.has_seed()) o.seed = p.seed();
  KLS_RETURN_IF_ERROR(Prefixed(o.Validate(), kMethodMkl));
  return o;
}

StatusOr<NpkRankingJobOptions> ToCore(const kls::v1::NpkRankingOptions& p) {
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
  KLS_RETURN_IF_ERROR(Prefixed(n.Validate(), kMethodNpkRanking));
  return o;
}

StatusOr<SocialStrengthOptions> ToCore(const kls::v1::SocialStrengthOptions& p) {
  using P = kls::v1::SocialStrengthOptions;
  KLS_RETURN_IF_ERROR(CheckEnum(P::Weighting_IsValid(p.weighting()), "social_strength.weighting", p.weighting(),
                                "KTA, UNIFORM, KLR"));
  KLS_RETURN_IF_ERROR(CheckEnum(P::PairKernel_IsValid(p.klr_pair_kernel()), "social_strength.klr_pair_kernel",
                                p.klr_pair_kernel(), "SYMMETRIC_PRODUCT, DIFFERENCE"));
  SocialStrengthOptions o;
  if (p.weighting() == P::UNIFORM) o.weighting = StrengthWeighting::kUniform;
  if (p.weighting() == P::KLR) o.weighting = StrengthWeighting::kKlr;
  if (p.has_cell_degrees()) o.kernels.cell_degrees = p.cell_degrees();
  if (o.weighting != StrengthWeighting::kKlr) {
    // KLR options with another weighting would be silently ignored: reject them instead.
    const char* set = p.has_klr_c() ? "klr_c" : p.has_klr_import_vectors() ? "klr_import_vectors"
                      : p.has_klr_positives() ? "klr_positives" : p.has_klr_negatives() ? "klr_negatives"
                      : p.klr_pair_kernel() != P::PAIR_KERNEL_UNSPECIFIED ? "klr_pair_kernel"
                      : p.has_klr_bias_weight() ? "klr_bias_weight" : p.has_klr_link_weight() ? "klr_link_weight"
                      : p.has_klr_seed() ? "klr_seed" : nullptr;
    if (set) {
      return InvalidArgumentError(std::string("social_strength.") + set + " is set but weighting = " +
                                  P::Weighting_Name(p.weighting()) + "; the klr_* options need weighting = KLR");
    }
  }
  if (p.has_klr_c()) o.klr.c = p.klr_c();
  if (p.has_klr_import_vectors()) o.klr.max_import_vectors = p.klr_import_vectors();
  if (p.has_klr_positives()) o.klr_pairs.positives_per_user = p.klr_positives();
  if (p.has_klr_negatives()) o.klr_pairs.negatives_per_user = p.klr_negatives();
  if (p.klr_pair_kernel() == P::DIFFERENCE) o.klr.pair_kernel.kind = PairKernel::kDifference;
  if (p.has_klr_bias_weight()) o.klr.pair_kernel.bias_weight = p.klr_bias_weight();
  if (p.has_klr_link_weight()) o.klr.pair_kernel.link_weight = p.klr_link_weight();
  if (p.has_klr_seed()) o.klr.seed = o.klr_pairs.seed = p.klr_seed();
  // Name the proto fields (the core validators name their own).
  const auto positive = [](double v) { return std::isfinite(v) && v > 0; };
  const auto non_negative = [](double v) { return std::isfinite(v) && v >= 0; };
  if (!positive(o.klr.c))
    return InvalidArgumentError("social_strength.klr_c = " + FormatNumber(o.klr.c) + " must be finite and > 0");
  for (const auto& [name, value] : {std::pair<const char*, int>{"klr_import_vectors", o.klr.max_import_vectors},
                                    {"klr_positives", o.klr_pairs.positives_per_user},
                                    {"klr_negatives", o.klr_pairs.negatives_per_user}}) {
    if (value < 1)
      return InvalidArgumentError(std::string("social_strength.") + name + " = " + std::to_string(value) +
                                  " must be >= 1");
  }
  if (!non_negative(o.klr.pair_kernel.bias_weight) || !non_negative(o.klr.pair_kernel.link_weight)) {
    return InvalidArgumentError("social_strength.klr_bias_weight = " + FormatNumber(o.klr.pair_kernel.bias_weight) +
                                " and klr_link_weight = " + FormatNumber(o.klr.pair_kernel.link_weight) +
                                " must be finite and >= 0");
  }
  KLS_RETURN_IF_ERROR(Prefixed(o.Validate(), kMethodSocialStrength));
  return o;
}

kls::v1::KlAdmmOptions ToProto(const KlAdmmOptions& o) {
  kls::v1::KlAdmmOptions p;
  p.set_gamma(o.gamma);
  p.set_rank(o.rank);
  p.set_rho_initial(o.rho_initial);
  p.set_rho_min(o.rho_min);
  p.set_adaptive_rho(o.adaptive_rho);
  p.set_max_iterations(o.max_iterations);
  p.set_tolerance(o.tolerance);
  p.set_seed(o.seed);
  p.set_num_threads(o.num_threads);
  return p;
}

kls::v1::BcdNpklOptions ToProto(const BcdNpklOptions& o) {
  kls::v1::BcdNpklOptions p;
  p.set_loss(LossToProto(o.loss));
  p.set_c(o.c);
  p.set_rank(o.rank);
  p.set_max_iterations(o.max_iterations);
  p.set_tolerance(o.tolerance);
  p.set_seed(o.seed);
  return p;
}

kls::v1::SimpleNpklOptions ToProto(const SimpleNpklOptions& o) {
  kls::v1::SimpleNpklOptions p;
  p.set_loss(LossToProto(o.loss));
  p.set_c(o.c);
  p.set_b(o.b);
  p.set_p(o.p);
  p.set_max_iterations(o.max_iterations);
  p.set_tolerance(o.tolerance);
  p.set_active_set(o.active_set);
  p.set_low_rank(o.low_rank);
  p.set_num_threads(o.num_threads);
  p.set_accelerated(o.accelerated);
  p.set_start_rank(o.start_rank);
  return p;
}

// ---- Graph -----------------------------------------------------------------

GraphOptions ToCoreGraph(const kls::v1::GraphSpec& spec, const std::string& method, double bcd_c) {
  GraphOptions g;
  g.k = spec.has_k() ? spec.k() : 5;
  switch (spec.weight()) {
    case kls::v1::GraphSpec::BINARY: g.weight = EdgeWeight::kBinary; break;
    case kls::v1::GraphSpec::GAUSSIAN: g.weight = EdgeWeight::kGaussian; break;
    default: g.weight = method == kMethodKlAdmm ? EdgeWeight::kGaussian : EdgeWeight::kBinary; break;
  }
  g.sigma = spec.has_sigma() ? spec.sigma() : 0.0;
  if (spec.has_delta()) {
    g.delta = spec.delta();
  } else {
    g.delta = method == kMethodBcdNpkl ? bcd_c / 2.0 : 0.0;
  }
  g.num_threads = 1;
  return g;
}

Status ValidateGraphSpec(const kls::v1::GraphSpec& spec) {
  if (spec.has_k() && spec.k() < 1) {
    return InvalidArgumentError("graph.k = " + std::to_string(spec.k()) + " must be >= 1");
  }
  if (!kls::v1::GraphSpec::Weight_IsValid(spec.weight())) {
    return InvalidArgumentError("graph.weight = " + std::to_string(static_cast<int>(spec.weight())) +
                                " is not one of BINARY, GAUSSIAN");
  }
  if (spec.has_sigma() && !(std::isfinite(spec.sigma()) && spec.sigma() >= 0.0)) {
    return InvalidArgumentError("graph.sigma = " + Num(spec.sigma()) + " must be finite and >= 0 (0 = automatic)");
  }
  if (spec.has_delta() && !(std::isfinite(spec.delta()) && spec.delta() >= 0.0)) {
    return InvalidArgumentError("graph.delta = " + Num(spec.delta()) + " must be finite and >= 0");
  }
  return CheckEnum(kls::v1::GraphSpec::Connect_IsValid(spec.connect()), "graph.connect", spec.connect(),
                   "CONNECT_ERROR, GROW_K, MST");
}

// ---- Submit / stored spec --------------------------------------------------

namespace {

// The loss weight a solver section sets explicitly, as "field = value"; empty when unset.
std::string ExplicitLossWeight(const kls::v1::SubmitJobRequest& r) {
  if (r.has_kl_admm() && r.kl_admm().has_gamma()) return "kl_admm.gamma = " + Num(r.kl_admm().gamma());
  if (r.has_bcd_npkl() && r.bcd_npkl().has_c()) return "bcd_npkl.c = " + Num(r.bcd_npkl().c());
  if (r.has_simple_npkl() && r.simple_npkl().has_c()) return "simple_npkl.c = " + Num(r.simple_npkl().c());
  return "";
}

// cross_validation and warm_start: NPKL families only (issue 25, items 3–4).
Status NpklKnobsToCore(const kls::v1::SubmitJobRequest& r, JobSpec* spec) {
  const bool npkl = spec->method == kMethodKlAdmm || spec->method == kMethodBcdNpkl || spec->method == kMethodSimpleNpkl;
  spec->delta_follows_c = spec->method == kMethodBcdNpkl && !r.graph().has_delta();
  if (r.has_cross_validation()) {
    if (!npkl) {
      return InvalidArgumentError("cross_validation is set but method = " + spec->method +
                                  "; it chooses C / gamma for kl_admm, bcd_npkl and simple_npkl only");
    }
    if (const std::string set = ExplicitLossWeight(r); !set.empty()) {
      return InvalidArgumentError("cross_validation is set and so is " + set +
                                  "; leave it unset to have it chosen (kls submit --c auto)");
    }
    const kls::v1::CrossValidation& p = r.cross_validation();
    CrossValidationOptions o;
    if (p.has_folds()) o.folds = p.folds();
    if (p.grid_size() > 0) o.grid.assign(p.grid().begin(), p.grid().end());
    if (p.has_seed()) o.seed = p.seed();
    if (p.has_num_threads()) o.num_threads = p.num_threads();
    KLS_RETURN_IF_ERROR(o.Validate());
    spec->cross_validation = o;
  }
  if (r.has_warm_start()) {
    if (!npkl) {
      return InvalidArgumentError("warm_start is set but method = " + spec->method +
                                  "; it is for kl_admm, bcd_npkl and simple_npkl only");
    }
    KLS_RETURN_IF_ERROR(ValidateName("warm_start.kernel_name", r.warm_start().kernel_name()));
    if (r.warm_start().version() < 0) {
      return InvalidArgumentError("warm_start.version = " + std::to_string(r.warm_start().version()) +
                                  " must be >= 0 (0 = latest)");
    }
    spec->warm_start = JobSpec::WarmStartRef{r.warm_start().kernel_name(), r.warm_start().version()};
  }
  return OkStatus();
}

// Validates the solver + graph part of a request and returns the core spec.
StatusOr<JobSpec> SpecFromRequest(const kls::v1::SubmitJobRequest& r) {
  KLS_RETURN_IF_ERROR(ValidateGraphSpec(r.graph()));
  JobSpec spec;
  switch (r.solver_case()) {
    case kls::v1::SubmitJobRequest::kKlAdmm: {
      spec.method = kMethodKlAdmm;
      KlAdmmOptions o = ToCore(r.kl_admm());
      KLS_RETURN_IF_ERROR(RenameOptionsField(o.Validate(), spec.method));
      spec.graph = ToCoreGraph(r.graph(), spec.method, 0.0);
      spec.options = o;
      break;
    }
    case kls::v1::SubmitJobRequest::kBcdNpkl: {
      spec.method = kMethodBcdNpkl;
      KLS_RETURN_IF_ERROR(ValidateLossEnum(spec.method, r.bcd_npkl().loss()));
      BcdNpklOptions o = ToCore(r.bcd_npkl());
      KLS_RETURN_IF_ERROR(RenameOptionsField(o.Validate(), spec.method));
      spec.graph = ToCoreGraph(r.graph(), spec.method, o.c);
      spec.options = o;
      break;
    }
    case kls::v1::SubmitJobRequest::kSimpleNpkl: {
      spec.method = kMethodSimpleNpkl;
      KLS_RETURN_IF_ERROR(ValidateLossEnum(spec.method, r.simple_npkl().loss()));
      SimpleNpklOptions o = ToCore(r.simple_npkl());
      KLS_RETURN_IF_ERROR(RenameOptionsField(o.Validate(), spec.method));
      spec.graph = ToCoreGraph(r.graph(), spec.method, 0.0);
      spec.options = o;
      break;
    }
    case kls::v1::SubmitJobRequest::kQsdp: {
      spec.method = kMethodQsdp;
      KLS_ASSIGN_OR_RETURN(spec.options, ToCore(r.qsdp()));
      break;
    }
    case kls::v1::SubmitJobRequest::kEmbedding: {
      spec.method = kMethodEmbedding;
      KLS_ASSIGN_OR_RETURN(spec.options, ToCore(r.embedding()));
      break;
    }
    case kls::v1::SubmitJobRequest::kOnk: {
      spec.method = kMethodOnk;
      KLS_ASSIGN_OR_RETURN(spec.options, ToCore(r.onk()));
      break;
    }
    case kls::v1::SubmitJobRequest::kMkl: {
      spec.method = kMethodMkl;
      KLS_ASSIGN_OR_RETURN(spec.options, ToCore(r.mkl()));
      break;
    }
    case kls::v1::SubmitJobRequest::kNpkRanking: {
      spec.method = kMethodNpkRanking;
      KLS_ASSIGN_OR_RETURN(spec.options, ToCore(r.npk_ranking()));
      break;
    }
    case kls::v1::SubmitJobRequest::kSocialStrength: {
      spec.method = kMethodSocialStrength;
      KLS_ASSIGN_OR_RETURN(spec.options, ToCore(r.social_strength()));
      break;
    }
    default:
      return InvalidArgumentError(
          "solver: one of kl_admm, bcd_npkl, simple_npkl, qsdp, embedding, onk, mkl, npk_ranking, social_strength "
          "is required");
  }
  if (spec.method != kMethodKlAdmm && spec.method != kMethodBcdNpkl && spec.method != kMethodSimpleNpkl) {
    spec.graph = ToCoreGraph(r.graph(), spec.method, 0.0);  // unused: these methods build their own graphs
  }
  KLS_ASSIGN_OR_RETURN(spec.scaling, ScalingToCore(r.scaling(), spec.method));
  KLS_RETURN_IF_ERROR(NpklKnobsToCore(r, &spec));
  spec.connect = ConnectToCore(r.graph().connect());
  if (auto* q = std::get_if<QsdpJobOptions>(&spec.options)) q->mvu_options.connect = spec.connect;
  return spec;
}

}  // namespace

StatusOr<store::JobRecord> JobRecordFromSubmit(const kls::v1::SubmitJobRequest& request) {
  if (request.dataset_id().empty()) return InvalidArgumentError("dataset_id is required");
  if (!request.kernel_name().empty()) {  // empty: the kernel is named after the job id
    KLS_RETURN_IF_ERROR(ValidateName("kernel_name", request.kernel_name()));
  }
  if (!(std::isfinite(request.deadline_seconds()) && request.deadline_seconds() >= 0.0)) {
    return InvalidArgumentError("deadline_seconds = " + Num(request.deadline_seconds()) +
                                " must be finite and >= 0 (0 = none)");
  }
  KLS_ASSIGN_OR_RETURN(JobSpec spec, SpecFromRequest(request));

  // Keep only what the worker needs to rebuild the spec: graph, scaling + solver oneof.
  kls::v1::SubmitJobRequest stored;
  if (request.has_graph()) *stored.mutable_graph() = request.graph();
  stored.set_scaling(request.scaling());
  if (request.has_cross_validation()) *stored.mutable_cross_validation() = request.cross_validation();
  if (request.has_warm_start()) *stored.mutable_warm_start() = request.warm_start();
  switch (request.solver_case()) {
    case kls::v1::SubmitJobRequest::kKlAdmm: *stored.mutable_kl_admm() = request.kl_admm(); break;
    case kls::v1::SubmitJobRequest::kBcdNpkl: *stored.mutable_bcd_npkl() = request.bcd_npkl(); break;
    case kls::v1::SubmitJobRequest::kSimpleNpkl: *stored.mutable_simple_npkl() = request.simple_npkl(); break;
    case kls::v1::SubmitJobRequest::kQsdp: *stored.mutable_qsdp() = request.qsdp(); break;
    case kls::v1::SubmitJobRequest::kEmbedding: *stored.mutable_embedding() = request.embedding(); break;
    case kls::v1::SubmitJobRequest::kOnk: *stored.mutable_onk() = request.onk(); break;
    case kls::v1::SubmitJobRequest::kMkl: *stored.mutable_mkl() = request.mkl(); break;
    case kls::v1::SubmitJobRequest::kNpkRanking: *stored.mutable_npk_ranking() = request.npk_ranking(); break;
    case kls::v1::SubmitJobRequest::kSocialStrength: *stored.mutable_social_strength() = request.social_strength(); break;
    default: break;
  }
  store::JobRecord job;
  job.dataset_id = request.dataset_id();
  job.method = spec.method;
  job.priority = request.priority();
  job.deadline_seconds = request.deadline_seconds();
  job.kernel_name = request.kernel_name();
  job.state = store::JobState::kQueued;
  auto st = pbu::MessageToJsonString(stored, &job.options_json, PrintOptions());
  if (!st.ok()) return InternalError("serializing job options: " + st.ToString());
  return job;
}

StatusOr<JobSpec> ParseJobSpec(const std::string& method, const std::string& options_json) {
  bool known = false;
  for (const char* m : kAllMethods) known = known || method == m;
  if (!known) {
    return InvalidArgumentError("method = \"" + method +
                                "\" is not one of kl_admm, bcd_npkl, simple_npkl, qsdp, embedding, onk, mkl, "
                                "npk_ranking, social_strength");
  }
  kls::v1::SubmitJobRequest r;
  if (!options_json.empty()) {
    pbu::JsonParseOptions po;
    po.ignore_unknown_fields = false;
    auto st = pbu::JsonStringToMessage(options_json, &r, po);
    if (!st.ok()) return InvalidArgumentError("options_json is not valid: " + st.ToString());
  }
  // An options_json without a solver section means "all defaults" for `method`.
  if (r.solver_case() == kls::v1::SubmitJobRequest::SOLVER_NOT_SET) {
    if (method == kMethodKlAdmm) r.mutable_kl_admm();
    if (method == kMethodBcdNpkl) r.mutable_bcd_npkl();
    if (method == kMethodSimpleNpkl) r.mutable_simple_npkl();
    if (method == kMethodOnk) r.mutable_onk();
    if (method == kMethodMkl) r.mutable_mkl();
    if (method == kMethodSocialStrength) r.mutable_social_strength();
    // qsdp, embedding and npk_ranking have required fields: no all-default form.
  }
  KLS_ASSIGN_OR_RETURN(JobSpec spec, SpecFromRequest(r));
  if (spec.method != method) {
    return InvalidArgumentError("options_json holds " + spec.method + " options but method = \"" + method + "\"");
  }
  return spec;
}

Status ValidateJobSpecForDataset(const JobSpec& spec, const store::DatasetRecord& dataset) {
  const int n = static_cast<int>(dataset.num_points);
  const std::string where = "data set \"" + dataset.id + "\"";
  const bool npkl = spec.method == kMethodKlAdmm || spec.method == kMethodBcdNpkl || spec.method == kMethodSimpleNpkl;
  if (npkl) {
    if (dataset.num_constraints == 0) {
      return FailedPreconditionError(where + " has no pairwise constraints; " + spec.method +
                                     " learns from must-link / cannot-link pairs, upload some first");
    }
    KLS_RETURN_IF_ERROR(spec.graph.Validate(n));
  }
  if (auto* o = std::get_if<KlAdmmOptions>(&spec.options); o && o->rank > n) {
    return InvalidArgumentError("kl_admm.rank = " + std::to_string(o->rank) + " exceeds the data set's " +
                                std::to_string(n) + " points");
  }
  if (auto* o = std::get_if<SimpleNpklOptions>(&spec.options); o && o->low_rank > n) {
    return InvalidArgumentError("simple_npkl.low_rank = " + std::to_string(o->low_rank) + " exceeds the data set's " +
                                std::to_string(n) + " points");
  }
  if (auto* o = std::get_if<QsdpJobOptions>(&spec.options)) {
    if (o->mvu) {
      KLS_RETURN_IF_ERROR(Prefixed(o->mvu_options.Validate(n), kMethodQsdp));
    } else {
      if (dataset.num_constraints == 0) {
        return FailedPreconditionError(where + " has no pairwise constraints; qsdp REGPCP needs must-link / "
                                       "cannot-link pairs");
      }
      RegPcpOptions p = o->pcp;
      p.sigma_neighbor = std::min(p.sigma_neighbor, std::max(1, n - 1));
      KLS_RETURN_IF_ERROR(Prefixed(p.Validate(n), kMethodQsdp));
    }
  }
  if (auto* o = std::get_if<EmbeddingJobOptions>(&spec.options)) {
    if (o->neighbors >= n) {
      return InvalidArgumentError("embedding.neighbors = " + std::to_string(o->neighbors) + " must be < n = " +
                                  std::to_string(n));
    }
    if (o->kpca.dims > n) {
      return InvalidArgumentError("embedding.dims = " + std::to_string(o->kpca.dims) + " exceeds n = " +
                                  std::to_string(n));
    }
    if (o->method == EmbeddingJobOptions::Method::kCmvu && dataset.num_classes == 0) {
      return FailedPreconditionError(where + " has no labels; embedding CMVU colours the embedding by class");
    }
  }
  if (std::holds_alternative<ClassifierTrainingOptions>(spec.options) && dataset.num_classes < 2) {
    return FailedPreconditionError(where + " has " + std::to_string(dataset.num_classes) + " classes; " +
                                   spec.method + " trains a classifier and needs labels of at least two classes");
  }
  if (auto* o = std::get_if<NpkRankingJobOptions>(&spec.options)) {
    if (o->options.low_rank > n) {
      return InvalidArgumentError("npk_ranking.low_rank = " + std::to_string(o->options.low_rank) + " exceeds n = " +
                                  std::to_string(n));
    }
    for (int k : {o->options.constraint_neighbors, o->options.laplacian_neighbors}) {
      if (k >= n) {
        return InvalidArgumentError("npk_ranking neighbours = " + std::to_string(k) + " must be < n = " +
                                    std::to_string(n));
      }
    }
  }
  return OkStatus();
}

// ---- Job records -----------------------------------------------------------

kls::v1::JobState ToProto(store::JobState s) {
  switch (s) {
    case store::JobState::kQueued: return kls::v1::QUEUED;
    case store::JobState::kRunning: return kls::v1::RUNNING;
    case store::JobState::kSucceeded: return kls::v1::SUCCEEDED;
    case store::JobState::kFailed: return kls::v1::FAILED;
    case store::JobState::kCancelled: return kls::v1::CANCELLED;
  }
  return kls::v1::JOB_STATE_UNSPECIFIED;
}

StatusOr<store::JobState> ToStore(kls::v1::JobState s) {
  switch (s) {
    case kls::v1::QUEUED: return store::JobState::kQueued;
    case kls::v1::RUNNING: return store::JobState::kRunning;
    case kls::v1::SUCCEEDED: return store::JobState::kSucceeded;
    case kls::v1::FAILED: return store::JobState::kFailed;
    case kls::v1::CANCELLED: return store::JobState::kCancelled;
    default:
      return InvalidArgumentError("state = " + std::to_string(static_cast<int>(s)) +
                                  " is not one of QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED");
  }
}

kls::v1::Job ToProtoJob(const store::JobRecord& r) {
  kls::v1::Job job;
  if (!r.progress_json.empty()) {
    pbu::JsonParseOptions po;
    po.ignore_unknown_fields = true;
    kls::v1::Job partial;
    if (pbu::JsonStringToMessage(r.progress_json, &partial, po).ok()) {
      *job.mutable_progress() = partial.progress();
      job.set_termination(partial.termination());
      job.set_summary_json(partial.summary_json());
    }
  }
  job.set_id(r.id);
  job.set_dataset_id(r.dataset_id);
  job.set_method(r.method);
  job.set_state(ToProto(r.state));
  job.set_priority(r.priority);
  job.set_attempts(r.attempts);
  job.set_error(r.error);
  job.set_kernel_name(r.kernel_name);
  job.set_kernel_version(r.kernel_version);
  job.set_created_unix_ms(r.created_unix_ms);
  job.set_started_unix_ms(r.started_unix_ms);
  job.set_finished_unix_ms(r.finished_unix_ms);
  job.set_owner(r.owner);
  job.set_lease_expires_unix_ms(r.lease_expires_unix_ms);
  job.set_counted_failures(r.counted_failures);
  return job;
}

std::string ProgressJson(const ProgressEvent& e, const std::string& termination, const std::string& summary_json) {
  kls::v1::Job partial;
  kls::v1::Progress* p = partial.mutable_progress();
  p->set_iteration(e.iteration);
  p->set_max_iterations(e.max_iterations);
  // JSON has no NaN/Inf; a non-finite value (e.g. a residual a solver does not
  // define) is reported as 0.
  auto finite = [](double v) { return std::isfinite(v) ? v : 0.0; };
  p->set_objective(finite(e.objective));
  p->set_primal_residual(finite(e.primal_residual));
  p->set_dual_residual(finite(e.dual_residual));
  p->set_elapsed_seconds(finite(e.elapsed_seconds));
  partial.set_termination(termination);
  partial.set_summary_json(summary_json);
  std::string out;
  if (!pbu::MessageToJsonString(partial, &out, PrintOptions()).ok()) return "{}";
  return out;
}

StatusOr<store::JobFilter> ToJobFilter(const kls::v1::ListJobsRequest& request) {
  store::JobFilter f;
  if (request.state() != kls::v1::JOB_STATE_UNSPECIFIED) {
    KLS_ASSIGN_OR_RETURN(f.state, ToStore(request.state()));
  }
  f.dataset_id = request.dataset_id();
  if (request.page_size() < 0 || request.page_size() > 1000) {
    return InvalidArgumentError("page_size = " + std::to_string(request.page_size()) +
                                " must be in [0, 1000] (0 = 100)");
  }
  f.page_size = request.page_size() == 0 ? 100 : request.page_size();
  f.page_token = request.page_token();
  return f;
}

std::string KernelSummaryJson(const std::string& method, const SolveStats& stats, double primal_residual,
                              double dual_residual, double seconds, const std::string& notes, double duality_gap) {
  // Written by hand: every string here is one of a few fixed identifiers
  // (method names are validated, termination names are constants), so no
  // escaping is needed; numbers use %.17g and non-finite values become 0.
  auto num = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.17g", std::isfinite(v) ? v : 0.0);
    return std::string(buf);
  };
  std::string out = "{";
  out += "\"method\":\"" + method + "\"";
  out += ",\"termination\":\"" + std::string(TerminationName(stats.termination)) + "\"";
  out += ",\"iterations\":" + std::to_string(stats.iterations);
  out += ",\"objective\":" + num(stats.final_objective);
  out += ",\"seconds\":" + num(seconds);
  out += ",\"setup_seconds\":" + num(stats.setup_seconds);
  out += ",\"solve_seconds\":" + num(stats.solve_seconds);
  out += ",\"primal_residual\":" + num(primal_residual);
  out += ",\"dual_residual\":" + num(dual_residual);
  out += ",\"resumed_from_iteration\":" + std::to_string(stats.resumed_from_iteration);
  if (std::isfinite(duality_gap)) out += ",\"duality_gap\":" + num(duality_gap);
  out += notes;
  out += "}";
  return out;
}

}  // namespace kls::server
