"""Plain helpers shared by several test modules (fixtures live in the conftest.py files; the submodules hold the
builders those fixtures call and the helpers of one family of tests)."""

import contextlib
import hashlib
import lzma
import os
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]  # the repository root
PYTHON = sys.executable
# for child processes: this checkout's litebert, whether or not it is installed
ENV = {**os.environ, "PYTHONPATH": str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}


def flags(settings: dict) -> list[str]:
    """The command-line flags that give ``settings`` ({config field: value}): ``--field-name VALUE`` each, as
    `litebert.cli.add_config_arguments` names a config class's fields. A test that runs the same settings through
    the CLI and through the typed function keeps them once, as a dict."""
    return [a for name, value in settings.items() for a in ("--" + name.replace("_", "-"), str(value))]


def corpus_documents(count: int, lines: slice, most: int) -> list[str]:
    """``count`` documents of 2 to ``most`` lines (each line a paragraph; the sizes cycle), cut in order from the
    non-blank ``lines`` of the bundled Moby-Dick (a sentence a line)."""
    text = lzma.decompress((REPO / "data" / "corpus" / "moby_dick.txt.xz").read_bytes()).decode("utf-8")
    paragraphs = [line for line in text.splitlines()[lines] if line.strip()]
    docs, i = [], 0
    while len(docs) < count:
        n = 2 + len(docs) % (most - 1)
        docs.append("\n".join(paragraphs[i:i + n]))
        i += n
    return docs


def crc32c_bitwise(data: bytes) -> int:
    """Textbook CRC32C (reflected Castagnoli polynomial), one bit at a time: independent of litebert's table-driven
    one."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


class IntTokenizer:
    """A tokenizer whose expected output is known by hand: sentences are whitespace-separated integers ("12 7 9" ->
    [12, 7, 9], anything else dropped); ids < 5 are the ALBERT specials; id % 6 == 0 continues a word."""

    pad_token_id, unk_token_id, cls_token_id, sep_token_id, mask_token_id = 0, 1, 2, 3, 4

    def __init__(self, vocab_size=1000, name="int"):
        self.vocab_size, self.name = vocab_size, name

    def encode_batch_ids(self, texts):
        return [[int(w) for w in t.split() if w.isdigit()] for t in texts]

    def word_start_mask(self):
        m = np.arange(self.vocab_size) % 6 != 0
        m[:5] = True
        return m

    def normal_piece_ids(self):
        return np.arange(5, self.vocab_size)

    def fingerprint(self):
        return hashlib.sha256(f"{self.name}-{self.vocab_size}".encode()).hexdigest()


# ------------------------------------------------------------------------------------ a Hugging Face hub cache
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def cache_repo(hf_home, repo: str, folder, commit: str = COMMIT, ref: str | None = "main"):
    """Put ``folder``'s files into ``hf_home``'s hub cache as huggingface_hub lays them out: blobs by hash,
    snapshots/COMMIT/ symlinks to them, refs/REF naming the commit. Returns the snapshot folder."""
    root = hf_home / "hub" / ("models--" + repo.replace("/", "--"))
    snapshot = root / "snapshots" / commit
    snapshot.mkdir(parents=True, exist_ok=True)
    (root / "blobs").mkdir(exist_ok=True)
    for f in sorted(folder.iterdir()):
        data = f.read_bytes()
        blob = root / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        (snapshot / f.name).symlink_to(os.path.relpath(blob, snapshot))
    if ref is not None:
        (root / "refs").mkdir(exist_ok=True)
        (root / "refs" / ref).write_text(commit)
    return snapshot


# ------------------------------------------------------------------------- a BERT-style WordPiece vocabulary
CJK = "我你他她们的是不在有人这个中国大学生爱北京天安门上海今年好很多说话来去看书日本语东西南小月水山"
WORDS = ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "un", "##aff", "##able", "hello", "world",
         "cafe", "café", "naive", "naïve", "resume", "résumé", "zurich", "zürich", "paris", "is", "capital", "of",
         "france", "berlin", "germany", "and", "in", "to", "it", "was", "whale", "sea", "ship", "##ed", "##ing",
         "##er", "##ly", "The", "Hello", "Café", "Zürich", "Paris", "CAFÉ", "mask", "2010", "中国", "北京"]


def wordpiece_vocab() -> list[str]:
    """A small BERT-style vocabulary: [PAD], two [unusedN], [UNK], [CLS], [SEP], [MASK] (BERT's order), ASCII and CJK
    punctuation, lower-case letters, digits and a few accented letters with their ``##`` forms (so that every
    lower-case word has pieces), CJK characters (and ``##`` forms), English and accented words, some cased."""
    specials = ["[PAD]", "[unused1]", "[unused2]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    punct = list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") + list("，。！？、：；（）《》")
    letters = list("abcdefghijklmnopqrstuvwxyz0123456789éüïà")
    cjk = list(CJK)
    return list(dict.fromkeys(specials + punct + letters + ["##" + c for c in letters + cjk] + cjk + WORDS))


def write_wordpiece_vocab(path):
    """``wordpiece_vocab()`` written as a vocab.txt at ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(t + "\n" for t in wordpiece_vocab()), encoding="utf-8")
    return path


def bert_tokenizer_folder(folder, **options):
    """A tokenizer folder as transformers' ``BertTokenizer.save_pretrained`` writes it (vocab.txt,
    tokenizer_config.json, special_tokens_map.json) for ``wordpiece_vocab()``; returns HF's tokenizer."""
    import tempfile
    from pathlib import Path

    import transformers

    with tempfile.TemporaryDirectory() as tmp:
        hf = transformers.BertTokenizer(str(write_wordpiece_vocab(Path(tmp) / "vocab.txt")), **options)
        hf.save_pretrained(folder)
    return hf


def snapshot(root: Path) -> dict:
    """Every path at and under ``root``: (kind, bytes or link target, modification time in ns, mode); {} if absent."""
    if not root.exists() and not root.is_symlink():
        return {}
    paths = [root, *sorted(root.rglob("*"))] if root.is_dir() and not root.is_symlink() else [root]
    out = {}
    for p in paths:
        st = p.lstat()
        content = (("link", os.readlink(p)) if p.is_symlink() else ("file", p.read_bytes()) if p.is_file()
                   else ("folder", None))
        out[str(p.relative_to(root))] = (*content, st.st_mtime_ns, st.st_mode)
    return out


def contents(root: Path) -> dict:
    """Every path at and under ``root`` with its bytes (None for folders, ("link", target) for links); {} if absent.
    Equal contents: nothing was written or removed (``snapshot`` also compares modification times)."""
    if not root.exists() and not root.is_symlink():
        return {}
    paths = [root, *sorted(root.rglob("*"))] if root.is_dir() and not root.is_symlink() else [root]
    return {str(p.relative_to(root)): (("link", os.readlink(p)) if p.is_symlink() else
                                       p.read_bytes() if p.is_file() else None) for p in paths}


@contextlib.contextmanager
def unchanged(folder: Path):
    """Checks on exit that nothing at or under ``folder`` was written, removed or touched (``snapshot``): the shared
    fixtures' guard that the tests only read them."""
    before = snapshot(folder)
    yield
    assert snapshot(folder) == before, f"a test wrote into the shared fixture folder {folder}"


def store_documents(store) -> list:
    """A token store's documents as lists of sentences as lists of ids, read through its public accessors."""
    docs = []
    for d in range(store.num_documents):
        s0, s1 = store.document_sentences(d)
        toks, lens = store.sentence_tokens(s0, s1)
        docs.append([x.tolist() for x in np.split(toks, np.cumsum(lens)[:-1])])
    return docs
