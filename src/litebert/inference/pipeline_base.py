"""What every `litebert.pipeline` shares (`litebert.inference.pipelines` holds the tasks): the loaded model and
tokenizer, the call (a string or a list; HF's call options ``batch_size``, ``truncation`` and ``max_length``), the
batched run through `litebert.inference.loop.run_batches`, and the folder's labels."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from litebert import folders
from litebert.errors import ArgumentError, CheckpointError, ConfigError, literal


def load_head(cls, folder: Path, prefix: str, what: str, accepted: tuple[str, ...] = ()):
    """``cls`` from ``folder``, whose weights must hold the head (keys starting ``prefix``): a head left randomly
    initialised would answer noise. The head the folder holds must be ``cls``'s or one in ``accepted``
    (`litebert.pairing.check_head`: config.json's ``architectures``, else finetune.json's task, else the tensors and
    the labels): a sequence and a token classifier both hold ``classifier.*`` tensors."""
    from litebert.io.hf_folder import load_weights
    from litebert.pairing import check_head

    tensors = load_weights(folder)
    if not any(k.startswith(prefix) or k.startswith("albert." + prefix) for k in tensors):
        raise CheckpointError("{model}: " + f"no {what} in its weights (no {prefix}* tensors); give a folder that has "
                              f"one", model=folder)
    check_head(folder, (cls.HF_ARCHITECTURE,) + accepted, f"a {what}", tensors)
    return cls.from_pretrained(folder)


def input_kind(inputs) -> str:
    """What a wrong input is, in a message: its type, or a list's item of another type."""
    if isinstance(inputs, (list, tuple)):
        bad = next(t for t in inputs if not isinstance(t, str))
        return f"a {type(inputs).__name__} holding a {type(bad).__name__}"
    return type(inputs).__name__


class Pipeline:
    """A loaded model and tokenizer that answer texts as HF's pipeline of the same task does (see the module
    docstring). Call it with a string or a list of strings and the task's options."""

    def __init__(self, task, model, tokenizer, folder: Path, runtime, batch_size: int, batch_tokens, defaults: dict):
        self.task, self.model, self.tokenizer, self.folder = task, model, tokenizer, folder
        self.runtime, self.batch_size, self.batch_tokens, self.defaults = runtime, batch_size, batch_tokens, defaults
        self.max_length = model.config.max_position_embeddings

    @property
    def device(self):
        return self.runtime.device

    def __call__(self, inputs: str | Sequence[str], **options):
        """The answer to a string, or a list of answers, one per string of a list (an empty list: an empty list, as
        HF's). ``options``: those of the task's `answer` (``top_k``...), checked by their annotations."""
        options = {**self.defaults, **options}
        if not isinstance(inputs, (str, list, tuple)) or not all(isinstance(t, str) for t in inputs):
            raise ArgumentError("{inputs:flag}: " + f"{self.task} takes a string or a list of strings, got "
                                f"{literal(input_kind(inputs))}", inputs=inputs)
        with self.batching(options):
            if isinstance(inputs, str):
                return self.answer([inputs], **options)[0]
            if not inputs:
                self.answer.check(self, [], **options)
                return []
            return self.answer(list(inputs), **options)

    @contextmanager
    def batching(self, options: dict):
        """HF's call option ``batch_size`` (taken out of ``options``): the texts run together in this call."""
        size = options.pop("batch_size", None)
        if size is None:
            yield
            return
        if not isinstance(size, int) or isinstance(size, bool) or size < 1:
            raise ConfigError("{batch_size}: expected an integer >= 1 (the texts run together)", batch_size=size)
        kept, self.batch_size = self.batch_size, size
        try:
            yield
        finally:
            self.batch_size = kept

    def answer(self, texts: list[str]) -> list:
        """One answer per text: the task's own, its options as keyword arguments (decorated with `checked`)."""
        raise NotImplementedError

    def cut_length(self, truncation: Optional[bool] = None, max_length: Optional[int] = None) -> int:
        """The pieces a text is cut to under HF's call options: ``max_length`` when given (HF's tokenizer truncates
        to it unless ``truncation=False``), else the model's positions, and never more than them (HF's pipeline
        would fail on a longer text)."""
        if max_length is not None and truncation is not False:
            return min(max_length, self.max_length)
        return self.max_length

    def encode(self, texts: list[str], length: Optional[int] = None) -> list[dict]:
        """[CLS] text [SEP] of each text, cut to ``length`` pieces (default: the model's positions; special tokens
        written in it are theirs)."""
        enc = self.tokenizer(texts, truncation=True, max_length=length or self.max_length, return_offsets=True)
        return [{"input_ids": i, "token_type_ids": t, "offsets": o}
                for i, t, o in zip(enc["input_ids"], enc["token_type_ids"], enc["offsets"])]

    def run(self, features: list[dict], collate=None) -> list[Any]:
        """The model's output for each feature (`litebert.inference.loop.run_batches`: batches of similar length, the
        padding skipped, order restored); each is what `take` makes of that feature's row of the batch-major tensors
        `outputs` returns. ``collate``: the host batch of a list of features (default: their padded inputs)."""
        from litebert.inference.loop import run_batches
        from litebert.tasks.features import check_ids

        check_ids(features, self.model.config.vocab_size)
        rows = run_batches(self.model, features, self.outputs, runtime=self.runtime, batch_size=self.batch_size,
                           batch_tokens=self.batch_tokens, pad_id=self.tokenizer.pad_token_id, collate=collate)
        return [self.take(r, len(f["input_ids"])) for f, r in zip(features, rows)]

    def outputs(self, out, batch: dict) -> dict:
        """The batch-major float32 tensors of a batch's model output that `take` reads."""
        raise NotImplementedError

    def take(self, row: dict, length: int):
        """One feature's answer material from its ``row`` of `outputs` (numpy arrays), ``length`` its pieces."""
        raise NotImplementedError


