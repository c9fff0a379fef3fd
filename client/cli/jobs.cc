// Jobs: kls submit | watch | get | cancel | list. Submit's solver flags come
// from the options messages' descriptors (submit_flags.h).
#include <algorithm>
#include <cctype>
#include <iostream>

#include "client/cli/common.h"
#include "client/cli/submit_flags.h"

namespace kls::cli {
namespace {

struct SubmitArgs {
  std::unique_ptr<SubmitFlags> flags;
  kls::Status setup;  ///< why the flags could not be built from the descriptors
  bool watch = false;
  bool print_request = false;
};

int RunSubmit(kls::Client& client, const Output& out, const SubmitArgs& a) {
  if (!a.setup.ok()) return out.Failure(a.setup);
  const auto request = a.flags->BuildRequest();
  if (!request.ok()) return out.Failure(request.status());
  if (a.print_request) {
    const auto text = a.flags->RequestJson(*request);
    if (!text.ok()) return out.Failure(text.status());
    const json object = json::parse(*text);
    return out.Success(object, object.dump(2));
  }
  kls::v1::SubmitJobRequest resolved = *request;
  const auto dataset = ResolveDataset(client, request->dataset_id(), "--dataset");
  if (!dataset.ok()) return out.Failure(dataset.status());
  resolved.set_dataset_id(*dataset);
  // npk_ranking's text data set takes a name too.
  if (resolved.has_npk_ranking() && !resolved.npk_ranking().text_dataset_id().empty()) {
    const auto text = ResolveDataset(client, resolved.npk_ranking().text_dataset_id(), "--text-dataset");
    if (!text.ok()) return out.Failure(text.status());
    resolved.mutable_npk_ranking()->set_text_dataset_id(*text);
  }
  const auto job = client.SubmitJob(resolved);
  if (!job.ok()) return out.Failure(job.status());
  if (a.watch) {
    if (!out.json_mode) std::cerr << "submitted " << job->id() << "\n";
    return WatchToEnd(client, out, job->id());
  }
  return out.Success(JobJson(*job), job->id() + "  " + StateName(job->state()));
}

int RunGet(kls::Client& client, const Output& out, const std::string& id) {
  const auto job = client.GetJob(id);
  if (!job.ok()) return out.Failure(job.status(), {{"id", id}});
  return out.Success(JobJson(*job), JobText(*job));
}

int RunCancel(kls::Client& client, const Output& out, const std::string& id) {
  const auto job = client.CancelJob(id);
  if (!job.ok()) return out.Failure(job.status(), {{"id", id}});
  return out.Success(JobJson(*job), job->id() + "  " + StateName(job->state()));
}

struct ListArgs {
  std::string state, dataset, page_token;
  int page_size = 0;
};

int RunList(kls::Client& client, const Output& out, const ListArgs& a) {
  kls::v1::ListJobsRequest request;
  if (!a.state.empty()) {
    std::string upper = a.state;
    std::transform(upper.begin(), upper.end(), upper.begin(), [](unsigned char c) { return std::toupper(c); });
    kls::v1::JobState state;
    if (!kls::v1::JobState_Parse(upper, &state) || state == kls::v1::JOB_STATE_UNSPECIFIED) {
      return out.Failure(kls::InvalidArgumentError("--state = '" + a.state +
                                                   "' is not one of queued, running, succeeded, failed, cancelled"));
    }
    request.set_state(state);
  }
  if (!a.dataset.empty()) {  // an id or a name
    const auto dataset = ResolveDataset(client, a.dataset, "--dataset");
    if (!dataset.ok()) return out.Failure(dataset.status());
    request.set_dataset_id(*dataset);
  }
  request.set_page_size(a.page_size);
  request.set_page_token(a.page_token);
  const auto response = client.ListJobs(request);
  if (!response.ok()) return out.Failure(response.status());
  json jobs = json::array();
  std::vector<std::vector<std::string>> rows = {{"ID", "STATE", "METHOD", "DATASET", "KERNEL", "PROGRESS", "OWNER"}};
  for (const kls::v1::Job& j : response->jobs()) {
    jobs.push_back(JobJson(j));
    rows.push_back({j.id(), StateName(j.state()), j.method(), j.dataset_id(),
                    j.kernel_name() + (j.kernel_version() > 0 ? ":" + std::to_string(j.kernel_version()) : ""),
                    ProgressText(j.progress()), j.owner().empty() ? "-" : j.owner()});
  }
  std::string text = Table(rows);
  if (!response->next_page_token().empty()) text += "next page: --page-token " + response->next_page_token() + "\n";
  return out.Success({{"jobs", jobs}, {"next_page_token", response->next_page_token()}}, text);
}

Runner SetupSubmit(CLI::App& app) {
  auto a = std::make_shared<SubmitArgs>();
  auto flags = SubmitFlags::FromKlsProtos();
  if (flags.ok()) {
    a->flags = std::move(flags).value();
    a->flags->AddFlags(&app);
  } else {
    a->setup = flags.status();
  }
  app.add_flag("--watch", a->watch, "Watch the job until it ends");
  app.add_flag("--print-request", a->print_request,
               "Print the SubmitJobRequest the other flags make as JSON (proto field names) and exit without "
               "sending it");
  return [a](kls::Client& client, const Output& out) { return RunSubmit(client, out, *a); };
}

// watch / get / cancel JOB.
Runner SetupJobCommand(CLI::App& app, int (*run)(kls::Client&, const Output&, const std::string&)) {
  auto id = std::make_shared<std::string>();
  app.add_option("job", *id, "Job id")->required();
  return [id, run](kls::Client& client, const Output& out) { return run(client, out, *id); };
}
Runner SetupWatch(CLI::App& app) { return SetupJobCommand(app, WatchToEnd); }
Runner SetupGet(CLI::App& app) { return SetupJobCommand(app, RunGet); }
Runner SetupCancel(CLI::App& app) { return SetupJobCommand(app, RunCancel); }

Runner SetupList(CLI::App& app) {
  auto a = std::make_shared<ListArgs>();
  app.add_option("--state", a->state, "queued, running, succeeded, failed or cancelled");
  app.add_option("--dataset", a->dataset, "Only jobs on this data set");
  app.add_option("--page-size", a->page_size, "Jobs per page (default 100, at most 1000)");
  app.add_option("--page-token", a->page_token, "next_page_token of the previous page");
  return [a](kls::Client& client, const Output& out) { return RunList(client, out, *a); };
}

}  // namespace

KLS_CLI_SUBCOMMAND(60, "submit", "Submit a kernel-learning job", SetupSubmit);
KLS_CLI_SUBCOMMAND(70, "watch", "Show a job's progress until it ends", SetupWatch);
KLS_CLI_SUBCOMMAND(80, "get", "Show one job", SetupGet);
KLS_CLI_SUBCOMMAND(90, "cancel", "Cancel a queued or running job", SetupCancel);
KLS_CLI_SUBCOMMAND(100, "list", "List jobs, oldest first", SetupList);

}  // namespace kls::cli
