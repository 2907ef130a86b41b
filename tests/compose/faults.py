"""Faults on the compose topology (issue 19), run by scripts/compose-test.sh against the
stack it brought up (two replicas of ingest-service and agent-service, MinIO or its stand-in
as the blob store). Each fault prints what it checked and the figures; any violation fails
the run. Bounded: every wait has a deadline.

  ingest-kill   kill -9 an ingest-service replica while 50 documents are being ingested:
                every document completed exactly once, no duplicate chunks, no job left
                running, the interrupted jobs re-run by the other replica.
  broker        restart RabbitMQ while chat sessions are created and documents ingested:
                every event arrives (the collection's sessions_count, the outboxes drained),
                the services reconnect without a restart of their own.
  chat-kill     kill -9 the chat-service replica streaming a reply: the client gets an error
                line or a closed stream, the question and the partial reply are stored (by
                the other replica, once the reply's lease lapses), the user's concurrency slot
                is free again, a new completion on the same session works.
  postgres      restart PostgreSQL under read load: every answer is 2xx or a 5xx with the
                standard body within its timeout, never a hang; reads succeed again after,
                without a restart of docchat.

Usage: faults.py <base_url> <api_key> <compose command, e.g. "docker compose -p X -f a.yml">
       [fault ...]   (default: all, in the order above)
"""

import concurrent.futures
import json
import shlex
import subprocess
import sys
import time
import uuid

import requests

BASE, KEY = sys.argv[1].rstrip("/"), sys.argv[2]
COMPOSE = shlex.split(sys.argv[3])
WANTED = sys.argv[4:] or ["ingest-kill", "chat-kill", "broker", "postgres"]
H = {"Authorization": f"Bearer {KEY}"}
# Every request has a deadline: "never a hang past its timeout".
TIMEOUT = 30
failures = []
figures = []


def api(method, path, **kw):
    kw.setdefault("timeout", TIMEOUT)
    return requests.request(method, f"{BASE}/api/v1{path}", headers=H, **kw)


def ok(response):
    if response.status_code >= 300:
        raise RuntimeError(f"{response.request.method} {response.url}: {response.status_code} {response.text[:300]}")
    return response.json() if response.content else None


def compose(*args, check=True):
    return subprocess.run(COMPOSE + list(args), check=check, capture_output=True, text=True, timeout=180)


def sql(database, query):
    out = compose("exec", "-T", "postgres", "psql", "-U", "docchat", "-d", database, "-tAc", query).stdout
    return out.strip()


def expect(what, got, want):
    line = f"{what}: {got}" + ("" if got == want else f" (want {want})")
    print(("    ok   " if got == want else "    FAIL ") + line, flush=True)
    if got != want:
        failures.append(line)


def figure(fault, checked, value):
    figures.append((fault, checked, value))


def wait_for(what, predicate, deadline_s):
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    raise RuntimeError(f"timed out after {deadline_s}s waiting for {what}")


def document_text(i):
    # Distinct, several chunks each, so that embedding takes a while per document.
    words = ["harbour", "lantern", "granite", "orchard", "meadow", "copper", "thistle", "beacon",
             "willow", "quarry", "ember", "saffron", "glacier", "bramble", "falcon", "juniper"]
    lines = [f"Document {i}: notes on the {words[i % 16]} survey, part {i}."]
    for n in range(60):
        lines.append(" ".join(words[(i * 7 + n * k) % 16] for k in range(1, 19)) + f" entry {i}-{n}.")
    return "\n".join(lines).encode()


def ingest(collection_id, count, tag):
    names = []
    for i in range(count):
        name = f"{tag}-{i:03d}.txt"
        up = ok(api("PUT", "/uploads", files={"file": (name, document_text(i), "text/plain")}))
        r = api("POST", f"/uploads/{up['id']}/ingest", params={"collection_id": collection_id})
        if r.status_code != 204:
            raise RuntimeError(f"ingest {name}: {r.status_code} {r.text[:200]}")
        names.append(name)
    return names


