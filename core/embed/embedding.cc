#include "core/embed/embedding.h"

#include <Eigen/Dense>
#include <Eigen/SVD>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <string>
#include <utility>

#include "core/common/checkpoint_codec.h"
#include "core/embed/knn_classifier.h"
#include "core/graph/knn.h"

namespace kls {
namespace {

// Orthonormal basis of the top-d left singular vectors of the centered factor.
Eigen::MatrixXd TopCenteredDirections(const Eigen::MatrixXd& v, int d) {
  Eigen::MatrixXd c = v.rowwise() - v.colwise().mean();
  Eigen::BDCSVD<Eigen::MatrixXd> svd(c, Eigen::ComputeThinU);
  int keep = 0;
  const Eigen::VectorXd& s = svd.singularValues();
  const double floor = s.size() > 0 ? 1e-12 * s[0] : 0.0;
  while (keep < std::min<int>(d, static_cast<int>(s.size())) && s[keep] > floor) ++keep;
  return svd.matrixU().leftCols(keep);
}

EmbeddingResult MakeResult(EmbeddingMinimaxResult inner, LearnedKernel kernel) {
  EmbeddingResult r;
  r.kernel = std::move(kernel);
  r.stats = std::move(inner.stats);  // with its certificate
  r.stationarity = inner.stationarity;
  r.quasi_newton_iterations = inner.quasi_newton_iterations;
  r.newton_steps = inner.newton_steps;
  r.cg_products = inner.cg_products;
  r.slack_weight = inner.slack_weight;
  r.dual = std::move(inner.alpha);
  return r;
}

StatusOr<LearnedKernel> KernelOf(const Eigen::MatrixXd& v, int n) {
  LearnedKernel::Embedding e = v.cols() > 0 ? LearnedKernel::Embedding(v) : LearnedKernel::Embedding::Zero(n, 1);
  return LearnedKernel::FromEmbedding(std::move(e));
}

EmbeddingMinimaxProblem DistanceProblem(const NeighborhoodGraph& g) {
  EmbeddingMinimaxProblem p;
  p.num_points = g.num_points;
  p.pair_i = g.edge_i;
  p.pair_j = g.edge_j;
  p.slack = EmbeddingMinimaxProblem::Slack::kSquare;
  p.target = g.squared_distance;
  return p;
}

StatusOr<EmbeddingResult> ColoredMvu(const ColoredMvuProblem& problem, const EmbeddingMinimaxOptions& options,
                                     const SolveControl& control) {
  KLS_RETURN_IF_ERROR(problem.Validate());
  const int n = problem.graph.num_points;
  EmbeddingMinimaxProblem p = DistanceProblem(problem.graph);
  // Y = F Fᵀ with F the class indicators of the labeled points; H Y H is
  // applied by the dual operator (A = HYH + Σ α T, thesis below (3.25)).
  const int classes = 1 + *std::max_element(problem.labels.begin(), problem.labels.end());
  p.prior.factor = Eigen::MatrixXd::Zero(n, std::max(classes, 0));
  for (int i = 0; i < n; ++i)
    if (problem.labels[i] >= 0) p.prior.factor(i, problem.labels[i]) = 1.0;
  p.prior.factor_scale = Eigen::VectorXd::Ones(p.prior.factor.cols());
  KLS_ASSIGN_OR_RETURN(EmbeddingMinimaxResult inner, SolveEmbeddingMinimax(p, options, control));
  KLS_ASSIGN_OR_RETURN(LearnedKernel k, KernelOf(inner.v, n));
  return MakeResult(std::move(inner), std::move(k));
}

double MveObjectiveImpl(const Eigen::MatrixXd& v, int d, const NeighborhoodGraph& g, double c) {
  // λ_i(K) = ‖v_i‖² for V's orthogonal columns (descending); the centered K
  // has no negative eigenvalues, so Σ_{i>d} runs over the remaining columns.
  double f = 0.0;
  for (int col = 0; col < v.cols(); ++col) f += (col < d ? 1.0 : -1.0) * v.col(col).squaredNorm();
  double penalty = 0.0;
  for (int e = 0; e < g.num_edges(); ++e) {
    const double xi = g.squared_distance[e] - (v.row(g.edge_i[e]) - v.row(g.edge_j[e])).squaredNorm();
    penalty += xi * xi;
  }
  return f - 0.5 * c * penalty;
}

// ---- MVE checkpoints (SolveControl::checkpoint / resume_from) ---------------
//
// Taken after a K₀ update that does not end the run (the outer
// minorize–maximize iteration of [SJ07]); Checkpoint::iteration counts the
// inner iterations so far, as stats.iterations and the progress events do.
// After the common prefix (core/common/checkpoint_codec.h; the history has
// one entry per K₀ update): the outer iterate — U_d of the next K₀, the dual
// warm start α, the kept solve (its n × r factor V of K, α and certificate),
// its basis and F — the outer bookkeeping (F and slack per update, the last
// relative change of F, ‖ΔU_d U_dᵀ‖, confirming), the counters, and the
// L-BFGS curvature memory carried to the next solve, so a resumed run is
// bit-identical.
constexpr char kMveCheckpointTag[] = "mve/1";
constexpr uint32_t kMveCheckpointMagic = 0x4d564531;  // "MVE1"
constexpr uint32_t kMveCheckpointVersion = 1;

void AddInts(Fingerprint* fp, const std::vector<int>& v) {
  fp->AddInt(static_cast<int64_t>(v.size()));
  for (int x : v) fp->AddInt(x);
}

// The problem and every option that shapes the iterates (not max_outer_iterations,
// inner.max_iterations is kept: it bounds each inner solve).
uint64_t MveFingerprint(const MveProblem& problem, const MveOptions& o) {
  Fingerprint fp;
  fp.AddString(kMveCheckpointTag).AddInt(problem.graph.num_points);
  AddInts(&fp, problem.graph.edge_i);
  AddInts(&fp, problem.graph.edge_j);
  fp.AddDense(problem.graph.squared_distance).AddDense(Eigen::MatrixXd(problem.initial));
  const EmbeddingMinimaxOptions& i = o.inner;
  fp.AddInt(static_cast<int>(i.method)).AddDouble(i.c).AddInt(i.relative_slack).AddDouble(i.b);
  fp.AddInt(i.max_iterations).AddDouble(i.tolerance).AddDouble(i.initial_eta).AddInt(i.max_backtracks);
  fp.AddInt(i.dense_threshold).AddDouble(i.lanczos_tolerance);
  fp.AddInt(o.dims).AddDouble(o.outer_tolerance).AddDouble(o.objective_tolerance).AddDouble(o.inexact_factor);
  fp.AddInt(o.reuse_curvature);
  return fp.value();
}

struct MveState {
  int outer = 0;  // K₀ updates done
  Eigen::MatrixXd u, kept_basis;
  Eigen::VectorXd alpha;
  EmbeddingMinimaxResult kept;
  double kept_objective = 0.0, last_relative_change = 0.0, change = 0.0, setup_seconds = 0.0;
  bool confirming = false;
  std::vector<double> objective, slack;
  int quasi_newton = 0, newton = 0;
  long long cg = 0;
};

void PutDoubles(ByteWriter* w, const std::vector<double>& v) {
  w->Put<uint64_t>(v.size());
  for (double x : v) w->Put<double>(x);
}

Status GetDoubles(ByteReader* r, uint64_t expected, std::vector<double>* v) {
  uint64_t count = 0;
  KLS_RETURN_IF_ERROR(r->Get(&count));
  if (count != expected) return DataLossError(r->what() + ": wrong number of entries");
  v->clear();
  for (uint64_t k = 0; k < count; ++k) {
    double x = 0.0;
    KLS_RETURN_IF_ERROR(r->Get(&x));
    v->push_back(x);
  }
  return OkStatus();
}

std::string EncodeMve(uint64_t fingerprint, int iteration, const MveState& s, const EmbeddingCurvatureMemory& memory) {
  ByteWriter w;
  PutCheckpointPrefix(&w, kMveCheckpointMagic, kMveCheckpointVersion, fingerprint, iteration, s.objective);
  w.Put<int32_t>(s.outer);
  w.PutMatrix(s.u);
  w.PutMatrix(s.kept_basis);
  w.PutVector(s.alpha);
  // The kept solve.
  const EmbeddingMinimaxResult& k = s.kept;
  w.PutMatrix(k.v);
  w.PutVector(k.alpha);
  w.Put<int32_t>(static_cast<int32_t>(k.stats.termination));
  w.Put<int32_t>(k.stats.iterations);
  PutDoubles(&w, k.stats.objective_history);
  w.Put<double>(k.stats.final_objective);
  w.Put<double>(k.primal);
  w.Put<double>(k.dual);
  w.Put<double>(k.stats.certificate.gap);
  w.Put<double>(k.stationarity);
  w.Put<int32_t>(k.quasi_newton_iterations);
  w.Put<int32_t>(k.newton_steps);
  w.Put<int64_t>(k.cg_products);
  w.Put<double>(k.slack_weight);
  // The outer bookkeeping.
  w.Put<double>(s.kept_objective);
  w.Put<double>(s.last_relative_change);
  w.Put<double>(s.change);
  w.Put<double>(s.setup_seconds);
  w.Put<uint8_t>(s.confirming ? 1 : 0);
  PutDoubles(&w, s.slack);
  w.Put<int32_t>(s.quasi_newton);
  w.Put<int32_t>(s.newton);
  w.Put<int64_t>(s.cg);
  memory.Save(&w);
  return w.Take();
}

// Any error means "not this run's checkpoint": the caller starts afresh.
Status DecodeMve(const Checkpoint& c, uint64_t fingerprint, int n, int d, int num_duals, MveState* s,
                 EmbeddingCurvatureMemory* memory) {
  ByteReader in(c.bytes, "mve checkpoint");
  KLS_RETURN_IF_ERROR(GetCheckpointPrefixWithHistoryBound(&in, c, kMveCheckpointMagic, kMveCheckpointVersion,
                                                          fingerprint, &s->objective, 1u << 20));
  int32_t outer = 0, termination = 0, iterations = 0, qn = 0, newton = 0, s_qn = 0, s_newton = 0;
  KLS_RETURN_IF_ERROR(in.Get(&outer));
  if (outer < 1 || static_cast<uint64_t>(outer) != s->objective.size()) {
    return DataLossError(in.what() + ": wrong number of K₀ updates");
  }
  s->outer = outer;
  KLS_RETURN_IF_ERROR(in.GetMatrix(&s->u));
  KLS_RETURN_IF_ERROR(in.GetMatrix(&s->kept_basis));
  KLS_RETURN_IF_ERROR(in.GetVector(&s->alpha));
  EmbeddingMinimaxResult& k = s->kept;
  KLS_RETURN_IF_ERROR(in.GetMatrix(&k.v));
  KLS_RETURN_IF_ERROR(in.GetVector(&k.alpha));
  KLS_RETURN_IF_ERROR(in.Get(&termination));
  KLS_RETURN_IF_ERROR(in.Get(&iterations));
  uint64_t history = 0;
  {
    // The kept solve's history: P per iterate, its start included.
    KLS_RETURN_IF_ERROR(in.Get(&history));
    if (history != static_cast<uint64_t>(iterations) + 1) return DataLossError(in.what() + ": bad inner history");
    for (uint64_t j = 0; j < history; ++j) {
      double x = 0.0;
      KLS_RETURN_IF_ERROR(in.Get(&x));
      k.stats.objective_history.push_back(x);
    }
  }
  KLS_RETURN_IF_ERROR(in.Get(&k.stats.final_objective));
  KLS_RETURN_IF_ERROR(in.Get(&k.primal));
  KLS_RETURN_IF_ERROR(in.Get(&k.dual));
  KLS_RETURN_IF_ERROR(in.Get(&k.stats.certificate.gap));
  k.stats.certificate.lower_bound = k.dual;
  KLS_RETURN_IF_ERROR(in.Get(&k.stationarity));
  KLS_RETURN_IF_ERROR(in.Get(&qn));
  KLS_RETURN_IF_ERROR(in.Get(&newton));
  int64_t cg = 0;
  KLS_RETURN_IF_ERROR(in.Get(&cg));
  KLS_RETURN_IF_ERROR(in.Get(&k.slack_weight));
  KLS_RETURN_IF_ERROR(in.Get(&s->kept_objective));
  KLS_RETURN_IF_ERROR(in.Get(&s->last_relative_change));
  KLS_RETURN_IF_ERROR(in.Get(&s->change));
  KLS_RETURN_IF_ERROR(in.Get(&s->setup_seconds));
  uint8_t confirming = 0;
  KLS_RETURN_IF_ERROR(in.Get(&confirming));
  KLS_RETURN_IF_ERROR(GetDoubles(&in, s->objective.size(), &s->slack));
  KLS_RETURN_IF_ERROR(in.Get(&s_qn));
  KLS_RETURN_IF_ERROR(in.Get(&s_newton));
  int64_t s_cg = 0;
  KLS_RETURN_IF_ERROR(in.Get(&s_cg));
  EmbeddingCurvatureMemory restored;
  KLS_RETURN_IF_ERROR(restored.Restore(&in));
  KLS_RETURN_IF_ERROR(in.ExpectEnd());
  if (termination < 0 || termination > static_cast<int32_t>(Termination::kNumericalIssue)) {
    return DataLossError(in.what() + ": bad termination");
  }
  k.stats.termination = static_cast<Termination>(termination);
  k.stats.iterations = iterations;
  k.quasi_newton_iterations = qn;
  k.newton_steps = newton;
  k.cg_products = cg;
  s->confirming = confirming != 0;
  s->quasi_newton = s_qn;
  s->newton = s_newton;
  s->cg = s_cg;
  if (s->u.rows() != n || s->u.cols() > d || s->kept_basis.rows() != n || s->kept_basis.cols() > d ||
      s->alpha.size() != num_duals || k.alpha.size() != num_duals || k.v.rows() != n || !s->u.allFinite() ||
      !s->alpha.allFinite() || !k.v.allFinite() || iterations < 0 || iterations > c.iteration) {
    return DataLossError(in.what() + ": does not fit this problem");
  }
  *memory = std::move(restored);
  return OkStatus();
}

// One K₀ update of MVE from the inner solve's K (in `inner`, taken): the
// minorize–maximize ascent check, then the new basis and the stop rules.
// `s` is the outer loop's state. Returns true when the loop stops here, with
// *termination set (ascent broken, or converged at the full inner tolerance).
bool AcceptMveSolve(EmbeddingMinimaxResult inner, const MveProblem& problem, const MveOptions& options, double c,
                    double inner_tolerance, MveState* s, bool* have_kept, bool* ascent_stopped,
                    Termination* termination) {
  const int d = options.dims;
  // Minorize–maximize ascent check ([SJ07] Table 1 steps 3–6 with (3.26)):
  // F(K_new) >= tr(K_new K₀) − pen(K_new) = −P(K_new) >= −P(K_old) − gap = F(K_old) − gap,
  // where gap is the certified duality gap of this solve (absolute).
  const double f_new = MveObjectiveImpl(inner.v, d, problem.graph, c);
  const double allowed = std::max(0.0, inner.primal - inner.dual) + 1e-12 * std::max(1.0, std::abs(f_new));
  if (*have_kept && f_new < s->kept_objective - allowed) {
    // The inexact inner solve broke the ascent: keep the previous K, stop.
    s->objective.push_back(f_new);
    s->slack.push_back(allowed);
    *ascent_stopped = true;
    *termination = Termination::kConverged;
    return true;
  }
  const double f_change = *have_kept ? std::abs(f_new - s->kept_objective) : INFINITY;
  s->last_relative_change = f_change / std::max(1.0, std::abs(f_new));
  s->objective.push_back(f_new);
  s->slack.push_back(allowed);
  s->alpha = inner.alpha;
  s->kept_basis = s->u;
  s->kept_objective = f_new;
  *have_kept = true;
  // New K₀ = 2 U_d U_dᵀ − I from the top-d eigenvectors of K (V's columns, descending).
  const int keep = std::min<int>(d, static_cast<int>(inner.v.cols()));
  Eigen::MatrixXd u_new = inner.v.leftCols(keep);
  for (int col = 0; col < keep; ++col) u_new.col(col).normalize();
  s->kept = std::move(inner);
  const double overlap = (s->u.transpose() * u_new).squaredNorm();
  s->change =
      std::sqrt(std::max(0.0, static_cast<double>(s->u.cols() + u_new.cols()) - 2.0 * overlap) / (2.0 * d));
  s->u = std::move(u_new);
  if (s->change <= options.outer_tolerance ||
      (options.objective_tolerance > 0.0 &&
       f_change <= options.objective_tolerance * std::max(1.0, std::abs(f_new)))) {
    if (inner_tolerance <= options.inner.tolerance) {
      *termination = Termination::kConverged;
      return true;
    }
    s->confirming = true;
  }
  return false;
}

// Issue 23 (options.keep_start_unless_better): never worse than the start
// the solve improves on; records the comparison in result->mve_start.
Status KeepStartUnlessBetter(const MveProblem& problem, int d, EmbeddingResult* result) {
  const int n = problem.graph.num_points;
  KLS_ASSIGN_OR_RETURN(LearnedKernel start, KernelOf(Eigen::MatrixXd(problem.initial), n));
  KLS_ASSIGN_OR_RETURN(Eigen::MatrixXd start_coords, PrincipalCoordinates(start, d));
  KLS_ASSIGN_OR_RETURN(Eigen::MatrixXd solve_coords, PrincipalCoordinates(result->kernel, d));
  KLS_ASSIGN_OR_RETURN(MveStartComparison cmp,
                       CompareMveWithStart(Eigen::MatrixXd(problem.initial), start_coords, solve_coords,
                                           problem.graph.k, problem.labels));
  if (cmp.kept_start) result->kernel = std::move(start);
  result->mve_start = std::move(cmp);
  return OkStatus();
}

StatusOr<EmbeddingResult> Mve(const MveProblem& problem, const MveOptions& options, const SolveControl& control) {
  KLS_RETURN_IF_ERROR(options.Validate());
  KLS_RETURN_IF_ERROR(problem.Validate());
  const int n = problem.graph.num_points;
  const int d = options.dims;
  if (options.keep_start_unless_better && problem.graph.k < 1) {
    return InvalidArgumentError("graph.k = " + std::to_string(problem.graph.k) +
                                " (unknown) but options.keep_start_unless_better needs the k the graph was built "
                                "with (BuildNeighborhood sets it; or turn the guard off)");
  }
  Stopwatch watch;
  EmbeddingMinimaxProblem p = DistanceProblem(problem.graph);
  const double c = SlackWeight(p, options.inner);  // F's penalty uses the weight the solves use
  p.prior.identity = -1.0;  // K₀ = 2 U_d U_dᵀ − I

  // The outer loop's state, which is also what a checkpoint holds. s.kept is
  // the returned iterate: the last K whose update did not decrease F.
  // s.last_relative_change: |ΔF| / max(1, |F|) of the last accepted update.
  // s.confirming: set when a stop rule fired after a loose inner solve: from
  // then on every solve runs at inner.tolerance, so the loop stops only on an
  // F measured to the full accuracy and returns a K certified at that tolerance.
  MveState s;
  s.u = TopCenteredDirections(Eigen::MatrixXd(problem.initial), d);
  s.kept_basis = s.u;
  s.last_relative_change = INFINITY;
  SolveReport total;
  EmbeddingCurvatureMemory curvature;
  bool have_kept = false, ascent_stopped = false;
  Termination termination = Termination::kIterationLimit;
  int outer = 0;
  int iterations_so_far = 0;
  SolveControl inner_control = control;
  inner_control.progress = [&](const ProgressEvent& e) {
    ProgressEvent shifted = e;
    shifted.iteration = iterations_so_far + e.iteration;
    shifted.max_iterations = 0;
    control.Report(shifted);
  };
  // The outer loop checkpoints; the inner solves neither checkpoint nor resume.
  inner_control.checkpoint = nullptr;
  inner_control.checkpoint_requested = nullptr;
  inner_control.resume_from = nullptr;
  int first_outer = 1;
  // The fingerprint costs O(n r + |N|): only computed when checkpoints are used.
  const bool use_checkpoints = static_cast<bool>(control.checkpoint) || control.ResumeFrom(kMveCheckpointTag);
  const uint64_t fingerprint = use_checkpoints ? MveFingerprint(problem, options) : 0;
  if (const Checkpoint* ck = control.ResumeFrom(kMveCheckpointTag)) {
    MveState st;
    if (DecodeMve(*ck, fingerprint, n, d, p.num_duals(), &st, &curvature).ok()) {
      first_outer = st.outer + 1;
      s = std::move(st);
      have_kept = true;
      iterations_so_far = ck->iteration;
      total.setup_seconds = s.setup_seconds;
      total.resumed_from_iteration = ck->iteration;
    }  // otherwise not this run's checkpoint: start afresh
  }
  CheckpointTimer checkpoints(control);
  for (outer = first_outer; outer <= options.max_outer_iterations; ++outer) {
    p.prior.factor = s.u;
    p.prior.factor_scale = Eigen::VectorXd::Constant(s.u.cols(), 2.0);
    EmbeddingMinimaxOptions inner_options = options.inner;
    if (options.inexact_factor > 0.0 && std::isfinite(s.last_relative_change) && !s.confirming) {
      inner_options.tolerance =
          std::max(options.inner.tolerance, std::min(1e-2, options.inexact_factor * s.last_relative_change));
    }
    KLS_ASSIGN_OR_RETURN(EmbeddingMinimaxResult inner,
                         SolveEmbeddingMinimax(p, inner_options, inner_control, s.alpha.size() > 0 ? &s.alpha : nullptr,
                                               options.reuse_curvature ? &curvature : nullptr));
    // The inner solve's rows, numbered as its progress events were forwarded.
    for (IterationRow row : inner.stats.rows) {
      row.iteration += iterations_so_far;
      total.rows.push_back(row);
    }
    iterations_so_far += inner.stats.iterations;
    s.quasi_newton += inner.quasi_newton_iterations;
    s.newton += inner.newton_steps;
    s.cg += inner.cg_products;
    total.setup_seconds += inner.stats.setup_seconds;
    const Termination inner_why = inner.stats.termination;
    if (inner_why == Termination::kCancelled || inner_why == Termination::kTimeLimit ||
        inner_why == Termination::kNumericalIssue) {
      termination = inner_why;
      if (!have_kept) {
        s.kept = std::move(inner);
        s.kept_basis = s.u;
      }
      break;
    }
    if (AcceptMveSolve(std::move(inner), problem, options, c, inner_options.tolerance, &s, &have_kept,
                       &ascent_stopped, &termination)) {
      break;
    }
    if (outer < options.max_outer_iterations && iterations_so_far > 0) {
      checkpoints.MaybeSave(kMveCheckpointTag, iterations_so_far, [&] {
        s.outer = outer;
        s.setup_seconds = total.setup_seconds;
        return EncodeMve(fingerprint, iterations_so_far, s, curvature);
      });
    }
  }
  total.iterations = iterations_so_far;
  total.termination = termination;
  total.solve_seconds = watch.Seconds() - total.setup_seconds;
  total.objective_history = s.objective;
  total.final_objective = have_kept ? s.kept_objective : (s.objective.empty() ? 0.0 : s.objective.back());
  KLS_ASSIGN_OR_RETURN(LearnedKernel k, KernelOf(s.kept.v, n));
  EmbeddingResult result = MakeResult(std::move(s.kept), std::move(k));
  total.certificate = result.stats.certificate;  // the kept solve's
  result.stats = std::move(total);
  // A kept solve decoded from a checkpoint carries its gap, not the verdict.
  result.stats.certificate.CheckAgainst(options.inner.tolerance);
  result.quasi_newton_iterations = s.quasi_newton;
  result.newton_steps = s.newton;
  result.cg_products = s.cg;
  result.outer_iterations = std::min(outer, options.max_outer_iterations);
  result.mve_basis = std::move(s.kept_basis);
  result.mve_change = s.change;
  result.mve_objective = std::move(s.objective);
  result.mve_ascent_slack = std::move(s.slack);
  result.mve_ascent_stopped = ascent_stopped;
  if (options.keep_start_unless_better && termination != Termination::kCancelled) {
    KLS_RETURN_IF_ERROR(KeepStartUnlessBetter(problem, d, &result));
  }
  return result;
}

long long PairIndex(int a, int b, int n) {
  if (a > b) std::swap(a, b);
  return static_cast<long long>(a) * n - static_cast<long long>(a) * (a + 1) / 2 + (b - a - 1);
}

StatusOr<EmbeddingResult> Spe(const SpeProblem& problem, const EmbeddingMinimaxOptions& options,
                              const SolveControl& control) {
  KLS_RETURN_IF_ERROR(problem.Validate());
  const NeighborhoodGraph& g = problem.graph;
  const int n = g.num_points;
  EmbeddingMinimaxProblem p;
  p.num_points = n;
  p.slack = EmbeddingMinimaxProblem::Slack::kMax;
  // Every pair (a < b) is a T_k; index PairIndex(a, b).
  const long long num_pairs = static_cast<long long>(n) * (n - 1) / 2;
  p.pair_i.reserve(num_pairs);
  p.pair_j.reserve(num_pairs);
  for (int a = 0; a < n; ++a)
    for (int b = a + 1; b < n; ++b) {
      p.pair_i.push_back(a);
      p.pair_j.push_back(b);
    }
  std::vector<Eigen::Triplet<double>> w;
  for (int e = 0; e < g.num_edges(); ++e) {
    w.emplace_back(g.edge_i[e], g.edge_j[e], 1.0);
    w.emplace_back(g.edge_j[e], g.edge_i[e], 1.0);
  }
  p.prior.sparse.resize(n, n);
  p.prior.sparse.setFromTriplets(w.begin(), w.end());
  std::vector<char> is_neighbor(n, 0);
  for (int i = 0; i < n; ++i) {
    for (int k : g.neighbors[i]) is_neighbor[k] = 1;
    for (int k : g.neighbors[i]) {
      const int near = static_cast<int>(PairIndex(i, k, n));
      for (int j = 0; j < n; ++j) {
        if (j == i || is_neighbor[j]) continue;
        p.triplet_near.push_back(near);
        p.triplet_far.push_back(static_cast<int>(PairIndex(i, j, n)));
      }
    }
    for (int k : g.neighbors[i]) is_neighbor[k] = 0;
  }
  KLS_ASSIGN_OR_RETURN(EmbeddingMinimaxResult inner, SolveEmbeddingMinimax(p, options, control));
  KLS_ASSIGN_OR_RETURN(LearnedKernel k, KernelOf(inner.v, n));
  return MakeResult(std::move(inner), std::move(k));
}

StatusOr<LearnedKernel> Kpca(const Eigen::MatrixXd& x, const KpcaOptions& options) {
  KLS_RETURN_IF_ERROR(options.Validate());
  const int n = static_cast<int>(x.rows());
  if (n < 2 || x.cols() < 1) {
    return InvalidArgumentError("features: is " + std::to_string(x.rows()) + " × " + std::to_string(x.cols()) +
                                "; kernel PCA needs at least 2 points and 1 feature");
  }
  if (!x.allFinite()) return InvalidArgumentError("features: contains a non-finite value");
  const int d = options.dims;
  LearnedKernel::Embedding v = LearnedKernel::Embedding::Zero(n, d);
  if (options.kernel == KpcaOptions::Kernel::kLinear) {
    // HKH = (HX)(HX)ᵀ: its eigenpairs are HX's left singular vectors and σ².
    const Eigen::MatrixXd c = x.rowwise() - x.colwise().mean();
    Eigen::BDCSVD<Eigen::MatrixXd> svd(c, Eigen::ComputeThinU);
    const int keep = std::min<int>(d, static_cast<int>(svd.singularValues().size()));
    v.leftCols(keep) = svd.matrixU().leftCols(keep) * svd.singularValues().head(keep).asDiagonal();
  } else {
    double sigma = options.rbf_sigma;
    if (sigma == 0.0) {
      KnnOptions ko;
      ko.k = std::min(10, n - 1);
      ko.num_threads = 1;
      KLS_ASSIGN_OR_RETURN(KnnGraph knn, ExactKnn(x, ko));
      double sum = 0.0;
      for (double dist : knn.distances) sum += dist;
      sigma = 0.5 * sum / static_cast<double>(knn.distances.size());
      if (!(sigma > 0.0)) sigma = 1.0;  // all points coincide
    }
    const Eigen::VectorXd sq = x.rowwise().squaredNorm();
    Eigen::MatrixXd k = (-(sq.replicate(1, n) + sq.transpose().replicate(n, 1) - 2.0 * x * x.transpose())
                              .cwiseMax(0.0) /
                         (2.0 * sigma * sigma))
                            .array()
                            .exp()
                            .matrix();
    const Eigen::VectorXd mean = k.colwise().mean().transpose();
    const double total = mean.mean();
    k.rowwise() -= mean.transpose();
    k.colwise() -= mean;
    k.array() += total;
    Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(0.5 * (k + k.transpose()));
    if (eig.info() != Eigen::Success) return InternalError("kernel PCA: eigensolver did not converge");
    for (int c = 0; c < std::min(d, n); ++c) {
      const double lambda = eig.eigenvalues()[n - 1 - c];
      if (lambda > 0.0) v.col(c) = eig.eigenvectors().col(n - 1 - c) * std::sqrt(lambda);
    }
  }
  return LearnedKernel::FromEmbedding(std::move(v));
}

}  // namespace

namespace {
// The start guard's labels: empty, or n class ids >= 0 / −1 (unlabelled).
Status ValidateGuardLabels(const std::vector<int>& labels, int n) {
  if (!labels.empty() && static_cast<int>(labels.size()) != n) {
    return InvalidArgumentError("labels: has " + std::to_string(labels.size()) + " entries but there are " +
                                std::to_string(n) + " points (or leave it empty)");
  }
  for (size_t i = 0; i < labels.size(); ++i)
    if (labels[i] < -1) {
      return InvalidArgumentError("labels[" + std::to_string(i) + "] = " + std::to_string(labels[i]) +
                                  " must be a class id >= 0 or -1 (unlabelled)");
    }
  return OkStatus();
}
}  // namespace

Status NeighborhoodGraph::Validate() const {
  const int n = num_points;
  if (n < 2) return InvalidArgumentError("graph.num_points = " + std::to_string(n) + " must be >= 2");
  if (k < 0 || k >= n) {
    return InvalidArgumentError("graph.k = " + std::to_string(k) + " must be in [0, " + std::to_string(n) +
                                ") (0 = unknown)");
  }
  if (static_cast<int>(neighbors.size()) != n) {
    return InvalidArgumentError("graph.neighbors: has " + std::to_string(neighbors.size()) + " lists but there are " +
                                std::to_string(n) + " points");
  }
  if (edge_i.size() != edge_j.size() || static_cast<Eigen::Index>(edge_i.size()) != squared_distance.size()) {
    return InvalidArgumentError("graph: edge_i, edge_j and squared_distance have different sizes (" +
                                std::to_string(edge_i.size()) + ", " + std::to_string(edge_j.size()) + ", " +
                                std::to_string(squared_distance.size()) + ")");
  }
  for (int e = 0; e < num_edges(); ++e) {
    if (edge_i[e] < 0 || edge_j[e] >= n || edge_i[e] >= edge_j[e]) {
      return InvalidArgumentError("graph edge " + std::to_string(e) + " = (" + std::to_string(edge_i[e]) + ", " +
                                  std::to_string(edge_j[e]) + ") must satisfy 0 <= i < j < " + std::to_string(n));
    }
  }
  for (int i = 0; i < n; ++i)
    for (int j : neighbors[i]) {
      if (j < 0 || j >= n || j == i) {
        return InvalidArgumentError("graph.neighbors[" + std::to_string(i) + "] contains " + std::to_string(j));
      }
      if (!std::binary_search(neighbors[j].begin(), neighbors[j].end(), i)) {
        return InvalidArgumentError("graph.neighbors: " + std::to_string(j) + " ∈ N_" + std::to_string(i) +
                                    " but " + std::to_string(i) + " ∉ N_" + std::to_string(j) +
                                    " (lists must be symmetric and ascending)");
      }
    }
  return OkStatus();
}

Eigen::MatrixXd ScaledToUnitInputGram(Eigen::MatrixXd features) {
  const Eigen::MatrixXd c = features.rowwise() - features.colwise().mean();
  const double gram = (c.transpose() * c).norm();  // = ‖c cᵀ‖_F
  if (gram > 0) features *= std::sqrt(std::sqrt(static_cast<double>(features.rows())) / gram);
  return features;
}

StatusOr<NeighborhoodGraph> BuildNeighborhood(const Eigen::MatrixXd& features, int k) {
  return GuardExceptions("BuildNeighborhood", [&]() -> StatusOr<NeighborhoodGraph> {
    const int n = static_cast<int>(features.rows());
    KnnOptions ko;
    ko.k = k;
    ko.num_threads = 1;
    KLS_ASSIGN_OR_RETURN(KnnGraph knn, ExactKnn(features, ko));
    std::vector<std::set<int>> adj(n);
    for (int i = 0; i < n; ++i)
      for (int t = 0; t < k; ++t) {
        const int j = knn.neighbor(i, t);
        adj[i].insert(j);
        adj[j].insert(i);
      }
    NeighborhoodGraph g;
    g.num_points = n;
    g.k = k;
    g.neighbors.resize(n);
    std::vector<double> dist;
    for (int i = 0; i < n; ++i) {
      g.neighbors[i].assign(adj[i].begin(), adj[i].end());
      for (int j : adj[i])
        if (i < j) {
          g.edge_i.push_back(i);
          g.edge_j.push_back(j);
          dist.push_back((features.row(i) - features.row(j)).squaredNorm());
        }
    }
    g.squared_distance = Eigen::Map<const Eigen::VectorXd>(dist.data(), static_cast<Eigen::Index>(dist.size()));
    return g;
  });
}

Status ColoredMvuProblem::Validate() const {
  KLS_RETURN_IF_ERROR(graph.Validate());
  if (static_cast<int>(labels.size()) != graph.num_points) {
    return InvalidArgumentError("labels: has " + std::to_string(labels.size()) + " entries but there are " +
                                std::to_string(graph.num_points) + " points");
  }
  bool any = false;
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] < -1) {
      return InvalidArgumentError("labels[" + std::to_string(i) + "] = " + std::to_string(labels[i]) +
                                  " must be a class id >= 0 or -1 (unlabeled)");
    }
    any = any || labels[i] >= 0;
  }
  if (!any) return InvalidArgumentError("labels: no point is labeled (CMVU needs the label kernel Y)");
  return OkStatus();
}

