"""The one batched inference loop: every command and pipeline that runs a model without training it (evaluate,
predict, embed, fill-mask, the pipelines, evaluate-pretraining, analyze transitions) and fine-tuning's dev evaluation
run their features through `run_batches`.

    outs = run_batches(model, features, take, runtime=rt, batch_size=64, batch_tokens=None)
    outs[i]  # {name: numpy array} of features[i], whatever order the batches ran in

The features are sorted by length, longest first, and cut into batches of ``batch_size`` (and, with
``batch_tokens``, of at most that many padded tokens: `litebert.tasks.features.sorted_batches`), so each batch is
padded to little more than its own longest input. Each batch is collated on the host, packed to its real tokens
(`litebert.padding.prepare_batch`: the dense layers skip the padding, and so does attention when it is varlen;
under compile the padded layout is kept) and run under the runtime's autocast and ``torch.inference_mode``. ``take``
turns a batch's model output into batch-major tensors; they are copied to the host behind the GPU's work and read
once every batch is queued, so a GPU is never waited for between batches.
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence

import numpy as np
import torch
from tqdm import tqdm

from litebert.engine.runtime import Runtime
from litebert.padding import prepare_batch
from litebert.tasks import features as F

# What a model's forward takes from a batch; collated keys besides these (labels, weights) are for ``take``.
MODEL_INPUTS = ("input_ids", "token_type_ids", "attention_mask", "packing", "mlm_positions")

Take = Callable[[object, dict], dict]  # (model output, device batch) -> {name: tensor [B, ...]}


def pad_inputs(features: Sequence[dict], pad_id: int = 0) -> dict[str, torch.Tensor]:
    """``input_ids``, ``token_type_ids`` and ``attention_mask`` of ``features``, padded to the longest
    (`litebert.tasks.features.collate` of those keys alone: labels and positions are left out)."""
    return F.collate([{k: f[k] for k in ("input_ids", "token_type_ids")} for f in features], pad_id)


def run_batches(model: torch.nn.Module, features: Sequence[dict], take: Take, *, runtime: Optional[Runtime] = None,
                batch_size: int = 64, batch_tokens: Optional[int] = None, pad_id: int = 0,
                collate: Optional[Callable[[list], dict]] = None, inputs: Sequence[str] = MODEL_INPUTS,
                options: Optional[dict] = None, progress: bool = False,
                desc: str = "running") -> list[dict[str, np.ndarray]]:
    """``take``'s outputs for each of ``features``, in their order: per feature ``{name: array}`` (numpy, the
    feature's row of each batch-major tensor ``take`` returned; per-token outputs keep the batch's padding, which the
    caller trims to the feature's length).

    ``model`` runs where it is (``runtime.place`` put it there) under ``runtime`` (default: the model's device, fp32
    with any caller's autocast left in force, sdpa: `Runtime.of_model`). ``collate(features)`` makes the host batch
    (default `pad_inputs`); the model gets the batch's ``inputs`` (default `MODEL_INPUTS`; the packing is made
    here from the mask) and ``options`` (constant keyword arguments: ``output_hidden_states=True``);
    ``take(output, batch)`` gets the whole device batch (its ``attention_mask`` left out when nothing is padded) and
    returns tensors numpy can hold (float32, not bf16). ``progress``: a tqdm bar of batches named ``desc``. The
    model is left in the train/eval mode it was in."""
    rt = runtime if runtime is not None else Runtime.of_model(model)
    collate = collate or (lambda fs: pad_inputs(fs, pad_id))
    lengths, rows = [F.length_of(f) for f in features], [F.rows_of(f) or 1 for f in features]
    batches = F.sorted_batches(lengths, batch_size, batch_tokens, rows)
    was_training = model.training
    model.eval()
    pending = []
    try:
        with torch.inference_mode():
            for idx in tqdm(batches, desc=desc, disable=not progress, leave=False):
                batch = prepare_batch(collate([features[i] for i in idx]), rt.device, pack=not rt.compile,
                                      varlen=rt.varlen)
                with rt.autocast():
                    out = model(**{k: v for k, v in batch.items() if k in inputs}, **(options or {}))
                pending.append((idx, {n: _to_host(t) for n, t in take(out, batch).items()}))
            if rt.device.type == "cuda":
                torch.cuda.synchronize(rt.device)  # the copies to the host are complete
    finally:
        model.train(was_training)
    results: list = [None] * len(features)
    for idx, outs in pending:
        arrays = {n: t.numpy() for n, t in outs.items()}
        for row, i in enumerate(idx):
            results[i] = {n: a[row] for n, a in arrays.items()}
    return results


def _to_host(t: torch.Tensor) -> torch.Tensor:
    """A GPU tensor's copy into pinned host memory, queued behind the GPU's work rather than waited for (read it
    after a synchronize); a host tensor as it is."""
    if not t.is_cuda:
        return t
    host = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
    return host.copy_(t, non_blocking=True)
