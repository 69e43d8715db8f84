"""`pretrain`: MLM + SOP/NSP pretraining of a model on a prepared token store, as one typed function. ``litebert
pretrain`` maps its flags onto it; experiments, the demo and notebooks call it directly.

    from litebert import AlbertConfig, TrainConfig, pretrain
    result = pretrain("runs/store", "runs/tiny", model="tiny", train=TrainConfig(max_steps=100, batch_size=32))

Everything is checked before the first write (the run folder's plan, the stores, the model and its vocabulary, the
checkpoint a resume continues from), so a refused call changes nothing. The same call runs under ``torchrun``: each
process joins the group its environment describes.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence, Union

from litebert import folders
from litebert.arguments import checked
from litebert.card import CardInfo
from litebert.checks import AT_LEAST_1, POSITIVE
from litebert.config import AlbertConfig
from litebert.engine.callbacks import Callback
from litebert.errors import ConfigError
from litebert.files import write_json
from litebert.pretraining.config import TrainConfig

DEFAULT_MAX_STEPS = 1000
ModelSpec = Union[AlbertConfig, str, os.PathLike, None]


@dataclass
class PretrainResult:
    """What a `pretrain` call did. ``action``: the plan (new, overwrite, resume, restart: a resume that found no
    checkpoint, from step 0; reopen: a finished run extended; finished: nothing to do)."""

    out: Path
    model_dir: Path
    action: str
    step: int
    max_steps: int
    complete: bool  # the run reached max_steps and its model is in model_dir
    interrupted: bool = False  # stopped by SIGTERM/SIGINT: resumable with resume=True
    signal: Optional[int] = None
    time_limited: bool = False
    skipped_steps: int = 0
    tokens_seen: int = 0
    elapsed_s: float = 0.0
    final_eval: Optional[dict] = None
    parameters: int = 0
    plateau: Optional[dict] = None  # the plateau guard's finding, when it fired (`litebert.pretraining.plateau`)
    stopped_on_plateau: bool = False  # ended by on_plateau="stop": checkpoint saved, resumable
    stopped_early: bool = False  # ended by a callback's stop, as time_limit ends a run: model written, resumable
    hub_url: Optional[str] = None  # the Hub repository model/ was uploaded to (``push_to_hub``)

    def summary(self) -> dict:
        return {k: v for k, v in dataclasses.asdict(self).items()
                if k not in ("out", "model_dir", "signal") and not (k == "hub_url" and v is None)}


@checked(stop_after=AT_LEAST_1, time_limit=POSITIVE)
def pretrain(data: str | os.PathLike, out: str | os.PathLike, *, model: ModelSpec = None,
             train: Optional[TrainConfig] = None, eval_data: str | os.PathLike | None = None,
             init_from: str | os.PathLike | None = None, tokenizer: str | os.PathLike | None = None,
             resume: bool = False, overwrite: bool = False, device: Optional[str] = None, attention: str = "auto",
             verify_data: bool = True, progress: bool = True, stop_after: Optional[int] = None,
             time_limit: Optional[float] = None, card: Optional[CardInfo] = None, push_to_hub: Optional[str] = None,
             hub_private: bool = True, callbacks: Sequence[Callback] = (), dist: Any = None) -> PretrainResult:
    """Pretrain into the run folder ``out`` on the token store ``data``.

    ``model``: an `AlbertConfig`, a preset name or a config.json path (its vocabulary is the store's); with
    ``init_from`` (a model folder, or a pretraining run) the model's own config and weights (``model``, if given,
    must agree). ``train``: the hyper-parameters (`TrainConfig`); its ``max_steps`` None means 1000 for a new run
    and the run's own for a resumed one. ``eval_data``: a held-out store for MLM/SOP evaluation. ``tokenizer``: the
    tokenizer to save beside the final model (default: the store's). ``resume``: continue the run in ``out`` (a new
    run when there is none); ``overwrite``: delete the run in ``out`` and start again. ``attention``: auto, sdpa or
    varlen (`litebert.padding.resolve_attention`). ``verify_data``: check the sha256 of the stores' files.
    ``stop_after``: leave, resumable, after this many steps; ``time_limit``: seconds, then end as a finished run.
    ``card``: what the model card (model/README.md) says that the run cannot know (license, data set ids).
    ``push_to_hub``: a Hub repository (ORG/NAME) to upload model/ to when the run ends with its model
    (`litebert.push`), created private unless ``hub_private`` is False.
    ``callbacks``: `litebert.engine.callbacks.Callback` objects the loop calls after each step, evaluation and save
    (on rank 0); a stop one asks for ends the run as ``time_limit`` does (checkpoint, final evaluation, model; the
    run is not complete and ``resume`` continues it to ``max_steps``).
    ``dist``: the process group (default: the one ``torchrun`` describes, else this process alone)."""
    from litebert.engine import distributed as D
    from litebert.engine.plan import open_run
    from litebert.push import Publishing

    cfg = train or TrainConfig(max_steps=None)
    publish = Publishing(card or CardInfo(), push_to_hub, hub_private)
    publish.check()  # the repository id, huggingface_hub and a token: before anything is written
    opening = open_run(out, folders.RUN, cfg, resume=resume, overwrite=overwrite, max_steps=cfg.max_steps,
                       extendable=True, inputs={"data": data, "eval_data": eval_data, "tokenizer": tokenizer,
                                                "init_from": init_from},
                       hub_ids={"tokenizer": "tokenizer", "init_from": "model"})
    if opening.finished:
        return _publish(_finished(opening), publish)
    dist = dist or D.from_environment(device=device)
    try:
        result = _pretrain(opening, cfg, dist, data=Path(data), eval_data=eval_data, model_spec=model,
                           init_from=opening.inputs["init_from"], tokenizer=opening.inputs["tokenizer"],
                           attention=attention, verify_data=verify_data, progress=progress, stop_after=stop_after,
                           time_limit=time_limit, publish=publish, callbacks=tuple(callbacks))
    finally:
        D.shutdown(dist)
    return _publish(result, publish) if dist.is_main else result  # once the process group is gone: no peer waits


def _publish(result: PretrainResult, publish) -> PretrainResult:
    """Upload the run's model when it ended with one (not when the call found the run finished already)."""
    later = f"upload it with `litebert push {result.out} {publish.repo_id}`"
    if result.action == "finished":
        publish.not_pushed(f"the run was finished already; {later}")
    elif result.interrupted:
        publish.not_pushed(f"the run stopped before its end; resume it with the same upload, or {later} when done")
    else:
        result.hub_url = publish.push(result.model_dir)
    return result