Status MveProblem::Validate() const {
  KLS_RETURN_IF_ERROR(graph.Validate());
  if (initial.rows() != graph.num_points || initial.cols() < 1) {
    return InvalidArgumentError("initial: is " + std::to_string(initial.rows()) + " × " +
                                std::to_string(initial.cols()) + " but must be " + std::to_string(graph.num_points) +
                                " × r with r >= 1");
  }
  if (!initial.allFinite()) return InvalidArgumentError("initial: contains a non-finite value");
  return ValidateGuardLabels(labels, graph.num_points);
}

Status MveOptions::Validate(std::string_view path) const {
  const std::string p(path);
  KLS_RETURN_IF_ERROR(inner.Validate(path));
  if (dims < 1) return InvalidArgumentError(p + ".dims = " + std::to_string(dims) + " must be >= 1");
  if (max_outer_iterations < 1) {
    return InvalidArgumentError(p + ".max_outer_iterations = " + std::to_string(max_outer_iterations) +
                                " must be >= 1");
  }
  if (!(outer_tolerance >= 0.0) || !std::isfinite(outer_tolerance)) {
    return InvalidArgumentError(p + ".outer_tolerance = " + FormatNumber(outer_tolerance) +
                                " must be finite and >= 0");
  }
  if (!(objective_tolerance >= 0.0) || !std::isfinite(objective_tolerance)) {
    return InvalidArgumentError(p + ".objective_tolerance = " + FormatNumber(objective_tolerance) +
                                " must be finite and >= 0");
  }
  if (!(inexact_factor >= 0.0) || !std::isfinite(inexact_factor)) {
    return InvalidArgumentError(p + ".inexact_factor = " + FormatNumber(inexact_factor) +
                                " must be finite and >= 0");
  }
  return OkStatus();
}

