"""``Store.put`` writes a document in one statement: a replaced document keeps its creation time
(and so its place in every listing) and takes its new parent, document and write time."""

from __future__ import annotations

from fleet_local._store import Store


def _row(store: Store, id: str) -> tuple[str | None, float, float]:
    with store._lock:
        parent, created, updated = store._db.execute(
            "SELECT parent, created, updated FROM docs WHERE kind = 'job' AND id = ?", (id,)
        ).fetchone()
    return parent, created, updated


def test_a_replaced_document_keeps_its_creation_time_and_place(store: Store) -> None:
    store.put("job", "first", {"n": 1}, parent="p1")
    store.put("job", "second", {"n": 2})
    _, created, updated = _row(store, "first")
    assert created == updated
    with store._lock:  # as if written an hour ago, so a new write time shows
        store._db.execute(
            "UPDATE docs SET created = created - 3600, updated = updated - 3600 WHERE id = 'first'"
        )
    store.put("job", "first", {"n": 3}, parent="p2")
    parent, created_again, updated_again = _row(store, "first")
    assert (parent, created_again) == ("p2", created - 3600)
    assert updated_again > created_again
    assert [doc["n"] for doc in store.list("job")] == [3, 2]  # still listed first
    assert store.list("job", parent="p1") == [] and store.count("job", parent="p2") == 1


def test_a_replaced_document_can_lose_its_parent(store: Store) -> None:
    store.put("job", "a", {"n": 1}, parent="p")
    store.put("job", "a", {"n": 2})
    assert _row(store, "a")[0] is None and store.get("job", "a") == {"n": 2}
