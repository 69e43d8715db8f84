"""SOP/NSP pretraining examples built on the fly from a token store (ALBERT §3.1 and §4.1; official
``create_pretraining_data.py``), deterministic and resumable.

How an epoch is laid out
------------------------
*Chunks* are fixed when the dataset is built, as in the official code with its default target length: walking each
document, sentences are gathered until they hold ``max_seq_length - 3`` tokens (or the document ends). One chunk is
one example per epoch, so ``len`` and the example index space do not depend on random draws. Epoch ``e`` visits the
chunks in a random order drawn from ``(seed, e)``; example ``i`` of epoch ``e`` is built from chunk ``order_e[i]``
with a generator seeded by ``(seed, e, chunk)``, so it is a pure function of ``(seed, e, i)``: a run resumes at any
step by starting the epoch's view at ``step * batch_size``, and ranks/DataLoader workers need no shared state.

Building one example from a chunk
---------------------------------
1. With probability ``short_seq_prob`` pick a shorter target in ``[2, max_seq_length - 3]`` and use the sentences
   from a random start in the chunk until they reach it or the document ends (official: shorter targets re-chunk
   the document, so a short example runs to its target unless the document ends first).
2. Segment A = the first k sentences (k uniform in 1..n-1), B = the rest. A chunk of one sentence (a one-sentence
   document, or a sentence longer than the target) is cut at a random word boundary instead (official: such chunks
   become *random-next* pairs with label 1 even for SOP, which mixes NSP into SOP).
3. SOP: with p = 0.5 swap A and B, label 1 = swapped (the official ``sentence_order_label`` is its ``is_random_next``,
   set to True exactly when it swaps). NSP (for the paper's comparison, Table 5): with p = 0.5 replace B by text from
   a random other document starting at a random sentence, label 1 = B is random.
4. ``truncate_seq_pair`` to ``max_seq_length - 3`` tokens, ``[CLS] A [SEP] B [SEP]``, whole-word n-gram masking.

``dupe_factor=K`` gives the official *static* masking: epoch e reuses the pairs and masks of epoch ``e % K`` (in a
fresh order), like K duplicated TFRecord copies. ``dupe_factor=None`` (default) is dynamic: new pairs and masks in
every epoch.
"""

from __future__ import annotations

import numpy as np

from litebert.data.masking import mask_ngrams, truncate_seq_pair
from litebert.data.store import TokenStore
from litebert.errors import ConfigError, DataError

_ORDER, _EXAMPLE = 0, 1  # seed-sequence tags: epoch order vs. per-example generator


