// auto: the server picks the kernel (issue 40; core/npkl/auto_select.h),
// options kls.v1.AutoOptions (proto/kls/v1/families/auto.proto), sent in
// SubmitJobRequest.family_options. A Traits::meta family: it makes each
// candidate's spec from the job's own request (SpecFromRequest with the
// candidate's options and scaling), cross-validates them all on the same folds
// (the families through PairwiseLearner, the plain kernels through
// PlainKernelCandidate, the graph's diffusion kernel through
// DiffusionKernelCandidate on the BCDNPKL candidate's graph — the job's graph
// options, binary weights unless set), then runs the winner through RunSolverJob — whose
// output (kernel, attachments, certificate, summary) it returns with the
// leaderboard added — or stores the winning plain kernel itself.
//
// Checkpoints ("auto/1"): after every candidate, the leaderboard so far; after
// the refinement of the winner's value (core/npkl/auto_select.h), the
// leaderboard with the refinement; during the winner's learn, both plus that
// learn's own checkpoint, so a resumed job neither scores a finished
// candidate again, nor re-runs a finished refinement (one killed during it is
// run again: one value × the folds), nor restarts the learn. The winner is
// learned at the refined value when the refinement chose it.
#include <algorithm>
#include <cmath>
#include <optional>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <string>
#include <vector>

#include "core/data/feature_scaling.h"
#include "core/eval/baselines.h"
#include "core/npkl/auto_select.h"
#include "core/serving/kernel_servable.h"
#include "kls/v1/families/auto.pb.h"
#include "kls/v1/jobs.pb.h"
#include "server/jobs/families/family_util.h"
#include "server/jobs/families/npkl_options.h"
#include "server/jobs/proto_convert.h"
#include "server/jobs/solver_dispatch.h"
#include "server/jobs/solver_family.h"

