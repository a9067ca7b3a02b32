# The README's two commands: `make test` and `make certify`. Both work on a fresh machine:
# they create .venv, install what they need (Python packages; Debian's haproxy for the DGD's
# traffic proxy and prometheus, which seed 003's planners read traffic from), build the embedded
# cluster's binaries from Go modules (`servecert setup`, with progress, before any test starts),
# and run through tox, which holds the environments.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml tox.ini | cksum | cut -d' ' -f1)

DEBIAN_PACKAGES := haproxy prometheus

.PHONY: test certify lint bench nightly clean debian-packages setup dynamo-planner

$(STAMP): pyproject.toml tox.ini
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found; install Python >= 3.11"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet uv
	$(VENV)/bin/uv pip install --quiet --python $(VENV)/bin/python -e '.[dev,vllm-router,sglang-router]' 'tox>=4.14' 'tox-uv>=1.11'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

# Installs what is missing, only; as root with apt-get, else it says what to run.
debian-packages:
	@missing=""; for p in $(DEBIAN_PACKAGES); do command -v $$p >/dev/null || [ -x /usr/sbin/$$p ] || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			echo "installing Debian packages:$$missing"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends$$missing; \
		else \
			echo "error: missing Debian packages:$$missing; run: sudo apt-get install$$missing"; exit 1; \
		fi; \
	fi

# The cluster binaries (a cold build: about 6 min on 2 cores), outside every test's timeout.
setup: $(STAMP) debian-packages
	$(VENV)/bin/servecert setup --env cluster

test: setup
	$(VENV)/bin/tox run -e lint,py

# A cold cache builds the cluster binaries in the background at idle CPU priority while the
# process profiles are certified; the cluster certify's own setup step waits for that build.
# NB: started here, not in tox: tox reads a command's output through a pipe it stops reading
# once the command exits, so a build started there would lose its progress lines.
certify: $(STAMP) debian-packages
	@$(VENV)/bin/servecert setup --env cluster --start
	@$(VENV)/bin/tox run -e certify; status=$$?; $(VENV)/bin/servecert setup --stop; exit $$status

lint: $(STAMP)
	$(VENV)/bin/tox run -e lint

bench: $(STAMP)
	$(VENV)/bin/tox run -e bench

nightly: $(STAMP)
	$(VENV)/bin/tox run -e nightly

# Dynamo 1.6.1's planner, for `--implementation dynamo-planner` (docs/dynamo.md): a virtualenv of its own
# in the cache (it pins kubernetes<33, past which the suite is), never inside the repository.
DYNAMO_PLANNER_VENV ?= $(or $(SERVECERT_CACHE),$(HOME)/.cache/servecert)/dynamo-planner
dynamo-planner: debian-packages
	$(PYTHON) -m venv $(DYNAMO_PLANNER_VENV)
	$(DYNAMO_PLANNER_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(DYNAMO_PLANNER_VENV)/bin/python -m pip install --quiet -r servecert/adapters/dynamo/planner-requirements.txt
	$(DYNAMO_PLANNER_VENV)/bin/python -m pip install --quiet --no-deps 'ai-dynamo==1.6.1' 'ai-dynamo-runtime==1.6.1'
	PYTHONPATH=servecert/adapters/dynamo/planner_stand_in $(DYNAMO_PLANNER_VENV)/bin/python -c 'import dynamo.planner.__main__' && \
		echo "Dynamo's planner is installed in $(DYNAMO_PLANNER_VENV)"

clean:
	rm -rf $(VENV) .tox .mypy_cache .ruff_cache .pytest_cache
