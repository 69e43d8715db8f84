"""What ``AlbertTokenizer.__call__`` returns: a dict of lists, or of tensors/arrays with ``return_tensors``, shaped as
HF's ``BatchEncoding`` (``enc["input_ids"]``, ``enc.input_ids``, ``enc.to(device)``, ``model(**enc)``)."""

from __future__ import annotations

import numpy as np

from litebert.errors import TokenizerError

RETURN_TENSORS = (None, "pt", "np")


class BatchEncoding(dict):
    """A dict of model inputs; keys also read as attributes, and ``to(device)`` moves torch tensors (as HF's)."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def to(self, device) -> "BatchEncoding":
        for key, value in self.items():
            if hasattr(value, "to") and not isinstance(value, np.ndarray):
                self[key] = value.to(device)
        return self


def to_tensors(enc: dict, kind: str | None, single: bool) -> BatchEncoding:
    """``enc`` (lists per text, or one text's lists when ``single``) as ``[batch, length]`` int64 tensors ("pt") or
    arrays ("np"); offsets become ``[batch, length, 2]``. Rows of different lengths need padding, as in HF."""
    if kind not in RETURN_TENSORS:
        raise TokenizerError(f"return_tensors={kind!r}: use None, 'pt' (torch tensors) or 'np' (numpy arrays)")
    if kind is None:
        return BatchEncoding(enc)
    out = BatchEncoding()
    for key, rows in enc.items():
        rows = [rows] if single else rows
        if len({len(r) for r in rows}) > 1:
            raise TokenizerError(f"return_tensors={kind!r}: the texts encode to different lengths "
                                 f"({min(map(len, rows))} to {max(map(len, rows))} tokens); pass padding=True "
                                 "(and truncation=True with max_length for long texts)")
        array = np.asarray(rows, dtype=np.int64)
        if key in ("offsets", "offset_mapping") and array.size == 0:
            array = array.reshape(len(rows), 0, 2)
        if kind == "pt":
            import torch
            out[key] = torch.from_numpy(array)
        else:
            out[key] = array
    return out


def as_id_list(ids) -> list[int]:
    """Token ids given as an int, a list/tuple, a 1-D numpy array or tensor (or a [1, n] one), as a list of ints."""
    if hasattr(ids, "tolist"):  # numpy array, torch tensor
        ids = ids.tolist()
    if isinstance(ids, int):
        return [ids]
    ids = list(ids)
    if len(ids) == 1 and isinstance(ids[0], (list, tuple)):
        ids = list(ids[0])
    if not all(isinstance(i, (int, np.integer)) and not isinstance(i, bool) for i in ids):
        raise TokenizerError("decode takes one sequence of token ids (ints); use batch_decode for several")
    return [int(i) for i in ids]
