"""`predict` and `embed` stream their input in chunks: the output equals the model run on each input alone, in the
input's order; a bad input leaves no output and no temporary; peak memory does not grow with the number of inputs."""

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from litebert.cli import main
from litebert.errors import DataError
from litebert.inference import finetuned
from litebert.inference import predict as P

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "data" / "finetune"
WORDS = "the movie was great awful and a plot with actors in story film it wonderful boring".split()


pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: extra threads only contend


def build_models(root: Path) -> tuple[Path, Path]:
    """A tiny pretrained folder (tokenizer trained on the bundled sentiment snippets) and a classifier fine-tuned
    from it for 2 steps: (encoder folder, fine-tuned folder)."""
    from litebert.config import AlbertConfig
    from litebert.heads import AlbertForPreTraining
    from litebert.tokenizer import train_tokenizer

    corpus = root / "corpus.txt"
    with gzip.open(DATA / "sentiment" / "train.tsv.gz", "rt", encoding="utf-8") as f:
        corpus.write_text("".join(line.split("\t")[0] + "\n" for line in f), encoding="utf-8")
    tok = train_tokenizer([corpus], root / "model", vocab_size=1000, progress=False)
    torch.manual_seed(0)
    AlbertForPreTraining(AlbertConfig.from_preset("tiny", vocab_size=tok.vocab_size)).save_pretrained(root / "model")
    train = root / "train.jsonl"
    train.write_text("".join(json.dumps({"text": t, "label": l}) + "\n" for t, l in
                             [("a great film", "pos"), ("an awful plot", "neg")] * 8))
    code = main(["finetune", "classify", "--model", str(root / "model"), "--data", str(train),
                 "--out", str(root / "ft"), "--max-steps", "2", "--batch-size", "4", "--no-progress"])
    assert code == 0
    return root / "model", root / "ft"


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return build_models(tmp_path_factory.mktemp("models"))


def texts(n: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, int(rng.integers(1, 40)))) for _ in range(n)]


def test_predict_streamed_equals_the_model_run_on_each_input(models, tmp_path):
    _, ft = models
    inputs = [{"text": t, "n": i} for i, t in enumerate(texts(50))]
    inputs[7]["text_b"] = "a second sentence"  # a pair among single sentences
    inp = tmp_path / "in.jsonl"
    inp.write_text("".join(json.dumps(o) + "\n" for o in inputs))
    assert P.predict_file(ft, inp, tmp_path / "out.jsonl", progress=False, chunk_size=7) == 50
    rows = [json.loads(l) for l in (tmp_path / "out.jsonl").read_text().splitlines()]
    preset, model, tok, meta = finetuned.load_finetuned(ft)
    model.eval()
    for o, row in zip(inputs, rows, strict=True):
        assert {k: row[k] for k in o} == o  # the input object comes back, in order
        enc = tok(o["text"], o.get("text_b"), max_length=preset.max_seq_length, truncation=True)
        with torch.no_grad():
            logits = model(torch.tensor([enc["input_ids"]]), token_type_ids=torch.tensor([enc["token_type_ids"]])
                           ).logits[0]
        probs = torch.softmax(logits, -1).tolist()
        assert [row["probabilities"][l] for l in meta["labels"]] == pytest.approx(probs, abs=1e-5)
        assert row["label"] == meta["labels"][int(np.argmax(probs))]
    # One chunk or many: the same rows.
    P.predict_file(ft, inp, tmp_path / "one.jsonl", progress=False, chunk_size=1000)
    one = [json.loads(l) for l in (tmp_path / "one.jsonl").read_text().splitlines()]
    assert [r["label"] for r in one] == [r["label"] for r in rows]
    for a, b in zip(one, rows):
        assert list(a["probabilities"].values()) == pytest.approx(list(b["probabilities"].values()), abs=1e-6)
    # Batches by size (--batch-tokens): the same rows.
    P.predict_file(ft, inp, tmp_path / "tokens.jsonl", progress=False, batch_size=1000, max_tokens=60)
    by_tokens = [json.loads(l) for l in (tmp_path / "tokens.jsonl").read_text().splitlines()]
    for a, b in zip(by_tokens, rows, strict=True):
        assert list(a["probabilities"].values()) == pytest.approx(list(b["probabilities"].values()), abs=1e-6)


