"""`finetune`: fine-tune a pretrained model on a task, as one typed function. ``litebert finetune`` maps its flags
onto it; experiments, the demo and notebooks call it directly.

    from litebert import FinetuneConfig, finetune
    result = finetune("sentiment", "runs/tiny/model", "data/finetune/sentiment", "runs/sentiment",
                      config=FinetuneConfig(max_steps=100))

The hyper-parameters default to the task preset's (`litebert.tasks.presets`); `FinetuneConfig` overrides any of
them. Everything is checked before the first write (the output folder's plan, the data, the tokenizer against the
model's vocabulary, the checkpoint a resume continues from), so a refused call changes nothing.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

from litebert.arguments import checked
from litebert.card import CardInfo
from litebert.checks import AT_LEAST_0, AT_LEAST_1
from litebert.engine.callbacks import Callback
from litebert.finetuning.config import FinetuneConfig
from litebert.finetuning.job import FinetuneResult, Job, Log, notice, run_one


@checked(stop_after=AT_LEAST_1, lr_grid_extend=AT_LEAST_0, trials=AT_LEAST_1)
def finetune(task: str, model: str | os.PathLike, data: str | os.PathLike, out: str | os.PathLike, *,
             dev: str | os.PathLike | None = None, tokenizer: str | os.PathLike | None = None,
             columns: Mapping[str, str] | None = None, labels: Sequence[str] | None = None,
             config: Optional[FinetuneConfig] = None, resume: bool = False, overwrite: bool = False,
             keep_checkpoints: bool = False, device: Optional[str] = None, attention: str = "auto",
             encoding_errors: str = "strict", progress: bool = True, log: Log = print,
             stop_after: Optional[int] = None, card: Optional[CardInfo] = None, push_to_hub: Optional[str] = None,
             hub_private: bool = True, callbacks: Sequence[Callback] = (),
             compute_metrics: Optional[Callable[..., dict]] = None,
             lr_grid: Optional[Sequence[float]] = None, lr_grid_extend: int = 3,
             search: str | Mapping[str, Any] | None = None, trials: Optional[int] = None,
             search_pruner: Any = "median", dist: Any = None,
             allow_tokenizer_mismatch: bool = False,
             compute_loss: Optional[Callable[..., Any]] = None) -> FinetuneResult:
    """Fine-tune the pretrained ``model`` (a litebert or HF ALBERT folder) on ``task`` (a GLUE task, squad1, squad2,
    race, mc, conll, classify, regress, sentiment) and save the best dev checkpoint, its tokenizer and finetune.json
    to ``out``.

    ``data``: a folder (train/dev files by their usual names) or the training file; ``dev``: the dev file when not
    in that folder. ``tokenizer``: default the model folder's; another must hold the folder's pieces
    (`litebert.pairing.check_tokenizer`), unless ``allow_tokenizer_mismatch`` (a warning). ``columns``: your own
    data's columns ({"text_a": COL, "text_b": COL, "label": COL}); ``labels``: the label set (default: the task's,
    or those seen in training). ``config``: hyper-parameters over the preset's. ``resume``: continue the stopped run
    in ``out``; ``overwrite``: replace the fine-tuned model there. ``keep_checkpoints``: keep out/checkpoints at the
    end. ``log``: where progress lines go (None: nowhere). ``stop_after``: leave, resumable, after this many steps (of
    each run of a grid). ``card``: what the model card (README.md) says that the run cannot know (license, data set
    ids). ``push_to_hub``: a Hub repository (ORG/NAME) to upload ``out`` to when the run has finished
    (`litebert.push`), created private unless ``hub_private`` is False.
    ``callbacks``: `litebert.engine.callbacks.Callback` objects the loop calls after each step, evaluation and save
    (on rank 0); a stop one asks for ends the run as early stopping does. ``compute_metrics``:
    more dev metrics, a dict of names to numbers merged into the task's; a function of one argument gets an
    `EvalPrediction` as ``transformers.Trainer`` gives it (``predictions``: the dev logits as NumPy arrays,
    ``label_ids``), one of two ``(predictions, labels)``, the dev examples' predictions and gold labels as
    ``evaluate --output`` writes them (`litebert.tasks.eval_prediction`). ``lr_grid``: peak learning rates, one run
    each into ``out/lr-RATE/``; the best by the dev metric is copied into ``out`` and every rate's score listed in
    ``out/grid.json`` (`litebert.finetuning.grid`). ``lr_grid_extend``: rates the grid may add beyond an
    edge its best lands on, so that the choice is bracketed (0: the rates given only).
    ``search``: a space of settings, ``"lr=1e-5:1e-3:log,batch_size=16|32,seed=0|1|2"`` (or a dict), searched with
    Optuna over ``trials`` runs in ``out/trial-K/``, pruned by ``search_pruner`` ("median", "none" or an Optuna
    pruner); the best by the dev metric is copied into ``out`` and every trial listed in ``out/search.json``
    (`litebert.finetuning.search`; the ``search`` extra).
    ``dist``: the process group (default: the one ``torchrun`` describes, else this process alone).
    ``compute_loss``: the training loss in place of the task's, as ``transformers.Trainer``'s ``compute_loss_func``:
    ``compute_loss(outputs, labels)`` gets the model's outputs (``logits``...) and the batch's labels and returns a
    scalar tensor, the micro-batch's mean loss (`litebert.finetuning.loss`); not for SQuAD tasks, nor beside
    ``config``'s ``label_smoothing_factor``/``class_weights``."""
    from litebert.engine import distributed as D
    from litebert.push import Publishing
    from litebert.tasks.presets import get_preset

    preset, cfg = get_preset(task), config or FinetuneConfig()
    publish = Publishing(card or CardInfo(), push_to_hub, hub_private)
    job = Job(preset, cfg, {"model": model, "data": data, "dev": dev, "tokenizer": tokenizer}, dict(columns or {}),
              labels, keep_checkpoints, attention, encoding_errors, progress, log, stop_after, tuple(callbacks),
              compute_metrics, allow_tokenizer_mismatch, compute_loss)
    job.check_metric()  # known from the flags alone: before the output folder is planned or anything read
    if search is not None:
        from litebert.finetuning.search import finetune_search

        if lr_grid is not None:
            from litebert.errors import ConfigError

            raise ConfigError("{lr_grid} and {search} both choose settings on dev; put the rates into the search "
                              "(lr=A|B|C)", lr_grid=",".join(f"{x:g}" for x in lr_grid), search=search)
        return finetune_search(job, out, search, trials, pruner=search_pruner, resume=resume, overwrite=overwrite,
                               publish=publish, device=device, dist=dist)
    if trials is not None:
        from litebert.errors import ConfigError

        raise ConfigError("{trials} is the number of a search's trials: give {search:flag} too", trials=trials,
                          search=None)
    if lr_grid is not None:
        from litebert.finetuning.grid import finetune_grid

        return finetune_grid(job, out, lr_grid, resume=resume, overwrite=overwrite, publish=publish, device=device,
                             extend=lr_grid_extend, dist=dist)
    publish.check()  # the repository id, huggingface_hub and a token: before anything is written
    opening = job.open(out, resume=resume, overwrite=overwrite)
    if opening.finished:
        notice(log, f"{out}: this fine-tuning run is finished; nothing to do")
        publish.not_pushed(f"the run was finished already; upload it with `litebert push {out} {push_to_hub}`")
        return FinetuneResult(out=Path(out), task=preset.name, action="finished", steps=0, complete=True)
    dist = dist or D.from_environment(device=device)
    try:
        result = run_one(job, opening, publish, dist)
    finally:
        D.shutdown(dist)
    if dist.is_main:  # once the process group is gone: no peer waits for the upload
        if result.interrupted:
            publish.not_pushed(f"the run stopped before its end; resume it with the same upload, or upload it with "
                               f"`litebert push {out} {push_to_hub}` when done")
        else:
            result.hub_url = publish.push(out)
    return result
