"""Decodes an OTLP/HTTP JSON trace export (stdin) against the official OTLP .proto files.

Google's protobuf (Debian's python3-protobuf), not warden's code, parses the body into
opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest as compiled by protoc from
test/fixtures/otlp-proto: an unknown field, a wrong type or a bad enum fails the decode. The one
rewrite before it is the OTLP/JSON rule the proto3 JSON mapping does not know: trace and span ids
are hex, not base64 (OTLP specification, "JSON Protobuf Encoding"); they are printed back as hex.

usage: otlp_decode.py <protoc> <proto root> < body.json > decoded.json
"""
import base64
import json
import os
import subprocess
import sys
import tempfile

from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory

JSON_IDS = ("traceId", "spanId", "parentSpanId")
PROTO_IDS = ("trace_id", "span_id", "parent_span_id")
MESSAGE = "opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest"


def ids(value, names, convert):
    if isinstance(value, dict):
        return {k: (convert(v) if k in names and isinstance(v, str) else ids(v, names, convert)) for k, v in value.items()}
    if isinstance(value, list):
        return [ids(v, names, convert) for v in value]
    return value


def main():
    protoc, root = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "otlp.desc")
        subprocess.run([protoc, "-I", root, "--include_imports", f"--descriptor_set_out={out}", "opentelemetry/proto/collector/trace/v1/trace_service.proto"], check=True)
        with open(out, "rb") as f:
            files = descriptor_pb2.FileDescriptorSet.FromString(f.read())
    pool = descriptor_pool.DescriptorPool()
    for file in files.file:
        pool.Add(file)
    cls = message_factory.MessageFactory(pool).GetPrototype(pool.FindMessageTypeByName(MESSAGE))
    body = ids(json.load(sys.stdin), JSON_IDS, lambda h: base64.b64encode(bytes.fromhex(h)).decode())
    message = json_format.Parse(json.dumps(body), cls())
    decoded = json_format.MessageToDict(message, preserving_proto_field_name=True)
    json.dump(ids(decoded, PROTO_IDS, lambda b: base64.b64decode(b).hex()), sys.stdout)


main()
