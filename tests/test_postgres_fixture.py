"""The PostgreSQL fixtures of tests/conftest.py: a real PostgreSQL 16 (the `pgserver` wheel) with pgvector, and a
fresh database per test, as the document library's PostgreSQL engine needs them."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

from tests.conftest import PostgresUrlFactory

psycopg = pytest.importorskip("psycopg")

FIRST: dict[str, str] = {}  # the URL the first of the two isolation tests got, and the table it made there


def test_the_database_has_pgvector(postgres_url: str) -> None:
    parts = urlsplit(postgres_url)
    assert parts.scheme == "postgresql" and parts.path.startswith("/t_")
    assert parse_qs(parts.query)["host"]  # the server's unix socket directory
    with psycopg.connect(postgres_url) as connection:
        row = connection.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
        assert row is not None and row[0]
        assert connection.execute("SHOW server_version_num").fetchone()[0].startswith("16")
        assert connection.execute("SELECT current_database()").fetchone()[0] == parts.path[1:]


def test_vectors_order_by_cosine_distance(postgres_url: str) -> None:
    with psycopg.connect(postgres_url) as connection:
        connection.execute("CREATE TABLE passages (id int PRIMARY KEY, embedding vector(3))")
        connection.execute("INSERT INTO passages VALUES (1, '[1,0,0]'), (2, '[0,1,0]'), (3, '[0.9,0.1,0]')")
        rows = connection.execute(
            "SELECT id, embedding <=> %s::vector AS distance FROM passages ORDER BY distance", ("[1,0,0]",)
        ).fetchall()
    assert [id_ for id_, _ in rows] == [1, 3, 2]
    assert rows[0][1] == pytest.approx(0.0) and rows[2][1] == pytest.approx(1.0)


@pytest.mark.parametrize(("configuration", "word", "stem"), [("dutch", "vergunningen", "vergunn"),
                                                             ("english", "licences", "licenc")])
def test_text_search_configurations(postgres_url: str, configuration: str, word: str, stem: str) -> None:
    with psycopg.connect(postgres_url) as connection:
        vector = connection.execute("SELECT to_tsvector(%s::regconfig, %s)::text", (configuration, word)).fetchone()
    assert vector == (f"'{stem}':1",)


def test_each_test_gets_its_own_database_first(postgres_url: str) -> None:
    with psycopg.connect(postgres_url) as connection:
        connection.execute("CREATE TABLE mine (x int)")
    FIRST["url"] = postgres_url


def test_each_test_gets_its_own_database_second(postgres_url: str) -> None:
    if "url" not in FIRST:
        pytest.skip("runs after test_each_test_gets_its_own_database_first")
    assert postgres_url != FIRST["url"]
    with psycopg.connect(postgres_url) as connection:
        assert connection.execute("SELECT to_regclass('mine')").fetchone() == (None,)
    with pytest.raises(psycopg.OperationalError):  # and the first test's database was dropped after it
        psycopg.connect(FIRST["url"]).close()


def test_the_factory_makes_databases_apart(postgres_url_factory: PostgresUrlFactory) -> None:
    one, two = postgres_url_factory(), postgres_url_factory()
    assert one != two
    with psycopg.connect(one) as first, psycopg.connect(two) as second:
        first.execute("CREATE TABLE only_here (x int)")
        first.commit()
        assert second.execute("SELECT to_regclass('only_here')").fetchone() == (None,)
