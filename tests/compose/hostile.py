"""Hostile and malformed input against the compose stack (issue 19, part 3), run by
scripts/compose-test.sh before the faults. Each check prints what it tried and its figures; any
violation fails the run.

  cross-user    user A owns one of each resource (collection, document, pending upload, chat
                session and messages, job, tag, extractor, memory block, scheduled task, custom
                tool, custom agent, agent key); user B, with the same permissions, calls every
                operation of /api-spec.yaml whose path names a resource with A's ids, and the
                same operation with made-up ids (the control). A leak is an answer that differs
                from the control's (status or body) or any 2xx that the control does not get
                too: B must not tell A's resources from missing ones. Then the calls that take
                A's ids in a query or body, and at the end A reads every resource back unchanged.
  uploads       files that lie about their type (a PNG named .pdf, an ELF program named .txt,
                a ZIP named .docx, a truncated PDF), a zip bomb (.docx whose document part
                inflates to 1 GiB), invalid UTF-8 text: each upload accepted or refused with the
                standard body, each job ends (completed or failed with its reason), within its
                deadline.
  requests      an upload body of 140 MB + 1, declared and chunked (413), JSON nested 100 000
                deep, invalid UTF-8 in JSON and in a multipart file name, gzip- and
                deflate-encoded bodies that inflate to 1 GiB, a 256 KiB header, 500 headers, a
                64 KiB request line: never a 5xx, each refused with a 4xx (the standard body
                where the gateway's handlers answer).
  alive         afterwards every container still runs, none restarted or killed for memory,
                and the gateway's readiness answers 200.

Usage: hostile.py <base_url> <api_key> <compose command> [check ...]  (default: all)
"""

import io
import json
import socket
import sys
import time
import urllib.parse
import uuid
import zipfile
import zlib

import requests
import yaml

import stack
from stack import api, containers, expect, figure, ok, standard_error, wait_for

stack.connect(sys.argv[1], sys.argv[2], sys.argv[3])
WANTED = sys.argv[4:] or ["cross-user", "uploads", "requests", "alive"]
SERVICES = ["gateway", "admin-service", "ingest-service", "chat-service", "agent-service", "scheduler-service"]
RESTARTS = {}


def restart_counts():
    return {c: stack.docker("inspect", "-f", "{{.RestartCount}}", c) for s in SERVICES for c in containers(s)}


# --- users and A's resources -----------------------------------------------------------------

def make_user(tag, role):
    name = f"hostile-{tag}-{uuid.uuid4().hex[:6]}"
    user = ok(api("POST", "/admin/users", json={"username": name, "email": f"{name}@example.com"}))
    key = ok(api("POST", "/admin/api_keys", json={"user_id": user["id"], "name": "hostile"}))
    ok(api("PUT", f"/users/{user['id']}/roles/{role}"))
    return {"id": user["id"], "name": name, "key": key["secret_key"], "api_key_id": key["api_key"]["id"]}


def builder_role():
    role = ok(api("POST", "/roles", json={"name": f"hostile-builder-{uuid.uuid4().hex[:6]}", "description": "probe"}))
    for p in ("ConfigureAgents", "ManageCustomAgent", "DeleteCustomAgent", "EditExtractors"):
        ok(api("PUT", f"/roles/{role['id']}/permissions/{p}"))
    return role


def zip_of(files):
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
    return out.getvalue()


ADD_NUMBERS = b'''def add_numbers(a: int, b: int = 2) -> dict:
    """Adds two numbers."""
    return {"sum": a + b}
'''


