"""Whether a model folder, the head a command reads from it and the tokenizer it is given belong together.

Two checks, each made at the one place where the two things meet, each reading every signal the folder carries:

* `check_head`: the head a folder holds is the one asked for. The folder says which head it holds in three ways,
  read in this order, the first that speaks deciding (`held_heads`):

  1. config.json's ``architectures`` (written by litebert's and HF's ``save_pretrained``);
  2. finetune.json's task (written by ``litebert finetune``): the head its kind fine-tunes;
  3. the tensors and the label map: ``qa_outputs.*`` is a question-answering head, ``predictions.*`` a masked-LM
     head (with ``sop_classifier.*`` a pretraining one), ``classifier.*`` a sequence classifier, a token classifier
     when config.json's labels are a tagging scheme (``O``, ``B-X``, ``I-X``...: `is_tagging`), and one of one
     output also a multiple-choice head. A sequence and a token classifier hold tensors of the same shapes, so
     without the first two signals the labels decide, and labels that are no tagging scheme are a sequence
     classifier's: it never answers token classification.

  Called by `litebert.inference.pipelines` and `litebert.inference.finetuned.load_finetuned` before the weights load.
* `check_tokenizer`: the tokenizer's vocabulary is the model's: as many pieces as the model's ``vocab_size`` (a
  tokenizer of another vocabulary would feed ids that mean other pieces, and answers would be decoded with the
  wrong pieces), its special tokens ([PAD], [UNK], [CLS], [SEP], [MASK]) ids inside it, and, when a tokenizer is
  given apart from a folder that has its own, the same pieces in the same order as the folder's
  (`pieces_fingerprint`): a vocabulary of the same size but other pieces is refused, or only warned about with
  ``allow_tokenizer_mismatch`` (``--allow-tokenizer-mismatch``). Called by
  `litebert.inference.finetuned.load_tokenizer`, which every command and pipeline that reads a model folder with a
  tokenizer goes through (predict, evaluate, embed, finetune, fill-mask, every pipeline). Pretraining checks its
  tokenizer against the token store's fingerprint instead (`litebert.pretraining.run`).

Sizes must be equal, not merely the tokenizer's smaller: litebert's tokenizers have no added tokens, and a model
larger than its tokenizer was made with another one.
"""

from __future__ import annotations

import hashlib
import re
import warnings
from pathlib import Path
from typing import Any, Mapping

from litebert.errors import CheckpointError, ConfigError, TokenizerError, literal
from litebert.files import read_json
from litebert.folders import FINETUNE_META
from litebert.io.hf_folder import CONFIG_NAME
from litebert.tasks.meta import read_meta
from litebert.tasks.presets import get_preset

SPECIAL_TOKENS = ("pad", "unk", "cls", "sep", "mask")
_TAG = re.compile(r"^[BIESLU]-.")  # BIO, BIOES, BILOU tags


def architectures(folder: str | Path) -> list[str]:
    """The class names config.json's ``architectures`` gives (empty when it names none or there is no config.json;
    a damaged file is reported where the config is read)."""
    config = _config(folder)
    names = config.get("architectures")
    return [n for n in names if isinstance(n, str)] if isinstance(names, list) else []


def _config(folder: str | Path) -> dict:
    file = Path(folder) / CONFIG_NAME
    return read_json(file, CheckpointError) if file.is_file() else {}


def is_tagging(labels: list) -> bool:
    """Whether label names are a tagging scheme (token classification): each ``O`` or a ``B-``/``I-``/``E-``/``S-``/
    ``L-``/``U-`` tag, at least one a tag."""
    names = [x for x in labels if isinstance(x, str)]
    return (bool(names) and len(names) == len(labels) and all(x == "O" or _TAG.match(x) for x in names)
            and any(x != "O" for x in names))


