"""Uploads (`litebert.push`) against a stand-in for the Hugging Face Hub's HTTP API, served on 127.0.0.1 by the test:
the endpoints huggingface_hub 0.36's ``HfApi.create_repo`` and ``create_commit`` call (repos/create, validate-yaml,
preupload, the git-LFS batch API with its upload and verify actions, and the ndjson commit). The client is
huggingface_hub's own, pointed at the fake by ``endpoint`` (``huggingface_hub.constants.ENDPOINT`` for the command
line, as ``HF_ENDPOINT`` sets it). What arrives is checked byte for byte against the folder; the private flag as
created; a refused token (401), a missing token, a missing huggingface_hub and an unreachable Hub each give one line.
"""

import base64
import hashlib
import json
import shutil
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
import torch

from litebert import push_to_hub
from litebert.card import MARKER, PLACEHOLDER
from litebert.cli import main
from litebert.errors import CheckpointError, ConfigError
from litebert.push import HubError

hf = pytest.importorskip("huggingface_hub")
yaml = pytest.importorskip("yaml")
hf_constants = pytest.importorskip("huggingface_hub.constants")
pytestmark = pytest.mark.usefixtures("one_thread")
TOKEN = "hf_test_token_0123456789"
HUB = "https://huggingface.co"  # the address in the URLs the Hub's answers hold
LFS_SUFFIXES = (".safetensors", ".model")  # as the Hub's .gitattributes sends them to LFS


