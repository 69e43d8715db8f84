"""ALBERT models with a BERT-style WordPiece vocabulary, as the Chinese ALBERTs on the Hugging Face Hub are shipped
(transformers' ``save_pretrained`` of the model and of a ``BertTokenizer`` into one folder): a token store prepared
with such a vocabulary (ids equal to HF's ``BertTokenizer``, its fingerprint the vocabulary's sha256), whole-word
masking by ``##`` continuation, pretraining and ``--init-from``, and `finetune`, `evaluate`, `predict`, `embed` on
the folder -- also as a hub id -- against transformers' own models and tokenizer as the oracle."""

from __future__ import annotations

import hashlib
import json
import random

import numpy as np
import pytest
import torch

from helpers import CJK, bert_tokenizer_folder, cache_repo, wordpiece_vocab
from litebert.cli import main
from litebert.data.store import TokenStore, prepare_store
from litebert.tokenizer import WordPieceTokenizer, load_tokenizer

transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: extra threads only contend

TOL = 1e-5
TINY = dict(embedding_size=16, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37,
            max_position_embeddings=128, hidden_act="gelu_new", hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0, classifier_dropout_prob=0.0, initializer_range=0.3)
# English words outside the vocabulary's whole words: WordPiece splits them into a word piece and ## pieces
ENGLISH = ["whales", "quickly", "shipped", "unaffable", "seaing", "brownish", "zebra", "the", "sea", "dog", "over",
           "hello", "world", "jumps", "lazily", "berliner", "capitalised", "naïve", "Café"]
PRETRAIN = ["--batch-size", "4", "--micro-batch", "4", "--seq-len", "64", "--max-predictions", "10", "--lr", "0.005",
            "--warmup-steps", "1", "--seed", "3", "--no-progress"]


def _sentence(rng: random.Random) -> str:
    """A sentence of Chinese characters and English words (some split by WordPiece into ## pieces)."""
    parts = []
    for _ in range(rng.randint(3, 7)):
        if rng.random() < 0.5:
            parts.append("".join(rng.choice(CJK) for _ in range(rng.randint(2, 6))))
        else:
            parts.append(" ".join(rng.choice(ENGLISH) for _ in range(rng.randint(1, 3))))
    return " ".join(parts) + rng.choice(["。", "！", ".", "？"])


def _corpus(path, n_docs: int, seed: int):
    rng = random.Random(seed)
    docs = ["\n".join(_sentence(rng) for _ in range(rng.randint(3, 8))) for _ in range(n_docs)]
    path.write_text("\n\n".join(docs) + "\n", encoding="utf-8")
    return path


def _write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def _hf_albert_folder(folder, cls=None, seed: int = 0, **config):
    """An ALBERT folder exactly as the Chinese ALBERTs on the Hub look: transformers' save_pretrained of the model,
    and of a BertTokenizer over vocab.txt into the same folder."""
    torch.manual_seed(seed)
    vocab_size = len(wordpiece_vocab())
    model = (cls or transformers.AlbertForMaskedLM)(transformers.AlbertConfig(vocab_size=vocab_size,
                                                                              **{**TINY, **config}))
    model.save_pretrained(folder)
    bert_tokenizer_folder(folder)
    return model


@pytest.fixture(scope="module")
def chinese(tmp_path_factory):
    root = tmp_path_factory.mktemp("wordpiece")
    tok_dir = root / "tokenizer"
    bert_tokenizer_folder(tok_dir)
    train = _corpus(root / "train.txt", 40, seed=0)
    heldout = _corpus(root / "heldout.txt", 6, seed=1)
    assert main(["data", "prepare", "--input", str(train), "--tokenizer", str(tok_dir), "--out", str(root / "store"),
                 "--no-progress"]) == 0
    prepare_store([heldout], str(tok_dir), root / "eval_store", progress=False)
    _hf_albert_folder(root / "hf")
    return {"root": root, "tokenizer": tok_dir, "train": train, "store": root / "store",
            "eval_store": root / "eval_store", "hf": root / "hf"}


