"""`run_experiment`: the paper's controlled comparisons, one call each (docs/EXPERIMENTS.md); ``litebert experiment``
maps its flags onto `Settings`.

Every arm of an experiment is pretrained (`litebert.pretrain`) on the same token store, seed, step count and batch,
from one base shape that only the arm's own setting (objective, sharing, E) changes; then it is scored on the
held-out store (`intrinsic.intrinsic_accuracy`: MLM, SOP and NSP accuracy) and fine-tuned (`litebert.finetune`) on a
sentiment and a multiple-choice task with fixed small budgets. The data are arguments: a corpus and a tokenizer (or
prepared stores), and the two tasks' data folders (the repository's bundled ones are what ``litebert experiment``
passes when it runs from a clone). Everything lives under the output folder:

    OUT/experiment.json          the settings (a re-run with other settings is refused)
    OUT/data/                    the corpus split by documents and its two token stores (unless --data is given)
    OUT/arms/NAME/pretrain/      the arm's pretraining run (resumed with --resume when unfinished)
    OUT/arms/NAME/sentiment/, mc/    its fine-tuned models
    OUT/arms/NAME/scores.json    its intrinsic and downstream scores (cached: a re-run reuses them)
    OUT/baselines/               the downstream control rows: the first arm's shape from random weights, fine-tuned
                                 as the arms (from-scratch/), and baselines.json (with the majority class and the
                                 bag of words)
    OUT/results.json, results.md, curves.png
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional, Sequence

from litebert import folders
from litebert.arguments import checked
from litebert.config import SHARING
from litebert.errors import ConfigError, LitebertError, literal
from litebert.extras import install_hint
from litebert.files import atomic_write, read_json, write_json

EXPERIMENTS = ("sentence-objective", "sharing", "embedding-size", "speedup")
SHARING_NAMES = {"all": "all-shared", "attention": "shared-attention", "ffn": "shared-FFN", "none": "not-shared"}


class ExperimentError(LitebertError, RuntimeError):
    """A step of an experiment (an arm's pretraining or fine-tuning) failed."""


@dataclass(frozen=True)
class Settings:
    """What decides an experiment's results; stored in OUT/experiment.json and checked on a re-run."""
    experiment: str
    steps: int | None = None           # pretraining steps of every arm ...
    minutes: float | None = None       # ... or a per-arm budget turned into one step count
    seed: int = 12345
    device: str | None = None
    data_workers: int = 0              # processes that build pretraining batches ahead (the same batches)
    # base shape: ALBERT-base's rules (H/64 heads, 4H FFN, all-shared, E) at a size 2 CPU cores can train
    hidden_size: int = 256
    num_layers: int = 4
    embedding_size: int = 128
    embedding_sizes: tuple[int, ...] = ()   # default per experiment (see `arms`)
    seq_len: int = 128
    batch: int = 16
    lr: float = 0.005                  # the `demo` recipe's LAMB rate, measured on this corpus (pretraining/config.py)
    eval_examples: int = 1000          # held-out examples per intrinsic score
    # downstream: fixed small budgets
    finetune_lr: float = 1e-4
    control_lrs: tuple[float, ...] = (1e-4, 3e-4)  # the from-scratch control's rates, the best on dev kept
    sentiment_steps: int = 300
    mc_steps: int = 200
    finetune_batch: int = 16
    max_train_examples: int | None = None
    max_eval_examples: int | None = None
    # data: a corpus and its tokenizer, or prepared stores; and the downstream tasks' data folders
    data: str | None = None
    eval_data: str | None = None
    corpus: tuple[str, ...] = ()
    tokenizer: str | None = None
    heldout_every: int = 20
    encoding_errors: str = "strict"    # invalid UTF-8 in the corpus: stop (strict) or read U+FFFD (replace)
    sentiment_data: str | None = None
    mc_data: str | None = None

    def __post_init__(self) -> None:
        from litebert.checks import AT_LEAST_0, AT_LEAST_1, POSITIVE, check_fields
        from litebert.inputs.text import ENCODING_ERRORS

        check_fields(self, {**{k: AT_LEAST_1 for k in ("steps", "hidden_size", "num_layers", "embedding_size",
                                                       "seq_len", "batch", "eval_examples", "sentiment_steps",
                                                       "mc_steps", "finetune_batch", "max_train_examples",
                                                       "max_eval_examples", "heldout_every")},
                            "minutes": POSITIVE, "lr": POSITIVE, "finetune_lr": POSITIVE, "seed": AT_LEAST_0,
                            "data_workers": AT_LEAST_0},
                     {"experiment": EXPERIMENTS, "encoding_errors": ENCODING_ERRORS})
        if not self.control_lrs or any(not (isinstance(x, (int, float)) and 0 < x < 1) for x in self.control_lrs):
            raise ConfigError("{control_lrs}: expected one or more learning rates in (0, 1)",
                              control_lrs=",".join(map(str, self.control_lrs)))
        if any(e < 1 for e in self.embedding_sizes):
            raise ConfigError("{embedding_sizes}: expected integers >= 1",
                              embedding_sizes=",".join(map(str, self.embedding_sizes)))

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
                for e in embedding_sizes(s) for sh in SHARING]
    if s.experiment == "embedding-size":  # Table 3
        return [Arm(f"{SHARING_NAMES[sh]}-E{e}", sharing=sh, embedding_size=e)
                for sh in ("none", "all") for e in embedding_sizes(s)]
    raise ConfigError(f"unknown experiment {s.experiment!r}; choose one of {', '.join(EXPERIMENTS)}")


