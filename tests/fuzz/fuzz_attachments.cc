// Fuzz target: the decoders of a stored kernel's attachments — the social
// graph and relations (core/social/social_model.h), the pairwise KLR model
// (core/social/pairwise_klr.h), the MKL classifier
// (core/mkl/classifier_training.h) and the feature scaling statistics
// (core/data/feature_scaling.h). The artifact's CRC guards them against
// damage on disk, so these bytes are what a store written by an older or
// buggy version — or a hostile replica — would hand the decoders. The first
// byte picks the decoder; the rest are its bytes. A model that decodes is
// then used, as a query would.
#include <cstddef>
#include <algorithm>
#include <cstdint>
#include <string>

#include <Eigen/Dense>

#include "core/data/feature_scaling.h"
#include "core/mkl/classifier_training.h"
#include "core/social/pairwise_klr.h"
#include "core/social/social_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 5) {
    case 0:
      (void)kls::ParseSocialGraph(bytes, 8);
      break;
    case 1: {
      const Eigen::MatrixXd visual = Eigen::MatrixXd::Ones(6, 2);
      auto community = kls::ParseCommunityRelations(bytes, visual);
      if (community.ok()) (void)community->Validate();
      break;
    }
    case 2:
      (void)kls::ParsePairwiseKlrModel(bytes);
      break;
    case 3: {
      auto model = kls::ParseClassifier(bytes);
      if (model.ok() && model->Validate().ok() && model->support_vectors.cols() <= 64) {
        (void)model->Predict(Eigen::MatrixXd::Ones(2, model->support_vectors.cols()));
      }
      break;
    }
    case 4: {
      auto scaler = kls::ParseFeatureScaler(bytes);
      if (scaler.ok() && scaler->dim() <= 64) (void)scaler->Apply(Eigen::MatrixXd::Ones(2, std::max(1, scaler->dim())));
      break;
    }
  }
  return 0;
}
