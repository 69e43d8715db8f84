"""The model card of each kind of folder litebert writes (`litebert.card` holds the format and the shared parts):

    pretraining_card(run, info)               a pretraining run: its model/ with train_config.json, metrics.jsonl
                                              and the token stores' manifests
    finetuned_card(folder, info)              a fine-tuned folder: its finetune.json
    converted_card(folder, info, source, conversion)   a converted TensorFlow checkpoint

Each reads only what the run wrote; a token store that is gone since (moved, deleted) is named without its sizes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from litebert import folders
from litebert.card import (
    HUB_METRICS,
    HUB_TASKS,
    PAPER,
    PLACEHOLDER,
    CardInfo,
    Model,
    assemble,
    hub_id_of,
    license_section,
    metric_entries,
    model_index,
    name_of,
    settings_table,
    tags,
    usage,
)
from litebert.errors import CheckpointError, LitebertError
from litebert.files import read_json
from litebert.tasks.meta import read_meta

_OBJECTIVES = {"sop": "masked language modelling (MLM) + sentence-order prediction (SOP)",
               "nsp": "masked language modelling (MLM) + next-sentence prediction (NSP)",
               "none": "masked language modelling (MLM) only"}
_PRETRAINING_METRICS = [("mlm_loss", "MLM loss", "loss"), ("mlm_accuracy", "MLM accuracy", "accuracy"),
                        ("sop_loss", "SOP loss", "loss"), ("sop_accuracy", "SOP accuracy", "accuracy"),
                        ("nsp_loss", "NSP loss", "loss"), ("nsp_accuracy", "NSP accuracy", "accuracy")]


def _front(model: Model, info: CardInfo, base: Optional[str], task: Optional[str], index: list) -> dict:
    return {"library_name": "transformers" if model.hf_loadable else "litebert", "license": info.license,
            "base_model": base, "tags": tags(task), "datasets": list(info.datasets),
            "pipeline_tag": task if task != "multiple-choice" else None, "model-index": index}


def _number(value: Any) -> str:
    """A value in a card's text: floats to 4 places, integers with thousands separators."""
    if isinstance(value, float):
        return f"{value:.4f}"
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)


def _store(path: Any) -> str:
    """A token store as a card names it: its folder's name, its size and the files it was prepared from."""
    shown = f"token store `{name_of(path)}`"
    try:
        manifest = read_json(Path(str(path)) / "manifest.json", LitebertError)
    except LitebertError:
        return shown + " (its manifest is no longer there to give its size)"
    size = ", ".join(f"{manifest[k]:,} {w}" for k, w in (("num_tokens", "tokens"), ("num_sentences", "sentences"),
                                                         ("num_documents", "documents"))
                     if isinstance(manifest.get(k), int))
    inputs = [name_of(p) for p in manifest.get("inputs") or [] if isinstance(p, str)]
    source = (", from " + ", ".join(f"`{n}`" for n in inputs[:5]) + (f" and {len(inputs) - 5} more" if len(inputs) > 5
                                                                      else "")) if inputs else ""
    return f"{shown}: {size}{source}"


def _named_paths(record: dict) -> dict:
    """A run's record with every local path reduced to its last part (a published card shows no local folders)."""
    out = {k: v for k, v in record.items() if k != "model"}
    for key in ("data", "eval_data"):
        if out.get(key):
            out[key] = name_of(out[key])
    if isinstance(out.get("init_from"), dict):
        out["init_from"] = {**out["init_from"], "path": name_of(out["init_from"].get("path", ""))}
    return out


def pretraining_card(run: Path, info: CardInfo, model_id: Optional[str] = None) -> str:
    """The card of the pretraining run ``run`` (written into ``run/model``)."""
    from litebert.engine.metrics_log import read_metrics

    record = read_json(run / folders.TRAIN_CONFIG, CheckpointError)
    model = Model.read(run / "model")
    trains, evals = read_metrics(run, "train"), read_metrics(run, "eval")
    last = trains[-1] if trains else {}
    step = last.get("step", 0)
    final = evals[-1] if evals and evals[-1].get("step") == step else None  # the evaluation at the end
    init = record.get("init_from") if isinstance(record.get("init_from"), dict) else None
    base = hub_id_of(init["path"]) if init else None
    title = model_id.split("/")[-1] if model_id else name_of(run)
    held_out = name_of(record.get("eval_data") or "")
    dataset = {"name": f"{held_out} (held-out)", "type": info.datasets[0] if info.datasets else held_out}
    objective = _OBJECTIVES.get(record.get("objective"), str(record.get("objective")))
    started = (f", continued from `{base}`" if base else f", continued from the model folder `{name_of(init['path'])}`"
               ) if init else " from random weights"
    optimizer = " with the LAMB optimizer" if record.get("optimizer") == "lamb" else ""
    summary = f"An {PAPER} model pretrained with litebert{started}: {objective}, {step:,} steps{optimizer}."
    index = model_index(title, "fill-mask", dataset, metric_entries(final or {}, _PRETRAINING_METRICS))
    return assemble(_front(model, info, base, "fill-mask", index), title, summary,
                    [["## Model", ""] + model.table() + [""], _pretraining_data(record, last, step),
                     _pretraining_settings(record), _pretraining_results(final, last, step, held_out),
                     usage(model, model_id or PLACEHOLDER, "fill-mask", False), license_section(info)])