def progress(message: str) -> None:
    print(f"[experiment {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------------- settings


def open_folder(out: Path, s: Settings) -> tuple[Settings, folders.FolderPlan, dict]:
    """Plan ``out`` (new, empty, or this experiment's own folder: re-running continues it) and check a folder's
    recorded settings are these (a re-run given --minutes keeps the step count the first run chose). Returns the
    settings, the plan and what experiment.json recorded ({} for a new folder). Writes nothing."""
    plan = folders.plan(out, folders.EXPERIMENT, resume=True)
    saved = _saved(out) if plan.action != "new" else {}
    begun = any((out / d).exists() for d in ("data", "timing", "arms"))  # work that the settings decided
    if not saved or not begun:
        return s, plan, saved
    old = {**_DEFAULTS, **saved["settings"]}  # a setting added since the folder was written has its default there
    new = s.to_json()
    if s.minutes is not None and old.get("minutes") == s.minutes:
        new["steps"] = old.get("steps")
    changed = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k) and k not in ("device", "data_workers"))
    if changed:
        k = changed[0]
        raise ConfigError("{out} holds the " + f"{old.get('experiment')} experiment with other settings ({k}: "
                          f"{literal(repr(old.get(k)))} there, {literal(repr(new.get(k)))} now); run it with the same "
                          "settings to continue it, or choose another folder", out=out)
    return dataclasses.replace(s, steps=new["steps"]), plan, saved


def _saved(out: Path) -> dict:
    """What an experiment folder's experiment.json records ({} without one), checked: its settings an object."""
    if not (out / "experiment.json").is_file():
        return {}
    saved = read_json(out / "experiment.json", ConfigError)
    if not isinstance(saved.get("settings"), dict) or not isinstance(saved.get("timing") or {}, dict):
        raise ConfigError(f"{literal(out / 'experiment.json')}: 'settings' (or 'timing') is not a JSON object: the "
                          "folder's record is damaged; restore the file, or run the experiment in another folder")
    return saved


_DEFAULTS = {f.name: (list(f.default) if isinstance(f.default, tuple) else f.default)
             for f in dataclasses.fields(Settings) if f.default is not dataclasses.MISSING}


def save_settings(out: Path, s: Settings, **extra) -> None:
    write_json(out / "experiment.json", {"settings": s.to_json(), **extra})


# ---------------------------------------------------------------------------------------------------- data


def _corpus_lines(files: list[Path], encoding_errors: str) -> Iterator[str | None]:
    """The corpus's lines (official format: its sentences; JSON lines: each document's paragraphs), ``None`` after
    each document. A line at a time, so memory does not grow with a document's size either."""
    from litebert.data.documents import read_documents
    from litebert.inputs.text import is_records, iter_lines

    for path in files:
        if is_records(path):  # JSON lines or a table
            for doc in read_documents(path, "jsonl", encoding_errors):
                yield from doc.parts
                yield None
            continue
        in_document = False
        for _, _, line in iter_lines(path, encoding_errors):
            if line.strip():
                in_document = True
                yield line.strip()
            elif in_document:
                in_document = False
                yield None
        if in_document:
            yield None


