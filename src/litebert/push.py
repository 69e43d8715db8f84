"""`push_to_hub`: upload a model folder litebert wrote, with its model card, to a Hugging Face Hub repository.

    litebert push runs/sentiment me/albert-sentiment            # private unless --public
    litebert finetune ... --push-to-hub me/albert-sentiment      # the same, when the command has finished

What goes up is the model as litebert wrote it: config.json, the weights, the tokenizer files, README.md (litebert's
card, or the card you put there instead), and for a fine-tuned folder finetune.json (and SQuAD v2's
answerability.safetensors), which litebert's ``predict``/``evaluate`` read. Checkpoints, the folder's marker and the
trackers' files never go; the metrics (metrics.jsonl, train.csv, eval.csv, and a pretraining run's
train_config.json) only with ``logs``. A pretraining run is pushed as its ``model/``.

A new repository is private unless ``private=False``; an existing one keeps its visibility and gets a new commit.
The token is huggingface_hub's own (``HF_TOKEN``, or the one ``hf auth login`` saved). Only this module opens a
connection to upload, and only when asked: `preflight` checks everything that needs no network (the id, the
package, the token, offline mode) before a command writes anything, so a long run is not refused at its end.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from litebert import folders, hub
from litebert.arguments import checked
from litebert.card import CARD_NAME, CardInfo, is_own_card, read_card, retarget
from litebert.errors import CheckpointError, ConfigError, LitebertError, first_line, literal
from litebert.extras import install_hint
from litebert.values import names

_LOGS = (folders.METRICS_JSONL, folders.TRAIN_CSV, folders.EVAL_CSV)
_FINETUNED_MODEL = (folders.FINETUNE_META, "answerability.safetensors")


class HubError(LitebertError, RuntimeError):
    """An upload to the Hugging Face Hub could not be made: no huggingface_hub, no token, offline mode, a token the
    Hub refused, no network."""


@dataclass
class PushResult:
    """What `push_to_hub` uploaded: the repository, its page, the commit and the files (their paths in the repo)."""

    repo_id: str
    url: str
    commit_url: str
    files: list[str] = field(default_factory=list)
    private: bool = True  # as asked; an existing repository keeps its own visibility


def check_repo_id(repo_id: str, name: str = "repo_id") -> None:
    """A Hub model repository id, ``ORG/NAME`` (no revision), else `ConfigError` naming the argument ``name``."""
    if not (hub.is_hub_id(repo_id) and "@" not in repo_id):
        raise ConfigError("{" + name + "}: not a Hugging Face Hub repository id; give ORG/NAME (letters, digits, "
                          "'-', '_' and '.'), e.g. me/albert-sentiment", **{name: repo_id})


def preflight(repo_id: str, name: str = "push_to_hub") -> None:
    """Everything an upload to ``repo_id`` needs that can be checked without the network, checked before a command
    writes anything: the id, huggingface_hub, offline mode off, a token."""
    check_repo_id(repo_id, name)
    _token(_import_hub())


def _import_hub():
    try:
        import huggingface_hub
    except ImportError:
        raise HubError("uploading to the Hugging Face Hub needs huggingface_hub "
                       f"({install_hint('hub', 'huggingface_hub')})") from None
    return huggingface_hub


def _token(hf) -> str:
    if hub.offline():
        raise HubError("uploading to the Hugging Face Hub needs the network, and offline mode is on (HF_HUB_OFFLINE "
                       "or --offline); run without it")
    token = hf.get_token()
    if not token:
        raise HubError("no Hugging Face token: log in with `hf auth login` (a token with write access) or set "
                       "HF_TOKEN")
    return token


# ---------------------------------------------------------------------------------------------------- what goes up
def upload_files(folder: str | os.PathLike, logs: bool = False) -> tuple[Path, list[tuple[str, Path]]]:
    """The model folder of ``folder`` and the files of it to upload, as (path in the repository, local file).
    `CheckpointError` for a folder that is not a finished litebert model."""
    folder = Path(folder)
    kind, parent = folders.output_kind(folder), folders.output_kind(folder.parent)
    if kind == "pretraining-run" or (kind is None and parent == "pretraining-run" and folder.name == "model"):
        run = folder if kind else folder.parent
        model, extra = run / "model", ([folders.TRAIN_CONFIG, *_LOGS] if logs else [])
        picked = _model_files(model, ()) + [(n, run / n) for n in extra if _plain_file(run / n)]
    elif kind in ("model", "fine-tuned-model"):
        _check_finished(folder, kind)
        model = folder
        own = _FINETUNED_MODEL + (_LOGS if logs else ()) if kind == "fine-tuned-model" else ()
        picked = _model_files(model, own)
    else:
        raise CheckpointError(f"{literal(folder)}: not a model folder litebert wrote (a `convert` or `finetune` "
                              f"output, or a pretraining run or its model/); upload other folders with huggingface_hub")
    names = {n for n, _ in picked}
    if "config.json" not in names or not names & {"model.safetensors", "litebert_model.safetensors"}:
        raise CheckpointError(f"{literal(model)}: holds no model (config.json and its weights); "
                              + ("has the run finished?" if model.name == "model" else "it cannot be uploaded"))
    return model, picked


def _plain_file(path: Path) -> bool:
    return path.is_file() and not path.is_symlink()


def _model_files(model: Path, own: tuple[str, ...]) -> list[tuple[str, Path]]:
    """The files of the model layout (and ``own``) in ``model``: what litebert writes there, and README.md."""
    if not model.is_dir():
        return []
    return [(p.name, p) for p in folders.entries(model) if _plain_file(p) and p.name != folders.OWNER_FILE
            and (folders.MODEL.owns_file(p.name) or p.name in own)]


def _check_finished(folder: Path, kind: str) -> None:
    if folders.read_marker(folder).get("complete") is not True:
        what = "fine-tuning" if kind == "fine-tuned-model" else "the conversion"
        raise CheckpointError(f"{literal(folder)}: {what} did not finish (stopped, or still running); finish it "
                              f"before uploading")


# ---------------------------------------------------------------------------------------------------- the upload
@checked
def push_to_hub(folder: str | os.PathLike, repo_id: str, *, private: bool = True, logs: bool = False,
                endpoint: Optional[str] = None, commit_message: Optional[str] = None) -> PushResult:
    """Upload the model in ``folder`` (a fine-tuned or converted folder, a pretraining run or its ``model/``) to the
    Hub model repository ``repo_id`` (ORG/NAME), creating it (``private`` by default) if it does not exist.

    ``logs``: also the metrics files. ``endpoint``: the Hub's address (default: huggingface_hub's, which reads
    ``HF_ENDPOINT``). A litebert card in the folder that still names `litebert.card.PLACEHOLDER` is uploaded pointed
    at ``repo_id``, and rewritten so in the folder once the upload has succeeded. Raises `HubError` (no package, no
    token, refused, no network) with the folder left byte for byte as it was."""
    check_repo_id(repo_id)
    model, picked = upload_files(folder, logs)
    hf = _import_hub()
    token = _token(hf)
    card = model / CARD_NAME
    retargeted = None  # the card's text pointed at repo_id: uploaded from memory, written into the folder after
    if (CARD_NAME, card) in picked:  # checked as the Hub reads it, before anything is sent
        text, _ = read_card(card)
        if is_own_card(card):
            retargeted = retarget(text, repo_id) if retarget(text, repo_id) != text else None
    api = hf.HfApi(endpoint=endpoint, token=token)
    operations = [hf.CommitOperationAdd(path_in_repo=name, path_or_fileobj=retargeted.encode("utf-8")
                                        if retargeted is not None and path == card else str(path))
                  for name, path in picked]
    try:
        url = api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
        commit = api.create_commit(repo_id, operations, repo_type="model",
                                   commit_message=commit_message or f"Upload {model.name} with litebert")
    except Exception as e:  # noqa: BLE001 - huggingface_hub and requests raise many kinds; one line for each cause
        raise _failure(e, repo_id, api.endpoint, folder) from None
    if retargeted is not None:  # only now: a failed upload leaves the folder byte for byte as it was
        from litebert.files import atomic_write

        atomic_write(card, retargeted)
    return PushResult(repo_id, str(url), str(commit.commit_url), sorted(n for n, _ in picked), private)


def _failure(e: Exception, repo_id: str, endpoint: str, folder) -> HubError:
    """One line for a failed upload: what the Hub (or the network) said, and that the folder is still there."""
    status = getattr(getattr(e, "response", None), "status_code", None)
    where = literal(f"{repo_id} at {endpoint}")
    again = literal(f"; the model stays in {folder}: upload it again with `litebert push {folder} {repo_id}`")
    if status == 401:
        return HubError(f"the Hugging Face Hub refused the token (401 Unauthorized) for {where}: it is invalid or "
                        f"expired; log in again (`hf auth login`) or set HF_TOKEN{again}")
    if status == 403:
        return HubError(f"the token may not write to {where} (403 Forbidden): use a token with write access to "
                        f"{literal(repo_id.split('/')[0])}{again}")
    if status is not None:
        return HubError(f"the Hugging Face Hub answered {status} for {where}: {literal(first_line(e, 300))}{again}")
    if isinstance(e, ValueError) and "metadata" in str(e):  # the Hub's check of README.md's front matter
        return HubError(f"the Hugging Face Hub refused README.md's metadata for {where}: "
                        f"{literal(' '.join(str(e).split())[:300])}{again}")
    text = first_line(e, 1000)
    cause = re.search(r"\[Errno -?\d+\][^'\")]*|timed out|Name or service not known", text)  # requests' nested reason
    reason = literal(cause.group(0).strip() if cause else text[:200] or type(e).__name__)
    return HubError(f"cannot upload to {where} ({type(e).__name__}: {reason}); check the network{again}")


# ---------------------------------------------------------------------------------------------------- commands
@dataclass(frozen=True)
class Publishing:
    """What a command writes into its model card and where it uploads the model when it has finished."""

    card: CardInfo = field(default_factory=CardInfo)
    repo_id: Optional[str] = None
    private: bool = True

    def check(self) -> None:
        if self.repo_id is not None:
            preflight(self.repo_id)

    def push(self, folder: str | os.PathLike) -> Optional[str]:
        """Upload ``folder`` when a repository was named; returns the repository's URL (None when none was)."""
        if self.repo_id is None:
            return None
        done = push_to_hub(folder, self.repo_id, private=self.private)
        print(f"uploaded {len(done.files)} files to {done.url} ({'private' if done.private else 'public'} when "
              f"created)", file=sys.stderr, flush=True)
        return done.url

    def not_pushed(self, why: str) -> None:
        if self.repo_id is not None:
            print(f"note: nothing was uploaded to {self.repo_id}: {why}", file=sys.stderr, flush=True)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The model card's and the upload's options of a command that writes a model folder."""
    group = parser.add_argument_group("model card and upload", "README.md in the model folder, and the Hugging Face "
                                                               "Hub (docs/finetune.md, \"Model cards and the Hub\")")
    group.add_argument("--license", help="the license of the weights, as a Hub license id (apache-2.0, mit, "
                                         "cc-by-4.0, other...), written into the model card (default: none written)")
    group.add_argument("--datasets", help="Hub ids of the training data sets, comma-separated, for the model card")
    group.add_argument("--push-to-hub", metavar="ORG/NAME",
                       help="upload the model folder to this Hub repository when the command has finished (token: "
                            "HF_TOKEN or `hf auth login`)")
    group.add_argument("--hub-public", dest="hub_private", action="store_false",
                       help="create the repository public (default: private)")


def publishing(args: argparse.Namespace) -> Publishing:
    """The `Publishing` the options of `add_arguments` describe."""
    datasets = tuple(names(args.datasets, "datasets")) if args.datasets else ()
    return Publishing(CardInfo(license=args.license, datasets=datasets), args.push_to_hub, args.hub_private)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = __doc__
    parser.add_argument("folder", type=Path, help="a fine-tuned or converted folder, or a pretraining run (its "
                                                  "model/ is uploaded)")
    parser.add_argument("repo_id", metavar="ORG/NAME", help="the Hub model repository (created if absent)")
    parser.add_argument("--public", dest="private", action="store_false",
                        help="create the repository public (default: private; an existing one keeps its own)")
    parser.add_argument("--logs", action="store_true", help="also upload metrics.jsonl, train.csv and eval.csv "
                                                            "(and a run's train_config.json)")


def run(args: argparse.Namespace) -> int:
    done = push_to_hub(args.folder, args.repo_id, private=args.private, logs=args.logs)
    print(f"uploaded {', '.join(done.files)} to {done.url}")
    return 0
