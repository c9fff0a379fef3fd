#include "core/social/social_model.h"

#include <cmath>
#include <string>
#include <utility>

#include "core/common/byte_io.h"
#include "core/social/kernel_alignment.h"
#include "core/social/recommendation.h"

namespace kls {

const char* StrengthWeightingName(StrengthWeighting w) {
  switch (w) {
    case StrengthWeighting::kKta:
      return "kta";
    case StrengthWeighting::kUniform:
      return "uniform";
    case StrengthWeighting::kKlr:
      return "klr";
  }
  return "unknown";
}

namespace {

// The KLR options the service sets, under the service's flat field names.
Status ValidateKlrFields(const SocialStrengthOptions& o, const std::string& p) {
  if (!(o.klr.c > 0.0) || !std::isfinite(o.klr.c))
    return InvalidArgumentError(p + ".klr_c = " + FormatNumber(o.klr.c) + " must be finite and > 0");
  for (const auto& [name, value] : {std::pair<const char*, int>{"klr_import_vectors", o.klr.max_import_vectors},
                                    {"klr_positives", o.klr_pairs.positives_per_user},
                                    {"klr_negatives", o.klr_pairs.negatives_per_user}}) {
    if (value < 1) return InvalidArgumentError(p + "." + name + " = " + std::to_string(value) + " must be >= 1");
  }
  const double bias = o.klr.pair_kernel.bias_weight, link = o.klr.pair_kernel.link_weight;
  if (!(bias >= 0.0) || !std::isfinite(bias) || !(link >= 0.0) || !std::isfinite(link)) {
    return InvalidArgumentError(p + ".klr_bias_weight = " + FormatNumber(bias) + " and klr_link_weight = " +
                                FormatNumber(link) + " must be finite and >= 0");
  }
  return OkStatus();
}

}  // namespace

Status SocialStrengthOptions::Validate(std::string_view path) const {
  const std::string p(path);
  if (weighting != StrengthWeighting::kKta && weighting != StrengthWeighting::kUniform &&
      weighting != StrengthWeighting::kKlr) {
    return InvalidArgumentError(p + ".weighting = " + std::to_string(static_cast<int>(weighting)) +
                                " is not a StrengthWeighting");
  }
  if (weighting == StrengthWeighting::kKlr) KLS_RETURN_IF_ERROR(ValidateKlrFields(*this, p));
  KLS_RETURN_IF_ERROR(kernels.Validate(path));
  if (weighting == StrengthWeighting::kKlr) {
    KLS_RETURN_IF_ERROR(klr_pairs.Validate(p + ".klr_pairs"));
    KLS_RETURN_IF_ERROR(klr.Validate(p + ".klr"));
  }
  return OkStatus();
}

StatusOr<SocialStrengthModel> LearnSocialStrength(const Community& data, const SocialStrengthOptions& options,
                                                  const SolveControl& control) {
  return GuardExceptions("LearnSocialStrength", [&]() -> StatusOr<SocialStrengthModel> {
    KLS_RETURN_IF_ERROR(options.Validate());
    KLS_RETURN_IF_ERROR(data.Validate());
    SocialStrengthModel model;
    Termination why;
    if (control.ShouldStop(&why)) {
      model.stats.termination = why;
      return model;
    }
    Stopwatch watch;
    UserKernelOptions ko = options.kernels;
    ko.repair_psd = true;  // the combination must be PSD to be stored factored
    KLS_ASSIGN_OR_RETURN(UserKernels kernels, ComputeUserKernels(data, ko));
    model.stats.setup_seconds = watch.Seconds();
    if (control.ShouldStop(&why)) {
      model.stats.termination = why;
      return model;
    }
    const int n = data.num_users;
    Eigen::MatrixXd contact_target;
    if (options.weighting == StrengthWeighting::kUniform) {
      model.weights.fill(1.0 / kNumUserKernels);
    } else {
      // Target (§7.5.1): the observed contact graph.
      Eigen::MatrixXd y = Eigen::MatrixXd::Zero(n, n);
      for (int u = 0; u < n; ++u)
        for (int v : data.contacts[u]) y(u, v) = 1.0;
      std::vector<const Eigen::MatrixXd*> ks;
      for (const auto& k : kernels.k) ks.push_back(&k);
      KLS_ASSIGN_OR_RETURN(UserKtaResult kta, SolveKta(ks, y));
      if (!(kta.weights.sum() > 0)) {
        return FailedPreconditionError("no user kernel aligns with the contact graph (does the data set have contacts?)");
      }
      for (int t = 0; t < kNumUserKernels; ++t) model.weights[t] = kta.weights[t];
      model.alignment = kta.alignment;
    }
    Eigen::MatrixXd f = Eigen::MatrixXd::Zero(n, n);
    for (int t = 0; t < kNumUserKernels; ++t)
      if (model.weights[t] > 0) f += model.weights[t] * kernels.k[t];
    f = (0.5 * (f + f.transpose())).eval();
    KLS_ASSIGN_OR_RETURN(model.strength, LearnedKernel::FromDenseKernel(f));
    model.graph.num_groups = data.num_groups;
    model.graph.contacts = data.contacts;
    model.graph.groups = data.groups;
    model.stats.iterations = 1;
    model.stats.final_objective = model.alignment;
    model.stats.termination = Termination::kConverged;
    if (options.weighting == StrengthWeighting::kKlr) {
      // Second stage (§7.4): training pairs of every user (§7.4.2: positives = the contacts with the most
      // mutual comments K³, negatives = non-contacts in the tail of every base kernel), then the IVM on
      // (7.3) with the first-stage kernel as K_u — the stored (factored) one, so serving sees the same K_u.
      const Eigen::MatrixXd ku = model.strength.Dense();
      std::vector<const Eigen::MatrixXd*> sims;
      for (const auto& k : kernels.k) sims.push_back(&k);
      std::vector<int> anchors(n);
      for (int u = 0; u < n; ++u) anchors[u] = u;
      TrainingPairOptions tpo = options.klr_pairs;
      tpo.symmetric = options.klr.pair_kernel.kind == PairKernel::kSymmetricProduct;
      KLS_ASSIGN_OR_RETURN(TrainingPairs tp,
                           SelectTrainingPairs(data.contacts, sims, kernels[UserKernel::kComment], anchors, tpo));
      if (tp.num_positive == 0 || tp.num_negative == 0) {
        return FailedPreconditionError("pairwise KLR needs positive and negative training pairs; §7.4.2 selected " +
                                       std::to_string(tp.num_positive) + " positive and " +
                                       std::to_string(tp.num_negative) + " negative pairs");
      }
      KLS_ASSIGN_OR_RETURN(PairwiseKlrResult klr, SolvePairwiseKlr(ku, tp.pairs, tp.labels, options.klr, control));
      model.klr = std::move(klr.model);
      model.klr_training_accuracy = klr.training_accuracy;
      model.klr_training_pairs = static_cast<int>(tp.pairs.size());
      model.stats.iterations = klr.stats.iterations;
      model.stats.final_objective = klr.objective;
      model.stats.objective_history = std::move(klr.stats.objective_history);
      model.stats.termination = klr.stats.termination;
    }
    model.stats.solve_seconds = watch.Seconds() - model.stats.setup_seconds;
    return model;
  });
}

std::vector<ScoredItem> RecommendFriends(const LearnedKernel& strength, const SocialGraph& graph, int u, int k) {
  return RecommendFriendsFromRow(strength.row(u), graph.contacts[u], u, k);
}

std::vector<ScoredItem> RecommendGroups(const LearnedKernel& strength, const SocialGraph& graph, int u, int k) {
  return RecommendGroupsFromRow(strength.row(u), graph.groups, graph.num_groups, u, k);
}

StatusOr<KlrStrength> KlrStrength::Create(const LearnedKernel& k, PairwiseKlrModel model) {
  const int n = k.num_points(), q = static_cast<int>(model.import_pairs.size());
  if (model.num_users != n) {
    return InvalidArgumentError("the KLR model was learned on " + std::to_string(model.num_users) +
                                " users but the kernel has " + std::to_string(n));
  }
  if (model.alpha.size() != q || !model.alpha.allFinite()) {
    return InvalidArgumentError("the KLR model has " + std::to_string(model.alpha.size()) +
                                " coefficients (finite required) for " + std::to_string(q) + " import pairs");
  }
  KLS_RETURN_IF_ERROR(model.pair_kernel.Validate("model.pair_kernel"));
  KlrStrength out;
  out.ka_.resize(n, q);
  out.kb_.resize(n, q);
  for (int s = 0; s < q; ++s) {
    const UserPair p = model.import_pairs[s];
    KLS_RETURN_IF_ERROR(k.CheckIndex(p.a, "model.import_pairs.a"));
    KLS_RETURN_IF_ERROR(k.CheckIndex(p.b, "model.import_pairs.b"));
    out.ka_.col(s) = k.row(p.a);
    out.kb_.col(s) = k.row(p.b);
    out.beta_ += model.alpha[s] * k.value(p.a, p.b);
  }
  // f(u, v) = Σ_s α_s k₀(û, û_s) + b + β K_u(u, v) (pairwise_klr.h): b = γ_b Σ α_s, β = γ_K Σ α_s K_u(a_s, b_s).
  out.beta_ *= model.pair_kernel.link_weight;
  out.bias_ = model.pair_kernel.bias_weight * model.alpha.sum();
  if (model.pair_kernel.kind == PairKernel::kDifference) out.g_ = (out.ka_ - out.kb_) * model.alpha;
  out.model_ = std::move(model);
  return out;
}

Eigen::VectorXd KlrStrength::Row(const LearnedKernel& k, int u) const {
  Eigen::VectorXd f;
  if (model_.pair_kernel.kind == PairKernel::kDifference) {
    f = Eigen::VectorXd::Constant(g_.size(), g_[u]) - g_;  // g(u) − g(v)
  } else {
    // ½ Σ_s α_s [K(u, a_s) K(v, b_s) + K(u, b_s) K(v, a_s)] for every v: two matrix–vector products.
    const Eigen::VectorXd ca = 0.5 * model_.alpha.cwiseProduct(kb_.row(u).transpose());
    const Eigen::VectorXd cb = 0.5 * model_.alpha.cwiseProduct(ka_.row(u).transpose());
    f = ka_ * ca + kb_ * cb;
  }
  f.array() += bias_;
  if (beta_ != 0.0) f += beta_ * k.row(u);
  return f.unaryExpr([](double x) { return StrengthProbability(x); });
}

double KlrStrength::Score(const LearnedKernel& k, int u, int v) const {
  double f;
  if (model_.pair_kernel.kind == PairKernel::kDifference) {
    f = g_[u] - g_[v];
  } else {
    f = 0.5 * (model_.alpha.array() * (ka_.row(u).array() * kb_.row(v).array() +
                                        kb_.row(u).array() * ka_.row(v).array()).transpose())
                  .sum();
  }
  f += bias_ + (beta_ != 0.0 ? beta_ * k.value(u, v) : 0.0);
  return StrengthProbability(f);
}

size_t KlrStrength::memory_bytes() const {
  return sizeof(double) * static_cast<size_t>(ka_.size() + kb_.size() + g_.size() + model_.alpha.size()) +
         sizeof(UserPair) * model_.import_pairs.size();
}

StatusOr<Eigen::MatrixXd> StrengthGraphWeights(const LearnedKernel& strength, const KlrStrength* klr,
                                               const SolveControl& control) {
  const int n = strength.num_points();
  Eigen::MatrixXd w(n, n);
  const LearnedKernel::Embedding& v = strength.embedding();
  for (int first = 0; first < n; first += 256) {
    KLS_RETURN_IF_ERROR(control.CheckStop("StrengthGraphWeights"));
    const int last = std::min(n, first + 256);
    if (klr) {
      for (int u = first; u < last; ++u) w.row(u) = klr->Row(strength, u).transpose();
    } else {
      w.middleRows(first, last - first).noalias() = v.middleRows(first, last - first) * v.transpose();
      w.middleRows(first, last - first) = w.middleRows(first, last - first).cwiseMax(0.0);
    }
  }
  // W = (W + Wᵀ)/2 with a zero diagonal, in place, a block of columns at a time.
  for (int first = 0; first < n; first += 256) {
    KLS_RETURN_IF_ERROR(control.CheckStop("StrengthGraphWeights"));
    for (int j = first; j < std::min(n, first + 256); ++j) {
      for (int i = 0; i < j; ++i) {
        const double s = 0.5 * (w(i, j) + w(j, i));
        w(i, j) = s;
        w(j, i) = s;
      }
      w(j, j) = 0.0;
    }
  }
  return w;
}

Eigen::MatrixXd StrengthGraphWeights(const LearnedKernel& strength, const KlrStrength* klr) {
  return StrengthGraphWeights(strength, klr, SolveControl()).value();  // a default control never stops
}

namespace {
constexpr uint32_t kGraphMagic = 0x4B4C5347;  // "KLSG"
constexpr uint32_t kGraphVersion = 1;

Status CheckLists(const std::vector<std::vector<int>>& lists, int limit, const char* what) {
  for (size_t u = 0; u < lists.size(); ++u)
    for (int v : lists[u])
      if (v < 0 || v >= limit) {
        return DataLossError(std::string("social graph: ") + what + "[" + std::to_string(u) + "] holds " +
                             std::to_string(v) + ", outside [0, " + std::to_string(limit) + ")");
      }
  return OkStatus();
}

// Every user's contact list and group list, as both encodings store them.
void PutUserLists(ByteWriter& w, const std::vector<std::vector<int>>& contacts,
                  const std::vector<std::vector<int>>& groups) {
  w.Put<uint64_t>(contacts.size());
  for (size_t u = 0; u < contacts.size(); ++u) {
    w.PutInts(contacts[u]);
    w.PutInts(groups[u]);
  }
}

Status GetUserLists(ByteReader& r, int num_users, std::vector<std::vector<int>>* contacts,
                    std::vector<std::vector<int>>* groups) {
  uint64_t users = 0;
  KLS_RETURN_IF_ERROR(r.Get(&users));
  if (users != static_cast<uint64_t>(num_users)) {
    return DataLossError(r.what() + " has " + std::to_string(users) + " user lists for " +
                         std::to_string(num_users) + " users");
  }
  contacts->assign(users, {});
  groups->assign(users, {});
  for (uint64_t u = 0; u < users; ++u) {
    KLS_RETURN_IF_ERROR(r.GetInts(&(*contacts)[u]));
    KLS_RETURN_IF_ERROR(r.GetInts(&(*groups)[u]));
  }
  return OkStatus();
}
}  // namespace

std::string SerializeSocialGraph(const SocialGraph& g) {
  ByteWriter w;
  w.PutHeader(kGraphMagic, kGraphVersion);
  w.Put<int32_t>(g.num_groups);
  PutUserLists(w, g.contacts, g.groups);
  return w.Take();
}

StatusOr<SocialGraph> ParseSocialGraph(const std::string& bytes, int num_users) {
  ByteReader r(bytes, "social graph");
  KLS_RETURN_IF_ERROR(r.ReadHeader(kGraphMagic, kGraphVersion));
  SocialGraph g;
  int32_t groups = 0;
  KLS_RETURN_IF_ERROR(r.Get(&groups));
  if (groups < 0) return DataLossError("social graph: negative group count");
  g.num_groups = groups;
  KLS_RETURN_IF_ERROR(GetUserLists(r, num_users, &g.contacts, &g.groups));
  KLS_RETURN_IF_ERROR(r.ExpectEnd());
  KLS_RETURN_IF_ERROR(CheckLists(g.contacts, num_users, "contacts"));
  KLS_RETURN_IF_ERROR(CheckLists(g.groups, g.num_groups, "groups"));
  return g;
}

namespace {
constexpr uint32_t kCommunityMagic = 0x4B4C5355;  // "KLSU"
constexpr uint32_t kCommunityVersion = 1;
}  // namespace

std::string SerializeCommunityRelations(const Community& d) {
  ByteWriter w;
  w.PutHeader(kCommunityMagic, kCommunityVersion);
  w.Put<int32_t>(d.num_users);
  w.Put<int32_t>(d.num_groups);
  w.Put<int64_t>(d.photo_tags.cols());
  w.PutInts(d.photo_owner);
  w.PutInts(d.photo_day);
  w.PutVector(Eigen::Map<const Eigen::VectorXd>(d.photo_latitude.data(), d.photo_latitude.size()));
  w.PutVector(Eigen::Map<const Eigen::VectorXd>(d.photo_longitude.data(), d.photo_longitude.size()));
  std::vector<int> tag_photo, tag_id;
  for (int k = 0; k < d.photo_tags.outerSize(); ++k)
    for (Eigen::SparseMatrix<double>::InnerIterator it(d.photo_tags, k); it; ++it) {
      tag_photo.push_back(static_cast<int>(it.row()));
      tag_id.push_back(static_cast<int>(it.col()));
    }
  w.PutInts(tag_photo);
  w.PutInts(tag_id);
  std::vector<int> cp, ca;
  for (const Comment& c : d.comments) {
    cp.push_back(c.photo);
    ca.push_back(c.author);
  }
  w.PutInts(cp);
  w.PutInts(ca);
  PutUserLists(w, d.contacts, d.groups);
  std::vector<int> fu, fp;
  for (const auto& [u, p] : d.favourites) {
    fu.push_back(u);
    fp.push_back(p);
  }
  w.PutInts(fu);
  w.PutInts(fp);
  return w.Take();
}

StatusOr<Community> ParseCommunityRelations(const std::string& bytes, const Eigen::MatrixXd& visual) {
  ByteReader r(bytes, "social data");
  KLS_RETURN_IF_ERROR(r.ReadHeader(kCommunityMagic, kCommunityVersion));
  Community d;
  int32_t users = 0, groups = 0;
  int64_t vocabulary = 0;
  KLS_RETURN_IF_ERROR(r.Get(&users));
  KLS_RETURN_IF_ERROR(r.Get(&groups));
  KLS_RETURN_IF_ERROR(r.Get(&vocabulary));
  if (users < 0 || groups < 0 || vocabulary < 0 || vocabulary > (int64_t{1} << 31)) {
    return DataLossError("social data: bad counts");
  }
  d.num_users = users;
  d.num_groups = groups;
  Eigen::VectorXd lat, lon;
  KLS_RETURN_IF_ERROR(r.GetInts(&d.photo_owner));
  KLS_RETURN_IF_ERROR(r.GetInts(&d.photo_day));
  KLS_RETURN_IF_ERROR(r.GetVector(&lat));
  KLS_RETURN_IF_ERROR(r.GetVector(&lon));
  d.photo_latitude.assign(lat.data(), lat.data() + lat.size());
  d.photo_longitude.assign(lon.data(), lon.data() + lon.size());
  std::vector<int> tag_photo, tag_id, cp, ca, fu, fp;
  KLS_RETURN_IF_ERROR(r.GetInts(&tag_photo));
  KLS_RETURN_IF_ERROR(r.GetInts(&tag_id));
  KLS_RETURN_IF_ERROR(r.GetInts(&cp));
  KLS_RETURN_IF_ERROR(r.GetInts(&ca));
  KLS_RETURN_IF_ERROR(GetUserLists(r, users, &d.contacts, &d.groups));
  KLS_RETURN_IF_ERROR(r.GetInts(&fu));
  KLS_RETURN_IF_ERROR(r.GetInts(&fp));
  KLS_RETURN_IF_ERROR(r.ExpectEnd());
  const int photos = static_cast<int>(d.photo_owner.size());
  if (tag_photo.size() != tag_id.size() || cp.size() != ca.size() || fu.size() != fp.size() ||
      visual.rows() != photos) {
    return DataLossError("social data: mismatched array lengths");
  }
  std::vector<Eigen::Triplet<double>> t;
  for (size_t k = 0; k < tag_photo.size(); ++k) {
    if (tag_photo[k] < 0 || tag_photo[k] >= photos || tag_id[k] < 0 || tag_id[k] >= vocabulary) {
      return DataLossError("social data: tag entry " + std::to_string(k) + " out of range");
    }
    t.emplace_back(tag_photo[k], tag_id[k], 1.0);
  }
  d.photo_tags.resize(photos, static_cast<Eigen::Index>(vocabulary));
  d.photo_tags.setFromTriplets(t.begin(), t.end());
  for (size_t k = 0; k < cp.size(); ++k) d.comments.push_back({cp[k], ca[k]});
  for (size_t k = 0; k < fu.size(); ++k) d.favourites.emplace_back(fu[k], fp[k]);
  d.photo_visual = visual;
  if (Status s = d.Validate(); !s.ok()) return DataLossError("social data: " + s.message());
  return d;
}

}  // namespace kls