def check_corpus(files: list[Path], every: int, encoding_errors: str = "strict") -> int:
    """Read the corpus through once (streaming) and return its number of documents: a file that does not decode, or
    too few documents to hold out every ``every``-th and train on the rest, is refused here, before anything is
    written."""
    total = sum(1 for line in _corpus_lines(files, encoding_errors) if line is None)
    if total < every or total == every == 1:
        raise ConfigError("{corpus:flag}: " + f"{total} document(s) give no "
                          f"{'held-out' if total < every else 'training'} "
                          "document with {heldout_every}; give more documents (a blank line between them) or a "
                          "smaller {heldout_every:flag}", corpus=" ".join(map(str, files)), heldout_every=every)
    return total


def split_corpus(files: list[Path], every: int, train: Path, held: Path, encoding_errors: str = "strict") -> None:
    """Write the documents of ``files`` (official format: a blank line between documents; JSON lines: a document a
    line), in order, to the training text ``train``, every ``every``-th one (the 20th, 40th, ...) to the held-out
    text ``held`` instead. Streams (a pass to check, one per output): memory does not grow with the corpus."""
    check_corpus(files, every, encoding_errors)

    def write(keep_held: bool):
        def fill(tmp: Path) -> None:
            with open(tmp, "w", encoding="utf-8") as f:
                doc, written, first_line = 1, False, True  # the document read; this output has one; its 1st line
                for line in _corpus_lines(files, encoding_errors):
                    if line is None:
                        doc, first_line = doc + 1, True
                        continue
                    if (doc % every == 0) == keep_held:
                        f.write(("\n" if first_line and written else "") + line + "\n")
                        written = True
                    first_line = False
        return fill

    atomic_write(train, write(False))
    atomic_write(held, write(True))


def check_sources(s: Settings) -> None:
    """The inputs exist: the stores given with --data/--eval-data open, or the corpus files and the tokenizer are
    there; and the tasks' data folders. Checked before anything is written."""
    from litebert.data.store import TokenStore
    from litebert.inputs.text import expand_inputs

    if bool(s.data) != bool(s.eval_data):
        raise ConfigError("{data:flag} and {eval_data:flag} go together: a training store and a held-out store",
                          data=s.data, eval_data=s.eval_data)
    if s.data:
        if s.corpus or s.tokenizer:
            raise ConfigError("{data:flag}/{eval_data:flag} are prepared stores: {corpus:flag} and {tokenizer:flag} "
                              "do not apply", data=None, eval_data=None, corpus=None, tokenizer=None)
        for name in ("data", "eval_data"):
            try:
                TokenStore(getattr(s, name), verify=False)
            except LitebertError as e:
                raise ConfigError("{" + name + ":flag}: " + str(e).replace("{", "{{").replace("}", "}}"),
                                  **{name: getattr(s, name)}) from None
    else:
        if not s.corpus or not s.tokenizer:
            raise ConfigError("give the corpus and its tokenizer ({corpus:flag} FILES {tokenizer:flag} DIR), or "
                              "prepared stores ({data:flag} and {eval_data:flag})", corpus=None, tokenizer=None,
                              data=None, eval_data=None)
        if not Path(s.tokenizer).exists():
            raise ConfigError("{tokenizer}: no such file or folder; give a tokenizer folder or .model file",
                              tokenizer=s.tokenizer)
        from litebert.tokenizer import load_tokenizer

        load_tokenizer(s.tokenizer)  # a damaged tokenizer is named now, not after the split
        check_corpus(expand_inputs(list(s.corpus)), s.heldout_every, s.encoding_errors)
    if s.device is not None:
        from litebert.engine.device import resolve_device

        resolve_device(s.device)  # a device this machine lacks is refused before anything is written
    for task in ("sentiment", "mc"):
        folder = getattr(s, f"{task}_data")
        if folder is None or not Path(folder).is_dir():
            raise ConfigError("{" + task + "_data}: the " + task + " task's data folder is needed for the downstream "
                              "scores (the repository's is data/finetune/" + task + ")", **{f"{task}_data": folder})