def labels_of(model, folder: Path) -> list[str]:
    """Class names: config.json's id2label, else finetune.json's labels, else HF's LABEL_i."""
    from litebert.tasks.meta import read_meta

    config = model.config
    if config.id2label:
        return [config.id2label[i] for i in range(len(config.id2label))]
    meta = folder / folders.FINETUNE_META
    labels = read_meta(folder).get("labels") if meta.is_file() else None
    n = model.classifier.out_features
    return labels if isinstance(labels, list) and len(labels) == n else [f"LABEL_{i}" for i in range(n)]


class Labelled(Pipeline):
    """A pipeline whose answers name the folder's labels (`labels_of`, read once)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.labels = labels_of(self.model, self.folder)


TOKENIZER_OPTIONS = ("truncation", "max_length")  # what litebert's pipelines take of HF's tokenizer arguments


def tokenizer_options(given: Optional[Mapping[str, Any]], name: str) -> dict:
    """HF's ``tokenizer_kwargs``/``tokenize_kwargs`` (a dict passed to its tokenizer) as `Pipeline.cut_length`'s
    arguments: ``truncation`` (a bool) and ``max_length`` (an int >= 1); another key is refused naming it."""
    options = dict(given or {})
    other = [k for k in options if k not in TOKENIZER_OPTIONS]
    if other:
        raise ConfigError("{" + name + "}: " + f"{literal(repr(other[0]))} is not taken; litebert's pipelines take "
                          f"{' and '.join(TOKENIZER_OPTIONS)} there", **{name: options})
    truncation, max_length = options.get("truncation"), options.get("max_length")
    if truncation is not None and not isinstance(truncation, bool):
        raise ConfigError("{" + name + "}: " + f"truncation = {literal(repr(truncation))}; expected True or False",
                          **{name: options})
    if max_length is not None and (not isinstance(max_length, int) or isinstance(max_length, bool)
                                   or max_length < 1):
        raise ConfigError("{" + name + "}: " + f"max_length = {literal(repr(max_length))}; expected an integer >= 1",
                          **{name: options})
    return {"truncation": truncation, "max_length": max_length}
