# The only entry point: `make lab` to study, `make test` to check everything.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# JupyterLab refuses to run as root unless told; the flag is only added when we are root.
ROOT_FLAG := $(shell [ "$$(id -u)" = 0 ] && echo --allow-root)
LAB_ARGS ?=
PYTEST_ARGS ?=

.PHONY: help setup lab test lock clean

help:
	@sed -n 's/^\([a-z-]*\):.*## \(.*\)/  make \1\t\2/p' $(MAKEFILE_LIST)

$(STAMP): requirements.txt requirements-lock.txt pyproject.toml
	@test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -r requirements.txt -c requirements-lock.txt -e .
	@touch $@

setup: $(STAMP) ## create .venv and install the pinned dependencies (skipped when up to date)

lab: $(STAMP) ## open the series in JupyterLab on 127.0.0.1 (the URL with its token is printed)
	$(BIN)/jupyter lab --ServerApp.ip=127.0.0.1 --ServerApp.root_dir=notebooks $(ROOT_FLAG) $(LAB_ARGS)

test: $(STAMP) ## run every check: package tests, notebooks (nbval, papermill), hygiene, browser
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lock: $(STAMP) ## rewrite requirements-lock.txt from what is installed in .venv
	$(BIN)/python -m pip freeze --exclude-editable | grep -v '^attention' | sed 's/+cpu$$//' > requirements-lock.txt

clean: ## remove build outputs (keeps .venv)
	rm -rf build
