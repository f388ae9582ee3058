"""The S3 endpoint's object store by itself (``fleet_local._s3._store``): files on disk, no HTTP."""

from __future__ import annotations

import datetime as dt
import hashlib
import threading
from pathlib import Path

from fleet_local._s3._store import ObjectStore


def test_an_object_reads_back_with_its_metadata(tmp_path: Path) -> None:
    store = ObjectStore(tmp_path / "bucket")
    before = dt.datetime.now(dt.UTC).replace(microsecond=0)
    stored = store.put("shots/a.png", b"\x89PNG bytes", "image/png")
    assert store.read("shots/a.png") == b"\x89PNG bytes"
    assert store.head("shots/a.png") == stored
    assert stored.size == len(b"\x89PNG bytes")
    assert stored.etag == hashlib.md5(b"\x89PNG bytes").hexdigest()
    assert stored.content_type == "image/png"
    assert stored.last_modified.tzinfo is not None and stored.last_modified >= before
    assert store.head("shots/b.png") is None


def test_a_put_replaces_the_object_at_its_key(tmp_path: Path) -> None:
    store = ObjectStore(tmp_path / "bucket")
    store.put("k", b"first", "text/plain")
    second = store.put("k", b"second, longer", "application/json")
    assert store.read("k") == b"second, longer"
    assert store.head("k") == second
    assert [o.key for o in store.list("", "", 10)[0]] == ["k"]


def test_an_object_whose_meta_file_was_never_written_does_not_exist(tmp_path: Path) -> None:
    """The bytes are written before the meta file: a crash between the two leaves no object."""
    store = ObjectStore(tmp_path / "bucket")
    name = hashlib.sha256(b"half/written").hexdigest()
    (tmp_path / "bucket" / "objects" / name).write_bytes(b"bytes only")
    assert store.head("half/written") is None
    assert store.list("", "", 10) == ([], False)


def test_a_listing_is_in_key_order_by_prefix_and_pages(tmp_path: Path) -> None:
    store = ObjectStore(tmp_path / "bucket")
    for key in ("b/2", "a/1", "b/1", "b/10", "c/1"):
        store.put(key, key.encode(), "text/plain")
    page, more = store.list("b/", "", 2)
    assert [o.key for o in page] == ["b/1", "b/10"] and more
    page, more = store.list("b/", "b/10", 2)
    assert [o.key for o in page] == ["b/2"] and not more
    assert [o.key for o in store.list("", "", 1000)[0]] == ["a/1", "b/1", "b/10", "b/2", "c/1"]
    assert store.list("z/", "", 10) == ([], False)


def test_move_to_moves_only_the_prefixed_objects(tmp_path: Path) -> None:
    public = ObjectStore(tmp_path / "public")
    private = ObjectStore(tmp_path / "private")
    public.put("seeds/env/seed.tar.zst", b"seed", "application/zstd")
    public.put("file-sets/k/a.txt", b"answer", "text/plain")
    public.put("harness/shot.png", b"png", "image/png")
    assert public.move_to(private, ("seeds/", "file-sets/")) == 2
    assert [o.key for o in public.list("", "", 10)[0]] == ["harness/shot.png"]
    assert [o.key for o in private.list("", "", 10)[0]] == ["file-sets/k/a.txt", "seeds/env/seed.tar.zst"]
    assert private.read("file-sets/k/a.txt") == b"answer"
    assert public.move_to(private, ("seeds/", "file-sets/")) == 0


def test_concurrent_puts_to_one_key_leave_bytes_and_meta_of_the_same_put(tmp_path: Path) -> None:
    """Each put writes its bytes and its meta under the store's lock, so two puts racing for one
    key never leave one's bytes beside the other's meta."""
    store = ObjectStore(tmp_path / "bucket")
    for round_ in range(40):
        start = threading.Barrier(4)

        def writer(n: int, round_: int = round_, start: threading.Barrier = start) -> None:
            start.wait(timeout=10)
            store.put("shared", f"round {round_} writer {n} ".encode() * (1 + 50 * n), "text/plain")

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert not any(thread.is_alive() for thread in threads)
        stored = store.head("shared")
        assert stored is not None
        data = store.read("shared")
        assert (stored.size, stored.etag) == (len(data), hashlib.md5(data).hexdigest()), f"round {round_}"
