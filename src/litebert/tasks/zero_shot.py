"""Zero-shot classification with a model trained on natural language inference, as transformers'
`ZeroShotClassificationPipeline` (4.57) does it, for ``pipeline("zero-shot-classification")``.

Each candidate label becomes a hypothesis (``hypothesis_template``, "This example is {}."), paired with the text as
its premise; the model's entailment logit for the pair says how well the label fits. With ``multi_label`` False the
entailment logits of a text's labels are turned into one distribution (softmax over the labels); with True (or a
single label) each label is scored alone, by a softmax of its entailment logit against its contradiction logit.

The entailment class is the first label of the folder's ``id2label`` that starts with "entail" (any case), as HF
finds it. The contradiction class is the label that starts with "contradict"; without one, HF's choice: class 0, or
the last class when entailment is class 0. HF always makes that choice, which for the MNLI orders
(entailment/neutral/contradiction and contradiction/neutral/entailment) is the contradiction label too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from litebert.errors import CheckpointError, ConfigError, literal

TEMPLATE = "This example is {}."


def nli_classes(labels: Sequence[str], folder: Path) -> tuple[int, int]:
    """(entailment class, contradiction class) of a folder's labels; a folder without an entailment label is not
    an NLI model: a `CheckpointError`."""
    entail = next((i for i, l in enumerate(labels) if l.lower().startswith("entail")), None)
    if entail is None:
        raise CheckpointError("{model}: " + f"its labels ({literal(', '.join(labels))}) name no entailment class; "
                              "zero-shot classification needs a model fine-tuned on NLI (MNLI's labels entailment, "
                              "neutral, contradiction)", model=folder)
    contra = next((i for i, l in enumerate(labels) if l.lower().startswith("contradict")), None)
    return entail, contra if contra is not None else (-1 if entail == 0 else 0) % len(labels)


def candidates(candidate_labels) -> list[str]:
    """The labels asked for: a list, or a string of comma-separated ones (HF's), at least one."""
    labels = candidate_labels
    if isinstance(labels, str):
        labels = [c.strip() for c in labels.split(",") if c.strip()]
    if not labels:
        raise ConfigError("{candidate_labels}: give the labels to choose from, a list or a comma-separated string",
                          candidate_labels=candidate_labels)
    return list(labels)


def hypotheses(labels: list[str], template: str) -> list[str]:
    """Each label put into ``template``, which must have a place for it ("{}")."""
    try:
        out = [template.format(label) for label in labels]
    except (IndexError, KeyError, ValueError):
        out = [template]
    if out[0] == template:
        raise ConfigError("{hypothesis_template}: has no {{}} for the label; write it as 'This example is {{}}.'",
                          hypothesis_template=template)
    return out


def ranked(text: str, labels: list[str], logits: np.ndarray, classes: tuple[int, int], multi_label: bool) -> dict:
    """HF's answer for one text from its pairs' logits [labels, classes]: ``{sequence, labels, scores}``, the labels
    best first."""
    from litebert.tasks.scores import softmax

    entail, contra = classes
    if multi_label or len(labels) == 1:
        scores = softmax(logits[:, [contra, entail]], axis=-1)[:, 1]
    else:
        scores = softmax(logits[:, entail])
    order = list(reversed(scores.argsort()))
    return {"sequence": text, "labels": [labels[i] for i in order], "scores": scores[order].tolist()}