def resources_of(a):
    """A's resources, by the path parameter names that address them."""
    k = a["key"]
    col = ok(api("POST", "/collections", k, json={"name": "A's collection", "description": "private"}))["id"]
    up = ok(api("PUT", "/uploads", k, files={"file": ("a-secret.txt", b"The vault code is 4711.\n" * 20, "text/plain")}))
    job = ok(api("POST", f"/uploads/{up['id']}/ingest/job", k, params={"collection_id": col}))
    wait_for("A's ingestion", lambda: any(j["status"] == "completed" for j in ok(api(
        "GET", "/admin/jobs", params={"collection_id": col, "kind": "ingest_upload"}))["jobs"]), 120)
    doc = ok(api("GET", f"/collections/{col}/documents", k))[0]["id"]
    pending = ok(api("PUT", "/uploads", k, files={"file": ("a-pending.txt", b"not yet ingested\n", "text/plain")}))["id"]
    session = ok(api("POST", "/chats", k, params={"collection_id": col}, json={}))["id"]
    ok(api("POST", f"/chats/{session}/completions", k, json={"message": "What is the vault code?", "llm": "scripted"}))
    messages = ok(api("GET", f"/chats/{session}/messages", k))
    question = next(m["id"] for m in messages if not m.get("reply_to"))
    reply = next(m["id"] for m in messages if m.get("reply_to"))
    tag = f"a-tag-{uuid.uuid4().hex[:6]}"
    ok(api("POST", f"/documents/{doc}/tags", k, json={"name": tag}))
    extractor = ok(api("POST", "/extractors", k, json={"name": "A's extractor", "llm": "scripted"}))["id"]
    block = ok(api("POST", "/memory_blocks", k, json={"name": "A's block", "content": "A's memory"}))["id"]
    task = ok(api("POST", "/scheduled_tasks", k, json={
        "name": "A's task", "schedule_type": "recurring", "schedule_expression": "0 3 * * *",
        "task_type": "chat_completion", "task_config": {"message": "What is new?", "llm": "scripted"}}))["id"]
    tool = ok(api("POST", "/agents/custom_tools", k, data={"tool_type": "general_code", "tool_args": json.dumps({})},
                  files={"file": ("add_numbers.py", ADD_NUMBERS)}))[0]["agent_custom_tool_id"]
    package = zip_of({"helper/main.py": "print('hi')\n", "helper/metadata.json": json.dumps({"description": "d"})})
    agent = ok(api("POST", "/agents/custom_agents", k, data={"agent_type": "framework_3", "agent_args": json.dumps({})},
                   files={"file": ("helper.zip", package)}))[0]["agent_custom_agent_id"]
    agent_key = ok(api("POST", "/agents/keys", k, json={"name": "A's key", "type": "private", "value": "s3cret"}))["id"]
    return {
        "collection_id": col, "document_id": doc, "upload_ids": pending, "session_id": session,
        "session_ids": session, "message_id": reply, "question_id": question, "job_id": job["id"],
        "tag_name": tag, "tag_names": tag, "extractor_id": extractor, "memory_block_id": block,
        "task_id": task, "tool_id": tool, "tool_ids": tool, "agent_id": agent, "agent_ids": agent,
        "key_id": agent_key, "key_ids": agent_key, "user_id": a["id"],
    }


def snapshot(a, ids):
    """What A reads of its resources (compared before and after B's calls)."""
    k = a["key"]
    reads = {
        "collection": f"/collections/{ids['collection_id']}", "document": f"/documents/{ids['document_id']}",
        "session": f"/chats/{ids['session_id']}", "messages": f"/chats/{ids['session_id']}/messages",
        "tag": f"/tags/{ids['tag_name']}", "extractor": f"/extractors/{ids['extractor_id']}",
        "memory block": f"/memory_blocks/{ids['memory_block_id']}", "task": f"/scheduled_tasks/{ids['task_id']}",
        "tool": f"/agents/custom_tools/{ids['tool_id']}", "agent": f"/agents/custom_agents/{ids['agent_id']}",
        "permissions": f"/memory_blocks/{ids['memory_block_id']}/permissions",
    }
    volatile = {"updated_at", "last_update_date", "sessions_count", "updated_date", "last_execution_at",
                "next_execution_at", "latest_message_content", "prompt_template_id"}

    def stable(v):
        if isinstance(v, dict):
            return {k2: stable(x) for k2, x in v.items() if k2 not in volatile}
        if isinstance(v, list):
            return [stable(x) for x in v]
        return v

    out = {}
    for what, path in reads.items():
        r = api("GET", path, k)
        out[what] = (r.status_code, stable(r.json()) if r.status_code == 200 else r.text[:200])
    pending = [u for u in ok(api("GET", "/documents", k)) if u["id"] == ids["document_id"]]
    out["documents"] = len(pending)
    return out


# --- requests built from the published document ----------------------------------------------

