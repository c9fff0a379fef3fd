#include "core/social/pairwise_klr.h"

#include "core/common/byte_io.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <utility>

namespace kls {

namespace {

std::string Str(int v) { return std::to_string(v); }

// ln(1 + e^x) without overflow.
double Softplus(double x) { return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }

// σ(x) = 1 / (1 + e^{−x}) without overflow.
double Sigmoid(double x) {
  if (x >= 0) return 1.0 / (1.0 + std::exp(-x));
  const double e = std::exp(x);
  return e / (1.0 + e);
}

Status CheckUserKernel(const Eigen::MatrixXd& k, const char* name) {
  if (k.rows() < 1 || k.rows() != k.cols())
    return InvalidArgumentError(std::string(name) + " is " + Str(int(k.rows())) + " x " + Str(int(k.cols())) +
                                "; it must be square and non-empty");
  if (!k.allFinite()) return InvalidArgumentError(std::string(name) + " has a non-finite entry");
  const double scale = std::max(1.0, k.cwiseAbs().maxCoeff());
  for (Eigen::Index j = 0; j < k.cols(); ++j)
    for (Eigen::Index i = 0; i < j; ++i)
      if (std::abs(k(i, j) - k(j, i)) > 1e-9 * scale)
        return InvalidArgumentError(std::string(name) + " is not symmetric: entry (" + Str(int(i)) + ", " +
                                    Str(int(j)) + ") = " + FormatNumber(k(i, j)) + " but (" + Str(int(j)) + ", " +
                                    Str(int(i)) + ") = " + FormatNumber(k(j, i)));
  return OkStatus();
}

Status CheckPairs(const std::vector<UserPair>& pairs, int n, const char* name) {
  for (size_t i = 0; i < pairs.size(); ++i)
    if (pairs[i].a < 0 || pairs[i].a >= n || pairs[i].b < 0 || pairs[i].b >= n)
      return InvalidArgumentError(std::string(name) + "[" + Str(int(i)) + "] = (" + Str(pairs[i].a) + ", " +
                                  Str(pairs[i].b) + ") refers to a user outside [0, " + Str(n) + ")");
  return OkStatus();
}

// Column k(û_i, q) over all pairs i. `link` (optional) holds K_u(a_i, b_i) so that the link term
// does not read K_u at scattered places for every column.
Eigen::VectorXd PairColumn(const Eigen::MatrixXd& k, const PairKernelSpec& spec, const std::vector<UserPair>& pairs,
                           const UserPair& q, const Eigen::VectorXd* link = nullptr) {
  Eigen::VectorXd col(pairs.size());
  if (!link) {
    for (size_t i = 0; i < pairs.size(); ++i) col[i] = PairKernelValue(k, spec, pairs[i], q);
    return col;
  }
  // Two columns of K_u are read: K_u(·, q.a) and K_u(·, q.b).
  const double* ka = k.col(q.a).data();
  const double* kb = k.col(q.b).data();
  const double offset = spec.bias_weight, scale = spec.link_weight * k(q.a, q.b);
  for (size_t i = 0; i < pairs.size(); ++i) {
    const UserPair& p = pairs[i];
    const double base = spec.kind == PairKernel::kDifference ? ka[p.a] + kb[p.b] - kb[p.a] - ka[p.b]
                                                             : 0.5 * (ka[p.a] * kb[p.b] + kb[p.a] * ka[p.b]);
    col[i] = base + offset + scale * (*link)[i];
  }
  return col;
}

// Loss part of (7.3) and its derivatives with respect to f:
// g_i = ∂/∂f_i = −y_i σ(−y_i f_i) / N,  w_i = ∂²/∂f_i² = σ(f_i) σ(−f_i) / N.
struct LossTerms {
  double loss = 0.0;
  Eigen::VectorXd g, w;
};
LossTerms Loss(const Eigen::VectorXd& f, const Eigen::VectorXd& y, bool derivatives) {
  const Eigen::Index n = f.size();
  LossTerms t;
  if (derivatives) {
    t.g.resize(n);
    t.w.resize(n);
  }
  double sum = 0.0;
  for (Eigen::Index i = 0; i < n; ++i) {
    const double m = y[i] * f[i];
    sum += Softplus(-m);
    if (derivatives) {
      const double s = Sigmoid(-m);
      t.g[i] = -y[i] * s / n;
      t.w[i] = s * (1.0 - s) / n;
    }
  }
  t.loss = sum / n;
  return t;
}

double Objective(const Eigen::VectorXd& f, const Eigen::VectorXd& y, const Eigen::MatrixXd& kss,
                 const Eigen::VectorXd& alpha, double c) {
  return Loss(f, y, false).loss + 0.5 * c * alpha.dot(kss * alpha);
}

// State of (7.3) restricted to the import set S.
struct ImportSystem {
  const Eigen::VectorXd* y = nullptr;
  double c = 0.0;
  Eigen::MatrixXd kns;  // N × q: k(û_i, û_s)
  Eigen::MatrixXd kss;  // q × q
  Eigen::VectorXd alpha;
  Eigen::VectorXd f;    // kns α
  double objective = 0.0;
  Eigen::VectorXd grad;  // ∇_α J
  LossTerms terms;       // at f
  Eigen::MatrixXd hessian;
  Eigen::LDLT<Eigen::MatrixXd> ldlt;

