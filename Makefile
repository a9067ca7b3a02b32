# The README's two commands: `make test` and `make certify`. Both work on a fresh machine:
# they create .venv, install what they need (Python packages; Debian's haproxy for the DGD's
# traffic proxy; Debian's prometheus binary, which seed 003's planners read traffic from, into the
# cache), build the embedded cluster's binaries from Go modules (`servecert setup`, with progress,
# before any test starts), and run through tox, which holds the environments.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml tox.ini | cksum | cut -d' ' -f1)

DEBIAN_PACKAGES := haproxy
CACHE := $(or $(SERVECERT_CACHE),$(HOME)/.cache/servecert)
PROMETHEUS := $(CACHE)/tools/prometheus

.PHONY: test certify lint bench nightly clean debian-packages prometheus setup dynamo-planner

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

# Debian's prometheus binary alone, unpacked from its package into the cache: installing the package
# would also install (and on a systemd host start) a service listening on every interface.
prometheus:
	@if command -v prometheus >/dev/null || [ -x "$(PROMETHEUS)" ]; then exit 0; fi; \
	echo "fetching Debian's prometheus (its binary only, into $(PROMETHEUS))"; \
	tmp=$$(mktemp -d) && cd $$tmp && \
	{ apt-get download prometheus >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && apt-get update -qq && apt-get download prometheus; }; } && \
	dpkg-deb -x prometheus_*.deb unpacked && mkdir -p "$(dir $(PROMETHEUS))" && cp unpacked/usr/bin/prometheus "$(PROMETHEUS)"; \
	status=$$?; cd / && rm -rf $$tmp; \
	[ $$status = 0 ] || { echo "error: could not fetch Debian's prometheus: run 'sudo apt-get install prometheus', or set SERVECERT_PROMETHEUS to a prometheus binary"; exit 1; }

# The cluster binaries (a cold build: about 6 min on 2 cores), outside every test's timeout.
setup: $(STAMP) debian-packages prometheus
	$(VENV)/bin/servecert setup --env cluster

test: setup
	$(VENV)/bin/tox run -e lint,py

# A cold cache builds the cluster binaries in the background at idle CPU priority while the
# process profiles are certified; the cluster certify's own setup step waits for that build.
# NB: started here, not in tox: tox reads a command's output through a pipe it stops reading
# once the command exits, so a build started there would lose its progress lines.
certify: $(STAMP) debian-packages prometheus
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
DYNAMO_PLANNER_VENV ?= $(CACHE)/dynamo-planner
dynamo-planner: debian-packages prometheus
	$(PYTHON) -m venv $(DYNAMO_PLANNER_VENV)
	$(DYNAMO_PLANNER_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(DYNAMO_PLANNER_VENV)/bin/python -m pip install --quiet -r servecert/adapters/dynamo/planner-requirements.txt
	$(DYNAMO_PLANNER_VENV)/bin/python -m pip install --quiet --no-deps 'ai-dynamo==1.6.1' 'ai-dynamo-runtime==1.6.1'
	PYTHONPATH=servecert/adapters/dynamo/planner_stand_in $(DYNAMO_PLANNER_VENV)/bin/python -c 'import dynamo.planner.__main__' && \
		echo "Dynamo's planner is installed in $(DYNAMO_PLANNER_VENV)"

clean:
	rm -rf $(VENV) .tox .mypy_cache .ruff_cache .pytest_cache
