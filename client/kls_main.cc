// kls: command-line client for kls-server.
//
//   kls [--target HOST:PORT] [--json] [--timeout-seconds S] SUBCOMMAND ...
//       [--token T (or env KLS_TOKEN)] [--tls] [--tls-ca FILE] [--tls-cert FILE --tls-key FILE]
//       [--tls-server-name NAME]
//
//   health [--service NAME] | info | echo TEXT...
//   upload FILE [--name N] [--format auto|csv|libsvm] [--constraints FILE |
//          --protocol admm|bcd|simplenpkl --seed S] [--num-features D] [--progress | --no-progress]
//                                              streams the file in two passes (bounded memory)
//   upload DIR --social [--name N]             a social data set (photos.csv, contacts.csv, ...)
//   datasets                                   list the stored data sets
//   submit --dataset ID --kernel NAME --method FAMILY
//          [solver options: the family's options message, `kls submit --help`] [graph options]
//          [--scaling none|zscore|minmax] [--graph-connect error|grow_k|mst]
//          [--priority P] [--deadline-seconds S] [--watch | --print-request]
//   watch JOB | get JOB | cancel JOB
//   list [--state STATE] [--dataset ID] [--page-size N] [--page-token T]
//   kernels [--name NAME]                      list learned kernels
//   similarity --kernel NAME[:VERSION|@ALIAS] (--pairs "0,1;2,3" | --pairs-file FILE)
//   topk --kernel REF (--item N | --key K | --vector "x,y,..." | --features "x,y,..." [--neighbors 10])
//        [--k 10] [--exclude-self]
//   rerank --kernel REF (--candidates "i,j,..." | --keys "a,b,...") [--prior "p,q,..."] [--damping D] [--k N]
//   strength --kernel REF --pairs "u,v;..."    social strength (kernels with a social model)
//   recommend --kernel REF --user U [--k 10] [--groups]
//   classify --kernel REF FILE.csv             class of each row (kernels with a classifier model)
//   classify --kernel REF --labelled "u,c;..." [--users "u,..."] [--mass-normalization]
//                                              harmonic classes of users (kernels with a social model)
//   export --kernel REF --out FILE.csv
//   import FILE.csv --name NAME                store embedding rows as a kernel
//
// Exit status 0 on success; 1 when the call fails (or a watched job does not
// succeed, or the service is not SERVING), with "<GRPC_STATUS_NAME>: message"
// on stderr; CLI11's codes for bad usage. With --json, stdout carries exactly
// one JSON object either way (failures as {"error": {"code", "message"}}).
// Progress bars (watch, submit --watch, upload) go to stderr.
//
// Each subcommand lives in client/cli/ and registers itself there
// (KLS_CLI_SUBCOMMAND, client/cli/common.h); this file parses the global
// flags and runs the subcommand given.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <map>
#include <string>

#include "client/cli/common.h"
#include "client/client.h"

int main(int argc, char** argv) {
  using kls::cli::Output;
  CLI::App app{"kls — command-line client for the kernel learning service"};
  app.require_subcommand(1);
  app.fallthrough();  // global flags may also follow the subcommand

  kls::ClientOptions options;
  Output out;
  app.add_option("--target", options.target, "Server address HOST:PORT")->capture_default_str();
  app.add_flag("--json", out.json_mode, "Print exactly one JSON object");
  app.add_option("--timeout-seconds", options.timeout_seconds, "Deadline for each call")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--max-message-mb", options.max_message_mb, "Largest message sent or received, in MiB")
      ->capture_default_str()
      ->check(CLI::Range(1, 2047));
  std::string tls_ca, tls_cert, tls_key;
  app.add_option("--token", options.token, "Bearer token sent with every call")->envname("KLS_TOKEN");
  app.add_flag("--tls", options.tls, "Connect with TLS (implied by --tls-ca/--tls-cert; default CAs: the system's)");
  app.add_option("--tls-ca", tls_ca, "CA certificate (PEM) that signed the server's certificate");
  app.add_option("--tls-cert", tls_cert, "Client certificate (PEM) for servers that require mutual TLS");
  app.add_option("--tls-key", tls_key, "Private key (PEM) of --tls-cert");
  app.add_option("--request-id", options.request_id,
                 "Request id sent with every call (x-request-id): the server logs it, so a call can be found in "
                 "its logs; default: the server makes one per call")
      ->envname("KLS_REQUEST_ID");
  app.add_option("--tls-server-name", options.tls_server_name,
                 "Name to verify the server certificate against (default: the --target host)");

  std::vector<kls::cli::Subcommand> subcommands = kls::cli::Subcommands();
  std::sort(subcommands.begin(), subcommands.end(), [](const auto& x, const auto& y) { return x.order < y.order; });
  std::map<CLI::App*, kls::cli::Runner> runners;
  for (const kls::cli::Subcommand& s : subcommands) {
    CLI::App* sub = app.add_subcommand(s.name, s.help);
    runners[sub] = s.setup(*sub);
  }

  CLI11_PARSE(app, argc, argv);

  // gRPC metadata values must be printable ASCII; say so instead of failing every call.
  if (!std::all_of(options.token.begin(), options.token.end(), [](char c) { return c > 0x20 && c < 0x7f; })) {
    return out.Failure(kls::InvalidArgumentError("--token (or KLS_TOKEN) has a space or a non-printable character"));
  }
  if (options.request_id.size() > 128 ||
      !std::all_of(options.request_id.begin(), options.request_id.end(), [](char c) { return c > 0x20 && c < 0x7f; })) {
    return out.Failure(kls::InvalidArgumentError("--request-id = '" + options.request_id +
                                                 "': 1..128 printable ASCII characters without spaces"));
  }
  if (options.tls || !tls_ca.empty() || !tls_cert.empty() || !tls_key.empty()) {
    if (const kls::Status s = kls::LoadTlsFiles(tls_ca, tls_cert, tls_key, &options); !s.ok()) {
      return out.Failure(s);
    }
  }
  kls::Client client(options);
  for (auto& [sub, run] : runners) {
    if (sub->parsed()) return run(client, out);
  }
  return 2;  // unreachable: require_subcommand(1)
}
