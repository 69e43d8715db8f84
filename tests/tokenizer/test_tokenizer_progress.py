"""`litebert tokenizer train` shows SentencePiece's training as a bar read from its log (and nothing else of it),
and the bar changes nothing in what is trained."""

import subprocess
import sys
from pathlib import Path

from litebert.tokenizer.spm_progress import _Reader

REPO = Path(__file__).resolve().parents[2]


def test_the_bar_follows_the_pruning_rounds_and_passes_other_lines_on(tmp_path):
    """Fed SentencePiece's own lines (as 0.2.3 logs a unigram run): the settings dump and informational lines are
    kept back, a warning passes, the bar reaches the seed share at the seed search and the end of the rounds at the
    target size (1.1 x 2000 pieces)."""
    out = open(tmp_path / "err.txt", "w", encoding="utf-8")
    reader = _Reader(0, out, vocab_size=2000, lines=2959)
    log = ["WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
           "I0000 00:00:1.2 4281 sentencepiece_trainer.cc:149] Starts training with : ",
           "trainer_spec {", "  vocab_size: 2000", "}",
           "I0000 00:00:1.3 4281 trainer_interface.cc:655] Done! preprocessed 2959 sentences."]
    for line in log:
        reader.line(line)
    assert reader.bar.n == 10
    reader.line("I0000 00:00:1.4 4281 unigram_model_trainer.cc:514] Initialized 24235 seed pieces")
    assert reader.bar.n == 35
    reader.line("W0000 00:00:1.5 4281 trainer_interface.cc:1] a warning of SentencePiece's")
    # halfway in log space between 24235 and 2200: 0.35 + 0.65 * 0.5
    reader.line(f"I0000 00:00:1.6 4281 unigram_model_trainer.cc:903] EM sub_iter=0 size={round((24235 * 2200) ** .5)} "
                "obj=9.5 num_tokens=95418 bytes/tok=5.3")
    assert reader.bar.n == 67
    reader.line("I0000 00:00:1.7 4281 unigram_model_trainer.cc:903] EM sub_iter=1 size=2200 obj=9.9 num_tokens=1")
    assert reader.bar.n == 99
    reader.close(finished=True)
    out.close()
    text = (tmp_path / "err.txt").read_text()
    assert "a warning of SentencePiece's" in text
    for hidden in ("absl::InitializeLog", "trainer_spec", "vocab_size: 2000", "Starts training", "EM sub_iter"):
        assert hidden not in text
    assert "100%" in text


def test_the_cli_shows_the_bar_and_trains_the_same_vocabulary(tmp_path):
    corpus = tmp_path / "corpus.txt"
    words = "whale ship sea captain harpoon deck sail wind storm crew boat ocean wave mast rope".split()
    corpus.write_text("".join(f"{words[i % 15]} the {words[(i * 7) % 15]} and {words[(i * 11) % 15]}s {i}\n"
                              for i in range(3000)))
    argv = [sys.executable, "-m", "litebert.cli", "tokenizer", "train", "--input", str(corpus), "--vocab-size", "200"]
    shown = subprocess.run(argv + ["--out", str(tmp_path / "a")], capture_output=True, text=True,
                           env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"})
    assert shown.returncode == 0, shown.stderr
    assert "training SentencePiece (3,000 lines)" in shown.stderr and "100%" in shown.stderr
    assert "EM sub_iter" not in shown.stderr and "trainer_spec" not in shown.stderr
    from litebert import train_tokenizer

    train_tokenizer([corpus], tmp_path / "b", vocab_size=200, progress=False)
    assert (tmp_path / "a" / "spiece.model").read_bytes() == (tmp_path / "b" / "spiece.model").read_bytes()
