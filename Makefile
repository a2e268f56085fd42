# Thin front end over scripts/setup.sh, CMake and CTest. Everything real lives in CMakeLists.txt.
#   make build | test | demo | bench | install | clean
# Variables: BUILD_DIR (build), BUILD_TYPE (RelWithDebInfo), PREFIX (/usr/local), JOBS (nproc),
#            BENCH_ARGS (extra flags for every bench scenario), SANDLET_ROOT (runtime root for the demo).

BUILD_DIR  ?= build
BUILD_TYPE ?= RelWithDebInfo
PREFIX     ?= /usr/local
JOBS       ?= $(shell nproc)
CMAKE      ?= cmake
CTEST      ?= ctest
BENCH_ARGS ?=

.PHONY: all setup configure build test demo bench install clean
.DELETE_ON_ERROR:

all: build

setup:
	./scripts/setup.sh

configure: setup
	$(CMAKE) -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DCMAKE_INSTALL_PREFIX=$(PREFIX)

build: configure
	$(CMAKE) --build $(BUILD_DIR) -j$(JOBS)

# ctest exits non-zero when any test fails (or none is found); make passes that on.
test: build
	$(CTEST) --test-dir $(BUILD_DIR) --output-on-failure --no-tests=error

# A miniature agentic rollout (examples/rollout.cpp), then the CLI; see scripts/demo.sh. It uses a
# throw-away runtime root, unless SANDLET_ROOT is set (then that one is used and kept).
demo: build
	@BUILD_DIR="$(abspath $(BUILD_DIR))" bash ./scripts/demo.sh

# Each scenario prints one JSON object on one line (JSON Lines); the bench makes its own temp runtime
# root and removes it. A failing scenario does not stop the others, but fails the target.
BENCH_RUNS = \
  "lifecycle --iterations 200 --concurrency 1" \
  "lifecycle --iterations 200 --concurrency 2" \
  "lifecycle-cli --iterations 100 --concurrency 1" \
  "exec --iterations 1000 --concurrency 1" \
  "idle-density --iterations 200" \
  "workspace-provision --sandboxes 16 --workspace-mb 100" \
  "import --workspace-mb 100 --iterations 3"

bench: build
	@failed=0; \
	for run in $(BENCH_RUNS); do \
	  ./$(BUILD_DIR)/sandlet-bench $$run --json --rootfs "$(CURDIR)/$(BUILD_DIR)/test-rootfs" $(BENCH_ARGS) \
	    || { echo "bench: '$$run' failed (exit $$?)" >&2; failed=1; }; \
	done; \
	exit $$failed

install: build
	$(CMAKE) --install $(BUILD_DIR) --prefix $(PREFIX)

clean:
	rm -rf -- $(BUILD_DIR)
