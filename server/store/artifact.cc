#include "server/store/artifact.h"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace kls::store {
namespace {

constexpr char kMagic[8] = {'K', 'L', 'S', 'A', 'R', 'T', '0', '1'};
constexpr uint64_t kHeaderBytes = 32;
constexpr uint64_t kEntryBytes = 88;
constexpr uint64_t kNameBytes = 48;
constexpr uint64_t kAlign = 64;

uint64_t AlignUp(uint64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

uint32_t Crc32(const uint8_t* data, uint64_t n) {
  uLong crc = crc32(0L, Z_NULL, 0);
  while (n > 0) {
    const uInt chunk = static_cast<uInt>(std::min<uint64_t>(n, 1u << 30));
    crc = crc32(crc, data, chunk);
    data += chunk;
    n -= chunk;
  }
  return static_cast<uint32_t>(crc);
}

template <typename T>
void Put(uint8_t* buf, uint64_t at, T v) {
  std::memcpy(buf + at, &v, sizeof(T));
}
template <typename T>
T Get(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

}  // namespace

Status DiskFull(const std::string& dir, const std::string& what) {
  return ResourceExhaustedError("no space left: the file system holding \"" + dir + "\" is full (" + what +
                                "); nothing was written — free space there and retry");
}

Status FileError(const std::string& what, const std::string& path, int err) {
  if (err == ENOSPC || err == EDQUOT) {
    return DiskFull(std::filesystem::path(path).parent_path().string(), what + " \"" + path + "\": " + std::strerror(err));
  }
  return InternalError(what + " \"" + path + "\": " + std::strerror(err));
}

namespace {

Status WriteAll(int fd, const uint8_t* data, uint64_t n, const std::string& path) {
  while (n > 0) {
    const ssize_t w = ::write(fd, data, std::min<uint64_t>(n, 1u << 30));
    if (w < 0) {
      if (errno == EINTR) continue;
      return FileError("writing", path, errno);
    }
    data += w;
    n -= static_cast<uint64_t>(w);
  }
  return OkStatus();
}

uint64_t ElementBytes(DType t) { return t == DType::kFloat64 ? 8 : t == DType::kInt32 ? 4 : 1; }

// Checks the header, section table and CRC-32 of a complete artifact image
// and lists its sections (pointing into `p`). `what` names it in errors.
Status ParseImage(const uint8_t* p, uint64_t size, const std::string& what,
                  std::vector<MappedArtifact::Section>* sections) {
  if (size < kHeaderBytes) return DataLossError(what + " is truncated (" + std::to_string(size) + " bytes)");
  auto corrupt = [&](const std::string& why) { return DataLossError(what + " is corrupted: " + why); };
  if (std::memcmp(p, kMagic, 8) != 0) return corrupt("bad magic");
  const uint32_t count = Get<uint32_t>(p + 8);
  const uint64_t body = Get<uint64_t>(p + 16);
  if (body != size - kHeaderBytes) {
    return corrupt("body length " + std::to_string(body) + " but the file has " +
                   std::to_string(size - kHeaderBytes) + " bytes after the header");
  }
  if (kHeaderBytes + kEntryBytes * static_cast<uint64_t>(count) > size) return corrupt("section table overruns the file");
  if (Crc32(p + kHeaderBytes, body) != Get<uint32_t>(p + 24)) return corrupt("checksum mismatch");
  for (uint32_t k = 0; k < count; ++k) {
    const uint8_t* e = p + kHeaderBytes + kEntryBytes * k;
    MappedArtifact::Section s;
    s.name.assign(reinterpret_cast<const char*>(e), strnlen(reinterpret_cast<const char*>(e), kNameBytes));
    s.dtype = static_cast<DType>(Get<uint32_t>(e + 48));
    s.rows = Get<uint64_t>(e + 56);
    s.cols = Get<uint64_t>(e + 64);
    const uint64_t off = Get<uint64_t>(e + 72);
    s.bytes = Get<uint64_t>(e + 80);
    if (off > size || s.bytes > size - off) return corrupt("section \"" + s.name + "\" overruns the file");
    s.data = p + off;
    sections->push_back(std::move(s));
  }
  return OkStatus();
}

}  // namespace

StatusOr<std::string> EncodeArtifact(const std::vector<SectionView>& sections) {
  // Header + table + aligned payloads in one buffer; the CRC covers all but the header.
  uint64_t offset = AlignUp(kHeaderBytes + kEntryBytes * sections.size());
  std::vector<uint64_t> offsets;
  for (const SectionView& s : sections) {
    if (s.name.empty() || s.name.size() >= kNameBytes) {
      return InvalidArgumentError("artifact section name \"" + s.name + "\" must have 1 to 47 bytes");
    }
    if (s.dtype != DType::kBytes && s.bytes != s.rows * s.cols * ElementBytes(s.dtype)) {
      return InvalidArgumentError("artifact section \"" + s.name + "\": " + std::to_string(s.bytes) +
                                  " bytes do not match " + std::to_string(s.rows) + " x " +
                                  std::to_string(s.cols));
    }
    offsets.push_back(offset);
    offset = AlignUp(offset + s.bytes);
  }
  const uint64_t total = offset;
  std::string out(total, '\0');
  uint8_t* buf = reinterpret_cast<uint8_t*>(out.data());
  std::memcpy(buf, kMagic, 8);
  Put<uint32_t>(buf, 8, static_cast<uint32_t>(sections.size()));
  Put<uint64_t>(buf, 16, total - kHeaderBytes);
  for (size_t k = 0; k < sections.size(); ++k) {
    const SectionView& s = sections[k];
    const uint64_t e = kHeaderBytes + kEntryBytes * k;
    std::memcpy(buf + e, s.name.data(), s.name.size());
    Put<uint32_t>(buf, e + 48, static_cast<uint32_t>(s.dtype));
    Put<uint64_t>(buf, e + 56, s.rows);
    Put<uint64_t>(buf, e + 64, s.cols);
    Put<uint64_t>(buf, e + 72, offsets[k]);
    Put<uint64_t>(buf, e + 80, s.bytes);
    if (s.bytes) std::memcpy(buf + offsets[k], s.data, s.bytes);
  }
  Put<uint32_t>(buf, 24, Crc32(buf + kHeaderBytes, total - kHeaderBytes));
  return out;
}

Status WriteFileAtomically(const std::string& path, const std::string& bytes) {
  const std::string dir_of = std::filesystem::path(path).parent_path().string();
  struct statvfs fs;
  if (::statvfs(dir_of.empty() ? "." : dir_of.c_str(), &fs) == 0) {
    const uint64_t free_bytes = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
    if (free_bytes < bytes.size() + kMetadataHeadroomBytes) {
      return DiskFull(dir_of, "writing \"" + path + "\": " + std::to_string(bytes.size()) + " bytes would leave less than " +
                                  std::to_string(kMetadataHeadroomBytes >> 20) + " MiB free for the metadata (" +
                                  std::to_string(free_bytes) + " bytes free)");
    }
  }
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return FileError("creating", tmp, errno);
  Status st = WriteAll(fd, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), tmp);
  if (st.ok() && ::fsync(fd) != 0) st = FileError("fsync", tmp, errno);
  ::close(fd);
  if (st.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    st = InternalError("renaming \"" + tmp + "\" to \"" + path + "\": " + std::strerror(errno));
  }
  if (!st.ok()) {
    ::unlink(tmp.c_str());
    return st;
  }
  // Make the rename itself durable.
  const std::string dir = std::filesystem::path(path).parent_path().string();
  const int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return OkStatus();
}

Status WriteArtifact(const std::string& path, const std::vector<SectionView>& sections) {
  KLS_ASSIGN_OR_RETURN(std::string bytes, EncodeArtifact(sections));
  return WriteFileAtomically(path, bytes);
}

StatusOr<std::shared_ptr<MappedArtifact>> MappedArtifact::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return NotFoundError("artifact \"" + path + "\" does not exist");
    return InternalError("opening artifact \"" + path + "\": " + std::strerror(errno));
  }
  struct stat sb;
  if (::fstat(fd, &sb) != 0) {
    ::close(fd);
    return InternalError("stat artifact \"" + path + "\": " + std::strerror(errno));
  }
  const uint64_t size = static_cast<uint64_t>(sb.st_size);
  if (size < kHeaderBytes) {
    ::close(fd);
    return DataLossError("artifact \"" + path + "\" is truncated (" + std::to_string(size) + " bytes)");
  }
  void* base = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (base == MAP_FAILED) return InternalError("mmap artifact \"" + path + "\": " + std::strerror(errno));
  std::shared_ptr<MappedArtifact> a(new MappedArtifact());
  a->path_ = path;
  a->base_ = base;
  a->size_ = size;
  KLS_RETURN_IF_ERROR(ParseImage(static_cast<const uint8_t*>(base), size, "artifact \"" + path + "\"", &a->sections_));
  return a;
}

MappedArtifact::~MappedArtifact() {
  if (base_) ::munmap(base_, size_);
}

const MappedArtifact::Section* MappedArtifact::Find(const std::string& name) const {
  for (const Section& s : sections_)
    if (s.name == name) return &s;
  return nullptr;
}

Status VerifyArtifact(const std::string& path) { return MappedArtifact::Open(path).status(); }

Status VerifyArtifactBytes(const std::string& bytes, const std::string& what) {
  std::vector<MappedArtifact::Section> sections;
  return ParseImage(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), what, &sections);
}

}  // namespace kls::store
