"""PyPI's official MCP SDK (mcp==1.30.0) against docchat's MCP server: streamable HTTP at
{base_url}/mcp (stateless, bearer API key) and, with --stdio-command, the gateway's stdio
bridge (`gateway mcp --url <base_url> --key <key>`, or the key in DOCCHAT_API_KEY).

As the bootstrap administrator it creates two users with their own keys: the owner, who
uploads a 3-page PDF (one known sentence a page) into a new collection, and another user.
Then it checks the tools (list_collections, search, ask, get_document, list_documents; no
upload_text, write tools being off), the document resources, the JSON-RPC errors of unknown
tools and bad arguments, that the other user learns nothing of the owner's ids, and over
HTTP the 401 without or with a wrong key, statelessness and malformed bodies. `ask` uses the
model `scripted` (tests/client_compat/scripted_upstream.py) with its paced answer, so that
progress notifications arrive while it generates.

Usage: check_mcp_client.py <base_url> <admin_key> [--stdio-command <gateway binary>]
Prints one line per check and ends with `N/M passed`; exits 1 when any failed.
"""

import argparse
import json
import shlex
import time
import traceback
import uuid
from contextlib import asynccontextmanager

import anyio
import httpx
import requests
from mcp import ClientSession, McpError, StdioServerParameters
from mcp.client.stdio import get_default_environment, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.version import SUPPORTED_PROTOCOL_VERSIONS
from mcp.types import LATEST_PROTOCOL_VERSION
from pydantic import AnyUrl

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("base_url")
parser.add_argument("admin_key")
parser.add_argument("--stdio-command", help="the gateway binary, run as `<it> mcp --url ... --key ...`")
ARGS = parser.parse_args()
BASE, ADMIN_KEY = ARGS.base_url.rstrip("/"), ARGS.admin_key
MCP_URL = f"{BASE}/mcp"
CHECK_SECONDS = 120

# One distinctive sentence a page of the uploaded PDF.
FACTS = {
    1: "The orchard on Mill Road grows 23 kinds of pear.",
    2: "The lighthouse keeper Ansel counted 417 gulls.",
    3: "Copper kettles from Varne ring like small bells.",
}
QUESTION = "How many gulls did the lighthouse keeper Ansel count?"
# scripted_upstream.py streams PACED_WORDS words ("word0 " ... "word29 "), one every 0.1 s,
# for a question carrying this mark; answered whole, it says ANSWER.
PACED_MARK = "[answer at a pace]"
ANSWER = "Paris is the capital of France."
TOOLS = {"list_collections", "search", "ask", "get_document", "list_documents"}
REQUIRED = {
    "list_collections": set(),
    "search": {"query"},
    "ask": {"question"},
    "get_document": {"document_id"},
    "list_documents": {"collection_id"},
}

state = {}  # the setup's keys and ids
results = []


def flat(text):
    return " ".join(text.split())


# --- setup through REST ---------------------------------------------------------------


def rest(method, path, key, **kw):
    r = requests.request(method, f"{BASE}/api/v1{path}", headers={"Authorization": f"Bearer {key}"},
                         timeout=60, **kw)
    assert r.status_code < 300, f"{method} {path}: {r.status_code} {r.text[:300]}"
    return r.json() if r.content else None


def new_user_key(label):
    """A new user (docchat's admin extension) and a key of theirs, made by the administrator."""
    name = f"mcp-{label}-{uuid.uuid4().hex[:8]}"
    user = rest("POST", "/admin/users", ADMIN_KEY, json={"username": name, "email": f"{name}@example.com"})
    created = rest("POST", "/admin/api_keys", ADMIN_KEY, json={"user_id": user["id"], "name": "mcp-check"})
    assert created["secret_key"].startswith("sk-"), created
    return created["secret_key"]


def pdf_escape(s):
    return s.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def pdf_of_pages(lines):
    """A PDF of one line of text a page (Helvetica, uncompressed), written by hand as
    bench/ingest/make_pdf.py does."""
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"",  # the page tree, once the pages are numbered
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    kids = []
    for line in lines:
        stream = f"BT /F1 12 Tf 72 720 Td ({pdf_escape(line)}) Tj ET".encode()
        contents = len(objects) + 2  # the number of the object after this page
        objects.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
                       f"/Resources << /Font << /F1 3 0 R >> >> /Contents {contents} 0 R >>".encode())
        kids.append(f"{len(objects)} 0 R")
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    objects[1] = f"<< /Type /Pages /Kids [{' '.join(kids)}] /Count {len(lines)} >>".encode()
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    for offset in offsets:
        out += f"{offset:010d} 00000 n \n".encode()
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


