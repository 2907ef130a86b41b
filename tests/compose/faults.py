"""Faults on the compose topology (issue 19), run by scripts/compose-test.sh against the
stack it brought up (two replicas of ingest-, chat-, agent- and scheduler-service, MinIO or its
stand-in as the blob store). Each fault prints what it checked and the figures; any violation fails
the run. Bounded: every wait has a deadline.

  ingest-kill   kill -9 an ingest-service replica while 50 documents are being ingested:
                every document completed exactly once, no duplicate chunks, no job left
                running, the interrupted jobs re-run by the other replica.
  chat-kill     kill -9 the chat-service replica streaming a reply: the client gets an error
                line or a closed stream, the question and the partial reply are stored (by
                the other replica, once the reply's lease lapses), the user's concurrency slot
                is free again, a new completion on the same session works.
  reattach      a second gateway beside the compose one, each calling a different chat-service
                replica: a client reads part of a stream through the first, drops it, and
                re-attaches through the second after the last seq it has: exactly the rest, byte
                for byte the stored reply, no seq missing or repeated; then, attached through the
                second, the replica generating a reply is killed: the re-attached stream ends
                with the interrupted error and the recovered text, as the stored reply says.
  agent-kill    kill -9 the agent-service replica (named by the run's lease row) while the
                agent's python tool runs: the completion answers cleanly, the run's job ends
                `stale` (no run left running, no lease left), a new agent completion on the
                same session works.
  scheduler-kill  24 once-tasks due at the same second with two replicas claiming: each
                runs exactly once; then kill -9 the replica running a slow execution: it ends
                failed (not doubled, not left running), the task idle, and the other replica
                runs it again on demand.
  broker        restart RabbitMQ while chat sessions are created and documents ingested:
                every event arrives (the collection's sessions_count, the outboxes drained),
                the services reconnect without a restart of their own.
  postgres      restart PostgreSQL under read load: every answer is 2xx or a 5xx with the
                standard body within its timeout, never a hang; reads succeed again after,
                without a restart of docchat.
  sigterm       under a mixed load (reads, RAG and agent completions, uploads), `docker stop`
                one replica of each service in turn (the gateway too): each exits 0 within
                the grace period, no request in flight breaks, requests sent meanwhile are
                answered (2xx, or a 5xx with the standard body) except, for the single
                gateway, refused connections while it is down.

Usage: faults.py <base_url> <api_key> <compose command, e.g. "docker compose -p X -f a.yml">
       [fault ...]   (default: all, in the order above)
"""

import concurrent.futures
import json
import subprocess
import sys
import time
import uuid

import requests

import stack
from stack import TIMEOUT, api, compose, connected_to, containers, expect, figure, ip_of, ok, sql, wait_for

stack.connect(sys.argv[1], sys.argv[2], sys.argv[3])
WANTED = sys.argv[4:] or ["ingest-kill", "chat-kill", "reattach", "agent-kill", "scheduler-kill", "broker", "postgres",
                          "sigterm"]


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
        stack.failures.append("no job was interrupted by the kill (the fault did not hit a running job)")
    figure("ingest-kill", "jobs re-run by the surviving replica / settle time", f"{reruns} / {settled:.0f} s")
    stack.restart_and_wait(victim)


def gateway_peers(port, clients=("gateway",)):
    """IPv4 peers the containers of `clients` (the gateway) hold established connections to on
    `port`."""
    peers = set()
    for client in (c for service in clients for c in containers(service)):
        peers |= connected_to(client, port)
    return peers


