"""``litebert predict`` (JSONL in, JSONL out) and ``litebert embed`` (texts -> .npy).

Input objects by task kind (extra keys are kept and echoed back):

* classification / regression: ``text_a`` (or ``text`` / ``sentence``, or the column named at fine-tuning) and
  optionally ``text_b`` -> adds ``label`` and ``probabilities`` (``score`` for regression)
* token: ``words`` (a list) or ``text`` (split on white space) -> adds ``tags`` (one per word)
* multiple choice: ``question``, ``choices``, optional ``context`` -> adds ``label`` (index) and ``probabilities``
* SQuAD: ``question``, ``context`` (optional ``id``) -> adds ``answer``, ``answer_start`` (-1 = no answer) and, for
  v2, ``no_answer_prob``
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from litebert.errors import DataError
from litebert.files import atomic_write
from litebert.finetune import readers as R


def _text(obj: dict, keys: tuple, where: str) -> str:
    for k in keys:
        if k in obj:
            if not isinstance(obj[k], str):
                raise DataError(f"{where}: {k!r} must be a string")
            return obj[k]
    raise DataError(f"{where}: missing key; expected one of {list(keys)} (has: {sorted(obj)})")


def to_examples(kind: str, rows: list[tuple[int, dict]], path: Path, columns: dict | None) -> list:
    cols = columns or {}
    out = []
    for line, o in rows:
        where = f"{path}:{line}"
        if kind in ("classification", "regression"):
            a = _text(o, tuple(dict.fromkeys([cols.get("text_a", "text_a"), "text_a", "text", "sentence"])), where)
            bkey = next((k for k in (cols.get("text_b"), "text_b") if k and k in o), None)
            out.append(R.TextExample(str(o.get("id", line)), a, o[bkey] if bkey else None))
        elif kind == "token":
            words = o.get("words")
            if words is None:
                words = _text(o, ("text",), where).split()
            if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
                raise DataError(f"{where}: 'words' must be a list of strings")
            out.append(R.TokenExample(str(o.get("id", line)), words))
        elif kind == "multiple_choice":
            choices = o.get("choices")
            if not isinstance(choices, list) or len(choices) < 2:
                raise DataError(f"{where}: 'choices' must be a list of at least two strings")
            out.append(R.MultipleChoiceExample(str(o.get("id", line)), o.get("context", ""),
                                               _text(o, ("question",), where), choices))
        else:
            out.append(R.SquadExample(str(o.get("id", line)), _text(o, ("question",), where),
                                      _text(o, ("context",), where)))
    return out


def predict_file(model_dir: str | Path, input_path: str | Path, output_path: str | Path,
                 max_seq_length: int | None = None, batch_size: int = 64, progress: bool = True) -> int:
    """Predict every object of the JSONL ``input_path`` with the fine-tuned folder ``model_dir`` and write each object,
    with the prediction added, to ``output_path``. Returns the number of predictions."""
    from litebert.finetune import runner
    from litebert.finetune.trainer import predict_outputs

    preset, model, tok, meta = runner.load_finetuned(model_dir)
    path = Path(input_path)
    rows = list(R._jsonl(path))
    examples = to_examples(preset.kind, rows, path, meta.get("columns"))
    if preset.kind == "multiple_choice" and len({len(e.choices) for e in examples}) > 1:
        raise DataError(f"{path}: every item needs the same number of choices")
    labels = meta.get("labels")
    max_len = min(max_seq_length or preset.max_seq_length, model.config.max_position_embeddings)
    feats = runner.featurize(preset, tok, examples, labels, max_len)
    outs = predict_outputs(model, feats, batch_size, tok.pad_token_id, progress)
    preds = runner.predictions_from(preset, examples, feats, outs, labels)
    results = []
    for (_, obj), pred, out in zip(rows, preds, outs if preset.kind != "squad" else [None] * len(rows)):
        r = dict(obj)
        if preset.kind == "classification":
            p = _softmax(out["logits"])
            r["label"], r["probabilities"] = pred, {l: float(x) for l, x in zip(labels, p)}
        elif preset.kind == "regression":
            r["score"] = pred
        elif preset.kind == "multiple_choice":
            r["label"], r["probabilities"] = pred, [float(x) for x in _softmax(out["logits"])]
        elif preset.kind == "token":
            r["tags"] = pred
        else:
            if meta.get("null_threshold") is not None:
                pred = runner.apply_threshold(pred, meta["null_threshold"])
            r.update({k: v for k, v in pred.items() if k != "id"})
        results.append(r)
    write_jsonl(output_path, results)
    return len(results)


def write_jsonl(path: str | Path, rows: list[dict]) -> None:
    """One JSON object a line (UTF-8), written atomically."""

    def write(tmp: Path) -> None:
        with open(tmp, "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")

    atomic_write(path, write)


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max())
    return e / e.sum()


def embed_file(model_dir: str | Path, input_path: str | Path, output_path: str | Path, field: str = "text",
               pooling: str = "mean", max_seq_length: int | None = None, batch_size: int = 64) -> np.ndarray:
    """Embed each text of ``input_path`` (a .txt file, one text a line, or JSONL with the text under ``field``) with
    the encoder in ``model_dir``; write the float32 [N, hidden_size] array to ``output_path`` (.npy) and return it.
    ``pooling``: "mean" over real tokens, "pooled" (the pooler output) or "cls" (the raw [CLS] vector)."""
    import torch

    from litebert.finetune.features import collate, sorted_batches
    from litebert.heads import AlbertModel
    from litebert.tokenizer import AlbertTokenizer

    path = Path(input_path)
    if path.suffix == ".jsonl" or path.name.endswith(".jsonl.gz"):
        texts = [_text(o, (field,), f"{path}:{n}") for n, o in R._jsonl(path)]
    else:
        with R.open_text(path) as f:
            texts = [line.rstrip("\n") for line in f if line.strip()]
        if not texts:
            raise DataError(f"{path}: the file is empty")
    tok = AlbertTokenizer.from_pretrained(model_dir)
    model = AlbertModel.from_pretrained(model_dir).eval()
    max_len = min(max_seq_length or 512, model.config.max_position_embeddings)
    enc = tok(texts, max_length=max_len, truncation=True)
    feats = [{"input_ids": i, "token_type_ids": t} for i, t in zip(enc["input_ids"], enc["token_type_ids"])]
    out = np.zeros((len(texts), model.config.hidden_size), dtype=np.float32)
    with torch.no_grad():
        for idx in sorted_batches([len(f["input_ids"]) for f in feats], batch_size):
            b = collate([feats[i] for i in idx], tok.pad_token_id)
            res = model(b["input_ids"], b["attention_mask"], b["token_type_ids"])
            if pooling == "pooled":
                v = res.pooler_output
            elif pooling == "cls":
                v = res.last_hidden_state[:, 0]
            else:  # mean over real tokens: [B, L, H] * [B, L, 1] summed / count
                m = b["attention_mask"].unsqueeze(-1).to(res.last_hidden_state.dtype)
                v = (res.last_hidden_state * m).sum(1) / m.sum(1)
            out[idx] = v.float().numpy()

    def save(tmp: Path) -> None:
        with open(tmp, "wb") as f:  # a file object: np.save would add ".npy" to a name
            np.save(f, out)

    atomic_write(output_path, save)
    return out
