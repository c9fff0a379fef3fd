#include "server/jobs/solver_family.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "kls/v1/jobs.pb.h"

namespace kls::server {

Status SolverFamily::CheckDataset(const JobSpec& spec, const store::DatasetRecord& dataset,
                                  store::Store* store) const {
  return OkStatus();
}

StatusOr<NpklResult> SolverFamily::RunWithWeight(const JobSpec& spec, const NpklProblem& problem,
                                                 std::optional<double> weight, bool single_thread,
                                                 const std::shared_ptr<const Eigen::MatrixXd>& warm,
                                                 const SolveControl& control) const {
  return InternalError("family " + name() + " does not learn from pairwise constraints");
}

FamilyRegistry& FamilyRegistry::Global() {
  static FamilyRegistry* registry = new FamilyRegistry();  // never destroyed: read by late threads
  return *registry;
}

void FamilyRegistry::Add(std::unique_ptr<SolverFamily> family) {
  for (const auto& f : families_) {
    if (f->name() == family->name() || f->options_type() == family->options_type()) {
      std::fprintf(stderr, "kls: solver family \"%s\" (%s) registered twice\n", family->name().c_str(),
                   family->options_type()->full_name().c_str());
      std::abort();
    }
  }
  families_.push_back(std::move(family));
}

const SolverFamily* FamilyRegistry::Find(std::string_view name) const {
  for (const auto& f : families_)
    if (f->name() == name) return f.get();
  return nullptr;
}

const SolverFamily* FamilyRegistry::FindByType(const google::protobuf::Descriptor* options_type) const {
  for (const auto& f : families_)
    if (f->options_type() == options_type) return f.get();
  return nullptr;
}

const SolverFamily* FamilyRegistry::FindByTypeName(std::string_view full_name) const {
  for (const auto& f : families_)
    if (f->options_type()->full_name() == full_name) return f.get();
  return nullptr;
}

std::vector<const SolverFamily*> FamilyRegistry::All() const {
  // Position in the oneof (field number), families outside it after, by name.
  const google::protobuf::OneofDescriptor* oneof = kls::v1::SubmitJobRequest::descriptor()->FindOneofByName("solver");
  auto rank = [&](const SolverFamily* f) {
    for (int i = 0; i < oneof->field_count(); ++i) {
      if (oneof->field(i)->message_type() == f->options_type()) return i;
    }
    return oneof->field_count();
  };
  std::vector<const SolverFamily*> out;
  for (const auto& f : families_) out.push_back(f.get());
  std::sort(out.begin(), out.end(), [&](const SolverFamily* a, const SolverFamily* b) {
    const int ra = rank(a), rb = rank(b);
    return ra != rb ? ra < rb : a->name() < b->name();
  });
  return out;
}

std::string FamilyRegistry::Names() const {
  std::string out;
  for (const SolverFamily* f : All()) out += (out.empty() ? "" : ", ") + f->name();
  return out;
}

std::string FamilyRegistry::NamesStoring(std::string_view attachment) const {
  std::string out;
  for (const SolverFamily* f : All()) {
    const auto& a = f->traits().attachments;
    if (std::find(a.begin(), a.end(), attachment) != a.end()) out += (out.empty() ? "" : " or ") + f->name();
  }
  return out;
}

}  // namespace kls::server