@pytest.mark.parametrize("precision", ["auto", "fp32"])  # auto on a CPU is fp32
@pytest.mark.parametrize("pooling", ["mean", "cls", "pooled"])
def test_embed_streamed_equals_the_model_run_on_each_input(models, tmp_path, pooling, precision):
    from litebert.heads import AlbertModel
    from litebert.tokenizer import AlbertTokenizer

    enc_dir, _ = models
    ts = texts(30, seed=1)
    inp = tmp_path / "t.txt"
    inp.write_text("\n".join(ts[:10]) + "\n\n" + "\n".join(ts[10:]) + "\n")  # a blank line is skipped
    out = P.embed_file(enc_dir, inp, tmp_path / "e.npy", pooling=pooling, chunk_size=4, batch_size=3,
                       precision=precision)
    saved = np.load(tmp_path / "e.npy")
    assert saved.shape == out.shape == (30, 32) and saved.dtype == np.float32
    tok, model = AlbertTokenizer.from_pretrained(enc_dir), AlbertModel.from_pretrained(enc_dir).eval()
    for t, row in zip(ts, saved):
        ids = torch.tensor([tok(t, max_length=128, truncation=True)["input_ids"]])
        with torch.no_grad():
            res = model(ids)
        want = {"mean": res.last_hidden_state[0].mean(0), "cls": res.last_hidden_state[0, 0],
                "pooled": res.pooler_output[0]}[pooling]
        np.testing.assert_allclose(row, want.numpy(), atol=1e-5)


def test_embed_takes_the_commands_attention_and_progress(models, tmp_path, capsys):
    """`litebert embed --attention` acts as it does for predict: varlen, which needs a CUDA GPU in half precision, is
    refused on the CPU before anything is written (it used to be accepted and ignored); --no-progress is passed on."""
    from litebert.cli import main

    enc_dir, ft = models
    inp = tmp_path / "t.txt"
    inp.write_text("\n".join(texts(5)) + "\n")
    (tmp_path / "t.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts(5)))
    errors = {}
    for command, model, source in (("embed", enc_dir, inp), ("predict", ft, tmp_path / "t.jsonl")):
        out = tmp_path / f"{command}.out"
        assert main([command, "--model", str(model), "--input", str(source), "--output", str(out), "--device", "cpu",
                     "--attention", "varlen"]) == 2
        errors[command] = capsys.readouterr().err.strip()
        assert len(errors[command].splitlines()) == 1 and "varlen" in errors[command] and not out.exists()
    assert errors["embed"].split(": error: ", 1)[1] == errors["predict"].split(": error: ", 1)[1]
    assert main(["embed", "--model", str(enc_dir), "--input", str(inp), "--output", str(tmp_path / "e.npy"),
                 "--device", "cpu", "--attention", "sdpa", "--no-progress"]) == 0
    assert "embedding" not in capsys.readouterr().err  # no progress bar
    assert np.load(tmp_path / "e.npy").shape == (5, 32)


def test_a_bad_input_late_in_the_file_leaves_the_old_output_and_no_temporary(models, tmp_path):
    enc_dir, ft = models
    inp = tmp_path / "in.jsonl"
    inp.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts(20)) + '{"text": "x"\n')
    for out, run in ((tmp_path / "o.jsonl", lambda o: P.predict_file(ft, inp, o, progress=False, chunk_size=4)),
                     (tmp_path / "e.npy", lambda o: P.embed_file(enc_dir, inp, o, chunk_size=4))):
        out.write_bytes(b"old")
        with pytest.raises(DataError, match=r"in.jsonl:21: not valid JSON"):
            run(out)
        assert out.read_bytes() == b"old"
        assert {p.name for p in tmp_path.iterdir()} <= {"in.jsonl", "o.jsonl", "e.npy"}  # no temporary left


# ------------------------------------------------------------------------------------------------- peak memory
_MEASURE = """
import sys, torch
torch.set_num_threads(1)
from litebert.cli import main
code = main(sys.argv[1:])
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")][0].split()[1]
print("VmHWM_KB", code, hwm)
"""