def _pretraining_data(record: dict, last: dict, step: int) -> list[str]:
    data = ["## Training data", "", f"- training: {_store(record.get('data', ''))}"]
    if record.get("eval_data"):
        data.append(f"- held-out evaluation: {_store(record['eval_data'])}")
    if isinstance(last.get("tokens"), int):
        data.append(f"- tokens seen in training: {last['tokens']:,} (over {step:,} steps)")
    return data + [""]


def _pretraining_settings(record: dict) -> list[str]:
    from litebert.engine.args import Machinery

    record = {**record, **{new: record[old] for old, new in Machinery.ALIASES.items()
                           if old in record}}  # earlier names
    runtime = record.get("runtime") if isinstance(record.get("runtime"), dict) else {}
    table = settings_table([
        ("steps", record.get("max_steps")), ("batch (sequences per step)", record.get("batch_size")),
        ("micro-batch", record.get("micro_batch")), ("processes", record.get("world_size")),
        ("sequence length", record.get("seq_len")), ("optimizer", record.get("optimizer")),
        ("learning rate", record.get("lr")), ("warmup steps", record.get("warmup_steps")),
        ("decay power", record.get("poly_power")), ("weight decay", record.get("weight_decay")),
        ("gradient clipping", record.get("max_grad_norm")), ("objective", record.get("objective")),
        ("masked fraction", record.get("masked_lm_prob")), ("predictions per sequence", record.get("max_predictions")),
        ("longest masked n-gram", record.get("max_ngram")), ("precision", runtime.get("precision")),
        ("device", runtime.get("device")), ("attention", runtime.get("attention")), ("seed", record.get("seed"))])
    return (["## Training settings", ""] + table
            + ["", "<details><summary>train_config.json (the whole record; paths shown by name)</summary>", "",
               "```json", json.dumps(_named_paths(record), indent=2), "```", "", "</details>", ""])


def _pretraining_results(final: Optional[dict], last: dict, step: int, held_out: str) -> list[str]:
    results = ["## Results", ""]
    if final is not None:
        results += [f"Held-out evaluation at step {step:,} ({final.get('examples', '?')} examples of `{held_out}`):",
                    "", "| metric | value |", "|---|---|"]
        results += [f"| {name} | {_number(final[key])} |" for key, name, _ in _PRETRAINING_METRICS if key in final]
        results += [""]
    else:
        results += ["No held-out evaluation at the last step (the run was given no `--eval-data`).", ""]
    if isinstance(last.get("loss"), float):
        parts = ", ".join(f"{name} {last[key]:.4f}" for key, name, _ in _PRETRAINING_METRICS
                          if key.endswith("_loss") and isinstance(last.get(key), float))
        results += [f"Training loss at step {step:,}: {last['loss']:.4f}" + (f" ({parts})" if parts else "") + ".",
                    ""]
    return results


