"""litebert: ALBERT (Lan et al., ICLR 2020) done completely, in plain PyTorch.

Every command is a typed function here: `train_tokenizer`, `prepare_store`, `pretrain`, `finetune`, `evaluate`,
`predict`, `embed`, `evaluate_pretraining`, `analyze_transitions`, `run_experiment` (with `ExperimentSettings`),
`speedup_experiment`, `plot_runs` and `push_to_hub`; ``litebert COMMAND`` maps its flags onto them. `pretrain` and
`finetune` report to `Callback` objects (`EarlyStopping` is one). The heavy
modules (torch models, tokenizer, data pipeline) are imported lazily so that ``import litebert`` and the CLI's
``--help`` stay fast.
"""

__version__ = "0.1.0"

_LAZY = {
    "AlbertConfig": "litebert.config",
    "PRESETS": "litebert.config",
    "AlbertModel": "litebert.model",
    "AlbertForPreTraining": "litebert.heads",
    "AlbertForMaskedLM": "litebert.heads",
    "AlbertForSequenceClassification": "litebert.heads",
    "AlbertForTokenClassification": "litebert.heads",
    "AlbertForQuestionAnswering": "litebert.heads",
    "AlbertForMultipleChoice": "litebert.heads",
    "AlbertTokenizer": "litebert.tokenizer",
    "WordPieceTokenizer": "litebert.tokenizer",
    "load_tokenizer": "litebert.tokenizer",
    "Packing": "litebert.padding",
    "add_lora": "litebert.io.adapters",
    "save_adapter": "litebert.io.adapters",
    "load_adapter": "litebert.io.adapters",
    # the commands, as functions, and their typed settings and results
    "train_tokenizer": "litebert.tokenizer",
    "prepare_store": "litebert.data.store",
    "TokenStore": "litebert.data.store",
    "pretrain": "litebert.pretraining.run",
    "TrainConfig": "litebert.pretraining.config",
    "PretrainResult": "litebert.pretraining.run",
    "finetune": "litebert.finetuning.run",
    "FinetuneConfig": "litebert.finetuning.config",
    "FinetuneResult": "litebert.finetuning.job",
    "evaluate": "litebert.inference.predict",
    "predict": "litebert.inference.predict",
    "embed": "litebert.inference.predict",
    "evaluate_pretraining": "litebert.experiments.intrinsic",
    "analyze_transitions": "litebert.experiments.transitions",
    "run_experiment": "litebert.experiments.runner",
    "ExperimentSettings": "litebert.experiments.runner",
    "speedup_experiment": "litebert.experiments.speedup",
    "plot_runs": "litebert.plot",
    "pipeline": "litebert.inference.pipelines",
    "push_to_hub": "litebert.push",
    "write_sample": "litebert.samples",
    "PushResult": "litebert.push",
    "CardInfo": "litebert.card",
    "Callback": "litebert.engine.callbacks",
    "EarlyStopping": "litebert.engine.callbacks",
    "EvalPrediction": "litebert.tasks.eval_prediction",
}
_RENAMED = {"ExperimentSettings": "Settings"}


def __getattr__(name):
    if name == "samples":  # litebert.samples.corpus(): the sample data that ships in the package
        import importlib

        return importlib.import_module("litebert.samples")
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), _RENAMED.get(name, name))
    raise AttributeError(f"module 'litebert' has no attribute {name!r}")


__all__ = sorted(_LAZY) + ["__version__"]