namespace kls::server {
namespace {

namespace pb = google::protobuf;
using families::Num;
using Submit = kls::v1::SubmitJobRequest;

constexpr const char* kCheckpointFormat = "auto/1";

struct AutoJobOptions {
  AutoSelectOptions select;
  std::vector<double> grid = {0.1, 1.0, 10.0};
  std::vector<std::string> candidates;  ///< empty = all
  bool Wants(const std::string& name) const {
    return candidates.empty() || std::find(candidates.begin(), candidates.end(), name) != candidates.end();
  }
};

// ---- candidate specs ----------------------------------------------------------

// The job's request with `choice`'s options (loss, and the loss weight when
// set), `scaling`, and no baseline guard (the leaderboard has the baselines).
StatusOr<JobSpec> CandidateSpec(const Submit& base, const AutoFamilyChoice& choice, FeatureScaling scaling,
                                std::optional<double> weight) {
  const SolverFamily* family = FamilyRegistry::Global().Find(choice.family);
  if (family == nullptr) return InternalError(std::string("auto: family ") + choice.family + " is not registered");
  Submit r = base;
  const pb::OneofDescriptor* oneof = Submit::descriptor()->FindOneofByName("solver");
  const pb::FieldDescriptor* field = nullptr;
  for (int i = 0; oneof != nullptr && i < oneof->field_count(); ++i)
    if (oneof->field(i)->message_type() == family->options_type()) field = oneof->field(i);
  if (field == nullptr) return InternalError(std::string("auto: ") + choice.family + " is not in the solver oneof");
  pb::Message* options = r.GetReflection()->MutableMessage(&r, field);
  options->Clear();
  const pb::Reflection* ref = options->GetReflection();
  if (choice.has_loss) {
    ref->SetEnumValue(options, options->GetDescriptor()->FindFieldByName("loss"), families::LossToProto(choice.loss));
  }
  if (weight) {
    const pb::FieldDescriptor* w = options->GetDescriptor()->FindFieldByName(family->traits().loss_weight_field);
    if (w == nullptr) return InternalError(std::string("auto: ") + choice.family + " has no loss weight field");
    ref->SetDouble(options, w, *weight);
  }
  r.set_scaling(scaling == FeatureScaling::kZScore  ? Submit::ZSCORE
                : scaling == FeatureScaling::kMinMax ? Submit::MINMAX
                                                     : Submit::NONE);
  r.set_baseline_guard(false);
  r.clear_cross_validation();
  r.clear_warm_start();
  StatusOr<JobSpec> spec = SpecFromRequest(r);
  if (!spec.ok()) return Status(spec.status().code(), std::string("auto, candidate ") + choice.name + ": " +
                                                          spec.status().message());
  return spec;
}

std::vector<FeatureScaling> Scalings(const JobSpec& spec) {
  if (spec.scaling_unset) return {FeatureScaling::kNone, FeatureScaling::kZScore};
  return {spec.scaling};
}

// The request the spec was made from (SpecFromRequest keeps it for meta families).
StatusOr<const Submit*> RequestOf(const JobSpec& spec) {
  const auto* r = dynamic_cast<const Submit*>(spec.request.get());
  if (r == nullptr) return InternalError("auto: the job spec carries no SubmitJobRequest");
  return r;
}

// The candidate's learner: the grid's Laplacians now (PairwiseLearner), and,
// when δ follows C, one more on first use of a value off the grid (the
// refinement's midpoint, core/npkl/auto_select.h). `data` outlives the learner.
StatusOr<LearnKernelFn> CandidateLearner(const JobSpec& spec, std::shared_ptr<const store::StoredDataset> data,
                                         const std::vector<double>& grid, bool single_thread) {
  KLS_ASSIGN_OR_RETURN(LearnKernelFn on_grid, PairwiseLearner(spec, *data, grid, single_thread, nullptr));
  if (!spec.delta_follows_c) return on_grid;  // one Laplacian serves every value
  auto off_grid = std::make_shared<std::map<double, LearnKernelFn>>();
  auto mutex = std::make_shared<std::mutex>();
  return LearnKernelFn([spec, data, grid, single_thread, on_grid, off_grid, mutex](
                           const PairwiseConstraints& train, double value,
                           const SolveControl& c) -> StatusOr<LearnedKernel> {
    if (std::find(grid.begin(), grid.end(), value) != grid.end()) return on_grid(train, value, c);
    LearnKernelFn learn;
    {
      std::lock_guard<std::mutex> lock(*mutex);
      auto it = off_grid->find(value);
      if (it == off_grid->end()) {
        KLS_ASSIGN_OR_RETURN(LearnKernelFn l, PairwiseLearner(spec, *data, {value}, single_thread, nullptr));
        it = off_grid->emplace(value, std::move(l)).first;
      }
      learn = it->second;
    }
    return learn(train, value, c);
  });
}

// The graph the diffusion candidate runs on: the BCDNPKL candidate's (the
// job's graph options on these features; its δ only scales exp(−βΔ), which
// DiffusionBasis removes). `data` is the data set under `scaling`.
StatusOr<Eigen::SparseMatrix<double>> GraphLaplacian(const Submit& request,
                                                     const std::shared_ptr<const store::StoredDataset>& data,
                                                     FeatureScaling scaling) {
  KLS_ASSIGN_OR_RETURN(JobSpec spec, CandidateSpec(request, kAutoFamilies[1], scaling, std::nullopt));
  return PairwiseLaplacian(spec, *data, std::nullopt);
}

// ---- checkpoint ---------------------------------------------------------------

nlohmann::json EntryJson(const AutoEntry& e) {
  return {{"name", e.name},   {"scaling", e.scaling}, {"baseline", e.baseline}, {"status", e.status},
          {"error", e.error}, {"value", e.value},     {"fold_scores", e.fold_scores}, {"mean", e.mean},
          {"sd", e.sd},       {"grid", e.grid},       {"grid_means", e.grid_means},   {"seconds", e.seconds},
          {"screen_means", e.screen_means}, {"screen_seconds", e.screen_seconds}};
}

AutoEntry EntryFrom(const nlohmann::json& j) {
  AutoEntry e;
  e.name = j.at("name").get<std::string>();
  e.scaling = j.at("scaling").get<std::string>();
  e.baseline = j.at("baseline").get<bool>();
  e.status = j.at("status").get<std::string>();
  e.error = j.at("error").get<std::string>();
  e.value = j.at("value").get<double>();
  e.fold_scores = j.at("fold_scores").get<std::vector<double>>();
  e.mean = j.at("mean").get<double>();
  e.sd = j.at("sd").get<double>();
  e.grid = j.at("grid").get<std::vector<double>>();
  e.grid_means = j.at("grid_means").get<std::vector<double>>();
  e.seconds = j.at("seconds").get<double>();
  // Absent from checkpoints written before the screening: their entries are restored as finished.
  e.screen_means = j.value("screen_means", std::vector<double>{});
  e.screen_seconds = j.value("screen_seconds", 0.0);
  return e;
}

void PutSized(std::string* out, const std::string& s) {
  const uint64_t n = s.size();
  out->append(reinterpret_cast<const char*>(&n), sizeof(n));
  out->append(s);
}

bool GetSized(const std::string& in, size_t* at, std::string* s) {
  uint64_t n = 0;
  if (in.size() - *at < sizeof(n)) return false;
  std::memcpy(&n, in.data() + *at, sizeof(n));
  *at += sizeof(n);
  if (in.size() - *at < n) return false;
  *s = in.substr(*at, n);
  *at += n;
  return true;
}

nlohmann::json RefineJson(const AutoRefinement& f) {
  return {{"key", f.key},     {"status", f.status}, {"error", f.error}, {"from", f.from},
          {"value", f.value}, {"fold_scores", f.fold_scores},     {"mean", f.mean},
          {"sd", f.sd},       {"chosen", f.chosen}, {"seconds", f.seconds}};
}

AutoRefinement RefineFrom(const nlohmann::json& j) {
  AutoRefinement f;
  f.key = j.at("key").get<std::string>();
  f.status = j.at("status").get<std::string>();
  f.error = j.at("error").get<std::string>();
  f.from = j.at("from").get<double>();
  f.value = j.at("value").get<double>();
  f.fold_scores = j.at("fold_scores").get<std::vector<double>>();
  f.mean = j.at("mean").get<double>();
  f.sd = j.at("sd").get<double>();
  f.chosen = j.at("chosen").get<bool>();
  f.seconds = j.at("seconds").get<double>();
  return f;
}

// [leaderboard JSON][inner solver][inner iteration][inner bytes], each
// length-prefixed; the leaderboard is {"entries":[…],"refine":{…}} (the
// refinement once it has run), or the entries' array alone (before the refinement existed).
std::string Encode(const AutoSelectResult& r, const Checkpoint* inner) {
  nlohmann::json j = {{"entries", nlohmann::json::array()}};
  for (const AutoEntry& e : r.entries) j["entries"].push_back(EntryJson(e));
  if (!r.refine.status.empty()) j["refine"] = RefineJson(r.refine);
  std::string out;
  PutSized(&out, j.dump());
  PutSized(&out, inner ? inner->solver : "");
  PutSized(&out, inner ? std::to_string(inner->iteration) : "0");
  PutSized(&out, inner ? inner->bytes : "");
  return out;
}

// False for a checkpoint that cannot be read (the job then starts afresh).
bool Decode(const std::string& bytes, std::vector<AutoEntry>* entries, std::optional<AutoRefinement>* refine,
            std::shared_ptr<const Checkpoint>* inner) {
  size_t at = 0;
  std::string json, solver, iteration, inner_bytes;
  if (!GetSized(bytes, &at, &json) || !GetSized(bytes, &at, &solver) || !GetSized(bytes, &at, &iteration) ||
      !GetSized(bytes, &at, &inner_bytes)) {
    return false;
  }
  try {
    const nlohmann::json board = nlohmann::json::parse(json);
    for (const nlohmann::json& e : board.is_array() ? board : board.at("entries")) entries->push_back(EntryFrom(e));
    if (board.is_object() && board.contains("refine")) *refine = RefineFrom(board.at("refine"));
    if (!solver.empty()) {
      auto c = std::make_shared<Checkpoint>();
      c->solver = solver;
      c->iteration = std::stoi(iteration);
      c->bytes = std::move(inner_bytes);
      *inner = std::move(c);
    }
  } catch (const std::exception&) {
    entries->clear();
    refine->reset();
    return false;
  }
  return true;
}

// ---- the summary --------------------------------------------------------------

std::string Describe(const AutoEntry& e, double value) {
  std::string what = e.name + (e.scaling == "none" ? " on raw features" : " on " + e.scaling + " features");
  if (e.name == "rbf") what += " (width " + Num(value) + " x median)";
  if (e.name == "diffusion") what += " (beta " + Num(value) + " x 1/lambda)";
  if (!e.baseline) what += std::string(e.name == "kl_admm" ? " (gamma " : " (C ") + Num(value) + ")";
  return what;
}
std::string Describe(const AutoEntry& e) { return Describe(e, e.value); }

std::string Sentence(const AutoSelectResult& r) {
  const AutoEntry& best = r.entries[r.best];
  int scored = 0, screened = 0, plain = -1, learned = -1;
  for (size_t i = 0; i < r.entries.size(); ++i) {
    const AutoEntry& e = r.entries[i];
    screened += e.status == "screened" ? 1 : 0;
    if (e.status != "scored") continue;
    ++scored;
    int& slot = e.baseline ? plain : learned;
    if (static_cast<int>(i) != r.best && (slot < 0 || e.mean > r.entries[slot].mean)) slot = static_cast<int>(i);
  }
  std::string s = "auto chose " + Describe(best, r.ChosenValue()) + ": held-out score " +
                  Num(r.refine.chosen ? r.refine.mean : best.mean) + " +- " +
                  Num(r.refine.chosen ? r.refine.sd : best.sd) + " over " + std::to_string(r.chosen_folds) + (r.chosen_folds == 1 ? " fold" : " folds");
  if (r.refine.chosen) s += " (refined from " + Num(r.refine.from) + ", " + Num(best.mean) + ")";
  const int other = best.baseline ? learned : plain;
  if (other >= 0) {
    const AutoEntry& o = r.entries[other];
    s += std::string("; the best ") + (best.baseline ? "learned kernel, " : "plain kernel, ") + Describe(o) + ", " +
         Num(o.mean);
    if (!best.baseline && o.mean > best.mean) {
      s += " (higher by less than the noise margin " + Num(r.margin) + " of " + std::to_string(r.held_out_pairs) +
           " held-out pairs, so the learned kernel is kept)";
    }
  }
  s += "; " + std::to_string(scored) + " of " + std::to_string(r.entries.size()) + " candidates scored";
  if (r.screening) s += " on all folds, " + std::to_string(screened) + " screened out on fold 0";
  if (r.chosen_folds == 1) s += " (the budget left no learned kernel scored on all folds: chosen on fold 0)";
  s += " in " + Num(r.seconds) + " s";
  if (r.budget_reached) s += " (the budget of " + Num(r.budget_seconds) + " s stopped the rest)";
  if (best.baseline) s += "; no learned kernel beat the plain one on these pairs, so the plain kernel is stored";
  return s;
}

// ---- the family -------------------------------------------------------------------

class AutoFamily : public TypedFamily<kls::v1::AutoOptions, AutoJobOptions> {
 public:
  AutoFamily() : TypedFamily("auto", [] {
    Traits t;
    t.meta = true;
    t.attachments = {kLinearMapAttachment};
    return t;
  }()) {}