def jobs_of(collection_id):
    """The collection's ingestion jobs (not its description's)."""
    page = ok(api("GET", "/admin/jobs", params={"collection_id": collection_id, "kind": "ingest_upload", "limit": 200}))
    return page["jobs"]


def containers(service):
    return compose("ps", "-q", service).stdout.split()


def check_collection(fault, collection_id, names):
    """Every document once, every job completed, no chunk twice."""
    deadline = 240
    settled = wait_for(
        "every ingestion job to finish",
        lambda: (lambda js: js if len(js) == len(names) and all(
            j["status"] not in ("queued", "running") for j in js) else None)(jobs_of(collection_id)),
        deadline,
    )
    statuses = {}
    for j in settled:
        statuses[j["status"]] = statuses.get(j["status"], 0) + 1
    expect("jobs completed", statuses.get("completed", 0), len(names))
    expect("jobs left running or queued", sum(v for k, v in statuses.items() if k in ("running", "queued")), 0)
    docs = sql("docchat_ingest", f"select name from documents where collection_id = '{collection_id}'").split("\n")
    docs = [d for d in docs if d]
    lost = len(set(names) - set(docs))
    doubled = len(docs) - len(set(docs))
    expect("documents lost", lost, 0)
    expect("documents stored twice", doubled, 0)
    dup_chunks = int(sql("docchat_ingest", f"""
        select count(*) from (select document_id, chunk_index from chunks
        where collection_id = '{collection_id}' group by 1, 2 having count(*) > 1) d"""))
    expect("duplicate chunks", dup_chunks, 0)
    reruns = int(sql("docchat_ingest", f"select count(*) from jobs where collection_id = '{collection_id}' and attempts > 1"))
    figure(fault, "documents lost / stored twice / duplicate chunks / jobs left running",
           f"{lost} / {doubled} / {dup_chunks} / {statuses.get('running', 0) + statuses.get('queued', 0)}")
    return reruns


def fault_ingest_kill():
    print("\n--> fault: kill -9 an ingest-service replica during 50 ingestions", flush=True)
    replicas = containers("ingest-service")
    expect("ingest-service replicas", len(replicas), 2)
    col = ok(api("POST", "/collections", json={"name": f"faults-ingest-{uuid.uuid4().hex[:6]}", "description": ""}))
    started = time.monotonic()
    names = ingest(col["id"], 50, "kill")
    # Kill while jobs run (both replicas' workers claim from one table).
    wait_for("a running ingestion job", lambda: any(j["status"] == "running" for j in jobs_of(col["id"])), 60)
    victim = replicas[0]
    subprocess.run(["docker", "kill", "--signal", "KILL", victim], check=True, capture_output=True, timeout=30)
    killed_at = time.monotonic() - started
    print(f"    killed {victim[:12]} at {killed_at:.1f}s", flush=True)
    reruns = check_collection("ingest-kill", col["id"], names)
    settled = time.monotonic() - started
    print(f"    jobs re-run after the kill: {reruns}; settled after {settled:.1f}s", flush=True)
    if reruns < 1:
        failures.append("no job was interrupted by the kill (the fault did not hit a running job)")
    figure("ingest-kill", "jobs re-run by the surviving replica / settle time", f"{reruns} / {settled:.0f} s")
    subprocess.run(["docker", "start", victim], check=False, capture_output=True, timeout=60)


def ip_of(container):
    out = subprocess.run(["docker", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}", container],
                         check=True, capture_output=True, text=True, timeout=30).stdout
    return set(out.split())


def gateway_peers(port):
    """IPv4 peers the gateway holds established connections to on `port`."""
    gateway = containers("gateway")[0]
    table = subprocess.run(["docker", "exec", gateway, "cat", "/proc/net/tcp"], check=True,
                           capture_output=True, text=True, timeout=30).stdout
    peers = set()
    for line in table.splitlines()[1:]:
        fields = line.split()
        remote, state = fields[2], fields[3]
        address, remote_port = remote.split(":")
        if state == "01" and int(remote_port, 16) == port:
            peers.add(".".join(str(b) for b in reversed(bytes.fromhex(address))))
    return peers