def prepare_data(out: Path, s: Settings) -> tuple[Path, Path]:
    """The training and held-out stores: the user's (--data/--eval-data), or the corpus split by documents and
    prepared once under OUT/data (reused when both stores open)."""
    from litebert.data.store import TokenStore, prepare_store
    from litebert.tokenizer import load_tokenizer

    if s.data:
        return Path(s.data), Path(s.eval_data)
    folder = out / "data"
    train, held = folder / "train", folder / "heldout"
    try:
        TokenStore(train, verify=False), TokenStore(held, verify=False)
        return train, held
    except LitebertError:
        pass
    from litebert.inputs.text import expand_inputs

    files = expand_inputs(list(s.corpus))
    progress(f"data: splitting {len(files)} corpus file(s) by documents (1 in {s.heldout_every} held out)")
    split_corpus(files, s.heldout_every, folder / "text" / "train.txt", folder / "text" / "heldout.txt",
                 s.encoding_errors)
    tok = load_tokenizer(s.tokenizer)
    for name, store in (("train", train), ("heldout", held)):
        progress(f"data: preparing the {name} store {store}")
        prepare_store([folder / "text" / f"{name}.txt"], tok, store, overwrite=True, progress=False)
    return train, held


# ---------------------------------------------------------------------------------------------------- one arm


def arm_model(arm: Arm, s: Settings):
    """The arm's shape: ALBERT-base's rules (H/64 heads, 4H FFN) at the experiment's size, with the arm's E and
    sharing."""
    from litebert.config import AlbertConfig

    return AlbertConfig.from_preset("albert-base-v2").with_shape(
        hidden_size=s.hidden_size, num_hidden_layers=s.num_layers, embedding_size=arm.embedding_size,
        sharing=arm.sharing)


def arm_training(arm: Arm, s: Settings, steps: int):
    """The arm's pretraining settings: the experiment's batch, length, rate and seed; warmup a tenth of the run."""
    from litebert.pretraining.config import TrainConfig

    return TrainConfig(max_steps=steps, batch_size=s.batch, micro_batch=s.batch, seq_len=s.seq_len, lr=s.lr,
                       warmup_steps=steps // 10, seed=s.seed, objective=arm.objective, eval_every=0,
                       eval_examples=min(256, s.eval_examples), save_every=max(1, min(200, steps)), keep_last=1,
                       data_workers=s.data_workers)


def pretrain(arm: Arm, s: Settings, train: Path, held: Path, run: Path, steps: int) -> None:
    """Pretrain the arm into ``run`` (continuing an unfinished run; a finished one is reused)."""
    from litebert.pretraining.run import pretrain as pretrain_run

    marker = folders.read_marker(run)
    if marker.get("complete") and marker.get("step") == steps:
        progress(f"{arm.name}: pretraining finished earlier (step {steps}), reused")
        return
    progress(f"{arm.name}: pretraining {steps} steps ({'resuming' if run.exists() else 'new'}) in {run}")
    with _stage(f"{arm.name}: pretraining"):
        result = pretrain_run(train, run, model=arm_model(arm, s), train=arm_training(arm, s, steps),
                              eval_data=held, resume=True, device=s.device, progress=False)
    if result.interrupted:
        raise ExperimentError(f"{arm.name}: pretraining stopped at step {result.step} (signal {result.signal}); run "
                              f"the same experiment again to continue")


@contextlib.contextmanager
def _stage(what: str):
    """A stage's output goes to stderr (stdout is the summary's); its errors name the arm and stage, and keep
    naming as arguments only the experiment's own settings (an arm's ``seq_len`` is the experiment's)."""
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    except LitebertError as e:
        own = {f.name for f in dataclasses.fields(Settings)} - {"data", "eval_data", "steps"}
        named = {k: v for k, v in e.named.items() if k in own}
        template = e.render_except(named) if e.named else str(e).replace("{", "{{").replace("}", "}}")
        raise ExperimentError(what.replace("{", "{{").replace("}", "}}") + ": " + template, **named) from None