def _finished(opening) -> PretrainResult:
    out, step = opening.folder.out, opening.done_step
    print(f"{out}: the run is finished (step {step}); nothing to do. Its model is in {out / 'model'}", file=sys.stderr)
    return PretrainResult(out=out, model_dir=out / "model", action="finished", step=step, max_steps=step, complete=True)


def _pretrain(opening, cfg: TrainConfig, dist, *, data: Path, eval_data, model_spec: ModelSpec, init_from, tokenizer,
              attention: str, verify_data: bool, progress: bool, stop_after, time_limit, publish,
              callbacks: tuple) -> PretrainResult:
    """`pretrain` once the folder is planned and the process group joined: every other check, cheapest first (the
    model's shape and the machinery, from config files alone; then the stores and the weights, hashed), then the
    run."""
    import torch

    from litebert.engine import distributed as D
    from litebert.engine.plan import machine, plan_run
    from litebert.heads import AlbertForPreTraining
    from litebert.params import available_memory, check_memory
    from litebert.pretraining.identity import run_identity
    from litebert.pretraining.init_from import check_vocabulary, load_init_weights, read_init_config, read_init_model
    from litebert.pretraining.loop import train as train_loop

    shape, config_file = model_config(model_spec, read_init_config(init_from) if init_from is not None else None,
                                      None, cfg.seq_len)
    machinery = machine(cfg, dist, attention, shape)
    train_data, eval_set = _datasets(data, eval_data, cfg, verify_data)
    init = read_init_model(init_from) if init_from is not None else None
    init_tokenizer = check_vocabulary(init, train_data.store) if init is not None else None
    config = dataclasses.replace(shape, vocab_size=train_data.facts.vocab_size)  # the store's tokenizer decides it
    saved_tokenizer = (_tokenizer(tokenizer, train_data.store) if init is None or tokenizer is not None
                       else init_tokenizer)
    smallest = 1 if machinery.split.micro_batch == "auto" else machinery.split.micro_batch  # auto goes down to 1
    # before it is allocated
    check_memory(config, smallest, cfg.seq_len, available_memory(dist.device), source=config_file)
    torch.manual_seed(cfg.seed)  # the same initial weights on every rank
    model = AlbertForPreTraining(config)
    note = load_init_weights(model, init) if init is not None else None
    identity = init.identity() if init is not None else None
    run = plan_run(opening, machinery, lambda steps: run_identity(model, dataclasses.replace(cfg, max_steps=steps),
                                                                  train_data, identity),
                   max_steps=cfg.max_steps, default_max_steps=DEFAULT_MAX_STEPS)
    for line in run.notices if dist.is_main else ():
        _say(line)
    cfg = dataclasses.replace(cfg, max_steps=run.max_steps)
    record = _run_record(cfg, config, run.runtime, data, eval_data, identity)
    writer = _begin(run, cfg, record, model, train_data, note)
    try:
        result = train_loop(model, train_data, eval_set, cfg, run.folder.out, plan=run, run_config=record,
                            progress=progress, stop_after=stop_after, time_limit=time_limit, callbacks=callbacks)
        done = PretrainResult(
            out=run.folder.out, model_dir=run.folder.out / "model", action=run.action, step=result.step,
            max_steps=cfg.max_steps, complete=not result.interrupted and result.step >= cfg.max_steps,
            interrupted=result.interrupted, signal=result.signal, time_limited=result.time_limited,
            skipped_steps=result.skipped_steps, tokens_seen=result.tokens_seen, elapsed_s=result.elapsed_s,
            final_eval=result.final_eval, parameters=model.num_parameters(), plateau=result.plateau,
            stopped_on_plateau=result.stopped_on_plateau, stopped_early=result.stopped_early)
        if writer is not None:
            _end(writer, run, done, saved_tokenizer, data, publish)
        # Every rank waits here for rank 0's final writes, so no process tears the group down (or exits) while
        # another still talks to it: gloo aborts a peer whose connection closes mid-operation.
        D.barrier(dist)
        return done
    finally:
        if writer is not None:
            writer.close()


