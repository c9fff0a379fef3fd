// bcd_npkl: BCDNPKL (core/npkl/bcd_npkl.h), options kls.v1.BcdNpklOptions.
// graph.delta unset is C/2 and follows the C being tried (BCDNPKL §4.2).
#include "server/jobs/families/npkl_options.h"
#include "server/jobs/families/pairwise_family.h"

#include <spdlog/spdlog.h>

namespace kls::server {

namespace {

// The scalar options: proto field ↔ core member.
const std::vector<families::OptionField<BcdNpklOptions>>& Fields() {
  static const std::vector<families::OptionField<BcdNpklOptions>> fields = {
      {"c", &BcdNpklOptions::c},
      {"rank", &BcdNpklOptions::rank},
      {"max_iterations", &BcdNpklOptions::max_iterations},
      {"tolerance", &BcdNpklOptions::tolerance},
      {"seed", &BcdNpklOptions::seed}
  };
  return fields;
}

}  // namespace

BcdNpklOptions ToCore(const kls::v1::BcdNpklOptions& p) {
  BcdNpklOptions o;
  o.loss = families::LossToCore(p.loss(), o.loss);
  families::CopyFromProto(p, Fields(), &o);
  return o;
}

kls::v1::BcdNpklOptions ToProto(const BcdNpklOptions& o) {
  kls::v1::BcdNpklOptions p;
  p.set_loss(families::LossToProto(o.loss));
  families::CopyToProto(o, Fields(), &p);
  return p;
}

namespace {

class BcdNpklFamily : public families::PairwiseFamily<kls::v1::BcdNpklOptions, BcdNpklOptions> {
 public:
  BcdNpklFamily() : PairwiseFamily(kMethodBcdNpkl, [] {
    Traits t;
    t.delta_follows_c = true;
    t.loss_weight_field = "c";
    return t;
  }()) {}

  double LossWeight(const JobSpec& spec) const override { return spec.Options<BcdNpklOptions>().c; }

 protected:
  StatusOr<BcdNpklOptions> Convert(const kls::v1::BcdNpklOptions& p) const override {
    KLS_RETURN_IF_ERROR(families::ValidateLossEnum(name(), p.loss()));
    return ToCore(p);
  }
  void SetWeight(BcdNpklOptions* o, double weight) const override { o->c = weight; }
  // Self pairs (i, i) — the admm protocol's n must-links K_ii ≥ 1 — have no
  // place in BCDNPKL's column-block subproblem (eq. (6) needs j ≠ i): they are
  // left out, and the log says how many, so one data set serves every family.
  StatusOr<NpklResult> Solve(const NpklProblem& problem, const BcdNpklOptions& o,
                             const SolveControl& control) const override {
    int self_pairs = 0;
    for (const Pair& p : problem.constraints.pairs) self_pairs += p.i == p.j ? 1 : 0;
    if (self_pairs == 0) return SolveBcdNpkl(problem, o, control);
    NpklProblem without = problem;
    without.constraints.pairs.clear();
    for (const Pair& p : problem.constraints.pairs) {
      if (p.i != p.j) without.constraints.pairs.push_back(p);
    }
    spdlog::info("bcd_npkl: {} self pairs (i, i) left out of {} constraints (BCDNPKL's block subproblem needs i != j)",
                 self_pairs, problem.constraints.size());
    return SolveBcdNpkl(without, o, control);
  }
};

KLS_REGISTER_SOLVER_FAMILY(BcdNpklFamily);

}  // namespace
}  // namespace kls::server
