"""The library's SQLite file searched on disk (the embedded default): ``words`` keeps its search copy (postings,
statistics, the bundled corpus) in the file up to date, ``search.SqliteIndex`` searches it without holding the
library in memory.  The documents themselves and the rest of the file: ``docserver/store.py`` and ``schema.py``.
"""
