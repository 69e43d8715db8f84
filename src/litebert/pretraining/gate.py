"""The CPU gate for a pretraining recipe: a narrow, depth-matched proxy of the candidate, trained on a CPU at the
candidate's optimizer settings for the warmup and ``after_warmup`` more steps, says PLATEAU, SLOW or PASS.

A GPU run that sits on the unigram plateau spends its minutes for nothing (docs/pretraining.md, "The plateau
guard"); whether a recipe falls there depends mostly on the learning rate against the warmup, the optimizer and its
bias correction, and the depth (post-LayerNorm transformers need a longer warmup the deeper they are). The proxy keeps
those and what the masking draws, and makes the rest cheap: the candidate's depth, sharing and embedding size, but a
hidden size of at most 512 (8 heads, FFN 2048), length 128 (the predictions per sequence scaled with it) and a batch
of 8. It follows the candidate's schedule (warmup steps, decay to the candidate's ``max_steps``) step for step. The
width matters: a proxy at H 256 learned where the GPU run sat on the plateau, at H 512 it sat there too.

The verdict, from the plateau guard's statistics at the last step (`litebert.pretraining.plateau`); each run's
verdict is printed with the rule that decided it and the values it read (`explain`):

    PLATEAU   the guard fires: the train MLM loss sits at the unigram entropy H1 (within [H1 - 0.3, H1 + 0.5]) and
              the held-out predictions have collapsed (one answer, parallel final states): the recipe as given
              would waste its run
    PASS      the proxy predicts from context: its loss at least `PASS_MARGIN` (0.1 nats) below H1, and its probe no
              longer collapsed, or its loss below H1 - 0.3 whatever the probe says. A loss at H1 with an uncollapsed
              probe is not enough: positions pulled apart that still predict the frequencies have not yet learned.
    SLOW      neither: still collapsed and still falling towards H1, or at H1 but not yet below it by the margin, or
              not collapsed but far above H1 (the rate moves the weights too little in the steps given to tell;
              ``after_warmup`` looks later)

The gate was calibrated on the two H200 runs whose outcome is known (docs/pretraining.md, "The CPU gate").
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from litebert import folders
from litebert.config import AlbertConfig
from litebert.errors import ConfigError, LitebertError
from litebert.files import atomic_write, write_json
from litebert.pretraining.config import TrainConfig
from litebert.pretraining.plateau import CEILING, COLLAPSE_COSINE, COLLAPSE_SHARE, MARGIN

# The proxy's width: calibrated (docs/pretraining.md, "The CPU gate"): at H 256 the proxy of the H200 run that sat on
# the plateau learned, even at twice its rate; at H 512 (and H 768) it sat on the plateau as the GPU run did.
PROXY_HIDDEN, PROXY_HEADS, PROXY_FFN, PROXY_LEN, PROXY_BATCH = 512, 8, 2048, 128, 8
VERDICTS = ("PLATEAU", "SLOW", "PASS")
# A PASS needs the proxy's loss this far below H1 (nats): the 20-step mean of a batch-8 proxy wanders by about 0.05
# at the plateau, so 0.1 is below it by twice that; the calibration's learning proxies were 0.11-0.4 below.
PASS_MARGIN = 0.1


class GateInterrupted(LitebertError, KeyboardInterrupt):
    """A signal stopped the proxy run: there is no verdict."""


@dataclass(frozen=True)
class Proxy:
    """How the candidate is narrowed: hidden size, heads, FFN size, sequence length and batch of the proxy."""

    hidden_size: int = PROXY_HIDDEN
    num_heads: int = PROXY_HEADS
    intermediate_size: int = PROXY_FFN
    seq_len: int = PROXY_LEN
    batch: int = PROXY_BATCH

    def model(self, candidate: AlbertConfig) -> AlbertConfig:
        """The candidate's depth, sharing, groups and embedding size at the proxy's width (the candidate's own when
        it is not wider); no dropout."""
        narrow = {} if candidate.hidden_size <= self.hidden_size else dict(
            hidden_size=self.hidden_size, num_attention_heads=self.num_heads, intermediate_size=self.intermediate_size)
        return dataclasses.replace(candidate, **narrow, max_position_embeddings=max(self.seq_len, 128),
                                   hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)

    def train(self, candidate: TrainConfig, steps: int, lr_scale: float = 1.0) -> TrainConfig:
        """The candidate's optimizer, schedule and masking at the proxy's batch (the candidate's when smaller) and
        length; ``steps`` are trained (the schedule still decays to the candidate's ``max_steps``)."""
        predictions = max(1, round(candidate.max_predictions * self.seq_len / candidate.seq_len))
        batch = min(self.batch, candidate.batch_size)
        return dataclasses.replace(
            candidate, lr=candidate.lr * lr_scale, batch_size=batch, micro_batch=batch,
            seq_len=self.seq_len, max_predictions=min(predictions, self.seq_len - 3), max_steps=candidate.max_steps,
            eval_every=0, eval_examples=64, save_every=steps, keep_last=1, log_every=1, on_plateau="warn",
            plateau_check_steps=max(1, steps - candidate.warmup_steps), data_workers=0, compile=False,
            precision="fp32", gradient_checkpointing=False, report_to="none")


def _shape(model: AlbertConfig, train: TrainConfig) -> dict:
    """The proxy as it ran: its width (the candidate's own when that is not wider than the proxy's), length and
    batch (the candidate's when smaller)."""
    return {"hidden_size": model.hidden_size, "num_heads": model.num_attention_heads,
            "intermediate_size": model.intermediate_size, "seq_len": train.seq_len, "batch": train.batch_size}


@dataclass
class GateRun:
    """One proxy run and its verdict."""

    lr: float
    steps: int
    verdict: str
    mlm_loss: float  # mean train MLM loss of the last steps
    unigram_entropy: float
    probe: dict
    first_below: Optional[int]  # the first step whose 20-step mean loss was below H1 - 0.3 (None: never)
    seconds: float
    run: str
    why: str = ""  # the rule that decided the verdict, with the values it read (`explain`)


@dataclass
class GateResult:
    verdict: str  # the candidate's (the run at its own rate)
    runs: list  # GateRun, the candidate's rate first, then the margin run
    candidate: dict
    proxy: dict
    out: Path

    def line(self) -> str:
        first = self.runs[0]
        extra = "".join(f"; at {r.lr / first.lr:g}x the rate: {r.verdict}" for r in self.runs[1:])
        return (f"gate: {self.verdict} (proxy at lr {first.lr:.3g}, {first.steps} steps, {first.seconds / 60:.1f} min: "
                f"{first.why}{extra})")


def verdict_of(loss: float, h1: float, plateau: bool, collapsed: bool) -> str:
    """The verdict alone (`explain`)."""
    return explain(loss, h1, plateau, collapsed)[0]


def explain(loss: float, h1: float, plateau: bool, collapsed: bool, probe: Optional[dict] = None) -> tuple[str, str]:
    """(verdict, the rule that decided it with the values it read): PLATEAU when the guard fired; PASS when the
    proxy predicts from context (loss at least `PASS_MARGIN` below H1 and the probe no longer collapsed, or the loss
    below H1 - 0.3); SLOW otherwise."""
    p = probe or {}
    state = (f"top share {p['probe_top_share']:.2f}, cosine {p['probe_cosine']:.2f}: " if "probe_cosine" in p else "")
    state += "collapsed" if collapsed else "not collapsed"
    below = h1 - loss
    values = f"loss {loss:.3f} vs H1 {h1:.3f} ({below:+.3f} below; probe {state})"
    if plateau:
        return "PLATEAU", (f"the guard fired: loss within [H1 - {MARGIN:g}, H1 + {CEILING:g}] and the probe collapsed "
                           f"(top share >= {COLLAPSE_SHARE:g}, cosine >= {COLLAPSE_COSINE:g}); {values}")
    if below > MARGIN:
        return "PASS", f"loss more than {MARGIN:g} below H1; {values}"
    if below >= PASS_MARGIN and not collapsed:
        return "PASS", f"loss at least {PASS_MARGIN:g} below H1 and the probe not collapsed; {values}"
    if below >= PASS_MARGIN:
        why = f"loss {PASS_MARGIN:g}-{MARGIN:g} below H1 but the probe still collapsed"
    elif loss <= h1 + CEILING:
        why = f"loss not yet {PASS_MARGIN:g} below H1" + ("" if collapsed else " (the probe not collapsed)")
    else:
        why = f"loss more than {CEILING:g} above H1, still falling towards it"
    return "SLOW", f"{why}; {values}"


def gate(data: str | os.PathLike, out: str | os.PathLike, *, model: AlbertConfig | str | os.PathLike,
         train: TrainConfig, eval_data: str | os.PathLike | None = None, proxy: Proxy = Proxy(),
         after_warmup: int = 250, margin_scale: Optional[float] = None, overwrite: bool = False,
         device: Optional[str] = "cpu", progress: bool = True, log=print) -> GateResult:
    """Gate the candidate recipe (``model`` and ``train``) on the token store ``data``: train its proxy for
    ``train.warmup_steps + after_warmup`` steps (at most ``train.max_steps``), and with ``margin_scale`` (e.g. 2) once
    more at that multiple of the rate; write ``out/gate.json`` and ``out/gate.md`` and the proxy runs under ``out``.
    ``eval_data``: the held-out store the probe reads (default: the first training examples)."""
    from litebert.data.store import TokenStore
    from litebert.pretraining.run import model_config, pretrain

    if not isinstance(train, TrainConfig):
        raise ConfigError("{train}: expected a TrainConfig", train=type(train).__name__)
    if train.max_steps is None:
        raise ConfigError("{max_steps}: the gate follows the candidate's schedule: give its max_steps",
                          max_steps=None)
    check_after = max(1, after_warmup)
    steps = min(train.max_steps, train.warmup_steps + check_after)
    plan = folders.plan(out, folders.GATE, overwrite=overwrite, inputs={"data": data, "eval_data": eval_data})
    vocab = TokenStore(data, verify=False).facts.vocab_size
    if eval_data is not None:  # the held-out store too, before the folder is begun (the proxy runs read it late)
        TokenStore(eval_data, verify=False)
    candidate, _ = model_config(model, None, vocab, min(train.seq_len, 512))
    proxy_model = proxy.model(candidate)
    scales = [1.0] + ([margin_scale] if margin_scale else [])
    writer = folders.begin(plan)
    try:
        runs = []
        for scale in scales:
            folder = plan.out / ("proxy" if scale == 1.0 else f"proxy-{scale:g}x")
            cfg = proxy.train(train, steps, scale)
            _say(log, f"gate: proxy of depth {proxy_model.num_hidden_layers} (sharing {proxy_model.sharing}), "
                      f"H {proxy_model.hidden_size}, batch {cfg.batch_size} x {cfg.seq_len}, lr {cfg.lr:.3g}, warmup "
                      f"{cfg.warmup_steps}, {'with' if cfg.bias_correction else 'no'} bias correction: {steps} steps")
            t0 = time.perf_counter()
            done = pretrain(data, folder, model=proxy_model, train=cfg, eval_data=eval_data, device=device,
                            progress=progress, stop_after=steps, overwrite=True)
            if done.signal is not None:
                raise GateInterrupted(f"the gate was stopped (signal {done.signal}) at step {done.step} of its proxy; "
                                      f"run it again with --overwrite")
            runs.append(_read_run(folder, cfg.lr, steps, time.perf_counter() - t0))
            _say(log, f"gate: {runs[-1].verdict} at lr {cfg.lr:.3g}: {runs[-1].why}")
        result = GateResult(runs[0].verdict, runs, {"model": candidate.to_dict(), **train.to_dict()},
                            _shape(proxy_model, cfg), plan.out)  # the batch and length of every run
        write_json(plan.out / "gate.json", {"verdict": result.verdict, "runs": [dataclasses.asdict(r) for r in runs],
                                            "candidate": result.candidate, "proxy": result.proxy,
                                            "after_warmup": check_after})
        atomic_write(plan.out / "gate.md", markdown(result))
        writer.finish(verdict=result.verdict)
        return result
    finally:
        writer.close()


def _read_run(folder: Path, lr: float, steps: int, seconds: float) -> GateRun:
    """The verdict of a finished proxy run, from its metrics: the guard's record at the last step."""
    from litebert.engine.metrics_log import read_metrics

    train = read_metrics(folder, "train")
    guard = read_metrics(folder, "guard")
    if not train or not guard:
        raise ConfigError(f"{folder}: the proxy run logged no plateau-guard check; it needs a token store")
    last = guard[-1]
    h1 = last["unigram_entropy"]
    losses = [r["mlm_loss"] for r in train]
    first = next((i + 20 for i in range(len(losses) - 19)
                  if sum(losses[i:i + 20]) / 20 < h1 - 0.3), None)
    probe = {k: v for k, v in last.items() if k.startswith("probe_")}
    collapsed = probe["probe_top_share"] >= COLLAPSE_SHARE and probe["probe_cosine"] >= COLLAPSE_COSINE
    verdict, why = explain(last["mlm_loss"], h1, bool(last["plateau"]), collapsed, probe)
    return GateRun(lr, steps, verdict, last["mlm_loss"], h1, probe, first, round(seconds, 1), str(folder), why)


def markdown(result: GateResult) -> str:
    rows = ["| proxy run | lr | steps | MLM loss (last 20) | H1 | probe: top share / cosine | first below H1 - 0.3 "
            "| verdict | minutes |", "|---|---|---|---|---|---|---|---|---|"]
    for r in result.runs:
        rows.append(f"| {Path(r.run).name} | {r.lr:.3g} | {r.steps} | {r.mlm_loss:.3f} | {r.unigram_entropy:.3f} | "
                    f"{r.probe.get('probe_top_share', math.nan):.2f} / {r.probe.get('probe_cosine', math.nan):.2f} | "
                    f"{r.first_below if r.first_below is not None else '-'} | **{r.verdict}** | {r.seconds / 60:.1f} |")
    c = result.candidate
    return "\n".join([f"# Gate: {result.verdict}", "",
                      f"Candidate: {c['optimizer']} lr {c['lr']:.3g}, warmup {c['warmup_steps']} of {c['max_steps']} "
                      f"steps, batch {c['batch_size']} x {c['seq_len']}, bias correction {c['bias_correction']}, "
                      f"depth {c['model']['num_hidden_layers']} (sharing {c['model']['sharing']}).",
                      f"Proxy: {json.dumps(result.proxy)}.", "", *rows, "",
                      *(f"- {Path(r.run).name}: **{r.verdict}**: {r.why}" for r in result.runs), "", LEGEND])


LEGEND = f"""What the verdicts mean (`litebert.pretraining.gate`; docs/pretraining.md, "The CPU gate"):

- **PASS**: the proxy predicts from context: its MLM loss at least {PASS_MARGIN:g} nats below the unigram entropy H1
  and its held-out probe no longer collapsed, or its loss more than {MARGIN:g} below H1. The recipe left the plateau.
- **SLOW**: too early to tell: the loss still falling towards H1, or at H1 but not yet {PASS_MARGIN:g} below it. Look
  later (`--after-warmup`), or lower the rate.
- **PLATEAU**: the plateau guard fired: the loss within [H1 - {MARGIN:g}, H1 + {CEILING:g}] and the probe collapsed
  (one answer at most masked positions, parallel final states). The recipe as given would waste its run: lower the
  rate (a quarter learned in every plateaued case measured).
"""


def _say(log, message: str) -> None:
    if log is not None:
        log(message)
    sys.stdout.flush()

