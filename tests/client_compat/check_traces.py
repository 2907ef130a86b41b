"""One trace per request, whole: docchat (standalone, exporting OTLP/HTTP to
tests/client_compat/otlp_receiver.py) ingests a document, answers a RAG question and runs
the agent (one search_documents call, model `scripted` of scripted_upstream.py), and each
shows up as one trace with the spans an engineer needs, every parent link inside it:

- the upload's ingestion: the REST span → the ingest gRPC server span → the job's span in
  the worker (which the bus's doorbell woke: its context is kept with the job);
- the RAG completion: REST → chat's Complete → the completion → retrieval → ingest's Search
  with its stages → the model call with its token counts;
- the agent run: REST → chat → agent's Run → the run → the tool call (search_documents,
  itself reaching ingest) and the model calls;
- the model upstream received `traceparent` headers of those traces.

Each request carries a `traceparent` of the check's own, so its trace is found by id (the
server traced other clients before) and the REST span must continue it.

With --processes (the compose stack: a process per service, RabbitMQ between them), each
trace must also cross the processes it passes through, each exporting its own spans under its
own service name: the context went through gRPC metadata from one process to the next and
through the bus to the replica whose worker ran the job, and the parent links still hold.

Usage: check_traces.py <base_url> <key> --receiver <url> --upstream <url> [--processes]
Prints one line per check and ends with `N/M passed`; exits 1 when any failed.
"""

import argparse
import sys
import time
import uuid

import requests


