"""A DFTracer event's file: its hash to the file's id and path, by hand."""

from __future__ import annotations

import hashlib

import pyarrow as pa

from iosweep.trace.dftracer.files import FilePaths, hash_ids


def test_file_ids_of_hashes_by_hand():
    # 16 hex digits read as a number (as DFTracer writes them; either case), a shorter hash
    # too; a path (pydftracer 1.0.x names files by path) is 64 bits of its BLAKE2b; none: null
    path = "/data/train/n01/img_1.JPEG"
    blake = int.from_bytes(hashlib.blake2b(path.encode(), digest_size=8).digest(), "little")
    cases = {
        "0000008000000000": 0x80_0000_0000,
        "ffffffffffffffff": 2**64 - 1,
        "FFFFFFFFFFFFFFFE": 2**64 - 2,
        "abc": 0xABC,
        path: blake,
        "zzzzzzzzzzzzzzzz": int.from_bytes(
            hashlib.blake2b(b"zzzzzzzzzzzzzzzz", digest_size=8).digest(), "little"
        ),
        "": None,
        None: None,
    }
    hashes = pa.array(["x", *cases]).slice(1)  # (an array that starts past its buffers')
    assert hash_ids(hashes).to_pylist() == list(cases.values())


def test_a_hash_s_path_is_its_last_fh_record_s_and_a_named_path_its_own():
    fh = pa.table(
        {
            "a_value": ["0000000000000001", "0000000000000002", "0000000000000001"],
            "a_name": ["/old", "/two", "/new"],
        }
    )
    paths = FilePaths.of(fh, pa.array(["/named", "/two"]))
    asked = pa.array(["0000000000000001", "0000000000000002", "/named", "0000000000000003", None])
    found = paths.found(asked)
    assert paths.paths.take(found).to_pylist() == ["/new", "/two", "/named", None, None]
