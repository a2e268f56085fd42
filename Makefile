# Thin front end over scripts/setup.sh, CMake and CTest. Everything real lives in CMakeLists.txt.
#   make build | test | demo | bench | install | clean
# Variables: BUILD_DIR (build), BUILD_TYPE (RelWithDebInfo), PREFIX (/usr/local), JOBS (nproc),
#            BENCH_ARGS (extra flags for every bench scenario), SANDLET_ROOT (runtime root for the demo),
#            VENV (.venv: the Python environment setup.sh makes for the binding, its tests and examples).

BUILD_DIR  ?= build
BUILD_TYPE ?= RelWithDebInfo
PREFIX     ?= /usr/local
JOBS       ?= $(shell nproc)
CMAKE      ?= cmake
CTEST      ?= ctest
BENCH_ARGS ?=
VENV       ?= $(CURDIR)/.venv
PYTHON     := $(abspath $(VENV))/bin/python
export SANDLET_VENV := $(abspath $(VENV))

.PHONY: all setup configure build test demo bench bench-python plots wheel install clean
.DELETE_ON_ERROR:

all: build

setup:
	./scripts/setup.sh

configure: setup
	$(CMAKE) -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DCMAKE_INSTALL_PREFIX=$(PREFIX) \
	  -DPython_EXECUTABLE=$(PYTHON)

build: configure
	$(CMAKE) --build $(BUILD_DIR) -j$(JOBS)

# ctest exits non-zero when any test fails (or none is found); make passes that on.
test: build
	$(CTEST) --test-dir $(BUILD_DIR) --output-on-failure --no-tests=error

# A miniature agentic rollout (examples/rollout.cpp), a trajectory forked at step k (examples/fork.cpp),
# then the CLI (environments, a build from a recipe, snapshot and fork), then the Python trainer that
# survives being killed (examples/python/reinforce_trainer.py); see scripts/demo.sh. It uses a
# throw-away runtime root, unless SANDLET_ROOT is set (then that one is used and kept).
demo: build
	@BUILD_DIR="$(abspath $(BUILD_DIR))" PYTHON="$(PYTHON)" bash ./scripts/demo.sh

# Each scenario prints one JSON object on one line (JSON Lines); the bench makes its own temp runtime
# root and removes it. A failing scenario does not stop the others, but fails the target.
BENCH_RUNS = \
  "lifecycle --iterations 200 --concurrency 1" \
  "lifecycle --iterations 200 --concurrency 2" \
  "lifecycle-cli --iterations 100 --concurrency 1" \
  "exec --iterations 1000 --concurrency 1" \
  "idle-density --iterations 200" \
  "workspace-provision --sandboxes 16 --workspace-mb 100" \
  "import --workspace-mb 100 --iterations 3" \
  "net --iterations 50 --sandboxes 100"

bench: build
	@failed=0; \
	for run in $(BENCH_RUNS); do \
	  ./$(BUILD_DIR)/sandlet-bench $$run --json --rootfs "$(CURDIR)/$(BUILD_DIR)/test-rootfs" $(BENCH_ARGS) \
	    || { echo "bench: '$$run' failed (exit $$?)" >&2; failed=1; }; \
	done; \
	exit $$failed

# The Python binding's overhead per exec vs the C API, and asyncio throughput (bench/python).
bench-python: build
	PYTHONPATH=$(abspath $(BUILD_DIR))/python $(PYTHON) bench/python/bench_python.py \
	  --rootfs "$(CURDIR)/$(BUILD_DIR)/test-rootfs" $(BENCH_ARGS)

# Latency CDFs and summary.png (bench/plots) from recorded results (JSON Lines from `make bench`).
# One result per scenario (the committed plots' names): the CLI's from session 9 (the median runs), the rest as recorded.
BENCH_RESULTS := bench/results
PLOT_RESULTS ?= $(addprefix $(BENCH_RESULTS)/, \
                  2026-11-29-oneshot/exec.json 2026-11-29-oneshot/lifecycle.json \
                  2026-11-29-oneshot/lifecycle-cold-idle200.json 2026-11-29-cdf/idle-density.json \
                  2026-11-29-session9/lifecycle-cli-s9-1.json 2026-11-29-session9/lifecycle-cli-idle200-s9-2.json \
                  2026-11-29/import.json 2026-11-29-py/python.json 2026-11-29/workspace-provision.json)
PLOTS_DIR    ?= bench/plots
plots: setup
	$(PYTHON) bench/plot.py --out $(PLOTS_DIR) $(PLOT_RESULTS)

# A wheel of the Python binding (scikit-build-core; libsandlet.so.1 inside) into $(BUILD_DIR)/wheel.
wheel: setup
	$(PYTHON) -m pip wheel --no-deps -w $(BUILD_DIR)/wheel .

install: build
	$(CMAKE) --install $(BUILD_DIR) --prefix $(PREFIX)

clean:
	rm -rf -- $(BUILD_DIR)
