"""Objects of one S3 bucket kept as files on disk: no HTTP, no signatures.

:class:`ObjectStore` is what the endpoint's ``PUT`` / ``GET`` / ``HEAD`` / listing read and
write, and what the server itself uses for screenshots and task data. Each write is an atomic
file replace, so threads and the endpoint may write side by side.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class StoredObject:
    """One object's metadata (its bytes are read separately)."""

    key: str
    size: int
    etag: str
    content_type: str
    last_modified: dt.datetime


class ObjectStore:
    """Objects of one bucket as files: ``objects/<sha256(key)>`` plus ``meta/<sha256(key)>.json``.

    Hashed names keep any key (``/``, ``..``, 1 KiB long) inside the directory. The meta
    file is written last, so an object exists once its meta file does.

    Args:
        root: The bucket's directory.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self._objects = root / "objects"
        self._meta = root / "meta"
        self._objects.mkdir(parents=True, exist_ok=True)
        self._meta.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    @staticmethod
    def _name(key: str) -> str:
        return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()

    @staticmethod
    def _write(path: Path, data: bytes) -> None:
        fd, temp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(data)
            os.replace(temp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise

    def put(self, key: str, data: bytes, content_type: str) -> StoredObject:
        """Store ``data`` at ``key`` (replacing any object there).

        Args:
            key: Object key.
            data: The bytes.
            content_type: Served back as ``Content-Type``.
        """
        name = self._name(key)
        stored = StoredObject(
            key=key,
            size=len(data),
            etag=hashlib.md5(data).hexdigest(),
            content_type=content_type,
            last_modified=dt.datetime.now(dt.UTC).replace(microsecond=0),
        )
        meta = {**stored.__dict__, "last_modified": stored.last_modified.isoformat()}
        with self._lock:
            self._write(self._objects / name, data)
            self._write(self._meta / f"{name}.json", json.dumps(meta).encode())
        return stored

    def head(self, key: str) -> StoredObject | None:
        """The object's metadata, or None when there is no such object.

        Args:
            key: Object key.
        """
        return self._load(self._meta / f"{self._name(key)}.json")

    def read(self, key: str) -> bytes:
        """The object's bytes (call ``head`` first).

        Args:
            key: Object key.
        """
        return (self._objects / self._name(key)).read_bytes()

    def delete(self, key: str) -> bool:
        """Remove the object at ``key``; True if there was one.

        The meta file goes first: the object stops existing before its bytes go.

        Args:
            key: Object key.
        """
        name = self._name(key)
        with self._lock:
            try:
                (self._meta / f"{name}.json").unlink()
            except FileNotFoundError:
                return False
            with contextlib.suppress(FileNotFoundError):
                (self._objects / name).unlink()
        return True

    @staticmethod
    def _load(path: Path) -> StoredObject | None:
        try:
            meta = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        return StoredObject(**{**meta, "last_modified": dt.datetime.fromisoformat(meta["last_modified"])})

    def list(self, prefix: str, start_after: str, limit: int) -> tuple[list[StoredObject], bool]:
        """Objects whose key starts with ``prefix`` and sorts after ``start_after``, in key order.

        Args:
            prefix: Key prefix.
            start_after: Only keys greater than this.
            limit: At most this many.

        Returns:
            The objects and whether more remain.
        """
        found = [obj for path in self._meta.glob("*.json") if (obj := self._load(path)) is not None]
        chosen = sorted(
            (o for o in found if o.key.startswith(prefix) and o.key > start_after), key=lambda o: o.key
        )
        return chosen[:limit], len(chosen) > limit

    def move_to(self, other: ObjectStore, prefixes: tuple[str, ...]) -> int:
        """Move every object whose key starts with one of ``prefixes`` into ``other`` (another
        bucket's directory on the same file system); returns how many moved.

        The bytes go first and the meta file last, so an object is in one bucket or the other;
        one left half-moved by a crash (bytes moved, meta not) is finished by the next call.

        Args:
            other: The bucket they move to.
            prefixes: Key prefixes.
        """
        moved = 0
        for path in self._meta.glob("*.json"):
            stored = self._load(path)
            if stored is None or not stored.key.startswith(prefixes):
                continue
            name = self._name(stored.key)
            with self._lock, other._lock:
                if (self._objects / name).exists():
                    os.replace(self._objects / name, other._objects / name)
                os.replace(path, other._meta / path.name)
            moved += 1
        return moved