  // Gradient, Hessian K_NSᵀ W K_NS + C K_SS and its factorization at the current α.
  bool Linearize() {
    f = kns * alpha;
    terms = Loss(f, *y, true);
    objective = terms.loss + 0.5 * c * alpha.dot(kss * alpha);
    grad = kns.transpose() * terms.g + c * (kss * alpha);
    const Eigen::MatrixXd b = terms.w.cwiseSqrt().asDiagonal() * kns;
    hessian = c * kss;
    hessian.selfadjointView<Eigen::Lower>().rankUpdate(b.transpose());
    Eigen::MatrixXd full = hessian.selfadjointView<Eigen::Lower>();
    hessian = std::move(full);
    ldlt.compute(hessian);
    if (ldlt.info() != Eigen::Success || !ldlt.isPositive()) {
      // Dependent import columns make H singular: a tiny ridge keeps the step defined.
      const double ridge = 1e-12 * std::max(1e-300, hessian.diagonal().cwiseAbs().maxCoeff());
      Eigen::MatrixXd h = hessian;
      h.diagonal().array() += ridge;
      ldlt.compute(h);
    }
    return std::isfinite(objective) && grad.allFinite() && ldlt.info() == Eigen::Success;
  }

  // Damped Newton on (7.3) over S (ZH01's re-fit). Returns false on a numerical failure.
  bool Newton(int max_iterations, double tolerance) {
    if (alpha.size() == 0) {
      f = Eigen::VectorXd::Zero(y->size());
      terms = Loss(f, *y, true);
      objective = terms.loss;
      grad.resize(0);
      return true;
    }
    if (!Linearize()) return false;
    for (int it = 0; it < max_iterations; ++it) {
      if (grad.lpNorm<Eigen::Infinity>() <= tolerance) return true;
      const Eigen::VectorXd step = -ldlt.solve(grad);
      if (!step.allFinite()) return false;
      const double slope = grad.dot(step);
      if (!(slope < 0)) return true;  // no descent direction left at machine precision
      const Eigen::VectorXd fs = kns * step;
      double t = 1.0, next = objective;
      bool accepted = false;
      for (int ls = 0; ls < 60; ++ls, t *= 0.5) {
        const Eigen::VectorXd a = alpha + t * step;
        next = Objective(f + t * fs, *y, kss, a, c);
        if (next <= objective + 1e-4 * t * slope) {
          accepted = true;
          break;
        }
      }
      if (!accepted) return true;  // stalled at rounding level; the caller reports ‖∇‖∞
      alpha += t * step;
      if (!Linearize()) return false;
    }
    return true;
  }
};

}  // namespace

const char* PairKernelName(PairKernel k) {
  return k == PairKernel::kDifference ? "difference" : "symmetric_product";
}

Status PairKernelSpec::Validate(const char* field) const {
  if (kind != PairKernel::kSymmetricProduct && kind != PairKernel::kDifference)
    return InvalidArgumentError(std::string(field) + ".kind = " + Str(static_cast<int>(kind)) + " is not a PairKernel");
  if (!(bias_weight >= 0.0) || !std::isfinite(bias_weight))
    return InvalidArgumentError(std::string(field) + ".bias_weight = " + FormatNumber(bias_weight) +
                                " must be finite and >= 0");
  if (!(link_weight >= 0.0) || !std::isfinite(link_weight))
    return InvalidArgumentError(std::string(field) + ".link_weight = " + FormatNumber(link_weight) +
                                " must be finite and >= 0");
  return OkStatus();
}

double PairKernelValue(const Eigen::MatrixXd& k, const PairKernelSpec& spec, const UserPair& p, const UserPair& q) {
  const double base = spec.kind == PairKernel::kDifference
                          ? k(p.a, q.a) + k(p.b, q.b) - k(p.a, q.b) - k(p.b, q.a)  // (Φ(a) − Φ(b))ᵀ(Φ(c) − Φ(d)), (7.3)
                          : 0.5 * (k(p.a, q.a) * k(p.b, q.b) + k(p.a, q.b) * k(p.b, q.a));
  return base + spec.bias_weight + spec.link_weight * k(p.a, p.b) * k(q.a, q.b);
}

Status TrainingPairOptions::Validate(std::string_view path) const {
  const std::string p(path);
  if (positives_per_user < 1)
    return InvalidArgumentError(p + ".positives_per_user = " + Str(positives_per_user) + " must be >= 1");
  if (negatives_per_user < 1)
    return InvalidArgumentError(p + ".negatives_per_user = " + Str(negatives_per_user) + " must be >= 1");
  if (!(negative_pool_fraction > 0.0 && negative_pool_fraction <= 1.0))
    return InvalidArgumentError(p + ".negative_pool_fraction = " + FormatNumber(negative_pool_fraction) +
                                " must be in (0, 1]");
  return OkStatus();
}

StatusOr<TrainingPairs> SelectTrainingPairs(const std::vector<std::vector<int>>& contacts,
                                            const std::vector<const Eigen::MatrixXd*>& similarity,
                                            const Eigen::MatrixXd& communication, const std::vector<int>& anchors,
                                            const TrainingPairOptions& options) {
  return GuardExceptions("SelectTrainingPairs", [&]() -> StatusOr<TrainingPairs> {
    KLS_RETURN_IF_ERROR(options.Validate());
    const int n = static_cast<int>(communication.rows());
    if (n < 2 || communication.cols() != n)
      return InvalidArgumentError("communication is " + Str(n) + " x " + Str(int(communication.cols())) +
                                  "; it must be square with at least 2 users");
    if (!communication.allFinite()) return InvalidArgumentError("communication has a non-finite entry");
    if (static_cast<int>(contacts.size()) != n)
      return InvalidArgumentError("contacts has " + Str(int(contacts.size())) + " lists but there are " + Str(n) +
                                  " users");
    for (int u = 0; u < n; ++u)
      for (int v : contacts[u])
        if (v < 0 || v >= n)
          return InvalidArgumentError("contacts[" + Str(u) + "] contains " + Str(v) + ", outside [0, " + Str(n) +
                                      ")");
    if (similarity.empty()) return InvalidArgumentError("similarity is empty; the negative rule needs >= 1 kernel");
    for (size_t t = 0; t < similarity.size(); ++t) {
      if (!similarity[t] || similarity[t]->rows() != n || similarity[t]->cols() != n)
        return InvalidArgumentError("similarity[" + Str(int(t)) + "] is not " + Str(n) + " x " + Str(n));
      if (!similarity[t]->allFinite())
        return InvalidArgumentError("similarity[" + Str(int(t)) + "] has a non-finite entry");
    }
    if (anchors.empty()) return InvalidArgumentError("anchors is empty");
    std::vector<char> seen(n, 0);
    for (size_t i = 0; i < anchors.size(); ++i) {
      const int u = anchors[i];
      if (u < 0 || u >= n)
        return InvalidArgumentError("anchors[" + Str(int(i)) + "] = " + Str(u) + " is outside [0, " + Str(n) + ")");
      if (seen[u]) return InvalidArgumentError("anchors[" + Str(int(i)) + "] = " + Str(u) + " is repeated");
      seen[u] = 1;
    }
    const int pool = static_cast<int>(std::ceil(options.negative_pool_fraction * (n - 1) - 1e-12));
    if (options.negatives_per_user >= pool)
      return InvalidArgumentError("options.negatives_per_user = " + Str(options.negatives_per_user) +
                                  " must be < N = ceil(negative_pool_fraction * (n - 1)) = " + Str(pool));

    std::mt19937_64 rng(options.seed);
    TrainingPairs out;
    std::set<std::pair<int, int>> taken;
    auto key = [&](int u, int v) {
      return options.symmetric ? std::make_pair(std::min(u, v), std::max(u, v)) : std::make_pair(u, v);
    };
    // Positives first, so that a negative whose (unordered) pair is a positive is dropped.
    std::vector<std::vector<int>> contact_set(n);
    for (int u = 0; u < n; ++u) {
      contact_set[u] = contacts[u];
      std::sort(contact_set[u].begin(), contact_set[u].end());
      contact_set[u].erase(std::unique(contact_set[u].begin(), contact_set[u].end()), contact_set[u].end());
      contact_set[u].erase(std::remove(contact_set[u].begin(), contact_set[u].end(), u), contact_set[u].end());
    }
    for (int u : anchors) {
      std::vector<int> friends = contact_set[u];
      std::shuffle(friends.begin(), friends.end(), rng);  // random order among equal K³
      std::stable_sort(friends.begin(), friends.end(),
                       [&](int x, int z) { return communication(u, x) > communication(u, z); });
      const int m = std::min<int>(options.positives_per_user, static_cast<int>(friends.size()));
      for (int t = 0; t < m; ++t)
        if (taken.insert(key(u, friends[t])).second) {
          out.pairs.push_back({u, friends[t]});
          ++out.num_positive;
        }
    }
    std::vector<double> labels(out.pairs.size(), 1.0);
    std::vector<char> in_all(n);
    std::vector<double> row(n - 1);
    for (int u : anchors) {
      // Conservative rule: v must be in the tail L_t(u) of every kernel.
      std::fill(in_all.begin(), in_all.end(), 1);
      in_all[u] = 0;
      for (const Eigen::MatrixXd* kt : similarity) {
        int r = 0;
        for (int v = 0; v < n; ++v)
          if (v != u) row[r++] = (*kt)(u, v);
        std::nth_element(row.begin(), row.begin() + (pool - 1), row.end());
        const double threshold = row[pool - 1];  // N-th smallest of row u
        for (int v = 0; v < n; ++v)
          if (v != u && (*kt)(u, v) > threshold) in_all[v] = 0;
      }
      for (int v : contact_set[u]) in_all[v] = 0;
      std::vector<int> candidates;
      for (int v = 0; v < n; ++v)
        if (in_all[v]) candidates.push_back(v);
      if (candidates.empty()) {
        ++out.anchors_without_negatives;
        continue;
      }
      const int m = std::min<int>(options.negatives_per_user, static_cast<int>(candidates.size()));
      if (options.least_similar_first) {
        std::vector<double> total(n, 0.0);
        for (int v : candidates)
          for (const Eigen::MatrixXd* kt : similarity) total[v] += (*kt)(u, v);
        std::partial_sort(candidates.begin(), candidates.begin() + m, candidates.end(),
                          [&](int x, int z) { return total[x] < total[z] || (total[x] == total[z] && x < z); });
      } else {
        for (int t = 0; t < m; ++t) {  // partial Fisher–Yates: m uniform draws without replacement
          std::uniform_int_distribution<int> pick(t, static_cast<int>(candidates.size()) - 1);
          std::swap(candidates[t], candidates[pick(rng)]);
        }
      }
      for (int t = 0; t < m; ++t)
        if (taken.insert(key(u, candidates[t])).second) {
          out.pairs.push_back({u, candidates[t]});
          labels.push_back(-1.0);
          ++out.num_negative;
        }
    }
    out.labels = Eigen::Map<const Eigen::VectorXd>(labels.data(), static_cast<Eigen::Index>(labels.size()));
    return out;
  });
}

Status PairwiseKlrOptions::Validate(std::string_view path) const {
  const std::string p(path);
  KLS_RETURN_IF_ERROR(CheckPositiveOption("c", c, path));
  if (max_import_vectors < 1)
    return InvalidArgumentError(p + ".max_import_vectors = " + Str(max_import_vectors) + " must be >= 1");
  if (candidates_per_step < 0)
    return InvalidArgumentError(p + ".candidates_per_step = " + Str(candidates_per_step) + " must be >= 0");
  if (!(relative_tolerance >= 0.0) || !std::isfinite(relative_tolerance))
    return InvalidArgumentError(p + ".relative_tolerance = " + FormatNumber(relative_tolerance) +
                                " must be finite and >= 0");
  if (stop_window < 1) return InvalidArgumentError(p + ".stop_window = " + Str(stop_window) + " must be >= 1");
  if (max_newton_iterations < 1)
    return InvalidArgumentError(p + ".max_newton_iterations = " + Str(max_newton_iterations) + " must be >= 1");
  KLS_RETURN_IF_ERROR(CheckPositiveOption("newton_tolerance", newton_tolerance, path));
  KLS_RETURN_IF_ERROR(pair_kernel.Validate((p + ".pair_kernel").c_str()));
  return OkStatus();
}

namespace {

Status CheckProblem(const Eigen::MatrixXd& k, const std::vector<UserPair>& pairs, const Eigen::VectorXd& labels) {
  KLS_RETURN_IF_ERROR(CheckUserKernel(k, "user_kernel"));
  const int n = static_cast<int>(k.rows());
  if (pairs.empty()) return InvalidArgumentError("pairs is empty");
  if (labels.size() != static_cast<Eigen::Index>(pairs.size()))
    return InvalidArgumentError("labels has " + Str(int(labels.size())) + " entries but there are " +
                                Str(int(pairs.size())) + " pairs");
  KLS_RETURN_IF_ERROR(CheckPairs(pairs, n, "pairs"));
  bool pos = false, neg = false;
  for (Eigen::Index i = 0; i < labels.size(); ++i) {
    if (labels[i] != 1.0 && labels[i] != -1.0)
      return InvalidArgumentError("labels[" + Str(int(i)) + "] = " + FormatNumber(labels[i]) + " must be +1 or -1");
    (labels[i] > 0 ? pos : neg) = true;
  }
  if (!pos || !neg)
    return InvalidArgumentError(std::string("labels are all ") + (pos ? "+1" : "-1") +
                                "; the logistic model needs both classes");
  return OkStatus();
}

}  // namespace

namespace {

// The best of the candidate pairs outside[0, nc) to add to the import set
// S (import_indices; q = its size) of `sys`, and its one-step point.
struct ImportCandidate {
  double value = std::numeric_limits<double>::infinity();  // J after the step
  int l = -1;                                               // -1: every candidate depends linearly on S
  Eigen::VectorXd col, alpha;                               // its kernel column and the step's α
};

ImportCandidate BestCandidate(const ImportSystem& sys, const Eigen::MatrixXd& user_kernel,
                              const std::vector<UserPair>& pairs, const Eigen::VectorXd& labels,
                              const PairwiseKlrOptions& options, const std::vector<int>& import_indices,
                              const std::vector<int>& outside, int nc, Eigen::VectorXd* link) {
  const int np = static_cast<int>(pairs.size());
  const int q = static_cast<int>(import_indices.size());
  // Score each candidate l by J after one Newton step on S ∪ {l} from (α, 0) (ZH01 §3).
  // Bordered Hessian [[H, h], [hᵀ, h_ll]] solved through H's factorization and the Schur complement.
  const Eigen::VectorXd u = q ? Eigen::VectorXd(sys.ldlt.solve(sys.grad)) : Eigen::VectorXd();
  const Eigen::VectorXd ku = q ? Eigen::VectorXd(sys.kns * u) : Eigen::VectorXd::Zero(np);
  ImportCandidate best;
  for (int t = 0; t < nc; ++t) {
    const int l = outside[t];
    const Eigen::VectorXd col = PairColumn(user_kernel, options.pair_kernel, pairs, pairs[l], link);
    Eigen::VectorXd ks(q);
    for (int s = 0; s < q; ++s) ks[s] = col[import_indices[s]];
    const double kll = col[l];
    const Eigen::VectorXd wk = sys.terms.w.cwiseProduct(col);
    const double grad_l = col.dot(sys.terms.g) + options.c * ks.dot(sys.alpha);
    const double hll = col.dot(wk) + options.c * kll;
    Eigen::VectorXd h, z;
    double schur = hll;
    if (q) {
      h = sys.kns.transpose() * wk + options.c * ks;
      z = sys.ldlt.solve(h);
      schur -= h.dot(z);
    }
    if (!(schur > 1e-12 * std::max(hll, 1e-300))) continue;  // column (numerically) in the span of S
    const double dl = -(grad_l - (q ? h.dot(u) : 0.0)) / schur;
    Eigen::VectorXd a(q + 1);
    if (q) a.head(q) = sys.alpha - u - z * dl;
    a[q] = dl;
    Eigen::VectorXd f = (q ? Eigen::VectorXd(sys.f - ku - sys.kns * (z * dl)) : Eigen::VectorXd::Zero(np));
    f += col * dl;
    const Eigen::VectorXd as = a.head(q);
    const double reg = as.dot(sys.kss * as) + 2.0 * dl * ks.dot(as) + kll * dl * dl;
    const double value = Loss(f, labels, false).loss + 0.5 * options.c * reg;
    if (std::isfinite(value) && value < best.value) {
      best.value = value;
      best.l = l;
      best.col = col;
      best.alpha = a;
    }
  }
  return best;
}

}  // namespace

StatusOr<PairwiseKlrResult> SolvePairwiseKlr(const Eigen::MatrixXd& user_kernel, const std::vector<UserPair>& pairs,
                                             const Eigen::VectorXd& labels, const PairwiseKlrOptions& options,
                                             const SolveControl& control) {
  return GuardExceptions("SolvePairwiseKlr", [&]() -> StatusOr<PairwiseKlrResult> {
    KLS_RETURN_IF_ERROR(options.Validate());
    KLS_RETURN_IF_ERROR(CheckProblem(user_kernel, pairs, labels));
    Stopwatch watch;
    const int np = static_cast<int>(pairs.size());
    const int max_q = std::min(options.max_import_vectors, np);
    std::mt19937_64 rng(options.seed);

    ImportSystem sys;
    sys.y = &labels;
    sys.c = options.c;
    sys.kns.resize(np, 0);
    sys.kss.resize(0, 0);
    sys.alpha.resize(0);
    sys.Newton(options.max_newton_iterations, options.newton_tolerance);  // S = ∅: f = 0, J = ln 2

    PairwiseKlrResult result;
    result.model.pair_kernel = options.pair_kernel;
    result.model.num_users = static_cast<int>(user_kernel.rows());
    std::vector<char> in_set(np, 0);
    std::vector<int> outside(np);
    std::iota(outside.begin(), outside.end(), 0);
    Eigen::VectorXd link(np);  // K_u(a_i, b_i)
    for (int i = 0; i < np; ++i) link[i] = user_kernel(pairs[i].a, pairs[i].b);
    std::vector<double> history = {sys.objective};  // J with 0, 1, 2, … import vectors
    result.stats.setup_seconds = watch.Seconds();
    result.stats.termination = Termination::kIterationLimit;

    while (static_cast<int>(result.import_indices.size()) < max_q) {
      const int q = static_cast<int>(result.import_indices.size());
      // Candidates: a random sample of the pairs outside S (ZH01's approximation for large N).
      outside.erase(std::remove_if(outside.begin(), outside.end(), [&](int i) { return in_set[i] != 0; }),
                    outside.end());
      if (outside.empty()) {
        result.stats.termination = Termination::kConverged;
        break;
      }
      const int nc = options.candidates_per_step == 0
                         ? static_cast<int>(outside.size())
                         : std::min<int>(options.candidates_per_step, static_cast<int>(outside.size()));
      for (int t = 0; t < nc; ++t) {
        std::uniform_int_distribution<int> pick(t, static_cast<int>(outside.size()) - 1);
        std::swap(outside[t], outside[pick(rng)]);
      }
      const ImportCandidate best =
          BestCandidate(sys, user_kernel, pairs, labels, options, result.import_indices, outside, nc, &link);
      if (best.l < 0) {  // every candidate depends linearly on S
        result.stats.termination = Termination::kConverged;
        break;
      }
      // Add l* and re-fit on S ∪ {l*} from the better of (α, 0) and the one-step point.
      const double before = sys.objective;
      Eigen::VectorXd ks(q);
      for (int s = 0; s < q; ++s) ks[s] = best.col[result.import_indices[s]];
      sys.kns.conservativeResize(np, q + 1);
      sys.kns.col(q) = best.col;
      sys.kss.conservativeResize(q + 1, q + 1);
      sys.kss.row(q).head(q) = ks.transpose();
      sys.kss.col(q).head(q) = ks;
      sys.kss(q, q) = best.col[best.l];
      if (best.value <= before) {
        sys.alpha = best.alpha;
      } else {
        sys.alpha.conservativeResize(q + 1);
        sys.alpha[q] = 0.0;
      }
      in_set[best.l] = 1;
      result.import_indices.push_back(best.l);
      if (!sys.Newton(options.max_newton_iterations, options.newton_tolerance)) {
        result.stats.termination = Termination::kNumericalIssue;
        break;
      }
      history.push_back(sys.objective);
      const int k = q + 1;
      result.stats.iterations = k;
      result.stats.objective_history.push_back(sys.objective);
      IterationRow row;
      row.iteration = k;
      row.objective = sys.objective;
      row.primal_residual = sys.grad.lpNorm<Eigen::Infinity>();
      row.dual_residual = before - sys.objective;
      row.seconds = watch.Seconds();
      ReportIteration(control, row, max_q, &result.stats);
      if (k >= options.stop_window &&
          history[k - options.stop_window] - history[k] <= options.relative_tolerance * std::abs(history[k])) {
        result.stats.termination = Termination::kConverged;
        break;
      }
      if (k == np) {
        result.stats.termination = Termination::kConverged;
        break;
      }
      Termination why;
      if (control.ShouldStop(&why)) {
        result.stats.termination = why;
        break;
      }
    }
    result.model.alpha = sys.alpha;
    for (int i : result.import_indices) result.model.import_pairs.push_back(pairs[i]);
    result.objective = sys.objective;
    result.gradient_inf = sys.grad.size() ? sys.grad.lpNorm<Eigen::Infinity>() : 0.0;
    int correct = 0;
    for (int i = 0; i < np; ++i) correct += labels[i] * sys.f[i] > 0;
    result.training_accuracy = static_cast<double>(correct) / np;
    result.stats.final_objective = sys.objective;
    result.stats.solve_seconds = watch.Seconds() - result.stats.setup_seconds;
    return result;
  });
}

namespace {

Status CheckModel(const Eigen::MatrixXd& k, const PairwiseKlrModel& model) {
  if (model.num_users != k.rows() || k.rows() != k.cols())
    return InvalidArgumentError("user_kernel is " + Str(int(k.rows())) + " x " + Str(int(k.cols())) +
                                " but the model was learned on " + Str(model.num_users) + " users");
  if (model.alpha.size() != static_cast<Eigen::Index>(model.import_pairs.size()))
    return InvalidArgumentError("model.alpha has " + Str(int(model.alpha.size())) + " entries but there are " +
                                Str(int(model.import_pairs.size())) + " import pairs");
  if (!model.alpha.allFinite()) return InvalidArgumentError("model.alpha has a non-finite entry");
  KLS_RETURN_IF_ERROR(model.pair_kernel.Validate("model.pair_kernel"));
  return CheckPairs(model.import_pairs, model.num_users, "model.import_pairs");
}

}  // namespace

StatusOr<PairwiseKlrEvaluation> EvaluatePairwiseKlr(const Eigen::MatrixXd& user_kernel,
                                                    const std::vector<UserPair>& pairs, const Eigen::VectorXd& labels,
                                                    const PairwiseKlrModel& model, double c) {
  return GuardExceptions("EvaluatePairwiseKlr", [&]() -> StatusOr<PairwiseKlrEvaluation> {
    KLS_RETURN_IF_ERROR(CheckPositiveOption("c", c));
    KLS_RETURN_IF_ERROR(CheckProblem(user_kernel, pairs, labels));
    KLS_RETURN_IF_ERROR(CheckModel(user_kernel, model));
    const int q = static_cast<int>(model.import_pairs.size());
    Eigen::MatrixXd kns(pairs.size(), q), kss(q, q);
    for (int s = 0; s < q; ++s) {
      kns.col(s) = PairColumn(user_kernel, model.pair_kernel, pairs, model.import_pairs[s]);
      kss.col(s) = PairColumn(user_kernel, model.pair_kernel, model.import_pairs, model.import_pairs[s]);
    }
    PairwiseKlrEvaluation e;
    e.f = kns * model.alpha;
    const LossTerms t = Loss(e.f, labels, true);
    e.objective = t.loss + 0.5 * c * model.alpha.dot(kss * model.alpha);
    e.gradient = kns.transpose() * t.g + c * (kss * model.alpha);
    return e;
  });
}

StatusOr<double> PairScore(const Eigen::MatrixXd& user_kernel, const PairwiseKlrModel& model, int u, int v) {
  KLS_RETURN_IF_ERROR(CheckModel(user_kernel, model));
  if (u < 0 || u >= model.num_users || v < 0 || v >= model.num_users)
    return InvalidArgumentError("pair (" + Str(u) + ", " + Str(v) + ") refers to a user outside [0, " +
                                Str(model.num_users) + ")");
  double f = 0.0;
  for (size_t s = 0; s < model.import_pairs.size(); ++s)
    f += model.alpha[s] * PairKernelValue(user_kernel, model.pair_kernel, {u, v}, model.import_pairs[s]);
  return f;
}

StatusOr<Eigen::MatrixXd> SocialStrengthMatrix(const Eigen::MatrixXd& user_kernel, const PairwiseKlrModel& model,
                                               StrengthScale scale) {
  return GuardExceptions("SocialStrengthMatrix", [&]() -> StatusOr<Eigen::MatrixXd> {
    KLS_RETURN_IF_ERROR(CheckModel(user_kernel, model));
    if (scale != StrengthScale::kProbability && scale != StrengthScale::kScore)
      return InvalidArgumentError("scale = " + Str(static_cast<int>(scale)) + " is not a StrengthScale");
    const int n = model.num_users, q = static_cast<int>(model.import_pairs.size());
    Eigen::MatrixXd ka(n, q), kb(n, q);  // K_u(·, a_s), K_u(·, b_s)
    for (int s = 0; s < q; ++s) {
      ka.col(s) = user_kernel.col(model.import_pairs[s].a);
      kb.col(s) = user_kernel.col(model.import_pairs[s].b);
    }
    Eigen::MatrixXd f(n, n);
    if (model.pair_kernel.kind == PairKernel::kDifference) {
      // f(u, v) = g(u) − g(v), g = Σ_s α_s (K_u(·, a_s) − K_u(·, b_s)).
      const Eigen::VectorXd g = (ka - kb) * model.alpha;
      f = g.replicate(1, n) - g.transpose().replicate(n, 1);
    } else {
      // f = ½ (P + Pᵀ), P = K_A diag(α) K_Bᵀ: P(u, v) = Σ_s α_s K_u(u, a_s) K_u(v, b_s).
      const Eigen::MatrixXd p = (ka * model.alpha.asDiagonal()) * kb.transpose();
      f = 0.5 * (p + p.transpose());
    }
    // Rank-one terms: b + β K_u(u, v), b = γ_b Σ_s α_s, β = γ_K Σ_s α_s K_u(a_s, b_s).
    double beta = 0.0;
    for (int s = 0; s < q; ++s) beta += model.alpha[s] * user_kernel(model.import_pairs[s].a, model.import_pairs[s].b);
    f.array() += model.pair_kernel.bias_weight * model.alpha.sum();
    f += (model.pair_kernel.link_weight * beta) * user_kernel;
    if (scale == StrengthScale::kProbability) f = f.unaryExpr([](double x) { return Sigmoid(x); });
    return f;
  });
}

double StrengthProbability(double f) { return Sigmoid(f); }

namespace {
constexpr uint32_t kKlrMagic = 0x4B4C534B;  // "KLSK"
constexpr uint32_t kKlrVersion = 1;
}  // namespace

std::string SerializePairwiseKlrModel(const PairwiseKlrModel& m) {
  ByteWriter w;
  w.PutHeader(kKlrMagic, kKlrVersion);
  w.Put<int32_t>(static_cast<int32_t>(m.pair_kernel.kind));
  w.Put<double>(m.pair_kernel.bias_weight);
  w.Put<double>(m.pair_kernel.link_weight);
  w.Put<int32_t>(m.num_users);
  std::vector<int> a, b;
  for (const UserPair& p : m.import_pairs) {
    a.push_back(p.a);
    b.push_back(p.b);
  }
  w.PutInts(a);
  w.PutInts(b);
  w.PutVector(m.alpha);
  return w.Take();
}

StatusOr<PairwiseKlrModel> ParsePairwiseKlrModel(const std::string& bytes) {
  ByteReader r(bytes, "pairwise KLR model");
  KLS_RETURN_IF_ERROR(r.ReadHeader(kKlrMagic, kKlrVersion));
  PairwiseKlrModel m;
  int32_t kind = 0, users = 0;
  KLS_RETURN_IF_ERROR(r.Get(&kind));
  KLS_RETURN_IF_ERROR(r.Get(&m.pair_kernel.bias_weight));
  KLS_RETURN_IF_ERROR(r.Get(&m.pair_kernel.link_weight));
  KLS_RETURN_IF_ERROR(r.Get(&users));
  std::vector<int> a, b;
  KLS_RETURN_IF_ERROR(r.GetInts(&a));
  KLS_RETURN_IF_ERROR(r.GetInts(&b));
  KLS_RETURN_IF_ERROR(r.GetVector(&m.alpha));
  KLS_RETURN_IF_ERROR(r.ExpectEnd());
  m.pair_kernel.kind = static_cast<PairKernel>(kind);
  m.num_users = users;
  if (users < 1) return DataLossError("pairwise KLR model: " + Str(users) + " users");
  if (a.size() != b.size() || static_cast<Eigen::Index>(a.size()) != m.alpha.size())
    return DataLossError("pairwise KLR model: " + Str(int(a.size())) + " / " + Str(int(b.size())) +
                         " import pair ends for " + Str(int(m.alpha.size())) + " coefficients");
  for (size_t s = 0; s < a.size(); ++s) m.import_pairs.push_back({a[s], b[s]});
  if (!m.alpha.allFinite()) return DataLossError("pairwise KLR model: non-finite coefficient");
  if (Status st = m.pair_kernel.Validate("pair_kernel"); !st.ok())
    return DataLossError("pairwise KLR model: " + st.message());
  if (Status st = CheckPairs(m.import_pairs, users, "import_pairs"); !st.ok())
    return DataLossError("pairwise KLR model: " + st.message());
  return m;
}

}  // namespace kls