# ------------------------------------------------------------------------------------------------ token store
def test_store_holds_bert_tokenizer_ids_and_the_vocabulary_fingerprint(chinese, tmp_path):
    store = TokenStore(chinese["store"])
    vocab_bytes = (chinese["tokenizer"] / "vocab.txt").read_bytes()
    assert store.facts.fingerprint == hashlib.sha256(vocab_bytes).hexdigest()  # `sha256sum vocab.txt`
    assert (store.tokenizer_path / "vocab.txt").read_bytes() == vocab_bytes
    tok = store.tokenizer()
    assert isinstance(tok, WordPieceTokenizer) and tok.fingerprint() == store.facts.fingerprint
    vocab = wordpiece_vocab()
    np.testing.assert_array_equal(store.facts.word_start, [not t.startswith("##") for t in vocab])
    assert store.facts.mask_id == vocab.index("[MASK]") and store.facts.pad_id == vocab.index("[PAD]")
    # every sentence's ids are HF BertTokenizer's (no [CLS]/[SEP]: the pipeline adds them)
    hf = transformers.BertTokenizer.from_pretrained(chinese["tokenizer"])
    lines = [line for line in chinese["train"].read_text(encoding="utf-8").splitlines() if line]
    tokens, lengths = store.sentence_tokens(0, store.num_sentences)
    assert lengths.tolist() == [len(hf.encode(line, add_special_tokens=False)) for line in lines]
    assert tokens.tolist() == [i for line in lines for i in hf.encode(line, add_special_tokens=False)]
    # tokenizing processes give the same store
    two = prepare_store([chinese["train"]], str(chinese["tokenizer"]), tmp_path / "two", workers=2, progress=False)
    assert two.sentence_tokens(0, two.num_sentences)[0].tolist() == tokens.tolist()
    assert main(["data", "inspect", str(chinese["store"]), "--tokenizer", str(chinese["tokenizer"])]) == 0


def test_whole_word_masking_never_splits_a_word(chinese):
    """As BERT's create_pretraining_data: a ## piece belongs to the word of the piece before it, so a masked n-gram
    takes a ## piece exactly when it takes the piece that starts its word (a segment's first token starts a word)."""
    from litebert.data.pretraining import PretrainingDataset

    tok = load_tokenizer(chinese["tokenizer"])
    continues = np.array([t.startswith("##") for t in wordpiece_vocab()])
    special = {tok.cls_token_id, tok.sep_token_id, tok.pad_token_id}
    ds = PretrainingDataset(chinese["store"], max_seq_length=64, max_predictions_per_seq=20, masked_lm_prob=0.25,
                            seed=5)
    multi_piece_words = 0
    for i in range(ds.num_examples):
        e = ds.example(0, i)
        ids = e["input_ids"].copy()
        ids[e["mlm_positions"]] = e["mlm_ids"]  # the original tokens
        masked = set(e["mlm_positions"].tolist())
        words, current = [], []
        for p, t in enumerate(ids.tolist()):
            if t in special:
                words, current = words + [current], []
            elif continues[t] and current:
                current.append(p)
            else:
                words, current = words + [current], [p]
        for word in words + [current]:
            hit = masked.intersection(word)
            assert not hit or hit == set(word), (i, word, sorted(masked))
            multi_piece_words += len(hit) > 1
    assert multi_piece_words > 20  # the property was tested on words of several pieces


