"""The `litebert` command: a thin map from subcommand to the module that implements it.

Each module named below exposes ``configure(parser)`` (adds its arguments, or its own sub-subcommands) and
``run(args) -> int | None``; a module serving several commands exposes ``configure_command(name, parser)`` and
``run_command(name, args)`` instead. ``run`` maps the parsed flags onto a typed library function (`litebert.pretrain`,
`litebert.finetune`, ...) and prints its result; every decision is the function's. Modules are imported only when
their command runs, so ``litebert --help`` is instant.

Everything a command writes to stdout and stderr passes `litebert.terminal.terminal_text` (`safe_streams`): a path
or a user's text holding an ESC sequence or another control character is shown escaped, in progress lines, logs and
results as in errors.

Library errors (``litebert.errors.LitebertError``) are printed as one clear message, without a traceback, with exit
status 2; the arguments they name are shown as this command's flags (an option's ``dest`` is the name of the
function argument or config field it sets; a module may add names through ``flag_names(args)``).

Every command's parser (and its sub-commands') is a `Parser`: options must be spelled out (no silent prefix
abbreviations), ``--help`` shows each option's default, and a mistyped command or choice gets a "did you mean".
Options for the fields of a config dataclass come from the dataclass itself (`add_config_arguments`).
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import importlib
import os
import re
import sys
import types
import typing
import warnings
from typing import Any, Iterable, Optional, Union

from litebert.errors import LitebertError, first_line, printable
from litebert.terminal import safe_streams

# name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "params": ("litebert.params", "exact parameter counts of every preset beside the paper's figures"),
    "tokenizer": ("litebert.tokenizer.cli", "train a SentencePiece vocabulary / encode text"),
    "data": ("litebert.data.cli", "prepare a sharded pretraining store from a corpus"),
    "pretrain": ("litebert.pretraining.cli", "pretrain an ALBERT model (MLM + SOP/NSP, LAMB)"),
    "gate": ("litebert.pretraining.gate_cli", "check a pretraining recipe on the CPU (a narrow proxy): "
                                        "PLATEAU, SLOW or "
                                        "PASS"),
    "convert": ("litebert.io.convert_cli", "convert checkpoints (official TensorFlow ALBERT -> HF folder)"),
    "finetune": ("litebert.finetuning.cli",
                 "fine-tune on GLUE, SQuAD, multiple choice, token tagging or your own data"),
    "evaluate": ("litebert.inference.cli", "evaluate a fine-tuned model"),
    "predict": ("litebert.inference.cli", "predict with a fine-tuned model (JSONL in, JSONL out)"),
    "embed": ("litebert.inference.cli", "write pooled or mean embeddings to .npy"),
    "fill-mask": ("litebert.inference.cli", "fill [MASK] with a pretrained model's MLM head (top-k pieces, as HF's)"),
    "export": ("litebert.io.export", "export a model to ONNX"),
    "evaluate-pretraining": ("litebert.experiments.cli", "held-out MLM, SOP and NSP accuracy of pretrained models"),
    "analyze": ("litebert.experiments.cli", "analyses of pretrained models (transitions: the paper's Figure 2)"),
    "experiment": ("litebert.experiments.cli", "the paper's comparisons: sentence-objective, sharing, "
                                               "embedding-size, speedup"),
    "plot": ("litebert.plot", "draw runs' loss, accuracy and learning-rate curves (png, pdf, svg)"),
    "sample": ("litebert.samples", "write the small sample data that ships with litebert (corpus, sentiment) into "
                                   "a folder"),
    "push": ("litebert.push", "upload a model folder litebert wrote, with its model card, to the Hugging Face Hub"),
}


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions as written; each option's default appended to its help unless it has none worth showing."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if ("default" in text or default is None or default is False or default == argparse.SUPPRESS
                or not action.option_strings
                or isinstance(action, argparse._HelpAction)):
            return text
        return f"{text} (default: %(default)s)" if text else "default: %(default)s"


class Parser(argparse.ArgumentParser):
    """The argument parser of every litebert command and sub-command (sub-parsers inherit the class)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        m = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if m:
            choices = re.findall(r"'([^']*)'", m.group(2)) or [c.strip() for c in m.group(2).split(",")]
            close = difflib.get_close_matches(m.group(1), choices, n=1)
            if close:
                message += f"; did you mean {close[0]!r}?"
        super().error(message)


