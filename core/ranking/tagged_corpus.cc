#include "core/ranking/tagged_corpus.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

namespace kls {

Status TaggedCorpusOptions::Validate() const {
  KLS_RETURN_IF_ERROR(CheckAtLeastOption("num_concepts", num_concepts, 1));
  KLS_RETURN_IF_ERROR(CheckAtLeastOption("images_per_concept", images_per_concept, 1));
  KLS_RETURN_IF_ERROR(CheckAtLeastOption("visual_dim", visual_dim, 1));
  KLS_RETURN_IF_ERROR(CheckAtLeastOption("modes_per_concept", modes_per_concept, 1));
  KLS_RETURN_IF_ERROR(CheckAtLeastOption("num_styles", num_styles, 1));
  KLS_RETURN_IF_ERROR(CheckAtLeastOption("related_tags_per_concept", related_tags_per_concept, 0));
  KLS_RETURN_IF_ERROR(CheckAtLeastOption("tags_per_style", tags_per_style, 0));
  KLS_RETURN_IF_ERROR(CheckAtLeastOption("noise_vocabulary", noise_vocabulary, 1));
  KLS_RETURN_IF_ERROR(CheckNonNegativeOption("visual_noise", visual_noise));
  KLS_RETURN_IF_ERROR(CheckNonNegativeOption("style_scale", style_scale));
  KLS_RETURN_IF_ERROR(CheckNonNegativeOption("offset", offset));
  KLS_RETURN_IF_ERROR(CheckNonNegativeOption("mean_noise_tags", mean_noise_tags));
  KLS_RETURN_IF_ERROR(CheckProbabilityOption("p_query_tag", p_query_tag));
  KLS_RETURN_IF_ERROR(CheckProbabilityOption("p_confuser_tag", p_confuser_tag));
  KLS_RETURN_IF_ERROR(CheckProbabilityOption("p_related_tag", p_related_tag));
  KLS_RETURN_IF_ERROR(CheckProbabilityOption("p_style_tag", p_style_tag));
  KLS_RETURN_IF_ERROR(CheckProbabilityOption("p_wrong_tag", p_wrong_tag));
  const double n = 2.0 * num_concepts * static_cast<double>(images_per_concept);
  if (n > 5e6) return InvalidArgumentError("options: 2 * num_concepts * images_per_concept = " + FormatNumber(n) +
                                           " images exceeds the 5,000,000 limit");
  return OkStatus();
}

StatusOr<TaggedCorpus> GenerateTaggedCorpus(const TaggedCorpusOptions& o) {
  return GuardExceptions("GenerateTaggedCorpus", [&]() -> StatusOr<TaggedCorpus> {
    KLS_RETURN_IF_ERROR(o.Validate());
    std::mt19937_64 rng(o.seed);
    std::normal_distribution<double> gauss(0.0, 1.0);
    std::uniform_real_distribution<double> unif(0.0, 1.0);
    const int nq = o.num_concepts;
    const int nc = 2 * nq;  // concept c' = c + nq is the confuser of query concept c
    const int d = o.visual_dim;

    TaggedCorpus corpus;
    corpus.num_concepts = nq;
    // Vocabulary: query tags, related tags (per concept, confusers included), style tags, noise tags.
    for (int c = 0; c < nq; ++c) corpus.vocabulary.push_back("query" + std::to_string(c));
    std::vector<int> related_first(nc);
    for (int c = 0; c < nc; ++c) {
      related_first[c] = static_cast<int>(corpus.vocabulary.size());
      for (int t = 0; t < o.related_tags_per_concept; ++t)
        corpus.vocabulary.push_back((c < nq ? "rel" : "conf") + std::to_string(c % nq) + "_" + std::to_string(t));
    }
    const int style_first = static_cast<int>(corpus.vocabulary.size());
    for (int s = 0; s < o.num_styles; ++s)
      for (int t = 0; t < o.tags_per_style; ++t)
        corpus.vocabulary.push_back("style" + std::to_string(s) + "_" + std::to_string(t));
    const int noise_first = static_cast<int>(corpus.vocabulary.size());
    for (int t = 0; t < o.noise_vocabulary; ++t) corpus.vocabulary.push_back("noise" + std::to_string(t));
    for (int c = 0; c < nq; ++c) corpus.query_tag.push_back(c);

    // Visual structure.
    std::vector<Eigen::VectorXd> centre(static_cast<size_t>(nc) * o.modes_per_concept);
    for (auto& m : centre) {
      m.resize(d);
      for (int k = 0; k < d; ++k) m[k] = gauss(rng);
    }
    std::vector<Eigen::VectorXd> style(o.num_styles);
    for (auto& s : style) {
      s.resize(d);
      for (int k = 0; k < d; ++k) s[k] = o.style_scale * gauss(rng);
    }
    // Zipf(1) over the noise vocabulary.
    std::vector<double> zipf(o.noise_vocabulary);
    for (int t = 0; t < o.noise_vocabulary; ++t) zipf[t] = 1.0 / (t + 1.0);
    std::discrete_distribution<int> noise_tag(zipf.begin(), zipf.end());
    std::poisson_distribution<int> noise_count(o.mean_noise_tags);
    std::uniform_int_distribution<int> pick_mode(0, o.modes_per_concept - 1);
    std::uniform_int_distribution<int> pick_style(0, o.num_styles - 1);

    const int n = nc * o.images_per_concept;
    corpus.visual.resize(n, d);
    corpus.concept_of.resize(n);
    corpus.style_of.resize(n);
    std::vector<Eigen::Triplet<double>> triplets;
    // Images are drawn concept by concept and then shuffled so that index order carries no information.
    std::vector<int> slot(n);
    for (int i = 0; i < n; ++i) slot[i] = i;
    std::shuffle(slot.begin(), slot.end(), rng);
    for (int c = 0, i = 0; c < nc; ++c) {
      for (int k = 0; k < o.images_per_concept; ++k, ++i) {
        const int row = slot[i];
        const int m = pick_mode(rng);
        const int s = pick_style(rng);
        corpus.concept_of[row] = c;
        corpus.style_of[row] = s;
        for (int j = 0; j < d; ++j)
          corpus.visual(row, j) = o.offset + centre[static_cast<size_t>(c) * o.modes_per_concept + m][j] +
                                  style[s][j] + o.visual_noise * gauss(rng);
        std::vector<int> tags;
        const int q = c % nq;
        if (c < nq ? unif(rng) < o.p_query_tag : unif(rng) < o.p_confuser_tag) tags.push_back(q);
        for (int t = 0; t < o.related_tags_per_concept; ++t)
          if (unif(rng) < o.p_related_tag) tags.push_back(related_first[c] + t);
        for (int t = 0; t < o.tags_per_style; ++t)
          if (unif(rng) < o.p_style_tag) tags.push_back(style_first + s * o.tags_per_style + t);
        const int extra = noise_count(rng);
        for (int t = 0; t < extra; ++t) tags.push_back(noise_first + noise_tag(rng));
        if (nq > 1 && unif(rng) < o.p_wrong_tag) {
          int other = std::uniform_int_distribution<int>(0, nq - 2)(rng);
          if (other >= q) ++other;
          tags.push_back(other);
        }
        std::sort(tags.begin(), tags.end());
        tags.erase(std::unique(tags.begin(), tags.end()), tags.end());
        for (int t : tags) triplets.emplace_back(row, t, 1.0);
      }
    }
    corpus.tags.resize(n, static_cast<int>(corpus.vocabulary.size()));
    corpus.tags.setFromTriplets(triplets.begin(), triplets.end());
    return corpus;
  });
}

}  // namespace kls