Status SpeProblem::Validate() const {
  KLS_RETURN_IF_ERROR(graph.Validate());
  if (max_triplets < 1) {
    return InvalidArgumentError("max_triplets = " + std::to_string(max_triplets) + " must be >= 1");
  }
  long long triplets = 0;
  const long long n = graph.num_points;
  for (const auto& nb : graph.neighbors) triplets += static_cast<long long>(nb.size()) * (n - 1 - nb.size());
  if (triplets > max_triplets) {
    return InvalidArgumentError("SPE would generate " + std::to_string(triplets) + " triplet constraints (n = " +
                                std::to_string(n) + "), more than max_triplets = " + std::to_string(max_triplets));
  }
  if (n * (n - 1) / 2 > 2'000'000'000LL) {
    return InvalidArgumentError("graph.num_points = " + std::to_string(n) + " is too large for SPE's pair list");
  }
  return OkStatus();
}

Status KpcaOptions::Validate(std::string_view path) const {
  const std::string p(path);
  if (!(rbf_sigma >= 0.0) || !std::isfinite(rbf_sigma)) {
    return InvalidArgumentError(p + ".rbf_sigma = " + FormatNumber(rbf_sigma) +
                                " must be finite and >= 0 (0 = heuristic)");
  }
  if (dims < 1) return InvalidArgumentError(p + ".dims = " + std::to_string(dims) + " must be >= 1");
  return OkStatus();
}