def fault_chat_kill():
    print("\n--> fault: kill -9 the chat-service replica streaming a reply", flush=True)
    replicas = containers("chat-service")
    expect("chat-service replicas", len(replicas), 2)
    session = ok(api("POST", "/chats", json={}))["id"]
    question = "Tell me a long story [answer word by word]"
    response = requests.post(f"{stack.BASE}/api/v1/chats/{session}/completions", headers=stack.H, stream=True, timeout=TIMEOUT,
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
    stack.restart_and_wait(victim)


def jsonl_lines(response, limit=None):
    """The JSON lines of a streamed reply (the first `limit` of them)."""
    out = []
    for line in response.iter_lines():
        if line:
            out.append(json.loads(line))
        if limit and len(out) >= limit:
            break
    return out


def fault_reattach():
    print("\n--> fault: a stream dropped on one gateway and chat replica, picked up on the other", flush=True)
    second, second_base = stack.second_gateway()
    try:
        generating, other = stack.gateways_apart(second, second_base)
        print(f"    gateway -> chat {generating[:12]}, second gateway -> chat {other[:12]}", flush=True)

        def ask(question):
            session = ok(api("POST", "/chats", json={}))["id"]
            response = requests.post(f"{stack.BASE}/api/v1/chats/{session}/completions", headers=stack.H, stream=True,
                                     timeout=TIMEOUT, json={"message": question, "llm": "scripted", "stream": True})
            expect("stream opened", response.status_code, 200)
            return session, response

        def attach(question_id, after, timeout):
            r = requests.get(f"{second_base}/api/v1/messages/{question_id}/stream", params={"after": after},
                             headers=stack.H, stream=True, timeout=timeout)
            expect("re-attached", r.status_code, 200)
            return r

        def stored_reply(session):
            replies = [m for m in ok(api("GET", f"/chats/{session}/messages")) if m.get("reply_to")]
            return replies[0] if replies else None

        def check_whole(what, lines, reply):
            seqs = [line["seq"] for line in lines]
            expect(f"{what}: seqs 1..{len(lines)}, none missing or repeated", seqs, list(range(1, len(lines) + 1)))
            text = "".join(line.get("body", "") for line in lines)
            expect(f"{what}: the text is byte for byte the stored reply", text == reply["content"], True)
            expect(f"{what}: the last line names the stored reply", lines[-1].get("message_id"), reply["id"])

        # 1. Dropped and picked up on the other replica (which follows the progress row).
        session, response = ask("Count for me [answer at a pace]")
        first = jsonl_lines(response, 4)
        response.close()
        rest = jsonl_lines(attach(first[0]["question_id"], first[-1]["seq"], TIMEOUT))
        reply = wait_for("the reply to be stored", lambda: stored_reply(session), 60)
        check_whole("dropped and re-attached", first + rest, reply)
        expect("the reply completed, the drop stopped nothing", (rest[-1].get("finished"), rest[-1].get("error")), (True, None))
        dropped = f"{len(first)} read, dropped, {len(rest)} after re-attaching"

        # 2. Attached through the other replica while the generating one is killed.
        session, response = ask("Tell me a long story [answer word by word]")
        first = jsonl_lines(response, 4)
        attached = attach(first[0]["question_id"], first[-1]["seq"], 120)
        lines = attached.iter_lines()
        rest = []
        for line in lines:
            if line:
                rest.append(json.loads(line))
                break
        t0 = time.monotonic()
        subprocess.run(["docker", "kill", "--signal", "KILL", generating], check=True, capture_output=True, timeout=30)
        response.close()
        rest += [json.loads(line) for line in lines if line]
        ended_after = time.monotonic() - t0
        reply = stored_reply(session)
        expect("the interrupted reply is stored", reply is not None, True)
        last = rest[-1] if rest else {}
        expect("the re-attached stream ends with the interrupted error",
               "interrupted" in (last.get("error") or ""), True)
        check_whole("attached through the survivor", first + rest, reply)
        print(f"    killed {generating[:12]}; the re-attached stream ended after {ended_after:.1f}s with "
              f"{len(first) + len(rest)} lines: {last.get('error')!r}", flush=True)
        figure("reattach", "dropped and re-attached: lines / killed while attached: stream ended after",
               f"{dropped}, byte for byte / {ended_after:.0f} s, interrupted, text as stored")
        stack.restart_and_wait(generating)
    finally:
        subprocess.run(["docker", "rm", "-f", second], capture_output=True, timeout=60)


def agent_jobs():
    page = ok(api("GET", "/admin/jobs", params={"kind": "agent_run", "limit": 200}))
    return {j["id"]: j for j in page["jobs"]}


def fault_agent_kill():
    print("\n--> fault: kill -9 the agent-service replica in a tool run", flush=True)
    replicas = containers("agent-service")
    expect("agent-service replicas", len(replicas), 2)
    session = ok(api("POST", "/chats", json={}))["id"]
    agent = {"use_agent": True, "agent_tools": ["python"]}
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        t0 = time.monotonic()
        asked = pool.submit(api, "POST", f"/chats/{session}/completions", timeout=120,
                            json={"message": "[sleep in python] Wait a while", "llm": "scripted", "llm_args": agent})
        # The run's lease row names the replica (its hostname) from the run's start to its end.
        lease = wait_for("the agent run's lease", lambda: sql(
            "docchat_agent", "select job_id || ' ' || worker from run_leases limit 1"), 60)
        job_id, worker = lease.split(" ", 1)
        victim = stack.container_of(worker, "agent-service")
        # The scripted model calls python at once; the code sleeps 45 s.
        time.sleep(4)
        expect("the run still running when killed", asked.done(), False)
        subprocess.run(["docker", "kill", "--signal", "KILL", victim], check=True, capture_output=True, timeout=30)
        killed = time.monotonic()
        response = asked.result(timeout=150)
    answered_after = time.monotonic() - killed
    body = response.json() if response.content else {}
    clean = response.status_code < 300 or stack.standard_error(response)
    print(f"    killed {victim[:12]} ({worker}) {killed - t0:.1f}s into the run; the completion answered "
          f"{response.status_code} after {answered_after:.1f}s: {json.dumps(body)[:160]}", flush=True)
    expect("the completion answered (2xx or a 5xx with the standard body)", clean, True)
    expect("the completion answered within its timeout", answered_after < TIMEOUT, True)
    job = wait_for("the killed run's job to end", lambda: (lambda j: j if j and j["status"] not in ("queued", "running") else None)(
        agent_jobs().get(job_id)), 120)
    ended_after = time.monotonic() - killed
    print(f"    the run's job ended {job['status']} after {ended_after:.0f}s: {job.get('errors')}", flush=True)
    expect("the killed run's job status", job["status"], "stale")
    running = [j for j in agent_jobs().values() if j["status"] in ("queued", "running")]
    leases = int(sql("docchat_agent", "select count(*) from run_leases"))
    expect("agent runs left running", len(running), 0)
    expect("run leases left", leases, 0)
    attempts, answered = 0, None
    while attempts < 3 and answered is None:
        attempts += 1
        r = api("POST", f"/chats/{session}/completions", timeout=120,
                json={"message": "And the capital of France?", "llm": "scripted", "llm_args": agent})
        if r.status_code == 200 and "Paris" in r.json().get("body", ""):
            answered = r.json()
        else:
            print(f"    new agent completion attempt {attempts}: {r.status_code} {r.text[:160]}", flush=True)
            time.sleep(1)
    expect("a new agent completion on the same session", answered is not None, True)
    figure("agent-kill", "completion answered / run's job ended / runs left running / next agent completion",
           f"{response.status_code} after {answered_after:.1f} s / {job['status']} after {ended_after:.0f} s / "
           f"{len(running)} / {'ok' if answered else 'FAILED'} in {attempts} attempt(s)")
    stack.restart_and_wait(victim)


def executions(task_id):
    return ok(api("GET", f"/scheduled_tasks/{task_id}/executions", params={"limit": 100}))["items"]


def create_task(name, message, at):
    return ok(api("POST", "/scheduled_tasks", json={
        "name": name, "schedule_type": "once",
        "schedule_expression": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at)),
        "task_type": "chat_completion", "task_config": {"message": message, "llm": "scripted"},
    }))["id"]


