"""``litebert experiment``: the paper's controlled comparisons, one command each (docs/EXPERIMENTS.md).

Every arm of an experiment is pretrained with ``litebert pretrain`` on the same token store, seed, step count and
batch, from one base shape that only the arm's own setting (objective, sharing, E) changes; then it is scored on the
held-out store (`intrinsic.evaluate_pretraining`: MLM, SOP and NSP accuracy) and fine-tuned with ``litebert
finetune`` on the bundled sentiment and multiple-choice tasks with fixed small budgets. Everything lives under
``--out``:

    OUT/experiment.json          the settings (a re-run with other settings is refused)
    OUT/data/                    the corpus split by documents and its two token stores (unless --data is given)
    OUT/arms/NAME/pretrain/      the arm's pretraining run (resumed with --resume when unfinished)
    OUT/arms/NAME/sentiment/, mc/    its fine-tuned models
    OUT/arms/NAME/scores.json    its intrinsic and downstream scores (cached: a re-run reuses them)
    OUT/results.json, results.md, curves.png
"""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import lzma
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from litebert.errors import ConfigError, LitebertError
from litebert.files import atomic_write, check_output_folder, mark_output_folder, read_json, write_json

REPO = Path(__file__).resolve().parents[3]
BUNDLED_CORPUS = (REPO / "data" / "corpus" / "sotu.txt.xz", REPO / "data" / "corpus" / "moby_dick.txt.xz")
BUNDLED_TOKENIZER = REPO / "data" / "albert-30k"
FINETUNE_DATA = {"sentiment": REPO / "data" / "finetune" / "sentiment", "mc": REPO / "data" / "finetune" / "mc"}
KIND = "experiment"
EXPERIMENTS = ("sentence-objective", "sharing", "embedding-size", "speedup")
SHARING_NAMES = {"all": "all-shared", "attention": "shared-attention", "ffn": "shared-FFN", "none": "not-shared"}


class ExperimentError(LitebertError, RuntimeError):
    """A step of an experiment (a pretraining or fine-tuning command) failed."""


@dataclass(frozen=True)
class Settings:
    """What decides an experiment's results; stored in OUT/experiment.json and checked on a re-run."""
    experiment: str
    steps: int | None = None           # pretraining steps of every arm ...
    minutes: float | None = None       # ... or a per-arm budget turned into one step count
    seed: int = 12345
    device: str | None = None
    # base shape: ALBERT-base's rules (H/64 heads, 4H FFN, all-shared, E) at a size 2 CPU cores can train
    hidden_size: int = 256
    num_layers: int = 4
    embedding_size: int = 128
    embedding_sizes: tuple[int, ...] = ()   # default per experiment (see `arms`)
    seq_len: int = 128
    batch: int = 16
    lr: float = 0.005                  # the `demo` recipe's LAMB rate, measured on this corpus (train/config.py)
    eval_examples: int = 1000          # held-out examples per intrinsic score
    # downstream: fixed small budgets
    finetune_lr: float = 1e-4
    sentiment_steps: int = 300
    mc_steps: int = 200
    finetune_batch: int = 16
    max_train_examples: int | None = None
    max_eval_examples: int | None = None
    # data
    data: str | None = None
    eval_data: str | None = None
    corpus: tuple[str, ...] = ()
    tokenizer: str | None = None
    heldout_every: int = 20

    def to_json(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in dataclasses.asdict(self).items()}


@dataclass(frozen=True)
class Arm:
    name: str
    objective: str = "sop"
    sharing: str = "all"
    embedding_size: int = 128


