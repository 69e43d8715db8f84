"""What a pretraining run's checkpoints record of it, compared on resume
(`litebert.engine.checkpoint.check_compatible`):
the model config, the settings that shape the trajectory, a fingerprint of the data, the weights it started from and
the steps it trains to. A resume with any of them changed is refused, naming what changed."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import torch


def run_identity(model: torch.nn.Module, cfg, train_data, init: dict | None = None) -> dict:
    """What a checkpoint records of its run, compared on resume (`check_compatible`): model config, the training
    settings that shape the trajectory, the data fingerprint, the weights the run started from (``init``:
    ``{"path", "sha256"}`` of an ``--init-from`` model, None for a random start) and the ``max_steps`` in force."""
    return {"model_config": model.config.to_dict(), "train": cfg.trajectory(), "data": data_fingerprint(train_data),
            "init": init, "max_steps": cfg.max_steps}


def data_fingerprint(dataset) -> str:
    """sha256 identifying the training data. For a dataset on a token store (``dataset.store.manifest``): the
    checksums the store recorded for every file, its counts and tokenizer, and every setting that shapes examples
    (seq_len, objective, seed, masking, dupe_factor...), so any change of the corpus is seen. For other datasets: the
    size and the first examples."""
    store = getattr(dataset, "store", None)
    manifest = getattr(store, "manifest", None)
    if isinstance(manifest, dict):
        settings = {key: getattr(dataset, key, None) for key in (
            "max_seq_length", "objective", "seed", "masked_lm_prob", "max_predictions_per_seq", "max_ngram",
            "short_seq_prob", "dupe_factor", "shuffle", "num_examples")}
        files = {r["name"]: r["sha256"] for s in manifest["shards"] for r in s["files"].values()}
        files.update({name: r["sha256"] for name, r in manifest["aux_files"].items()})
        data = {"tokenizer": manifest["tokenizer"], "dtype": manifest["dtype"], "files": files, "settings": settings,
                **{key: manifest[key] for key in ("num_tokens", "num_sentences", "num_documents")}}
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()
    n = getattr(dataset, "num_examples", None)
    n = int(n if n is not None else len(dataset))
    h = hashlib.sha256(str(n).encode())
    for i in range(min(4, n)):
        for key, value in sorted(dataset.example(0, i).items()):
            h.update(key.encode())
            h.update(np.ascontiguousarray(value).tobytes())
    return h.hexdigest()
