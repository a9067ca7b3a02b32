# The README's two commands: `make test` and `make certify`. Both work on a fresh machine:
# they create .venv, install what they need (Python packages; Debian packages once a profile
# needs one), and run through tox, which holds the environments.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml tox.ini | cksum | cut -d' ' -f1)

.PHONY: test certify lint bench nightly clean

$(STAMP): pyproject.toml tox.ini
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found; install Python >= 3.11"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet uv
	$(VENV)/bin/uv pip install --quiet --python $(VENV)/bin/python -e '.[dev]' 'tox>=4.14' 'tox-uv>=1.11'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

test: $(STAMP)
	$(VENV)/bin/tox run -e lint,py

certify: $(STAMP)
	$(VENV)/bin/tox run -e certify

lint: $(STAMP)
	$(VENV)/bin/tox run -e lint

bench: $(STAMP)
	$(VENV)/bin/tox run -e bench

nightly: $(STAMP)
	$(VENV)/bin/tox run -e nightly

clean:
	rm -rf $(VENV) .tox .mypy_cache .ruff_cache .pytest_cache
