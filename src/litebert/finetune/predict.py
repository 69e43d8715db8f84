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

from litebert import text_input
from litebert.errors import DataError
from litebert.files import atomic_write
from litebert.finetune import readers as R
from litebert.finetune import runner
from litebert.finetune.trainer import predict_outputs


def predict_file(model_dir: str | Path, input_path: str | Path, output_path: str | Path,
                 max_seq_length: int | None = None, batch_size: int = 64, progress: bool = True,
                 encoding_errors: str = "strict") -> int:
    """Predict every object of the JSONL ``input_path`` with the fine-tuned folder ``model_dir`` and write each object,
    with the prediction added, to ``output_path``. Returns the number of predictions."""
    preset, model, tok, meta = runner.load_finetuned(model_dir)
    kind, labels = preset.kind, meta.get("labels")
    path = Path(input_path)
    rows = list(R._jsonl(path, encoding_errors=encoding_errors))
    examples = kind.examples_from_json(rows, path, meta.get("columns"))
    max_len = min(max_seq_length or preset.max_seq_length, model.config.max_position_embeddings)
    feats = kind.featurize(tok, examples, labels, max_len)
    outs = predict_outputs(model, feats, batch_size, tok.pad_token_id, progress)
    preds = kind.thresholded(kind.predictions(examples, feats, outs, labels), meta.get("null_threshold"))
    results = [{**obj, **added} for (_, obj), added in zip(rows, kind.output_rows(preds, outs, labels))]
    write_jsonl(output_path, results)
    return len(results)


def write_jsonl(path: str | Path, rows: list[dict]) -> None:
    """One JSON object a line (UTF-8), written atomically."""

    def write(tmp: Path) -> None:
        with open(tmp, "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")

    atomic_write(path, write)


def embed_file(model_dir: str | Path, input_path: str | Path, output_path: str | Path, text_field: str = "text",
               pooling: str = "mean", max_seq_length: int | None = None, batch_size: int = 64,
               encoding_errors: str = "strict") -> np.ndarray:
    """Embed each text of ``input_path`` (text, one a line, or JSONL with the text under ``text_field``; compressed
    or not) with the encoder in ``model_dir``; write the float32 [N, hidden_size] array to ``output_path`` (.npy) and
    return it. ``pooling``: "mean" over real tokens, "pooled" (the pooler output) or "cls" (the raw [CLS] vector)."""
    import torch

    from litebert.finetune.features import collate, sorted_batches
    from litebert.heads import AlbertModel
    from litebert.tokenizer import AlbertTokenizer

    path = Path(input_path)
    if text_input.is_jsonl(path):
        texts = [text_input.text_field(o, text_field, path, n) for n, o in R._jsonl(path, encoding_errors=encoding_errors)]
    else:
        texts = [line for _, _, line in text_input.iter_lines(path, encoding_errors) if line.strip()]
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
