# pjrtd: the two commands of the README, and the targets behind them.
#
#   make demo    install what is missing, build, run the example end to end
#   make test    install what is missing, build, run every test
#
# Other targets: check (the fast inner loop: build, unit tests, the quick
# Python suites, lint; a few minutes), deps, build, test-cpp, test-python,
# test-cuda-programs, test-host-levels (the op suites at each lower x86-64
# level), lint (flake8, clang-format, the layer table), package (the .deb),
# wheel (the pjrt_client wheel), test-package, test-sanitize
# (everything under ASan+UBSan and TSan; `make test` runs its short
# profile), fuzz (FUZZ_SECONDS per target, default 60), stress (the long
# load and fault tests), bench, bench-portable (the portable build against
# a native one), install, format, clean.

BUILD_DIR ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
PYTHON := /usr/bin/python3
export PYTHONDONTWRITEBYTECODE := 1

FUZZ_SECONDS ?= 60

.PHONY: all deps build demo bench-deps bench-gemm bench-portable test test-cpp test-python test-cuda-programs lint \
	check \
	test-host-levels \
	package wheel test-package \
	test-sanitize test-sanitize-short fuzz stress bench install format clean

all: build

deps:
	@scripts/install-deps

$(BUILD_DIR)/build.ninja:
	cmake -S . -B $(BUILD_DIR) -G Ninja $(CMAKE_FLAGS)

build: deps $(BUILD_DIR)/build.ninja
	cmake --build $(BUILD_DIR) -j $(JOBS)

demo: build
	@scripts/demo $(BUILD_DIR)

test: build
	$(MAKE) --no-print-directory test-cpp test-python test-cuda-programs lint \
	  test-host-levels test-package test-sanitize-short

test-cpp:
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j $(JOBS)

# The Python suites write every program they compile to RECORDED (for
# test-cuda-programs).
RECORDED := $(abspath $(BUILD_DIR))/recorded-programs

test-python:
	rm -rf $(RECORDED)
	PJRT_BUILD_DIR=$(abspath $(BUILD_DIR)) PYTHONPATH=$(abspath $(BUILD_DIR))/python \
	  PJRT_RECORD_PROGRAMS=$(RECORDED) $(PYTHON) -m pytest -q tests/python tests/stress

# Every program the Python suites ran on the host platform compiles for
# CUDA (sm_90 and sm_80, through NVRTC: no GPU needed); none may be
# refused. Run after test-python; skipped where the build has no CUDA
# Toolkit.
test-cuda-programs:
	@if [ ! -x $(BUILD_DIR)/bin/pjrt_cuda_codegen_tests ]; then \
	  echo "test-cuda-programs: skipped (built without the CUDA Toolkit)"; \
	elif [ ! -d $(RECORDED) ]; then \
	  echo "test-cuda-programs: run make test-python first (it records the programs)"; exit 1; \
	else \
	  PJRT_RECORDED_PROGRAMS=$(RECORDED) $(BUILD_DIR)/bin/pjrt_cuda_codegen_tests \
	    --gtest_filter=CudaCompileCheck.EveryProgramThePythonSuitesCompiledCompiles; \
	fi

# The op suites again with the host kernels of each lower x86-64 level
# (the run above takes the CPU's own): the portable build's modules and its
# built-in kernels all compute the same.
HOST_LEVEL_SUITES := tests/python/test_ops.py tests/python/test_ops_shapes.py \
	tests/python/test_ops_dot_reduce.py tests/python/test_ops_types.py \
	tests/python/test_ops_windows.py tests/python/test_stablehlo.py \
	tests/python/test_mlp.py \
	tests/python/test_metrics.py::test_build_info_names_the_host_kernels_level