def ingest(key, collection_id, filename, data):
    """Uploads and ingests one file, waits for its job; answers the document's id."""
    upload = rest("PUT", "/uploads", key, files={"file": (filename, data, "application/pdf")})
    job = rest("POST", f"/uploads/{upload['id']}/ingest/job", key, params={"collection_id": collection_id})
    deadline = time.monotonic() + 180
    while job["overall_status"] == "in progress":
        assert time.monotonic() < deadline, f"ingestion not done in 180 s: {job}"
        time.sleep(0.2)
        job = rest("GET", f"/jobs/{job['id']}", key)
    assert job["overall_status"] == "completed", job
    docs = [d for d in rest("GET", f"/collections/{collection_id}/documents", key) if d["name"] == filename]
    assert len(docs) == 1, docs
    assert docs[0]["page_count"] == len(FACTS), docs[0]
    return docs[0]["id"]


def setup_users():
    state["owner"] = new_user_key("owner")
    state["other"] = new_user_key("other")


def setup_document():
    name = f"lighthouse-{uuid.uuid4().hex[:6]}"
    collection = rest("POST", "/collections", state["owner"], json={"name": name, "description": "MCP check"})
    state["collection"], state["collection_name"] = collection["id"], name
    state["doc_name"] = "logbook.pdf"
    pdf = pdf_of_pages([FACTS[n] for n in sorted(FACTS)])
    state["doc"] = ingest(state["owner"], collection["id"], state["doc_name"], pdf)
    state["uri"] = f"docchat://documents/{state['doc']}"


# --- transports -----------------------------------------------------------------------


@asynccontextmanager
async def over_http(key):
    """A ClientSession (not initialized) over streamable HTTP, with `key` as bearer if any."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(30, read=300)) as http:
        async with streamable_http_client(MCP_URL, http_client=http) as (read, write, _):
            async with ClientSession(read, write) as session:
                yield session


def over_stdio(key_in_env):
    """Connects through `<gateway> mcp --url BASE`, the key given with --key or in
    DOCCHAT_API_KEY (the SDK's default environment otherwise has neither)."""

    @asynccontextmanager
    async def connect(key):
        command, *args = shlex.split(ARGS.stdio_command)
        args += ["mcp", "--url", BASE]
        env = get_default_environment()
        if key_in_env:
            env["DOCCHAT_API_KEY"] = key
        else:
            args += ["--key", key]
        params = StdioServerParameters(command=command, args=args, env=env)
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                yield session

    return connect


@asynccontextmanager
async def opened(connect, key):
    async with connect(key) as session:
        await session.initialize()
        yield session


# --- helpers --------------------------------------------------------------------------


def ok(result):
    """A tool's success: structuredContent, the same JSON as content[0].text."""
    assert not result.isError, result.content
    assert result.content and result.content[0].type == "text", result.content
    assert result.structuredContent is not None, result
    assert json.loads(result.content[0].text) == result.structuredContent, (result.content[0].text, result.structuredContent)
    return result.structuredContent


def tool_error(result):
    """A tool's failure (isError) and its text."""
    assert result.isError, f"expected a tool error, got {result.structuredContent or result.content}"
    assert result.content and result.content[0].type == "text", result.content
    return result.content[0].text


async def all_tools(session):
    tools, cursor = [], None
    while True:
        page = await session.list_tools(cursor=cursor)
        tools += page.tools
        cursor = page.nextCursor
        if not cursor:
            return tools


async def all_resources(session):
    resources, cursor = [], None
    while True:
        page = await session.list_resources(cursor=cursor)
        resources += page.resources
        cursor = page.nextCursor
        if not cursor:
            return resources


async def expect_mcp_error(call):
    try:
        await call
    except McpError as e:
        return e.error
    raise AssertionError("no JSON-RPC error")


def made_up_id():
    return str(uuid.uuid4())


def raw_post(body, key, extra_headers=None):
    """POSTs `body` (bytes) to /mcp as a client would; answers the httpx response."""
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               **(extra_headers or {})}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    return httpx.post(MCP_URL, content=body, headers=headers, timeout=30)


