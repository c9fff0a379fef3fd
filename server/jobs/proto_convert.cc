#include "server/jobs/proto_convert.h"

#include <google/protobuf/util/json_util.h>

#include <cmath>
#include <cstdio>
#include <sstream>

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
  return OkStatus();
}

// ---- Submit / stored spec --------------------------------------------------

namespace {

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
    default:
      return InvalidArgumentError("solver: one of kl_admm, bcd_npkl, simple_npkl is required");
  }
  return spec;
}

}  // namespace

StatusOr<store::JobRecord> JobRecordFromSubmit(const kls::v1::SubmitJobRequest& request) {
  if (request.dataset_id().empty()) return InvalidArgumentError("dataset_id is required");
  if (!(std::isfinite(request.deadline_seconds()) && request.deadline_seconds() >= 0.0)) {
    return InvalidArgumentError("deadline_seconds = " + Num(request.deadline_seconds()) +
                                " must be finite and >= 0 (0 = none)");
  }
  KLS_ASSIGN_OR_RETURN(JobSpec spec, SpecFromRequest(request));

  // Keep only what the worker needs to rebuild the spec: graph + solver oneof.
  kls::v1::SubmitJobRequest stored;
  if (request.has_graph()) *stored.mutable_graph() = request.graph();
  switch (request.solver_case()) {
    case kls::v1::SubmitJobRequest::kKlAdmm: *stored.mutable_kl_admm() = request.kl_admm(); break;
    case kls::v1::SubmitJobRequest::kBcdNpkl: *stored.mutable_bcd_npkl() = request.bcd_npkl(); break;
    case kls::v1::SubmitJobRequest::kSimpleNpkl: *stored.mutable_simple_npkl() = request.simple_npkl(); break;
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
  if (method != kMethodKlAdmm && method != kMethodBcdNpkl && method != kMethodSimpleNpkl) {
    return InvalidArgumentError("method = \"" + method + "\" is not one of kl_admm, bcd_npkl, simple_npkl");
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
  }
  KLS_ASSIGN_OR_RETURN(JobSpec spec, SpecFromRequest(r));
  if (spec.method != method) {
    return InvalidArgumentError("options_json holds " + spec.method + " options but method = \"" + method + "\"");
  }
  return spec;
}

Status ValidateJobSpecForDataset(const JobSpec& spec, int64_t num_points) {
  const int n = static_cast<int>(num_points);
  KLS_RETURN_IF_ERROR(spec.graph.Validate(n));
  if (auto* o = std::get_if<KlAdmmOptions>(&spec.options); o && o->rank > n) {
    return InvalidArgumentError("kl_admm.rank = " + std::to_string(o->rank) + " exceeds the data set's " +
                                std::to_string(n) + " points");
  }
  if (auto* o = std::get_if<SimpleNpklOptions>(&spec.options); o && o->low_rank > n) {
    return InvalidArgumentError("simple_npkl.low_rank = " + std::to_string(o->low_rank) + " exceeds the data set's " +
                                std::to_string(n) + " points");
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
  return job;
}

std::string ProgressJson(const ProgressEvent& e, const std::string& termination) {
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
                              double dual_residual, double seconds) {
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
  out += "}";
  return out;
}

}  // namespace kls::server