def intrinsic_scores(run: Path, s: Settings, held: Path) -> dict:
    import torch

    from litebert.data.store import TokenStore
    from litebert.engine.runtime import Runtime
    from litebert.experiments import intrinsic

    store = TokenStore(held, verify=False)
    objectives = intrinsic.OBJECTIVES if intrinsic.has_sentence_head(run / "model") else ("mlm",)
    model = intrinsic.load_for_evaluation(run / "model", objectives, store.facts.vocab_size)
    runtime = Runtime.for_inference(model.config, s.device, "fp32", "sdpa")  # every arm scored alike, in fp32
    runtime.place(model)
    scores = intrinsic.intrinsic_accuracy(model, store, objectives, examples=s.eval_examples, seq_len=s.seq_len,
                                          seed=s.seed, runtime=runtime)
    del model
    torch.cuda.empty_cache() if torch.cuda.is_available() else None
    return {o: scores[o].to_json() if o in scores else None for o in intrinsic.OBJECTIVES}


def _examples(task: str, s: Settings, split: str) -> list:
    """The task's examples of ``split`` that fine-tuning used: the first max_train_examples / max_eval_examples."""
    from litebert.tasks.presets import get_preset
    from litebert.tasks.sources import find_split

    folder = Path(getattr(s, f"{task}_data"))
    examples = get_preset(task).kind.read(find_split(folder, split))
    return examples[:s.max_train_examples if split == "train" else s.max_eval_examples]


def _dev_accuracy(score: float, n: int) -> dict:
    """A dev accuracy over ``n`` examples with its count and 95% Wilson interval (correct = score x n, exact)."""
    from litebert.experiments.intrinsic import accuracy

    return accuracy(round(score * n), n).to_json()


def finetune(arm: Arm, task: str, s: Settings, run: Path, out: Path, lrs: Optional[Sequence[float]] = None) -> dict:
    """Fine-tune the arm's model on a task at the settings' ``finetune_lr``, or with ``lrs`` at each of those rates
    (a learning-rate grid, `litebert.finetuning.grid`: a run per rate in out/lr-RATE/, the best on dev in ``out``),
    reusing a finished folder; dev accuracy with its count and 95% Wilson interval (the count is the dev examples
    evaluated; correct = accuracy x count, exact), and the rate."""
    from litebert.finetuning.run import FinetuneConfig
    from litebert.finetuning.run import finetune as finetune_run

    steps = s.sentiment_steps if task == "sentiment" else s.mc_steps
    data = Path(getattr(s, f"{task}_data"))
    meta_path = out / folders.FINETUNE_META
    if not folders.read_marker(out).get("complete"):
        rates = ", ".join(f"{x:g}" for x in lrs) if lrs else f"{s.finetune_lr:g}"
        progress(f"{arm.name}: fine-tuning on {task} ({steps} steps, lr {rates}) in {out}")
        config = FinetuneConfig(seed=s.seed, max_steps=steps, eval_every=steps, batch_size=s.finetune_batch,
                                lr=None if lrs else s.finetune_lr, seq_len=s.seq_len, warmup_proportion=0.1,
                                max_train_examples=s.max_train_examples, max_eval_examples=s.max_eval_examples)
        with _stage(f"{arm.name}: fine-tuning on {task}"):
            result = finetune_run(task, run / "model", data, out, config=config,
                                  resume=bool(folders.read_marker(out)), device=s.device, progress=False,
                                  lr_grid=list(lrs) if lrs else None)
        if result.interrupted:
            raise ExperimentError(f"{arm.name}: fine-tuning on {task} stopped at step {result.steps}; run the same "
                                  f"experiment again to continue")
    else:
        progress(f"{arm.name}: fine-tuning on {task} finished earlier, reused")
    meta = read_json(meta_path, ConfigError)
    n = len(_examples(task, s, "dev"))
    return {**_dev_accuracy(float(meta["dev_metrics"]["accuracy"]), n), "steps": steps, "lr": meta["train"]["lr"]}