def build_chunks(store: TokenStore, max_num_tokens: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Greedy chunks of whole sentences per document, as the official loop with ``target_seq_length =
    max_num_tokens``: a chunk ends after the sentence that brings it to >= max_num_tokens tokens, or at the
    document's end. Returns global ``(first_sentence, end_sentence, document)`` int64 arrays [N], in corpus order.
    Chunks of fewer than 2 tokens (a document that is a single one-piece sentence) cannot make a pair and are left out.
    """
    starts, ends, docs = [], [], []
    for k in range(store.num_shards):
        _, offs, doc_offs = store.shard_arrays(k)
        offs = np.asarray(offs)
        doc_offs = np.asarray(doc_offs)
        if doc_offs.size < 2:
            continue
        # Walk all documents in parallel: one chunk per document per iteration (vectorised over documents).
        s, end, d = doc_offs[:-1].copy(), doc_offs[1:].copy(), np.arange(doc_offs.size - 1)
        while s.size:
            e = np.minimum(np.searchsorted(offs, offs[s] + max_num_tokens, side="left"), end)
            keep = offs[e] - offs[s] >= 2
            starts.append(s[keep] + store.sent_base[k])
            ends.append(e[keep] + store.sent_base[k])
            docs.append(d[keep] + store.doc_base[k])
            more = e < end
            s, end, d = e[more], end[more], d[more]
    if not starts:
        return (np.zeros(0, np.int64),) * 3
    s, e, d = (np.concatenate(x).astype(np.int64) for x in (starts, ends, docs))
    order = np.argsort(s, kind="stable")
    return s[order], e[order], d[order]


class PretrainingDataset:
    """Pretraining examples of a :class:`TokenStore`. See the module docstring for the exact procedure.

    ``example(epoch, index)`` builds example ``index`` (0 <= index < ``num_examples``) of an epoch; ``len(self)``
    and :meth:`for_epoch` give this rank's share (indices ``rank, rank + world_size, ...``; the last
    ``num_examples % world_size`` examples of each epoch are dropped so all ranks take the same number of steps).
    ``store`` is a :class:`TokenStore` or its path, opened with ``verify`` (check every file's sha256; the other
    checks of the store always run).
    """

    def __init__(self, store: TokenStore | str, max_seq_length: int = 128, objective: str = "sop", seed: int = 0,
                 masked_lm_prob: float = 0.15, max_predictions_per_seq: int = 20, max_ngram: int = 3,
                 short_seq_prob: float = 0.1, tokenizer=None, rank: int = 0, world_size: int = 1,
                 dupe_factor: int | None = None, shuffle: bool = True, verify: bool = True):
        if not isinstance(store, TokenStore):
            store = TokenStore(store, verify=verify)
        if tokenizer is not None:
            store.check_tokenizer(tokenizer)
        if objective not in ("sop", "nsp"):
            raise ConfigError(f"objective must be 'sop' or 'nsp', not {objective!r}")
        if max_seq_length < 5:
            raise ConfigError(f"max_seq_length must be >= 5 ([CLS] A [SEP] B [SEP]), got {max_seq_length}")
        if not 0.0 <= masked_lm_prob <= 1.0 or not 0.0 <= short_seq_prob <= 1.0:
            raise ConfigError(f"masked_lm_prob and short_seq_prob must lie in [0, 1], "
                              f"got {masked_lm_prob} and {short_seq_prob}")
        if max_ngram < 1 or max_predictions_per_seq < 0:
            raise ConfigError(f"need max_ngram >= 1 and max_predictions_per_seq >= 0, "
                              f"got {max_ngram} and {max_predictions_per_seq}")
        if not 0 <= rank < world_size:
            raise ConfigError(f"rank must lie in [0, world_size={world_size}), got {rank}")
        if dupe_factor is not None and dupe_factor < 1:
            raise ConfigError(f"dupe_factor must be >= 1 or None (dynamic masking), got {dupe_factor}")
        if objective == "nsp" and store.num_documents < 2:
            raise DataError(f"NSP needs at least 2 documents to draw random segments from; {store.path} has "
                            f"{store.num_documents}")
        self.store, self.facts = store, store.facts
        self.max_seq_length, self.max_num_tokens = max_seq_length, max_seq_length - 3
        self.objective, self.seed = objective, int(seed)
        self.masked_lm_prob, self.max_ngram = masked_lm_prob, max_ngram
        self.max_predictions_per_seq = max_predictions_per_seq
        self.short_seq_prob, self.rank, self.world_size = short_seq_prob, rank, world_size
        self.dupe_factor, self.shuffle = dupe_factor, shuffle
        self.chunk_start, self.chunk_end, self.chunk_doc = build_chunks(store, self.max_num_tokens)
        if self.num_examples < world_size:
            raise DataError(f"{store.path} yields {self.num_examples} examples at max_seq_length={max_seq_length}, "
                            f"fewer than world_size={world_size}")
        self._order: tuple[int, np.ndarray] | None = None

    # ------------------------------------------------------------------------------------------------ indexing
    @property
    def num_examples(self) -> int:
        """Examples per epoch over all ranks."""
        return int(self.chunk_start.size)

    def __len__(self) -> int:
        """Examples per epoch on this rank."""
        return self.num_examples // self.world_size

    def order(self, epoch: int) -> np.ndarray:
        """The chunk visited at each index of ``epoch`` (a permutation seeded by ``(seed, epoch)``)."""
        if self._order is None or self._order[0] != epoch:
            if self.shuffle:
                rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([self.seed, _ORDER, epoch])))
                self._order = (epoch, rng.permutation(self.num_examples))
            else:
                self._order = (epoch, np.arange(self.num_examples))
        return self._order[1]

    def rank_index(self, i: int) -> int:
        """Global index of this rank's ``i``-th example of an epoch."""
        return self.rank + i * self.world_size

    def for_epoch(self, epoch: int, start: int = 0) -> "EpochView":
        """This rank's examples of ``epoch`` from its ``start``-th on, as a map-style dataset for a DataLoader
        (to resume after ``step`` batches of size B, pass ``start = step * B``)."""
        return EpochView(self, epoch, start)

    def loader(self, epoch: int, batch_size: int, start: int = 0, num_workers: int = 0, **kwargs):
        """A ``torch.utils.data.DataLoader`` over :meth:`for_epoch`, collated with :func:`collate_pretraining`.
        Batches come out in the same order whatever ``num_workers`` is."""
        from torch.utils.data import DataLoader

        return DataLoader(self.for_epoch(epoch, start), batch_size=batch_size, shuffle=False,
                          num_workers=num_workers, collate_fn=collate_pretraining, **kwargs)

    # ------------------------------------------------------------------------------------------------ examples
    def example(self, epoch: int, index: int, spans: bool = False) -> dict[str, np.ndarray]:
        """Example ``index`` of ``epoch`` (global numbering, any rank): a pure function of ``(seed, epoch, index)``.

        Returns int32 arrays ``input_ids`` and ``token_type_ids`` [L <= max_seq_length], ``mlm_positions`` and
        ``mlm_ids`` [P <= max_predictions_per_seq], and int64 ``sentence_order_label`` (scalar). With
        ``spans=True`` also ``mlm_spans`` [S, 3] (first position, tokens, whole words) of each masked n-gram.
        """
        if not 0 <= index < self.num_examples:
            raise IndexError(f"example index {index} out of range [0, {self.num_examples})")
        chunk = int(self.order(epoch)[index])
        data_epoch = epoch % self.dupe_factor if self.dupe_factor else epoch
        rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([self.seed, _EXAMPLE, data_epoch, chunk])))
        return self._build(chunk, rng, spans)

    def _build(self, chunk: int, rng: np.random.Generator, want_spans: bool) -> dict[str, np.ndarray]:
        facts, store = self.facts, self.store
        s0, s1 = int(self.chunk_start[chunk]), int(self.chunk_end[chunk])
        target = self.max_num_tokens
        if rng.random() < self.short_seq_prob:
            # As the official loop re-chunks the document with the shorter target: sentences from a random start in
            # this chunk until they reach the target, running on past the chunk's end up to the document's end.
            target = int(rng.integers(2, self.max_num_tokens + 1))
            first = int(rng.integers(s0, s1))
            d_end = store.document_sentences(int(self.chunk_doc[chunk]))[1]
            _, lens = store.sentence_tokens(first, min(d_end, first + target))  # >= 1 token each: enough sentences
            n = int(np.searchsorted(np.cumsum(lens), target, side="left")) + 1  # sentences to reach the target
            if lens[:n].sum() >= 2:  # else keep the whole chunk (it has >= 2 tokens)
                s0, s1 = first, first + min(n, lens.size)
        tokens, lens = store.sentence_tokens(s0, s1)
        tokens = tokens.astype(np.int32)
        if lens.size >= 2:
            a_cut = int(lens[:int(rng.integers(1, lens.size))].sum())
        else:  # one sentence: cut at a random word boundary (any token boundary if it is a single word)
            inner = np.flatnonzero(facts.word_start[tokens[1:]]) + 1
            a_cut = int(rng.choice(inner)) if inner.size else int(rng.integers(1, tokens.size))
        a, b = tokens[:a_cut], tokens[a_cut:]
        label = int(rng.random() < 0.5)
        if label and self.objective == "sop":
            a, b = b, a
        elif label:  # NSP: B from a random other document, from a random sentence on, ~ the rest of the target
            other = int(rng.integers(0, store.num_documents - 1))
            other += other >= int(self.chunk_doc[chunk])
            d0, d1 = store.document_sentences(other)
            first = int(rng.integers(d0, d1))
            _, lens = store.sentence_tokens(first, d1)
            n = int(np.searchsorted(np.cumsum(lens), max(target - a.size, 1), side="left")) + 1
            b = store.sentence_tokens(first, first + min(n, d1 - first))[0].astype(np.int32)
        fa, ba, fb, bb = truncate_seq_pair(a.size, b.size, self.max_num_tokens, rng)
        a, b = a[fa:a.size - ba], b[fb:b.size - bb]
        L = a.size + b.size + 3
        ids = np.empty(L, np.int32)
        ids[0], ids[a.size + 1], ids[-1] = facts.cls_id, facts.sep_id, facts.sep_id
        ids[1:a.size + 1], ids[a.size + 2:-1] = a, b
        token_type = np.zeros(L, np.int32)
        token_type[a.size + 2:] = 1
        special = np.zeros(L, bool)
        special[[0, a.size + 1, L - 1]] = True
        word_start = facts.word_start[ids]
        word_start[[1, a.size + 2]] = True  # a segment (possibly truncated mid-word) starts a word
        m = mask_ngrams(ids, special, word_start, rng, masked_lm_prob=self.masked_lm_prob,
                        max_predictions=self.max_predictions_per_seq, max_ngram=self.max_ngram,
                        mask_id=facts.mask_id, random_ids=facts.normal_ids)
        out = {"input_ids": m.input_ids, "token_type_ids": token_type, "mlm_positions": m.positions.astype(np.int32),
               "mlm_ids": m.labels.astype(np.int32), "sentence_order_label": np.int64(label)}
        if want_spans:
            out["mlm_spans"] = m.spans
        return out