def fault_scheduler_kill():
    print("\n--> fault: two scheduler replicas racing for due tasks, then kill -9 the one running an execution", flush=True)
    replicas = containers("scheduler-service")
    expect("scheduler-service replicas", len(replicas), 2)
    tag = uuid.uuid4().hex[:6]
    # Both replicas claim due tasks every tick: each of these runs once, on one replica.
    due = time.time() + 8
    racing = [create_task(f"faults-race-{tag}-{i}", "What is the capital of France?", due) for i in range(24)]
    runs = wait_for("every racing task to have run", lambda: (lambda rs: rs if all(
        r and all(e["status"] != "running" for e in r) for r in rs) else None)([executions(t) for t in racing]), 120)
    time.sleep(3)  # a doubled claim would show up by now
    runs = [executions(t) for t in racing]
    doubled = sum(1 for r in runs if len(r) != 1)
    completed = sum(1 for r in runs for e in r if e["status"] == "completed")
    ids = "', '".join(racing)
    workers = sql("docchat_scheduler", f"select count(distinct worker) from task_executions where task_id in ('{ids}')")
    print(f"    {len(racing)} tasks due at once: {completed} executions completed, spread over {workers} replica(s)", flush=True)
    expect("racing tasks run other than once", doubled, 0)
    expect("racing executions completed", completed, len(racing))

    task = create_task(f"faults-kill-{tag}", "[answer slowly] Summarise the day", time.time() + 2)
    execution = wait_for("the slow execution to start", lambda: (lambda r: r[0] if r and r[0]["status"] == "running" else None)(
        executions(task)), 60)
    worker = sql("docchat_scheduler", f"select worker from task_executions where id = '{execution['id']}'")
    victim = stack.container_of(worker.rsplit("-", 1)[0], "scheduler-service")
    time.sleep(2)
    subprocess.run(["docker", "kill", "--signal", "KILL", victim], check=True, capture_output=True, timeout=30)
    killed = time.monotonic()
    print(f"    killed {victim[:12]} ({worker}) running execution {execution['id']}", flush=True)
    ended = wait_for("the killed execution to end", lambda: (lambda r: r if r and all(
        e["status"] != "running" for e in r) else None)(executions(task)), 120)
    ended_after = time.monotonic() - killed
    error = sql("docchat_scheduler", f"select error_message from task_executions where id = '{execution['id']}'")
    print(f"    the execution ended {ended[0]['status']} after {ended_after:.0f}s: {error!r}", flush=True)
    expect("executions of the killed task (none doubled)", len(ended), 1)
    expect("the killed execution's status", ended[0]["status"], "failed")
    state = ok(api("GET", f"/scheduled_tasks/{task}"))
    expect("the task's execution status", state["execution_status"], "idle")
    running = int(sql("docchat_scheduler", "select count(*) from task_executions where status = 'running'"))
    expect("executions left running", running, 0)
    # The surviving replica runs the task on demand.
    ok(api("PUT", f"/scheduled_tasks/{task}", json={"task_config_patch": {"message": "And quickly now?"}}))
    ok(api("POST", f"/scheduled_tasks/{task}/trigger", json={}))
    after = wait_for("the triggered execution to complete", lambda: (lambda r: r if len(r) == 2 and all(
        e["status"] != "running" for e in r) else None)(executions(task)), 90)
    statuses = sorted(e["status"] for e in after)
    expect("executions after the trigger", statuses, ["completed", "failed"])
    figure("scheduler-kill", "tasks due at once run other than once / killed execution ended / executions left running / next run",
           f"{doubled} of {len(racing)} / {ended[0]['status']} after {ended_after:.0f} s / {running} / "
           f"{'ok' if statuses == ['completed', 'failed'] else 'FAILED'}")
    stack.restart_and_wait(victim)



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
                body_ok = r.status_code < 500 or stack.standard_error(r)
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


