// Queries on learned kernels: kls similarity | topk | rerank | strength |
// recommend | classify.
#include <algorithm>
#include <fstream>
#include <sstream>

#include "client/cli/common.h"
#include "core/data/csv_reader.h"

namespace kls::cli {
namespace {

int RunSimilarity(kls::Client& client, const Output& out, const std::string& kernel, const std::string& pairs_text,
                  const std::string& pairs_file) {
  const auto ref = kls::ParseKernelRef(kernel);
  if (!ref.ok()) return out.Failure(ref.status());
  std::string text = pairs_text, source = "--pairs";
  if (!pairs_file.empty()) {
    std::ifstream in(pairs_file);
    if (!in) return out.Failure(kls::NotFoundError("cannot read pairs file '" + pairs_file + "'"));
    std::ostringstream content;
    content << in.rdbuf();
    text = content.str();
    source = pairs_file;
  }
  const auto pairs = ParsePairs(text, source);
  if (!pairs.ok()) return out.Failure(pairs.status());
  const auto values = client.Similarity(*ref, *pairs);
  if (!values.ok()) return out.Failure(values.status(), {{"kernel", kernel}});
  json items = json::array();
  std::vector<std::vector<std::string>> rows = {{"I", "J", "VALUE"}};
  for (size_t t = 0; t < pairs->size(); ++t) {
    const auto [i, j] = (*pairs)[t];
    items.push_back({{"i", i}, {"j", j}, {"value", (*values)[t]}});
    rows.push_back({std::to_string(i), std::to_string(j), Fixed((*values)[t], 10)});
  }
  return out.Success({{"kernel", RefText(*ref)}, {"pairs", items}}, Table(rows));
}

struct TopKArgs {
  std::string kernel, key, vector, features, items, keys, keys_file;
  std::string filter, exclude, exclude_keys, allow, allow_keys, metric = "inner_product";
  int item = 0, k = 10, neighbors = 10, offset = 0;
  double min_score = 0;
  bool exclude_self = false;
  CLI::Option* item_opt = nullptr;
  CLI::Option* key_opt = nullptr;
  CLI::Option* vector_opt = nullptr;
  CLI::Option* features_opt = nullptr;
  CLI::Option* neighbors_opt = nullptr;
  CLI::Option* items_opt = nullptr;
  CLI::Option* keys_opt = nullptr;
  CLI::Option* keys_file_opt = nullptr;
  CLI::Option* min_score_opt = nullptr;
};

// One key per line (blank lines skipped).
kls::StatusOr<std::vector<std::string>> ReadKeysFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return kls::NotFoundError("--keys-file: cannot read '" + path + "'");
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

json ScoredJson(const google::protobuf::RepeatedPtrField<kls::v1::ScoredItem>& items) {
  json out = json::array();
  for (const kls::v1::ScoredItem& s : items) {
    json item = {{"index", s.index()}, {"score", s.score()}};
    if (!s.item_key().empty()) item["item_key"] = s.item_key();
    out.push_back(item);
  }
  return out;
}

int RunTopK(kls::Client& client, const Output& out, const TopKArgs& a) {
  const auto ref = kls::ParseKernelRef(a.kernel);
  if (!ref.ok()) return out.Failure(ref.status());
  const int given = int(a.item_opt->count() > 0) + int(a.key_opt->count() > 0) + int(a.vector_opt->count() > 0) +
                    int(a.features_opt->count() > 0) + int(a.items_opt->count() > 0) + int(a.keys_opt->count() > 0) +
                    int(a.keys_file_opt->count() > 0);
  if (given != 1) {
    return out.Failure(kls::InvalidArgumentError(
        "give exactly one of --item, --key, --vector, --features, --items, --keys or --keys-file"));
  }
  kls::v1::TopKRequest request;
  *request.mutable_kernel() = *ref;
  request.set_k(a.k);
  request.set_offset(a.offset);
  request.set_exclude_self(a.exclude_self);
  if (a.metric == "cosine") {
    request.set_metric(kls::v1::COSINE);
  } else if (a.metric == "inner_product") {
    request.set_metric(kls::v1::INNER_PRODUCT);
  } else {
    return out.Failure(kls::InvalidArgumentError("--metric = '" + a.metric + "': use inner_product or cosine"));
  }
  if (a.min_score_opt->count() > 0) request.set_min_score(a.min_score);
  kls::v1::ItemSelector* select = request.mutable_select();
  select->set_filter(a.filter);
  const auto exclude = ParseIndices(a.exclude, "--exclude");
  if (!exclude.ok()) return out.Failure(exclude.status());
  *select->mutable_exclude() = {exclude->begin(), exclude->end()};
  const auto allow = ParseIndices(a.allow, "--allow");
  if (!allow.ok()) return out.Failure(allow.status());
  *select->mutable_allow() = {allow->begin(), allow->end()};
  for (const std::string& k : SplitNonEmpty(a.exclude_keys)) select->add_exclude_keys(k);
  for (const std::string& k : SplitNonEmpty(a.allow_keys)) select->add_allow_keys(k);

  json query;
  std::vector<std::string> labels;  // batch: one label per query
  if (a.item_opt->count() > 0) {
    request.set_item(a.item);
    query = {{"item", a.item}};
  } else if (a.key_opt->count() > 0) {
    request.set_item_key(a.key);
    query = {{"item_key", a.key}};
  } else if (a.features_opt->count() > 0) {
    const auto v = ParseNumbers(a.features, "--features");
    if (!v.ok()) return out.Failure(v.status());
    *request.mutable_features()->mutable_values() = {v->begin(), v->end()};
    if (a.neighbors_opt->count() > 0) request.mutable_features()->set_neighbors(a.neighbors);
    query = {{"features", *v}};
  } else if (a.vector_opt->count() > 0) {
    const auto v = ParseNumbers(a.vector, "--vector");
    if (!v.ok()) return out.Failure(v.status());
    *request.mutable_vector()->mutable_values() = {v->begin(), v->end()};
    query = {{"vector", *v}};
  } else if (a.items_opt->count() > 0) {
    const auto items = ParseIndices(a.items, "--items");
    if (!items.ok()) return out.Failure(items.status());
    if (items->empty()) return out.Failure(kls::InvalidArgumentError("--items is empty"));
    for (int i : *items) {
      request.add_queries()->set_item(i);
      labels.push_back(std::to_string(i));
    }
    query = {{"items", *items}};
  } else {
    std::vector<std::string> keys;
    if (a.keys_file_opt->count() > 0) {
      const auto read = ReadKeysFile(a.keys_file);
      if (!read.ok()) return out.Failure(read.status());
      keys = *read;
    } else {
      keys = SplitNonEmpty(a.keys);
    }
    if (keys.empty()) return out.Failure(kls::InvalidArgumentError("no keys given"));
    for (const std::string& k : keys) {
      request.add_queries()->set_item_key(k);
      labels.push_back(k);
    }
    query = {{"item_keys", keys}};
  }
  const auto response = client.TopK(request);
  if (!response.ok()) return out.Failure(response.status(), {{"kernel", a.kernel}});
  json body = {{"kernel", RefText(*ref)}, {"query", query}, {"k", a.k}, {"metric", a.metric}};
  if (a.offset > 0) body["offset"] = a.offset;
  if (!a.filter.empty()) body["filter"] = a.filter;
  std::vector<const google::protobuf::RepeatedPtrField<kls::v1::ScoredItem>*> answers;
  if (labels.empty()) {
    answers.push_back(&response->items());
    body["items"] = ScoredJson(response->items());
  } else {
    json results = json::array();
    for (const kls::v1::TopKResult& r : response->results()) {
      answers.push_back(&r.items());
      results.push_back({{"query", labels[results.size()]}, {"items", ScoredJson(r.items())}});
    }
    body["results"] = results;
  }
  bool keyed = false;
  for (const auto* items : answers) {
    keyed = keyed || std::any_of(items->begin(), items->end(),
                                 [](const kls::v1::ScoredItem& s) { return !s.item_key().empty(); });
  }
  std::vector<std::vector<std::string>> rows = {{"RANK", "INDEX", "SCORE"}};
  if (!labels.empty()) rows[0].insert(rows[0].begin(), "QUERY");
  if (keyed) rows[0].push_back("KEY");
  for (size_t q = 0; q < answers.size(); ++q) {
    int rank = a.offset + 1;
    for (const kls::v1::ScoredItem& s : *answers[q]) {
      rows.push_back({std::to_string(rank++), std::to_string(s.index()), Fixed(s.score(), 10)});
      if (!labels.empty()) rows.back().insert(rows.back().begin(), labels[q]);
      if (keyed) rows.back().push_back(s.item_key());
    }
  }
  return out.Success(body, Table(rows));
}

json ItemsJson(const google::protobuf::RepeatedPtrField<kls::v1::ScoredItem>& items, const char* index_name,
               std::vector<std::vector<std::string>>* rows) {
  const bool keyed =
      std::any_of(items.begin(), items.end(), [](const kls::v1::ScoredItem& s) { return !s.item_key().empty(); });
  *rows = {{"RANK", index_name, "SCORE"}};
  if (keyed) (*rows)[0].push_back("KEY");
  int rank = 1;
  for (const kls::v1::ScoredItem& s : items) {
    rows->push_back({std::to_string(rank++), std::to_string(s.index()), Fixed(s.score(), 10)});
    if (keyed) rows->back().push_back(s.item_key());
  }
  return ScoredJson(items);
}

struct ReRankArgs {
  std::string kernel, candidates, keys, prior;
  double damping = 0.85;
  int k = 0;
};

int RunReRank(kls::Client& client, const Output& out, const ReRankArgs& a) {
  const auto ref = kls::ParseKernelRef(a.kernel);
  if (!ref.ok()) return out.Failure(ref.status());
  if (a.candidates.empty() == a.keys.empty()) {
    return out.Failure(kls::InvalidArgumentError("give exactly one of --candidates or --keys"));
  }
  kls::v1::ReRankRequest request;
  *request.mutable_kernel() = *ref;
  if (!a.candidates.empty()) {
    for (const std::string& c : Split(a.candidates, ',')) {
      int i = 0;
      if (!ParseInt(c, &i)) return out.Failure(kls::InvalidArgumentError("--candidates: '" + c + "' is not an index"));
      request.add_candidates(i);
    }
  } else {
    for (const std::string& k : Split(a.keys, ',')) request.add_candidate_keys(k);
  }
  if (!a.prior.empty()) {
    for (const std::string& p : Split(a.prior, ',')) {
      double x = 0;
      if (!ParseDouble(p, &x)) return out.Failure(kls::InvalidArgumentError("--prior: '" + p + "' is not a number"));
      request.add_prior(x);
    }
  }
  request.set_damping(a.damping);
  request.set_k(a.k);
  const auto response = client.ReRank(request);
  if (!response.ok()) return out.Failure(response.status(), {{"kernel", a.kernel}});
  std::vector<std::vector<std::string>> rows;
  json items = ItemsJson(response->items(), "INDEX", &rows);
  return out.Success({{"kernel", RefText(*ref)}, {"iterations", response->iterations()}, {"items", items}},
                     Table(rows));
}

int RunStrength(kls::Client& client, const Output& out, const std::string& kernel, const std::string& pairs_text) {
  const auto ref = kls::ParseKernelRef(kernel);
  if (!ref.ok()) return out.Failure(ref.status());
  const auto pairs = ParsePairs(pairs_text, "--pairs");
  if (!pairs.ok()) return out.Failure(pairs.status());
  kls::v1::SocialStrengthRequest request;
  *request.mutable_kernel() = *ref;
  for (const auto& [u, v] : *pairs) {
    request.add_u(u);
    request.add_v(v);
  }
  const auto response = client.SocialStrength(request);
  if (!response.ok()) return out.Failure(response.status(), {{"kernel", kernel}});
  json items = json::array();
  std::vector<std::vector<std::string>> rows = {{"U", "V", "STRENGTH"}};
  for (size_t t = 0; t < pairs->size(); ++t) {
    const auto [u, v] = (*pairs)[t];
    items.push_back({{"u", u}, {"v", v}, {"strength", response->values(static_cast<int>(t))}});
    rows.push_back({std::to_string(u), std::to_string(v), Fixed(response->values(static_cast<int>(t)), 10)});
  }
  return out.Success({{"kernel", RefText(*ref)}, {"pairs", items}}, Table(rows));
}

int RunRecommend(kls::Client& client, const Output& out, const std::string& kernel, int user, int k, bool groups) {
  const auto ref = kls::ParseKernelRef(kernel);
  if (!ref.ok()) return out.Failure(ref.status());
  kls::v1::RecommendRequest request;
  *request.mutable_kernel() = *ref;
  request.set_user(user);
  request.set_k(k);
  const auto response = client.Recommend(request, groups);
  if (!response.ok()) return out.Failure(response.status(), {{"kernel", kernel}});
  std::vector<std::vector<std::string>> rows;
  json items = ItemsJson(response->items(), groups ? "GROUP" : "USER", &rows);
  return out.Success(
      {{"kernel", RefText(*ref)}, {"user", user}, {"what", groups ? "groups" : "friends"}, {"items", items}},
      Table(rows));
}

int RunClassify(kls::Client& client, const Output& out, const std::string& kernel, const std::string& file) {
  const auto ref = kls::ParseKernelRef(kernel);
  if (!ref.ok()) return out.Failure(ref.status());
  const kls::StatusOr<kls::Dataset> data = kls::ReadCsvFile(file);
  if (!data.ok()) return out.Failure(data.status());
  kls::v1::ClassifyRequest request;
  *request.mutable_kernel() = *ref;
  request.set_dim(data->dim());
  for (int i = 0; i < data->num_points(); ++i)
    for (int j = 0; j < data->dim(); ++j) request.add_features(data->features(i, j));
  const auto response = client.Classify(request);
  if (!response.ok()) return out.Failure(response.status(), {{"kernel", kernel}});
  json items = json::array();
  std::vector<std::vector<std::string>> rows = {{"ROW", "LABEL", "DECISION"}};
  int correct = 0;
  for (int i = 0; i < response->labels_size(); ++i) {
    items.push_back({{"row", i}, {"label", response->labels(i)}, {"decision_value", response->decision_values(i)}});
    rows.push_back({std::to_string(i), std::to_string(response->labels(i)), Fixed(response->decision_values(i), 6)});
    if (data->has_labels() && data->labels[i] == response->labels(i)) ++correct;
  }
  json result = {{"kernel", RefText(*ref)}, {"predictions", items}};
  std::string text = Table(rows);
  if (data->has_labels()) {
    const double accuracy = static_cast<double>(correct) / std::max(1, response->labels_size());
    result["accuracy"] = accuracy;
    text += "accuracy " + Fixed(accuracy, 4) + " (" + std::to_string(correct) + " of " +
            std::to_string(response->labels_size()) + " rows match the file's labels)\n";
  }
  return out.Success(result, text);
}

struct ClassifyUsersArgs {
  std::string labelled, users;
  bool mass_normalization = false;
};

int RunClassifyUsers(kls::Client& client, const Output& out, const std::string& kernel, const ClassifyUsersArgs& a) {
  const auto ref = kls::ParseKernelRef(kernel);
  if (!ref.ok()) return out.Failure(ref.status());
  const auto labelled = ParsePairs(a.labelled, "--labelled");
  if (!labelled.ok()) return out.Failure(labelled.status());
  kls::v1::ClassifyUsersRequest request;
  *request.mutable_kernel() = *ref;
  for (const auto& [user, label] : *labelled) {
    request.add_labelled_users(user);
    request.add_labels(label);
  }
  if (!a.users.empty()) {
    for (const std::string& u : Split(a.users, ',')) {
      int user = 0;
      if (!ParseInt(Trim(u), &user)) {
        return out.Failure(kls::InvalidArgumentError("--users: '" + u + "' is not an integer"));
      }
      request.add_users(user);
    }
  }
  request.set_class_mass_normalization(a.mass_normalization);
  const auto response = client.ClassifyUsers(request);
  if (!response.ok()) return out.Failure(response.status(), {{"kernel", kernel}});
  json items = json::array();
  std::vector<std::vector<std::string>> rows = {{"USER", "LABEL", "SCORE"}};
  for (int t = 0; t < response->users_size(); ++t) {
    items.push_back({{"user", response->users(t)}, {"label", response->labels(t)}, {"score", response->scores(t)}});
    rows.push_back(
        {std::to_string(response->users(t)), std::to_string(response->labels(t)), Fixed(response->scores(t), 6)});
  }
  return out.Success({{"kernel", RefText(*ref)}, {"predictions", items}}, Table(rows));
}

Runner SetupSimilarity(CLI::App& app) {
  struct Args {
    std::string kernel, pairs_text, pairs_file;
    CLI::Option* pairs_opt = nullptr;
    CLI::Option* pairs_file_opt = nullptr;
  };
  auto a = std::make_shared<Args>();
  app.add_option("--kernel", a->kernel, "NAME, NAME:VERSION or NAME@ALIAS")->required();
  a->pairs_opt = app.add_option("--pairs", a->pairs_text, "Pairs 'i,j;i,j;...'");
  a->pairs_file_opt = app.add_option("--pairs-file", a->pairs_file, "File of 'i,j' lines");
  a->pairs_opt->excludes(a->pairs_file_opt);
  return [a](kls::Client& client, const Output& out) {
    if (a->pairs_opt->count() + a->pairs_file_opt->count() != 1) {
      return out.Failure(kls::InvalidArgumentError("give --pairs or --pairs-file"));
    }
    return RunSimilarity(client, out, a->kernel, a->pairs_text, a->pairs_file);
  };
}

Runner SetupTopK(CLI::App& app) {
  auto a = std::make_shared<TopKArgs>();
  app.add_option("--kernel", a->kernel, "NAME, NAME:VERSION or NAME@ALIAS")->required();
  a->item_opt = app.add_option("--item", a->item, "Query item index");
  a->key_opt = app.add_option("--key", a->key, "Query item key");
  a->vector_opt = app.add_option("--vector", a->vector, "Query vector 'x,y,...' (length = rank)");
  a->features_opt =
      app.add_option("--features", a->features, "An item the kernel was not trained on: its raw features 'x,y,...'");
  a->neighbors_opt =
      app.add_option("--neighbors", a->neighbors, "--features: nearest training points of the extension");
  a->neighbors_opt->needs(a->features_opt);
  a->items_opt = app.add_option("--items", a->items, "A batch: query item indices '1,5,9' (at most 1,000)");
  a->keys_opt = app.add_option("--keys", a->keys, "A batch: query item keys 'a,b,c'");
  a->keys_file_opt = app.add_option("--keys-file", a->keys_file, "A batch: query item keys, one per line");
  app.add_option("--k", a->k, "How many items per query")->capture_default_str();
  app.add_option("--offset", a->offset, "Skip the best N first (paging)")->capture_default_str();
  app.add_flag("--exclude-self", a->exclude_self, "Leave the query item out");
  app.add_option("--filter", a->filter,
                 "Only items passing this expression over the data set's attributes, `index` and `key`, "
                 "e.g. 'category in [\"shoes\"] and price < 100 and not discontinued'");
  app.add_option("--exclude", a->exclude, "Never return these item indices '3,8'");
  app.add_option("--exclude-keys", a->exclude_keys, "Never return these item keys 'a,b'");
  app.add_option("--allow", a->allow, "Only return these item indices '3,8'");
  app.add_option("--allow-keys", a->allow_keys, "Only return these item keys 'a,b'");
  app.add_option("--metric", a->metric, "inner_product (K_ij) or cosine (K_ij / sqrt(K_ii K_jj))")
      ->capture_default_str();
  a->min_score_opt = app.add_option("--min-score", a->min_score, "Drop results scoring below this");
  return [a](kls::Client& client, const Output& out) { return RunTopK(client, out, *a); };
}

Runner SetupReRank(CLI::App& app) {
  auto a = std::make_shared<ReRankArgs>();
  app.add_option("--kernel", a->kernel, "NAME, NAME:VERSION or NAME@ALIAS")->required();
  app.add_option("--candidates", a->candidates, "Candidate item indices 'i,j,...'");
  app.add_option("--keys", a->keys, "Candidate item keys 'a,b,...'");
  app.add_option("--prior", a->prior, "One prior score >= 0 per candidate (e.g. text scores)");
  app.add_option("--damping", a->damping, "VisualRank damping λ_d in [0, 1)")->capture_default_str();
  app.add_option("--k", a->k, "How many results (0 = all)");
  return [a](kls::Client& client, const Output& out) { return RunReRank(client, out, *a); };
}

Runner SetupStrength(CLI::App& app) {
  auto a = std::make_shared<std::pair<std::string, std::string>>();  // kernel, pairs
  app.add_option("--kernel", a->first, "A kernel with a social model")->required();
  app.add_option("--pairs", a->second, "Pairs 'u,v;u,v;...'")->required();
  return [a](kls::Client& client, const Output& out) { return RunStrength(client, out, a->first, a->second); };
}

Runner SetupRecommend(CLI::App& app) {
  struct Args {
    std::string kernel;
    int user = 0, k = 10;
    bool groups = false;
  };
  auto a = std::make_shared<Args>();
  app.add_option("--kernel", a->kernel, "A kernel with a social model")->required();
  app.add_option("--user", a->user, "User id")->required();
  app.add_option("--k", a->k, "How many suggestions")->capture_default_str();
  app.add_flag("--groups", a->groups, "Suggest groups instead of friends");
  return [a](kls::Client& client, const Output& out) {
    return RunRecommend(client, out, a->kernel, a->user, a->k, a->groups);
  };
}

Runner SetupClassify(CLI::App& app) {
  struct Args {
    std::string kernel, file;
    ClassifyUsersArgs users;
  };
  auto a = std::make_shared<Args>();
  app.add_option("--kernel", a->kernel, "A kernel with a classifier model or a social model")->required();
  CLI::Option* file_opt = app.add_option("file", a->file, "CSV (header; an optional last column 'label' is compared)");
  CLI::Option* labelled_opt =
      app.add_option("--labelled", a->users.labelled, "Users with known classes: \"user,class;user,class;...\"");
  file_opt->excludes(labelled_opt);
  app.add_option("--users", a->users.users, "Users to classify: \"u,v,...\" (default: every user)")
      ->needs(labelled_opt);
  app.add_flag("--mass-normalization", a->users.mass_normalization, "Class mass normalization (ZGL03 §5)")
      ->needs(labelled_opt);
  app.callback([file_opt, labelled_opt] {
    if (file_opt->count() == 0 && labelled_opt->count() == 0) {
      throw CLI::RequiredError("classify needs FILE.csv (classifier model) or --labelled (social model)");
    }
  });
  return [a](kls::Client& client, const Output& out) {
    if (!a->users.labelled.empty()) return RunClassifyUsers(client, out, a->kernel, a->users);
    return RunClassify(client, out, a->kernel, a->file);
  };
}

}  // namespace

KLS_CLI_SUBCOMMAND(120, "similarity", "Kernel values K_ij for pairs", SetupSimilarity);
KLS_CLI_SUBCOMMAND(130, "topk", "The k items most similar to an item, key or vector", SetupTopK);
KLS_CLI_SUBCOMMAND(140, "rerank", "Re-rank candidate items by VisualRank on a kernel", SetupReRank);
KLS_CLI_SUBCOMMAND(150, "strength", "Social strength f(u, v) for pairs of users", SetupStrength);
KLS_CLI_SUBCOMMAND(160, "recommend", "Friend (default) or group suggestions for a user", SetupRecommend);
KLS_CLI_SUBCOMMAND(170, "classify", "Classify CSV rows (a classifier model) or users (a social model, harmonic §7.5.3)",
                   SetupClassify);

}  // namespace kls::cli