def finetune_grid(arm: Arm, task: str, s: Settings, run: Path, out: Path, lrs) -> dict:
    """`finetune` at each rate of ``lrs`` (into out/lr-<rate>); the best dev accuracy is the row's, every rate's
    listed under ``grid`` (the choice is made on dev, so the row is optimistic by it)."""
    from litebert.finetuning.grid import GRID_FILE

    best = finetune(arm, task, s, run, out, lrs)
    n = len(_examples(task, s, "dev"))
    runs = read_json(out / GRID_FILE, ConfigError)["runs"]
    return {**best, "grid": [{"lr": r["lr"], "accuracy": _dev_accuracy(r["score"], n)["accuracy"]} for r in runs]}


def run_arm(arm: Arm, s: Settings, train: Path, held: Path, folder: Path, steps: int) -> dict:
    """Pretrain, score and fine-tune one arm; its results are cached in ``folder/scores.json``."""
    from litebert.engine.metrics_log import read_metrics
    from litebert.io.hf_folder import load_config
    from litebert.params import count_parameters

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


# ---------------------------------------------------------------------------------------------------- controls


def downstream_baselines(out: Path, s: Settings, first: Arm, first_run: Path) -> dict:
    """The rows every arm's downstream score is read against, on the same dev examples: the best constant guess (the
    dev split's most frequent label); for sentiment a bag of words (`litebert.tasks.baselines`: TF-IDF word 1-2-grams
    + logistic regression, C chosen on dev, so its dev figure is optimistic by that choice); and the first arm's
    architecture from random weights fine-tuned with the same steps and seed at rates meant for training from scratch
    (``control_lrs``, the best on dev kept: the control: what pretraining adds). Multiple choice has no bag-of-words
    row: it picks one of a question's answers, which a bag of words over
    one text does not model. Cached in OUT/baselines/baselines.json."""
    import torch

    from litebert.heads import AlbertForPreTraining
    from litebert.io.hf_folder import load_config
    from litebert.tasks import baselines
    from litebert.tokenizer import load_tokenizer

    folder = out / "baselines"
    cache = folder / "baselines.json"
    rows = read_json(cache, ConfigError) if cache.is_file() else {}
    settings = {"shape_of": first.name, "steps": s.steps, "control_lrs": list(s.control_lrs)}
    if rows.get("settings") != settings:
        rows = {"settings": settings}
    for task in ("sentiment", "mc"):
        if task in rows:
            continue
        dev = _examples(task, s, "dev")
        row = {"majority": _dev_accuracy(baselines.majority({"dev": [e.label for e in dev]})["dev_accuracy"],
                                         len(dev)), "bag_of_words": None}
        if task == "sentiment":
            import importlib.util

            if importlib.util.find_spec("sklearn") is None:
                hint = install_hint("baselines", "scikit-learn")
                progress(f"{task}: bag-of-words row skipped: it needs scikit-learn ({hint})")
            else:
                def part(examples):
                    return [" ".join(filter(None, (e.text_a, e.text_b))) for e in examples], [e.label for e in examples]

                progress(f"{task}: bag of words (TF-IDF + logistic regression, C chosen on dev)")
                bow = baselines.bag_of_words(part(_examples(task, s, "train")), {"dev": part(dev)})
                row["bag_of_words"] = {**_dev_accuracy(bow["dev_accuracy"], len(dev)), "C": bow["C"]}
        rows[task] = row
        write_json(cache, rows)
    control = folder / "from-scratch"
    if not (control / "model").is_dir():
        import shutil

        partial = control / "model.partial"  # renamed into place when whole: a stopped run leaves no half model
        shutil.rmtree(partial, ignore_errors=True)
        torch.manual_seed(s.seed)  # the control's weights, from the experiment's seed
        AlbertForPreTraining(load_config(first_run / "model")).save_pretrained(partial)
        load_tokenizer(first_run / "model").save_pretrained(partial)
        partial.rename(control / "model")
    arm = Arm(f"from-scratch ({first.name} shape)", first.objective, first.sharing, first.embedding_size)
    for task in ("sentiment", "mc"):
        if "from_scratch" not in rows[task]:
            rows[task]["from_scratch"] = finetune_grid(arm, task, s, control, control / task, s.control_lrs)
            write_json(cache, rows)
    return {"shape_of": first.name, **{task: rows[task] for task in ("sentiment", "mc")},
            "note": "multiple choice has no bag-of-words row: a bag of words scores one text, not a choice among a "
                    "question's answers"}


