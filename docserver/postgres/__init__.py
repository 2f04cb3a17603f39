"""The document library in PostgreSQL (``DOCSERVER_DATABASE_URL``): any number of document servers, standalone or
embedded in service replicas, on one database see the same library.

``store.PostgresStore`` writes it (ingest, removal, the bundled corpus kept in step), ``search.PostgresIndex``
searches it (BM25 over postings in the database, ``docserver/postings.py``), ``schema`` holds the tables and
counters.  Needs the ``postgres`` extra (psycopg); the SQLite file needs nothing.
"""