def field_docs(cls: type) -> dict[str, str]:
    """The help text of each field of a dataclass, from the ``Attributes:`` section of its docstring (``name: text``,
    continued on deeper-indented lines); a field it does not describe, from its base classes' (`engine.args.Machinery`
    describes the settings pretraining and fine-tuning share)."""
    docs: dict[str, str] = {}
    for base in reversed(cls.__mro__):
        docs.update(_own_field_docs(base))
    return docs


def _own_field_docs(cls: type) -> dict[str, str]:
    """The ``Attributes:`` section of ``cls``'s own docstring."""
    docs: dict[str, str] = {}
    lines = (cls.__dict__.get("__doc__") or "").splitlines()
    inside, current, indent = False, None, 0
    for line in lines:
        stripped = line.strip()
        if stripped == "Attributes:":
            inside, indent = True, len(line) - len(line.lstrip()) + 4
            continue
        if not inside:
            continue
        if not stripped:
            break
        depth = len(line) - len(line.lstrip())
        m = re.match(r"(\w+): (.*)", stripped)
        if depth == indent and m:
            current = m.group(1)
            docs[current] = m.group(2)
        elif current is not None and depth > indent:
            docs[current] += " " + stripped
    return docs


def _scalar(hint: Any) -> Any:
    """``Optional[X]`` -> X; the argparse type of an annotation."""
    if typing.get_origin(hint) in (Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        for number, parse in ((int, _int_or_word), (float, _float_or_word)):
            if number in args and len(args) == 2 and typing.get_origin(args[1 - args.index(number)]) is typing.Literal:
                return parse  # int | Literal["auto"]: --micro-batch 16 or --micro-batch auto (--lr: a float)
        return args[0] if len(args) == 1 else str
    return hint


def _int_or_word(text: str) -> int | str:
    """An integer where the text is one; otherwise the word, checked by the config (``auto``, or a clear error)."""
    try:
        return int(text)
    except ValueError:
        return text


def _float_or_word(text: str) -> float | str:
    """A number where the text is one; otherwise the word, checked by the config (``auto``, or a clear error)."""
    try:
        return float(text)
    except ValueError:
        return text


def add_config_arguments(parser: argparse.ArgumentParser, cls: type, *, skip: Iterable[str] = (),
                         title: Optional[str] = None) -> list[str]:
    """One option for each field of the config dataclass ``cls`` (``--batch-size`` sets ``batch_size``): typed
    from its annotation, helped by its docstring, default None ("not given": the dataclass, a recipe or a file
    decides). A bool field that defaults to True gets ``--no-NAME``. Values are checked where the dataclass is built
    (its ranges and choices), so a flag and a config file give the same one-line error. Returns the field names."""
    group = parser.add_argument_group(title) if title else parser
    hints, docs, names = typing.get_type_hints(cls), field_docs(cls), []
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        names.append(f.name)
        flag, kind = "--" + f.name.replace("_", "-"), _scalar(hints[f.name])
        text = docs.get(f.name, "").replace("%", "%%")  # argparse formats help with %
        shown = f" (default: {f.default})" if f.default is not None and kind is not bool else ""
        if kind is bool:
            if f.default is True:
                group.add_argument("--no-" + f.name.replace("_", "-"), dest=f.name, action="store_const", const=False,
                                   default=None, help=f"do not {text}" if text else None)
            else:
                group.add_argument(flag, dest=f.name, action="store_const", const=True, default=None, help=text)
        else:
            group.add_argument(flag, dest=f.name, type=kind, default=None, metavar=f.name.upper(), help=text + shown)
    for alias, name in getattr(cls, "ALIASES", {}).items():  # earlier names: accepted, not shown
        if name in names:
            group.add_argument("--" + alias.replace("_", "-"), dest=name, type=_scalar(hints[name]), default=None,
                               help=argparse.SUPPRESS)
    return names


def given(args: argparse.Namespace, names: Iterable[str]) -> dict[str, Any]:
    """The options among ``names`` that the command line gave (not None)."""
    return {n: getattr(args, n) for n in names if getattr(args, n, None) is not None}


def flags_of(parser: argparse.ArgumentParser) -> dict[str, str]:
    """{dest: the option's longest spelling} of every option of ``parser`` and its sub-commands: how errors name the
    arguments they are about."""
    out: dict[str, str] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                out.update(flags_of(sub))
        elif action.option_strings and action.dest not in ("help", argparse.SUPPRESS):
            out.setdefault(action.dest, max(action.option_strings, key=len))
        elif not action.option_strings:
            out.setdefault(action.dest, action.metavar or action.dest.upper())
    return out


def ranged(action: argparse.Action, rng) -> argparse.Action:
    """Give an option its range (`litebert.checks.Range`): `main` checks it after parsing, with the checker the
    configs use, so a value out of range is the same one-line error as a config field's."""
    action.range = rng
    return action


def add_runtime_arguments(parser: argparse.ArgumentParser, precision: bool = True) -> None:
    """``--device``, ``--precision`` and ``--attention``: where and how a command runs its model, the same flags with
    the same meaning for every command that runs one (`litebert.engine.runtime.Runtime`). ``precision`` False: the
    command takes it from its config (``pretrain``'s `TrainConfig`)."""
    from litebert.engine.device import PRECISIONS
    from litebert.padding import ATTENTION

    parser.add_argument("--device", help="cpu, cuda, cuda:N or mps (default: cuda when available, else cpu)")
    if precision:
        parser.add_argument("--precision", default="auto", choices=PRECISIONS,
                            help="fp32, or bf16/fp16 autocast (fp16 with loss scaling when training; GPU only); "
                                 "auto: fp32 on CPU, bf16 on GPUs that have it, else fp16")
    parser.add_argument("--attention", choices=ATTENTION, default="auto",
                        help="sdpa, varlen (flash attention on the real tokens: CUDA, half precision), or auto")


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    """What every command that reads data and runs a model takes: ``--encoding-errors``, ``--threads``, the runtime
    flags (`add_runtime_arguments`) and ``--no-progress``."""
    from litebert.checks import AT_LEAST_1

    parser.add_argument("--encoding-errors", default="strict", choices=("strict", "replace"),
                        help="invalid UTF-8 in the data: stop with file, line and byte offset, or substitute U+FFFD")
    ranged(parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's)"), AT_LEAST_1)
    add_runtime_arguments(parser)
    parser.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bars")


def parse_columns(spec: Optional[str]) -> dict[str, str]:
    """``--columns text_a=COL[,text_b=COL][,label=COL]`` as a dict (None or empty: {})."""
    from litebert.errors import ConfigError

    if not spec:
        return {}
    out = {}
    for part in spec.split(","):
        key, sep, col = part.partition("=")
        if not sep or key not in ("text_a", "text_b", "label"):
            raise ConfigError(f"--columns: expected text_a=COL[,text_b=COL][,label=COL], got {part!r}")
        out[key] = col
    return out


def check_ranges(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Every parsed option that has a range (`ranged`), checked."""
    from litebert.checks import check_values

    stack = [parser]
    while stack:
        p = stack.pop()
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                stack.extend(action.choices.values())
            elif getattr(action, "range", None) is not None and hasattr(args, action.dest):
                check_values(**{action.dest: (getattr(args, action.dest), action.range)})


def suggestion(name: str, names) -> str:
    close = difflib.get_close_matches(name, list(names), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def _overview() -> str:
    width = max(map(len, COMMANDS))
    lines = ["usage: litebert COMMAND [options]   (litebert COMMAND --help for details)", "", "commands:"]
    lines += [f"  {name.ljust(width)}  {help_}" for name, (_, help_) in COMMANDS.items()]
    return "\n".join(lines)


def _one_line_warning(message, category, filename, lineno, line=None) -> str:
    """Warnings on the command line read as one line each, like errors (no source file and line of litebert's)."""
    return f"warning: {printable(str(message))}\n"


_MODEL_OPTIONS = {"model", "models", "init_from", "tokenizer"}


def _add_offline(parser: argparse.ArgumentParser) -> None:
    """``--offline`` on every command that takes a model or tokenizer (which may be a hub id, `litebert.hub`)."""
    stack = [parser]
    while stack:
        p = stack.pop()
        subparsers = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        for action in subparsers:
            stack.extend(action.choices.values())
        if not subparsers and any(a.dest in _MODEL_OPTIONS for a in p._actions):
            p.add_argument("--offline", action="store_true",
                           help="a hub id (org/name[@revision]) given as a model or tokenizer, or a dataset id given "
                                "as --data, is taken from the local Hugging Face cache only, never downloaded (as "
                                "HF_HUB_OFFLINE=1)")


def main(argv: list[str] | None = None) -> int:
    """Run ``litebert ARGV``; returns the exit status. A reader that closes the pipe early (``litebert ... | head``)
    ends the command quietly with status 1, as Python's documentation recommends for SIGPIPE
    (https://docs.python.org/3/library/signal.html#note-on-sigpipe): stdout is pointed at /dev/null so that
    the interpreter's last flush finds no closed pipe either."""
    try:
        with safe_streams():  # every line the command writes, not only its errors, is safe for the terminal
            code = _main(argv)
            sys.stdout.flush()  # a pipe closed after the last print is found here, not at exit
        return code
    except BrokenPipeError:
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):  # stdout replaced by an object without a file descriptor
            pass
        return 1


def _main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    warnings.formatwarning = _one_line_warning
    if not argv or argv[0] in ("-h", "--help"):
        print(_overview())
        return 0
    if argv[0] in ("-V", "--version"):
        from litebert import __version__

        print(f"litebert {__version__}")
        return 0
    name = argv[0]
    if name not in COMMANDS:
        print(f"litebert: unknown command {name!r}{suggestion(name, COMMANDS)}\n\n{_overview()}", file=sys.stderr)
        return 2
    module_name, help_ = COMMANDS[name]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name and e.name.startswith("litebert"):
            print(f"litebert: the {name!r} command is not available in this version ({e.name} missing)",
                  file=sys.stderr)
            return 2
        raise
    parser = Parser(prog=f"litebert {name}", description=help_)
    # A module serving several commands (finetune/evaluate/...) exposes configure_command/run_command.
    several = hasattr(module, "configure_command")
    module.configure_command(name, parser) if several else module.configure(parser)
    _add_offline(parser)
    args = parser.parse_args(argv[1:])
    if getattr(args, "offline", False):
        os.environ["HF_HUB_OFFLINE"] = "1"  # read by litebert.hub when a hub id is resolved
    try:
        check_ranges(parser, args)
        code = module.run_command(name, args) if several else module.run(args)
    except LitebertError as e:
        flags = flags_of(parser)
        flags.update(getattr(module, "flag_names", lambda a: {})(args))
        print(f"litebert {name}: error: {e.render(flags)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"litebert {name}: interrupted", file=sys.stderr)
        return 130
    except MemoryError:
        print(f"litebert {name}: error: out of memory; use a smaller model, batch or sequence length", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader closed stdout: `main` ends quietly
        raise
    except Exception as e:  # a bug of litebert's: still one line, with what to do
        if os.environ.get("LITEBERT_TRACEBACK"):
            raise
        print(f"litebert {name}: internal error: {type(e).__name__}: {first_line(e, 300)} (this is a bug in litebert; "
              f"rerun with LITEBERT_TRACEBACK=1 for the traceback and report it)", file=sys.stderr)
        return 1
    return int(code or 0)


if __name__ == "__main__":
    raise SystemExit(main())
