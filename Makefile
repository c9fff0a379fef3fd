# Two entry points for a newcomer (README "Quick start"):
#   make run   — install missing Debian packages, build, start kls-server on 127.0.0.1:50051
#   make test  — install missing Debian packages, build, run the whole test suite
BUILD_DIR ?= build
JOBS ?= $(shell nproc)
LISTEN ?= 127.0.0.1:50051
DATA_DIR ?= ./kls-data
CMAKE_FLAGS ?=

.PHONY: deps configure build run test clean

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

clean:
	rm -rf $(BUILD_DIR)
