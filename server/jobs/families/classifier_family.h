// onk and mkl train a classifier (core/mkl/classifier_training.h); they share
// the run and the data-set check, and differ in their options message.
#pragma once

#include <cstdio>
#include <string>

#include "core/mkl/classifier_training.h"
#include "server/jobs/families/family_util.h"
#include "server/jobs/solver_dispatch.h"
#include "server/jobs/solver_family.h"

namespace kls::server::families {

/// The options onk and mkl share: c (unset = chosen by cross-validation),
/// positive_class, folds, seed; ClassifierTrainingOptions::Validate checks them.
template <class Proto>
void CopySharedOptions(const Proto& p, ClassifierTrainingOptions* o) {
  if (p.has_c()) o->c = p.c();
  if (p.has_positive_class()) o->positive_class = p.positive_class();
  if (p.has_folds()) o->folds = p.folds();
  if (p.has_seed()) o->seed = p.seed();
}

template <class Proto>
class ClassifierFamily : public TypedFamily<Proto, ClassifierTrainingOptions> {
 public:
  ClassifierFamily(std::string name) : TypedFamily<Proto, ClassifierTrainingOptions>(std::move(name), [] {
    SolverFamily::Traits t;
    t.attachments = {kClassifierAttachment};
    return t;
  }()) {}

  Status CheckDataset(const JobSpec& spec, const store::DatasetRecord& d, store::Store*) const override {
    if (d.num_classes >= 2) return OkStatus();
    return FailedPreconditionError("data set \"" + d.id + "\" has " + std::to_string(d.num_classes) + " classes; " +
                                   spec.method + " trains a classifier and needs labels of at least two classes");
  }

 protected:
  StatusOr<JobOutput> RunTyped(const ClassifierTrainingOptions& o, const JobSpec&, const store::StoredDataset& data,
                               store::Store*, const SolveControl& control) const override {
    if (!data.data.has_labels()) {
      return FailedPreconditionError("the data set has no labels; a classifier learns from labelled rows");
    }
    KLS_ASSIGN_OR_RETURN(ClassifierTrainingResult r,
                         TrainClassifier(data.data.features, data.data.labels, o, control));
    JobOutput out;
    out.stats = r.stats;
    out.primal_residual = 1.0 - r.training_accuracy;  // training error
    char c[48];  // the C used (chosen by cross-validation when unset)
    std::snprintf(c, sizeof(c), ",\"c\":%.17g", r.c);
    out.summary_notes += c;
    if (r.train_kernel.size() == 0) {  // stopped before the model existed
      if (out.stats.termination == Termination::kTimeLimit) {
        return DeadlineExceededError("the deadline passed before the classifier was trained");
      }
      return out;
    }
    KLS_ASSIGN_OR_RETURN(out.kernel, LearnedKernel::FromDenseKernel(r.train_kernel, 1e-10));
    out.attachments.push_back({kClassifierAttachment, SerializeClassifier(r.model)});
    return out;
  }
};

}  // namespace kls::server::families
