# `make demo` and `make test` each create .venv when missing, install with the pinned constraints, then run.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test test-slow bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)

$(STAMP): $(BIN)/python pyproject.toml constraints.txt
	$(BIN)/pip install -q -c constraints.txt torch==2.13.0
	$(BIN)/pip install -q -c constraints.txt -e ".[dev,export,plot]"
	touch $(STAMP)

install: $(STAMP)

# The main job: tokenizer, token store, ~10 min of MLM+SOP pretraining, then fine-tuning on the bundled sentiment task.
demo: $(STAMP)
	$(BIN)/python scripts/demo.py --out runs/demo
	$(BIN)/python scripts/demo_finetune.py --model runs/demo/pretrain/model --out runs/demo/finetune

test: $(STAMP)
	$(BIN)/python -m pytest -q

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow

bench: $(STAMP)
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info
