"""Crafted checkpoint indexes whose checksums are all valid but whose counts, shapes, offsets and sizes lie: the
reader must refuse them from what is on disk, in one line, without allocating what they claim.

The indexes are written here by a minimal LevelDB table writer (one data block, one index block, the 48-byte footer;
tensorflow/core/lib/io/table_builder.cc) with CRC32C computed bit by bit, independently of the reader's own.
"""

import shutil
import struct
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from helpers import crc32c_bitwise
from litebert.errors import CheckpointError
from litebert.io.convert_tf import convert_tf_checkpoint
from litebert.io.tf_checkpoint import TFCheckpoint, _read_table
from litebert.protobuf import bytes_field, encode_varint, varint_field

FIXTURES = Path(__file__).parents[1] / "fixtures" / "tf"
PREFIX = "model.ckpt-best"


def _mask(crc: int) -> int:  # leveldb crc32c::Mask
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def _block(entries: list[tuple[bytes, bytes]]) -> bytes:
    """Entries without prefix compression (shared = 0), then one restart point at 0 and the restart count."""
    body = b"".join(encode_varint(0) + encode_varint(len(k)) + encode_varint(len(v)) + k + v for k, v in entries)
    return body + struct.pack("<II", 0, 1)


def _write_index(path: Path, entries: list[tuple[bytes, bytes]]) -> None:
    out = bytearray()

    def put(contents: bytes) -> bytes:  # block + type 0 (uncompressed) + masked crc; returns its BlockHandle
        offset = len(out)
        out.extend(contents + b"\x00" + struct.pack("<I", _mask(crc32c_bitwise(contents + b"\x00"))))
        return encode_varint(offset) + encode_varint(len(contents))

    data = put(_block(entries))
    index = put(_block([(entries[-1][0], data)]))
    footer = (encode_varint(0) + encode_varint(0) + index).ljust(40, b"\x00") + struct.pack("<Q", 0xDB4775248B80FB57)
    path.write_bytes(bytes(out) + footer)


def _entry(dtype: int, shape: list[int], offset: int, size: int, shard: int = 0) -> bytes:
    """A BundleEntryProto (tensor_bundle.proto): dtype, shape, shard_id, offset, size (no crc32c)."""
    dims = b"".join(bytes_field(2, varint_field(1, d)) for d in shape)
    return (varint_field(1, dtype) + bytes_field(2, dims) + varint_field(3, shard) + varint_field(4, offset)
            + varint_field(5, size))


def _crafted(tmp_path, header: bytes | None = None, **replace: bytes) -> Path:
    """The classifier fixture (one shard) with its index rewritten: the header and the named entries replaced."""
    d = tmp_path / "ckpt"
    shutil.copytree(FIXTURES / "classifier", d)
    entries = _read_table(d / f"{PREFIX}.index")
    replace = {k.encode(): v for k, v in replace.items()}
    entries = [(k, header if k == b"" and header is not None else replace.get(k, v)) for k, v in entries]
    _write_index(d / f"{PREFIX}.index", entries)
    return d / PREFIX


def test_rewritten_index_reads_like_the_original(tmp_path):
    # the writer above is faithful: an unchanged rewrite reads the same, so the tests below fail for their lie alone
    prefix = _crafted(tmp_path)
    ckpt, ref = TFCheckpoint(prefix), TFCheckpoint(FIXTURES / "classifier")
    assert ckpt.names() == ref.names() and ckpt.num_shards == 1
    for name in ref.names():
        np.testing.assert_array_equal(ckpt.read(name), ref.read(name))


_LIST_UNDER_LIMIT = textwrap.dedent("""
    import resource, sys
    from litebert.cli import main
    import litebert.io.convert_cli, litebert.io.tf_checkpoint  # imported before the limit is set
    vm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmSize:")) * 1024
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    soft = vm + (512 << 20) if hard == resource.RLIM_INFINITY else min(vm + (512 << 20), hard)
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))  # 512 MiB more than the imports took
    sys.exit(main(["convert", "tf", "--checkpoint", sys.argv[1], "--list"]))
""")


def test_absurd_shard_count_is_refused_at_once_in_bounded_memory(tmp_path):
    prefix = _crafted(tmp_path, header=varint_field(1, 2**31 - 1))
    start = time.monotonic()
    try:
        run = subprocess.run([sys.executable, "-c", _LIST_UNDER_LIMIT, str(prefix)], capture_output=True, text=True,
                             timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail("convert tf --list ran for 2 minutes on an index claiming 2**31 - 1 shards")
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2, run.stderr[-2000:]
    assert len(lines) == 1 and "missing data shard" in lines[0] and "data-00000-of-2147483647" in lines[0], lines
    assert len(lines[0]) < 1000 and time.monotonic() - start < 60


def test_zero_shards_is_a_corrupt_index(tmp_path):
    prefix = _crafted(tmp_path, header=varint_field(1, 0))
    with pytest.raises(CheckpointError, match="num_shards"):
        TFCheckpoint(prefix)


def test_entry_in_a_shard_the_header_does_not_list(tmp_path):
    prefix = _crafted(tmp_path, output_bias=_entry(1, [3], 0, 12, shard=7))
    with pytest.raises(CheckpointError, match=r"'output_bias'.*shard 7.*1 shard"):
        TFCheckpoint(prefix)


@pytest.mark.parametrize("offset,size", [(-(2**62), 2**62 + 12), (0, 2**62), (2**62, 12), (0, -12)])
def test_entry_outside_its_shard_file(tmp_path, offset, size):
    prefix = _crafted(tmp_path, output_bias=_entry(1, [size // 4 if size > 0 else 3], offset, size))
    with pytest.raises(CheckpointError, match=r"'output_bias'"):
        TFCheckpoint(prefix)


@pytest.mark.parametrize("shape,size", [
    ([2**40, 2**40], 12),  # element count far beyond the bytes
    ([2**32, 2**32], 0),  # 2**64 elements: wraps to 0 in int64 arithmetic
    ([2**62, 0], 0),  # no elements, but no array of that shape can exist
    ([-3, -1], 12),  # negative dimensions whose product is right
    ([4], 12),  # plainly the wrong size
])
def test_shape_must_match_the_entry_size(tmp_path, shape, size):
    prefix = _crafted(tmp_path, output_bias=_entry(1, shape, 0, size))
    with pytest.raises(CheckpointError, match=r"'output_bias'.*corrupt index"):
        TFCheckpoint(prefix)


def test_absurd_classifier_rows_are_refused_before_the_model_is_built(tmp_path):
    # [2**40, 0] is self-consistent (no elements, no bytes), but taken as num_labels it would build a 2**40-row head
    prefix = _crafted(tmp_path, output_weights=_entry(1, [2**40, 0], 0, 0))
    with pytest.raises(CheckpointError, match=r"output_weights.*\[1099511627776, 0\]"):
        convert_tf_checkpoint(prefix, FIXTURES / "classifier" / "albert_config.json")