  Status CheckDataset(const JobSpec& spec, const store::DatasetRecord& d, store::Store* store) const override {
    const AutoJobOptions& o = spec.Options<AutoJobOptions>();
    if (d.num_constraints == 0) {
      return FailedPreconditionError("data set \"" + d.id + "\" has no pairwise constraints; auto learns from "
                                     "must-link / cannot-link pairs, upload some first");
    }
    if (o.select.clusters > d.num_points) {
      return InvalidArgumentError("auto.clusters = " + std::to_string(o.select.clusters) + " exceeds the data set's " +
                                  std::to_string(d.num_points) + " points");
    }
    // Every candidate's spec is the request a user could have sent for it:
    // what it cannot do with this data set fails the submit, not the job.
    KLS_ASSIGN_OR_RETURN(const Submit* request, RequestOf(spec));
    for (FeatureScaling s : Scalings(spec)) {
      for (const AutoFamilyChoice& f : kAutoFamilies) {
        if (!o.Wants(f.name)) continue;
        KLS_ASSIGN_OR_RETURN(JobSpec c, CandidateSpec(*request, f, s, std::nullopt));
        KLS_RETURN_IF_ERROR(ValidateJobSpecForDataset(c, d, store));
      }
    }
    return OkStatus();
  }

 protected:
  StatusOr<AutoJobOptions> Convert(const kls::v1::AutoOptions& p, const JobSpec&) const override {
    AutoJobOptions o;
    o.select.reference_multiple = kAutoReferenceMultiple;
    if (p.has_max_seconds()) {
      o.select.max_seconds = p.max_seconds();
      o.select.reference_multiple = 0.0;
    }
    if (p.has_folds()) o.select.folds = p.folds();
    if (p.has_clusters()) o.select.clusters = p.clusters();
    if (p.has_seed()) o.select.seed = p.seed();
    if (p.has_num_threads()) o.select.num_threads = p.num_threads();
    KLS_RETURN_IF_ERROR(o.select.Validate());
    if (p.grid_size() > 0) {
      o.grid.assign(p.grid().begin(), p.grid().end());
      CrossValidationOptions cv;  // the same rules as cross_validation.grid
      cv.grid = o.grid;
      if (Status s = cv.Validate(); !s.ok()) {
        return InvalidArgumentError("auto." + s.message().substr(std::string("cross_validation.").size()));
      }
    }
    for (int i = 0; i < p.candidates_size(); ++i) {
      const std::string& c = p.candidates(i);
      bool known = std::find(std::begin(kAutoPlainKernels), std::end(kAutoPlainKernels), c) != std::end(kAutoPlainKernels);
      for (const AutoFamilyChoice& f : kAutoFamilies) known = known || c == f.name;
      if (!known) {
        std::string names;
        for (const AutoFamilyChoice& f : kAutoFamilies) names += std::string(names.empty() ? "" : ", ") + f.name;
        for (const char* n : kAutoPlainKernels) names += std::string(", ") + n;
        return InvalidArgumentError("auto.candidates[" + std::to_string(i) + "] = \"" + c + "\" is not one of " +
                                    names);
      }
      o.candidates.push_back(c);
    }
    return o;
  }

