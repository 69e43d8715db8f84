"""ONNX export of the encoder and every task head, verified against PyTorch with onnxruntime.

``litebert export onnx --model DIR --out FILE [--head auto|encoder|...] [--opset N] [--exporter torchscript|dynamo]``

The graph takes ``input_ids``, ``attention_mask`` and ``token_type_ids`` (int64, [batch, sequence], or
[batch, choices, sequence] for multiple choice), all with dynamic axes, and returns the head's outputs under the
names of its PyTorch output dataclass (``last_hidden_state``/``pooler_output``, ``logits``,
``start_logits``/``end_logits``, ``prediction_logits``/``sop_logits``).

Exporter: the TorchScript-based one (``dynamo=False``) by default. On ALBERT both exporters give graphs that match
PyTorch to ~1e-6 and run at about the same speed in onnxruntime, but the TorchScript one needs no extra package and
exports several times faster (docs/export.md). The dynamo exporter (``--exporter dynamo``, needs ``onnxscript``) is
kept as the way forward: torch deprecates the TorchScript exporter. `litebert.model` skips its data-dependent input
checks and its no-padding shortcut while exporting (``_tracing()``), so the mask path is always in the graph and no
input value is baked in as a constant.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from pathlib import Path
from typing import Optional

import torch
from torch import nn

from litebert import heads, hub
from litebert.checks import POSITIVE, Range
from litebert.cli import ranged
from litebert.errors import CheckpointError, CheckpointNotFoundError, ConfigError, LitebertError, literal
from litebert.extras import install_hint
from litebert.files import atomic_write, read_json
from litebert.folders import OutputError, check_apart
from litebert.io.hf_folder import CONFIG_NAME, load_config, load_hf_state_dict, load_weights


class ExportError(LitebertError, RuntimeError):
    """Export or its verification failed, or a package it needs is missing."""


# --head name -> HF architecture name (the key of `litebert.heads.HEADS`): the one vocabulary of `heads.HEAD_NAMES`.
HEAD_NAMES = {name: cls.HF_ARCHITECTURE for name, cls in heads.HEAD_NAMES.items()}
# Outputs of each head: (name, names of its dynamic leading axes). The name is the field of the head's output
# dataclass; trailing axes (hidden size, labels, vocabulary) are fixed by the config.
OUTPUTS = {
    "AlbertModel": [("last_hidden_state", ("batch", "sequence")), ("pooler_output", ("batch",))],
    "AlbertForPreTraining": [("prediction_logits", ("batch", "sequence")), ("sop_logits", ("batch",))],
    "AlbertForMaskedLM": [("logits", ("batch", "sequence"))],
    "AlbertForSequenceClassification": [("logits", ("batch",))],
    "AlbertForTokenClassification": [("logits", ("batch", "sequence"))],
    "AlbertForQuestionAnswering": [("start_logits", ("batch", "sequence")), ("end_logits", ("batch", "sequence"))],
    "AlbertForMultipleChoice": [("logits", ("batch", "choices"))],
}
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
DEFAULT_OPSET = {"torchscript": 17, "dynamo": 18}  # 17: first opset with a LayerNormalization op
EXAMPLE = (2, 3, 11)  # batch, choices, sequence of the tracing example; verification uses other sizes
VERIFY = [(3, 4, 29), (1, 2, 6)]  # (batch, choices, sequence): padded, then a single sequence


# ------------------------------------------------------------------------------------------------ loading
def load_for_export(model_dir: str | os.PathLike, head: str = "auto") -> nn.Module:
    """The model in ``model_dir`` (a folder, or a Hugging Face Hub id: `litebert.hub.local`) as the head to export, in
    eval mode.

    ``head="auto"`` takes the class named by config.json ``architectures``. Unlike `from_pretrained`, a head whose
    weights the folder lacks is an error: an exported graph with a randomly initialised classifier would be silently
    useless. (The bare encoder loads from any folder; its pooler is left out if the folder has none.)
    """
    path = hub.model_folder(model_dir)
    arch = _architecture(path) if head == "auto" else HEAD_NAMES.get(head)
    if arch is None:
        raise ConfigError(f"unknown head {head!r}; choose auto or one of: {', '.join(HEAD_NAMES)}")
    config = load_config(path)
    model = heads.HEADS[arch](config)
    missing, unexpected = load_hf_state_dict(model, load_weights(path))
    if arch == "AlbertModel" and set(missing) == {"albert.pooler.weight", "albert.pooler.bias"}:
        model.pooler, missing = None, []  # e.g. a masked-LM or QA folder: export last_hidden_state only
    if missing:
        shown = ", ".join(missing[:6]) + (f" (+{len(missing) - 6} more)" if len(missing) > 6 else "")
        raise CheckpointError(f"{path}: no weights for {shown}; exporting {arch} would bake random weights into the "
                              f"graph. The folder was saved as {_architecture(path, None) or 'unknown'}: export "
                              "that head ({head:flag} auto) or the encoder ({head:flag} encoder)", head=None)
    return model.eval()


def _architecture(path: Path, fallback: str | None = "AlbertModel") -> Optional[str]:
    file = path / CONFIG_NAME
    if not file.is_file():
        raise CheckpointNotFoundError(f"no {CONFIG_NAME} in {path}")
    archs = read_json(file, ConfigError).get("architectures") or []
    if not archs:
        return fallback  # a config without "architectures" (e.g. an official albert_config.json): the encoder
    if archs[0] not in heads.HEADS:
        if fallback is None:
            return archs[0]
        raise ConfigError(f"{literal(file)}: architectures = {literal(archs)} is not a head litebert can export; "
                          "pass {head:flag} " + f"({', '.join(HEAD_NAMES)})", head=None)
    return archs[0]


def output_names(model: nn.Module) -> list[tuple[str, tuple[str, ...]]]:
    outputs = OUTPUTS[type(model).HF_ARCHITECTURE]
    if isinstance(model, heads.AlbertModel) and model.pooler is None:
        outputs = outputs[:1]
    return outputs


class _Graph(nn.Module):
    """The head as a function of the three inputs returning a tuple of its outputs (what the exporters trace)."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model
        self.names = [name for name, _ in output_names(model)]
        # The TorchScript exporter restores the wrapper's train/eval mode after exporting, recursively: a wrapper
        # left in its default training mode would switch the model's dropout back on.
        self.train(model.training)

    def forward(self, input_ids, attention_mask, token_type_ids):
        out = self.model(input_ids, attention_mask, token_type_ids)
        return tuple(getattr(out, name) for name in self.names)


