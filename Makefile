# TGS build: plain gcc, no CUDA toolkit needed.  `make` builds the C parts into
# build/; `make test` also creates the venv (.venv/) and runs the whole suite.

PYTHON  ?= python3
CC      ?= gcc
VENV    := .venv
VPY     := $(VENV)/bin/python
BUILD   := build

# contracts/include/tgs/: every header two products share (the driver and NVML ABIs, the
# shared files' layouts, the size and log-level grammars); the shim and the simulator include
# these and never each other's folders.
CFLAGS_COMMON := -std=gnu11 -O2 -g -fPIC -Wall -Wextra -Werror -Icontracts/include -D_GNU_SOURCE
HEADERS := $(wildcard contracts/include/tgs/*.h)

SIM_SRC   := $(wildcard sim/*.c)
SIM_HDR   := $(wildcard sim/*.h sim/*.def)
NVML_SRC  := $(wildcard sim/nvml/*.c)
NVML_HDR  := $(wildcard sim/nvml/*.h)
SHIM_SRC  := $(wildcard libshim/*.c)
SHIM_HDR  := $(wildcard libshim/*.h)
WL_SRC    := $(wildcard bench/csrc/workload/*.c)
WL_HDR    := $(wildcard bench/csrc/workload/*.h)

TARGETS :=
ifneq ($(SIM_SRC),)
TARGETS += $(BUILD)/sim/libcuda.so.1 $(BUILD)/sim/libcuda.so
endif
ifneq ($(NVML_SRC),)
TARGETS += $(BUILD)/sim/libnvidia-ml.so.1 $(BUILD)/sim/libnvidia-ml.so
endif
ifneq ($(SHIM_SRC),)
TARGETS += $(BUILD)/libtgs.so
endif
ifneq ($(WL_SRC),)
TARGETS += $(BUILD)/bin/tgs-workload
ifneq ($(SIM_SRC),)
TARGETS += $(BUILD)/bin/tgs-workload-linked
endif
endif

.PHONY: all venv test-venv frameworks test lint demo bench clean
all: $(TARGETS)

# The simulated driver.  -Bsymbolic binds its internal calls inside the library,
# as the real driver does, so an LD_PRELOAD shim never sees them.
$(BUILD)/sim/libcuda.so.1: $(SIM_SRC) $(SIM_HDR) $(HEADERS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -shared -Wl,-soname,libcuda.so.1 -Wl,-Bsymbolic -Wl,--no-undefined \
		-o $@ $(SIM_SRC) -lpthread -lm
$(BUILD)/sim/libcuda.so: $(BUILD)/sim/libcuda.so.1
	ln -sf libcuda.so.1 $@

# The simulated NVML: serves the simulator's devices from its state file
# (tgs/sim_state.h); exports only the nvml* entry points.
$(BUILD)/sim/libnvidia-ml.so.1: $(NVML_SRC) $(NVML_HDR) $(HEADERS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -fvisibility=hidden -shared -Wl,-soname,libnvidia-ml.so.1 \
		-Wl,-Bsymbolic -Wl,--no-undefined -o $@ $(NVML_SRC) -ldl -lpthread
$(BUILD)/sim/libnvidia-ml.so: $(BUILD)/sim/libnvidia-ml.so.1
	ln -sf libnvidia-ml.so.1 $@

# The shim (LD_PRELOAD).
$(BUILD)/libtgs.so: $(SHIM_SRC) $(SHIM_HDR) $(HEADERS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -fvisibility=hidden -shared -Wl,-soname,libtgs.so -Wl,--no-undefined \
		-o $@ $(SHIM_SRC) -ldl -lpthread

# The driver-API workload: loads libcuda at run time, never links it.
$(BUILD)/bin/tgs-workload: $(WL_SRC) $(WL_HDR) $(HEADERS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -o $@ $(WL_SRC) -ldl -lpthread -lm

# The same workload linked with -lcuda (--resolve link).  Linked against the
# simulator's libcuda.so but with no rpath: at run time LD_LIBRARY_PATH or the
# system's libcuda.so.1 decides, as for any program linked with the toolkit.
$(BUILD)/bin/tgs-workload-linked: $(WL_SRC) $(WL_HDR) $(HEADERS) $(BUILD)/sim/libcuda.so
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -DTGS_WORKLOAD_LINKED -o $@ $(WL_SRC) \
		-L$(BUILD)/sim -Wl,-rpath-link,$(BUILD)/sim -lcuda -ldl -lpthread -lm

# The venv in two stamps: .stamp, what the tools and `make demo` need (the runtime
# dependencies and the [demo] extra: matplotlib for its plots); .test-stamp adds the [test]
# extra (make test, lint, bench).  Each install phase says what it does in one line; pip's
# output goes to $(INSTALL_LOG), printed only when the phase fails.
INSTALL_LOG := $(VENV)/install.log
# $(call quietly,WHAT,COMMANDS): print WHAT, run COMMANDS into the log, the log on failure
quietly = echo "$(1)"; mkdir -p $(VENV); ( $(2) ) >$(INSTALL_LOG) 2>&1 || { \
	cat $(INSTALL_LOG); echo "make: that failed (its output is above, and in $(INSTALL_LOG))" >&2; \
	exit 1; }

$(VENV)/.stamp: pyproject.toml
	@$(call quietly,creating $(VENV) and updating its pip...,\
		$(PYTHON) -m venv $(VENV) && $(VPY) -m pip install --upgrade pip)
	@$(call quietly,installing runtime dependencies into $(VENV) (about a minute)...,\
		$(VPY) -m pip install -e '.[demo]')
	@# the deprecated `pynvml` package (kept by a venv made before) hooks every `import
	@# pynvml` with a FutureWarning; the module itself comes from nvidia-ml-py
	@$(VPY) -m pip uninstall --quiet --yes pynvml >/dev/null 2>&1 || true
	@touch $@
$(VENV)/.test-stamp: $(VENV)/.stamp
	@$(call quietly,installing test dependencies into $(VENV) (a few minutes)...,\
		$(VPY) -m pip install -e '.[test]')
	@touch $@
venv: $(VENV)/.stamp
test-venv: $(VENV)/.test-stamp

# The frameworks tier's venv (real PyTorch, CuPy; several GiB): outside the checkout, in the
# user's cache directory, reused while testbed/frameworks-requirements.txt is unchanged.
frameworks: venv
	$(VPY) -m tgs.testbed.frameworks_venv

test: all test-venv frameworks
	$(VENV)/bin/ruff check .
	$(VPY) -m pytest -q

lint: test-venv
	$(VENV)/bin/ruff check .

demo: all venv
	$(VPY) -m tgs.bench.demo

bench: all test-venv
	$(VPY) -m tgs.bench.main

clean:
	rm -rf $(BUILD)