def stream_reply(session):
    """Streams a long reply (the scripted upstream's trickle, 40 s); how it ended, when, and
    how many events (a word each, then the end) came."""
    words, ended = 0, "closed"
    try:
        with requests.post(f"{stack.BASE}/api/v1/chats/{session}/completions", headers=stack.H, stream=True, timeout=TIMEOUT,
                           json={"message": "Tell me a long story [answer word by word]", "llm": "scripted", "stream": True}) as r:
            for line in r.iter_lines():
                if not line:
                    continue
                event = json.loads(line)
                if event.get("error"):
                    ended = "error line"
                else:
                    words += 1
            else:
                ended = "finished" if ended == "closed" and words >= 80 else ended
    except requests.RequestException as e:
        ended = f"broken ({type(e).__name__})"
    return ended, time.monotonic(), words


SERVICES = ["ingest-service", "chat-service", "agent-service", "scheduler-service", "admin-service", "gateway"]
# How long a stopped service may take (docker-compose.yml's stop_grace_period: the services'
# DOCCHAT_SHUTDOWN_GRACE_SECONDS of 20 plus room); past it Docker sends SIGKILL (exit 137).
GRACE = 25


def fault_sigterm():
    print("\n--> fault: SIGTERM each service in turn under load", flush=True)
    col = ok(api("POST", "/collections", json={"name": f"faults-sigterm-{uuid.uuid4().hex[:6]}", "description": ""}))
    ingest(col["id"], 3, "sigterm-seed")
    wait_for("the seed documents", lambda: ok(api("GET", f"/collections/{col['id']}"))["document_count"] >= 3, 120)
    session = ok(api("POST", "/chats", params={"collection_id": col["id"]}, json={}))["id"]
    agent_session = ok(api("POST", "/chats", json={}))["id"]
    stream_session = ok(api("POST", "/chats", json={}))["id"]
    results, stop = [], time.monotonic() + 10_000
    counter = iter(range(1_000_000))

    def call(route, method, path, **kw):
        t = time.monotonic()
        try:
            r = api(method, path, **kw)
            clean = r.status_code < 300 or (r.status_code >= 500 and stack.standard_error(r))
            results.append((route, t, time.monotonic(), r.status_code, clean))
            return r
        except requests.RequestException as e:
            results.append((route, t, time.monotonic(), type(e).__name__, False))
            return None

    def loop(step):
        while time.monotonic() < stop:
            step()
            time.sleep(0.05)

    def reads():
        call("collections", "GET", "/collections", params={"limit": 5})
        call("scheduled_tasks", "GET", "/scheduled_tasks", params={"limit": 5})
        call("admin_jobs", "GET", "/admin/jobs", params={"limit": 5})

    def rag():
        call("rag", "POST", f"/chats/{session}/completions", json={"message": "What do the surveys say?", "llm": "scripted"})

    def agent():
        call("agent", "POST", f"/chats/{agent_session}/completions", timeout=60,
             json={"message": "What is the capital of France?", "llm": "scripted", "llm_args": {"use_agent": True}})

    def upload():
        n = next(counter)
        r = call("upload", "PUT", "/uploads", files={"file": (f"sigterm-{n}.txt", document_text(n), "text/plain")})
        if r is not None and r.status_code == 200:
            call("ingest", "POST", f"/uploads/{r.json()['id']}/ingest", params={"collection_id": col["id"]})

    stops, streamed = [], None
    with concurrent.futures.ThreadPoolExecutor(5) as pool:
        load = [pool.submit(loop, f) for f in (reads, rag, agent, upload)]
        time.sleep(3)
        try:
            for service in SERVICES:
                # The replica the callers (the gateway; for agent-service, chat-service) hold their
                # connection to: the one the load reaches.
                used = gateway_peers(50051, ("gateway", "chat-service"))
                replicas = containers(service)
                victim = next((c for c in replicas if ip_of(c) & used), replicas[0])
                stream = pool.submit(stream_reply, stream_session) if service == "chat-service" else None
                if stream:
                    time.sleep(3)  # the reply is streaming
                t0 = time.monotonic()
                subprocess.run(["docker", "stop", "-t", str(GRACE), victim], check=True, capture_output=True, timeout=GRACE + 30)
                exited = time.monotonic()
                if stream:
                    ended, after, words = stream.result(timeout=120)
                    streamed = (ended, after - t0, words)
                    print(f"    a reply streaming through the stopped chat replica: {ended} {after - t0:.1f}s after SIGTERM, "
                          f"{words} events received", flush=True)
                    expect("the streamed reply ended within the grace period", after - t0 < GRACE, True)
                    expect("the streamed reply ended with an error line or its end (not a broken stream)",
                           ended in ("error line", "finished"), True)
                code = int(stack.docker("inspect", "-f", "{{.State.ExitCode}}", victim))
                print(f"    {service} {victim[:12]}: exit {code} {exited - t0:.1f}s after SIGTERM", flush=True)
                stack.restart_and_wait(victim)
                stops.append((service, t0, exited, code, time.monotonic()))
                time.sleep(2)
        finally:
            # The load ends whatever happened (a failed stop must not leave it running).
            stop = time.monotonic()
        for f in load:
            f.result(timeout=120)
    for service, t0, exited, code, back in stops:
        in_flight = [r for r in results if r[1] < t0 < r[2]]
        during = [r for r in results if t0 <= r[1] <= exited]
        broken = [r for r in in_flight if not r[4]]
        # With one gateway, what is sent while it is down is refused (Kubernetes runs two).
        refused = [r for r in results if service == "gateway" and t0 <= r[1] <= back and not r[4]]
        failed = [r for r in during if not r[4] and service != "gateway"]
        expect(f"{service}: exit code after SIGTERM (0: drained, 137: killed at the grace)", code, 0)
        expect(f"{service}: stopped within the grace period", exited - t0 < GRACE, True)
        expect(f"{service}: requests in flight at SIGTERM that broke", [f"{r[0]}: {r[3]}" for r in broken], [])
        expect(f"{service}: requests sent while it stopped that failed uncleanly", [f"{r[0]}: {r[3]}" for r in failed], [])
        if service == "gateway":
            # docker-compose.yml gives the gateway 2 s of lame duck (DOCCHAT_SHUTDOWN_DELAY_SECONDS):
            # what is sent in the first second after `docker stop` is served.
            lame = [r for r in results if t0 <= r[1] <= t0 + 1 and not r[4]]
            expect("gateway: requests sent in its first second after SIGTERM that failed", [f"{r[0]}: {r[3]}" for r in lame], [])
        errors = sum(1 for r in in_flight + during if r[4] and isinstance(r[3], int) and r[3] >= 500)
        figure("sigterm", f"{service}: exit / time to stop / in flight (broke) / sent while stopping (5xx with body, refused)",
               f"{code} / {exited - t0:.1f} s / {len(in_flight)} ({len(broken)}) / {len(during)} ({errors}, {len(refused)})")
    if streamed:
        figure("sigterm", "chat-service: a reply streaming at SIGTERM ended / after / events received", f"{streamed[0]} / {streamed[1]:.1f} s / {streamed[2]}")
        messages = ok(api("GET", f"/chats/{stream_session}/messages"))
        trickled = [m for m in messages if m.get("reply_to") and "word0" in m.get("content", "")]
        expect("the streamed reply stored (partial)", len(trickled), 1)
    total = len(results)
    bad = [r for r in results if not r[4] and not any(
        s == "gateway" and t0 <= r[1] <= back for s, t0, _, _, back in stops)]
    print(f"    {total} requests under load; {len(bad)} failed uncleanly outside the gateway's own stop", flush=True)
    expect("requests under load that failed uncleanly (outside the gateway's stop)", [f"{r[0]}: {r[3]}" for r in bad], [])



FAULTS = {"ingest-kill": fault_ingest_kill, "chat-kill": fault_chat_kill, "reattach": fault_reattach, "agent-kill": fault_agent_kill,
          "scheduler-kill": fault_scheduler_kill, "broker": fault_broker, "postgres": fault_postgres,
          "sigterm": fault_sigterm}

stack.run_all(FAULTS, WANTED, "fault")