def embedding_sizes(s: Settings) -> tuple[int, ...]:
    """sharing: E = H (no factorisation, as the paper's E = 768 at H = 768) and E = H/4 (the power of two nearest
    the paper's E = 128 = H/6). embedding-size: H/8, H/4, H/2, H (the paper's 64, 128, 256, 768 at H = 768 are
    H/12 .. H: the same span, the largest still E = H)."""
    if s.embedding_sizes:
        return s.embedding_sizes
    h = s.hidden_size
    sizes = (h, h // 4) if s.experiment == "sharing" else (h // 8, h // 4, h // 2, h)
    return tuple(max(1, e) for e in sizes)


def arms(s: Settings) -> list[Arm]:
    if s.experiment == "sentence-objective":  # the paper's Table 5: ALBERT-base (all-shared), E = 128
        return [Arm(o, objective=o, embedding_size=s.embedding_size) for o in ("none", "nsp", "sop")]
    if s.experiment == "sharing":  # Table 4
        return [Arm(f"E{e}-{SHARING_NAMES[sh]}", sharing=sh, embedding_size=e)
                for e in embedding_sizes(s) for sh in ("all", "attention", "ffn", "none")]
    if s.experiment == "embedding-size":  # Table 3
        return [Arm(f"{SHARING_NAMES[sh]}-E{e}", sharing=sh, embedding_size=e)
                for sh in ("none", "all") for e in embedding_sizes(s)]
    raise ConfigError(f"unknown experiment {s.experiment!r}; choose one of {', '.join(EXPERIMENTS)}")


def progress(message: str) -> None:
    print(f"[experiment {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def litebert(argv: list, what: str) -> None:
    """Run a litebert command in this process, as `litebert.cli.main` would, except that its error comes back as
    one error of ours naming the arm and stage (and its stdout goes to stderr, keeping ours for the summary)."""
    import importlib

    from litebert.cli import COMMANDS, Parser

    argv = [str(a) for a in argv]
    module = importlib.import_module(COMMANDS[argv[0]][0])
    parser = Parser(prog=f"litebert {argv[0]}")
    several = hasattr(module, "configure_command")
    module.configure_command(argv[0], parser) if several else module.configure(parser)
    args = parser.parse_args(argv[1:])
    try:
        with contextlib.redirect_stdout(sys.stderr):
            code = module.run_command(argv[0], args) if several else module.run(args)
    except LitebertError as e:
        raise ExperimentError(f"{what}: {e}") from None
    if code:
        raise ExperimentError(f"{what}: `litebert {argv[0]}` stopped (exit status {code}); run the same experiment "
                              f"command again to continue")


# ---------------------------------------------------------------------------------------------------- settings


def open_folder(out: Path, s: Settings) -> Settings:
    """Check ``out`` (new, empty, or this experiment's own folder with the same settings) and record the settings.
    A re-run given --minutes keeps the step count the first run chose."""
    begun = any((out / d).exists() for d in ("data", "timing", "arms"))  # work that the settings decided
    if check_output_folder(out, KIND) and (out / "experiment.json").is_file() and begun:
        saved = read_json(out / "experiment.json", ConfigError)
        old = dict(saved.get("settings", {}))
        new = s.to_json()
        if s.minutes is not None and old.get("minutes") == s.minutes:
            new["steps"] = old.get("steps")
        changed = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k) and k != "device")
        if changed:
            k = changed[0]
            raise ConfigError(f"--out {out} holds the {old.get('experiment')} experiment with other settings ({k}: "
                              f"{old.get(k)!r} there, {new.get(k)!r} now); run it with the same flags to continue "
                              f"it, or choose another --out")
        return dataclasses.replace(s, steps=new["steps"])
    mark_output_folder(out, KIND, experiment=s.experiment)
    save_settings(out, s)
    return s


def save_settings(out: Path, s: Settings, **extra) -> None:
    write_json(out / "experiment.json", {"settings": s.to_json(), **extra})


# ---------------------------------------------------------------------------------------------------- data


def split_corpus(files: list[Path], every: int) -> tuple[str, str]:
    """The documents of ``files`` (official format: a blank line between documents), in order; every ``every``-th
    one (the 20th, 40th, ...) goes to the held-out text, the rest to the training text."""
    train, held = [], []
    i = 0
    for path in files:
        raw = path.read_bytes()
        text = (lzma.decompress(raw) if path.suffix == ".xz" else gzip.decompress(raw) if path.suffix == ".gz"
                else raw).decode("utf-8")
        for doc in text.split("\n\n"):
            doc = doc.strip("\n")
            if not doc.strip():
                continue
            i += 1
            (held if i % every == 0 else train).append(doc)
    if not train or not held:
        raise ConfigError(f"--corpus: {i} document(s) give no {'training' if not train else 'held-out'} document "
                          f"with --heldout-every {every}; give more documents (a blank line between them) or a "
                          f"smaller --heldout-every")
    return "\n\n".join(train) + "\n", "\n\n".join(held) + "\n"