# ----------------------------------------------------------------------------------------------- pretraining
def test_pretrain_on_the_store_and_continue_from_wordpiece_folders(chinese, tmp_path, capsys):
    from litebert.io.hf_folder import load_weights

    data = ["--data", str(chinese["store"]), "--eval-data", str(chinese["eval_store"])]
    run = tmp_path / "run"
    assert main(["pretrain", *data, "--preset", "tiny", "--tokenizer", str(chinese["tokenizer"]), "--out", str(run),
                 "--max-steps", "2", *PRETRAIN]) == 0
    vocab = (chinese["tokenizer"] / "vocab.txt").read_bytes()
    assert (run / "model" / "vocab.txt").read_bytes() == vocab
    assert isinstance(load_tokenizer(run / "model"), WordPieceTokenizer)
    # continue from the run's model, and from an ALBERT folder saved by transformers with its BertTokenizer
    again = tmp_path / "again"
    assert main(["pretrain", *data, "--init-from", str(run / "model"), "--out", str(again), "--max-steps", "2",
                 *PRETRAIN]) == 0
    hf_run = tmp_path / "hf_run"
    assert main(["pretrain", *data, "--init-from", str(chinese["hf"]), "--out", str(hf_run), "--max-steps", "2",
                 *PRETRAIN]) == 0
    assert (hf_run / "model" / "vocab.txt").read_bytes() == vocab
    start, end = load_weights(chinese["hf"]), load_weights(hf_run / "model")
    assert max((start[k] - end[k]).abs().max().item() for k in start if k in end) > 1e-4
    # a folder whose vocabulary has the same size but other pieces at some ids is refused
    swapped = tmp_path / "swapped"
    _hf_albert_folder(swapped)
    lines = (swapped / "vocab.txt").read_text(encoding="utf-8").splitlines()
    lines[100], lines[101] = lines[101], lines[100]
    (swapped / "vocab.txt").write_text("".join(t + "\n" for t in lines), encoding="utf-8")
    capsys.readouterr()
    assert main(["pretrain", *data, "--init-from", str(swapped), "--out", str(tmp_path / "no"), "--max-steps", "1",
                 *PRETRAIN]) == 2
    err = capsys.readouterr().err.strip()
    assert "differs from the one" in err and "at 2 of" in err and len(err.splitlines()) == 1


# ------------------------------------------------------------------------------ finetune/evaluate/predict/embed
def _hf_mean_embeddings(folder, texts) -> np.ndarray:
    """transformers' AlbertModel and BertTokenizer on ``folder``: the mean of the last layer over real tokens."""
    hf_tok = transformers.BertTokenizer.from_pretrained(folder)
    model = transformers.AlbertModel.from_pretrained(folder).eval()
    enc = hf_tok(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**enc).last_hidden_state
    mask = enc["attention_mask"].unsqueeze(-1).float()
    return ((hidden * mask).sum(1) / mask.sum(1)).numpy()


def test_hidden_states_equal_transformers_on_the_same_ids(chinese):
    from litebert.model import AlbertModel

    texts = ["我爱北京天安门。", "whales quickly shipped 中国的大学生", "Café naïve résumé"]
    tok, hf_tok = load_tokenizer(chinese["hf"]), transformers.BertTokenizer.from_pretrained(chinese["hf"])
    enc = tok(texts, padding=True, return_tensors="pt")
    theirs = hf_tok(texts, padding=True, return_tensors="pt")
    assert torch.equal(enc["input_ids"], theirs["input_ids"])
    ours = AlbertModel.from_pretrained(chinese["hf"]).eval()
    ref = transformers.AlbertModel.from_pretrained(chinese["hf"]).eval()
    with torch.no_grad():
        torch.testing.assert_close(ours(**enc).last_hidden_state, ref(**theirs).last_hidden_state, atol=TOL, rtol=TOL)