StatusOr<EmbeddingResult> SolveColoredMvu(const ColoredMvuProblem& problem, const EmbeddingMinimaxOptions& options,
                                          const SolveControl& control) {
  return GuardExceptions("CMVU", [&] { return ColoredMvu(problem, options, control); });
}

StatusOr<EmbeddingResult> SolveMve(const MveProblem& problem, const MveOptions& options,
                                   const SolveControl& control) {
  return GuardExceptions("MVE", [&] { return Mve(problem, options, control); });
}

double MveObjective(const Eigen::MatrixXd& v, int dims, const NeighborhoodGraph& graph, double c) {
  return MveObjectiveImpl(v, dims, graph, c);
}

StatusOr<EmbeddingResult> SolveSpe(const SpeProblem& problem, const EmbeddingMinimaxOptions& options,
                                   const SolveControl& control) {
  return GuardExceptions("SPE", [&] { return Spe(problem, options, control); });
}

StatusOr<LearnedKernel> KernelPca(const Eigen::MatrixXd& features, const KpcaOptions& options) {
  return GuardExceptions("kernel PCA", [&] { return Kpca(features, options); });
}

StatusOr<Eigen::MatrixXd> PrincipalCoordinates(const LearnedKernel& kernel, int dims) {
  if (dims < 1) return InvalidArgumentError("dims = " + std::to_string(dims) + " must be >= 1");
  if (kernel.num_points() < 1) return InvalidArgumentError("kernel: is empty");
  return GuardExceptions("PrincipalCoordinates", [&]() -> StatusOr<Eigen::MatrixXd> {
    const Eigen::MatrixXd v = kernel.embedding();
    const Eigen::MatrixXd c = v.rowwise() - v.colwise().mean();
    Eigen::BDCSVD<Eigen::MatrixXd> svd(c, Eigen::ComputeThinU);
    Eigen::MatrixXd out = Eigen::MatrixXd::Zero(v.rows(), dims);
    const int keep = std::min<int>(dims, static_cast<int>(svd.singularValues().size()));
    out.leftCols(keep) = svd.matrixU().leftCols(keep) * svd.singularValues().head(keep).asDiagonal();
    return out;
  });
}

