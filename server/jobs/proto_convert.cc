#include "server/jobs/proto_convert.h"

#include <google/protobuf/any.pb.h>
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

#include "core/common/names.h"
#include "server/jobs/convergence_history.h"
#include "server/jobs/families/family_util.h"

namespace kls::server {
namespace {

namespace pb = google::protobuf;
namespace pbu = google::protobuf::util;
using Submit = kls::v1::SubmitJobRequest;

using families::CheckEnum;
using families::Num;

FamilyRegistry& Registry() { return FamilyRegistry::Global(); }

// "a, b and c" of the families `pred` accepts.
std::string NamesAnd(bool (*pred)(const SolverFamily&)) {
  std::vector<std::string> names;
  for (const SolverFamily* f : Registry().All())
    if (pred(*f)) names.push_back(f->name());
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? " and " : ", ";
    out += names[i];
  }
  return out;
}

bool IsPairwise(const SolverFamily& f) { return f.traits().pairwise; }

const pb::OneofDescriptor* SolverOneof() { return Submit::descriptor()->FindOneofByName("solver"); }
const pb::FieldDescriptor* FamilyOptionsField() { return Submit::descriptor()->FindFieldByName("family_options"); }

// "solver: one of <family>, … is required": the oneof's
// fields this build serves.
Status MissingSolver() {
  std::string names;
  const pb::OneofDescriptor* oneof = SolverOneof();
  for (int i = 0; i < oneof->field_count(); ++i) {
    if (!Registry().Find(oneof->field(i)->name())) continue;
    names += (names.empty() ? "" : ", ") + oneof->field(i)->name();
  }
  return InvalidArgumentError("solver: one of " + names + " is required");
}

// The solver's thread setting, for the k-NN search of its graph: the options'
// `num_threads` when the family has that field and it is set (0 = all cores),
// else 1. Every search (exact, IVF, deterministic HNSW) gives the same graph
// for any thread count, so this changes the graph's time, never the graph.
int GraphThreads(const pb::Message& options) {
  const pb::FieldDescriptor* f = options.GetDescriptor()->FindFieldByName("num_threads");
  if (f == nullptr || f->cpp_type() != pb::FieldDescriptor::CPPTYPE_INT32 || f->is_repeated()) return 1;
  const pb::Reflection* reflection = options.GetReflection();
  if (f->has_presence() && !reflection->HasField(options, f)) return 1;
  return std::max(0, reflection->GetInt32(options, f));
}

// The family a request's solver oneof selects and its options message
// (unpacked from family_options when it travels there).
struct SolverSection {
  const SolverFamily* family = nullptr;
  const pb::Message* options = nullptr;
  std::unique_ptr<pb::Message> unpacked;  ///< owns *options for family_options
};

StatusOr<SolverSection> FindSolver(const Submit& r) {
  const pb::Reflection* reflection = r.GetReflection();
  const pb::FieldDescriptor* field = reflection->GetOneofFieldDescriptor(r, SolverOneof());
  if (field == nullptr) return MissingSolver();
  SolverSection s;
  if (field != FamilyOptionsField()) {
    s.family = Registry().Find(field->name());
    if (s.family == nullptr) return InvalidArgumentError("solver: " + field->name() + " is not served by this server");
    s.options = &reflection->GetMessage(r, field);
    return s;
  }
  const pb::Any& any = r.family_options();
  const std::string type = any.type_url().substr(any.type_url().rfind('/') + 1);
  s.family = Registry().FindByTypeName(type);
  if (s.family == nullptr || type.empty()) {
    return InvalidArgumentError("family_options.type_url = \"" + any.type_url() +
                                "\" is not the options message of a solver family this server serves");
  }
  s.unpacked.reset(pb::MessageFactory::generated_factory()->GetPrototype(s.family->options_type())->New());
  if (!any.UnpackTo(s.unpacked.get())) {
    return InvalidArgumentError("family_options.value is not a valid " + type);
  }
  if (!s.unpacked->GetReflection()->GetUnknownFields(*s.unpacked).empty()) {
    return InvalidArgumentError(s.family->name() + ": unknown field " +
                                std::to_string(s.unpacked->GetReflection()->GetUnknownFields(*s.unpacked).field(0).number()) +
                                " (an option this server does not know; is the client newer?)");
  }
  s.options = s.unpacked.get();
  return s;
}

// SubmitJobRequest.scaling → core; UNSPECIFIED is none (also every record
// stored before the field existed).
StatusOr<FeatureScaling> ScalingToCore(Submit::Scaling s, const SolverFamily& family) {
  KLS_RETURN_IF_ERROR(CheckEnum(Submit::Scaling_IsValid(s), "scaling", s, "NONE, ZSCORE, MINMAX"));
  const FeatureScaling out = s == Submit::ZSCORE   ? FeatureScaling::kZScore
                             : s == Submit::MINMAX ? FeatureScaling::kMinMax
                                                    : FeatureScaling::kNone;
  if (out != FeatureScaling::kNone && !family.traits().uses_features) {
    return InvalidArgumentError("scaling = " + Submit::Scaling_Name(s) + " does not apply to " + family.name() +
                                " (its kernels come from social records, not feature columns)");
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

// The loss weight the options set explicitly, as "family.field = value"; empty when unset.
std::string ExplicitLossWeight(const SolverFamily& family, const pb::Message& options) {
  const std::string& name = family.traits().loss_weight_field;
  if (name.empty()) return "";
  const pb::FieldDescriptor* field = options.GetDescriptor()->FindFieldByName(name);
  if (field == nullptr || !options.GetReflection()->HasField(options, field)) return "";
  return family.name() + "." + name + " = " + Num(options.GetReflection()->GetDouble(options, field));
}

// cross_validation, warm_start and baseline_guard: pairwise (NPKL) families only.
Status PairwiseKnobsToCore(const Submit& r, const SolverSection& s, JobSpec* spec) {
  const bool pairwise = s.family->traits().pairwise;
  spec->delta_follows_c = s.family->traits().delta_follows_c && !r.graph().has_delta();
  if (r.has_cross_validation()) {
    if (!pairwise) {
      return InvalidArgumentError("cross_validation is set but method = " + spec->method +
                                  "; it chooses C / gamma for " + NamesAnd(IsPairwise) + " only");
    }
    if (const std::string set = ExplicitLossWeight(*s.family, *s.options); !set.empty()) {
      return InvalidArgumentError("cross_validation is set and so is " + set +
                                  "; leave it unset to have it chosen (kls submit --c auto)");
    }
    const kls::v1::CrossValidation& p = r.cross_validation();
    CrossValidationOptions o;
    if (p.has_folds()) o.folds = p.folds();
    if (p.grid_size() > 0) o.grid.assign(p.grid().begin(), p.grid().end());
    if (p.has_seed()) o.seed = p.seed();
    if (p.has_num_threads()) o.num_threads = p.num_threads();
    if (p.has_clusters()) o.clusters = p.clusters();
    KLS_RETURN_IF_ERROR(o.Validate());
    spec->cross_validation = o;
  }
  if (r.has_warm_start()) {
    if (!pairwise) {
      return InvalidArgumentError("warm_start is set but method = " + spec->method + "; it is for " +
                                  NamesAnd(IsPairwise) + " only");
    }
    KLS_RETURN_IF_ERROR(ValidateName("warm_start.kernel_name", r.warm_start().kernel_name()));
    if (r.warm_start().version() < 0) {
      return InvalidArgumentError("warm_start.version = " + std::to_string(r.warm_start().version()) +
                                  " must be >= 0 (0 = latest)");
    }
    spec->warm_start = JobSpec::WarmStartRef{r.warm_start().kernel_name(), r.warm_start().version()};
  }
  if (r.has_baseline_guard() && r.baseline_guard() && !pairwise) {
    return InvalidArgumentError("baseline_guard = true but method = " + spec->method + "; it scores " +
                                NamesAnd(IsPairwise) + " kernels only");
  }
  spec->baseline_guard = pairwise && (!r.has_baseline_guard() || r.baseline_guard());
  return OkStatus();
}

}  // namespace

StatusOr<JobSpec> SpecFromRequest(const Submit& r) {
  KLS_RETURN_IF_ERROR(ValidateGraphSpec(r.graph()));
  KLS_ASSIGN_OR_RETURN(SolverSection s, FindSolver(r));
  JobSpec spec;
  spec.method = s.family->name();
  spec.family = s.family;
  spec.connect = ConnectToCore(r.graph().connect());
  KLS_RETURN_IF_ERROR(s.family->ToSpec(*s.options, &spec));
  spec.graph = ToCoreGraph(r.graph(), spec.method, s.family->LossWeight(spec));
  spec.graph.num_threads = GraphThreads(*s.options);
  KLS_ASSIGN_OR_RETURN(spec.scaling, ScalingToCore(r.scaling(), *s.family));
  KLS_RETURN_IF_ERROR(PairwiseKnobsToCore(r, s, &spec));
  spec.scaling_unset = r.scaling() == Submit::SCALING_UNSPECIFIED;
  if (s.family->traits().meta) spec.request = std::make_shared<const Submit>(r);
  return spec;
}

// ---- Graph -----------------------------------------------------------------

GraphOptions ToCoreGraph(const kls::v1::GraphSpec& spec, const std::string& method, double c) {
  const SolverFamily* family = Registry().Find(method);
  GraphOptions g;
  g.k = spec.has_k() ? spec.k() : 5;
  switch (spec.weight()) {
    case kls::v1::GraphSpec::BINARY: g.weight = EdgeWeight::kBinary; break;
    case kls::v1::GraphSpec::GAUSSIAN: g.weight = EdgeWeight::kGaussian; break;
    default: g.weight = family ? family->traits().default_weight : EdgeWeight::kBinary; break;
  }
  g.sigma = spec.has_sigma() ? spec.sigma() : 0.0;
  if (spec.has_delta()) {
    g.delta = spec.delta();
  } else {
    g.delta = family && family->traits().delta_follows_c ? c / 2.0 : 0.0;
  }
  g.num_threads = 1;
  switch (spec.search()) {
    case kls::v1::GraphSpec::EXACT: g.knn_method = KnnMethod::kExact; break;
    case kls::v1::GraphSpec::IVF: g.knn_method = KnnMethod::kIvf; break;
    case kls::v1::GraphSpec::HNSW: g.knn_method = KnnMethod::kHnsw; break;
    default: g.knn_method = KnnMethod::kAuto; break;
  }
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
  KLS_RETURN_IF_ERROR(CheckEnum(kls::v1::GraphSpec::Search_IsValid(spec.search()), "graph.search", spec.search(),
                                "AUTO, EXACT, IVF, HNSW"));
  if (spec.search() == kls::v1::GraphSpec::HNSW && !HaveHnsw()) {
    return FailedPreconditionError("graph.search = HNSW: this server was built without FAISS; use IVF or AUTO");
  }
  return CheckEnum(kls::v1::GraphSpec::Connect_IsValid(spec.connect()), "graph.connect", spec.connect(),
                   "CONNECT_ERROR, GROW_K, MST");
}

// ---- Submit / stored spec --------------------------------------------------

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

  // Keep only what the worker needs to rebuild the spec: graph, scaling,
  // cross_validation, warm_start, baseline_guard and the solver oneof.
  kls::v1::SubmitJobRequest stored;
  if (request.has_graph()) *stored.mutable_graph() = request.graph();
  stored.set_scaling(request.scaling());
  if (request.has_cross_validation()) *stored.mutable_cross_validation() = request.cross_validation();
  if (request.has_warm_start()) *stored.mutable_warm_start() = request.warm_start();
  if (request.has_baseline_guard()) stored.set_baseline_guard(request.baseline_guard());
  const pb::FieldDescriptor* solver = request.GetReflection()->GetOneofFieldDescriptor(request, SolverOneof());
  stored.GetReflection()->MutableMessage(&stored, solver)->CopyFrom(request.GetReflection()->GetMessage(request, solver));
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
  const SolverFamily* family = Registry().Find(method);
  if (family == nullptr) {
    return InvalidArgumentError("method = \"" + method + "\" is not one of " + Registry().Names());
  }
  kls::v1::SubmitJobRequest r;
  if (!options_json.empty()) {
    pbu::JsonParseOptions po;
    po.ignore_unknown_fields = false;
    auto st = pbu::JsonStringToMessage(options_json, &r, po);
    if (!st.ok()) return InvalidArgumentError("options_json is not valid: " + st.ToString());
  }
  // An options_json without a solver section means "all defaults" for
  // `method`, where every-field-unset is a valid request.
  if (r.solver_case() == kls::v1::SubmitJobRequest::SOLVER_NOT_SET && family->traits().all_defaults_valid) {
    const pb::Message& defaults = *pb::MessageFactory::generated_factory()->GetPrototype(family->options_type());
    const pb::FieldDescriptor* field = nullptr;
    const pb::OneofDescriptor* oneof = SolverOneof();
    for (int i = 0; i < oneof->field_count(); ++i)
      if (oneof->field(i)->message_type() == family->options_type()) field = oneof->field(i);
    if (field != nullptr) {
      r.GetReflection()->MutableMessage(&r, field)->CopyFrom(defaults);
    } else {
      r.mutable_family_options()->PackFrom(defaults);
    }
  }
  KLS_ASSIGN_OR_RETURN(JobSpec spec, SpecFromRequest(r));
  if (spec.method != method) {
    return InvalidArgumentError("options_json holds " + spec.method + " options but method = \"" + method + "\"");
  }
  return spec;
}

Status ValidateJobSpecForDataset(const JobSpec& spec, const store::DatasetRecord& dataset, store::Store* store) {
  if (spec.family->traits().pairwise) {
    if (dataset.num_constraints == 0) {
      return FailedPreconditionError("data set \"" + dataset.id + "\" has no pairwise constraints; " + spec.method +
                                     " learns from must-link / cannot-link pairs, upload some first");
    }
    KLS_RETURN_IF_ERROR(spec.graph.Validate(static_cast<int>(dataset.num_points)));
  }
  return spec.family->CheckDataset(spec, dataset, store);
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

namespace {

// progress_json → the kls.v1.Job it encodes (progress, termination,
// summary_json); false when it is empty or malformed.
bool ParseProgressJson(const std::string& progress_json, kls::v1::Job* partial) {
  if (progress_json.empty()) return false;
  pbu::JsonParseOptions po;
  po.ignore_unknown_fields = true;
  return pbu::JsonStringToMessage(progress_json, partial, po).ok();
}

}  // namespace

kls::v1::Job ToProtoJob(const store::JobRecord& r) {
  kls::v1::Job job;
  if (kls::v1::Job partial; ParseProgressJson(r.progress_json, &partial)) {
    *job.mutable_progress() = partial.progress();
    job.set_termination(partial.termination());
    job.set_summary_json(WithoutConvergence(partial.summary_json()));
    if (auto c = CertificateFromSummary(job.summary_json())) *job.mutable_certificate() = *c;
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
  job.set_last_attempt_end(r.last_attempt_end);
  job.set_lost_attempts(r.lost_attempts);
  job.set_not_before_unix_ms(r.not_before_unix_ms);
  return job;
}

std::vector<ProgressEvent> StoredHistory(const store::JobRecord& record) {
  kls::v1::Job partial;
  if (!ParseProgressJson(record.progress_json, &partial)) return {};
  if (std::optional<std::vector<ProgressEvent>> stored = ConvergenceFromSummary(partial.summary_json())) {
    return *std::move(stored);
  }
  if (!partial.has_progress()) return {};
  const kls::v1::Progress& p = partial.progress();
  ProgressEvent e;
  e.iteration = p.iteration();
  e.max_iterations = p.max_iterations();
  e.objective = p.objective();
  e.primal_residual = p.primal_residual();
  e.dual_residual = p.dual_residual();
  if (p.has_gap()) e.gap = p.gap();
  if (p.has_step()) e.step = p.step();
  e.elapsed_seconds = p.elapsed_seconds();
  return {e};
}

void ToProto(const ProgressEvent& e, kls::v1::Progress* p) {
  auto finite = [](double v) { return std::isfinite(v) ? v : 0.0; };
  p->set_iteration(e.iteration);
  p->set_max_iterations(e.max_iterations);
  p->set_objective(finite(e.objective));
  p->set_primal_residual(finite(e.primal_residual));
  p->set_dual_residual(finite(e.dual_residual));
  p->set_elapsed_seconds(finite(e.elapsed_seconds));
  if (std::isfinite(e.gap)) p->set_gap(e.gap);
  if (std::isfinite(e.step)) p->set_step(e.step);
}

std::string ProgressJson(const ProgressEvent& e, const std::string& termination, const std::string& summary_json) {
  kls::v1::Job partial;
  // JSON has no NaN/Inf; a non-finite value (e.g. a residual a solver does not
  // define) is reported as 0.
  ToProto(e, partial.mutable_progress());
  partial.set_termination(termination);
  partial.set_summary_json(summary_json);
  std::string out;
  if (!pbu::MessageToJsonString(partial, &out, PrintOptions()).ok()) return "{}";
  return out;
}

std::optional<kls::v1::Certificate> CertificateFromSummary(const std::string& summary_json) {
  if (summary_json.empty()) return std::nullopt;
  pb::Struct summary;
  if (!pbu::JsonStringToMessage(summary_json, &summary).ok()) return std::nullopt;
  const auto it = summary.fields().find("certificate");
  if (it == summary.fields().end() || !it->second.has_struct_value()) return std::nullopt;
  std::string json;
  if (!pbu::MessageToJsonString(it->second.struct_value(), &json).ok()) return std::nullopt;
  kls::v1::Certificate c;
  pbu::JsonParseOptions po;
  po.ignore_unknown_fields = true;
  if (!pbu::JsonStringToMessage(json, &c, po).ok()) return std::nullopt;
  return c;
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

std::string KernelSummaryJson(const std::string& method, const SolveReport& stats, double primal_residual,
                              double dual_residual, double seconds, const std::string& notes) {
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
  out += notes;
  out += "}";
  return out;
}

}  // namespace kls::server