def _datasets(data: Path, eval_data, cfg: TrainConfig, verify: bool):
    """The training and held-out `PretrainingDataset` (held-out None when not given), checked to share a tokenizer."""
    from litebert.data.pretraining import PretrainingDataset

    # "none" still reads sentence pairs (SOP's): only the sentence loss is left out
    kw = dict(max_seq_length=cfg.seq_len, objective="sop" if cfg.objective == "none" else cfg.objective,
              seed=cfg.seed, masked_lm_prob=cfg.masked_lm_prob, max_predictions_per_seq=cfg.max_predictions,
              max_ngram=cfg.max_ngram, short_seq_prob=cfg.short_seq_prob, verify=verify)
    train_data = PretrainingDataset(data, **kw)
    held = PretrainingDataset(eval_data, **kw) if eval_data is not None else None
    if held is not None and held.facts.fingerprint != train_data.facts.fingerprint:
        raise ConfigError("{eval_data} was prepared with another tokenizer than {data}", eval_data=eval_data,
                          data=data)
    return train_data, held


def model_config(spec: ModelSpec, init, vocab_size: Optional[int], seq_len: int) -> tuple[AlbertConfig, str | None]:
    """The config to train and the file it was read from (None for a preset or a config given in Python): ``spec``
    (a config, a preset name or a config.json), or with ``init`` (`InitConfig` or `InitModel`) the model's own
    (``spec`` must then agree); its vocabulary is ``vocab_size`` (the store's; None: the config's own), and it must
    take ``seq_len`` positions."""
    from litebert.io.hf_folder import CONFIG_NAME
    from litebert.pretraining.init_from import check_model_agrees

    given, source = None, None
    if isinstance(spec, AlbertConfig):
        given = spec
    elif isinstance(spec, str) and not spec.endswith(".json") and os.sep not in spec:
        given = AlbertConfig.from_preset(spec)
    elif spec is not None:
        given, source = AlbertConfig.from_json(spec), os.fspath(spec)
    if init is not None:
        check_model_agrees(init, given, spec)
        config, source = init.config, os.fspath(init.folder / CONFIG_NAME)
    elif given is None:
        raise ConfigError("give the model: {model:flag} (a preset name, a config or a config.json) or "
                          "{init_from:flag} (a model folder)", model=None, init_from=None)
    else:
        config = given
    if vocab_size is not None and config.vocab_size != vocab_size:  # the store's tokenizer decides the vocabulary
        config = dataclasses.replace(config, vocab_size=vocab_size)
    config.sequence_length(seq_len, seq_len)
    return config, source