def check_sources(s: Settings) -> None:
    """The inputs exist: the stores given with --data/--eval-data open, or the corpus files and the tokenizer are
    there. Checked before anything is written, so a mistyped path leaves no folder behind to refuse the fixed run."""
    from litebert.data.store import TokenStore

    if s.data:
        for flag, path in (("--data", s.data), ("--eval-data", s.eval_data)):
            try:
                TokenStore(path, verify=False)
            except LitebertError as e:
                raise ConfigError(f"{flag}: {e}") from None
        return
    for f in [Path(p) for p in (s.corpus or BUNDLED_CORPUS)]:
        if not f.is_file():
            hint = ("the bundled corpus ships with the repository (data/corpus/), not with an installed package: run "
                    "from a clone, or give --corpus FILES (or --data/--eval-data stores)" if not s.corpus else
                    "give existing corpus files")
            raise ConfigError(f"--corpus {f}: no such file; {hint}")
    tokenizer = Path(s.tokenizer or BUNDLED_TOKENIZER)
    if not tokenizer.exists():
        raise ConfigError(f"--tokenizer {tokenizer}: no such file or folder; give a tokenizer folder or .model file")


def prepare_data(out: Path, s: Settings) -> tuple[Path, Path]:
    """The training and held-out stores: the user's (--data/--eval-data), or the corpus split by documents and
    prepared once under OUT/data (reused when both stores open)."""
    from litebert.data.store import TokenStore, prepare_store
    from litebert.tokenizer import AlbertTokenizer

    if s.data:
        return Path(s.data), Path(s.eval_data)
    folder = out / "data"
    train, held = folder / "train", folder / "heldout"
    try:
        TokenStore(train, verify=False), TokenStore(held, verify=False)
        return train, held
    except LitebertError:
        pass
    files = [Path(p) for p in (s.corpus or BUNDLED_CORPUS)]
    progress(f"data: splitting {len(files)} corpus file(s) by documents (1 in {s.heldout_every} held out)")
    train_text, held_text = split_corpus(files, s.heldout_every)
    atomic_write(folder / "text" / "train.txt", train_text)
    atomic_write(folder / "text" / "heldout.txt", held_text)
    tok = AlbertTokenizer.from_pretrained(s.tokenizer or BUNDLED_TOKENIZER)
    for name, store in (("train", train), ("heldout", held)):
        progress(f"data: preparing the {name} store {store}")
        prepare_store([folder / "text" / f"{name}.txt"], tok, store, overwrite=True, progress=False)
    return train, held


# ---------------------------------------------------------------------------------------------------- one arm


def pretrain_argv(arm: Arm, s: Settings, train: Path, held: Path, run: Path, steps: int) -> list:
    argv = ["pretrain", "--preset", "albert-base-v2", "--hidden-size", s.hidden_size, "--num-layers", s.num_layers,
            "--embedding-size", arm.embedding_size, "--sharing", arm.sharing, "--objective", arm.objective,
            "--data", train, "--eval-data", held, "--out", run, "--max-steps", steps, "--global-batch", s.batch,
            "--micro-batch", s.batch, "--seq-len", s.seq_len, "--lr", s.lr, "--warmup-steps", steps // 10,
            "--seed", s.seed, "--eval-every", 0, "--eval-examples", min(256, s.eval_examples),
            "--save-every", max(1, min(200, steps)), "--keep-last", 1, "--no-progress", "--resume"]
    return argv + (["--device", s.device] if s.device else [])


def pretrain(arm: Arm, s: Settings, train: Path, held: Path, run: Path, steps: int) -> None:
    from litebert.files import read_marker

    if run.is_dir() and read_marker(run).get("complete") and read_marker(run).get("step") == steps:
        progress(f"{arm.name}: pretraining finished earlier (step {steps}), reused")
        return
    progress(f"{arm.name}: pretraining {steps} steps ({'resuming' if run.exists() else 'new'}) in {run}")
    litebert(pretrain_argv(arm, s, train, held, run, steps), f"{arm.name}: pretraining")


def intrinsic_scores(run: Path, s: Settings, held: Path) -> dict:
    import torch

    from litebert.data.store import TokenStore
    from litebert.experiments import intrinsic
    from litebert.train.device import resolve_device

    store = TokenStore(held, verify=False)
    objectives = intrinsic.OBJECTIVES if intrinsic.has_sentence_head(run / "model") else ("mlm",)
    model = intrinsic.load_for_evaluation(run / "model", objectives, store.facts.vocab_size)
    model.to(resolve_device(s.device))
    scores = intrinsic.evaluate_pretraining(model, store, objectives, examples=s.eval_examples, seq_len=s.seq_len,
                                            seed=s.seed)
    del model
    torch.cuda.empty_cache() if torch.cuda.is_available() else None
    return {o: scores[o].to_json() if o in scores else None for o in intrinsic.OBJECTIVES}


