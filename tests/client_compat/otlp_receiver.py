"""A small OTLP/HTTP trace receiver for the trace check: POST /v1/traces takes what an
OpenTelemetry exporter sends (protobuf ExportTraceServiceRequest, decoded with PyPI's
opentelemetry-proto; gzip accepted) and keeps every span; GET /spans answers them as JSON
(trace_id, span_id, parent_span_id in hex, name, kind, service, attributes), or only those
of some traces with `?trace_id=<hex>,<hex>` (a compose run exports many). Prints its port.

Usage: otlp_receiver.py [host]  (runs until killed, on host: 127.0.0.1 unless given; the
compose test gives the Docker bridge's address, which the containers reach)
"""

import gzip
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from urllib.parse import parse_qs, urlsplit

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

SPANS = []
LOCK = threading.Lock()


def value(v):
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: value(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, kind) if kind else None


def spans_of(request):
    for resource_spans in request.resource_spans:
        resource = {kv.key: value(kv.value) for kv in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                yield {
                    "trace_id": span.trace_id.hex(),
                    "span_id": span.span_id.hex(),
                    "parent_span_id": span.parent_span_id.hex(),
                    "name": span.name,
                    "kind": span.kind,
                    "service": resource.get("service.name"),
                    "start": span.start_time_unix_nano,
                    "end": span.end_time_unix_nano,
                    "attributes": {kv.key: value(kv.value) for kv in span.attributes},
                }


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        if self.headers.get("content-encoding") == "gzip":
            body = gzip.decompress(body)
        if self.path != "/v1/traces":
            return self.answer(404, b"", "text/plain")
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        with LOCK:
            SPANS.extend(spans_of(request))
        self.answer(200, ExportTraceServiceResponse().SerializeToString(), "application/x-protobuf")

    def do_GET(self):
        url = urlsplit(self.path)
        if url.path != "/spans":
            return self.answer(404, b"", "text/plain")
        wanted = {t for v in parse_qs(url.query).get("trace_id", []) for t in v.split(",") if t}
        with LOCK:
            out = json.dumps([s for s in SPANS if not wanted or s["trace_id"] in wanted]).encode()
        self.answer(200, out, "application/json")

    def answer(self, status, body, content_type):
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def main():
    host = sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1"
    server = ThreadingHTTPServer((host, 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
