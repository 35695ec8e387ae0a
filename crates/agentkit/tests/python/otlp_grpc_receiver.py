"""An OTLP gRPC collector for the tests: the official grpcio server with the
opentelemetry-proto service stubs. Prints its port on the first line, then
one JSON line per export it receives: the signal, the span names with their
attributes (traces) or the metric names (metrics), and the request's
metadata keys."""

import json
import sys
from concurrent import futures

import grpc
from opentelemetry.proto.collector.metrics.v1 import (
    metrics_service_pb2,
    metrics_service_pb2_grpc,
)
from opentelemetry.proto.collector.trace.v1 import (
    trace_service_pb2,
    trace_service_pb2_grpc,
)


def value(v):
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: value(kv.value) for kv in v.kvlist_value.values}
    if kind == "bytes_value":
        return v.bytes_value.hex()
    return getattr(v, kind) if kind else None


def emit(record):
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


class Traces(trace_service_pb2_grpc.TraceServiceServicer):
    def Export(self, request, context):
        spans = []
        for rs in request.resource_spans:
            resource = {a.key: value(a.value) for a in rs.resource.attributes}
            for ss in rs.scope_spans:
                for span in ss.spans:
                    spans.append(
                        {
                            "name": span.name,
                            "traceId": span.trace_id.hex(),
                            "attributes": {a.key: value(a.value) for a in span.attributes},
                            "resource": resource,
                        }
                    )
        metadata = sorted(k for k, _ in context.invocation_metadata())
        emit({"signal": "traces", "spans": spans, "metadata": metadata})
        return trace_service_pb2.ExportTraceServiceResponse()


class Metrics(metrics_service_pb2_grpc.MetricsServiceServicer):
    def Export(self, request, context):
        names = sorted(
            {m.name for rm in request.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
        )
        emit({"signal": "metrics", "metrics": names})
        return metrics_service_pb2.ExportMetricsServiceResponse()


def main():
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Traces(), server)
    metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(Metrics(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    emit({"port": port})
    server.wait_for_termination()


if __name__ == "__main__":
    main()
