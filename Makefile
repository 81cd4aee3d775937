# Two commands set everything up on a fresh machine:
#   make demo   creates .venv, installs Reverie, runs the main job on the embedded default
#   make test   creates or updates .venv, runs the whole test suite (slow tests included)
VENV   ?= .venv
PYTHON ?= python3
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.reverie-installed

export MUJOCO_GL ?= egl

.PHONY: venv demo test test-fast clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# torch is pinned in pyproject.toml (2.13.0, the CPU wheel); nothing here may pull another build.
	$(BIN)/python -m pip install --quiet -e ".[dev,minari,ray,optuna,slurm]"
	# MetaWorld 3.1.1 pins MuJoCo 3.3.0; Reverie pins 4.0.0 and patches the one difference it meets
	# (envs/manipulation.py), so MetaWorld goes in without its dependencies (all already installed).
	$(BIN)/python -m pip install --quiet --no-deps "metaworld==3.1.1"
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(BIN)/reverie demo

test: $(STAMP)
	$(BIN)/python -m pytest -q

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow"

clean:
	rm -rf $(VENV) runs .pytest_cache
