"""The library's words in the database: token counts, and chunks split again when they change.

A chunk's terms depend on the whole library's vocabulary (``compounds.py`` splits a compound into words the
library knows, and breaks ties by their counts).  The index in memory works every chunk's terms out again when the
vocabulary changes (``lexical.py``); the database does the same in the transaction of the change: every token
whose terms differ under the new counts is looked up, and the chunks holding it (by its stems' postings) are
analysed again, their postings, counts and statistics replaced where their terms changed.  So the library ranks
the same whatever order its documents came in.
"""

from collections import Counter
from collections.abc import Sequence

import psycopg

from textkit import stems

from .. import postings
from ..documents import Chunk
from ..vocabulary import Vocabulary

__all__ = ["merge_counts", "resplit", "update_vocabulary"]


def merge_counts(db: psycopg.Connection, table: str, keys: tuple[str, ...], count: str,
                 rows: Sequence[tuple[object, ...]]) -> None:
    """Add ``rows`` (keys..., amount) to ``table``'s ``count`` column (a row created for a new key, one dropped
    when its count reaches 0): copied into a temporary table and merged in one statement."""
    if not rows:
        return
    columns = ", ".join((*keys, count))
    db.execute(f"CREATE TEMPORARY TABLE IF NOT EXISTS merge_{table} (LIKE {table}) ON COMMIT DROP")
    with db.cursor().copy(f"COPY merge_{table} ({columns}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)
    db.execute(f"INSERT INTO {table} ({columns}) SELECT {columns} FROM merge_{table} ON CONFLICT ({', '.join(keys)}) "
               f"DO UPDATE SET {count} = {table}.{count} + excluded.{count}")
    db.execute(f"DELETE FROM {table} WHERE {count} <= 0")
    db.execute(f"TRUNCATE merge_{table}")


def update_vocabulary(db: psycopg.Connection, removed: Counter[str], added: Counter[str]
                      ) -> tuple[Vocabulary, set[str]]:
    """The library's token counts with ``removed`` taken off and ``added`` put on, written back: the vocabulary
    they give, and the tokens of the library before whose terms it changes."""
    before = Counter(dict(db.execute("SELECT token, count FROM tokens").fetchall()))
    delta = Counter(added)
    delta.subtract(removed)
    merge_counts(db, "tokens", ("token",), "count", [(token, n) for token, n in delta.items() if n])
    after = before.copy()
    after.update(delta)
    return postings.resplit_tokens(before, +after)


def resplit(db: psycopg.Connection, vocabulary: Vocabulary, changed: set[str]) -> int:
    """Analyse again the stored chunks that hold a token of ``changed`` and replace the terms of those whose terms
    differ under ``vocabulary``; how many were replaced."""
    if not changed:
        return 0
    collections = [row[0] for row in db.execute("SELECT collection FROM collection_stats")]
    rows = db.execute(
        "SELECT id, collection, doc_id, chunk_index, title, section, text, length, stems, tfs FROM chunks WHERE id IN "
        "(SELECT chunk FROM postings WHERE collection = ANY(%s) AND stem = ANY(%s))",
        (collections, sorted({s for token in changed for s in stems(token)}))).fetchall()
    redone = postings.redo(vocabulary, (
        (chunk_id, Chunk(doc_id, collection, index, title, section, text),
         postings.ChunkTerms(dict(zip(old_stems, old_tfs, strict=True)), old_length))
        for chunk_id, collection, doc_id, index, title, section, text, old_length, old_stems, old_tfs in rows))
    if not redone.chunks:
        return 0
    averages = _averages(db, redone.length)
    db.execute("DELETE FROM postings WHERE chunk = ANY(%s)", ([chunk_id for chunk_id, _, _ in redone.chunks],))
    with db.cursor().copy("COPY postings (collection, stem, impact, chunk, tf) FROM STDIN") as copy:
        for chunk_id, collection, terms in redone.chunks:
            for stem, tf in terms.frequencies.items():
                copy.write_row((collection, stem, postings.impact(tf, terms.length, averages[collection]), chunk_id,
                                tf))
    with db.cursor() as cursor:
        cursor.executemany("UPDATE chunks SET length = %s, stems = %s, tfs = %s WHERE id = %s",
                           [(terms.length, sorted(terms.frequencies),
                             [terms.frequencies[s] for s in sorted(terms.frequencies)], chunk_id)
                            for chunk_id, _, terms in redone.chunks])
    merge_counts(db, "stems", ("collection", "stem"), "df", [(c, s, n) for (c, s), n in redone.df.items() if n])
    return len(redone.chunks)


def _averages(db: psycopg.Connection, length: dict[str, float]) -> dict[str, float]:
    """Each collection's average chunk length with ``length`` added to its total."""
    averages = {}
    for collection, added in length.items():
        row = db.execute("UPDATE collection_stats SET length = length + %s WHERE collection = %s "
                         "RETURNING chunks, length", (added, collection)).fetchone()
        averages[collection] = row[1] / row[0] if row and row[0] else 1.0
    return averages