def rpc_messages(response):
    """The JSON-RPC messages of an answer, whole JSON or an event stream."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
        return [json.loads(d) for d in data if d]
    return [response.json()]


def initialize_body(request_id=1):
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": {
        "protocolVersion": LATEST_PROTOCOL_VERSION, "capabilities": {},
        "clientInfo": {"name": "check_mcp_client", "version": "1"}}}).encode()


def http_statuses(error):
    """The HTTP statuses of the httpx.HTTPStatusErrors in an exception (group, cause, context)."""
    found, seen, todo = [], set(), [error]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, httpx.HTTPStatusError):
            found.append(e.response.status_code)
        todo += list(getattr(e, "exceptions", ())) + [e.__cause__, e.__context__]
    return found


# --- checks over any transport --------------------------------------------------------


async def initialize(connect):
    async with connect(state["owner"]) as session:
        init = await session.initialize()
        assert init.protocolVersion in SUPPORTED_PROTOCOL_VERSIONS, init.protocolVersion
        assert init.serverInfo.name, init.serverInfo
        assert init.capabilities.tools is not None and init.capabilities.resources is not None, init.capabilities
        await session.send_ping()


async def tools_listed(connect):
    async with opened(connect, state["owner"]) as session:
        tools = {t.name: t for t in await all_tools(session)}
    assert set(tools) == TOOLS, sorted(tools)  # upload_text only with the write tools on
    for name, required in REQUIRED.items():
        assert tools[name].inputSchema.get("type") == "object", tools[name].inputSchema
        assert set(tools[name].inputSchema.get("required", [])) == required, (name, tools[name].inputSchema)
    listing = tools["list_collections"].annotations
    assert listing and listing.readOnlyHint is True and listing.destructiveHint is False, listing
    ask = tools["ask"].annotations
    assert ask and not ask.readOnlyHint and ask.destructiveHint is False, ask


async def list_collections(connect):
    async with opened(connect, state["owner"]) as session:
        out = ok(await session.call_tool("list_collections", {}))
        assert [c["id"] for c in out["collections"]] == [state["collection"]], out
        [c] = out["collections"]
        assert (c["name"], c["description"], c["document_count"]) == (state["collection_name"], "MCP check", 1), c
        assert len(ok(await session.call_tool("list_collections", {"limit": 1}))["collections"]) == 1
        assert ok(await session.call_tool("list_collections", {"offset": 1, "limit": 5}))["collections"] == []


async def list_documents(connect):
    async with opened(connect, state["owner"]) as session:
        out = ok(await session.call_tool("list_documents", {"collection_id": state["collection"]}))
    [d] = out["documents"]
    assert (d["id"], d["name"], d["page_count"]) == (state["doc"], state["doc_name"], 3), d
    assert isinstance(d["size"], int) and d["size"] > 0 and d["status"], d


def assert_first_hit(out):
    assert out["results"], out
    first = out["results"][0]
    assert (first["document_id"], first["document_name"], first["collection_id"]) == (
        state["doc"], state["doc_name"], state["collection"]), first
    assert 2 in first["pages"], first
    assert isinstance(first["score"], (int, float)) and not isinstance(first["score"], bool), first
    assert "417 gulls" in flat(first["text"]), first


async def search(connect):
    async with opened(connect, state["owner"]) as session:
        assert_first_hit(ok(await session.call_tool("search", {"query": QUESTION, "collection_id": state["collection"]})))
        assert_first_hit(ok(await session.call_tool("search", {"query": QUESTION})))
        one = ok(await session.call_tool("search", {"query": QUESTION, "top_k": 1}))
        assert len(one["results"]) == 1, one


async def get_document_page(connect):
    async with opened(connect, state["owner"]) as session:
        out = ok(await session.call_tool("get_document", {"document_id": state["doc"], "pages": [2]}))
    assert (out["document_id"], out["name"], out["collection_id"], out["page_count"]) == (
        state["doc"], state["doc_name"], state["collection"], 3), out
    assert [p["page"] for p in out["pages"]] == [2], out
    assert FACTS[2] in flat(out["pages"][0]["text"]), out
    assert out["next_cursor"] is None, out


async def get_document_all(connect):
    """Every page, following next_cursor; a page split over calls is joined again."""
    texts, order, calls = {}, [], 0
    async with opened(connect, state["owner"]) as session:
        args = {"document_id": state["doc"]}
        while True:
            calls += 1
            assert calls <= 20, f"still a next_cursor after 20 calls: {order}"
            out = ok(await session.call_tool("get_document", args))
            for p in out["pages"]:
                if p["page"] not in texts:
                    order.append(p["page"])
                texts[p["page"]] = texts.get(p["page"], "") + p["text"]
            if out["next_cursor"] is None:
                break
            args = {"document_id": state["doc"], "cursor": out["next_cursor"]}
    assert order == [1, 2, 3], order
    for n, fact in FACTS.items():
        assert fact in flat(texts[n]), (n, texts[n])


async def resources(connect):
    async with opened(connect, state["owner"]) as session:
        mine = [r for r in await all_resources(session) if str(r.uri) == state["uri"]]
        assert len(mine) == 1, [str(r.uri) for r in await all_resources(session)]
        assert (mine[0].name, mine[0].mimeType) == (state["doc_name"], "text/plain"), mine[0]
        templates = (await session.list_resource_templates()).resourceTemplates
        assert "docchat://documents/{id}" in [t.uriTemplate for t in templates], templates
        read = await session.read_resource(AnyUrl(state["uri"]))
    uris = [str(c.uri) for c in read.contents]
    assert uris == [f"{state['uri']}#page={n}" for n in (1, 2, 3)], uris
    for n, content in zip((1, 2, 3), read.contents):
        assert FACTS[n] in flat(content.text), (n, content)


async def ask(connect):
    progress = []

    async def on_progress(value, total, message):
        progress.append(value)

    async with opened(connect, state["owner"]) as session:
        result = await session.call_tool(
            "ask", {"question": f"{PACED_MARK} {QUESTION}", "collection_id": state["collection"], "llm": "scripted"},
            progress_callback=on_progress)
    out = ok(result)
    answer = out["answer"]
    assert ("word0" in answer and "word29" in answer) or ANSWER in answer, answer
    assert any(r["document_id"] == state["doc"] and r["collection_id"] == state["collection"]
               and r["document_name"] == state["doc_name"] and set(r["pages"]) <= {1, 2, 3}
               for r in out["references"]), out["references"]
    assert isinstance(out["chat_session_id"], str) and out["chat_session_id"], out
    assert isinstance(out["message_id"], str) and out["message_id"], out
    assert progress, "no notifications/progress while generating"
    assert all(a < b for a, b in zip(progress, progress[1:])), f"progress not increasing: {progress}"


async def bad_calls(connect):
    """Unknown tools and arguments against the schema: JSON-RPC errors; the server goes on."""
    calls = [
        ("no_such_tool", {}),
        ("search", {}),
        ("search", {"query": "gulls", "top_k": "eight"}),
        ("search", {"query": "gulls", "top_k": 0}),
        ("search", {"query": "gulls", "top_k": 51}),
        ("get_document", {}),
        ("get_document", {"document_id": 42}),
        ("list_documents", {}),
        ("ask", {}),
    ]
    async with opened(connect, state["owner"]) as session:
        for name, args in calls:
            try:
                await expect_mcp_error(session.call_tool(name, args))
            except AssertionError:
                raise AssertionError(f"{name} {args}: no JSON-RPC error") from None
        ok(await session.call_tool("list_collections", {}))


async def other_user_sees_nothing(connect):
    async with opened(connect, state["other"]) as session:
        out = ok(await session.call_tool("list_collections", {}))
        assert state["collection"] not in [c["id"] for c in out["collections"]], out
        found = ok(await session.call_tool("search", {"query": QUESTION}))
        assert state["doc"] not in [r["document_id"] for r in found["results"]], found


async def other_user_ids(connect):
    """The owner's ids, to the other user: the tool error of a made-up id, the id aside."""
    calls = [
        ("search", {"query": QUESTION}, "collection_id", state["collection"]),
        ("list_documents", {}, "collection_id", state["collection"]),
        ("get_document", {}, "document_id", state["doc"]),
        ("get_document", {"pages": [2]}, "document_id", state["doc"]),
        ("ask", {"question": QUESTION, "llm": "scripted"}, "collection_id", state["collection"]),
    ]
    async with opened(connect, state["other"]) as session:
        for name, args, field, real in calls:
            fake = made_up_id()
            real_text = tool_error(await session.call_tool(name, {**args, field: real}))
            fake_text = tool_error(await session.call_tool(name, {**args, field: fake}))
            assert real_text.replace(real, "<id>") == fake_text.replace(fake, "<id>"), (name, real_text, fake_text)