# ------------------------------------------------------------------------------------------------ inputs
def example_inputs(model: nn.Module, batch: int, choices: int, seq_len: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """Random int64 inputs with right padding (row i has ``seq_len - 3*i`` real tokens, at least 1) and two segments.

    Shapes [batch, seq_len], or [batch, choices, seq_len] for multiple choice.
    """
    config = model.config
    seq_len = min(seq_len, config.max_position_embeddings)
    g = torch.Generator().manual_seed(seed)
    mc = isinstance(model, heads.AlbertForMultipleChoice)
    rows = batch * choices if mc else batch
    ids = torch.randint(0, config.vocab_size, (rows, seq_len), generator=g)
    lengths = torch.tensor([max(1, seq_len - 3 * i) for i in range(rows)])
    mask = (torch.arange(seq_len)[None, :] < lengths[:, None]).long()  # [rows, L]
    types = (torch.arange(seq_len)[None, :] >= (lengths[:, None] + 1) // 2).long() * mask  # second half: segment 1
    ids = ids * mask + config.pad_token_id * (1 - mask)
    shape = (batch, choices, seq_len) if mc else (batch, seq_len)
    return {"input_ids": ids.view(shape), "attention_mask": mask.view(shape), "token_type_ids": types.view(shape)}


# ------------------------------------------------------------------------------------------------ export
def export_onnx(model: nn.Module, out: str | os.PathLike, *, opset: Optional[int] = None,
                exporter: str = "torchscript", verify: bool = True, atol: float = 1e-4) -> dict:
    """Export ``model`` (a `litebert.heads` class) to ``out``; return ``{"seconds", "bytes", "verified"}``.

    The file is written under a temporary name in the same folder and renamed into place only after the export (and
    the verification, when asked) succeeded, so ``out`` is never a half-written or unverified graph.
    """
    if exporter not in DEFAULT_OPSET:
        raise ConfigError(f"unknown exporter {exporter!r}; choose torchscript or dynamo")
    opset = opset or DEFAULT_OPSET[exporter]
    if verify:
        _onnxruntime()  # fail before the (slow) export, not after
    model = model.eval()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    names = output_names(model)
    mc = isinstance(model, heads.AlbertForMultipleChoice)
    in_axes = ("batch", "choices", "sequence") if mc else ("batch", "sequence")
    batch, choices, seq_len = EXAMPLE
    inputs = example_inputs(model, batch, choices, seq_len)
    result: dict = {}

    def export(tmp: Path) -> None:  # the file takes its name only once it is written and verified
        start = time.perf_counter()
        if exporter == "torchscript":
            dynamic_axes = {name: dict(enumerate(in_axes)) for name in INPUT_NAMES}
            dynamic_axes.update({name: dict(enumerate(axes)) for name, axes in names})
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notice
                torch.onnx.export(_Graph(model), tuple(inputs.values()), str(tmp), dynamo=False,
                                  input_names=list(INPUT_NAMES), output_names=[n for n, _ in names],
                                  dynamic_axes=dynamic_axes, opset_version=opset, do_constant_folding=True)
        else:
            _dynamo_export(model, inputs, in_axes, names, tmp, opset)
        result.update(seconds=time.perf_counter() - start, bytes=tmp.stat().st_size, opset=opset, exporter=exporter)
        if verify:
            result["verified"] = verify_onnx(model, tmp, atol=atol)

    try:
        atomic_write(out, export)
    except Exception as e:
        if not isinstance(e, LitebertError) and _missing("onnx"):
            # torch's exporters write the graph with the onnx package (the TorchScript one since torch 2.9; older ones
            # did without), and fail with an error of their own when it is absent
            raise ExportError("exporting to ONNX needs the onnx package, which is not installed: "
                              + literal(install_hint("export", "onnx"))) from None
        raise
    return result


def _missing(module: str) -> bool:
    """Whether ``module`` cannot be imported."""
    try:
        __import__(module)
    except ImportError:
        return True
    return False


def _dynamo_export(model, inputs, in_axes, names, tmp: Path, opset: int) -> None:
    try:
        import onnxscript  # noqa: F401  (torch's dynamo exporter needs it)
    except ImportError:
        raise ExportError("{exporter} needs the onnxscript package (pip install onnxscript); the default, torchscript, "
                          "does not", exporter="dynamo") from None
    dims = {"batch": torch.export.Dim("batch"), "choices": torch.export.Dim("choices"),
            "sequence": torch.export.Dim("sequence", max=model.config.max_position_embeddings)}
    shapes = {name: {i: dims[axis] for i, axis in enumerate(in_axes)} for name in INPUT_NAMES}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(_Graph(model), tuple(inputs.values()), str(tmp), dynamo=True, input_names=list(INPUT_NAMES),
                          output_names=[n for n, _ in names], dynamic_shapes=shapes, opset_version=opset,
                          optimize=True, verbose=False, external_data=False)  # one self-contained file (< 2 GB)


def verify_onnx(model: nn.Module, path: str | os.PathLike, *, atol: float = 1e-4,
                shapes=VERIFY, seed: int = 1) -> dict:
    """Run ``path`` in onnxruntime and ``model`` in PyTorch on padded inputs of other sizes than the export example.

    Returns ``{"shapes": [...], "max_abs_diff": {output: max over shapes}}``; raises ExportError above ``atol``.
    Every position is compared, padded ones included: both compute them with the same additive mask.
    """
    session = onnx_session(path)
    diffs: dict[str, float] = {}
    tried = []
    for i, (batch, choices, seq_len) in enumerate(shapes):
        inputs = example_inputs(model, batch, choices, seq_len, seed=seed + i)
        tried.append(tuple(inputs["input_ids"].shape))
        got = session.run(None, {k: v.numpy() for k, v in inputs.items()})
        with torch.no_grad():
            want = _Graph(model)(*inputs.values())
        for (name, _), a, b in zip(output_names(model), got, want):
            if tuple(a.shape) != tuple(b.shape):
                raise ExportError(f"{path}: output {name} has shape {a.shape} in onnxruntime but {tuple(b.shape)} "
                                  f"in PyTorch for inputs of shape {tried[-1]}")
            diffs[name] = max(diffs.get(name, 0.0), float(abs(torch.from_numpy(a) - b).max()))
    bad = {k: v for k, v in diffs.items() if not v <= atol}
    if bad:
        raise ExportError(f"{path}: onnxruntime differs from PyTorch by more than {atol:g}: "
                          + ", ".join(f"{k} {v:.2e}" for k, v in bad.items()) + f" (input shapes {tried})")
    return {"shapes": tried, "max_abs_diff": diffs}


def _onnxruntime():
    """onnxruntime, imported with its telemetry off: litebert writes nothing outside the files it is asked for.

    Loading onnxruntime's native module starts its telemetry (onnxruntime 1.2x on Linux), which writes a device id and
    an event database under ``~/.cache/Microsoft`` (or ``$XDG_CACHE_HOME``) and a session file in ``$TMPDIR``.
    ``ORT_DISABLE_TELEMETRY=1`` keeps it from starting, but only if set before that first import; once the module
    is loaded (imported by the caller before litebert could set it) ``disable_telemetry_events()`` is what remains,
    and it at least stops the events of the sessions we create.
    """
    os.environ["ORT_DISABLE_TELEMETRY"] = "1"  # overrides a "0": the export must not write outside --out
    try:
        import onnxruntime
    except ImportError:
        raise ExportError("onnxruntime is not installed: " + literal(install_hint("export", "onnxruntime")) + ", or "
                          "export without checking the graph ({verify})", verify=False) from None
    onnxruntime.disable_telemetry_events()
    return onnxruntime


def onnx_session(path: str | os.PathLike, *, threads: Optional[int] = None, spin: bool = False,
                 providers: Optional[list[str]] = None):
    """An onnxruntime InferenceSession for ``path`` with CPU options suited to benchmarks beside PyTorch.

    ``threads`` (default ``torch.get_num_threads()``) intra-op threads and one inter-op thread, so onnxruntime and
    PyTorch use the same cores. ``spin=False`` stops idle worker threads busy-waiting after each run: with spinning
    on (onnxruntime's default) they keep burning the cores for a while, which slows whatever is measured next in the
    same process.
    """
    ort = _onnxruntime()
    path = Path(path)
    if not path.is_file():
        raise CheckpointNotFoundError(f"ONNX file not found: {path}")
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads or torch.get_num_threads()
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
    return ort.InferenceSession(str(path), options, providers=providers or ["CPUExecutionProvider"])


# ------------------------------------------------------------------------------------------------ CLI
def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="format", required=True, metavar="FORMAT")
    p = sub.add_parser("onnx", help="export to ONNX with dynamic batch/sequence axes, verified with onnxruntime",
                       description="Export a model folder to ONNX (inputs input_ids, attention_mask, token_type_ids; "
                                   "dynamic batch, sequence and choices axes) and check it against PyTorch.")
    p.add_argument("--model", required=True, help="model folder (config.json + model.safetensors) or a Hugging Face "
                                                  "Hub id (org/name[@revision])")
    p.add_argument("--out", required=True, help="ONNX file to write (an existing one is replaced only with "
                                                "--overwrite)")
    p.add_argument("--overwrite", action="store_true", help="replace --out if it exists (an .onnx file only)")
    p.add_argument("--head", default="auto", choices=["auto", *HEAD_NAMES],
                   help="what to export; auto = the class in config.json 'architectures' (default)")
    ranged(p.add_argument("--opset", type=int, default=None, help="ONNX opset (default 17; 18 with --exporter "
                                                                   "dynamo)"), Range(9))
    p.add_argument("--exporter", default="torchscript", choices=list(DEFAULT_OPSET),
                   help="torch.onnx exporter (default torchscript: no extra package, fastest; dynamo needs onnxscript)")
    p.add_argument("--verify", action=argparse.BooleanOptionalAction, default=True,
                   help="compare onnxruntime with PyTorch on other shapes, with padding (default: on)")
    ranged(p.add_argument("--atol", type=float, default=1e-4, help="largest accepted |onnx - torch| (default 1e-4)"),
           POSITIVE)


def check_export_target(out: str | os.PathLike, model_dir: str | os.PathLike, overwrite: bool) -> None:
    """Refuse, before the export, an ``--out`` that is a folder, an existing file that is not ``.onnx`` (one of the
    model's own files, say), or an existing ``.onnx`` file without ``overwrite``."""
    out = Path(out)
    if out.is_dir():
        raise OutputError("{out} is a folder; give the ONNX file to write, e.g. " + str(out / "model.onnx"), out=out)
    if out.exists() or out.is_symlink():
        if out.suffix != ".onnx":
            raise OutputError("{out} exists and is not an .onnx file; litebert export replaces only an ONNX file it "
                              "may have written: choose another name", out=out)
        if not overwrite:
            raise OutputError("{out} exists; pass {overwrite:flag} to replace it, or choose another name", out=out,
                              overwrite=True)
    check_apart(out, {"model": model_dir})


def run(args: argparse.Namespace) -> int:
    model_dir = hub.local(args.model, "model")  # a hub id: its folder in the cache
    check_export_target(args.out, model_dir, getattr(args, "overwrite", False))
    model = load_for_export(model_dir, args.head)
    arch = type(model).HF_ARCHITECTURE
    result = export_onnx(model, args.out, opset=args.opset, exporter=args.exporter, verify=args.verify,
                         atol=args.atol)
    outputs = ", ".join(name for name, _ in output_names(model))
    print(f"exported {arch} to {args.out} ({result['bytes'] / 2**20:.1f} MiB, opset {result['opset']}, "
          f"{result['exporter']} exporter, {result['seconds']:.1f} s); outputs: {outputs}")
    if "verified" in result:
        v = result["verified"]
        shapes = " and ".join("x".join(map(str, s)) for s in v["shapes"])
        diffs = ", ".join(f"{k} {d:.1e}" for k, d in v["max_abs_diff"].items())
        print(f"verified with onnxruntime on input_ids {shapes} (padded): max |onnx - torch| = {diffs} "
              f"(<= {args.atol:g})")
    return 0
