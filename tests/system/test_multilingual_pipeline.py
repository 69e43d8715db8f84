"""Text in six scripts through the whole pipeline: `train_tokenizer(keep_accents=True)` -> `prepare_store` (JSONL,
one paragraph per language, split into sentences) -> a few pretraining steps of the tiny preset. Checked against the
hand-written sentences: probe words round-trip through the tokenizer, every stored sentence is one of them, and the
SOP segments are cut at their boundaries. The corpus is written for this test."""

import json
import unicodedata
import warnings

import numpy as np
import pytest

from litebert.data.pretraining import PretrainingDataset
from litebert.data.store import prepare_store
from litebert.pretraining.config import TrainConfig
from litebert.pretraining.run import pretrain
from litebert.tokenizer import train_tokenizer

# One document per language, as its sentences (what the splitter must find); Chinese and Japanese are written without
# spaces between sentences.
DOCUMENTS = {
    "en": ["The weather is nice today.", "Mr. Brown went to the market at 9 a.m. and bought apples.",
           "Did he pay $3.50 for them?", "Yes, he did."],
    "ru": ["Привет!", "Меня зовут А. С. Иванов.", "Я живу в Москве и работаю учителем.", "А где живёшь ты?"],
    "hi": ["नमस्ते!", "भारत के प्रधानमंत्री ने आज दिल्ली में भाषण दिया।", "उन्होंने ज़िंदगी के बारे में बात की।", "क्या आपने सुना?"],
    "ar": ["مرحبا!", "أنا أحب القراءة كثيراً.", "هل تحب الكتب؟", "نعم، أحبها جداً."],
    "zh": ["你好！", "我很好。", "你呢？", "今天天气很好，我们去公园吧。"],
    "ja": ["こんにちは。", "ありがとうございます！", "「はい。」と彼は言った。", "明日は学校に行きますか？"],
}
PROBES = ["नमस्ते", "प्रधानमंत्री", "ज़िंदगी", "Привет", "живёшь", "مرحبا", "أحب", "你好", "こんにちは", "ありがとう"]
VOCAB_SIZE = 175  # this corpus needs 163 characters plus the special pieces and supports at most 183 pieces


def document_text(lang: str) -> str:
    return ("" if lang in ("zh", "ja") else " ").join(DOCUMENTS[lang])


def normalized(text: str) -> str:
    """The tokenizer's own normalization with keep_accents, written out: lower-casing (official preprocess_text), then
    SentencePiece's NFKC (full-width ！ ？ ， become ! ? ,)."""
    return unicodedata.normalize("NFKC", text.lower())


def sentences_of(ids: np.ndarray, cuts) -> list[np.ndarray]:
    return np.split(np.asarray(ids), np.cumsum(cuts)[:-1])


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("multilingual")
    corpus = tmp / "corpus.jsonl"
    with open(corpus, "w", encoding="utf-8") as f:
        for lang in DOCUMENTS:
            f.write(json.dumps({"text": document_text(lang)}, ensure_ascii=False) + "\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # keep_accents: no warning about stripped marks
        tok = train_tokenizer([corpus], tmp / "tok", VOCAB_SIZE, keep_accents=True, progress=False, num_threads=1)
        store = prepare_store([corpus], tok, tmp / "store", progress=False)
    return tmp, corpus, tok, store


def test_probe_words_round_trip(pipeline):
    _, _, tok, _ = pipeline
    for word in PROBES:
        ids = tok.encode_ids(word)
        assert tok.unk_token_id not in ids, word
        assert tok.decode(ids) == normalized(word), word
    assert "्" in "".join(tok.convert_ids_to_tokens(tok.encode_ids("नमस्ते")))  # the virama is a piece


def test_store_sentences_are_the_scripts_sentences(pipeline):
    _, _, tok, store = pipeline
    assert (store.num_documents, store.num_sentences) == (6, 24)
    for d, sentences in enumerate(DOCUMENTS.values()):
        s0, s1 = store.document_sentences(d)
        tokens, lengths = store.sentence_tokens(s0, s1)
        assert [tok.decode(s) for s in sentences_of(tokens, lengths)] == [normalized(s) for s in sentences]


def test_sop_segments_are_cut_at_sentence_boundaries(pipeline):
    _, _, tok, store = pipeline
    ds = PretrainingDataset(store, max_seq_length=128, short_seq_prob=0.0)
    assert ds.num_examples == 6  # each document fits one example
    docs = [store.sentence_tokens(*store.document_sentences(d)) for d in range(store.num_documents)]
    labels = []
    for epoch in range(3):
        for i in range(ds.num_examples):
            e = ds.example(epoch, i)
            ids = e["input_ids"].copy()
            ids[e["mlm_positions"]] = e["mlm_ids"]  # undo the masking
            first = ids[e["token_type_ids"] == 0][1:-1]  # [CLS] A [SEP] -> A
            second = ids[e["token_type_ids"] == 1][:-1]  # B [SEP] -> B
            a, b = (second, first) if e["sentence_order_label"] else (first, second)  # label 1: swapped
            whole = np.concatenate([a, b])
            d = next(d for d, (tokens, _) in enumerate(docs) if np.array_equal(tokens, whole))
            boundaries = np.cumsum(docs[d][1])[:-1]
            assert a.size in boundaries  # the pair is cut between two sentences of that script
            k = int(np.flatnonzero(boundaries == a.size)[0]) + 1
            sentences = list(DOCUMENTS.values())[d]
            assert [tok.decode(s) for s in sentences_of(a, docs[d][1][:k])] == [normalized(s) for s in sentences[:k]]
            labels.append(int(e["sentence_order_label"]))
    assert 0 < sum(labels) < len(labels)  # both orders occur


def test_pretrains_a_few_steps(pipeline):
    tmp, _, _, _ = pipeline
    cfg = TrainConfig(max_steps=2, batch_size=4, micro_batch=4, seq_len=64, warmup_steps=1, eval_examples=1)
    result = pretrain(tmp / "store", tmp / "run", model="tiny", train=cfg, progress=False)
    assert result.complete and result.step == 2
    assert (result.model_dir / "spiece.model").read_bytes() == (tmp / "tok" / "spiece.model").read_bytes()
    records = [json.loads(line) for line in (tmp / "run" / "metrics.jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in records if r.get("split") == "train" and "loss" in r]
    assert len(losses) == 2 and all(np.isfinite(losses))


def test_stripping_accents_on_this_corpus_warns_naming_the_scripts(pipeline, tmp_path):
    _, corpus, _, _ = pipeline
    with pytest.warns(UserWarning) as caught:
        train_tokenizer([corpus], tmp_path / "tok", 170, keep_accents=False, progress=False, num_threads=1)
    # Counted by hand: Devanagari, 6 viramas (नमस्ते प्रधानमंत्री दिल्ली उन्होंने क्या) and the nukta of ज़; Arabic, the
    # hamza of أ in أنا أحب أحبها and the fathatan of كثيراً جداً; Hiragana, the dakuten of が, ご and ざ. Stripping
    # leaves
    # the Russian ё and the English text alone. The corpus is read a JSON line (one document) at a time.
    chars = sum(len(document_text(lang)) for lang in DOCUMENTS)
    assert [str(w.message) for w in caught] == [
        f"{100 * (7 + 5 + 3) / chars:.2g}% of the corpus's characters are or carry combining marks of Devanagari, "
        "Arabic and Hiragana that accent stripping removes (नमस्ते -> नमसते); train with --keep-accents "
        "(keep_accents=True) to keep them"]