class EpochView:
    """Map-style dataset: item ``j`` = this rank's example ``start + j`` of one epoch."""

    def __init__(self, ds: PretrainingDataset, epoch: int, start: int = 0):
        if not 0 <= start <= len(ds):
            raise IndexError(f"start {start} out of range [0, {len(ds)}]")
        self.ds, self.epoch, self.start = ds, epoch, start

    def __len__(self) -> int:
        return len(self.ds) - self.start

    def __getitem__(self, j: int) -> dict[str, np.ndarray]:
        if not 0 <= j < len(self):
            raise IndexError(j)
        return self.ds.example(self.epoch, self.ds.rank_index(self.start + j))


def collate_pretraining(examples: list[dict[str, np.ndarray]], pad_id: int = 0) -> dict:
    """Stack examples into a batch of torch tensors, padded to the longest example of the batch.

    input_ids, token_type_ids, attention_mask [B, L] long; mlm_positions, mlm_ids [B, P] long and mlm_weights
    [B, P] float (0 on padding slots, as the official ``masked_lm_weights``); sentence_order_label [B] long.
    The keys are the arguments of ``AlbertForPreTraining.forward``.
    """
    import torch

    B = len(examples)
    L = max(e["input_ids"].size for e in examples)
    P = max(1, max(e["mlm_positions"].size for e in examples))  # >= 1 so the MLM head always has a slot
    input_ids = np.full((B, L), pad_id, np.int64)
    token_type = np.zeros((B, L), np.int64)
    attention = np.zeros((B, L), np.int64)
    positions = np.zeros((B, P), np.int64)
    mlm_ids = np.zeros((B, P), np.int64)
    weights = np.zeros((B, P), np.float32)
    for i, e in enumerate(examples):
        n, p = e["input_ids"].size, e["mlm_positions"].size
        input_ids[i, :n], token_type[i, :n], attention[i, :n] = e["input_ids"], e["token_type_ids"], 1
        positions[i, :p], mlm_ids[i, :p], weights[i, :p] = e["mlm_positions"], e["mlm_ids"], 1.0
    labels = np.array([int(e["sentence_order_label"]) for e in examples], np.int64)
    return {"input_ids": torch.from_numpy(input_ids), "token_type_ids": torch.from_numpy(token_type),
            "attention_mask": torch.from_numpy(attention), "mlm_positions": torch.from_numpy(positions),
            "mlm_ids": torch.from_numpy(mlm_ids), "mlm_weights": torch.from_numpy(weights),
            "sentence_order_label": torch.from_numpy(labels)}