async def other_user_resources(connect):
    async with opened(connect, state["other"]) as session:
        assert state["uri"] not in [str(r.uri) for r in await all_resources(session)]
        await expect_mcp_error(session.read_resource(AnyUrl(state["uri"])))
        await expect_mcp_error(session.read_resource(AnyUrl(f"docchat://documents/{made_up_id()}")))


SHARED = [
    ("initialize: protocol version, server info, tools and resources capabilities; ping", initialize),
    ("tools/list: the five tools (no upload_text), their required arguments and annotations", tools_listed),
    ("list_collections: the owner's collection, limit and offset", list_collections),
    ("list_documents: the PDF, 3 pages", list_documents),
    ("search: page 2's fact finds the PDF first (in the collection, in all, top_k 1)", search),
    ("get_document pages [2]: page 2's sentence", get_document_page),
    ("get_document: all 3 pages, following next_cursor", get_document_all),
    ("resources: listed, the template, read as one text a page in order", resources),
    ("ask (model scripted): an answer, references to the PDF, progress notifications", ask),
    ("unknown tool and arguments against the schema: JSON-RPC errors", bad_calls),
    ("another user: list_collections and search show nothing of the owner's", other_user_sees_nothing),
    ("another user: the owner's ids give the same tool error as made-up ones", other_user_ids),
    ("another user: the owner's document is no resource of theirs, reading it is an error", other_user_resources),
]