def kind(span):
    """What a span is, whatever its exported name (`otel.name` renames the REST, model, tool
    and run spans as OpenTelemetry's conventions name them: `POST /api/v1/...`,
    `chat scripted`, `execute_tool search_documents`, `invoke_agent`)."""
    a = span["attributes"]
    if "http.route" in a:
        return "http"
    return {"chat": "model", "execute_tool": "tool", "invoke_agent": "agent.run"}.get(
        a.get("gen_ai.operation.name"), span["name"])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("base_url")
    parser.add_argument("key")
    parser.add_argument("--receiver", required=True)
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--processes", action="store_true",
                        help="docchat runs a process per service (the compose stack)")
    args = parser.parse_args()
    base, auth = args.base_url.rstrip("/"), {"Authorization": f"Bearer {args.key}"}
    results = []

    def check(name, ok, detail=""):
        results.append(bool(ok))
        print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + str(detail) if detail and not ok else ''}")

    def call(method, path, trace=None, **kw):
        headers = dict(auth)
        if trace:
            # The caller's own trace: docchat continues it, so this request's spans are found
            # by its id whatever else the server traced.
            headers["traceparent"] = f"00-{trace[0]}-{trace[1]}-01"
        r = requests.request(method, base + path, headers=headers, timeout=120, **kw)
        assert r.status_code < 300, f"{method} {path}: {r.status_code} {r.text[:300]}"
        return r.json() if r.content else None

    # Traffic: an ingestion, a RAG answer, an agent run, each its own request in a trace of
    # its own (trace id, the caller's span id).
    ingest_trace, rag_trace, agent_trace = ((uuid.uuid4().hex, uuid.uuid4().hex[:16]) for _ in range(3))
    mark = uuid.uuid4().hex[:8]
    cid = call("POST", "/api/v1/collections", json={"name": f"traces {mark}", "description": ""})["id"]
    up = call("PUT", "/api/v1/uploads", files={"file": (f"paris-{mark}.txt", b"Paris is the capital of France.")})
    call("POST", f"/api/v1/uploads/{up['id']}/ingest", trace=ingest_trace, params={"collection_id": cid})
    for _ in range(300):
        docs = call("GET", f"/api/v1/collections/{cid}/documents")
        if docs:
            break
        time.sleep(0.2)
    check("the document was ingested", docs)
    chat = call("POST", "/api/v1/chats", params={"collection_id": cid}, json={})["id"]
    rag = call("POST", f"/api/v1/chats/{chat}/completions", trace=rag_trace, json={
        "message": "What is the capital of France?", "llm": "scripted", "stream": False,
        "rag_config": {"rag_type": "rag"}})
    check("the RAG completion answered", rag.get("body"), rag)
    agent = call("POST", f"/api/v1/chats/{chat}/completions", trace=agent_trace, json={
        "message": "[search the documents] What is the capital of France?", "llm": "scripted",
        "stream": False, "llm_args": {"use_agent": True, "agent_tools": ["search_documents"]}})
    check("the agent run answered through its tool", "FOUND" in (agent.get("body") or ""), agent)

    # The exporter sends in batches: wait for the spans of all three.
    ids = ",".join(t[0] for t in (ingest_trace, rag_trace, agent_trace))

    def spans():
        return requests.get(f"{args.receiver}/spans", params={"trace_id": ids}, timeout=10).json()

    def traces_of(all_spans, name, **attrs):
        return {s["trace_id"] for s in all_spans if kind(s) == name
                and all(s["attributes"].get(k) == v for k, v in attrs.items())}

    # What each trace must hold before it is judged: the kinds of span the checks below look
    # for and, with --processes, a span from each service it crossed.
    expected = {
        ingest_trace[0]: ({"http", "ingest.job"}, {"gateway", "ingest-service"}),
        rag_trace[0]: ({"http", "completion", "retrieval.embed", "retrieval.dense", "retrieval.lexical", "model"},
                       {"gateway", "chat-service", "ingest-service"}),
        agent_trace[0]: ({"http", "agent.run", "tool", "model"},
                         {"gateway", "chat-service", "agent-service", "ingest-service"}),
    }

    def missing(all_spans):
        """What has not arrived yet: each process exports in batches of its own (5 s apart by
        default), so a trace's spans come in pieces, the gateway's REST span among the last."""
        present = {s["span_id"] for s in all_spans}
        callers = {t[1] for t in (ingest_trace, rag_trace, agent_trace)}
        out = []
        for t, (kinds, services) in expected.items():
            mine = [s for s in all_spans if s["trace_id"] == t]
            out += [f"{t[:8]}: no {k} span" for k in sorted(kinds - {kind(s) for s in mine})]
            out += [f"{t[:8]}: the parent of {kind(s)}" for s in mine
                    if s["parent_span_id"] not in present | callers]
            if args.processes:
                out += [f"{t[:8]}: nothing from {p}" for p in sorted(services - {s["service"] for s in mine})]
        return out

    deadline = time.time() + 60
    while (late := missing(got := spans())) and time.time() < deadline:
        time.sleep(0.5)
    if late:
        print(f"after a minute, still missing: {late}")
    time.sleep(1.0)  # a moment more: a span that came in after the rest would show below
    got = spans()
    by_trace = {}
    for s in got:
        by_trace.setdefault(s["trace_id"], []).append(s)

    def whole(trace):
        """Every span's parent is in the trace but the REST request's, whose parent is the
        caller's span (its traceparent)."""
        trace_id, caller = trace
        spans_ = by_trace.get(trace_id, [])
        ids = {s["span_id"] for s in spans_}
        outside = [s for s in spans_ if s["parent_span_id"] not in ids]
        ok = (len(outside) == 1 and kind(outside[0]) == "http"
              and outside[0]["parent_span_id"] == caller)
        return ok, [(kind(s), s["parent_span_id"]) for s in outside]

    def names(trace_id):
        return [kind(s) for s in by_trace.get(trace_id, [])]

    def path_of(trace_id, child):
        """The names from `child` up to the root."""
        index = {s["span_id"]: s for s in by_trace.get(trace_id, [])}
        out, s = [], child
        while s:
            out.append(kind(s) if kind(s) != "grpc" else "grpc " + s["attributes"].get("path", "?"))
            s = index.get(s["parent_span_id"])
        return list(reversed(out))

    # The ingestion.
    t = ingest_trace[0]
    check("ingestion: the worker's job continues the request's trace", t in traces_of(got, "ingest.job"))
    ok, why = whole(ingest_trace)
    check("ingestion: whole, rooted at its REST request", ok, why)
    job = next((s for s in by_trace.get(t, []) if kind(s) == "ingest.job"), None)
    check("ingestion: REST → ingest gRPC → the worker's job", job and any("IngestService" in p for p in path_of(t, job)[1:-1]),
          job and path_of(t, job))

    # The RAG completion.
    t = rag_trace[0]
    check("RAG completion: its completion continues the request's trace",
          t in traces_of(got, "completion", rag_type="rag"))
    ok, why = whole(rag_trace)
    check("RAG completion: whole, rooted at its REST request", ok, why)
    trace = by_trace.get(t, [])
    search = [s for s in trace if kind(s) == "grpc" and s["attributes"].get("path", "").endswith("IngestService/Search")]
    check("RAG completion: its retrieval reaches ingest's Search", search, names(t))
    if search:
        path = path_of(t, search[0])
        check("RAG completion: REST → chat Complete → completion → retrieval → Search",
              path[0] == "http" and "grpc /docchat.chat.v1.ChatService/Complete" in path
              and path.index("completion") < path.index("retrieval"), path)
    stages = {kind(s) for s in trace}
    for stage in ["retrieval.embed", "retrieval.dense", "retrieval.lexical"]:
        check(f"RAG completion: stage span {stage}", stage in stages, sorted(stages))
    model = [s for s in trace if kind(s) == "model"]
    check("RAG completion: the model call, with its model and token counts",
          model and model[0]["attributes"].get("gen_ai.request.model") == "scripted"
          and model[0]["attributes"].get("gen_ai.usage.input_tokens", 0) > 0
          and model[0]["attributes"].get("gen_ai.usage.output_tokens", 0) > 0,
          [m["attributes"] for m in model])

    # The agent run.
    t = agent_trace[0]
    check("agent run: its tool call continues the request's trace",
          t in traces_of(got, "tool", **{"gen_ai.tool.name": "search_documents"}))
    ok, why = whole(agent_trace)
    check("agent run: whole, rooted at its REST request", ok, why)
    trace = by_trace.get(t, [])
    tool = next((s for s in trace if kind(s) == "tool"), None)
    path = path_of(t, tool) if tool else []
    check("agent run: REST → chat → agent Run → the run → the tool call",
          path and path[0] == "http" and any(p.endswith("AgentService/Run") for p in path)
          and path.index("agent.run") < path.index("tool"), path)
    check("agent run: the tool's search reaches ingest",
          any(kind(s) == "grpc" and s["attributes"].get("path", "").endswith("IngestService/Search")
              and tool and tool["span_id"] in [x["span_id"] for x in by_trace[t]] for s in trace), names(t))
    agent_models = [s for s in trace if kind(s) == "model"]
    check("agent run: its model calls (a tool call, then the answer)", len(agent_models) >= 2, names(t))

    # Across processes: each trace's spans come from every service it passed through.
    if args.processes:
        crossed = {
            "ingestion": (ingest_trace[0], {"gateway", "ingest-service"}),
            "RAG completion": (rag_trace[0], {"gateway", "chat-service", "ingest-service"}),
            "agent run": (agent_trace[0], {"gateway", "chat-service", "agent-service", "ingest-service"}),
        }
        for what, (t, services) in crossed.items():
            seen_services = {s["service"] for s in by_trace.get(t, [])}
            check(f"{what}: spans from {', '.join(sorted(services))}", services <= seen_services,
                  sorted(x or "?" for x in seen_services))
        # Every hop between two processes keeps the trace: a span whose parent is another
        # process's span (a gRPC server's or a bus consumer's) exists for each service but
        # the gateway.
        for what, (t, services) in crossed.items():
            index = {s["span_id"]: s for s in by_trace.get(t, [])}
            entered = {s["service"] for s in by_trace.get(t, [])
                       if s["parent_span_id"] in index and index[s["parent_span_id"]]["service"] != s["service"]}
            check(f"{what}: entered {', '.join(sorted(services - {'gateway'}))} from another process",
                  services - {"gateway"} <= entered, sorted(x or "?" for x in entered))

    # The upstream saw docchat's traces.
    seen = requests.get(f"{args.upstream}/traceparents", timeout=10).json()
    traced = {p.split("-")[1] for p in seen if p}
    check("the model upstream received traceparent headers of these traces",
          agent_trace[0] in traced and rag_trace[0] in traced,
          f"{len(traced)} traces seen upstream")

    print(f"{sum(results)}/{len(results)} passed")
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