StatusOr<double> NeighborhoodPreservation(const Eigen::MatrixXd& reference, const Eigen::MatrixXd& embedding, int k) {
  const int n = static_cast<int>(reference.rows());
  if (embedding.rows() != reference.rows()) {
    return InvalidArgumentError("embedding: has " + std::to_string(embedding.rows()) + " rows but reference has " +
                                std::to_string(n));
  }
  if (k < 1 || k >= n) {
    return InvalidArgumentError("k = " + std::to_string(k) + " must be in [1, " + std::to_string(n) +
                                ") (the number of points)");
  }
  if (!reference.allFinite()) return InvalidArgumentError("reference: contains a non-finite value");
  if (!embedding.allFinite()) return InvalidArgumentError("embedding: contains a non-finite value");
  std::vector<double> ref(n), emb(n), sorted;
  std::vector<int> order(n - 1);
  double total = 0.0;
  for (int i = 0; i < n; ++i) {
    sorted.clear();
    for (int j = 0; j < n; ++j) {
      ref[j] = (reference.row(i) - reference.row(j)).squaredNorm();
      emb[j] = (embedding.row(i) - embedding.row(j)).squaredNorm();
      if (j != i) sorted.push_back(ref[j]);
    }
    // The k-th smallest reference distance: every point within it is a reference neighbour.
    std::nth_element(sorted.begin(), sorted.begin() + (k - 1), sorted.end());
    const double radius = sorted[k - 1];
    for (int j = 0, t = 0; j < n; ++j)
      if (j != i) order[t++] = j;
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int a, int b) { return emb[a] != emb[b] ? emb[a] < emb[b] : a < b; });
    int shared = 0;
    for (int t = 0; t < k; ++t) shared += ref[order[t]] <= radius;
    total += static_cast<double>(shared) / k;
  }
  return total / n;
}

