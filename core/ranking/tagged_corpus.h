// A seeded generator of a tagged image corpus with noisy, incomplete tags and
// visual clusters — the stand-in for the thesis's Flickr crawl (§6.4.1, no
// crawl exists here). The planted structure, in the order it is drawn:
//
//   * num_concepts query concepts (the 20 test queries of Table 6.2) and as
//     many confuser concepts. Concept c has one query tag (its name), a set of
//     related tags (synonyms, sub-objects) and `modes_per_concept` visual
//     cluster centres μ_{c,m} ~ N(0, I_d).
//   * Polysemy: confuser c' of query concept c shares c's query tag (the
//     thesis's "Ferrari is a red car" ambiguity): a confuser image carries that
//     tag with probability p_confuser_tag.
//   * Shared photographic styles s (night, indoor, macro, …): a style offset
//     σ_s ~ N(0, style_scale² I_d) added to any image of any concept, with its
//     own style tags — visual and textual similarity that crosses concepts
//     (the semantic gap).
//   * Visual feature x = offset + μ_{c,m} + σ_s + ε, ε ~ N(0, visual_noise² I),
//     with a common positive offset (global colour/texture histograms are
//     non-negative with a large common mean), so linear and polynomial kernels
//     are dominated by that mean while RBF is not.
//   * Tags of an image of concept c: its query tag with probability
//     p_query_tag (incomplete), each related tag with p_related_tag, each of
//     its style's tags with p_style_tag, Poisson(mean_noise_tags) noise tags
//     drawn from a Zipf(1) law over a general vocabulary (camera models,
//     years, places), and with probability p_wrong_tag the query tag of a
//     random other concept (plain tagging errors).
//
// Relevance for query c is the image's true concept == c, which the tags
// alone cannot give back. Deterministic for a given seed.
#pragma once

#include <Eigen/Core>
#include <Eigen/SparseCore>
#include <cstdint>
#include <string>
#include <vector>

#include "core/common/status.h"

namespace kls {

struct TaggedCorpusOptions {
  int num_concepts = 20;           ///< query concepts (>= 1); as many confusers are added
  int images_per_concept = 300;    ///< images of every (query or confuser) concept (>= 1)
  int visual_dim = 48;             ///< d of the visual features (>= 1)
  int modes_per_concept = 2;       ///< visual clusters per concept (>= 1)
  double visual_noise = 0.7;       ///< within-cluster noise std (>= 0); centres are N(0, I)
  int num_styles = 6;              ///< shared photographic styles (>= 1)
  double style_scale = 0.8;        ///< std of a style offset (>= 0)
  double offset = 6.0;             ///< common positive feature mean (>= 0)
  int related_tags_per_concept = 6;  ///< related tags per concept (>= 0)
  int tags_per_style = 2;          ///< tags of each style (>= 0)
  int noise_vocabulary = 400;      ///< size of the general noise vocabulary (>= 1)
  double p_query_tag = 0.6;        ///< P(relevant image carries its query tag), in [0, 1]
  double p_confuser_tag = 0.4;     ///< P(confuser image carries the shared query tag), in [0, 1]
  double p_related_tag = 0.3;      ///< P(each related tag), in [0, 1]
  double p_style_tag = 0.3;        ///< P(each style tag), in [0, 1]
  double mean_noise_tags = 4.0;    ///< Poisson mean of noise tags per image (>= 0)
  double p_wrong_tag = 0.05;       ///< P(a random other query tag), in [0, 1]
  uint64_t seed = 1;

  Status Validate() const;
};

struct TaggedCorpus {
  Eigen::MatrixXd visual;               ///< n × d visual features
  Eigen::SparseMatrix<double> tags;     ///< n × V binary tag incidence (row-major use: one row per image)
  std::vector<int> concept_of;          ///< n true concepts; < num_concepts = query concept, else confuser
  std::vector<int> style_of;            ///< n styles
  std::vector<std::string> vocabulary;  ///< V tag names
  std::vector<int> query_tag;           ///< num_concepts: the tag id of query c
  int num_concepts = 0;

  int num_images() const { return static_cast<int>(visual.rows()); }
};

/// Draws the corpus. Errors: INVALID_ARGUMENT naming the field and value.
StatusOr<TaggedCorpus> GenerateTaggedCorpus(const TaggedCorpusOptions& options);

}  // namespace kls