# --- checks over HTTP only ------------------------------------------------------------


async def unauthorized(_connect):
    for key in (None, f"sk-wrong-{uuid.uuid4().hex}"):
        r = raw_post(initialize_body(), key)
        assert r.status_code == 401, (key, r.status_code, r.text[:200])
        body = r.json()
        assert body.get("code") == 401 and isinstance(body.get("message"), str), body
        try:
            with anyio.fail_after(30):
                async with opened(over_http, key):
                    pass
        except (Exception, BaseExceptionGroup) as e:  # noqa: BLE001 - the SDK raises a group
            assert 401 in http_statuses(e), traceback.format_exception(e)
        else:
            raise AssertionError(f"the SDK initialized with key {key!r}")


async def stateless(_connect):
    """No Mcp-Session-Id; a request without an initialize first is answered."""
    r = raw_post(initialize_body(), state["owner"])
    assert r.status_code == 200, (r.status_code, r.text[:200])
    assert "mcp-session-id" not in r.headers, dict(r.headers)
    [init] = rpc_messages(r)
    version = init["result"]["protocolVersion"]
    body = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}).encode()
    r = raw_post(body, state["owner"], {"MCP-Protocol-Version": version})
    assert r.status_code == 200, (r.status_code, r.text[:200])
    [listed] = rpc_messages(r)
    assert {t["name"] for t in listed["result"]["tools"]} == TOOLS, listed


async def malformed(_connect):
    for body in (b'{"jsonrpc":"2.0","id":1', b'{"foo":1}', b"not json", b"[]"):
        r = raw_post(body, state["owner"])
        assert r.status_code < 500, (body, r.status_code, r.text[:200])
        r = raw_post(initialize_body(), state["owner"])
        assert r.status_code == 200 and "result" in rpc_messages(r)[0], (body, r.status_code, r.text[:200])


HTTP_ONLY = [
    ("no key, a wrong key: 401 {code, message}; the SDK raises", unauthorized),
    ("stateless: no Mcp-Session-Id, tools/list without a session", stateless),
    ("malformed JSON-RPC bodies: no 5xx, initialize still answered", malformed),
]

# The stdio bridge with the key in DOCCHAT_API_KEY: the key it reads is the user's.
ENV_KEY = [
    ("initialize", initialize),
    ("list_collections: the owner's collection", list_collections),
    ("another user: list_collections and search show nothing of the owner's", other_user_sees_nothing),
]


# --- runner ---------------------------------------------------------------------------


def record(name, error):
    results.append((name, error))
    print(f"FAIL {name}\n{error}" if error else f"PASS {name}", flush=True)


def innermost(error):
    """The one failure inside the SDK's task groups (an AssertionError raised in a session's
    block comes out wrapped in exception groups)."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error


async def run_check(name, fn, connect):
    try:
        with anyio.fail_after(CHECK_SECONDS):
            await fn(connect)
    except (Exception, BaseExceptionGroup) as e:  # noqa: BLE001 - report every failure, keep going
        record(name, "".join(traceback.format_exception(innermost(e))))
    else:
        record(name, None)


def run_setup(name, fn):
    try:
        fn()
    except Exception:  # noqa: BLE001
        record(name, traceback.format_exc())
        return False
    record(name, None)
    return True


async def main():
    if (run_setup("setup: the administrator creates two users with their keys", setup_users)
            and run_setup("setup: the owner's 3-page PDF uploaded into a new collection and ingested", setup_document)):
        suites = [("http", over_http, SHARED + HTTP_ONLY)]
        if ARGS.stdio_command:
            suites += [("stdio --key", over_stdio(False), SHARED),
                       ("stdio DOCCHAT_API_KEY", over_stdio(True), ENV_KEY)]
        for transport, connect, checks in suites:
            for name, fn in checks:
                await run_check(f"[{transport}] {name}", fn, connect)
    failed = [name for name, error in results if error]
    print(f"\n{len(results) - len(failed)}/{len(results)} passed")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(anyio.run(main))
