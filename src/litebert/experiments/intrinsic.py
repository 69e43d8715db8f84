"""Intrinsic evaluation of a pretrained model on held-out data: MLM, SOP and NSP accuracy (the paper's Table 5).

Each objective is scored on examples built from the held-out token store by the pretraining pipeline itself
(`litebert.data.pretraining.PretrainingDataset`, epoch 0, a fixed seed), so every model is evaluated on exactly the
same examples. SOP and NSP are both read from the model's sentence head: label 0 is "B follows A" in both tasks,
label 1 is "swapped" (SOP) or "B is from another document" (NSP). That is how the paper cross-evaluates: a model
trained with NSP is scored on SOP examples with its NSP head, and the other way round. MLM accuracy counts masked
tokens of the SOP examples (of the NSP ones when SOP is not asked for).

Each accuracy comes with its count and a 95% Wilson interval. The MLM count is of tokens, which are not independent
(several per sequence), so its interval is narrower than the truth; the SOP/NSP counts are of sequences.
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
import torch

from litebert import hub, values
from litebert.arguments import checked
from litebert.checks import AT_LEAST_0, AT_LEAST_1
from litebert.errors import CheckpointError, ConfigError

OBJECTIVES = ("mlm", "sop", "nsp")


@dataclass(frozen=True)
class Accuracy:
    accuracy: float
    correct: int
    total: int
    low: float   # 95% Wilson interval
    high: float

    def to_json(self) -> dict:
        return asdict(self)


def wilson_interval(correct: int, total: int, z: float = 1.959964) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion (95% for the default z); (0, 1) for no trials."""
    if total <= 0:
        return 0.0, 1.0
    p = correct / total
    centre = (p + z * z / (2 * total)) / (1 + z * z / total)
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / (1 + z * z / total)
    return max(0.0, centre - half), min(1.0, centre + half)


def accuracy(correct: int, total: int) -> Accuracy:
    low, high = wilson_interval(correct, total)
    return Accuracy(correct / total if total else float("nan"), int(correct), int(total), low, high)


def parse_objectives(text: str | Sequence[str]) -> tuple[str, ...]:
    """``"mlm,sop"`` (or a sequence of names) -> ``("mlm", "sop")``: a subset of `OBJECTIVES`, each once
    (`litebert.values.names`: an empty item, ``mlm,``, is refused, not dropped)."""
    given = text if isinstance(text, str) else ",".join(map(str, text))
    chosen = tuple(n.lower() for n in values.names(given, "objectives"))
    if any(n not in OBJECTIVES for n in chosen) or len(set(chosen)) < len(chosen):
        raise ConfigError("{objectives}: expected a comma-separated subset of " + ",".join(OBJECTIVES)
                          + ", each once", objectives=given)
    return chosen


@dataclass
class PretrainingEvaluation:
    """`evaluate_pretraining`'s result: per model name, its folder and ``{objective: Accuracy}``."""

    data: Path
    examples: int  # the held-out sequences each model was scored on (at most the ones asked for)
    seq_len: int
    seed: int
    scores: dict = field(default_factory=dict)  # name -> {objective: Accuracy}
    models: dict = field(default_factory=dict)  # name -> folder

    def to_json(self) -> dict:
        return {"data": str(self.data), "examples": self.examples, "seq_len": self.seq_len, "seed": self.seed,
                "interval": "95% Wilson",
                "models": {n: {"model": str(self.models[n]), **{o: a.to_json() for o, a in sc.items()}}
                           for n, sc in self.scores.items()}}


@checked(examples=AT_LEAST_1, seq_len=AT_LEAST_1, batch_size=AT_LEAST_1, seed=AT_LEAST_0)
def evaluate_pretraining(models: Sequence[str | os.PathLike], data: str | os.PathLike, *,
                         objectives: str | Sequence[str] = OBJECTIVES, examples: int = 2000,
                         seq_len: Optional[int] = None,
                         seed: int = 12345, batch_size: int = 32, device: Optional[str] = None,
                         precision: str = "auto", attention: str = "auto", names: Optional[Sequence[str]] = None,
                         output: str | os.PathLike | None = None, progress: bool = True,
                         overwrite: bool = False) -> PretrainingEvaluation:
    """Held-out MLM, SOP and NSP accuracy of the pretrained model folders ``models`` on the token store ``data``
    (made with their tokenizer), each with its count and 95% Wilson interval. ``names``: one per model (default:
    the folders' names). ``device``, ``precision`` and ``attention``: as for every command
    (`litebert.engine.runtime.Runtime`). ``output``: also write the results as JSON there (an existing file only
    with ``overwrite``)."""
    from litebert.data.store import TokenStore
    from litebert.engine.device import resolve_device
    from litebert.engine.runtime import Runtime
    from litebert.files import write_json
    from litebert.folders import plan_file

    chosen = parse_objectives(objectives)
    names = model_names(models, names)  # from what the user gave (a hub id's name, not its cache folder's)
    models = [hub.local(m, "model") for m in models]
    if output is not None:
        plan_file(output, overwrite=overwrite, inputs={"models": list(models), "data": data})
    resolve_device(device)  # a device this machine lacks is refused before the store is read
    store = TokenStore(data)
    report = PretrainingEvaluation(Path(data), 0, seq_len or 128, seed)
    for name, path in zip(names, models):
        model = load_for_evaluation(path, chosen, store.facts.vocab_size)
        runtime = Runtime.for_inference(model.config, device, precision, attention)
        runtime.place(model)
        report.scores[name] = intrinsic_accuracy(model, store, chosen, examples=examples,
                                                 seq_len=model.config.sequence_length(seq_len, 128), seed=seed,
                                                 batch_size=batch_size, progress=progress, runtime=runtime)
        report.models[name] = Path(path)
        report.examples = max(report.examples, _sequences(report.scores[name], store, examples, seed,
                                                         model.config.sequence_length(seq_len, 128)))
        if progress:
            print(f"{name}: " + ", ".join(f"{o.upper()} {100 * a.accuracy:.1f}% [{100 * a.low:.1f}, "
                                          f"{100 * a.high:.1f}] of {a.total:,}"
                                          for o, a in report.scores[name].items()),
                  file=sys.stderr)
    if output is not None:
        write_json(output, report.to_json())
    return report


