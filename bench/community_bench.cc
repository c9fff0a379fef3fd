// kls-bench community: writes a generated photo-sharing community (thesis
// ch. 7 data model, core/social/community.h) as the CSV directory that
// `kls upload --social DIR` reads — sample data for the social_strength job.
//   kls-bench community --users 300 --seed 1 --out /tmp/community
#include "bench/bench_util.h"
#include "core/social/community.h"
#include "core/social/community_csv.h"

namespace kls::bench {

Runner RegisterCommunity(CLI::App& app, bool* json) {
  struct Args {
    int users = 300;
    uint64_t seed = 1;
    std::string out;
  };
  auto a = std::make_shared<Args>();
  app.add_option("--users", a->users, "users (>= 2)");
  app.add_option("--seed", a->seed, "generator seed");
  app.add_option("--out", a->out, "directory to write photos.csv, tags.csv, ...")->required();
  return [a, json]() -> int {
    CommunityOptions o;
    o.num_users = a->users;
    o.seed = a->seed;
    auto data = GenerateCommunity(o);
    if (!data.ok()) return Fail(data.status());
    if (Status s = WriteCommunityCsv(*data, a->out); !s.ok()) return Fail(s);
    size_t contacts = 0, memberships = 0;
    for (const auto& c : data->contacts) contacts += c.size();
    for (const auto& g : data->groups) memberships += g.size();
    nlohmann::json out = {{"benchmark", "community"},
                          {"out", a->out},
                          {"users", data->num_users},
                          {"groups", data->num_groups},
                          {"photos", data->num_photos()},
                          {"contacts", contacts / 2},
                          {"memberships", memberships},
                          {"comments", data->comments.size()},
                          {"favourites", data->favourites.size()}};
    Emit(out, *json);
    return 0;
  };
}

KLS_BENCH_SUBCOMMAND("community", "write a generated social community as CSV files (kls upload --social)",
                     RegisterCommunity);

}  // namespace kls::bench
