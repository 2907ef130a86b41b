"""The compose stack's Prometheus (docker-compose.yml's `prometheus`, Debian's package):
every replica of every docchat service is a target and up, docchat's alert rules are loaded,
and the series the test's load moves have moved since --before. With --promtool, each
replica's own page (its target's scrape URL, read from this host: the compose network's
addresses are routed here) passes `promtool check metrics` and shows its service's families.

Usage:
  check_prometheus.py <prometheus_url> --targets gateway=1,chat-service=2,... --save FILE
      waits until exactly those targets are up (one per replica), then saves the counters
  check_prometheus.py <prometheus_url> --targets ... --since FILE [--promtool PATH]
      checks again, and that the counters grew since FILE (and each replica's page)
Prints one line per check and ends with `N/M passed`; exits 1 when any failed.
"""

import argparse
import json
import subprocess
import sys
import time

import requests

# Counters the client checks move (summed over every replica).
MOVING = {
    "REST requests": "sum(docchat_http_requests_total)",
    "gRPC calls served": "sum(grpc_server_handled_total)",
    "gRPC calls made": "sum(grpc_client_handled_total)",
    "completions": "sum(docchat_chat_completions_total)",
    "model requests": "sum(docchat_model_requests_total)",
    "ingestion jobs": "sum(docchat_ingest_jobs_total)",
    "events published": "sum(docchat_bus_published_total)",
}


# What each service's page shows after the clients (closed label sets at zero and gauges
# from its start; the gRPC families where every replica served or made calls: the gateway
# calls, and admin-service, a single replica, answers every request's key), besides the
# process collector's series every page has.
GRPC_SERVED = ["grpc_server_handled_total", "grpc_server_handling_seconds"]
FAMILIES = {
    "gateway": ["docchat_http_requests_total", "docchat_http_request_duration_seconds",
                "docchat_http_requests_in_flight", "docchat_limit_refusals_total",
                "grpc_client_handled_total", "grpc_client_handling_seconds"],
    "admin-service": GRPC_SERVED,
    "ingest-service": ["docchat_ingest_jobs_total", "docchat_ingest_jobs_queued",
                       "docchat_ingest_jobs_running", "docchat_ingest_queue_oldest_age_seconds"],
    "chat-service": ["docchat_chat_completions_total", "docchat_chat_active_generations",
                     "docchat_chat_queued_completions"],
    "agent-service": ["docchat_agent_runs_total", "docchat_agent_tool_calls_total",
                      "docchat_sandbox_slots"],
    "scheduler-service": ["docchat_scheduler_claims_total", "docchat_scheduler_executions_total"],
}


def page_families(page):
    return {line.split()[2] for line in page.splitlines() if line.startswith("# TYPE ")}


def query(base, q):
    r = requests.get(f"{base}/api/v1/query", params={"query": q}, timeout=10)
    r.raise_for_status()
    result = r.json()["data"]["result"]
    return float(result[0]["value"][1]) if result else 0.0


def targets(base):
    r = requests.get(f"{base}/api/v1/targets", params={"state": "active"}, timeout=10)
    r.raise_for_status()
    return r.json()["data"]["activeTargets"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("--targets", required=True)
    parser.add_argument("--save")
    parser.add_argument("--since")
    parser.add_argument("--promtool", help="check each replica's page with this promtool")
    args = parser.parse_args()
    base = args.url.rstrip("/")
    want = {k: int(v) for k, v in (p.split("=") for p in args.targets.split(","))}
    results = []

    def check(name, ok, detail=""):
        results.append(bool(ok))
        print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + str(detail) if detail and not ok else ''}")

    # DNS discovery and the first scrapes take a few intervals (5 s each).
    deadline = time.time() + 90
    while True:
        try:
            active = targets(base)
        except requests.RequestException as e:
            active = []
            error = e
        up = {}
        for t in active:
            if t["health"] == "up":
                up[t["labels"]["job"]] = up.get(t["labels"]["job"], 0) + 1
        if up == want or time.time() > deadline:
            break
        time.sleep(2)
    check("every replica is a target, and up", up == want,
          f"up {up}, want {want}; " + "; ".join(f"{t['labels']['job']} {t['scrapeUrl']} {t['health']} {t['lastError']}"
                                                  for t in active if t["health"] != "up") if active else f"{error}")
    rules = requests.get(f"{base}/api/v1/rules", timeout=10).json()["data"]["groups"]
    alerts = [r["name"] for g in rules for r in g["rules"] if r["type"] == "alerting"]
    check("docchat's alert rules are loaded", len(alerts) >= 5, alerts)
    # Every replica exports the process collector's series.
    per_job = {j: query(base, f'count(process_resident_memory_bytes{{job="{j}"}})') for j in want}
    check("each replica's own series are scraped", all(per_job[j] == n for j, n in want.items()), per_job)

    values = {name: query(base, q) for name, q in MOVING.items()}
    if args.save:
        with open(args.save, "w") as f:
            json.dump(values, f)
    if args.since:
        with open(args.since) as f:
            before = json.load(f)
        # A scrape or two after the load ended.
        time.sleep(6)
        values = {name: query(base, q) for name, q in MOVING.items()}
        for name, value in values.items():
            check(f"{name} moved under the load ({before[name]:g} → {value:g})", value > before[name])

    if args.promtool:
        for t in active:
            job, url = t["labels"]["job"], t["scrapeUrl"]
            try:
                page = requests.get(url, timeout=10).text
            except requests.RequestException as e:
                check(f"{job} {url}: its page is read", False, e)
                continue
            lint = subprocess.run([args.promtool, "check", "metrics"], input=page, text=True,
                                  capture_output=True)
            check(f"{job} {url}: promtool check metrics accepts its page", lint.returncode == 0,
                  (lint.stdout + lint.stderr)[:500])
            missing = [f for f in FAMILIES.get(job, []) + ["process_resident_memory_bytes"]
                       if f not in page_families(page)]
            check(f"{job} {url}: its service's families", not missing, missing)

    print(f"{sum(results)}/{len(results)} passed")
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