def dev_size(task: str) -> int:
    """Examples in the bundled task's dev file (sentiment: a TSV with a header; mc: JSONL)."""
    folder = FINETUNE_DATA[task]
    name = "dev.tsv.gz" if task == "sentiment" else "social_iqa_dev.jsonl.gz"
    lines = [ln for ln in gzip.decompress((folder / name).read_bytes()).decode("utf-8").splitlines() if ln.strip()]
    return len(lines) - (1 if task == "sentiment" else 0)


def finetune(arm: Arm, task: str, s: Settings, run: Path, out: Path) -> dict:
    """Fine-tune the arm's model on a bundled task (reusing a finished folder); dev accuracy with its count and
    95% Wilson interval (the count is the dev examples evaluated; correct = accuracy x count, exact)."""
    from litebert.experiments.intrinsic import accuracy
    from litebert.files import read_marker

    steps = s.sentiment_steps if task == "sentiment" else s.mc_steps
    if not FINETUNE_DATA[task].is_dir():
        raise ConfigError(f"{FINETUNE_DATA[task]}: the bundled {task} task is missing; it ships with the repository "
                          f"(data/finetune/), not with an installed package: run from a clone")
    meta_path = out / "finetune.json"
    if not (meta_path.is_file() and read_json(meta_path, ConfigError).get("complete")):
        progress(f"{arm.name}: fine-tuning on {task} ({steps} steps) in {out}")
        argv = ["finetune", task, "--model", run / "model", "--data", FINETUNE_DATA[task], "--out", out,
                "--seed", s.seed, "--max-steps", steps, "--eval-every", steps, "--batch-size", s.finetune_batch,
                "--lr", s.finetune_lr, "--seq-len", s.seq_len, "--warmup-proportion", 0.1, "--no-progress"]
        argv += ["--resume"] if out.exists() and read_marker(out) else []
        argv += ["--max-train-examples", s.max_train_examples] if s.max_train_examples else []
        argv += ["--max-eval-examples", s.max_eval_examples] if s.max_eval_examples else []
        argv += ["--device", s.device] if s.device else []
        litebert(argv, f"{arm.name}: fine-tuning on {task}")
    else:
        progress(f"{arm.name}: fine-tuning on {task} finished earlier, reused")
    acc = float(read_json(meta_path, ConfigError)["dev_metrics"]["accuracy"])
    n = dev_size(task) if s.max_eval_examples is None else min(s.max_eval_examples, dev_size(task))
    return {**accuracy(round(acc * n), n).to_json(), "steps": steps}


def run_arm(arm: Arm, s: Settings, train: Path, held: Path, folder: Path, steps: int) -> dict:
    """Pretrain, score and fine-tune one arm; its results are cached in ``folder/scores.json``."""
    from litebert.io.checkpoint import load_config
    from litebert.params import count_parameters
    from litebert.train.metrics import read_metrics

    run = folder / "pretrain"
    pretrain(arm, s, train, held, run, steps)
    cache = folder / "scores.json"
    scores = read_json(cache, ConfigError) if cache.is_file() else {}
    if scores.get("steps") != steps:
        scores = {"steps": steps}
    if "intrinsic" not in scores:
        progress(f"{arm.name}: held-out MLM/SOP/NSP accuracy on {s.eval_examples} examples")
        scores["intrinsic"] = intrinsic_scores(run, s, held)
        write_json(cache, scores)
    else:
        progress(f"{arm.name}: held-out scores computed earlier, reused")
    for task in ("sentiment", "mc"):
        if task not in scores.get("downstream", {}):
            scores.setdefault("downstream", {})[task] = finetune(arm, task, s, run, folder / task)
            write_json(cache, scores)
        else:
            progress(f"{arm.name}: {task} score computed earlier, reused")
    config = load_config(run / "model")
    records = read_metrics(run)
    last = records[-1] if records else {}
    down = [scores["downstream"][t]["accuracy"] for t in ("sentiment", "mc")]
    return {"name": arm.name, "objective": arm.objective, "sharing": arm.sharing,
            "shape": {"embedding_size": config.embedding_size, "hidden_size": config.hidden_size,
                      "num_layers": config.num_hidden_layers, "num_heads": config.num_attention_heads,
                      "intermediate_size": config.intermediate_size, "sharing": config.sharing,
                      "vocab_size": config.vocab_size},
            "parameters": count_parameters(config), "parameters_with_heads": count_parameters(config, heads=True),
            "steps": last.get("step"), "train_seconds": last.get("elapsed_s"),
            "final_train_loss": last.get("loss"), "final_mlm_loss": last.get("mlm_loss"),
            "run": str(run), "intrinsic": scores["intrinsic"], "downstream": scores["downstream"],
            "downstream_average": sum(down) / len(down)}