# ---------------------------------------------------------------------------------------------------- the whole


def steps_from_minutes(out: Path, s: Settings, train: Path, held: Path, arm_list: list[Arm]) -> dict:
    """One step count for every arm from a per-arm budget: time a few steps of the slowest arm (most training
    FLOPs per sequence) and fit the budget's pretraining into it."""
    from litebert.engine.metrics_log import flops_per_sequence, read_metrics

    slowest = max(arm_list, key=lambda arm: flops_per_sequence(arm_model(arm, s), s.seq_len, 20))
    timed = 6
    run = out / "timing" / slowest.name
    progress(f"per-arm budget of {s.minutes:g} min: timing {timed} steps of the slowest arm ({slowest.name}) in {run}")
    pretrain(slowest, s, train, held, run, timed)
    rec = read_metrics(run)
    later = [b["elapsed_s"] - a["elapsed_s"] for a, b in zip(rec[1:], rec[2:])]  # the first steps warm up
    per_step = sum(later) / len(later) if later else rec[-1]["elapsed_s"] / max(1, rec[-1]["step"])
    steps = max(1, int(s.minutes * 60 / per_step))
    progress(f"per-arm budget of {s.minutes:g} min: {per_step:.3f} s/step for {slowest.name}: every arm trains "
             f"{steps} steps")
    return {"timed_arm": slowest.name, "seconds_per_step": per_step, "steps": steps}


@checked
def run_experiment(out: str | Path, s: Settings) -> dict:
    """Run (or continue) the experiment ``s.experiment`` (sentence-objective, sharing, embedding-size) in ``out``:
    every arm pretrained, scored and fine-tuned; returns the summary also written to results.json (with
    results.md and curves.png). Everything is checked (the settings, the data, the folder) before the first write."""
    out = Path(out)
    if (s.steps is None) == (s.minutes is None):
        raise ConfigError("give the pretraining budget: {steps:flag} N (every arm) or {minutes:flag} M (per arm)",
                          steps=None, minutes=None)
    arm_list = arms(s)
    check_sources(s)
    s, plan, saved = open_folder(out, s)
    started = time.perf_counter()
    with folders.begin(plan, experiment=s.experiment) as writer:
        timing = saved.get("timing")
        save_settings(out, s, **({"timing": timing} if timing else {}))  # before the work they decide
        train, held = prepare_data(out, s)
        if s.steps is None:
            timing = steps_from_minutes(out, s, train, held, arm_list)
            s = dataclasses.replace(s, steps=timing["steps"])
        save_settings(out, s, **({"timing": timing} if timing else {}))
        results = [run_arm(arm, s, train, held, out / "arms" / arm.name, s.steps) for arm in arm_list]
        controls = downstream_baselines(out, s, arm_list[0], out / "arms" / arm_list[0].name / "pretrain")
        summary = _report(out, s, train, held, timing, results, controls)
        writer.finish(experiment=s.experiment)
    progress(f"done in {time.perf_counter() - started:.0f} s: {out / 'results.md'}, {out / 'results.json'}, "
             f"{out / 'curves.png'}")
    return summary


def _report(out: Path, s: Settings, train: Path, held: Path, timing, results: list[dict], controls: dict) -> dict:
    """results.json, results.md (laid out as the paper's table) and curves.png."""
    from litebert.experiments import report

    summary = {"experiment": s.experiment, "settings": s.to_json(), "data": str(train), "eval_data": str(held),
               "interval": "95% Wilson (counts: MLM masked tokens, SOP/NSP held-out sequences, dev examples)",
               **({"steps_from_minutes": timing} if timing else {}), "arms": results, "baselines": controls}
    write_json(out / "results.json", summary)
    atomic_write(out / "results.md", report.markdown(summary))
    if report.can_plot():
        report.plot_curves(out / "curves.png", {a["name"]: Path(a["run"]) for a in results})
    else:
        progress(f"curves.png not drawn: it needs matplotlib ({install_hint('plot', 'matplotlib')}); the curves are in "
                 "each arm's metrics.jsonl")
    return summary
