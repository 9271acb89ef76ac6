# agentmaild — developer entry points. `make test` works on a fresh machine.
PY      ?= python3
VENV    ?= .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
PKG_STAMP := $(VENV)/.installed-pkg
DB      ?= $(CURDIR)/.agentmail/mail.db
PYTEST_ARGS ?=

.PHONY: test check bench mutate serve lint venv clean claude vendors screenshots docs reference

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test,dev,docs]'
	touch $(STAMP)

# The package alone (what `make serve` needs to run the daemon): no test or lint tools.
$(PKG_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e .
	touch $(PKG_STAMP)

venv: $(STAMP)

# The real Claude Code CLI (pinned) for the end-to-end tests; the script skips work when present.
claude:
	bash scripts/install-claude.sh >/dev/null

# The real Codex, Gemini CLI and OpenCode CLIs (pinned), same rule.
vendors:
	bash scripts/install-vendors.sh >/dev/null

test: $(STAMP) claude vendors
	$(BIN)/python -m pytest -q -n 2 $(PYTEST_ARGS)

# The inner loop's tier (target: under 2 minutes on 2 cores): lint, the layout's rules, the unit
# and contract suites. `make test` runs everything. worksteal: a worker left idle takes queued
# tests from the other, so the few long ones (the stateful store machines) do not end the run alone.
# Bytecode is cached here even where the environment turns it off (PYTHONDONTWRITEBYTECODE=1):
# without it each worker rewrites and compiles every test module again (4 s of CPU each) and every
# `python -m agentmaild` a test starts compiles the package's changed modules again.
check: export PYTHONDONTWRITEBYTECODE =
check: lint
	$(BIN)/python scripts/layout.py
	$(BIN)/python -m pytest -q -n 2 --dist worksteal tests/unit tests/contract $(PYTEST_ARGS)

# The docs site into site/ (mkdocs.yml); `make reference` rewrites its generated reference pages.
docs: $(STAMP)
	$(BIN)/mkdocs build --strict --site-dir site

reference: $(STAMP)
	$(BIN)/python scripts/gen_reference.py

bench: $(STAMP)
	$(BIN)/python bench/run.py

# The dashboard's screenshots in docs/screenshots/ (docs/guides/dashboard.md), taken by its browser tests.
screenshots: $(STAMP)
	SCREENSHOTS_DIR=$(CURDIR)/docs/screenshots $(BIN)/python -m pytest -q -n 0 tests/browser

# Mutation testing of the delivery core (bench/mutation.md; minutes, not part of `make test`).
MUTATE_STAMP := $(VENV)/.installed-mutate
$(MUTATE_STAMP): $(STAMP)
	$(BIN)/pip install -q -e '.[test,dev,docs,mutate]'
	touch $(MUTATE_STAMP)

mutate: $(MUTATE_STAMP)
	$(BIN)/python bench/mutation.py

serve: $(PKG_STAMP)
	@echo "agentmaild: serving $(DB); in another shell:"
	@echo "  $(BIN)/agentmaild --db $(DB) agents add demo --capability builder --channel spawn --command 'tee -a $(CURDIR)/demo-inbox.jsonl'"
	@echo "  $(BIN)/agentmaild --db $(DB) send --to demo --subject hello --body 'first delivery'"
	@echo "  cat $(CURDIR)/demo-inbox.jsonl; $(BIN)/agentmaild --db $(DB) status"
	$(BIN)/agentmaild serve --db $(DB)

lint: $(STAMP)
	$(BIN)/ruff check agentmaild tests bench
	$(BIN)/mypy

clean:
	rm -rf $(VENV) .pytest_cache mutants site
