# Two entry points for a newcomer (README "Quick start"):
#   make run   — install missing Debian packages, build, start kls-server on 127.0.0.1:50051
#   make test  — install missing Debian packages, build, run the whole test suite
BUILD_DIR ?= build
JOBS ?= $(shell nproc)
LISTEN ?= 127.0.0.1:50051
DATA_DIR ?= ./kls-data
CMAKE_FLAGS ?=

.PHONY: deps configure build run test fuzz clean

deps:
	bash deploy/install-deps.sh

configure: deps
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

run: build
	$(BUILD_DIR)/server/kls-server --listen $(LISTEN) --data-dir $(DATA_DIR)

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) --timeout 900

# libFuzzer targets (tests/fuzz) with ASan + UBSan, built with clang into
# $(FUZZ_DIR); run one with e.g.
#   build-fuzz/tests/fuzz/fuzz_csv -max_total_time=600 tests/fuzz/corpus/csv
FUZZ_DIR ?= build-fuzz
fuzz:
	bash deploy/install-deps.sh --fuzz
	cmake -S . -B $(FUZZ_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++-14 \
	      -DKLS_FUZZ=ON -DKLS_BUILD_TESTS=OFF -DKLS_BUILD_BENCH=OFF -DKLS_NATIVE=OFF $(CMAKE_FLAGS)
	cmake --build $(FUZZ_DIR) -j $(JOBS) --target fuzz

clean:
	rm -rf $(BUILD_DIR) $(FUZZ_DIR)