StatusOr<MveStartComparison> CompareMveWithStart(const Eigen::MatrixXd& input, const Eigen::MatrixXd& start,
                                                 const Eigen::MatrixXd& solve, int k,
                                                 const std::vector<int>& labels) {
  const int n = static_cast<int>(input.rows());
  if (start.rows() != n || solve.rows() != n) {
    return InvalidArgumentError("start and solve: have " + std::to_string(start.rows()) + " and " +
                                std::to_string(solve.rows()) + " rows but input has " + std::to_string(n));
  }
  KLS_RETURN_IF_ERROR(ValidateGuardLabels(labels, n));
  MveStartComparison c;
  c.k = k;
  KLS_ASSIGN_OR_RETURN(c.start_preservation, NeighborhoodPreservation(input, start, k));
  KLS_ASSIGN_OR_RETURN(c.solve_preservation, NeighborhoodPreservation(input, solve, k));
  std::vector<int> labelled;
  for (int i = 0; i < static_cast<int>(labels.size()); ++i)
    if (labels[i] >= 0) labelled.push_back(i);
  c.labeled_points = static_cast<int>(labelled.size());
  const bool neighbourhoods_hold = c.solve_preservation >= c.start_preservation;
  if (c.labeled_points > k) {
    KLS_ASSIGN_OR_RETURN(c.start_loo_accuracy, LeaveOneOutKnnAccuracy(start, labels, labelled, k));
    KLS_ASSIGN_OR_RETURN(c.solve_loo_accuracy, LeaveOneOutKnnAccuracy(solve, labels, labelled, k));
    c.criterion = "labels and neighbourhoods";
    c.kept_start = !(c.solve_loo_accuracy >= c.start_loo_accuracy && neighbourhoods_hold);
  } else {
    c.criterion = "neighbourhoods";
    c.kept_start = !neighbourhoods_hold;
  }
  return c;
}