def _tokenizer(path, store):
    """The tokenizer to save beside the model: ``path`` (checked to be the store's) or the store's own (None if the
    store holds none)."""
    if path is None:
        return store.tokenizer()
    from litebert.tokenizer import load_tokenizer

    tok = load_tokenizer(path)
    store.check_tokenizer(tok)
    return tok


def _begin(run, cfg: TrainConfig, record: dict, model, train_data, note) -> Optional[folders.Writer]:
    """Rank 0 starts writing the run folder (every check has passed): its marker and train_config.json (``record``,
    `_run_record`)."""
    if not run.runtime.dist.is_main:
        return None
    marker = run.folder.marker
    model_step = marker.get("model_step", marker.get("step") if marker.get("complete") else None)
    writer = folders.begin(run.folder, step=run.start_step, max_steps=run.max_steps,  # a restart keeps max_steps
                           **({"model_step": model_step} if run.checkpoint and model_step is not None else {}))
    write_json(run.folder.out / folders.TRAIN_CONFIG, record)
    say = _say
    if note and run.action not in ("resume", "reopen"):
        say(note)
    if run.action == "reopen":
        say(f"{run.folder.out}: extending the finished run from step {run.start_step} to {cfg.max_steps} (the "
            f"learning rate follows the schedule for max_steps {cfg.max_steps})")
    say(f"pretraining: {model.num_parameters():,} parameters, {train_data.num_examples:,} examples/epoch, global "
        f"batch {cfg.batch_size} = {run.split.describe()}, {cfg.describe_lr()}, warmup {cfg.warmup_steps}; "
        f"{run.runtime.attention} attention, {run.runtime.describe()['precision']} on {run.runtime.dist.device}")
    return writer


def _run_record(cfg: TrainConfig, config: AlbertConfig, runtime, data, eval_data, identity) -> dict:
    """What train_config.json records of the run (and its trackers receive as the run's config)."""
    return {"model": config.to_dict(), **cfg.to_dict(), "data": str(data), "eval_data": str(eval_data or ""),
            "world_size": runtime.dist.world_size, "runtime": runtime.describe(),
            **({"init_from": identity} if identity is not None else {})}


def _end(writer: folders.Writer, run, done: PretrainResult, tokenizer, data, publish) -> None:
    """Rank 0 records where the run stands: interrupted (resumable) or finished with its model and its model card."""
    out = run.folder.out
    if done.interrupted:
        marker = run.folder.marker
        model_step = marker.get("model_step", marker.get("step") if marker.get("complete") else None)
        writer.mark(False, step=done.step, max_steps=run.max_steps,
                    **({"model_step": model_step} if run.checkpoint and model_step else {}))
        return
    if tokenizer is not None:
        tokenizer.save_pretrained(out / "model")
    from litebert.card import write_card
    from litebert.card_builders import pretraining_card

    write_card(out / "model", lambda: pretraining_card(out, publish.card, publish.repo_id), _say)
    writer.mark(done.complete, step=done.step, model_step=done.step)
    if tokenizer is None:
        _say(f"note: {out / 'model'} has no tokenizer: the store {data} holds none; pass a tokenizer to save one "
             f"beside the model")


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
