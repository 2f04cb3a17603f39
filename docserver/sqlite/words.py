"""The SQLite file's search copy: the library's words in tables a search reads on disk (``sqlite/search.py``).

Tables ``word_*`` (``schema.py``) hold what the library in PostgreSQL holds (``postgres/``): per searchable document
its metadata and title stems, per chunk its text, length and terms (each stem's weighted count and the impact of
its posting), per (collection, stem) its postings best impact first, its document frequency, each collection's chunk
count and length, and every token's count (the compound splits).  The bundled corpus is copied in too (``corpus``
holds its fingerprint), so one search reads one set of statistics, as the index in memory does.

The copy is derived: triggers on table ``documents`` put every document saved, changed or removed in
``word_pending``, by whatever code wrote it; ``refresh`` brings the copy up to date in the writer's transaction
(``store.py`` and ``library.py`` call it before they commit) and a server brings the bundled corpus in step at
start-up.  A chunk's terms depend on the whole vocabulary: the chunks holding a token whose split a change alters are
analysed again in the same transaction (``postings.redo``), so the copy ranks the same whatever order documents came
in.  A file from before the copy has every document pending; its first write (or the first server that may write
it) builds the copy.
"""

import json
import sqlite3
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence

from textkit import analyze, stems

from .. import postings
from ..corpus import fingerprint
from ..documents import Chunk, Document
from ..ranking import article_of
from ..schema import select_in
from ..vocabulary import Vocabulary, chunk_tokens

__all__ = ["BATCH", "pending", "refresh", "stale_corpus"]

BATCH = 500  # documents analysed and written at a time: a folder of thousands is never held as postings at once
Key = tuple[str, str]  # (collection, doc_id)


def pending(db: sqlite3.Connection) -> bool:
    """Whether documents changed since the copy was brought up to date (or the file has no copy yet)."""
    try:
        return db.execute("SELECT 1 FROM word_pending LIMIT 1").fetchone() is not None
    except sqlite3.OperationalError:  # no such table: a file from before the copy
        return True


def stale_corpus(db: sqlite3.Connection, corpus: Sequence[Document]) -> set[Key]:
    """The corpus documents the copy does not hold as they are (new, changed, or gone from the corpus), leaving
    out those a document of table ``documents`` with the same key replaces."""
    stored = {(c, d): f for c, d, f in db.execute(
        "SELECT collection, doc_id, corpus FROM word_documents WHERE corpus IS NOT NULL")}
    wanted = {(d.collection, d.doc_id): fingerprint(d) for d in corpus}
    replaced = {key for key in wanted if db.execute("SELECT 1 FROM documents WHERE collection = ? AND doc_id = ?",
                                                    key).fetchone()}
    changed = {key for key, value in wanted.items() if key not in replaced and stored.get(key) != value}
    return changed | {key for key in stored if key not in wanted or key in replaced}


def refresh(db: sqlite3.Connection, corpus: Sequence[Document] | None = None) -> int:
    """Inside the caller's write transaction: bring the copy up to date with the pending documents and, given the
    bundled ``corpus``, with it; how many documents were indexed again (0: it was up to date)."""
    keys = {tuple(row) for row in db.execute("SELECT collection, doc_id FROM word_pending")}
    by_key = {(d.collection, d.doc_id): d for d in corpus or ()}
    if corpus is not None:
        keys |= stale_corpus(db, corpus)
    if not keys:
        return 0
    removed = _drop(db, sorted(keys))  # type: ignore[arg-type]
    new = [key for key in sorted(keys) if _stored(db, key) or key in by_key]  # type: ignore[arg-type]
    added: Counter[str] = Counter()
    for document in _documents(db, new, by_key):
        added.update(t for c in document.chunks for x, y in [chunk_tokens(c)] for t in x + y)
    vocabulary, changed = _tokens(db, removed, added)
    _resplit(db, vocabulary, changed)
    df: Counter[Key] = Counter()
    for start in range(0, len(new), BATCH):
        batch = list(_documents(db, new[start:start + BATCH], by_key))
        _write(db, vocabulary, batch, by_key, df)
    _merge(db, "word_stems", ("collection", "stem"), "df", df)
    db.execute("DELETE FROM word_pending")
    return len(keys)


def _stored(db: sqlite3.Connection, key: Key) -> bool:
    return db.execute("SELECT 1 FROM documents WHERE collection = ? AND doc_id = ?", key).fetchone() is not None