def test_finetune_evaluate_predict_embed_on_an_hf_chinese_albert_folder(chinese, tmp_path, capsys):
    rng = random.Random(2)
    rows = [{"sentence": _sentence(rng), "y": label} for label in ["正面", "负面", "中性"] * 8]
    train = _write_jsonl(tmp_path / "train.jsonl", rows)
    out = tmp_path / "ft"
    columns = ["--columns", "text_a=sentence,label=y"]
    assert main(["finetune", "classify", "--model", str(chinese["hf"]), "--data", str(train), "--out", str(out),
                 *columns, "--max-steps", "4", "--batch-size", "8", "--lr", "1e-3", "--no-progress"]) == 0
    assert (out / "vocab.txt").read_bytes() == (chinese["hf"] / "vocab.txt").read_bytes()

    # predict: litebert's probabilities are transformers' on the fine-tuned folder, with its BertTokenizer
    texts = [_sentence(rng) for _ in range(5)]
    inp = _write_jsonl(tmp_path / "in.jsonl", [{"sentence": t} for t in texts])
    assert main(["predict", "--model", str(out), "--input", str(inp), "--output", str(tmp_path / "p.jsonl"),
                 "--no-progress"]) == 0  # the columns fine-tuning was given
    predicted = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text(encoding="utf-8").splitlines()]
    hf_model = transformers.AlbertForSequenceClassification.from_pretrained(out).eval()
    enc = transformers.BertTokenizer.from_pretrained(out)(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        probs = torch.softmax(hf_model(**enc).logits, -1).numpy()
    names = [hf_model.config.id2label[i] for i in range(probs.shape[1])]
    for row, p in zip(predicted, probs):
        np.testing.assert_allclose([row["probabilities"][n] for n in names], p, atol=TOL)
        assert row["label"] == names[int(p.argmax())]

    # evaluate: the accuracy of those predictions
    gold = [names[i % len(names)] for i in range(len(texts))]
    dev = _write_jsonl(tmp_path / "dev.jsonl", [{"sentence": t, "y": g} for t, g in zip(texts, gold)])
    capsys.readouterr()
    assert main(["evaluate", "--model", str(out), "--data", str(dev), *columns, "--no-progress"]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["accuracy"] == pytest.approx(np.mean([r["label"] == g for r, g in zip(predicted, gold)]))

    # embed: the mean of transformers' AlbertModel hidden states over the real tokens
    assert main(["embed", "--model", str(chinese["hf"]), "--input", str(inp), "--text-field", "sentence",
                 "--output", str(tmp_path / "e.npy")]) == 0
    np.testing.assert_allclose(np.load(tmp_path / "e.npy"), _hf_mean_embeddings(chinese["hf"], texts), atol=TOL)


def test_the_folder_as_a_hub_id(chinese, tmp_path, monkeypatch):
    from litebert import hub

    home = tmp_path / "hf_home"
    cache_repo(home, "someone/albert-tiny-chinese", chinese["hf"])
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hub, "download", lambda repo, revision: pytest.fail(f"tried to download {repo}"))
    texts = ["我爱北京天安门。", "whales quickly 中国"]
    inp = _write_jsonl(tmp_path / "in.jsonl", [{"text": t} for t in texts])
    assert main(["embed", "--model", "someone/albert-tiny-chinese", "--input", str(inp), "--output",
                 str(tmp_path / "e.npy")]) == 0
    np.testing.assert_allclose(np.load(tmp_path / "e.npy"), _hf_mean_embeddings(chinese["hf"], texts), atol=TOL)
    assert main(["pretrain", "--data", str(chinese["store"]), "--init-from", "someone/albert-tiny-chinese", "--out",
                 str(tmp_path / "run"), "--max-steps", "1", *PRETRAIN]) == 0
    assert (tmp_path / "run" / "model" / "vocab.txt").read_bytes() == (chinese["hf"] / "vocab.txt").read_bytes()


def test_convert_tf_with_a_chinese_vocabulary_file(tmp_path):
    """Google's Chinese ALBERT checkpoints come with a BERT vocabulary (vocab_chinese.txt): `convert tf --spm`
    takes it."""
    from pathlib import Path

    from litebert.errors import TokenizerError
    from litebert.io.convert_tf import convert_tf_checkpoint

    fixture = Path(__file__).parents[1] / "fixtures" / "tf" / "pretrain"
    vocab_size = json.loads((fixture / "albert_config.json").read_text())["vocab_size"]
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + list(CJK[:vocab_size - 5])
    (tmp_path / "vocab_chinese.txt").write_text("".join(t + "\n" for t in tokens), encoding="utf-8")
    out = tmp_path / "out"
    assert main(["convert", "tf", "--checkpoint", str(fixture), "--config", str(fixture / "albert_config.json"),
                 "--spm", str(tmp_path / "vocab_chinese.txt"), "--out", str(out)]) == 0
    tok = load_tokenizer(out)
    assert isinstance(tok, WordPieceTokenizer) and tok.convert_ids_to_tokens(list(range(vocab_size))) == tokens
    assert (out / "vocab.txt").read_bytes() == (tmp_path / "vocab_chinese.txt").read_bytes()
    (tmp_path / "short.txt").write_text("".join(t + "\n" for t in tokens[:-1]), encoding="utf-8")
    with pytest.raises(TokenizerError, match=f"has {vocab_size - 1} pieces but the config's vocab_size is"):
        convert_tf_checkpoint(fixture, fixture / "albert_config.json", tmp_path / "o2", spm=tmp_path / "short.txt")
    assert not (tmp_path / "o2").exists()
