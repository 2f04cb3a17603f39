"""PDFs written byte by byte for tests and the benchmark's generated corpus: hostile ones (loops, lies, truncation)
and image-only pages, which no PDF library would write on purpose, and plain text pages without a PDF library."""

from __future__ import annotations


def build_pdf(objects: list[bytes], trailer: bytes = b"") -> bytes:
    """A PDF of the given objects (numbered from 1, the catalog first) with a correct cross-reference table;
    `trailer` adds entries to the trailer dictionary (an /Encrypt, say)."""
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R %s >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, trailer, xref)
    return bytes(out)
