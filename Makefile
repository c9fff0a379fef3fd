# Two entry points for a newcomer (README "Quick start"):
#   make run   — install missing Debian packages, build, start kls-server on 127.0.0.1:50051
#   make test  — install missing Debian packages, build, run the whole test suite
# and the API reference:
#   make docs  — install doxygen if missing, write the HTML reference to build-docs/html/
JOBS ?= $(shell nproc)
LISTEN ?= 127.0.0.1:50051
DATA_DIR ?= ./kls-data
CMAKE_FLAGS ?=
BUILD_TYPE ?= Release
CTEST_ARGS ?=

# Sanitizer builds: `make test SANITIZE=address,undefined` or
# `make test SANITIZE=thread` build every target with the sanitizer into
# build-<sanitizer>/ (RelWithDebInfo) and run the suites that exercise threads,
# RPCs, the stores and the real binaries (labels server and e2e; the parsers
# have their own sanitized runs in `make fuzz`). An ASan / UBSan report fails
# the test that triggered it; ThreadSanitizer's are classified after the run
# (below).
SANITIZE ?=
comma := ,
ifneq ($(SANITIZE),)
BUILD_DIR ?= build-$(subst $(comma),-,$(SANITIZE))
BUILD_TYPE = RelWithDebInfo
# -O1 -g1: quicker to compile than -O2 -g for the Eigen-heavy core, and line
# tables are all a sanitizer report needs.
CMAKE_FLAGS += -DKLS_SANITIZE=$(SANITIZE) -DCMAKE_CXX_FLAGS_RELWITHDEBINFO='-O1 -g1 -DNDEBUG'
BUILD_TARGETS ?= tests-server tests-e2e
CTEST_ARGS += -L 'server|e2e' -LE 'image|python'
CTEST_TIMEOUT ?= 1800
export ASAN_OPTIONS ?= detect_leaks=1:abort_on_error=1:detect_container_overflow=0
export LSAN_OPTIONS ?= suppressions=$(CURDIR)/tests/sanitizers/lsan.supp:print_suppressions=0
export UBSAN_OPTIONS ?= print_stacktrace=1:halt_on_error=1
# ThreadSanitizer: every sanitized process (tests and the servers they start)
# writes its reports to $(BUILD_DIR)/tsan-logs/ and goes on; after ctest,
# tests/sanitizers/tsan_report_check.py fails the run on any report whose
# accessing code is ours and counts the ones wholly inside the uninstrumented
# gRPC / protobuf / Abseil (docs/RELIABILITY.md "Sanitizers").
TSAN_LOG_DIR = $(CURDIR)/$(BUILD_DIR)/tsan-logs
# gRPC, protobuf and Abseil built with ThreadSanitizer from Debian's source
# packages (tests/sanitizers/build_tsan_deps.sh: about half an hour the first
# time on 2 cores, then cached), so their locks are visible to it.
ifeq ($(SANITIZE),thread)
TSAN_DEPS ?= $(CURDIR)/build-thread-deps
CMAKE_FLAGS += -DCMAKE_PREFIX_PATH=$(TSAN_DEPS)
# Tests that bound elapsed time widen their slack by this factor
# (tests/test_util/time_scale.h): ThreadSanitizer runs 5–25× slower.
export KLS_TEST_TIME_SCALE ?= 10
else
# AddressSanitizer + UBSan: 2–3× slower, up to 20× for the replicas' long
# KL-ADMM job (93 s against ~5 s) when a build shares the cores.
export KLS_TEST_TIME_SCALE ?= 3
endif
export TSAN_OPTIONS ?= halt_on_error=0:exitcode=0:second_deadlock_stack=1:log_path=$(TSAN_LOG_DIR)/tsan:suppressions=$(CURDIR)/tests/sanitizers/tsan.supp
endif
BUILD_DIR ?= build
BUILD_TARGETS ?= all
CTEST_TIMEOUT ?= 900

.PHONY: deps configure build run test fuzz docs clean

deps:
	bash deploy/install-deps.sh

configure: deps
ifeq ($(SANITIZE),thread)
	bash tests/sanitizers/build_tsan_deps.sh $(TSAN_DEPS) $(JOBS)
endif
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS) --target $(BUILD_TARGETS)

run: build
	$(BUILD_DIR)/server/kls-server --listen $(LISTEN) --data-dir $(DATA_DIR)

test: build
ifeq ($(SANITIZE),thread)
	rm -rf $(TSAN_LOG_DIR) && mkdir -p $(TSAN_LOG_DIR)
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) --timeout $(CTEST_TIMEOUT) $(CTEST_ARGS); \
	  status=$$?; /usr/bin/python3 $(CURDIR)/tests/sanitizers/tsan_report_check.py $(TSAN_LOG_DIR) $(CURDIR) && exit $$status
else
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) --timeout $(CTEST_TIMEOUT) $(CTEST_ARGS)
endif

# libFuzzer targets (tests/fuzz) with ASan + UBSan, built with clang into
# $(FUZZ_DIR); run one with a scratch corpus first (libFuzzer adds to the first
# directory), e.g.
#   mkdir -p /tmp/corpus-csv
#   build-fuzz/tests/fuzz/fuzz_csv -max_total_time=600 /tmp/corpus-csv tests/fuzz/corpus/csv
FUZZ_DIR ?= build-fuzz
fuzz:
	bash deploy/install-deps.sh --fuzz
	cmake -S . -B $(FUZZ_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++-14 \
	      -DKLS_FUZZ=ON -DKLS_BUILD_TESTS=OFF -DKLS_BUILD_BENCH=OFF -DKLS_NATIVE=OFF $(CMAKE_FLAGS)
	cmake --build $(FUZZ_DIR) -j $(JOBS) --target fuzz

# API reference (Doxygen): core/, server/ and client/ headers plus a page
# generated from the proto/ comments (docs/doxygen/proto_to_markdown.py), into
# $(DOCS_DIR)/html/index.html; warnings go to $(DOCS_DIR)/doxygen-warnings.log.
# Installs doxygen when missing (as root or with sudo, like
# deploy/install-deps.sh). Independent of the C++ build: neither `make test`
# nor CI needs doxygen.
DOCS_DIR ?= build-docs
DOCS_ABS = $(abspath $(DOCS_DIR))
docs:
	@command -v doxygen >/dev/null 2>&1 || { \
	  SUDO=; if [ "$$(id -u)" -ne 0 ]; then \
	    command -v sudo >/dev/null || { echo "docs: need root or sudo to install doxygen" >&2; exit 1; }; SUDO=sudo; fi; \
	  echo "docs: installing doxygen"; \
	  $$SUDO apt-get update -qq && \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends doxygen; }
	rm -rf $(DOCS_ABS)/html && mkdir -p $(DOCS_ABS)/api
	/usr/bin/python3 docs/doxygen/proto_to_markdown.py proto $(DOCS_ABS)/api/proto.md
	KLS_SOURCE_DIR=$(CURDIR) KLS_DOCS_DIR=$(DOCS_ABS) doxygen docs/doxygen/Doxyfile
	@echo "docs: $(DOCS_DIR)/html/index.html ($$(grep -c 'warning:' $(DOCS_ABS)/doxygen-warnings.log) warnings in $(DOCS_DIR)/doxygen-warnings.log)"

clean:
	rm -rf $(BUILD_DIR) $(FUZZ_DIR) $(DOCS_DIR)