# ---------------------------------------------------------------------------------------------------- the whole


def steps_from_minutes(out: Path, s: Settings, train: Path, held: Path, arm_list: list[Arm]) -> dict:
    """One step count for every arm from a per-arm budget: time a few steps of the slowest arm (most training
    FLOPs per sequence) and fit the budget's pretraining into it."""
    from litebert.config import AlbertConfig
    from litebert.train.metrics import flops_per_sequence, read_metrics

    def flops(arm):
        cfg = dataclasses.replace(AlbertConfig.from_preset("albert-base-v2"), hidden_size=s.hidden_size,
                                  num_hidden_layers=s.num_layers, num_attention_heads=max(1, s.hidden_size // 64),
                                  intermediate_size=4 * s.hidden_size, embedding_size=arm.embedding_size,
                                  sharing=arm.sharing)
        return flops_per_sequence(cfg, s.seq_len, 20)

    slowest = max(arm_list, key=flops)
    timed = 6
    run = out / "timing" / slowest.name
    progress(f"--minutes {s.minutes:g}: timing {timed} steps of the slowest arm ({slowest.name}) in {run}")
    litebert(pretrain_argv(slowest, s, train, held, run, timed), "timing")
    rec = read_metrics(run)
    later = [b["elapsed_s"] - a["elapsed_s"] for a, b in zip(rec[1:], rec[2:])]  # the first steps warm up
    per_step = sum(later) / len(later) if later else rec[-1]["elapsed_s"] / max(1, rec[-1]["step"])
    steps = max(1, int(s.minutes * 60 / per_step))
    progress(f"--minutes {s.minutes:g}: {per_step:.3f} s/step for {slowest.name}: every arm trains {steps} steps")
    return {"timed_arm": slowest.name, "seconds_per_step": per_step, "steps": steps}


def run_experiment(out: Path, s: Settings) -> dict:
    if (s.steps is None) == (s.minutes is None):
        raise ConfigError("give one of --steps N (pretraining steps of every arm) or --minutes M (a per-arm budget)")
    if bool(s.data) != bool(s.eval_data):
        raise ConfigError("--data and --eval-data go together: a training store and a held-out store")
    arm_list = arms(s)
    check_sources(s)
    s = open_folder(out, s)
    started = time.perf_counter()
    train, held = prepare_data(out, s)
    saved = read_json(out / "experiment.json", ConfigError) if (out / "experiment.json").is_file() else {}
    timing = saved.get("timing")
    if s.steps is None:
        timing = steps_from_minutes(out, s, train, held, arm_list)
        s = dataclasses.replace(s, steps=timing["steps"])
    save_settings(out, s, **({"timing": timing} if timing else {}))
    results = []
    for arm in arm_list:
        results.append(run_arm(arm, s, train, held, out / "arms" / arm.name, s.steps))
    from litebert.experiments import report

    summary = {"experiment": s.experiment, "settings": s.to_json(), "data": str(train), "eval_data": str(held),
               "interval": "95% Wilson (counts: MLM masked tokens, SOP/NSP held-out sequences, dev examples)",
               **({"steps_from_minutes": timing} if timing else {}), "arms": results}
    write_json(out / "results.json", summary)
    atomic_write(out / "results.md", report.markdown(summary))
    report.plot_curves(out / "curves.png", {a["name"]: Path(a["run"]) for a in results})
    progress(f"done in {time.perf_counter() - started:.0f} s: {out / 'results.md'}, {out / 'results.json'}, "
             f"{out / 'curves.png'}")
    return summary
