# The README's two commands: `make test` and `make certify`. Both work on a fresh machine:
# they create .venv, install what they need (Python packages; Debian's haproxy for the DGD's
# traffic proxy), and run through tox, which holds the environments.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml tox.ini | cksum | cut -d' ' -f1)

DEBIAN_PACKAGES := haproxy

.PHONY: test certify lint bench nightly clean debian-packages

$(STAMP): pyproject.toml tox.ini
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found; install Python >= 3.11"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet uv
	$(VENV)/bin/uv pip install --quiet --python $(VENV)/bin/python -e '.[dev]' 'tox>=4.14' 'tox-uv>=1.11'
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

test: $(STAMP) debian-packages
	$(VENV)/bin/tox run -e lint,py

certify: $(STAMP) debian-packages
	$(VENV)/bin/tox run -e certify

lint: $(STAMP)
	$(VENV)/bin/tox run -e lint

bench: $(STAMP)
	$(VENV)/bin/tox run -e bench

nightly: $(STAMP)
	$(VENV)/bin/tox run -e nightly

clean:
	rm -rf $(VENV) .tox .mypy_cache .ruff_cache .pytest_cache