def _documents(db: sqlite3.Connection, keys: Sequence[Key], corpus: dict[Key, Document]) -> Iterator[Document]:
    """The documents of ``keys`` as the library holds them: table ``documents`` first, else the corpus."""
    for collection, doc_id in keys:
        row = db.execute("SELECT title, year, url, kind, language, disclaimer, metadata FROM documents "
                         "WHERE collection = ? AND doc_id = ?", (collection, doc_id)).fetchone()
        if row is None:
            yield corpus[(collection, doc_id)]
            continue
        chunks = tuple(Chunk(doc_id, collection, *fields) for fields in db.execute(
            "SELECT chunk_index, title, section, text, url, page, page_end FROM chunks WHERE collection = ? AND "
            "doc_id = ? ORDER BY chunk_index", (collection, doc_id)))
        title, year, url, kind, language, disclaimer, metadata = row
        yield Document(doc_id, collection, title, chunks, year, url, kind, language, disclaimer, json.loads(metadata))


def _merge(db: sqlite3.Connection, table: str, keys: tuple[str, ...], count: str, delta: Counter) -> None:
    """Add ``delta`` (per key, or per tuple of keys) to ``table``'s ``count`` column; a row whose count reaches 0
    is dropped."""
    rows = [(*(key if isinstance(key, tuple) else (key,)), n) for key, n in delta.items() if n]
    if not rows:
        return
    names, where = ", ".join((*keys, count)), " AND ".join(f"{k} = ?" for k in keys)
    db.executemany(f"INSERT INTO {table} ({names}) VALUES ({', '.join('?' * (len(keys) + 1))}) ON CONFLICT "
                   f"({', '.join(keys)}) DO UPDATE SET {count} = {count} + excluded.{count}", rows)
    db.executemany(f"DELETE FROM {table} WHERE {where} AND {count} <= 0", [row[:-1] for row in rows if row[-1] < 0])


def _drop(db: sqlite3.Connection, keys: Sequence[Key]) -> Counter[str]:
    """Delete the copy of the documents ``keys`` with their chunks and postings, taking their counts off the
    statistics; the tokens they held."""
    tokens: Counter[str] = Counter()
    df: Counter[Key] = Counter()
    stats: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for key in keys:
        rows = db.execute("SELECT id, title, section, text, length, terms FROM word_chunks WHERE collection = ? AND "
                          "doc_id = ?", key).fetchall()
        for chunk_id, title, section, text, length, terms in rows:
            text_tokens, header = chunk_tokens(Chunk(key[1], key[0], 0, title, section, text))
            tokens.update(text_tokens + header)
            held = json.loads(terms)
            df.update((key[0], stem) for stem in held)
            stats[key[0]][0] += 1
            stats[key[0]][1] += length
            db.executemany("DELETE FROM word_postings WHERE collection = ? AND stem = ? AND impact = ? AND chunk = ?",
                           [(key[0], stem, impact, chunk_id) for stem, (_, impact) in held.items()])
        db.execute("DELETE FROM word_chunks WHERE collection = ? AND doc_id = ?", key)
        db.execute("DELETE FROM word_documents WHERE collection = ? AND doc_id = ?", key)
    _merge(db, "word_stems", ("collection", "stem"), "df", Counter({k: -n for k, n in df.items()}))
    db.executemany("UPDATE word_stats SET chunks = chunks - ?, length = length - ? WHERE collection = ?",
                   [(n, length, c) for c, (n, length) in stats.items()])
    db.execute("DELETE FROM word_stats WHERE chunks <= 0")
    return tokens


def _tokens(db: sqlite3.Connection, removed: Counter[str], added: Counter[str]) -> tuple[Vocabulary, set[str]]:
    """The token counts with ``removed`` taken off and ``added`` put on, written back: the vocabulary they give and
    the tokens whose terms it changes (``postings.resplit_tokens``)."""
    before = Counter(dict(db.execute("SELECT token, count FROM word_tokens")))
    delta = Counter(added)
    delta.subtract(removed)
    _merge(db, "word_tokens", ("token",), "count", delta)
    if +delta or -delta:  # the words changed: a server reads the vocabulary again (``meta`` 'words')
        db.execute("INSERT INTO meta (key, value) VALUES ('words', 1) ON CONFLICT (key) DO UPDATE SET value = value + 1")
    after = before.copy()
    after.update(delta)
    return postings.resplit_tokens(before, +after)


def _counts(stored: str) -> dict[str, float]:
    """A chunk's weighted count per stem, from its stored terms."""
    return {stem: tf for stem, (tf, _) in json.loads(stored).items()}