def _sequences(scores: dict, store, asked: int, seed: int, seq_len: int) -> int:
    """How many held-out sequences were scored: the sentence objectives' count, else (MLM alone) the examples the
    store gives at this length, up to the number asked for."""
    sentence = [a.total for o, a in scores.items() if o != "mlm"]
    if sentence:
        return max(sentence)
    from litebert.data.pretraining import PretrainingDataset

    return min(asked, PretrainingDataset(store, max_seq_length=seq_len, seed=seed, short_seq_prob=0.0).num_examples)


def model_names(models: Sequence, names: Optional[Sequence[str]]) -> list[str]:
    """The curve/row name of each model: ``names`` (one per model), else the folders' names (their paths when two
    folders share a name)."""
    if names:
        if len(names) != len(models):
            raise ConfigError("{names}: " + f"{len(names)} name(s) for {len(models)} model(s)",
                              names=",".join(names))
        return list(names)
    short = [Path(m).name or str(m) for m in models]
    return [str(m) for m in models] if len(set(short)) < len(short) else short


def has_sentence_head(model_dir: str | Path) -> bool:
    """Whether the folder's weights include a trained SOP/NSP head (an MLM-only or encoder-only folder has none)."""
    from litebert.io.hf_folder import load_weights

    return any("sop_classifier" in k or "seq_relationship" in k for k in load_weights(model_dir))


def intrinsic_accuracy(model, store, objectives=OBJECTIVES, *, examples: int = 2000, seq_len: int = 128,
                       seed: int = 12345, batch_size: int = 32, progress: bool = False, runtime=None) -> dict:
    """``{objective: Accuracy}`` of an ``AlbertForPreTraining`` on the first ``examples`` examples of epoch 0 of
    the held-out ``store`` (a `TokenStore` or its path) at ``seq_len``, through the inference loop
    (`litebert.inference.loop.run_batches`) under ``runtime`` (default: the model's own device, fp32)."""
    from litebert.data.pretraining import PretrainingDataset, collate_pretraining
    from litebert.inference.loop import run_batches

    def take(res, batch) -> dict:  # per sequence: MLM hits and masked tokens [B, 2], sentence hit [B]
        w = batch["mlm_weights"] > 0
        hit = (res.prediction_logits.argmax(-1) == batch["mlm_ids"]) & w
        sentence = res.sop_logits.argmax(-1) == batch["sentence_order_label"]
        return {"mlm": torch.stack([hit.sum(1), w.sum(1)], 1), "sentence": sentence.long()}

    sentence = [o for o in ("sop", "nsp") if o in objectives]
    mlm_from = sentence[0] if sentence else "sop"
    out: dict[str, Accuracy] = {}
    for objective in sentence or [mlm_from]:
        ds = PretrainingDataset(store, max_seq_length=seq_len, objective=objective, seed=seed, short_seq_prob=0.0)
        feats = [ds.example(0, i) for i in range(min(examples, ds.num_examples))]
        rows = run_batches(model, feats, take, runtime=runtime, batch_size=batch_size, collate=collate_pretraining,
                           progress=progress, desc=f"evaluating {objective}")
        mlm = sum((r["mlm"] for r in rows), np.zeros(2, dtype=np.int64))
        if objective in objectives:
            out[objective] = accuracy(sum(int(r["sentence"]) for r in rows), len(rows))
        if "mlm" in objectives and objective == mlm_from:
            out["mlm"] = accuracy(int(mlm[0]), int(mlm[1]))
    return {o: out[o] for o in OBJECTIVES if o in out}


def load_for_evaluation(model_dir: str | Path, objectives, vocab_size: int):
    """The ``AlbertForPreTraining`` of ``model_dir``, refusing a folder whose sentence head is missing when SOP/NSP
    are asked for, or whose vocabulary is not the store's."""
    from litebert.heads import AlbertForPreTraining

    if any(o in objectives for o in ("sop", "nsp")) and not has_sentence_head(model_dir):
        raise CheckpointError(f"{model_dir}: no sentence-order/next-sentence head in the weights (an MLM-only or "
                              "encoder-only folder); evaluate it with {objectives:flag} mlm", objectives=None)
    model = AlbertForPreTraining.from_pretrained(model_dir)
    if model.config.vocab_size != vocab_size:
        raise ConfigError(f"{model_dir}: vocabulary of {model.config.vocab_size} pieces, but the store was prepared "
                          f"with {vocab_size}; evaluate on a store made with the model's tokenizer")
    return model
