"""docchat's Prometheus page after real traffic: the probe listener's /metrics of the
standalone docchat the client checks (and schemathesis) just drove. Checks that promtool
accepts the page, that every family of docs/metrics.md is there, that the traffic moved the
ones it passed through, and that labels stay bounded (route templates, never raw paths or
ids, however random the URLs schemathesis sent).

Usage: check_metrics.py <probe_url> [--promtool promtool]
Prints one line per check and ends with `N/M passed`; exits 1 when any failed.
"""

import argparse
import re
import subprocess
import sys

import requests

# Every family an operator's dashboards and alerts use (docs/metrics.md); a family shows once
# it has a series (closed label sets are there at zero from the start).
FAMILIES = [
    "docchat_http_requests_total",
    "docchat_http_request_duration_seconds",
    "docchat_http_requests_in_flight",
    "docchat_limit_refusals_total",
    "grpc_server_handled_total",
    "grpc_server_handling_seconds",
    "grpc_client_handled_total",
    "grpc_client_handling_seconds",
    "docchat_chat_completions_total",
    "docchat_chat_time_to_first_token_seconds",
    "docchat_chat_generation_seconds",
    "docchat_chat_queue_wait_seconds",
    "docchat_chat_queued_completions",
    "docchat_chat_active_generations",
    "docchat_llm_tokens_total",
    "docchat_llm_cost_total",
    "docchat_model_requests_total",
    "docchat_model_request_duration_seconds",
    "docchat_ingest_jobs_total",
    "docchat_ingest_jobs_running",
    "docchat_ingest_jobs_queued",
    "docchat_ingest_queue_oldest_age_seconds",
    "docchat_ingest_pages_total",
    "docchat_ingest_bytes_total",
    "docchat_ingest_stage_seconds",
    "docchat_ocr_pages_total",
    "docchat_ocr_page_seconds",
    "docchat_embed_texts_total",
    "docchat_embed_batch_seconds",
    "docchat_retrieval_stage_seconds",
    "docchat_agent_runs_total",
    "docchat_agent_run_seconds",
    "docchat_agent_tool_calls_total",
    "docchat_sandbox_slots",
    "docchat_scheduler_claims_total",
    "docchat_scheduler_executions_total",
    "docchat_scheduler_claim_lag_seconds",
    "docchat_bus_published_total",
    "docchat_bus_delivered_total",
    "docchat_outbox_backlog_events",
    "docchat_outbox_oldest_event_age_seconds",
    "docchat_outbox_relayed_total",
    "process_resident_memory_bytes",
]

# What the client checks surely did: (family, labels, at least).
MOVED = [
    ("docchat_http_requests_total", {"status": "200"}, 3),
    ("grpc_server_handled_total", {"grpc_code": "OK"}, 3),
    ("grpc_client_handled_total", {"grpc_code": "OK"}, 3),
    ("docchat_chat_completions_total", {"outcome": "ok"}, 1),
    ("docchat_chat_time_to_first_token_seconds_count", {}, 1),
    ("docchat_model_requests_total", {"kind": "chat", "outcome": "ok"}, 1),
    ("docchat_llm_tokens_total", {"direction": "prompt"}, 1),
    ("docchat_ingest_jobs_total", {"outcome": "done"}, 1),
    ("docchat_ingest_pages_total", {}, 1),
    ("docchat_ingest_stage_seconds_count", {"stage": "embed"}, 1),
    # The h2oGPTe check's scanned PDF page, photo and decompression bomb.
    ("docchat_ocr_pages_total", {"outcome": "ok"}, 2),
    ("docchat_ocr_pages_total", {"outcome": "failed"}, 1),
    ("docchat_ingest_stage_seconds_count", {"stage": "ocr"}, 2),
    ("docchat_retrieval_stage_seconds_count", {"stage": "total"}, 1),
    ("docchat_bus_published_total", {}, 1),
    ("docchat_outbox_relayed_total", {}, 1),
]

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)


def parse(page):
    samples = []
    for line in page.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        if not m:
            raise ValueError(f"not a sample line: {line!r}")
        labels = dict(LABEL.findall(m.group(2) or ""))
        samples.append((m.group(1), labels, float(m.group(3))))
    return samples


def total(samples, name, labels):
    return sum(v for n, ls, v in samples if n == name and all(ls.get(k) == w for k, w in labels.items()))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("probe_url")
    parser.add_argument("--promtool", default="promtool")
    args = parser.parse_args()
    results = []

    def check(name, ok, detail=""):
        results.append(ok)
        print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail and not ok else ''}")

    r = requests.get(f"{args.probe_url}/metrics", timeout=10)
    check("GET /metrics is 200 in the text format", r.status_code == 200
          and r.headers.get("content-type", "").startswith("text/plain; version=0.0.4"),
          f"{r.status_code} {r.headers.get('content-type')}")
    page = r.text
    lint = subprocess.run([args.promtool, "check", "metrics"], input=page, text=True, capture_output=True)
    check("promtool check metrics accepts the page", lint.returncode == 0, lint.stdout + lint.stderr)
    samples = parse(page)
    names = {n for n, _, _ in samples}
    for family in FAMILIES:
        present = family in names or any(n.startswith(family + "_") for n in names)
        check(f"family {family}", present)
    for name, labels, least in MOVED:
        got = total(samples, name, labels)
        check(f"{name}{labels} >= {least}", got >= least, f"{got}")
    routes = {ls["route"] for n, ls, _ in samples if n == "docchat_http_requests_total"}
    raw = sorted(r for r in routes if UUID.search(r) or "%" in r)
    check(f"routes are templates ({len(routes)} of them)", not raw and len(routes) < 300, f"raw paths: {raw[:5]}")
    # Bounded means set by the API's shape, not by the traffic: the HTTP families' series are
    # route templates × methods × statuses (the API's size, which grows with its routes), and
    # everything else is a small fixed set.
    http = [(n, ls) for n, ls, _ in samples if n.startswith("docchat_http_")]
    pairs = {(ls["route"], ls.get("method")) for _, ls in http if "route" in ls}
    statuses = {ls["status"] for _, ls in http if "status" in ls}
    other = len(samples) - len(http)
    check(f"series stay bounded ({len(samples)}: {len(pairs)} route×method pairs, "
          f"{len(statuses)} statuses, {other} outside the HTTP families)",
          len(pairs) <= 7 * len(routes) and len(statuses) <= 30 and other < 10000)
    ids = sorted({v for _, ls, _ in samples for v in ls.values() if UUID.search(v)})
    check("no label value holds an id", not ids, f"{ids[:5]}")

    print(f"{sum(results)}/{len(results)} passed")
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