def fault_chat_kill():
    print("\n--> fault: kill -9 the chat-service replica streaming a reply", flush=True)
    replicas = containers("chat-service")
    expect("chat-service replicas", len(replicas), 2)
    session = ok(api("POST", "/chats", json={}))["id"]
    question = "Tell me a long story [answer word by word]"
    response = requests.post(f"{BASE}/api/v1/chats/{session}/completions", headers=H, stream=True, timeout=TIMEOUT,
                             json={"message": question, "llm": "scripted", "stream": True})
    expect("stream opened", response.status_code, 200)
    lines = response.iter_lines()
    received = []
    for line in lines:
        if line:
            received.append(json.loads(line))
        if len(received) >= 4:
            break
    peers = gateway_peers(50051)
    streaming = [c for c in replicas if ip_of(c) & peers]
    if len(streaming) != 1:
        raise RuntimeError(f"cannot tell the streaming replica: gateway peers {peers}, chat replicas {[ip_of(c) for c in replicas]}")
    victim = streaming[0]
    t0 = time.monotonic()
    subprocess.run(["docker", "kill", "--signal", "KILL", victim], check=True, capture_output=True, timeout=30)
    ended, error_line = "closed", None
    try:
        for line in lines:
            if line:
                event = json.loads(line)
                if event.get("error"):
                    error_line = event["error"]
                    ended = "error line"
    except requests.RequestException as e:
        ended = f"broken ({type(e).__name__})"
    ended_after = time.monotonic() - t0
    print(f"    killed {victim[:12]}; the stream ended: {ended} after {ended_after:.1f}s {error_line or ''}", flush=True)
    expect("the stream ended within the request timeout", ended_after < TIMEOUT, True)

    def stored():
        messages = ok(api("GET", f"/chats/{session}/messages"))
        replies = [m for m in messages if m.get("reply_to")]
        questions = [m for m in messages if not m.get("reply_to")]
        return (questions, replies) if replies else None

    questions, replies = wait_for("the interrupted reply to be stored", stored, 120)
    stored_after = time.monotonic() - t0
    partial = replies[0].get("content", "")
    expect("the question stored", any(q.get("content") == question for q in questions), True)
    expect("the partial reply stored (what was streamed before the kill)", "word0" in partial, True)
    print(f"    stored after {stored_after:.1f}s: {partial[:80]!r}", flush=True)
    attempts, answered = 0, None
    while attempts < 3 and answered is None:
        attempts += 1
        r = api("POST", f"/chats/{session}/completions", json={"message": "And the capital of France?", "llm": "scripted"})
        if r.status_code == 200:
            answered = r.json()
        else:
            print(f"    new completion attempt {attempts}: {r.status_code} {r.text[:120]}", flush=True)
            time.sleep(1)
    expect("a new completion on the same session (slot freed)", bool(answered and "Paris" in answered.get("body", "")), True)
    expect("attempts the new completion needed", attempts, 1)
    figure("chat-kill", "stream end / reply stored after / new completion",
           f"{ended} after {ended_after:.1f} s / {stored_after:.0f} s / {'ok' if answered else 'FAILED'} in {attempts} attempt(s)")
    subprocess.run(["docker", "start", victim], check=False, capture_output=True, timeout=60)


