"""An OTLP/HTTP trace receiver (POST /v1/traces, protobuf) in a thread: the collector a traced service exports to
in the tests (every span decoded, with its attributes) and in the benchmark (counts only)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class OtlpReceiver:
    def __init__(self, *, decode: bool = True, whole: bool = False) -> None:
        self.spans: list[dict[str, Any]] = []  # when decoding: name, trace, id, parent, service, attributes
        self.whole: list[dict[str, Any]] = []  # with `whole`: each span as protobuf's JSON form (status, events)
        self.exports = self.bytes = 0
        receiver, lock = self, threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                spans = _decode(body) if decode else []
                whole_spans = _whole(body) if whole else []
                with lock:
                    receiver.whole.extend(whole_spans)
                    receiver.exports += 1
                    receiver.bytes += len(body)
                    receiver.spans.extend(spans)
                self.send_response(200)  # an empty ExportTraceServiceResponse: every span accepted
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _decode(body: bytes) -> list[dict[str, Any]]:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    out = []
    for resource in ExportTraceServiceRequest.FromString(body).resource_spans:
        service = {a.key: a.value.string_value for a in resource.resource.attributes}
        for scope in resource.scope_spans:
            out += [{"name": s.name, "trace": s.trace_id.hex(), "id": s.span_id.hex(), "parent": s.parent_span_id.hex(),
                     "service": service.get("service.name"), "attributes": {a.key: _value(a.value) for a in s.attributes}}
                    for s in scope.spans]
    return out


def _whole(body: bytes) -> list[dict[str, Any]]:
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportTraceServiceRequest.FromString(body)
    return [MessageToDict(span) for resource in request.resource_spans for scope in resource.scope_spans
            for span in scope.spans]


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    return getattr(value, kind) if kind else None