class FakeHub:
    """The Hub's API as huggingface_hub uses it to create a repository and commit files, in memory."""

    def __init__(self, token: str = TOKEN):
        self.token, self.repos, self.lfs, self.calls, self.yaml = token, {}, {}, [], []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def _handler(self):
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    out = b""
                    while True:
                        size = int(self.rfile.readline().strip(), 16)
                        chunk = self.rfile.read(size + 2)[:size]
                        if size == 0:
                            return out
                        out += chunk
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def answer(self, status: int, payload=None, **headers):
                data = json.dumps(payload if payload is not None else {}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def authorized(self) -> bool:
                if self.headers.get("Authorization") == f"Bearer {hub.token}":
                    return True
                self.answer(401, {"error": "Invalid credentials in Authorization header"},
                            **{"X-Error-Message": "Invalid credentials in Authorization header"})
                return False

            def do_PUT(self):
                hub.calls.append(("PUT", self.path))
                data = self.body()
                oid = self.path.rsplit("/", 1)[1]
                if hashlib.sha256(data).hexdigest() != oid:
                    return self.answer(400, {"error": "sha256 mismatch"})
                hub.lfs[oid] = data
                self.answer(200)

            def do_POST(self):
                hub.calls.append(("POST", self.path))
                data = self.body()
                parts = self.path.split("?")[0].strip("/").split("/")
                if self.path == "/api/validate-yaml":  # the Hub checks the card's metadata, e.g. the license id
                    content = json.loads(data)["content"]
                    hub.yaml.append(content)
                    license_ = yaml.safe_load(content.split("---\n")[1]).get("license")
                    if license_ is not None and license_ not in ("apache-2.0", "mit", "cc-by-4.0", "other"):
                        return self.answer(400, {"errors": [{"message": '"license" must be one of [apache-2.0, mit, '
                                                                        'cc-by-4.0, other]'}]})
                    return self.answer(200, {"errors": [], "warnings": []})
                if self.path == "/lfs-verify":
                    info = json.loads(data)
                    ok = len(hub.lfs.get(info["oid"], b"")) == info["size"]
                    return self.answer(200 if ok else 404)
                if not self.authorized():
                    return None
                if self.path == "/api/repos/create":
                    return self.create(json.loads(data))
                if parts[-4:] == ["info", "lfs", "objects", "batch"]:
                    return self.batch(json.loads(data))
                repo = "/".join(parts[2:4])
                if parts[:2] != ["api", "models"] or repo not in hub.repos:
                    return self.answer(404, {"error": "Repository not found"}, **{"X-Error-Code": "RepoNotFound"})
                if parts[4] == "preupload":
                    files = [{"path": f["path"], "uploadMode": "lfs" if f["path"].endswith(LFS_SUFFIXES) else "regular",
                              "shouldIgnore": False} for f in json.loads(data)["files"]]
                    return self.answer(200, {"files": files})
                if parts[4] == "commit":
                    return self.commit(repo, data)
                return self.answer(404)

            def create(self, request: dict):
                repo = f"{request['organization']}/{request['name']}"
                url = f"{HUB}/{repo}"  # the Hub answers with its own address; the client maps it onto its endpoint
                if repo in hub.repos:
                    return self.answer(409, {"error": "You already created this model repo", "url": url})
                hub.repos[repo] = {"private": request.get("private"), "type": request.get("type"), "files": {}}
                self.answer(200, {"url": url, "name": repo})

            def batch(self, request: dict):
                objects = [{"oid": o["oid"], "size": o["size"],
                            "actions": {"upload": {"href": f"{hub.url}/lfs-upload/{o['oid']}"},
                                        "verify": {"href": f"{hub.url}/lfs-verify"}}} for o in request["objects"]]
                self.answer(200, {"transfer": "basic", "objects": objects})

            def commit(self, repo: str, data: bytes):
                files = {}
                for line in data.decode().splitlines():
                    item = json.loads(line)
                    value = item["value"]
                    if item["key"] == "file":
                        files[value["path"]] = base64.b64decode(value["content"])
                    elif item["key"] == "lfsFile":
                        if value["oid"] not in hub.lfs:
                            return self.answer(400, {"error": f"LFS object {value['oid']} not uploaded"})
                        files[value["path"]] = hub.lfs[value["oid"]]
                hub.repos[repo]["files"].update(files)
                oid = hashlib.sha1(data).hexdigest()
                self.answer(200, {"commitUrl": f"{HUB}/{repo}/commit/{oid}", "commitOid": oid})

        return Handler


@pytest.fixture
def fake_hub(monkeypatch, tmp_path):
    hub = FakeHub()
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))  # nothing of the user's (a saved token) is read
    monkeypatch.setattr(hf_constants, "HF_TOKEN_PATH", str(tmp_path / "hf_home" / "token"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    yield hub
    hub.close()


@pytest.fixture(scope="module")
def finetuned(tmp_path_factory):
    """A finished fine-tuned folder (tiny model, two-class JSONL task)."""
    from litebert import CardInfo, FinetuneConfig, finetune
    from litebert.config import AlbertConfig
    from litebert.heads import AlbertForPreTraining
    from litebert.tokenizer import train_tokenizer

    root = tmp_path_factory.mktemp("push")
    words = "the film was dull great plot actors story slow fun a and it".split()
    rng = np.random.default_rng(0)
    (root / "corpus.txt").write_text("\n".join(" ".join(rng.choice(words, 8)) for _ in range(300)) + "\n")
    tok = train_tokenizer([root / "corpus.txt"], root / "model", vocab_size=40, progress=False)
    torch.manual_seed(0)
    AlbertForPreTraining(AlbertConfig.from_preset("tiny", vocab_size=tok.vocab_size)).save_pretrained(root / "model")
    data = root / "data"
    data.mkdir()
    for name, n in (("train.jsonl", 16), ("dev.jsonl", 8)):
        with open(data / name, "w") as f:
            for i in range(n):
                f.write(json.dumps({"text": "the film was " + ["dull", "great"][i % 2], "label": ["neg", "pos"][i % 2]})
                        + "\n")
    out = root / "ft"
    finetune("classify", root / "model", data, out, progress=False, log=None, card=CardInfo(license="mit"),
             config=FinetuneConfig(max_steps=2, batch_size=8, eval_every=2, report_to="none"))
    return {"model": root / "model", "data": data, "out": out}


MODEL_FILES = {"config.json", "model.safetensors", "spiece.model", "tokenizer.json", "tokenizer_config.json",
               "README.md"}


def test_push_uploads_the_model_files_byte_for_byte_into_a_private_repo(finetuned, fake_hub, tmp_path):
    folder = tmp_path / "ft"
    shutil.copytree(finetuned["out"], folder, symlinks=True)
    (folder / "checkpoints").mkdir()
    (folder / "checkpoints" / "step-00000002.pt").write_bytes(b"not for the Hub")
    done = push_to_hub(folder, "me/albert-sentiment", endpoint=fake_hub.url)
    repo = fake_hub.repos["me/albert-sentiment"]
    assert repo["private"] is True and repo["type"] in (None, "model")
    expected = MODEL_FILES | {"finetune.json"}
    assert set(repo["files"]) == expected == set(done.files)
    for name in expected:
        assert repo["files"][name] == (folder / name).read_bytes(), name
    assert {oid for oid in fake_hub.lfs} == {hashlib.sha256((folder / n).read_bytes()).hexdigest()
                                             for n in ("model.safetensors", "spiece.model")}  # LFS as the Hub asks
    card = repo["files"]["README.md"].decode()
    assert MARKER in card and json.dumps("me/albert-sentiment") in card and json.dumps(PLACEHOLDER) not in card
    assert fake_hub.yaml == [card]  # the card's metadata went through the Hub's YAML check first
    assert done.url == f"{fake_hub.url}/me/albert-sentiment" and done.private
    meta = hf.metadata_load(folder / "README.md")  # the local card points at the repository too
    assert meta["license"] == "mit" and json.dumps("me/albert-sentiment") in (folder / "README.md").read_text()


def test_logs_and_public_on_request_and_an_existing_repo_gets_a_new_commit(finetuned, fake_hub, tmp_path):
    folder = tmp_path / "ft"  # a copy: a push points the folder's card at the repository, and the fixture is shared
    shutil.copytree(finetuned["out"], folder)
    push_to_hub(folder, "me/x", private=False, endpoint=fake_hub.url)
    assert fake_hub.repos["me/x"]["private"] is False
    done = push_to_hub(folder, "me/x", logs=True, endpoint=fake_hub.url)  # exists: 409, then commits
    assert set(done.files) == MODEL_FILES | {"finetune.json", "metrics.jsonl", "train.csv", "eval.csv"}
    assert fake_hub.repos["me/x"]["private"] is False  # an existing repository keeps its visibility
    assert fake_hub.repos["me/x"]["files"]["metrics.jsonl"] == (folder / "metrics.jsonl").read_bytes()


def test_a_refused_token_is_one_line(finetuned, fake_hub):
    fake_hub.token = "hf_another_token"
    with pytest.raises(HubError) as e:
        push_to_hub(finetuned["out"], "me/x", endpoint=fake_hub.url)
    message = str(e.value)
    assert "\n" not in message and message.startswith("the Hugging Face Hub refused the token (401 Unauthorized)")
    assert f"litebert push {finetuned['out']} me/x" in message
    assert fake_hub.repos == {} and fake_hub.lfs == {}


def test_a_failed_push_leaves_the_folder_byte_for_byte(finetuned, fake_hub, tmp_path):
    """The card that still names the placeholder is pointed at the repository only once the upload succeeded: a
    refused token, an unreachable Hub or refused metadata leave every file (bytes and times) as it was."""
    from helpers import snapshot

    folder = tmp_path / "ft"
    shutil.copytree(finetuned["out"], folder)
    assert json.dumps(PLACEHOLDER) in (folder / "README.md").read_text()  # else there would be nothing to retarget
    before = snapshot(folder)
    fake_hub.token = "hf_another_token"
    with pytest.raises(HubError, match="refused the token"):
        push_to_hub(folder, "me/x", endpoint=fake_hub.url)
    assert snapshot(folder) == before
    fake_hub.token = TOKEN
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}"
    with pytest.raises(HubError, match="cannot upload"):
        push_to_hub(folder, "me/x", endpoint=closed)
    assert snapshot(folder) == before
    push_to_hub(folder, "me/x", endpoint=fake_hub.url)  # succeeded: now the folder's card names the repository
    assert json.dumps("me/x") in (folder / "README.md").read_text()


def test_metadata_the_hub_refuses_is_one_line(finetuned, fake_hub, tmp_path):
    from litebert.card import CardInfo
    from litebert.card_builders import finetuned_card

    folder = tmp_path / "ft"
    shutil.copytree(finetuned["out"], folder)
    (folder / "README.md").write_text(finetuned_card(folder, CardInfo(license="wtfpl-9")), encoding="utf-8")
    with pytest.raises(HubError) as e:
        push_to_hub(folder, "me/x", endpoint=fake_hub.url)
    assert str(e.value).startswith("the Hugging Face Hub refused README.md's metadata for me/x at ")
    assert '"license" must be one of' in str(e.value) and "\n" not in str(e.value)
    assert fake_hub.lfs == {} and fake_hub.repos["me/x"]["files"] == {}  # refused before any file went up


def test_a_card_the_hub_would_misread_is_refused_before_anything_is_sent(finetuned, fake_hub, tmp_path):
    """Front matter never closed, or YAML that does not parse (tests/test_card_files_hostile.py generates the kinds):
    one line naming README.md, no request made, the folder as it was."""
    from helpers import snapshot
    from litebert.errors import CardError

    folder = tmp_path / "ft"
    shutil.copytree(finetuned["out"], folder)
    card = (folder / "README.md").read_text()
    for broken in (card.replace("\n---\n", "\n", 1).replace("---\n", "---\nlicense: [mit\n", 1),
                   "\ufeff" + card, "---\nlicense: mit\n# not closed\n"):
        (folder / "README.md").write_text(broken, encoding="utf-8")
        before = snapshot(folder)
        with pytest.raises(CardError, match=r"README\.md: ") as e:
            push_to_hub(folder, "me/x", endpoint=fake_hub.url)
        assert "\n" not in str(e.value) and fake_hub.calls == [] and snapshot(folder) == before


def test_no_token_no_package_no_network(finetuned, fake_hub, monkeypatch):
    monkeypatch.delenv("HF_TOKEN")
    with pytest.raises(HubError, match=r"^no Hugging Face token: log in with `hf auth login`"):
        push_to_hub(finetuned["out"], "me/x", endpoint=fake_hub.url)
    assert fake_hub.calls == []  # refused before any request
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(HubError, match="offline mode is on"):
        push_to_hub(finetuned["out"], "me/x", endpoint=fake_hub.url)
    monkeypatch.delenv("HF_HUB_OFFLINE")
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}"
    with pytest.raises(HubError) as e:
        push_to_hub(finetuned["out"], "me/x", endpoint=closed)
    assert str(e.value).startswith(f"cannot upload to me/x at {closed} (") and "check the network" in str(e.value)
    assert "\n" not in str(e.value)
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # as if it were not installed
    with pytest.raises(HubError, match=r"needs huggingface_hub \(pip install 'huggingface_hub>=0\.20'"):
        push_to_hub(finetuned["out"], "me/x", endpoint=fake_hub.url)


