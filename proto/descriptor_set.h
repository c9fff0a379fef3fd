// The serialized google.protobuf.FileDescriptorSet of every KLS .proto file
// (and of the solver-family protos the build includes), with source info, so
// the comments are there: `kls submit` builds its solver flags and their help
// from it. Generated at build time (proto/CMakeLists.txt).
#pragma once

#include <string_view>

namespace kls::proto {

/// The bytes of the descriptor set; valid for the life of the program.
std::string_view KlsDescriptorSet();

}  // namespace kls::proto
