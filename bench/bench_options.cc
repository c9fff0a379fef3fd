#include "bench/bench_options.h"

#include "bench/bench_util.h"
#include "core/data/csv_reader.h"
#include "core/mkl/svm.h"

namespace kls::bench {

StatusOr<Dataset> DataFlags::Load(int n, uint64_t seed) const {
  const std::string& generated = data.empty() && synthetic.empty() ? default_synthetic : synthetic;
  if (csv_only && !data.empty() && generated.empty()) return ReadCsvFile(data);
  return LoadOrGenerate(data, generated, n, seed);
}

StatusOr<Dataset> DataFlags::LoadLabeled(int n, uint64_t seed) const {
  KLS_ASSIGN_OR_RETURN(Dataset d, Load(n, seed));
  if (!d.has_labels()) return InvalidArgumentError("--data: the data set has no labels");
  return d;
}

std::string DataFlags::Name() const {
  if (!data.empty()) return data;
  return synthetic.empty() ? default_synthetic : synthetic;
}

void SplitFlags::Add(CLI::App& app, const Help& help) {
  source.AddData(app, "labeled CSV (two classes)")->required();
  app.add_option("--train-frac", train_frac, help.train_frac);
  app.add_option("--runs", runs, help.runs);
  app.add_option("--seed", seed, help.seed);
  app.add_option("--folds", folds, help.folds);
  app.add_option("--positive-class", positive_class, "class id mapped to +1");
}

StatusOr<SplitFlags::Labeled> SplitFlags::Load() const {
  if (runs < 1) return InvalidArgumentError("--runs must be >= 1");
  Labeled out;
  KLS_ASSIGN_OR_RETURN(out.data, source.LoadLabeled(0, seed));
  out.y = SignLabels(out.data.labels, positive_class);
  return out;
}

StatusOr<SplitFlags::Split> SplitFlags::Draw(const Labeled& labeled, int run) const {
  Split s;
  s.seed = seed + run;
  KLS_ASSIGN_OR_RETURN(TrainTestSplit split, RandomSplit(labeled.y, train_frac, s.seed));
  s.x_train = SubRows(labeled.data.features, split.train);
  s.x_test = SubRows(labeled.data.features, split.test);
  s.y_train = SubVector(labeled.y, split.train);
  s.y_test = SubVector(labeled.y, split.test);
  return s;
}

nlohmann::json SplitFlags::Record(const Dataset& data) const {
  return {{"data", source.data}, {"n", data.num_points()}, {"dim", data.dim()},
          {"train_frac", train_frac}, {"runs", runs}, {"seed", seed}};
}

}  // namespace kls::bench
