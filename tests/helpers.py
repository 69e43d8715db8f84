"""Test helpers shared by several test modules."""

import hashlib

import numpy as np


class IntTokenizer:
    """A tokenizer whose expected output is known by hand: sentences are whitespace-separated integers ("12 7 9" ->
    [12, 7, 9], anything else dropped); ids < 5 are the ALBERT specials; id % 6 == 0 continues a word."""

    pad_token_id, unk_token_id, cls_token_id, sep_token_id, mask_token_id = 0, 1, 2, 3, 4

    def __init__(self, vocab_size=1000, name="int"):
        self.vocab_size, self.name = vocab_size, name

    def encode_batch_ids(self, texts):
        return [[int(w) for w in t.split() if w.isdigit()] for t in texts]

    def word_start_mask(self):
        m = np.arange(self.vocab_size) % 6 != 0
        m[:5] = True
        return m

    def normal_piece_ids(self):
        return np.arange(5, self.vocab_size)

    def fingerprint(self):
        return hashlib.sha256(f"{self.name}-{self.vocab_size}".encode()).hexdigest()
