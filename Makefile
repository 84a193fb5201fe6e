# fedgen-debug: the two commands a newcomer runs are `make demo` and `make test`.
# Both create the pinned virtualenv (.venv, Python 3.11) when it is missing.
SHELL := /bin/sh
VENV ?= .venv
BIN := $(VENV)/bin
RUNS ?= runs
PIP_QUIET ?= -q

# The package's data too (setup.cfg package_data: the shipped calibrations, the diagnosis schema): a changed
# calibration must reinstall, or the tests read the old one.
PROJECT_SOURCES := $(shell find fedgen_debug models selectors app -name '*.py' -o -name '*.json' 2>/dev/null) setup.cfg pyproject.toml

.PHONY: venv install demo app test test-all test-browser lock clean

# The stack does not resolve by itself (TFF 0.87 pins a jaxlib the registry lacks, Streamlit's
# newest deps break TF 2.14), so the venv installs a fully pinned lock file without resolving.
$(VENV)/.stack-installed: requirements/lock.txt scripts/find-python311.sh
	@py=$$(sh scripts/find-python311.sh) || exit 1; \
	  echo "Creating $(VENV) with $$py"; \
	  rm -rf $(VENV) && "$$py" -m venv $(VENV)
	$(BIN)/pip install $(PIP_QUIET) --no-deps -r requirements/lock.txt
	@touch $@

# GPU=1: also TensorFlow's CUDA libraries from pip (requirements/gpu.txt); the `tf` backend then runs on
# the GPU with no code change (TF places the ops). Check with `.venv/bin/fedgen-debug doctor`.
GPU ?=
venv: $(VENV)/.stack-installed $(if $(GPU),$(VENV)/.gpu-installed)

$(VENV)/.gpu-installed: $(VENV)/.stack-installed requirements/gpu.txt
	$(BIN)/pip install $(PIP_QUIET) --no-deps -r requirements/gpu.txt
	@touch $@

# Non-editable install: `models/` and `selectors/` only exist as fedgen_debug.models and
# fedgen_debug.selectors inside the installed package (see setup.cfg), never as top-level modules.
$(VENV)/.project-installed: $(VENV)/.stack-installed $(if $(GPU),$(VENV)/.gpu-installed) $(PROJECT_SOURCES)
	rm -rf build
	$(BIN)/pip install $(PIP_QUIET) --no-deps --no-build-isolation --force-reinstall .
	rm -rf build *.egg-info
	@touch $@

install: $(VENV)/.project-installed

demo: install
	$(BIN)/fedgen-debug demo --out $(RUNS)/demo

app: install
	$(BIN)/fedgen-debug app --runs $(RUNS)

# The default run excludes tests marked `slow`; `make test-all` runs them too. Both run on TEST_WORKERS
# xdist workers, a test file (or the files sharing the demo and monitor stores) per worker at a time
# (tests/conftest.py); TEST_WORKERS=0 runs in one process. A worker that crashes ends the run, failed:
# restarted, one crashed worker left the session hanging (xdist 3.8, loadgroup) until CI's time cap.
TEST_WORKERS ?= 2
XDIST := $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadgroup --max-worker-restart=0)
test: install
	$(BIN)/pytest $(XDIST)

test-all: install
	$(BIN)/pytest $(XDIST) -m "not browser"

# The app in Debian's Chromium (not part of `make test`): needs `apt-get install chromium chromium-driver`.
# BROWSER_STORE=runs/demo shows a `make demo` store (default: the demo at test size, built by the test)
# with the ledger it charged ($FEDGEN_DEBUG_LEDGER, else ~/.fedgen-debug/ledger); BROWSER_MONITOR_STORE=DIR a store
# holding a monitor (default: a tiny one built by the test); SCREENSHOTS=docs/screenshots
# keeps the screenshots.
BROWSER_STORE ?=
BROWSER_MONITOR_STORE ?=
SCREENSHOTS ?=
test-browser: install
	@test -x /usr/bin/chromium -a -x /usr/bin/chromedriver || { \
	  echo "test-browser needs Debian's Chromium and its driver: apt-get install chromium chromium-driver"; exit 1; }
	$(BIN)/pip install $(PIP_QUIET) --no-deps -r requirements/browser.txt
	FEDGEN_DEBUG_BROWSER_STORE="$(BROWSER_STORE)" FEDGEN_DEBUG_SCREENSHOTS="$(SCREENSHOTS)" \
	  FEDGEN_DEBUG_BROWSER_MONITOR_STORE="$(BROWSER_MONITOR_STORE)" \
	  FEDGEN_DEBUG_BROWSER_LEDGER="$$(test -n "$(BROWSER_STORE)" && echo "$${FEDGEN_DEBUG_LEDGER:-$$HOME/.fedgen-debug/ledger}")" \
	  $(BIN)/pytest -m browser tests/test_app_browser.py

# Re-resolve the stack into requirements/lock.txt (needs the package registry).
lock:
	@py=$$(sh scripts/find-python311.sh) || exit 1; \
	  rm -rf .venv-lock && "$$py" -m venv .venv-lock && \
	  .venv-lock/bin/pip install $(PIP_QUIET) -r requirements/stack.in -c requirements/constraints.txt && \
	  .venv-lock/bin/pip install $(PIP_QUIET) --no-deps tensorflow-federated==0.87.0 && \
	  { sed -n '1,3p' requirements/lock.txt; .venv-lock/bin/pip freeze --all | sort -f; } > requirements/lock.txt.new && \
	  mv requirements/lock.txt.new requirements/lock.txt && rm -rf .venv-lock

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