  StatusOr<JobOutput> RunTyped(const AutoJobOptions& o, const JobSpec& spec, const store::StoredDataset& data,
                               store::Store* store, const SolveControl& control) const override {
    if (data.constraints.size() == 0) {
      return FailedPreconditionError("the data set has no pairwise constraints; auto learns from must-link / "
                                     "cannot-link pairs, upload some first");
    }
    KLS_ASSIGN_OR_RETURN(const Submit* request, RequestOf(spec));
    // The data set under each scaling tried (the raw one is not copied).
    struct Scaled {
      FeatureScaling scaling;
      std::optional<FeatureScaler> scaler;
      std::shared_ptr<const store::StoredDataset> data;
      std::shared_ptr<const Eigen::MatrixXd> features;
    };
    std::vector<Scaled> scaled;
    for (FeatureScaling s : Scalings(spec)) {
      Scaled v{s, std::nullopt, nullptr, nullptr};
      if (s == FeatureScaling::kNone) {
        v.data = std::shared_ptr<const store::StoredDataset>(&data, [](const store::StoredDataset*) {});
      } else {
        KLS_ASSIGN_OR_RETURN(v.scaler, FeatureScaler::Fit(data.data.features, s));
        auto copy = std::make_shared<store::StoredDataset>(data);
        KLS_ASSIGN_OR_RETURN(copy->data.features, v.scaler->Apply(data.data.features));
        v.data = std::move(copy);
      }
      v.features = std::shared_ptr<const Eigen::MatrixXd>(v.data, &v.data->data.features);
      scaled.push_back(std::move(v));
    }

    // The candidates, in AutoOrder (the budget's reference first).
    std::vector<AutoCandidate> candidates;
    for (const AutoSlot& slot : AutoOrder(static_cast<int>(scaled.size()))) {
      const Scaled& s = scaled[slot.scaling];
      const std::string scaling = FeatureScalingName(s.scaling);
      if (slot.plain >= 0) {
        const std::string name = kAutoPlainKernels[slot.plain];
        if (!o.Wants(name)) continue;
        if (name == "diffusion") {
          if (data.data.features.rows() > kDiffusionMaxPoints) continue;  // core/eval/baselines.h
          candidates.push_back(DiffusionKernelCandidate(
              [request, data = s.data, scaling = s.scaling] { return GraphLaplacian(*request, data, scaling); },
              scaling));
        } else {
          candidates.push_back(PlainKernelCandidate(s.features, name, scaling, o.select.clusters));
        }
        continue;
      }
      const AutoFamilyChoice& f = kAutoFamilies[slot.family];
      if (!o.Wants(f.name)) continue;
      KLS_ASSIGN_OR_RETURN(JobSpec c, CandidateSpec(*request, f, s.scaling, std::nullopt));
      KLS_ASSIGN_OR_RETURN(LearnKernelFn learn, CandidateLearner(c, s.data, o.grid, o.select.num_threads != 1));
      candidates.push_back(AutoCandidate{f.name, scaling, false, o.grid, std::move(learn)});
    }

    // Resume: the leaderboard so far, and the winner's learn if it had begun.
    std::vector<AutoEntry> done;
    std::optional<AutoRefinement> done_refine;
    std::shared_ptr<const Checkpoint> inner_resume;
    if (const Checkpoint* cp = control.ResumeFrom(kCheckpointFormat)) {
      if (!Decode(cp->bytes, &done, &done_refine, &inner_resume)) {
        done.clear();
        done_refine.reset();
        inner_resume.reset();
      }
    }
    const Stopwatch watch;
    AutoSelectOptions select = o.select;
    // One line per candidate evaluated (restored ones are not): a resumed job's
    // log shows which candidates ran in which attempt (tests/e2e/auto_kill_test.cc).
    // A leader's other folds (round 2) log another line, which the kill test's
    // count of starts does not match.
    select.on_start = [](const std::string& key, int round) {
      if (round == 1) {
        spdlog::info("auto: candidate {} started", key);
      } else {
        spdlog::info("auto: leader {} continues on the other folds", key);
      }
    };
    auto after_each = [&](const AutoSelectResult& r) {
      ProgressEvent e;
      e.iteration = r.steps;  // candidates screened, then leaders finished
      e.max_iterations = static_cast<int>(candidates.size()) * (select.screening ? 2 : 1);
      e.objective = r.best >= 0 ? r.entries[r.best].mean : 0.0;
      e.elapsed_seconds = watch.Seconds();
      control.Report(e);
      if (control.checkpoint) control.checkpoint(Checkpoint{kCheckpointFormat, e.iteration, Encode(r, nullptr)});
    };
    KLS_ASSIGN_OR_RETURN(AutoSelectResult r, AutoSelect(data.constraints, candidates, select, control, done, after_each,
                                                        done_refine ? &*done_refine : nullptr));
    const AutoEntry& best = r.entries[r.best];
    const Scaled* s = &scaled.front();
    for (const Scaled& v : scaled)
      if (best.scaling == FeatureScalingName(v.scaling)) s = &v;

    JobOutput out;
    if (best.baseline && best.name == "diffusion") {
      KLS_ASSIGN_OR_RETURN(Eigen::SparseMatrix<double> l, GraphLaplacian(*request, s->data, s->scaling));
      KLS_ASSIGN_OR_RETURN(out.kernel, DiffusionPlainKernel(l, best.value));
    } else if (best.baseline) {
      KLS_ASSIGN_OR_RETURN(out.kernel, PlainKernel(*s->features, best.name, best.value));
    }
    if (best.baseline) {
      out.stats.termination = Termination::kConverged;
      if (s->scaler) out.attachments.push_back({kFeatureScalingAttachment, s->scaler->Serialize()});
      if (best.name == "linear") {  // K = X Xᵀ: feature queries map rows exactly, x ↦ scale(x) · I
        out.attachments.push_back(
            {kLinearMapAttachment, SerializeLinearMap(Eigen::MatrixXd::Identity(s->features->cols(), s->features->cols()))});
      }
      out.summary_notes = ",\"scaling\":\"" + best.scaling + "\",\"certificate\":" + out.certificate.Json();
    } else {
      const AutoFamilyChoice* f = &kAutoFamilies[0];
      for (const AutoFamilyChoice& c : kAutoFamilies)
        if (best.name == c.name) f = &c;
      KLS_ASSIGN_OR_RETURN(JobSpec winner, CandidateSpec(*request, *f, s->scaling, r.ChosenValue()));
      // The winner's own checkpoints travel inside auto's, with the leaderboard.
      SolveControl learn = control;
      learn.resume_from = inner_resume;
      learn.progress = control.progress;
      if (control.checkpoint) {
        learn.checkpoint = [&control, board = r](const Checkpoint& c) {
          control.checkpoint(Checkpoint{kCheckpointFormat, c.iteration, Encode(board, &c)});
        };
      }
      KLS_ASSIGN_OR_RETURN(out, RunSolverJob(winner, data, store, learn));
      out.stats.setup_seconds += r.seconds;
    }
    out.summary_notes += ",\"auto\":" + r.Json() + ",\"auto_note\":" + nlohmann::json(Sentence(r)).dump();
    return out;
  }
};

KLS_REGISTER_SOLVER_FAMILY(AutoFamily);

}  // namespace
}  // namespace kls::server
