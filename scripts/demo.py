"""`make demo`: pretrain a small ALBERT on the bundled public-domain corpus, offline, on 2 CPU cores, then fine-tune
it on the bundled sentiment task beside honest baselines.

Stages (each a function of the work folder, called in order by main()):
  1. corpus      unpack data/corpus/*.txt.xz; hold out every 20th document of each source for evaluation
  2. tokenizer   train an ~8k-piece ALBERT SentencePiece vocabulary on the training part
  3. store       tokenize both parts into token stores
  4. pretrain    MLM + SOP with LAMB on E=128, H=256, 6 all-shared layers, for a fixed number of steps (seeded:
                 the same numbers on any machine; the time it will take is estimated from timed steps and printed)
  5. report      held-out MLM and SOP accuracy beside their chance baselines; the HF-format model; a PNG plot;
                 the model's top-3 fill-mask answers on a few held-out sentences
  6. finetune    sentiment (scripts/demo_finetune.py): the pretrained model and the same architecture from random
                 weights (the control), each at its own grid of rates with the same epochs, the rate and checkpoint
                 chosen on dev; a bag-of-words TF-IDF + logistic regression (C chosen on dev) and the majority
                 class, on the same dev and test splits
Writes OUT/report.json, OUT/report.md and OUT/pretraining.png.

    .venv/bin/python scripts/demo.py [--out runs/demo] [--steps 1100] [--finetune-epochs 3] [--threads 2]

Re-running reuses the corpus, tokenizer, stores and a finished pretraining (delete the folder for a fresh start);
an interrupted pretraining resumes; the fine-tunings run again.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import lzma
import math
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO / "data" / "corpus"
HOLDOUT_EVERY = 20
VOCAB = 8000
EVAL_EXAMPLES = 512  # held-out sequences per evaluation (~10k masked tokens)
PROBE_STEPS = 10  # real training steps timed (on a copy of the model) to tell how long the run will take
STEPS = 1100  # the `demo` recipe's step count (litebert/train/config.py): ~8 min on 2 idle cores
# Sentiment fine-tuning, the same for the pretrained model and the from-scratch control but for the rates: each model
# gets the grid meant for it, the best rate chosen on dev (docs/pretraining.md, "The demo": how the grids were found).
# A run stops once dev has not improved for 3 evaluations (of 8): a rate added beyond the grid that goes nowhere
# ends early; none of the demo's other runs stalls that long before its best.
FINETUNE = dict(epochs=3.0, batch_size=32, seq_len=64, warmup_proportion=0.1, bias_correction=True, patience=3)
PRETRAINED_LRS = (1e-4, 3e-4)
# One point of the label-efficiency curve, on request (--label-examples): it takes ~4 minutes (LABEL_POINT_MINUTES),
# more than `make demo`'s ~25 leave; the whole curve is `litebert experiment label-efficiency`
LABEL_POINT, LABEL_POINT_MINUTES = 500, 4
CONTROL_LRS = (1e-4, 3e-4)


def split_corpus(files: list[Path], out: Path, max_documents: int = 0) -> dict:
    """out/train.txt and out/heldout.txt in the official format (sentence per line, blank line between documents):
    every HOLDOUT_EVERY-th document of each file held out (of its first ``max_documents``; 0: all). Kept when
    already written (a re-run). Returns their paths and word counts."""
    paths = {"train": out / "train.txt", "heldout": out / "heldout.txt"}
    if not paths["heldout"].exists():
        out.mkdir(parents=True, exist_ok=True)
        parts = {"train": [], "heldout": []}
        for path in files:
            docs = [d.strip() for d in lzma.decompress(Path(path).read_bytes()).decode("utf-8").split("\n\n")
                    if d.strip()]
            for i, doc in enumerate(docs[:max_documents or None]):
                parts["heldout" if i % HOLDOUT_EVERY == HOLDOUT_EVERY - 1 else "train"].append(doc)
        for name, path in paths.items():
            path.write_text("\n\n".join(parts[name]) + "\n", encoding="utf-8")
    words = {k: len(p.read_text(encoding="utf-8").split()) for k, p in paths.items()}
    return {**paths, "words": words}


def stage_corpus(work: Path, args) -> dict:
    files = sorted(CORPUS.glob("*.txt.xz"))
    corpus = split_corpus(files, work / "corpus")
    print(f"[corpus] {corpus['words']['train']:,} training words, {corpus['words']['heldout']:,} held-out words "
          f"(every {HOLDOUT_EVERY}th document of {', '.join(p.name for p in files)})")
    return corpus


def stage_tokenizer(work: Path, args, corpus: dict):
    from litebert import AlbertTokenizer, train_tokenizer

    folder = work / "tokenizer"
    if (folder / "spiece.model").exists():
        tok = AlbertTokenizer.from_pretrained(folder)
    else:
        t = time.time()
        tok = train_tokenizer([corpus["train"]], folder, vocab_size=VOCAB, num_threads=args.threads, progress=False)
        print(f"[tokenizer] trained in {time.time() - t:.0f}s")
    print(f"[tokenizer] {tok.vocab_size} pieces; 'The whale spouted.' -> {tok.tokenize('The whale spouted.')}")
    return tok


def stage_store(work: Path, args, corpus: dict, tok) -> dict:
    from litebert import TokenStore, prepare_store

    stores = {}
    for name in ("train", "heldout"):
        path = work / f"store-{name}"
        stores[name] = TokenStore(path) if (path / "manifest.json").exists() else prepare_store(
            [corpus[name]], tok, path, workers=args.threads, progress=False)
    print(f"[store] {stores['train'].num_tokens:,} training tokens, {stores['heldout'].num_tokens:,} held-out tokens")
    return {k: v.path for k, v in stores.items()}


def model_config(vocab_size: int):
    from litebert.config import AlbertConfig

    # A small ALBERT: factorized embeddings E=128 << H=256, 6 layers sharing one block (paper's all-shared),
    # no dropout (as ALBERT v2), positions up to 128.
    return AlbertConfig(vocab_size=vocab_size, embedding_size=128, hidden_size=256, num_hidden_layers=6,
                        num_attention_heads=4, intermediate_size=1024, max_position_embeddings=128,
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def _seconds_per_step(config, stores: dict, settings: dict, device=None) -> float:
    """Seconds per step of the real run, to say how long it will take: `litebert.pretrain` itself runs PROBE_STEPS
    steps of the same model in a scratch folder (the same batches, padding skipping, LAMB step and logging as the
    run); the median of the steps after the first 3. It measures the loop as it runs, not one repeated micro-batch,
    but not the machine's later speed: on a shared VM that drifts by 15-25% within minutes (two fresh-clone runs:
    probe 0.48 s, then steps at 0.54-0.66 s; probe 0.44 s, then 0.47-0.51 s)."""
    import tempfile

    from litebert import TrainConfig, pretrain
    from litebert.engine.metrics_log import read_metrics

    probe = TrainConfig(**{**settings, "max_steps": PROBE_STEPS, "warmup_steps": 1, "eval_every": 0, "save_every": 0,
                           "log_every": 1, "on_plateau": "off", "report_to": "none"})
    with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stderr(io.StringIO()):  # the probe's own lines
        pretrain(stores["train"], Path(tmp) / "probe", model=config, train=probe, device=device, progress=False)
        elapsed = [r["elapsed_s"] for r in read_metrics(Path(tmp) / "probe")]
    return float(np.median(np.diff([0.0, *elapsed])[3:]))


def stage_pretrain(work: Path, args, stores: dict) -> dict:
    from litebert import TrainConfig, pretrain
    from litebert.data.pretraining import PretrainingDataset
    from litebert.pretraining.config import recipe

    run = work / "pretrain"
    settings = recipe("demo")
    # A fixed step count, seeded: the same command gives the same numbers on any machine (the clock only decides how
    # long it takes). Warmup 1/11 of the run and 5 evaluations, as the recipe's 1100 steps with warmup 100.
    settings.update(seed=1, max_steps=args.steps, warmup_steps=max(1, args.steps // 11),
                    eval_every=max(1, args.steps // 5), save_every=max(1, args.steps // 5))
    kw = dict(max_seq_length=settings["seq_len"], max_predictions_per_seq=settings["max_predictions"], seed=1)
    eval_data = PretrainingDataset(stores["heldout"], **kw)
    config = model_config(eval_data.facts.vocab_size)
    plan = work / "pretrain-plan.json"
    if plan.exists():  # a resumed run keeps its settings (the schedule depends on the step count)
        planned = json.loads(plan.read_text())["settings"]
        if planned["max_steps"] != args.steps:
            raise SystemExit(f"[pretrain] {work} holds a run of {planned['max_steps']} steps; give --steps "
                             f"{planned['max_steps']} to continue it, or another --out for {args.steps} steps")
        settings.update(planned)
    else:
        per_step = _seconds_per_step(config, stores, settings)
        # 5 evaluations of EVAL_EXAMPLES (forward only, ~1/3 of a training sequence's cost) come on top of the steps.
        expect = per_step * (args.steps + 5 * EVAL_EXAMPLES / 3 / settings["batch_size"])
        plan.write_text(json.dumps({"settings": settings, "seconds_per_step": per_step,
                                    "expected_s": round(expect)}) + "\n")
        print(f"[pretrain] {args.steps} steps of {settings['batch_size']} x {settings['seq_len']}: "
              f"~{per_step:.2f} s per step (a timing probe of {PROBE_STEPS} steps in a scratch folder) -> expect "
              f"~{expect / 60:.0f} min on this machine "
              "(a busy machine takes longer; the results do not depend on it)", flush=True)
    cfg = TrainConfig(**{**settings, "eval_examples": EVAL_EXAMPLES})
    print(f"[pretrain] E=128 H=256 6 layers (all shared); LAMB lr {cfg.lr}, global batch {cfg.batch_size}, "
          f"length {cfg.seq_len}", flush=True)
    # An interrupted earlier demo run is continued.
    result = pretrain(stores["train"], run, model=config, train=cfg, eval_data=stores["heldout"], resume=True,
                      progress=not args.no_progress)
    if result.interrupted:
        raise SystemExit(f"[pretrain] interrupted at step {result.step}; run the demo again to resume")
    if result.final_eval is None:  # finished by an earlier demo run: its last evaluation
        from litebert.engine.metrics_log import read_metrics

        result.final_eval = read_metrics(run, "eval")[-1]
    return {"run": run, "summary": result, "eval_data": eval_data}


def chance_baselines(eval_data, n: int) -> dict:
    """What a model that learned nothing would score: uniform guessing, and always predicting the most frequent
    masked token / the majority SOP label of the held-out examples (the stronger, honest baselines)."""
    targets, labels = [], []
    for i in range(min(n, eval_data.num_examples)):
        e = eval_data.example(0, i)
        targets.append(e["mlm_ids"])
        labels.append(int(e["sentence_order_label"]))
    targets = np.concatenate(targets)
    counts = np.bincount(targets)
    return {"mlm_uniform": 1.0 / eval_data.facts.vocab_size, "mlm_most_frequent": counts.max() / targets.size,
            "mlm_most_frequent_id": int(counts.argmax()), "sop_uniform": 0.5,
            "sop_majority": max(np.mean(labels), 1 - np.mean(labels))}


def plot(run: Path, png: Path, base: dict) -> None:
    """The pretraining figure: MLM and SOP loss (train and held-out; SOP's chance), held-out accuracy beside the
    chance baselines."""
    from litebert.engine.metrics_log import read_metrics
    from litebert.plot import Panel, draw

    tr, ev = read_metrics(run, "train"), read_metrics(run, "eval")

    def line(records, key):
        return [r["step"] for r in records], [r[key] for r in records]

    styles = {"train": {"linewidth": 0.8, "alpha": 0.7, "marker": None}, "held-out": {"marker": "o", "markersize": 6}}
    mlm = Panel("MLM loss", lines={"train": line(tr, "mlm_loss"), "held-out": line(ev, "mlm_loss")}, styles=styles)
    sop = Panel("SOP loss", lines={"train": line(tr, "sop_loss"), "held-out": line(ev, "sop_loss")},
                hlines={"chance (ln 2)": math.log(2)}, styles=styles)
    accuracy = Panel("held-out accuracy", ylim=(0, 1),
                     lines={"MLM accuracy": line(ev, "mlm_accuracy"), "SOP accuracy": line(ev, "sop_accuracy")},
                     hlines={"MLM: always the most frequent token": base["mlm_most_frequent"],
                             "SOP: majority label": base["sop_majority"]},
                     styles={"MLM accuracy": {"color": "C0", "marker": "o", "markersize": 6},
                             "SOP accuracy": {"color": "C1", "marker": "o", "markersize": 6},
                             "MLM: always the most frequent token": {"color": "C0"},
                             "SOP: majority label": {"color": "C1"}})
    draw([mlm, sop, accuracy], png, columns=3, size=(15, 4), dpi=110, what="the demo's figure")


def fill_mask_examples(model_dir: Path, heldout: Path, n: int = 4, top_k: int = 3, seed: int = 0) -> list[dict]:
    """The pretrained model's top-k answers for one masked word in each of ``n`` held-out sentences (picked, with
    the word, by a seeded rng: sentences of 8-20 words, a word of letters, not the first), through
    ``litebert.pipeline("fill-mask")``."""
    import random

    from litebert import pipeline

    sentences = [line.strip() for line in heldout.read_text(encoding="utf-8").splitlines()
                 if 8 <= len(line.split()) <= 20]
    rng = random.Random(seed)
    fill = pipeline("fill-mask", model=model_dir, device="cpu", top_k=top_k)
    rows = []
    for sentence in rng.sample(sentences, min(n, len(sentences))):
        words = sentence.split()
        i = rng.choice([j for j, w in enumerate(words) if w.isalpha() and j > 0] or [len(words) - 1])
        text = " ".join(words[:i] + [fill.tokenizer.mask_token] + words[i + 1:])
        answers = fill(text)
        rows.append({"text": text, "masked": words[i], "top": [[a["token_str"], round(a["score"], 4)] for a in answers],
                     "hit": words[i].lower() in [a["token_str"].strip().lower() for a in answers]})
    return rows


def stage_report(work: Path, args, pre: dict, tok, heldout: Path) -> dict:
    """The pretraining's figures (printed, and the report's first part: a later stage adds to it)."""
    run, final, summary = pre["run"], pre["summary"].final_eval, pre["summary"]
    base = chance_baselines(pre["eval_data"], EVAL_EXAMPLES)
    plot(run, work / "pretraining.png", base)
    piece = tok.convert_ids_to_tokens([base["mlm_most_frequent_id"]])[0]
    fills = fill_mask_examples(run / "model", heldout)
    lines = [
        f"held-out MLM accuracy {final['mlm_accuracy']:.1%}  (chance: uniform {base['mlm_uniform']:.3%}, "
        f"always '{piece}' {base['mlm_most_frequent']:.1%});  MLM loss {final['mlm_loss']:.3f} "
        f"(uniform: ln V = {math.log(tok.vocab_size):.3f})",
        f"held-out SOP accuracy {final['sop_accuracy']:.1%}  (chance: 50%, majority label "
        f"{base['sop_majority']:.1%});  SOP loss {final['sop_loss']:.3f} (chance: ln 2 = 0.693)",
        f"{summary.step} steps of {summary.max_steps}, {summary.tokens_seen:,} tokens, "
        f"{summary.elapsed_s / 60:.1f} min of training",
        f"model (HF format): {run / 'model'}",
        f"plot: {work / 'pretraining.png'}",
    ]
    if fills:
        lines.append("fill-mask, top 3 on held-out sentences (the masked word in brackets):")
        lines += [f"  {r['text'][:90]}  [{r['masked']}] -> " + ", ".join(f"'{t}' {p:.1%}" for t, p in r["top"])
                  for r in fills]
    print("\n".join(["", "=" * 30 + " ALBERT demo: pretraining " + "=" * 30, *lines, ""]), flush=True)
    from litebert.engine.metrics_log import read_metrics

    h1 = {r["unigram_entropy"] for r in read_metrics(run, "train") if "unigram_entropy" in r}
    return {"final_eval": final, "baselines": base, "mlm_most_frequent_piece": piece, "fill_mask": fills,
            **({"unigram_entropy": h1.pop()} if len(h1) == 1 else {}),
            **{k: v for k, v in summary.summary().items() if k != "final_eval"}}


def finetune_settings(args) -> dict:
    """The sentiment fine-tuning's settings: `FINETUNE`, with --finetune-epochs (or --finetune-steps), evaluated 8
    times a run."""
    settings = dict(FINETUNE)
    if args.finetune_steps:  # a step count instead of epochs (a quick run)
        settings.update(epochs=None, max_steps=args.finetune_steps)
    else:
        settings["epochs"] = args.finetune_epochs
    steps = settings.get("max_steps") or math.ceil(8568 / settings["batch_size"] * settings["epochs"])
    settings["eval_every"] = max(1, steps // 8)
    return settings


def stage_finetune(work: Path, args, model: Path, report: dict) -> None:
    """Sentiment (scripts/demo_finetune.py): the pretrained model at the rates --finetune-lrs and the from-scratch
    control at --control-lrs, each for --finetune-epochs (or --finetune-steps), the rate chosen on dev; the bag of
    words and the majority class; the report is rewritten as each is done."""
    import demo_finetune

    def save(part: dict) -> None:
        report["sentiment"] = part
        write_report(work, report)

    settings = finetune_settings(args)
    budget = (f"{settings['max_steps']} steps" if settings.get("max_steps") else f"{settings['epochs']:g} epochs")
    rates = lambda lrs: ", ".join(f"{x:g}" for x in lrs)  # noqa: E731
    print(f"[finetune] sentiment, {budget} of {settings['batch_size']} each: the pretrained model at lr "
          f"{rates(args.finetune_lrs)}, the same architecture from random weights at lr {rates(args.control_lrs)} "
          "(the best on dev kept, one rate added beyond an edge dev picks, a run stopped after "
          f"{settings['patience']} evaluations without gain); bag of words; majority class", flush=True)
    demo_finetune.sentiment_report(model, work / "finetune", args.finetune_lrs, control_lrs=args.control_lrs,
                                   device="cpu", progress=not args.no_progress, seed=0, on_part=save, **settings)


def stage_task_adaptive(work: Path, args, model: Path, report: dict) -> None:
    """--tapt-steps N: the pretrained model's MLM training continued for N steps on the sentiment task's unlabelled
    training texts (task-adaptive pretraining, `litebert.experiments.tapt`), then fine-tuned as the pretrained model
    was; its row goes beside the others with what the adaptation cost."""
    if not args.tapt_steps:
        return
    import demo_finetune
    from litebert.experiments.tapt import TaptSettings, adapt

    texts = demo_finetune.read_splits()["train"]
    print(f"[tapt] {args.tapt_steps} MLM steps on the task's {len(texts):,} training texts (no labels), then "
          "fine-tuning as the pretrained model", flush=True)
    folder = f"tapt-{args.tapt_steps}"  # another --tapt-steps: another adaptation, not a mix of two
    tapt = adapt(model, model, texts, work / folder, TaptSettings(args.tapt_steps, seed=1), device="cpu",
                 progress=not args.no_progress, log=None)
    settings = finetune_settings(args)
    row = demo_finetune.finetune_sentiment(tapt["model"], work / "finetune" / folder, args.finetune_lrs,
                                           tokenizer=model, device="cpu", progress=not args.no_progress, seed=0,
                                           **settings)
    report["sentiment"]["tapt"] = {**row, "settings": settings,
                                   "adaptation": {k: tapt[k] for k in ("steps", "minutes", "tokens", "texts")}}
    write_report(work, report)


def stage_label_efficiency(work: Path, args, model: Path, report: dict) -> None:
    """--label-examples N: the pretrained model, the control and the bag of words trained on N labelled snippets
    only (one seed; `litebert experiment label-efficiency` runs the whole curve over seeds)."""
    if not args.label_examples:
        return
    import demo_finetune
    from litebert.experiments.label_efficiency import LabelSettings, changed_settings, label_efficiency

    s = LabelSettings(sizes=(args.label_examples,), seeds=1, lrs=args.finetune_lrs, control_lrs=args.control_lrs,
                      lr_grid_extend=demo_finetune.GRID_EXTEND, seq_len=FINETUNE["seq_len"],
                      batch_size=FINETUNE["batch_size"],
                      min_steps=args.finetune_steps or LabelSettings.min_steps)
    folder = work / "label-efficiency"
    if changed_settings(folder, s):
        shutil.rmtree(folder)  # this demo's own point, from an earlier run with other settings: run it again
    print(f"[label efficiency] {args.label_examples} labelled snippets: the pretrained model, the control, the bag of "
          f"words ({s.steps(args.label_examples)} steps a run)", flush=True)
    summary = label_efficiency(model, folder, data=demo_finetune.DATA, settings=s,
                               progress=False, log=None)
    report["label_efficiency"] = {"examples": args.label_examples, "seed": s.seed,
                                  "steps": s.steps(args.label_examples),
                                  **{arm: {"dev_accuracy": rows[str(args.label_examples)]["dev"]["mean"],
                                           "test_accuracy": rows[str(args.label_examples)]["test"]["mean"]}
                                     for arm, rows in summary["table"].items()}}
    write_report(work, report)


def write_report(work: Path, report: dict, render=None) -> None:
    """report.json and report.md (``render(report)``; default this demo's `markdown`), each written atomically."""
    from litebert.files import atomic_write, write_json

    write_json(work / "report.json", report)
    atomic_write(work / "report.md", (render or markdown)(report))


def markdown(report: dict) -> str:
    f, b = report["final_eval"], report["baselines"]
    lines = ["# CPU demo", "",
             f"{report['step']} pretraining steps of {report['max_steps']}, {report['tokens_seen']:,} tokens in "
             f"{report['elapsed_s'] / 60:.1f} min", "",
             "| held-out | model | baselines |", "|---|---|---|",
             f"| MLM accuracy | **{f['mlm_accuracy']:.1%}** | always '{report['mlm_most_frequent_piece']}' "
             f"{b['mlm_most_frequent']:.1%}; uniform {b['mlm_uniform']:.3%} |",
             f"| SOP accuracy | **{f['sop_accuracy']:.1%}** | majority label {b['sop_majority']:.1%}; chance 50% |"]
    if report.get("fill_mask"):
        lines += ["", "| held-out sentence | masked | top 3 |", "|---|---|---|"]
        lines += [f"| {r['text']} | {r['masked']} | " + ", ".join(f"`{t}` {p:.1%}" for t, p in r["top"]) + " |"
                  for r in report["fill_mask"]]
    s = report.get("sentiment", {})
    if s:
        lines += ["", *sentiment_table(s)]
    if "tapt" in s:
        a = s["tapt"]["adaptation"]
        lines += ["", f"Task-adaptive pretraining: {a['steps']} MLM steps on the {a['texts']:,} training texts "
                      f"({a['minutes']:.1f} min) before fine-tuning."]
    le = report.get("label_efficiency")
    if le:
        arms = [(k, n) for k, n in (("pretrained", "pretrained"), ("control", "control"),
                                    ("bag_of_words", "bag of words")) if k in le]
        lines += ["", f"| {le['examples']} labelled snippets (seed {le['seed']}, {le['steps']} steps) | "
                  + " | ".join(n for _, n in arms) + " |", "|---|" + "---|" * len(arms),
                  "| dev | " + " | ".join(f"{le[k]['dev_accuracy']:.1%}" for k, _ in arms) + " |",
                  "| test | " + " | ".join(f"{le[k]['test_accuracy']:.1%}" for k, _ in arms) + " |"]
    return "\n".join(lines) + "\n"


def sentiment_table(s: dict) -> list[str]:
    """The sentiment rows of a report, markdown: each model's dev and test accuracy (those present in ``s``) and,
    for the fine-tuned ones, every rate tried with its dev accuracy (dev's choice in bold, + a rate added beyond the
    grid's edge)."""
    names = {"pretrained": "pretrained, fine-tuned", "tapt": "pretrained + task-adaptive pretraining, fine-tuned",
             "from_scratch": "same model from random weights (control)",
             "bag_of_words": "bag of words (TF-IDF + logistic regression, C on dev)",
             "majority": "best constant guess"}

    from demo_finetune import added_mark as _added

    def chosen(r: dict) -> str:
        if "runs" in r:
            return ", ".join((f"**{_added(x)}{x['lr']:g}: {x['dev_accuracy']:.1%}**" if x["lr"] == r["lr"] else
                              f"{_added(x)}{x['lr']:g}: {x['dev_accuracy']:.1%}") for x in r["runs"])
        return f"C {r['C']:g}" if "C" in r else ""

    return ["| sentiment | dev | test | dev by setting (dev's choice in bold; + added beyond the grid) |",
            "|---|---|---|---|",
            *(f"| {name} | {s[k]['dev_accuracy']:.1%} | {s[k]['test_accuracy']:.1%} | {chosen(s[k])} |"
              for k, name in names.items() if k in s)]


def _rates(text: str) -> tuple[float, ...]:
    return tuple(float(x) for x in text.split(",") if x.strip())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=REPO / "runs" / "demo", help="work folder (default: runs/demo)")
    ap.add_argument("--steps", type=int, default=STEPS, help=f"pretraining steps (default {STEPS})")
    ap.add_argument("--finetune-epochs", type=float, default=FINETUNE["epochs"],
                    help=f"fine-tuning epochs of each sentiment run (default {FINETUNE['epochs']:g})")
    ap.add_argument("--finetune-steps", type=int, help="fine-tuning steps of each sentiment run instead of epochs")
    ap.add_argument("--finetune-lrs", type=_rates, default=PRETRAINED_LRS,
                    help=f"the pretrained model's fine-tuning rates (default {','.join(map(str, PRETRAINED_LRS))})")
    ap.add_argument("--control-lrs", type=_rates, default=CONTROL_LRS,
                    help=f"the from-scratch control's rates (default {','.join(map(str, CONTROL_LRS))})")
    ap.add_argument("--tapt-steps", type=int, default=0,
                    help="task-adaptive pretraining: MLM steps on the task's unlabelled texts before fine-tuning a "
                         "third model (default 0: none; 300 take ~2 min, its fine-tuning ~5)")
    ap.add_argument("--label-examples", type=int, default=0,
                    help=f"also train the three models on this many labelled snippets only, one point of the "
                         f"label-efficiency curve (default 0: none; {LABEL_POINT} take ~{LABEL_POINT_MINUTES} min "
                         "more)")
    ap.add_argument("--threads", type=int, default=2, help="CPU threads")
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    work = args.out
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    corpus = stage_corpus(work, args)
    tok = stage_tokenizer(work, args, corpus)
    stores = stage_store(work, args, corpus, tok)
    pre = stage_pretrain(work, args, stores)
    report = stage_report(work, args, pre, tok, corpus["heldout"])
    write_report(work, report)  # the pretraining's figures first: a stopped run keeps them
    stage_finetune(work, args, pre["run"] / "model", report)
    stage_task_adaptive(work, args, pre["run"] / "model", report)
    stage_label_efficiency(work, args, pre["run"] / "model", report)
    report["seconds"] = round(time.time() - t0, 1)
    write_report(work, report)
    import demo_finetune

    print("\n" + demo_finetune.format_report(report["sentiment"]))
    print(f"demo finished in {report['seconds'] / 60:.1f} min: {work / 'report.md'}, {work / 'report.json'}, "
          f"{work / 'pretraining.png'}")
    if not args.label_examples:
        print(f"fewer labels: --label-examples {LABEL_POINT} adds one point of the label-efficiency curve "
              f"(~{LABEL_POINT_MINUTES} min); the whole curve over seeds is `litebert experiment label-efficiency` "
              "(docs/EXPERIMENTS.md)")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO / "src"))  # also runs from a checkout without `pip install -e .`
    sys.path.insert(0, str(REPO / "scripts"))  # demo_finetune.py
    from litebert.errors import LitebertError

    try:
        raise SystemExit(main())
    except LitebertError as e:  # one line, as the command line's errors
        print(f"demo: {e}", file=sys.stderr)
        raise SystemExit(1) from None