test-host-levels:
	@for level in x86-64-v2 x86-64-v3; do \
	  echo "test-host-levels: $$level"; \
	  PJRT_HOST_ISA=$$level $(BUILD_DIR)/bin/pjrt_runtime_tests --gtest_brief=1 \
	    --gtest_filter='HostIsa.*:HostCompilerTest.*:HostKernelsTest.*' || exit 1; \
	  PJRT_HOST_ISA=$$level PJRT_BUILD_DIR=$(abspath $(BUILD_DIR)) \
	    PYTHONPATH=$(abspath $(BUILD_DIR))/python $(PYTHON) -m pytest -q \
	    $(HOST_LEVEL_SUITES) || exit 1; \
	done

# C++ sources, formatted as `make format` leaves them.
CXX_SOURCES = git ls-files '*.cc' '*.h' '*.inc' '*.cu' '*.cuh'

lint:
	flake8 client/python tests/python tests/package examples bench
	$(CXX_SOURCES) | xargs clang-format --dry-run -Werror
	$(PYTHON) scripts/check-layering

# The day-to-day loop: everything but the daemon-heavy suites, the other
# x86-64 levels, the packages and the sanitizers (make test runs them all).
CHECK_SUITES := tests/python/test_layering.py tests/python/test_docs.py \
	tests/python/test_client.py tests/python/test_ops.py \
	tests/python/test_ops_shapes.py tests/python/test_ops_dot_reduce.py \
	tests/python/test_ops_control_flow.py tests/python/test_mlp.py \
	tests/python/test_executables.py tests/python/test_hostile_inputs.py \
	tests/python/test_stablehlo.py tests/python/test_pjrtctl.py \
	tests/python/test_pjrt_hlo.py

check: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j $(JOBS) -L 'unit|lint'
	PJRT_BUILD_DIR=$(abspath $(BUILD_DIR)) PYTHONPATH=$(abspath $(BUILD_DIR))/python \
	  $(PYTHON) -m pytest -q $(CHECK_SUITES)
	$(MAKE) --no-print-directory lint

# The Debian package and the wheel, in $(BUILD_DIR)/dist.
package: build
	scripts/package deb $(BUILD_DIR)

wheel: build
	scripts/package wheel $(BUILD_DIR)

# Builds both, unpacks the .deb and runs its binaries, links an out-of-tree
# CMake project against its C++ client, installs the wheel into a fresh
# virtual environment.
test-package: build
	PJRT_BUILD_DIR=$(abspath $(BUILD_DIR)) $(PYTHON) -m pytest -q tests/package

test-sanitize: deps
	scripts/test-sanitize $(JOBS)

test-sanitize-short: deps
	scripts/test-sanitize --short $(JOBS)

fuzz: deps
	scripts/fuzz --seconds $(FUZZ_SECONDS) --jobs $(JOBS)

stress: build
	PJRT_STRESS_PROFILE=long PJRT_BUILD_DIR=$(abspath $(BUILD_DIR)) \
	  PYTHONPATH=$(abspath $(BUILD_DIR))/python $(PYTHON) -m pytest -q tests/stress

# The benchmarks compare against numpy on OpenBLAS: installed here, never
# for the tests (which compare against numpy on whatever BLAS it has).
bench-deps:
	@dpkg -s libopenblas0-pthread >/dev/null 2>&1 || \
	  apt-get install -y --no-install-recommends libopenblas0-pthread

bench: build bench-deps
	@scripts/bench $(BUILD_DIR)

# The portable build's host kernels against a -march=native build of the
# same source (built in $(BUILD_DIR)-native; docs/performance.md).
bench-portable: build
	$(PYTHON) bench/portable_vs_native.py $(BUILD_DIR) --jobs $(JOBS)

# The GEMM libraries side by side (docs/performance.md).
bench-gemm: build
	@dpkg -s libopenblas64-0-pthread libblis64-4-openmp libopenblas0-pthread \
	  >/dev/null 2>&1 || apt-get install -y --no-install-recommends \
	  libopenblas64-0-pthread libblis64-4-openmp libopenblas0-pthread
	@$(BUILD_DIR)/bin/gemm_libraries

install: build
	cmake --install $(BUILD_DIR)

format:
	$(CXX_SOURCES) | xargs clang-format -i

clean:
	rm -rf $(BUILD_DIR) $(BUILD_DIR)-native build-asan build-tsan
