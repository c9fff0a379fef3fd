// Fuzz target: proto → core job conversion (server/jobs/proto_convert.h) on
// arbitrary SubmitJobRequest bytes: the record the Jobs service would store,
// then the spec a worker parses back from it.
#include <cstddef>
#include <cstdint>

#include "kls/v1/jobs.pb.h"
#include "server/jobs/proto_convert.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kls::v1::SubmitJobRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;
  auto record = kls::server::JobRecordFromSubmit(request);
  if (record.ok()) (void)kls::server::ParseJobSpec(record->method, record->options_json);
  return 0;
}