def held_heads(folder: str | Path, tensors: Mapping[str, Any] | None = None) -> tuple[set[str], str] | None:
    """(the HF class names of the heads the folder may hold, the signal that says so), from the first of
    config.json's ``architectures``, finetune.json's task, and the tensors ``tensors`` (the folder's weights, {name:
    tensor or shape}) with config.json's labels; None when none of them speaks (no tensors given, none of the three)."""
    named = {a for a in architectures(folder) if a.startswith("Albert")}
    if named:
        return named, "config.json 'architectures'"
    meta_file = Path(folder) / FINETUNE_META
    if meta_file.is_file():
        task = read_meta(folder)["task"]
        try:
            kind = get_preset(task).kind if isinstance(task, str) else None
        except ConfigError:
            kind = None  # a task this version does not know: the tensors decide
        if kind is not None:
            head = getattr(kind.head, "BASE_HEAD", kind.head)  # SQuAD v2's: a QA head and more
            return {head.HF_ARCHITECTURE}, f"{FINETUNE_META}'s task {task!r}"
    if tensors is None:
        return None
    keys = {k.removeprefix("albert.") for k in tensors}
    if any(k.startswith("qa_outputs.") for k in keys):
        return {"AlbertForQuestionAnswering"}, "its qa_outputs.* tensors"
    if any(k.startswith("predictions.") for k in keys):
        if any(k.startswith("sop_classifier.") for k in keys):
            return {"AlbertForPreTraining"}, "its predictions.* and sop_classifier.* tensors"
        return {"AlbertForMaskedLM"}, "its predictions.* tensors"
    weight = next((tensors[k] for k in tensors if k.removeprefix("albert.") == "classifier.weight"), None)
    if weight is None:
        return {"AlbertModel"}, "its tensors (an encoder without a head)"
    id2label = _config(folder).get("id2label")
    labels = list(id2label.values()) if isinstance(id2label, dict) else []
    if is_tagging(labels):
        return {"AlbertForTokenClassification"}, "its classifier.* tensors with config.json's tag labels"
    outputs = tuple(getattr(weight, "shape", weight))[0] if len(tuple(getattr(weight, "shape", weight))) else 0
    if outputs == 1:
        return ({"AlbertForSequenceClassification", "AlbertForMultipleChoice"},
                "its classifier.* tensors of one output")
    return {"AlbertForSequenceClassification"}, "its classifier.* tensors with config.json's labels (no tag scheme)"


def check_head(folder: str | Path, accepted: tuple[str, ...], what: str,
               tensors: Mapping[str, Any] | None = None) -> None:
    """Refuse (`CheckpointError`, naming the argument ``model``) a folder that holds an ALBERT head other than those
    in ``accepted`` (HF class names), by the first signal that speaks (`held_heads`); ``what`` says what was asked
    for ("a token-classification head"). A folder where none speaks is left to the weights' own checks."""
    held = held_heads(folder, tensors)
    if held is None or held[0] & set(accepted):
        return
    heads, signal = held
    raise CheckpointError("{model}: " + literal(f"holds an {' or '.join(sorted(heads))} ({signal}), not {what} "
                                                f"({' or '.join(accepted)}); give a folder that has one"),
                          model=Path(folder))


def pieces_fingerprint(tok: Any) -> str:
    """sha256 of a tokenizer's pieces in id order: two tokenizers with the same fingerprint give every id the same
    piece, whatever files (spiece.model, vocab.txt, tokenizer.json) they were read from. Each piece is written with
    its length, so no two lists of pieces hash alike."""
    h = hashlib.sha256()
    for piece in tok.convert_ids_to_tokens(list(range(tok.vocab_size))):
        data = str(piece).encode("utf-8", "surrogatepass")
        h.update(len(data).to_bytes(8, "little") + data)
    return h.hexdigest()


def check_tokenizer(tok: Any, vocab_size: int, model: str | Path, tokenizer: str | Path | None = None,
                    own: Any = None, allow_tokenizer_mismatch: bool = False) -> None:
    """Refuse (`TokenizerError`) a tokenizer ``tok`` whose vocabulary is not of the model's ``vocab_size`` pieces,
    or whose special tokens' ids lie outside it. ``model``: the model folder; ``tokenizer``: where ``tok`` came from
    when given apart from the model (None: the folder's own, so the folder's files disagree). ``own``: the folder's
    own tokenizer when ``tok`` was given apart from it: ``tok`` must hold the same pieces in the same order
    (`pieces_fingerprint`), else it is refused, or with ``allow_tokenizer_mismatch`` warned about."""
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
    if tokenizer is None or own is None or getattr(own, "vocab_size", None) != size:
        return  # an own tokenizer of another size is refused where the folder's own is checked
    if pieces_fingerprint(tok) == pieces_fingerprint(own):
        return
    pieces, theirs = tok.convert_ids_to_tokens(list(range(size))), own.convert_ids_to_tokens(list(range(size)))
    i = next(i for i, (a, b) in enumerate(zip(pieces, theirs)) if a != b)
    what = (f"has the model's size ({size} pieces) but other pieces: id {i} is {literal(repr(pieces[i]))} here and "
            f"{literal(repr(theirs[i]))} in the folder's own tokenizer")
    if allow_tokenizer_mismatch:
        warnings.warn(TokenizerError(where + what + "; used as given, as asked", **named).render(), stacklevel=2)
        return
    raise TokenizerError(where + what + "; its ids would name other pieces: give the folder's own tokenizer (leave "
                         "{tokenizer:flag} out), or pass {allow_tokenizer_mismatch:flag} to use it anyway",
                         allow_tokenizer_mismatch=True,
                         **named)
