"""The pure-Python TF checkpoint reader against checkpoints TensorFlow itself wrote (tests/fixtures/tf, made by
scripts/make_tf_fixtures.py): TF's own variable listing (manifest.json) and values (values.npz) are the reference."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from helpers import crc32c_bitwise
from litebert.errors import CheckpointError, CheckpointNotFoundError, LitebertError
from litebert.io.tf_checkpoint import TFCheckpoint, crc32c, resolve_prefix, unmask_crc

FIXTURES = Path(__file__).parents[1] / "fixtures" / "tf"
ALL = ["pretrain", "hub", "classifier", "partitioned", "dtypes"]


def test_crc32c_known_vectors():
    assert crc32c(b"123456789") == 0xE3069283  # the standard check value of CRC-32C
    assert crc32c(b"") == 0
    assert crc32c(bytes(32)) == 0x8A9136AA  # RFC 3720 (iSCSI) B.4: 32 bytes of zeros
    assert crc32c(b"\xff" * 32) == 0x62A8AB43  # RFC 3720 B.4: 32 bytes of 0xFF
    assert crc32c(bytes(range(32))) == 0x46DD794E  # RFC 3720 B.4: incrementing bytes


@pytest.mark.parametrize("n", [1, 3, 4, 5, 63, 64, 65, 127, 1000, 4097])
def test_crc32c_matches_bitwise(n):
    data = np.random.default_rng(n).integers(0, 256, n, dtype=np.uint8).tobytes()
    assert crc32c(data) == crc32c_bitwise(data)


def test_crc32c_large_path_matches_bitwise():
    # > 256 KiB takes the 1 KiB-chunk path and several folding rounds with an odd chunk count
    data = np.random.default_rng(1).integers(0, 256, (1 << 18) + 1029, dtype=np.uint8).tobytes()
    assert crc32c(data) == crc32c_bitwise(data)


def test_unmask_inverts_leveldb_mask():
    for crc in (0, 1, 0xE3069283, 0xFFFFFFFF, 0x12345678):
        masked = ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF  # leveldb crc32c::Mask
        assert unmask_crc(masked) == crc


@pytest.mark.parametrize("name", ALL)
def test_listing_matches_tensorflow(name):
    manifest = json.loads((FIXTURES / name / "manifest.json").read_text())
    ckpt = TFCheckpoint(FIXTURES / name)
    assert ckpt.names() == sorted(manifest)
    for var, info in manifest.items():
        entry = ckpt.entry(var)
        assert (entry.dtype, list(entry.shape)) == (info["dtype"], info["shape"]), var


def test_values_match_tensorflow_for_every_dtype():
    ckpt = TFCheckpoint(FIXTURES / "dtypes" / "model.ckpt")
    values = np.load(FIXTURES / "dtypes" / "values.npz", allow_pickle=False)
    assert len(values.files) == len(ckpt) == 10
    for key in values.files:
        got, want = ckpt.read(key.replace("__", "/")), values[key]
        assert got.shape == want.shape and got.dtype == want.dtype, key
        np.testing.assert_array_equal(got, want, err_msg=key)
    assert ckpt.entry("bf16").dtype == "bfloat16" and ckpt.read("bf16").dtype == np.float32


def test_every_tensor_of_the_sharded_checkpoint_reads_with_valid_checksums():
    ckpt = TFCheckpoint(FIXTURES / "pretrain")
    assert ckpt.num_shards == 2
    assert {ckpt.entry(n).shard_id for n in ckpt.names()} == {0, 1}
    for name in ckpt.names():
        assert ckpt.entry(name).crc32c is not None
        arr = ckpt.read(name)
        assert arr.shape == ckpt.entry(name).shape
    assert ckpt.read("global_step") == 125000


def test_resolve_prefix_forms():
    pre = FIXTURES / "pretrain" / "model.ckpt-best"
    assert resolve_prefix(pre) == pre
    assert resolve_prefix(str(pre) + ".index") == pre
    assert resolve_prefix(str(pre) + ".data-00001-of-00002") == pre
    assert resolve_prefix(FIXTURES / "pretrain") == pre
    assert resolve_prefix(FIXTURES / "hub") == FIXTURES / "hub" / "variables" / "variables"


def test_checkpoint_state_file_is_followed(tmp_path):
    shutil.copytree(FIXTURES / "classifier", tmp_path / "c")
    shutil.copy(tmp_path / "c" / "model.ckpt-best.index", tmp_path / "c" / "model.ckpt-1.index")
    (tmp_path / "c" / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-best"\n'
                                               'all_model_checkpoint_paths: "model.ckpt-best"\n')
    assert TFCheckpoint(tmp_path / "c").prefix == tmp_path / "c" / "model.ckpt-best"


def _copy(tmp_path, name="pretrain") -> Path:
    shutil.copytree(FIXTURES / name, tmp_path / name)
    return tmp_path / name


def test_missing_shard(tmp_path):
    d = _copy(tmp_path)
    (d / "model.ckpt-best.data-00001-of-00002").unlink()
    with pytest.raises(CheckpointNotFoundError,
                       match=r"missing data shard.*data-00001-of-00002.*variables affected: \S"):
        TFCheckpoint(d / "model.ckpt-best")


def test_missing_index(tmp_path):
    with pytest.raises(CheckpointNotFoundError, match="index not found"):
        TFCheckpoint(tmp_path / "model.ckpt-best")
    with pytest.raises(CheckpointNotFoundError, match=r"no TensorFlow checkpoint \(\*\.index\)"):
        TFCheckpoint(tmp_path)


def test_truncated_data_file(tmp_path):
    d = _copy(tmp_path)
    shard = d / "model.ckpt-best.data-00000-of-00002"
    data = shard.read_bytes()
    shard.write_bytes(data[: len(data) - 100])
    with pytest.raises(CheckpointError,
                       match=r"data-00000-of-00002: truncated: \d+ bytes, but variable '.+' \[.*\] needs"):
        TFCheckpoint(d)


def test_corrupt_data_byte_is_caught_by_checksum(tmp_path):
    d = _copy(tmp_path, "classifier")
    ckpt = TFCheckpoint(d)
    e = ckpt.entry("output_weights")
    shard = ckpt.shard_path(e.shard_id)
    data = bytearray(shard.read_bytes())
    data[e.offset + 5] ^= 0x40
    shard.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="checksum mismatch for variable 'output_weights'"):
        TFCheckpoint(d).read("output_weights")
    TFCheckpoint(d).read("output_weights", verify=False)  # the caller may opt out
    TFCheckpoint(d).read("output_bias")  # other variables are fine


def test_corrupt_or_truncated_index(tmp_path):
    d = _copy(tmp_path, "classifier")
    index = d / "model.ckpt-best.index"
    raw = index.read_bytes()
    index.write_bytes(raw[:20] + bytes([raw[20] ^ 1]) + raw[21:])
    with pytest.raises(CheckpointError, match="checksum mismatch"):
        TFCheckpoint(d)
    index.write_bytes(raw[: len(raw) - 10])
    with pytest.raises(CheckpointError, match="bad magic number"):
        TFCheckpoint(d)
    index.write_bytes(b"\x00" * 10)
    with pytest.raises(CheckpointError, match="too short"):
        TFCheckpoint(d)


def test_partitioned_variable_is_reported_unsupported():
    ckpt = TFCheckpoint(FIXTURES / "partitioned")
    assert ckpt.entry("bert/embeddings/word_embeddings").partitioned
    assert ckpt.read("bert/embeddings/token_type_embeddings").shape == (2, 4)
    with pytest.raises(LitebertError, match=r"'bert/embeddings/word_embeddings' \[10, 4\] is partitioned into 2 "
                                            r"slices.*unsupported"):
        ckpt.read("bert/embeddings/word_embeddings")


def test_unknown_variable():
    with pytest.raises(CheckpointError, match="no variable 'nope'"):
        TFCheckpoint(FIXTURES / "dtypes").read("nope")