def peak_rss_kb(args: list[str]) -> int:
    """Peak resident memory (VmHWM, KB) of a fresh process running ``litebert ARGS``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", _MEASURE, *args], capture_output=True, text=True, env=env,
                          check=True)
    line = [l for l in done.stdout.splitlines() if l.startswith("VmHWM_KB")][-1].split()
    assert line[1] == "0", done.stdout + done.stderr
    return int(line[2])


def measure(models, folder: Path, sizes: tuple[int, ...]) -> dict[str, dict[int, int]]:
    enc_dir, ft = models
    ts = texts(2000, seed=3)
    figures: dict[str, dict[int, int]] = {"predict": {}, "embed": {}}
    for n in sizes:
        inp = folder / f"in{n}.jsonl"
        with open(inp, "w") as f:
            for i in range(n):
                f.write(json.dumps({"text": ts[i % len(ts)]}) + "\n")
        figures["predict"][n] = peak_rss_kb(["predict", "--model", str(ft), "--input", str(inp), "--output",
                                             str(folder / f"p{n}.jsonl"), "--no-progress"])
        figures["embed"][n] = peak_rss_kb(["embed", "--model", str(enc_dir), "--input", str(inp), "--output",
                                           str(folder / f"e{n}.npy"), "--no-progress"])
    print(json.dumps(figures))
    return figures


@pytest.mark.slow
def test_peak_memory_of_100k_inputs_within_1_2x_of_1k(models, tmp_path):
    figures = measure(models, tmp_path, (1000, 100_000))
    for command, peak in figures.items():
        assert peak[100_000] <= 1.2 * peak[1000], (command, peak)


def test_sorted_batches_by_tokens_hand_computed():
    from litebert.tasks.features import sorted_batches

    lengths = [10, 50, 20, 20, 5, 50, 8]
    # longest first: 50, 50, 20, 20, 10, 8, 5 (indices 1, 5, 2, 3, 0, 6, 4)
    assert sorted_batches(lengths, 3) == [[1, 5, 2], [3, 0, 6], [4]]
    # at most 100 tokens (rows x the batch's first, longest, length): 2 x 50; then 5 x 20 = 100
    assert sorted_batches(lengths, 64, max_tokens=100) == [[1, 5], [2, 3, 0, 6, 4]]
    assert sorted_batches(lengths, 3, max_tokens=100) == [[1, 5], [2, 3, 0], [6, 4]]
    assert sorted_batches([300], 4, max_tokens=100) == [[0]]  # an input longer than the budget runs alone
    # multiple choice: 4 sequences per feature, so 2 features of 10 tokens make 80 padded tokens
    assert sorted_batches([10, 10, 10], 64, max_tokens=100, rows=[4, 4, 4]) == [[0, 1], [2]]


def test_embed_of_a_folder_without_pooler_warns_only_when_the_pooler_is_read(tmp_path, recwarn):
    """A masked-LM folder has no pooler (as HF's AlbertForMaskedLM): mean and cls pooling never read it and load
    it quietly, with the same vectors as the full encoder's; pooled says the pooler is new."""
    import warnings

    from litebert.config import AlbertConfig
    from litebert.heads import AlbertForMaskedLM
    from litebert.tokenizer import AlbertTokenizer

    folder = tmp_path / "mlm"
    torch.manual_seed(0)
    AlbertForMaskedLM(AlbertConfig.from_preset("tiny", vocab_size=30000)).save_pretrained(folder)
    AlbertTokenizer.from_pretrained(REPO / "data" / "albert-30k").save_pretrained(folder)
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts(5)))
    for pooling in ("mean", "cls"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = P.embed(folder, source, tmp_path / f"{pooling}.npy", pooling=pooling, progress=False)
        assert got.shape == (5, AlbertConfig.from_preset("tiny").hidden_size)
    cls_vectors = np.load(tmp_path / "cls.npy")
    from litebert.heads import AlbertModel

    with pytest.warns(UserWarning, match="pooler"):
        full = AlbertModel.from_pretrained(folder)
    tok = AlbertTokenizer.from_pretrained(folder)
    with torch.inference_mode():
        ref = full(**tok(texts(5)[0:1], return_tensors="pt")).last_hidden_state[0, 0]
    np.testing.assert_allclose(cls_vectors[0], ref.numpy(), atol=1e-5)
    with pytest.warns(UserWarning, match="pooler"):
        P.embed(folder, source, tmp_path / "pooled.npy", pooling="pooled", progress=False)