def test_what_is_not_a_finished_litebert_model_is_refused(finetuned, tmp_path):
    with pytest.raises(ConfigError, match=r"^repo_id = 'albert': not a Hugging Face Hub repository id"):
        push_to_hub(finetuned["out"], "albert")
    with pytest.raises(CheckpointError, match="not a model folder litebert wrote"):
        push_to_hub(finetuned["model"], "me/x")  # a save_pretrained folder: no marker
    unfinished = tmp_path / "ft"
    shutil.copytree(finetuned["out"], unfinished)
    marker = json.loads((unfinished / ".litebert.json").read_text())
    (unfinished / ".litebert.json").write_text(json.dumps({**marker, "complete": False}))
    with pytest.raises(CheckpointError, match="fine-tuning did not finish"):
        push_to_hub(unfinished, "me/x")


def test_finetune_and_push_on_the_command_line(finetuned, fake_hub, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(hf_constants, "ENDPOINT", fake_hub.url)  # what HF_ENDPOINT sets when huggingface_hub loads
    out = tmp_path / "cli-ft"
    argv = ["finetune", "classify", "--model", str(finetuned["model"]), "--data", str(finetuned["data"]), "--out",
            str(out), "--max-steps", "2", "--batch-size", "8", "--report-to", "none", "--threads", "1",
            "--no-progress"]
    assert main(argv + ["--push-to-hub", "not an id"]) == 2
    assert capsys.readouterr().err.strip().startswith("litebert finetune: error: --push-to-hub not an id: not a "
                                                      "Hugging Face Hub repository id")
    monkeypatch.delenv("HF_TOKEN")
    assert main(argv + ["--push-to-hub", "me/cli"]) == 2
    assert "no Hugging Face token" in capsys.readouterr().err and not out.exists()  # refused before any write
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    assert main(argv + ["--push-to-hub", "me/cli", "--hub-public", "--license", "apache-2.0"]) == 0
    repo = fake_hub.repos["me/cli"]
    assert repo["private"] is False and set(repo["files"]) == MODEL_FILES | {"finetune.json"}
    assert hf.metadata_load(out / "README.md")["license"] == "apache-2.0"
    assert repo["files"]["README.md"] == (out / "README.md").read_bytes()
    assert main(["push", str(out), "me/cli2", "--logs"]) == 0
    assert fake_hub.repos["me/cli2"]["private"] is True and "metrics.jsonl" in fake_hub.repos["me/cli2"]["files"]


def test_pretrain_pushes_the_runs_model_folder(fake_hub, tiny_setup, tmp_path, monkeypatch):
    from litebert import TrainConfig, pretrain

    setup = tiny_setup
    monkeypatch.setattr(hf_constants, "ENDPOINT", fake_hub.url)
    done = pretrain(setup["store"], tmp_path / "run", model="tiny", progress=False, push_to_hub="me/tiny",
                    train=TrainConfig(max_steps=1, batch_size=4, micro_batch=4, seq_len=64, max_predictions=10,
                                      report_to="none"))
    assert done.hub_url == f"{fake_hub.url}/me/tiny"
    files = fake_hub.repos["me/tiny"]["files"]
    assert set(files) == MODEL_FILES
    for name in files:
        assert files[name] == (done.model_dir / name).read_bytes(), name
    assert json.dumps("me/tiny") in files["README.md"].decode()
    done = push_to_hub(done.out, "me/tiny-logs", logs=True, endpoint=fake_hub.url)  # a run: its model/ and logs
    assert not (tmp_path / "run" / "eval.csv").exists()  # no held-out data
    assert set(done.files) == MODEL_FILES | {"train_config.json", "metrics.jsonl", "train.csv"}