def _resplit(db: sqlite3.Connection, vocabulary: Vocabulary, changed: set[str]) -> None:
    """Analyse again the chunks holding a token of ``changed`` and rewrite those whose terms differ."""
    if not changed:
        return
    wanted = sorted({s for token in changed for s in stems(token)})
    ids: set[int] = set()
    for (collection,) in db.execute("SELECT collection FROM word_stats").fetchall():
        for stem in wanted:
            ids.update(chunk for (chunk,) in db.execute(
                "SELECT chunk FROM word_postings WHERE collection = ? AND stem = ?", (collection, stem)))
    stored, wanted_ids = [], sorted(ids)
    for chunk_id, collection, doc_id, index, title, section, text, length, terms in select_in(
            db, "SELECT id, collection, doc_id, chunk_index, title, section, text, length, terms FROM word_chunks "
            "WHERE id IN", wanted_ids):
        stored.append((chunk_id, Chunk(doc_id, collection, index, title, section, text),
                       postings.ChunkTerms(_counts(terms), length), terms))
    old_terms = {chunk_id: terms for chunk_id, _, _, terms in stored}
    redone = postings.redo(vocabulary, ((i, c, t) for i, c, t, _ in stored))
    averages = _averages(db, redone.length)
    for chunk_id, collection, terms in redone.chunks:
        db.executemany("DELETE FROM word_postings WHERE collection = ? AND stem = ? AND impact = ? AND chunk = ?",
                       [(collection, stem, impact, chunk_id) for stem, (_, impact)
                        in json.loads(old_terms[chunk_id]).items()])
        impacts = _impacts(terms, averages[collection])
        _postings(db, chunk_id, collection, impacts)
        db.execute("UPDATE word_chunks SET length = ?, terms = ? WHERE id = ?",
                   (terms.length, _stored_terms(terms, impacts), chunk_id))
    _merge(db, "word_stems", ("collection", "stem"), "df", redone.df)


def _impacts(terms: postings.ChunkTerms, average: float) -> dict[str, float]:
    """Each stem's posting impact under the collection's ``average`` length."""
    return {stem: postings.impact(tf, terms.length, average) for stem, tf in terms.frequencies.items()}


def _stored_terms(terms: postings.ChunkTerms, impacts: dict[str, float]) -> str:
    return json.dumps({s: [tf, impacts[s]] for s, tf in terms.frequencies.items()})


def _postings(db: sqlite3.Connection, chunk_id: int, collection: str, impacts: dict[str, float]) -> None:
    db.executemany("INSERT INTO word_postings (collection, stem, impact, chunk) VALUES (?, ?, ?, ?)",
                   [(collection, stem, impact, chunk_id) for stem, impact in impacts.items()])


def _averages(db: sqlite3.Connection, length: dict[str, float]) -> dict[str, float]:
    """Each collection's average chunk length with ``length`` added to its total."""
    averages = {}
    for collection, added in length.items():
        if added:
            db.execute("UPDATE word_stats SET length = length + ? WHERE collection = ?", (added, collection))
        chunks, total = db.execute("SELECT chunks, length FROM word_stats WHERE collection = ?",
                                   (collection,)).fetchone()
        averages[collection] = total / chunks if chunks else 1.0
    return averages


def _write(db: sqlite3.Connection, vocabulary: Vocabulary, documents: Iterable[Document],
           corpus: dict[Key, Document], df: Counter[Key]) -> None:
    """Insert the copy of ``documents``: each with its chunks, their postings and the statistics they add (``df``:
    counted here, written by the caller once)."""
    documents = list(documents)
    terms = {(d.collection, d.doc_id): [postings.chunk_terms(vocabulary, c) for c in d.chunks] for d in documents}
    added: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for (collection, _), chunk_terms in terms.items():
        added[collection][0] += len(chunk_terms)
        added[collection][1] += sum(t.length for t in chunk_terms)
    db.executemany("INSERT INTO word_stats (collection, chunks, length) VALUES (?, ?, ?) ON CONFLICT (collection) DO "
                   "UPDATE SET chunks = chunks + excluded.chunks, length = length + excluded.length",
                   [(c, n, length) for c, (n, length) in added.items()])
    averages = _averages(db, dict.fromkeys(added, 0.0))
    for d in documents:
        key = (d.collection, d.doc_id)
        stems_ = sorted(frozenset().union(*analyze(d.title)))
        db.execute("INSERT INTO word_documents (collection, doc_id, title, year, url, kind, language, disclaimer, "
                   "metadata, corpus, title_stems) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   (*key, d.title, d.year, d.url, d.kind, d.language, d.disclaimer,
                    json.dumps(dict(d.metadata), ensure_ascii=False, sort_keys=True),
                    fingerprint(d) if corpus.get(key) is d else None, " ".join(stems_)))
        for chunk, chunk_terms in zip(d.chunks, terms[key], strict=True):
            impacts = _impacts(chunk_terms, averages[d.collection])
            chunk_id = db.execute(
                "INSERT INTO word_chunks (collection, doc_id, chunk_index, title, section, text, url, page, page_end, "
                "article, length, terms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (*key, chunk.chunk_index, chunk.title, chunk.section, chunk.text, chunk.url, chunk.page,
                 chunk.page_end, article_of(chunk), chunk_terms.length, _stored_terms(chunk_terms, impacts))).lastrowid
            _postings(db, chunk_id, d.collection, impacts)  # type: ignore[arg-type]
            df.update((d.collection, stem) for stem in chunk_terms.frequencies)