def resolve(spec, schema):
    while isinstance(schema, dict) and "$ref" in schema:
        schema = spec["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema or {}


def sample(spec, schema, depth=0):
    """A small value of `schema`: required fields only, first enum value."""
    schema = resolve(spec, schema)
    for combo in ("oneOf", "anyOf", "allOf"):
        if combo in schema:
            options = [resolve(spec, s) for s in schema[combo]]
            options = [s for s in options if s.get("type") != "null"] or options
            return sample(spec, options[0], depth + 1)
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((t for t in kind if t != "null"), "string")
    if kind == "object" or "properties" in schema:
        if depth > 4:
            return {}
        props = schema.get("properties", {})
        return {name: sample(spec, props.get(name, {}), depth + 1) for name in schema.get("required", [])}
    if kind == "array":
        return []
    if kind == "integer" or kind == "number":
        return max(1, schema.get("minimum", 1))
    if kind == "boolean":
        return False
    if schema.get("format") == "uuid":
        return str(uuid.uuid4())
    if schema.get("format") == "date-time":
        return "2030-01-01T00:00:00Z"
    return "probe"


# Bodies that pass validation, so that the call reaches the lookup of A's resource (the
# required fields alone would be refused first with a 400).
BODIES = {
    ("put", "/api/v1/agents/custom_agents/{agent_id}"): {"agent_args": {"description": "B's"}},
    ("put", "/api/v1/agents/custom_tools/{tool_id}"): {"tool_args": {"description": "B's"}},
    ("patch", "/api/v1/extractors/{extractor_id}"): {"description": "B's"},
    ("patch", "/api/v1/collections/{collection_id}"): {"name": "B's"},
    ("patch", "/api/v1/tags/{tag_name}"): {"description": "B's"},
    ("put", "/api/v1/memory_blocks/{memory_block_id}"): {"content": "B's"},
    ("put", "/api/v1/scheduled_tasks/{task_id}"): {"description": "B's"},
    ("post", "/api/v1/chats/{session_id}/completions"): {"message": "What is the vault code?", "llm": "scripted"},
}

QUERIES = {("get", "/api/v1/messages/{message_id}/meta"): {"info_type": "usage_stats"}}


def request(spec, method, path, operation, b_collection):
    """The body and the required query parameters of an operation, valid apart from the ids."""
    kw = {}
    content = (operation.get("requestBody") or {}).get("content", {})
    if (method, path) in BODIES:
        kw["json"] = BODIES[(method, path)]
    elif "application/json" in content:
        kw["json"] = sample(spec, content["application/json"].get("schema", {}))
    elif "multipart/form-data" in content:
        kw["files"] = {"file": ("probe.txt", b"probe")}
    params = dict(QUERIES.get((method, path), {}))
    for p in operation.get("parameters") or []:
        if p.get("in") == "query" and (p.get("required") or p.get("name") == "collection_id"):
            params[p["name"]] = b_collection if p["name"] == "collection_id" else sample(spec, p.get("schema", {}))
    if params:
        kw["params"] = params
    return kw


def made_up(name, value):
    """The control's stand-in for one of A's ids: the same shape, naming nothing."""
    try:
        uuid.UUID(value)
        return str(uuid.uuid4())
    except ValueError:
        return f"missing-{uuid.uuid4().hex[:8]}"


# Path parameters that are not A's resources: fixed values, the same in both calls.
FIXED = {"action": "stop", "dir_name": "notes", "group_id": "hostile-group", "permission_name": "ConfigureAgents",
         "key_name": "collection_limit_per_user", "role_id": None, "role_names": None, "association_ids": None,
         "username": None}


def answer(response):
    """What must match between A's ids and the control: the status and, for successes, the body."""
    body = response.text if response.status_code < 300 else ""
    return response.status_code, body


def check_cross_user():
    print("\n--> hostile: user B calls every route with user A's ids", flush=True)
    role = builder_role()
    a, b = make_user("a", role["name"]), make_user("b", role["name"])
    ids = resources_of(a)
    before = snapshot(a, ids)
    expect("A reads every one of its resources", [w for w, v in before.items() if w != "documents" and v[0] != 200], [])
    fixed = dict(FIXED, role_id=role["id"], role_names=role["name"], association_ids=str(uuid.uuid4()), username=b["name"])
    b_collection = ok(api("POST", "/collections", b["key"], json={"name": "B's collection", "description": ""}))["id"]
    spec = yaml.safe_load(requests.get(f"{stack.BASE}/api-spec.yaml", headers=stack.H, timeout=30).text)
    tried, leaks, statuses = 0, [], {}
    for path, item in spec["paths"].items():
        if "{" not in path or not path.startswith("/api/v1/"):
            continue
        names = [p.strip("{}") for p in path.split("/") if p.startswith("{")]
        if not any(n in ids for n in names):
            continue
        for method, operation in item.items():
            if method not in ("get", "post", "put", "patch", "delete"):
                continue
            body = request(spec, method, path, operation, b_collection)
            real, control = path, path
            for n in names:
                value = ids.get(n) or fixed.get(n) or "probe"
                if n == "key_id" and path.startswith("/api/v1/admin/"):
                    value = a["api_key_id"]
                real = real.replace("{" + n + "}", urllib.parse.quote(value, safe=""))
                control = control.replace("{" + n + "}", urllib.parse.quote(made_up(n, value) if n in ids else value, safe=""))
            got = api(method.upper(), real.removeprefix("/api/v1"), b["key"], **body)
            want = api(method.upper(), control.removeprefix("/api/v1"), b["key"], **body)
            tried += 1
            statuses[got.status_code] = statuses.get(got.status_code, 0) + 1
            if got.status_code != 404:
                print(f"      {method.upper()} {path}: {got.status_code} {got.text[:100]!r} (made-up ids: {want.status_code})")
            if answer(got) != answer(want) or got.status_code >= 500:
                leaks.append(f"{method.upper()} {path}: {got.status_code} {got.text[:120]!r} (made-up ids: {want.status_code})")
    # Calls that take A's ids in the query or the body.
    k = b["key"]
    own = ok(api("PUT", "/uploads", k, files={"file": ("b.txt", b"B's text\n", "text/plain")}))["id"]
    secrets = (ids["collection_id"], ids["document_id"], ids["task_id"], ids["tool_id"], ids["agent_id"], "4711")

    def refused(r):
        return r.status_code == 404

    def hidden(r):
        return r.status_code == 404 or (r.status_code == 200 and not any(x in r.text for x in secrets))

    def not_inspected(r):
        return r.status_code == 404 or (r.status_code == 200 and r.json().get("status") == "error")

    def none_deleted(r):
        return r.status_code == 404 or (r.status_code == 200 and r.json().get("count") == 0)

    elsewhere = [
        ("POST /chats?collection_id=A", refused, ("POST", "/chats"), {"params": {"collection_id": ids["collection_id"]}, "json": {}}),
        ("POST /uploads/{B's}/ingest?collection_id=A", refused, ("POST", f"/uploads/{own}/ingest"),
         {"params": {"collection_id": ids["collection_id"]}}),
        ("GET /documents?chat_session_id=A", hidden, ("GET", "/documents"), {"params": {"chat_session_id": ids["session_id"]}}),
        ("GET /documents/count?chat_session_id=A", lambda r: r.status_code == 404 or r.json().get("count") == 0,
         ("GET", "/documents/count"), {"params": {"chat_session_id": ids["session_id"]}}),
        ("PUT /users/current/default_memory_blocks with A's block", refused, ("PUT", "/users/current/default_memory_blocks"),
         {"json": {"scope": "llm", "memory_block_id": ids["memory_block_id"]}}),
        ("POST /scheduled_tasks/batch_delete A's task", none_deleted, ("POST", "/scheduled_tasks/batch_delete"),
         {"json": {"task_ids": [ids["task_id"]]}}),
        ("POST /agents/custom_agent_tool_associations for A's agent", refused, ("POST", "/agents/custom_agent_tool_associations"),
         {"json": {"agent_id": ids["agent_id"], "mcp_server_name": "x"}}),
        ("POST /agents/custom_agent_key_associations with A's key", refused, ("POST", "/agents/custom_agent_key_associations"),
         {"json": {"agent_id": ids["agent_id"], "env_key_name": "X", "key_id": ids["key_id"]}}),
        ("GET /agents/custom_agent_tool_associations?agent_id=A", hidden, ("GET", "/agents/custom_agent_tool_associations"),
         {"params": {"agent_id": ids["agent_id"]}}),
        ("POST /agents/mcp/inspect_tool A's tool", not_inspected, ("POST", "/agents/mcp/inspect_tool"),
         {"json": {"tool_id": ids["tool_id"]}}),
        ("GET /scheduled_tasks?collection_id=A", hidden, ("GET", "/scheduled_tasks"), {"params": {"collection_id": ids["collection_id"]}}),
        ("GET /admin/jobs (not an administrator)", lambda r: r.status_code in (401, 403), ("GET", "/admin/jobs"), {}),
        ("GET /collections (B's own list)", hidden, ("GET", "/collections"), {}),
        ("GET /chats (B's own list)", hidden, ("GET", "/chats"), {}),
        ("GET /tags (user_scope)", lambda r: r.status_code == 200 and ids["tag_name"] not in r.text, ("GET", "/tags"),
         {"params": {"user_scope": "true"}}),
        ("GET /memory_blocks (B's own list)", lambda r: r.status_code == 200 and ids["memory_block_id"] not in r.text,
         ("GET", "/memory_blocks"), {}),
    ]
    for what, allowed, (method, path), kw in elsewhere:
        r = api(method, path, k, **kw)
        print(f"      {what}: {r.status_code} {r.text[:100]!r}")
        tried += 1
        statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
        if r.status_code >= 500 or not allowed(r):
            leaks.append(f"{what}: {r.status_code} {r.text[:120]!r}")
    after = snapshot(a, ids)
    changed = [w for w in before if before[w] != after[w]]
    print(f"    {tried} calls by B with A's ids; answers {dict(sorted(statuses.items()))}", flush=True)
    for leak in leaks:
        print(f"    LEAK {leak}", flush=True)
    expect("cross-user leaks (answers that tell A's resources from missing ones)", len(leaks), 0)
    expect("A's resources changed by B's calls", changed, [])
    figure("cross-user", "calls with A's ids by B / answers / leaks / A's resources changed",
           f"{tried} / {dict(sorted(statuses.items()))} / {len(leaks)} / {len(changed)}")


# --- hostile uploads ---------------------------------------------------------------------------

def zip_bomb_docx():
    """A .docx whose word/document.xml inflates to 1 GiB (about 1 MB compressed)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        z.writestr("[Content_Types].xml", '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"/>')
        with z.open("word/document.xml", "w", force_zip64=True) as part:
            part.write(b'<?xml version="1.0"?><w:document xmlns:w="x"><w:body><w:p><w:r><w:t>')
            block = b"A" * (1 << 20)
            for _ in range(1024):
                part.write(block)
            part.write(b"</w:t></w:r></w:p></w:body></w:document>")
    return out.getvalue()


def elf_bytes():
    with open(sys.executable, "rb") as f:
        return f.read(256 * 1024)


PNG = (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89"
       b"\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00\x00\x00IEND\xaeB`\x82")


def check_uploads():
    print("\n--> hostile: uploads that lie about their type, a zip bomb, invalid UTF-8", flush=True)
    col = ok(api("POST", "/collections", json={"name": f"hostile-uploads-{uuid.uuid4().hex[:6]}", "description": ""}))["id"]
    t = time.monotonic()
    bomb = zip_bomb_docx()
    print(f"    zip bomb: {len(bomb) / 1e6:.1f} MB inflating to 1 GiB (built in {time.monotonic() - t:.1f}s)", flush=True)
    files = {
        "picture.pdf": PNG,
        "notes.txt": elf_bytes(),
        "letter.docx": zip_of({"readme.txt": "not a Word document"}),
        "truncated.pdf": b"%PDF-1.7\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n" + b"\x00" * 100,
        "bomb.docx": bomb,
        "latin1.txt": "Caf\u00e9 cr\u00e8me, na\u00efve fa\u00e7ade: text in Latin-1.\n".encode("latin-1") * 40 + b"\xff\xfe\xc3\x28",
        "page.html.txt": b"<html><body><script>alert(1)</script><h1>Heading</h1><p>Body text.</p></body></html>",
    }
    outcomes, bad, job_of = {}, [], {}
    started = time.monotonic()
    for name, data in files.items():
        r = api("PUT", "/uploads", files={"file": (name, data)}, timeout=120)
        if r.status_code != 200:
            outcomes[name] = f"upload {r.status_code}"
            if r.status_code >= 500 or not standard_error(r):
                bad.append(f"{name}: upload {r.status_code} {r.text[:120]}")
            continue
        r = api("POST", f"/uploads/{r.json()['id']}/ingest/job", params={"collection_id": col})
        if r.status_code != 201:
            outcomes[name] = f"ingest {r.status_code}"
            if r.status_code >= 500 or not standard_error(r):
                bad.append(f"{name}: ingest {r.status_code} {r.text[:120]}")
            continue
        job_of[r.json()["id"]] = name

    def settled():
        jobs = ok(api("GET", "/admin/jobs", params={"collection_id": col, "kind": "ingest_upload", "limit": 50}))["jobs"]
        jobs = [j for j in jobs if j["id"] in job_of]
        done = [j for j in jobs if j["status"] not in ("queued", "running")]
        return jobs if len(jobs) == len(job_of) and len(done) == len(jobs) else None

    jobs = wait_for("every hostile upload's job to end", settled, 300)
    took = time.monotonic() - started
    for j in jobs:
        name = job_of[j["id"]]
        outcomes[name] = f"{j['status']}" + (f" ({j['errors'][0][:100]})" if j["errors"] else "")
        if j["status"] not in ("completed", "failed") or (j["status"] == "failed" and not j["errors"]):
            bad.append(f"{name}: job {j['status']} {j['errors']}")
        if any(len(e.encode()) > 300 for e in j["errors"]):
            bad.append(f"{name}: an error line over 300 bytes")
    for name in files:
        print(f"    {name}: {outcomes.get(name)}", flush=True)
    expect("bomb.docx refused (its job failed)", outcomes.get("bomb.docx", "").startswith("failed"), True)
    expect("latin1.txt ingested despite invalid UTF-8", outcomes.get("latin1.txt", "").startswith("completed"), True)
    expect("hostile uploads answered or ended badly", bad, [])
    figure("uploads", "hostile files / jobs ended (completed, failed with a reason) / bad answers / all settled in",
           f"{len(files)} / {sum(1 for j in jobs if j['status'] == 'completed')}, "
           f"{sum(1 for j in jobs if j['status'] == 'failed')} / {len(bad)} / {took:.0f} s")


# --- hostile requests --------------------------------------------------------------------------

def raw_http(head, body=b"", read_timeout=60):
    """Sends bytes as they are (what requests would refuse or fix; `body` may be only the
    start of what the head announces) and returns the answer's status."""
    url = urllib.parse.urlparse(stack.BASE)
    with socket.create_connection((url.hostname, url.port), timeout=read_timeout) as s:
        s.sendall(head + body)
        reply = b""
        while b"\r\n" not in reply:
            piece = s.recv(4096)
            if not piece:
                break
            reply += piece
    line = reply.split(b"\r\n", 1)[0].decode("latin-1")
    return int(line.split()[1]) if line.startswith("HTTP/") else line or "closed"


def compressed_zeros(encoding, size):
    """`size` zero bytes compressed as Content-Encoding `encoding` (gzip or deflate)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31 if encoding == "gzip" else 15)
    block = b"0" * (1 << 20)
    out = [packer.compress(block) for _ in range(size // len(block))]
    return b"".join(out) + packer.flush()


def check_requests():
    print("\n--> hostile: oversized, deep, malformed and compressed requests", flush=True)
    results = {}

    def streamed(total):
        sent = 0
        piece = b"x" * (1 << 20)
        while sent < total:
            n = min(len(piece), total - sent)
            sent += n
            yield piece[:n]

    limit = 140 * 1000 * 1000
    boundary = "hostileboundary"
    head = f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.txt"\r\n\r\n'.encode()
    tail = f"\r\n--{boundary}--\r\n".encode()
    filler = limit + 1 - len(head) - len(tail)

    def multipart():
        yield head
        yield from streamed(filler)
        yield tail

    ctype = {"Content-Type": f"multipart/form-data; boundary={boundary}"}
    host = urllib.parse.urlparse(stack.BASE).netloc
    # Declared: the answer comes before the body (sent here only in part) is read.
    status = raw_http(f"PUT /api/v1/uploads HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {stack.KEY}\r\n"
                      f"Content-Type: {ctype['Content-Type']}\r\nContent-Length: {limit + 1}\r\n\r\n".encode(),
                      head + b"x" * (1 << 20))
    results["140 MB + 1 upload (declared length)"] = (status, True)
    # Chunked: the limit is found while reading (the file part alone is under it).
    try:
        r = api("PUT", "/uploads", headers=ctype, data=multipart(), timeout=120)
        results["140 MB + 1 upload (chunked)"] = (r.status_code, standard_error(r))
    except requests.ConnectionError as e:
        # The server may answer 413 and close before the client finished sending.
        results["140 MB + 1 upload (chunked)"] = ("closed early", True)
        print(f"    140 MB + 1 (chunked): connection closed while sending ({type(e).__name__})", flush=True)
    deep = ("[" * 100_000 + "]" * 100_000).encode()
    r = api("POST", "/collections", headers={"Content-Type": "application/json"}, data=b'{"name": ' + deep + b"}")
    results["JSON nested 100 000 deep"] = (r.status_code, standard_error(r))
    deep_obj = ('{"a":' * 100_000 + "1" + "}" * 100_000).encode()
    r = api("POST", "/memory_blocks", headers={"Content-Type": "application/json"}, data=deep_obj)
    results["JSON object nested 100 000 deep"] = (r.status_code, standard_error(r))
    r = api("POST", "/collections", headers={"Content-Type": "application/json"},
            data=b'{"name": "bad \xff\xfe utf-8", "description": ""}')
    results["invalid UTF-8 in a JSON body"] = (r.status_code, standard_error(r))
    body = (f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="na\xefve-\xff.txt"\r\n\r\n').encode("latin-1") \
        + b"hello\r\n" + tail
    r = api("PUT", "/uploads", headers=ctype, data=body)
    results["invalid UTF-8 in a multipart file name"] = (r.status_code, r.status_code < 300 or standard_error(r))
    for encoding in ("gzip", "deflate"):
        bomb = compressed_zeros(encoding, 1 << 30)
        r = api("POST", "/collections", headers={"Content-Type": "application/json", "Content-Encoding": encoding}, data=bomb)
        results[f"{encoding} body inflating to 1 GiB ({len(bomb) // 1024} KiB sent)"] = (r.status_code, standard_error(r))
    big = b"X-Padding: " + b"a" * (256 * 1024) + b"\r\n"
    results["one 256 KiB header"] = (raw_http(
        f"GET /api/v1/collections HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {stack.KEY}\r\n".encode() + big + b"\r\n"), True)
    many = b"".join(f"X-H{i}: {'b' * 100}\r\n".encode() for i in range(500))
    results["500 headers"] = (raw_http(
        f"GET /api/v1/collections HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {stack.KEY}\r\n".encode() + many + b"\r\n"), True)
    results["a request line of 64 KiB"] = (raw_http(
        f"GET /api/v1/collections?{'q=' + 'c' * 65536} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()), True)
    bad = []
    for what, (status, clean) in results.items():
        fine = (status == "closed early" or (isinstance(status, int) and 400 <= status < 500 and clean)
                or status == "closed")
        print(f"    {'ok  ' if fine else 'FAIL'} {what}: {status}{'' if clean else ' (not the standard body)'}", flush=True)
        if not fine:
            bad.append(f"{what}: {status}")
    big_status = results["140 MB + 1 upload (declared length)"][0]
    expect("140 MB + 1 refused with 413 (declared length, chunked)",
           (big_status, results["140 MB + 1 upload (chunked)"][0]), (413, 413))
    expect("malformed requests answered other than a 4xx (with the standard body where JSON)", bad, [])
    after = api("GET", "/collections", params={"limit": 1})
    expect("the gateway answers normally after them", after.status_code, 200)
    figure("requests", "malformed requests / answered 4xx or refused / 5xx or hangs",
           f"{len(results)} / {len(results) - len(bad)} / {len(bad)}")


def check_alive():
    print("\n--> hostile: every container still up, none restarted", flush=True)
    now = restart_counts()
    restarted = [c[:12] for c, n in now.items() if RESTARTS.get(c, n) != n]
    missing = [c[:12] for c in RESTARTS if c not in now]
    oom = [c[:12] for c in now if stack.docker("inspect", "-f", "{{.State.OOMKilled}}", c) == "true"]
    ready = requests.get(f"{stack.BASE}/rpc/health/readiness", headers=stack.H, timeout=30)
    expect("containers restarted or gone", restarted + missing, [])
    expect("containers killed for memory", oom, [])
    expect("gateway readiness", ready.status_code, 200)
    figure("alive", "containers restarted / killed for memory / readiness", f"{len(restarted + missing)} / {len(oom)} / {ready.status_code}")


RESTARTS.update(restart_counts())
stack.run_all({"cross-user": check_cross_user, "uploads": check_uploads, "requests": check_requests, "alive": check_alive},
              WANTED, "hostile check")
