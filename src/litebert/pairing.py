"""Whether a model folder, the head a command reads from it and the tokenizer it is given belong together.

Two checks, each made at the one place where the two things meet:

* `check_head`: the head a folder holds is the one asked for. config.json's ``architectures`` (written by litebert's
  and HF's ``save_pretrained``) names it; a sequence classifier and a token classifier both hold ``classifier.*``
  tensors, so the tensors alone cannot tell them apart. Called by `litebert.inference.pipelines` and
  `litebert.inference.finetuned.load_finetuned` before the weights load.
* `check_tokenizer`: the tokenizer's vocabulary is the model's: as many pieces as the model's ``vocab_size`` (a
  tokenizer of another vocabulary would feed ids that mean other pieces, and answers would be decoded with the
  wrong pieces), and its special tokens ([PAD], [UNK], [CLS], [SEP], [MASK]) ids inside it. Called by
  `litebert.inference.finetuned.load_tokenizer`, which every command and pipeline that reads a model folder with a
  tokenizer goes through (predict, evaluate, embed, finetune, fill-mask, every pipeline). Pretraining checks its
  tokenizer against the token store's fingerprint instead (`litebert.pretraining.run`).

Sizes must be equal, not merely the tokenizer's smaller: litebert's tokenizers have no added tokens, and a model
larger than its tokenizer was made with another one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from litebert.errors import CheckpointError, TokenizerError, literal

SPECIAL_TOKENS = ("pad", "unk", "cls", "sep", "mask")


def architectures(folder: str | Path) -> list[str]:
    """The class names config.json's ``architectures`` gives (empty when it names none or there is no config.json;
    a damaged file is reported where the config is read)."""
    from litebert.files import read_json
    from litebert.io.hf_folder import CONFIG_NAME

    file = Path(folder) / CONFIG_NAME
    if not file.is_file():
        return []
    names = read_json(file, CheckpointError).get("architectures")
    return [n for n in names if isinstance(n, str)] if isinstance(names, list) else []


def check_head(folder: str | Path, accepted: tuple[str, ...], what: str) -> None:
    """Refuse (`CheckpointError`, naming the argument ``model``) a folder whose config.json names an ALBERT head
    other than those in ``accepted`` (HF class names); ``what`` says what was asked for ("a token-classification
    head"). A folder that names no ALBERT head is left to the weights' own checks."""
    named = [a for a in architectures(folder) if a.startswith("Albert")]
    if named and not set(named) & set(accepted):
        raise CheckpointError("{model}: " + literal(f"holds an {named[0]} (config.json 'architectures'), not {what} "
                                                   f"({' or '.join(accepted)}); give a folder that has one"),
                              model=Path(folder))


def check_tokenizer(tok: Any, vocab_size: int, model: str | Path, tokenizer: str | Path | None = None) -> None:
    """Refuse (`TokenizerError`) a tokenizer ``tok`` whose vocabulary is not of the model's ``vocab_size`` pieces,
    or whose special tokens' ids lie outside it. ``model``: the model folder; ``tokenizer``: where ``tok`` came from
    when given apart from the model (None: the folder's own, so the folder's files disagree)."""
    named = {"model": Path(model), "tokenizer": tokenizer}
    if tokenizer is not None:
        where, fix = "{tokenizer}: ", "give the tokenizer the model was trained with"
        than = ", but {model} has a vocabulary of"
    else:
        where, fix = "{model}: its tokenizer ", ("the folder's tokenizer is not its model's; pass {tokenizer:flag} "
                                                 "with the one the model was trained with")
        than = ", but its model a vocabulary of"
    size = getattr(tok, "vocab_size", None)
    if size != vocab_size:
        raise TokenizerError(where + f"has {literal(size)} pieces" + than + f" {vocab_size} (config.json "
                             f"vocab_size): its ids would name other pieces; " + fix, **named)
    for name in SPECIAL_TOKENS:
        i = getattr(tok, f"{name}_token_id", None)
        if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < vocab_size:
            raise TokenizerError(where + f"gives [{name.upper()}] the id {literal(i)}, outside the model's "
                                 f"vocabulary of {vocab_size} pieces; " + fix, **named)
