#!/usr/bin/python3
"""Classifies ThreadSanitizer reports of a `make test SANITIZE=thread` run.

Usage: tsan_report_check.py LOG_DIR SOURCE_DIR

TSAN_OPTIONS (Makefile) makes every sanitized process, the test binaries and
the kls-server / kls processes they start, append its reports to
LOG_DIR/tsan.<pid> and exit normally. Debian's gRPC, protobuf and Abseil are
not built with ThreadSanitizer, so it cannot see their synchronization and
reports races between their own threads (docs/RELIABILITY.md). A suppression
file cannot express "no frame of ours", so this script does, per report:

  * the report's *access stacks* are the stacks printed before the first
    "Location is", "Mutex", "Thread" or "SUMMARY" section (the two accesses
    of a data race, the stacks of a lock-order inversion, the one stack of a
    use-after-free, ...);
  * each access stack has an *accessor*: its first frame that is not
    ThreadSanitizer's own interceptor (memcpy, free, pthread_*: files under
    libsanitizer), not inlined C++ standard library code (/usr/include/c++),
    and not protobuf-generated message code of the build tree — the code
    that made the access on purpose;
  * a report is OURS when any accessor is in a file under SOURCE_DIR
    (core/, server/, client/, tests/, bench/) and THIRD-PARTY otherwise
    (the accessors are in gRPC, protobuf or Abseil: their libraries or their
    headers' templates such as grpcpp's CallbackUnaryHandler). Our frames
    further down a third-party accessor's stack are callers into gRPC (e.g. a
    test's SetUp building a server), not our accesses.

It prints every OURS report in full and a count of THIRD-PARTY reports by the
accessor of their first access stack, and exits 1 if there is any OURS report, else 0.
"""
import collections
import os
import re
import sys

HEADER = re.compile(r"^WARNING: ThreadSanitizer: (.*?)(?: \(pid=\d+\))?$")
FRAME = re.compile(r"^\s+#\d+ (.*?) (\S+?):(\d+)(?::\d+)? \(")
FRAME_NO_LINE = re.compile(r"^\s+#\d+ (.*?) \(([^)+]+)\+0x[0-9a-f]+\)$")
SECTION_END = re.compile(r"^\s*(Location is|Mutex M|Thread T|SUMMARY:)")
OUR_DIRS = ("core/", "server/", "client/", "tests/", "bench/")


def split_reports(text):
    report = None
    for line in text.splitlines():
        m = HEADER.match(line)
        if m:
            report = {"kind": m.group(1), "lines": [line]}
            continue
        if report is None:
            continue
        if line.startswith("=================="):
            yield report
            report = None
            continue
        report["lines"].append(line)
    if report is not None:
        yield report


def access_stacks(report):
    """The access stacks, each a list of (function, file or module)."""
    stacks, current = [], None
    for line in report["lines"][1:]:
        if SECTION_END.match(line):
            break
        m = FRAME.match(line) or FRAME_NO_LINE.match(line)
        if m:
            if current is None:
                current = []
                stacks.append(current)
            current.append((m.group(1), m.group(2)))
        elif not line.strip().startswith("#"):
            current = None  # "Read of size 8 ... by thread T2:" starts the next stack
    return stacks


def accessor(stack, build_dirs):
    for function, where in stack:
        w = os.path.normpath(where) if os.path.isabs(where) else where
        if "libsanitizer" in w or "libtsan" in w or w.startswith("/usr/include/c++/"):
            continue
        # Generated protobuf code, by absolute path or relative to the build directory.
        if any(w.startswith(b + os.sep) for b in build_dirs) or ("proto/kls/" in w and ".pb." in w):
            continue
        return function, where
    return stack[0] if stack else ("(no frames)", "")


def is_ours(path, source_dir):
    if not os.path.isabs(path):  # ccache's CCACHE_BASEDIR makes paths relative to the build directory
        rel = os.path.normpath(path)
        while rel.startswith("../"):
            rel = rel[3:]
        return rel.startswith(OUR_DIRS)
    path = os.path.normpath(path)
    if not path.startswith(source_dir + os.sep):
        return False
    rel = path[len(source_dir) + 1:]
    return rel.startswith(OUR_DIRS)


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    log_dir, source_dir = sys.argv[1], os.path.normpath(os.path.abspath(sys.argv[2]))
    build_dirs = [os.path.join(source_dir, d) for d in os.listdir(source_dir) if d.startswith("build")]
    if not os.path.isdir(log_dir):
        print("tsan_report_check: no log directory %s (no sanitized process wrote a report)" % log_dir)
        return 0
    ours, third_party = [], collections.Counter()
    files = sorted(os.listdir(log_dir))
    for name in files:
        with open(os.path.join(log_dir, name), errors="replace") as f:
            for report in split_reports(f.read()):
                accessors = [accessor(st, build_dirs) for st in access_stacks(report)]
                if any(is_ours(where, source_dir) for _, where in accessors):
                    ours.append((name, report))
                else:
                    top = accessors[0][0] if accessors else "(no frames)"
                    third_party[(report["kind"], top[:100])] += 1
    print("tsan_report_check: %d log files, %d reports with a KLS accessor, %d third-party only" %
          (len(files), len(ours), sum(third_party.values())))
    for (kind, top), count in third_party.most_common():
        print("  third-party %5d  %s  [%s]" % (count, kind, top))
    for name, report in ours:
        print("\n--- %s: %s" % (name, report["kind"]))
        print("\n".join(report["lines"]))
    return 1 if ours else 0


if __name__ == "__main__":
    sys.exit(main())
