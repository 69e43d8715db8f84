"""What the pipeline tests share (test_pipelines.py, test_fill_mask.py, test_qa_decode.py, test_token_groups.py,
test_zero_shot.py): the shape of their tiny random models on the official 30k vocabulary, transformers' own pipeline
on a folder, and the comparison of an answer with the one transformers' pipeline gives."""

import numpy as np

CONFIG = dict(vocab_size=30000, embedding_size=16, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
              intermediate_size=37)


def assert_same(ref, got, path="answer"):
    """Same structure and keys; numbers within 1e-4, everything else (tokens, labels, spans, answers) equal."""
    if isinstance(ref, dict):
        assert isinstance(got, dict) and list(got) == list(ref), (path, ref, got)
        for k in ref:
            assert_same(ref[k], got[k], f"{path}.{k}")
    elif isinstance(ref, list):
        assert isinstance(got, list) and len(got) == len(ref), (path, ref, got)
        for i, (a, b) in enumerate(zip(ref, got)):
            assert_same(a, b, f"{path}[{i}]")
    elif isinstance(ref, (float, np.floating)):
        assert isinstance(got, (float, np.floating)) and abs(float(ref) - float(got)) < 1e-4, (path, ref, got)
    else:
        assert type(got) is type(ref) and got == ref, (path, ref, got)


def hf_pipeline(task, folder, **options):
    """transformers' own pipeline for ``task`` on ``folder``, on the CPU, quietly."""
    import warnings

    import transformers

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        transformers.logging.set_verbosity_error()
        return transformers.pipeline(task, model=str(folder), device="cpu", **options)