def fault_broker():
    print("\n--> fault: restart RabbitMQ during session creation and ingestion", flush=True)
    col = ok(api("POST", "/collections", json={"name": f"faults-broker-{uuid.uuid4().hex[:6]}", "description": ""}))
    names = ingest(col["id"], 10, "broker")
    sessions, errors = [], []

    def create_sessions(n):
        for _ in range(n):
            try:
                r = api("POST", "/chats", params={"collection_id": col["id"]}, json={})
                if r.status_code < 300:
                    sessions.append(r.json()["id"])
                else:
                    errors.append(r.status_code)
            except requests.RequestException as e:  # noqa: PERF203
                errors.append(type(e).__name__)
            time.sleep(0.2)

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        load = pool.submit(create_sessions, 60)
        time.sleep(2)
        t0 = time.monotonic()
        compose("restart", "-t", "5", "rabbitmq")
        print(f"    rabbitmq restarted in {time.monotonic() - t0:.1f}s", flush=True)
        load.result(timeout=120)
    names += ingest(col["id"], 5, "broker-after")
    check_collection("broker", col["id"], names)
    # Session events reach ingest-service's counter through the broker (outbox → RabbitMQ).
    count = wait_for(
        "the sessions_count to reach the sessions created",
        lambda: (lambda c: c if c == len(sessions) else None)(
            ok(api("GET", f"/collections/{col['id']}"))["sessions_count"]),
        120,
    ) if sessions else 0
    expect("sessions counted by ingest-service (events delivered)", count, len(sessions))
    def left_in_outboxes():
        return sum(int(sql(db, "select count(*) from outbox_events")) for db in ("docchat_chat", "docchat_ingest"))

    wait_for("the outboxes to drain", lambda: left_in_outboxes() == 0 or None, 60)
    expect("events left in the outboxes", left_in_outboxes(), 0)
    print(f"    sessions created {len(sessions)}, refused during the restart {len(errors)} {sorted(set(map(str, errors)))}")
    figure("broker", "events lost (sessions counted vs created; outboxes drained)",
           f"0 of {len(sessions)}" if count == len(sessions) else f"{len(sessions) - count} of {len(sessions)}")


def fault_postgres():
    print("\n--> fault: restart PostgreSQL under read load", flush=True)
    results = []
    stop = time.monotonic() + 45

    def reader():
        while time.monotonic() < stop:
            t = time.monotonic()
            try:
                r = api("GET", "/collections", params={"limit": 5}, timeout=TIMEOUT)
                body_ok = True
                if r.status_code >= 500:
                    body = r.json()
                    body_ok = body.get("code") == r.status_code and isinstance(body.get("message"), str)
                results.append((r.status_code, time.monotonic() - t, body_ok))
            except requests.RequestException as e:
                results.append((type(e).__name__, time.monotonic() - t, False))
            time.sleep(0.1)

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        readers = [pool.submit(reader) for _ in range(2)]
        time.sleep(3)
        t0 = time.monotonic()
        compose("restart", "-t", "10", "postgres")
        print(f"    postgres restarted in {time.monotonic() - t0:.1f}s", flush=True)
        for f in readers:
            f.result(timeout=120)
    codes = {}
    for code, _, _ in results:
        codes[str(code)] = codes.get(str(code), 0) + 1
    slowest = max(t for _, t, _ in results)
    bad = [r for r in results if not (isinstance(r[0], int) and (r[0] < 300 or (r[0] >= 500 and r[2])))]
    print(f"    {len(results)} requests: {codes}; slowest {slowest:.2f}s", flush=True)
    expect("answers neither 2xx nor a 5xx with the standard body", len(bad), 0)
    expect("answers slower than the 30 s timeout", sum(1 for _, t, _ in results if t >= TIMEOUT), 0)
    recovered = wait_for("reads to succeed again", lambda: api("GET", "/collections").status_code == 200, 60)
    expect("reads succeed after the restart (no docchat restart)", bool(recovered), True)
    figure("postgres", "requests / 5xx with the standard body / other failures / slowest",
           f"{len(results)} / {sum(v for k, v in codes.items() if k.startswith('5'))} / {len(bad)} / {slowest:.1f} s")


FAULTS = {"ingest-kill": fault_ingest_kill, "chat-kill": fault_chat_kill, "broker": fault_broker,
          "postgres": fault_postgres}

for name in WANTED:
    t = time.monotonic()
    try:
        FAULTS[name]()
    except Exception as e:  # noqa: BLE001 - report and go on to the next fault
        failures.append(f"{name}: {e}")
        print(f"    FAIL {name}: {e}", flush=True)
    print(f"    ({name} took {time.monotonic() - t:.0f}s)", flush=True)

print("\nfault | checked | figure")
for fault, checked, value in figures:
    print(f"{fault} | {checked} | {value}")
if failures:
    print(f"\n{len(failures)} failure(s):\n  " + "\n  ".join(failures))
    sys.exit(1)
print("\nall faults passed")