def finetuned_card(folder: Path, info: CardInfo, model_id: Optional[str] = None) -> str:
    """The card of the fine-tuned folder ``folder``, from its finetune.json."""
    meta = read_meta(folder)
    model = Model.read(folder)
    train = meta.get("train") if isinstance(meta.get("train"), dict) else {}
    task = HUB_TASKS.get(model.architecture)
    base = hub_id_of(train.get("base_model"))
    title = model_id.split("/")[-1] if model_id else name_of(folder)
    best = meta.get("dev_metrics") if isinstance(meta.get("dev_metrics"), dict) else {}
    shown = {k: v for k, v in best.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    dev = train.get("dev")
    place = info.datasets[0] if info.datasets else name_of(Path(str(dev)).parent) if dev else ""
    rows = [(k, f"dev {k}", HUB_METRICS[k]) for k in shown if k in HUB_METRICS]
    index = model_index(title, task or "text-classification", {"name": place, "type": place, "split": "validation"},
                        metric_entries(shown, rows) if dev else [])
    return assemble(_front(model, info, base, task, index), title, _finetune_summary(meta, train, shown, base),
                    [["## Model", ""] + model.table() + [""], _finetune_data(meta, train),
                     _finetune_settings(meta, train), _finetune_results(meta, shown),
                     usage(model, model_id or PLACEHOLDER, task or "", True), license_section(info)])


def _finetune_summary(meta: dict, train: dict, shown: dict, base: Optional[str]) -> str:
    origin = f"`{base}`" if base else f"the model folder `{name_of(train.get('base_model', '?'))}`"
    labels = meta.get("labels") if isinstance(meta.get("labels"), list) else None
    summary = (f"An {PAPER} model fine-tuned with litebert from {origin} for the task `{meta.get('task')}` "
               f"({meta.get('kind')}" + (f"; labels: {', '.join(f'`{x}`' for x in labels)}" if labels else "") + ").")
    metric = meta.get("metric")
    if metric in shown:
        summary += (f" Best dev {metric}: {shown[metric]:.4f}, at step {_number(meta.get('best_step'))} of "
                    f"{_number(train.get('train_steps', '?'))}.")
    return summary


def _finetune_data(meta: dict, train: dict) -> list[str]:
    def count(key: str) -> str:
        return f" ({train[key]:,} examples)" if isinstance(train.get(key), int) else ""

    data = ["## Training data", "", f"- training: `{name_of(train.get('data', '?'))}`{count('train_examples')}"]
    if train.get("dev"):
        data.append(f"- dev (evaluation, and the choice of the checkpoint kept): `{name_of(train['dev'])}`"
                    f"{count('dev_examples')}")
    if isinstance(meta.get("columns"), dict) and meta["columns"]:
        data.append("- columns: " + ", ".join(f"{k} = `{v}`" for k, v in meta["columns"].items()))
    return data + [""]


def _finetune_settings(meta: dict, train: dict) -> list[str]:
    preset = meta.get("preset") if isinstance(meta.get("preset"), dict) else {}
    return ["## Training settings", ""] + settings_table([
        ("task preset", f"`{meta.get('task')}`: {preset.get('source', '')}"), ("steps", train.get("train_steps")),
        ("batch (examples)", train.get("batch_size")), ("micro-batch", train.get("micro_batch")),
        ("learning rate", train.get("lr")), ("warmup steps", train.get("warmup_steps")),
        ("weight decay", train.get("weight_decay")), ("gradient clipping", train.get("max_grad_norm")),
        ("sequence length", preset.get("max_seq_length")), ("dev evaluation every", train.get("eval_every")),
        ("patience", train.get("patience")), ("precision", train.get("precision")),
        ("seed", train.get("seed"))]) + [""]


def _finetune_results(meta: dict, shown: dict) -> list[str]:
    results = ["## Results", ""]
    if shown:
        results += [f"On the dev set, at step {_number(meta.get('best_step'))} (the checkpoint this folder holds, "
                    f"chosen by dev {meta.get('metric')}):", "", "| metric | value |", "|---|---|"]
        results += [f"| {k} | {_number(v)} |" for k, v in shown.items()] + [""]
    else:
        results += ["No dev set: the folder holds the model of the last step.", ""]
    if isinstance(meta.get("null_threshold"), (int, float)):
        results += [f"No-answer threshold chosen on dev: {meta['null_threshold']:.4f} (litebert's `predict` and "
                    "`evaluate` apply it; its answerability head, `answerability.safetensors`, is read by litebert "
                    "only).", ""]
    return results


def converted_card(folder: Path, info: CardInfo, source: str, conversion: Any,
                   model_id: Optional[str] = None) -> str:
    """The card of a converted TensorFlow checkpoint (``source``: its name; ``conversion``: `Conversion`)."""
    model = Model.read(folder)
    task = HUB_TASKS.get(model.architecture)
    title = model_id.split("/")[-1] if model_id else name_of(folder)
    tokenizer = next((n for n in ("spiece.model", "vocab.txt") if (folder / n).is_file()), None)
    summary = (f"An {PAPER} model converted by litebert from the TensorFlow checkpoint `{name_of(source)}` (the "
               f"format of google-research/albert and its TF-Hub modules), with no training of its own.")
    account = ["## Conversion", "", "```", conversion.summary(), "```", "",
               (f"Tokenizer: `{tokenizer}`." if tokenizer else "No tokenizer was given (`--spm`): the folder holds "
                "the model only."), ""]
    return assemble(_front(model, info, None, task, []), title, summary,
                    [["## Model", ""] + model.table() + [""], account,
                     usage(model, model_id or PLACEHOLDER, task or "", task not in ("fill-mask", "feature-extraction")),
                     license_section(info)])