std::string MveStartComparison::Json() const {
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "{\"kept\":\"%s\",\"criterion\":\"%s\",\"k\":%d,\"start_neighbourhood_preservation\":%.6g,"
                "\"solve_neighbourhood_preservation\":%.6g,\"labeled_points\":%d",
                kept_start ? "start" : "solve", criterion.c_str(), k, start_preservation, solve_preservation,
                labeled_points);
  std::string out = buf;
  if (start_loo_accuracy >= 0.0) {
    std::snprintf(buf, sizeof(buf), ",\"start_loo_knn_accuracy\":%.6g,\"solve_loo_knn_accuracy\":%.6g",
                  start_loo_accuracy, solve_loo_accuracy);
    out += buf;
  }
  return out + "}";
}

std::string MveStartComparison::Sentence() const {
  char buf[512];
  std::snprintf(buf, sizeof(buf), "kept the %s: %d-NN neighbourhood preservation %.3g (MVE) vs %.3g (KPCA start)",
                kept_start ? "KPCA start" : "MVE solve", k, solve_preservation, start_preservation);
  std::string out = buf;
  if (start_loo_accuracy >= 0.0) {
    std::snprintf(buf, sizeof(buf), ", leave-one-out %d-NN accuracy %.3g (MVE) vs %.3g (KPCA start) on %d labels",
                  k, solve_loo_accuracy, start_loo_accuracy, labeled_points);
    out += buf;
  }
  return out;
}

}  // namespace kls
