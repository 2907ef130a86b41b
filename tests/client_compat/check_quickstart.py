"""The official h2oGPTe client's own quickstart, line for line, against a running docchat, then
the doors it opened (the chat WebSocket at /ws and the uploads at /rpc/fs) used as a hostile
client would, and the client's everyday top-level methods.

Usage: check_quickstart.py BASE_URL ADMIN_KEY [--max-upload-mb N]
Prints one line per check and ends with `N passed, M failed`.
"""

import argparse
import asyncio
import io
import json
import os
import tempfile
import sys
import threading
import time
import traceback
import urllib.error
import urllib.request
import uuid

from h2ogpte import H2OGPTE, H2OGPTEAsync
from h2ogpte.errors import ObjectNotFoundError
from h2ogpte.types import ChatMessage, PartialChatMessage
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect as ws_connect

parser = argparse.ArgumentParser()
parser.add_argument("base")
parser.add_argument("admin_key")
parser.add_argument("--second-base", default=None,
                    help="another gateway of the same deployment (default: the first)")
parser.add_argument("--max-body-mb", type=int, default=140,
                    help="the server's body limit (DOCCHAT_MAX_BODY_BYTES / 1e6), to exceed it")
args = parser.parse_args()
BASE, ADMIN_KEY = args.base.rstrip("/"), args.admin_key
WS_BASE = BASE.replace("http://", "ws://").replace("https://", "wss://")
# Another gateway of the same deployment (compose: a second replica): the async quickstart
# runs through it, and a dropped WebSocket re-attaches through it.
SECOND = (args.second_base or args.base).rstrip("/")
WS_SECOND = SECOND.replace("http://", "ws://").replace("https://", "wss://")
results = []

# The quickstart's document: a one-page text PDF (standard library only) whose facts the
# question asks about in other words.
FACTS = [
    "The Aurora X200 kettle holds 1.7 litres of water.",
    "Its warranty lasts three years from the date of purchase.",
    "Descale the kettle every month with white vinegar.",
]


def check(name):
    def wrap(fn):
        try:
            fn()
            results.append((name, None))
            print(f"PASS {name}", flush=True)
        except Exception:  # noqa: BLE001 - report every failure, keep going
            results.append((name, traceback.format_exc()))
            print(f"FAIL {name}\n{traceback.format_exc()}", flush=True)
        return fn

    return wrap


def pdf_bytes(lines):
    def esc(s):
        return s.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")

    ops = ["BT", "/F1 12 Tf", "16 TL", "60 760 Td"] + [f"({esc(l)}) Tj T*" for l in lines] + ["ET"]
    stream = "\n".join(ops).encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents 5 0 R >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for off in offsets:
        out += b"%010d 00000 n \n" % off
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def http(method, path, key, body=None, headers=None):
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    h = {"Authorization": f"Bearer {key}"} if key else {}
    if body is not None and not isinstance(body, bytes):
        h["Content-Type"] = "application/json"
    h.update(headers or {})
    req = urllib.request.Request(f"{BASE}{path}", method=method, data=data, headers=h)
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            raw = r.read()
            return r.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            return e.code, json.loads(raw)
        except ValueError:
            return e.code, raw


def new_user(name):
    """A user of its own with a key (the admin creates both)."""
    from h2ogpte.rest_sync import ApiClient, Configuration
    from h2ogpte.rest_sync.api.api_keys_api import APIKeysApi
    from h2ogpte.rest_sync.models.api_key_create_request import APIKeyCreateRequest

    username = f"{name}-{uuid.uuid4().hex[:8]}"
    status, user = http("POST", "/api/v1/admin/users", ADMIN_KEY,
                        {"username": username, "email": f"{username}@example.com"})
    assert status in (200, 201), (status, user)
    admin = ApiClient(Configuration(host=f"{BASE}/api/v1", access_token=ADMIN_KEY))
    result = APIKeysApi(admin).create_api_key_for_user(
        APIKeyCreateRequest(user_id=user["id"], name=f"{name} key"))
    return result.secret_key


state = {}
manual = os.path.join(tempfile.mkdtemp(), "manual.pdf")
with open(manual, "wb") as f:
    f.write(pdf_bytes(FACTS))
state["user_key"] = new_user("quickstart")
state["other_key"] = new_user("intruder")


@check("quickstart: H2OGPTE, create_collection, upload (PUT /rpc/fs), ingest_uploads, "
       "create_chat_session, connect (/ws) and query with a streaming callback, line for line")
def quickstart():
    client = H2OGPTE(address=BASE, api_key=state["user_key"])
    col = client.create_collection("manuals", "product manuals")
    up = client.upload("manual.pdf", open(manual, "rb"))
    client.ingest_uploads(col, [up])
    chat = client.create_chat_session(col)
    parts = []
    with client.connect(chat) as session:
        reply = session.query("How big is the kettle, and how long is it covered?", timeout=120,
                              callback=parts.append)
        print(reply.content)
    partial = [p for p in parts if isinstance(p, PartialChatMessage)]
    final = [p for p in parts if isinstance(p, ChatMessage)]
    assert len(partial) >= 2, f"the answer came in {len(partial)} streamed part(s): {parts}"
    assert len(final) == 1 and final[0].id == reply.id, parts
    assert "".join(p.content for p in partial) == reply.content, (partial, reply.content)
    assert reply.content.strip(), reply
    assert all(p.reply_to == reply.reply_to for p in partial), parts
    refs = client.list_chat_messages_full(chat, offset=0, limit=10)
    answer = next(m for m in refs if m.id == reply.id)
    references = client.list_chat_message_references(answer.id)
    assert any(r.document_name == "manual.pdf" for r in references), references
    state.update(client=client, col=col, chat=chat, reply=reply)


@check("quickstart with the async client (H2OGPTEAsync, SessionAsync): the same steps, "
       "through the second gateway when there is one")
def quickstart_async():
    async def run():
        client = H2OGPTEAsync(address=SECOND, api_key=state["user_key"])
        col = await client.create_collection("manuals async", "product manuals")
        up = await client.upload("manual.pdf", open(manual, "rb"))
        await client.ingest_uploads(col, [up])
        chat = await client.create_chat_session(col)
        parts = []
        async with client.connect(chat) as session:
            first = await session.query("How big is the kettle?", timeout=120, callback=parts.append)
            second = await session.query("How often should it be descaled?", timeout=120)
        assert first.content.strip() and second.content.strip(), (first, second)
        assert first.id != second.id, (first, second)
        assert any(isinstance(p, PartialChatMessage) for p in parts), parts
        messages = await client.list_chat_messages(chat, offset=0, limit=10)
        assert {first.id, second.id} <= {m.id for m in messages}, messages

    asyncio.run(run())


def raw_socket(chat, key, ws_base=WS_BASE, **kw):
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return ws_connect(f"{ws_base}/ws?currentSessionID={chat}&source=py",
                      additional_headers=headers, open_timeout=10, **kw)


def drop(ws):
    """Drops a connection as a crashed client would (no close frame). websockets' receiving
    thread, not a daemon, waits for each message it read to be fetched: its queue is closed
    too, else the script could not exit."""
    ws.socket.close()
    ws.recv_messages.close()
    ws.recv_events_thread.join(timeout=10)


def query_frame(chat, message, **options):
    frame = {"t": "cq", "mode": "s", "session_id": chat, "correlation_id": str(uuid.uuid4()),
             "body": message, "system_prompt": None, "pre_prompt_query": None, "prompt_query": None,
             "pre_prompt_summary": None, "prompt_summary": None, "llm": None, "llm_args": "null",
             "self_reflection_config": "null", "rag_config": "null", "include_chat_history": "auto",
             "tags": None, "metadata_filter": None, "image_batch_image_prompt": None,
             "image_batch_final_prompt": None}
    frame.update(options)
    return frame


def read_until_final(ws, timeout=60):
    frames = []
    deadline = time.time() + timeout
    while time.time() < deadline:
        for line in ws.recv(timeout=deadline - time.time()).splitlines():
            frame = json.loads(line)
            frames.append(frame)
            if frame["t"] in ("ca", "ce"):
                return frames
    raise TimeoutError(frames)


@check("the WebSocket refuses a missing or bad key (401) and another user's or an unknown "
       "session (404) before the upgrade; the client raises its own errors for them")
def socket_doors():
    chat = state["chat"]
    for key in (None, "sk-not-a-key"):
        try:
            raw_socket(chat, key).close()
            raise AssertionError(f"connected with key {key!r}")
        except InvalidStatus as e:
            assert e.response.status_code == 401, e
    for sid in (chat, str(uuid.uuid4())):
        try:
            raw_socket(sid, state["other_key"]).close()
            raise AssertionError(f"another user connected to {sid}")
        except InvalidStatus as e:
            assert e.response.status_code == 404, e
    intruder = H2OGPTE(address=BASE, api_key=state["other_key"])
    try:
        with intruder.connect(chat) as session:
            session.query("what is in their documents?", timeout=20)
        raise AssertionError("the client connected to another user's session")
    except ObjectNotFoundError:
        pass


@check("over the WebSocket: options reach the completion (llm by name and by index, llm_args, "
       "rag_config, system prompt, history off); errors before and after the question as the "
       "client matches them; several queries on one connection")
def socket_queries():
    chat = state["chat"]
    client = state["client"]
    with client.connect(chat) as session:
        reply = session.query("Answer briefly: what is the capital of France?", llm="scripted",
                              llm_args={"temperature": 0.2, "max_new_tokens": 64},
                              rag_config={"rag_type": "llm_only"}, system_prompt="Be brief.",
                              include_chat_history=False, timeout=60)
        assert reply.content == "Paris is the capital of France.", reply
        names = [m["display_name"] for m in client.get_llms()]
        index = names.index("Scripted")
        again = session.query("And again?", llm=index, rag_config={"rag_type": "llm_only"}, timeout=60)
        assert again.content == "Paris is the capital of France.", again
        for bad in ({"llm": "no-such-model"}, {"llm_args": {"temperature": "hot"}},
                    {"rag_config": {"rag_type": "guess"}}, {"tags": {"colour": ["red"]}},
                    {"metadata_filter": {"kind": "manual"}}):
            try:
                session.query("anything", timeout=30, **bad)
                raise AssertionError(f"{bad} was accepted")
            except Exception as e:  # noqa: BLE001 - the client's SessionError
                assert type(e).__name__ == "SessionError" and "Remote error" in str(e), (bad, e)
        # The connection still answers after the errors.
        last = session.query("Still there?", llm="scripted", rag_config={"rag_type": "llm_only"}, timeout=60)
        assert last.content == "Paris is the capital of France.", last


@check("over the WebSocket: pre_prompt_query and prompt_query shape the prompt (prompt_raw), and "
       "tags (a list, TagFilter include/exclude, document_ids) choose the documents RAG reads")
def socket_prompt_and_tags():
    from h2ogpte.types import TagFilter

    client = state["client"]
    col = client.create_collection("tagged", "two documents, one tagged")
    ups = [client.upload("kettle.txt", io.BytesIO(b"The Aurora kettle boils water in ninety seconds.")),
           client.upload("toaster.txt", io.BytesIO(b"The Aurora toaster browns bread in ninety seconds."))]
    for up in ups:  # the client waits for one job per call: one upload each
        client.ingest_uploads(col, [up])
    docs = {d.name: d.id for d in client.list_documents_in_collection(col, offset=0, limit=10)}
    assert set(docs) == {"kettle.txt", "toaster.txt"}, docs
    client.tag_document(docs["kettle.txt"], "red")
    chat = client.create_chat_session(col)
    rag = {"rag_type": "rag"}

    def cited(reply):
        return {r.document_name for r in client.list_chat_message_references(reply.id)}

    with client.connect(chat) as session:
        reply = session.query("How fast is the Aurora?", llm="scripted", rag_config=rag, timeout=60,
                              pre_prompt_query="PRE-MARKER read these:", prompt_query="POST-MARKER ")
        raw = client.list_chat_message_meta_part(reply.id, "prompt_raw").content
        assert "PRE-MARKER read these:" in raw and "POST-MARKER How fast is the Aurora?" in raw, raw
        assert cited(reply) == {"kettle.txt", "toaster.txt"}, cited(reply)
        only_red = session.query("How fast is the Aurora?", llm="scripted", rag_config=rag, tags=["red"], timeout=60)
        assert cited(only_red) == {"kettle.txt"}, cited(only_red)
        not_red = session.query("How fast is the Aurora?", llm="scripted", rag_config=rag,
                                tags=TagFilter(exclude=["red"]), timeout=60)
        assert cited(not_red) == {"toaster.txt"}, cited(not_red)
        by_id = session.query("How fast is the Aurora?", llm="scripted", rag_config=rag,
                              tags=TagFilter(include=["red"], document_ids=[docs["toaster.txt"]]), timeout=60)
        assert cited(by_id) == {"toaster.txt"}, cited(by_id)
        nothing = session.query("How fast is the Aurora?", llm="scripted", rag_config=rag, tags=["blue"], timeout=60)
        assert cited(nothing) == set(), cited(nothing)


@check("a stop through REST (stop_chat with the acknowledged question id) ends a WebSocket "
       "reply: its final message arrives, shorter than the whole answer")
def socket_stop():
    chat = state["chat"]
    with raw_socket(chat, state["user_key"]) as ws:
        ws.send(json.dumps(query_frame(chat, "[answer word by word] tell me everything",
                                       llm="scripted", rag_config=json.dumps({"rag_type": "llm_only"}))))
        ack = json.loads(ws.recv(timeout=30))
        assert ack["t"] == "cx" and ack["message_id"], ack
        first = json.loads(ws.recv(timeout=30))
        assert first["t"] == "cp" and first["reply_to_id"] == ack["message_id"], first
        state["client"].stop_chat(ack["message_id"])
        frames = read_until_final(ws, timeout=30)
        final = frames[-1]
        assert final["t"] == "ca" and final["reply_to_id"] == ack["message_id"], final
        assert len(final["body"].split()) < 80, final


@check("a dropped connection: the reply is generated and stored all the same, and a new "
       "connection to the session (through the second gateway when there is one) follows it "
       "to its whole final message")
def socket_reattach():
    chat = state["chat"]
    ws = raw_socket(chat, state["user_key"])
    ws.send(json.dumps(query_frame(chat, "[answer word by word] count slowly", llm="scripted",
                                   rag_config=json.dumps({"rag_type": "llm_only"}))))
    ack = json.loads(ws.recv(timeout=30))
    assert ack["t"] == "cx", ack
    seen = [json.loads(ws.recv(timeout=30)) for _ in range(3)]
    assert all(f["t"] == "cp" for f in seen), seen
    drop(ws)  # dropped, not closed politely
    time.sleep(1.5)
    # Through the other gateway when there is one: no gateway holds the reply.
    with raw_socket(chat, state["user_key"], ws_base=WS_SECOND) as again:
        frames = read_until_final(again, timeout=90)
    final = frames[-1]
    assert final["t"] == "ca" and final["reply_to_id"] == ack["message_id"], final
    assert len(final["body"].split()) == 80, final
    assert any(f["t"] == "cp" for f in frames[:-1]), frames


def timed_get(key):
    at = time.perf_counter()
    status, _ = http("GET", "/api/v1/collections?limit=5", key)
    assert status == 200, status
    return time.perf_counter() - at


@check("hostile sockets: a 100 MB frame closes that connection (1009) without a server error; "
       "2,000 queries on one connection and a client that never reads are bounded, and another "
       "user's calls meanwhile stay fast")
def socket_hostile():
    chat = state["chat"]
    baseline = sorted(timed_get(state["other_key"]) for _ in range(5))[2]
    # A 100 MB frame: refused once its header says how long it is.
    with raw_socket(chat, state["user_key"], max_size=None) as ws:
        try:
            ws.send("x" * (100 * 1024 * 1024))
            ws.recv(timeout=30)
            raise AssertionError("a 100 MB frame was read")
        except ConnectionClosed as e:
            assert e.rcvd is None or e.rcvd.code == 1009, e
        except OSError:
            pass  # the server closed while the frame was still being sent
    # Thousands of queries on one connection (unknown model: each is refused), read slowly.
    flood = raw_socket(chat, state["user_key"])
    stop = threading.Event()
    def send_all():
        try:
            for i in range(2000):
                if stop.is_set():
                    return
                flood.send(json.dumps(query_frame(chat, f"q{i}", llm="no-such-model")))
        except ConnectionClosed:
            pass
    sender = threading.Thread(target=send_all, daemon=True)
    sender.start()
    # A client that asks and never reads.
    mute = raw_socket(chat, state["user_key"])
    for i in range(50):
        mute.send(json.dumps(query_frame(chat, f"[answer at a pace] mute {i}", llm="scripted",
                                         rag_config=json.dumps({"rag_type": "llm_only"}))))
    during = sorted(timed_get(state["other_key"]) for _ in range(9))[4]
    errors = 0
    try:
        while errors < 2000:
            for line in flood.recv(timeout=60).splitlines():
                frame = json.loads(line)
                assert frame["t"] == "ce" and "no-such-model" in frame["error"], frame
                errors += 1
    finally:
        stop.set()
        drop(flood)
        drop(mute)
    assert errors == 2000, errors
    assert during < max(0.5, 10 * baseline), (baseline, during)
    # The server is still whole: ready, and the flooding user's own calls answer.
    status, _ = http("GET", "/rpc/health/readiness", state["other_key"])
    assert status == 200, status
    status, _ = http("GET", "/api/v1/collections?limit=1", state["user_key"])
    assert status == 200, status


@check("model lists: the vision and reasoning names and each model's `auto` vision/reasoning "
       "model follow the models file's flags; list_embedding_models names the embedder a new "
       "collection gets, the default one first; encode_for_retrieval gives its unit vectors")
def model_lists():
    client = state["client"]
    # The names a query's `llm` takes (get_llm_names gives the display names).
    status, models = http("GET", "/api/v1/models", state["user_key"])
    names = [m["id"] for m in models]
    assert status == 200 and {"scripted", "scripted-eyes"} <= set(names), models
    # scripts/lib.sh's models file: `scripted-eyes` reads images and reasons, `scripted` neither.
    vision = client.get_vision_capable_llm_names()
    assert "scripted-eyes" in vision and "scripted" not in vision, vision
    reasoning = client.get_reasoning_capable_llm_names()
    assert reasoning == ["scripted-eyes"], reasoning
    for mapping in (client.get_llm_and_auto_vision_llm_names(),
                    client.get_llm_and_auto_reasoning_llm_names()):
        assert mapping["scripted-eyes"] == "scripted-eyes", mapping
        assert mapping["scripted"] == "scripted-eyes", mapping
        assert set(mapping) == set(names), (mapping, names)
    embedders = client.list_embedding_models()
    assert embedders and len(set(embedders)) == len(embedders), embedders
    status, default = http("GET", "/api/v1/embedding_models/default", state["user_key"])
    assert status == 200 and default["id"] == embedders[0] and default["is_default"], default
    assert default["description"] and isinstance(default["languages"], list), default
    # encode_for_retrieval: the default model's unit vectors, the same for the same text.
    vectors = client.encode_for_retrieval(["The kettle is red.", "It holds 1.7 litres.",
                                           "The kettle is red."])
    assert len(vectors) == 3 and all(len(v) == len(vectors[0]) > 0 for v in vectors), vectors
    assert all(abs(sum(x * x for x in v) - 1) < 1e-3 for v in vectors), [sum(x * x for x in v) for v in vectors]
    assert vectors[0] == vectors[2] and vectors[0] != vectors[1]
    assert client.encode_for_retrieval(["a"], embedding_model=embedders[0]) == \
        client.encode_for_retrieval(["a"])
    status, body = http("POST", "/api/v1/embedding_models/no-such-model/encode_chunks_for_retrieval",
                        state["user_key"], {"chunks": ["a"]})
    assert status == 404 and body["code"] == 404, (status, body)
    status, body = http("POST", f"/api/v1/embedding_models/{embedders[0]}/encode_chunks_for_retrieval",
                        state["user_key"], {"chunks": ["x"] * 257})
    assert status == 400, (status, body)
    col = client.create_collection("embedded by default", "")
    assert client.get_collection(col).embedding_model == embedders[0]
    status, _ = http("DELETE", f"/api/v1/collections/{col}", state["user_key"])
    assert status == 204, status
    status, body = http("GET", "/api/v1/embedding_models", None)
    assert status == 401, (status, body)


def key_info(admin, key_id):
    return next(k for k in admin.list_all_api_keys(0, 1000) if k.id == key_id)


@check("API keys' lives: set_api_key_expiration (set, removed), set_api_key_inactivity_interval "
       "(set, removed, a bad one refused), deactivate_api_key ends the key for good; an "
       "administrator cannot deactivate their own last key, nor make it expire within the hour (409)")
def api_key_lives():
    from h2ogpte.errors import InvalidArgumentError
    admin = H2OGPTE(address=BASE, api_key=ADMIN_KEY)
    username = f"keylife-{uuid.uuid4().hex[:8]}"
    status, user = http("POST", "/api/v1/admin/users", ADMIN_KEY,
                        {"username": username, "email": f"{username}@example.com"})
    assert status in (200, 201), (status, user)
    status, created = http("POST", "/api/v1/admin/api_keys", ADMIN_KEY,
                           {"user_id": user["id"], "name": "key with a life"})
    assert status == 201, (status, created)
    secret = created["secret_key"]
    key = key_info(admin, created["api_key"]["id"])
    assert key.is_active and key.expires_at is None and key.inactivity_interval is None, key
    before = time.time()
    assert admin.set_api_key_expiration(key.id, "2 hours").status == "completed"
    expires = key_info(admin, key.id).expires_at.timestamp()
    assert before + 7200 - 5 <= expires <= time.time() + 7200 + 5, expires - before
    assert admin.set_api_key_expiration(key.id, None).status == "completed"
    assert key_info(admin, key.id).expires_at is None
    assert admin.set_api_key_inactivity_interval(key.id, 3).status == "completed"
    info = key_info(admin, key.id)
    assert info.inactivity_interval == 3 and info.is_active, info
    status, _ = http("GET", "/api/v1/collections?limit=1", secret)
    assert status == 200, status
    for bad in (0, -2):
        try:
            admin.set_api_key_inactivity_interval(key.id, bad)
            raise AssertionError(f"inactivity_interval {bad} was taken")
        except InvalidArgumentError:
            pass
    assert admin.set_api_key_inactivity_interval(key.id, None).status == "completed"
    assert key_info(admin, key.id).inactivity_interval is None
    assert admin.deactivate_api_key(key.id).status == "completed"
    status, body = http("GET", "/api/v1/collections?limit=1", secret)
    assert status == 401, (status, body)
    assert not key_info(admin, key.id).is_active
    # Another user's key id that does not exist: 404, the client's ObjectNotFoundError.
    try:
        admin.deactivate_api_key("no-such-key")
        raise AssertionError("an unknown key was deactivated")
    except ObjectNotFoundError:
        pass
    # Not an administrator: refused.
    status, body = http("POST", f"/api/v1/admin/api_keys/deactivate/{key.id}", state["other_key"])
    assert status == 403, (status, body)
    # An administrator's own only key: deactivating it, or making it expire within the hour,
    # would lock them out (409, the client's HTTPError).
    from h2ogpte.errors import HTTPError
    name = f"keyadmin-{uuid.uuid4().hex[:8]}"
    status, boss = http("POST", "/api/v1/admin/users", ADMIN_KEY,
                        {"username": name, "email": f"{name}@example.com", "roles": ["admin"]})
    assert status in (200, 201), (status, boss)
    status, created = http("POST", "/api/v1/admin/api_keys", ADMIN_KEY, {"user_id": boss["id"]})
    assert status == 201, (status, created)
    other_admin = H2OGPTE(address=BASE, api_key=created["secret_key"])
    for lockout in (lambda: other_admin.deactivate_api_key(created["api_key"]["id"]),
                    lambda: other_admin.set_api_key_expiration(created["api_key"]["id"], "30 minutes")):
        try:
            lockout()
            raise AssertionError("an administrator locked themselves out")
        except HTTPError as e:
            assert e.status_code == 409, e
    status, _ = http("GET", "/api/v1/collections?limit=1", created["secret_key"])
    assert status == 200, status


@check("configurations: bulk_delete_global_configurations (back to the default), a user's "
       "(get_user_configurations_for_user, reset_user_configurations_for_user, "
       "bulk_delete_user_configurations_for_user) and a role's (list_role_configurations, "
       "bulk_delete_role_configurations); unknown names and ids refused, non-administrators too")
def configurations():
    from h2ogpte.errors import InvalidArgumentError
    admin = H2OGPTE(address=BASE, api_key=ADMIN_KEY)
    key = "document_limit_per_user"

    def global_value():
        return next(c.string_value for c in admin.get_global_configurations_by_admin() if c.key_name == key)

    default = global_value()
    admin.set_global_configuration(key, "987654", True, False)
    assert global_value() == "987654"
    remaining = admin.bulk_delete_global_configurations([key])
    assert next(c.string_value for c in remaining if c.key_name == key) == default, remaining
    assert global_value() == default

    username = f"configured-{uuid.uuid4().hex[:8]}"
    status, user = http("POST", "/api/v1/admin/users", ADMIN_KEY,
                        {"username": username, "email": f"{username}@example.com"})
    assert status in (200, 201), (status, user)
    admin.set_user_configuration_for_user(key, "7", user["id"])
    admin.set_user_configuration_for_user("chat_max_concurrent_per_user", "3", user["id"])
    mine = {c.key_name: c.string_value for c in admin.get_user_configurations_for_user(user["id"])}
    assert mine == {key: "7", "chat_max_concurrent_per_user": "3"}, mine
    left = admin.reset_user_configurations_for_user(key, user["id"])
    assert [c.key_name for c in left] == ["chat_max_concurrent_per_user"], left
    assert admin.bulk_delete_user_configurations_for_user(user["id"], ["chat_max_concurrent_per_user"]) == []
    assert admin.get_user_configurations_for_user(user["id"]) == []

    status, role = http("POST", "/api/v1/roles", ADMIN_KEY, {"name": f"role-{uuid.uuid4().hex[:8]}"})
    assert status == 201, (status, role)
    # The client builds its request model with value_type, which it requires (None fails in
    # the client before any call).
    admin.set_role_configuration(key, role["id"], "11", value_type="int")
    admin.set_role_configuration("chat_max_concurrent_per_user", role["id"], "5", value_type="int")
    listed = {c.key_name: c.string_value for c in admin.list_role_configurations(role["id"])}
    assert listed == {key: "11", "chat_max_concurrent_per_user": "5"}, listed
    assert admin.bulk_delete_role_configurations(role["id"], [key, "chat_max_concurrent_per_user"]) == []
    assert admin.list_role_configurations(role["id"]) == []

    for bad in (lambda: admin.bulk_delete_global_configurations(["no_such_setting"]),
                lambda: admin.bulk_delete_role_configurations(role["id"], ["no_such_setting"])):
        try:
            bad()
            raise AssertionError("an unknown setting name was taken")
        except InvalidArgumentError:
            pass
    try:
        admin.list_role_configurations("no-such-role")
        raise AssertionError("an unknown role was listed")
    except ObjectNotFoundError:
        pass
    for method, path in (("DELETE", f"/api/v1/configurations/{key}"),
                         ("GET", f"/api/v1/users/{user['id']}/configurations"),
                         ("GET", f"/api/v1/roles/{role['id']}/configurations")):
        status, body = http(method, path, state["other_key"])
        assert status == 403, (method, path, status, body)


@check("scheduled tasks, the administrators' views: list_scheduled_tasks_by_admin (every user's, "
       "user_filter), update_scheduled_task_by_admin, list_scheduled_task_executions_by_admin, "
       "get_scheduled_task_summary_by_admin, get_scheduled_task_execution_stats, "
       "delete_scheduled_tasks_by_admin; a user gets 403")
def scheduled_tasks_by_admin():
    admin = H2OGPTE(address=BASE, api_key=ADMIN_KEY)
    owner_key = new_user("tasker")
    owner = H2OGPTE(address=BASE, api_key=owner_key)
    name = f"nightly-{uuid.uuid4().hex[:6]}"
    task = owner.create_scheduled_task(name=name, schedule_type="recurring",
                                       schedule_expression="0 3 * * *", task_type="chat_completion",
                                       message="[answer at a pace] the nightly digest",
                                       llm="scripted")
    task_id = task.id if hasattr(task, "id") else task["id"]
    listed = admin.list_scheduled_tasks_by_admin(name_filter=name)
    assert [t.id for t in listed.items] == [task_id] and listed.total == 1, listed
    mine = admin.list_scheduled_tasks_by_admin(name_filter=name, user_filter="no-such-user")
    assert mine.items == [] and mine.total == 0, mine
    theirs = listed.items[0]
    assert admin.list_scheduled_tasks_by_admin(user_filter=theirs.username).total >= 1
    updated = admin.update_scheduled_task_by_admin(task_id, description="checked by an admin",
                                                   status="paused")
    assert updated["status"] == "updated", updated
    again = owner.get_scheduled_task(task_id)
    assert again.description == "checked by an admin" and again.status == "paused", again
    before = admin.get_scheduled_task_summary_by_admin()
    assert before.total_tasks >= 1 and before.unique_users >= 1 and before.paused_tasks >= 1, before
    owner.trigger_scheduled_task(task_id)
    deadline = time.time() + 90
    while True:
        runs = admin.list_scheduled_task_executions_by_admin(task_id=task_id)
        assert runs.total == 1 and runs.items[0].scheduled_task_id == task_id, runs
        if runs.items[0].status != "running" or time.time() > deadline:
            break
        time.sleep(0.5)
    assert runs.items[0].status == "completed", runs
    stats = admin.get_scheduled_task_execution_stats("7 days")
    top = next(t for t in stats.top_tasks if t.task_id == task_id)
    assert top.execution_count == 1 and top.completed_count == 1 and top.task_name == name, top
    assert stats.totals.total_executions >= 1 and stats.totals.total_tasks >= 1, stats.totals
    today = time.strftime("%Y-%m-%d", time.gmtime())
    assert any(d.day == today and d.total >= 1 for d in stats.daily_executions), stats.daily_executions
    # A user is not an administrator: every view is refused.
    for method, path, body in (("GET", "/api/v1/admin/scheduled_tasks", None),
                               ("GET", "/api/v1/admin/scheduled_tasks/summary", None),
                               ("GET", "/api/v1/admin/scheduled_tasks/execution_stats", None),
                               ("GET", "/api/v1/admin/scheduled_tasks/executions", None),
                               ("PUT", f"/api/v1/admin/scheduled_tasks/{task_id}", {"description": "x"}),
                               ("POST", "/api/v1/admin/scheduled_tasks/batch_delete", {"task_ids": [task_id]})):
        status, answer = http(method, path, state["other_key"], body)
        assert status == 403, (method, path, status, answer)
    status, answer = http("GET", "/api/v1/admin/scheduled_tasks/execution_stats?interval=fortnight", ADMIN_KEY)
    assert status == 400, (status, answer)
    deleted = admin.delete_scheduled_tasks_by_admin([task_id])
    assert deleted["count"] == 1, deleted
    assert admin.list_scheduled_tasks_by_admin(name_filter=name).total == 0
    try:
        owner.get_scheduled_task(task_id)
        raise AssertionError("the deleted task is still there")
    except ObjectNotFoundError:
        pass


@check("bulk deletes as jobs: delete_collections, delete_documents, delete_documents_from_collection, "
       "delete_chat_sessions each wait on a finished job of their kind; another user's or an "
       "unknown item fails the job with a line for it and is left alone")
def bulk_delete_jobs():
    client = H2OGPTE(address=BASE, api_key=state["user_key"])
    intruder = H2OGPTE(address=BASE, api_key=state["other_key"])

    def kind(job):
        return getattr(job.kind, "value", job.kind)

    def ingest_note(col, name):
        up = client.upload(name, io.BytesIO(f"{name}: a note to delete".encode()))
        client.ingest_uploads(col, [up])
        return next(d.id for d in client.list_documents_in_collection(col, offset=0, limit=100)
                    if d.name == name)

    # Documents, then documents of one collection.
    col = client.create_collection("to be emptied", "")
    a, b, c = (ingest_note(col, f"note-{i}.txt") for i in range(3))
    job = client.delete_documents([a])
    assert job.completed and kind(job) == "DeleteDocumentsJob" and not job.errors, job
    other_col = intruder.create_collection("not yours", "")
    job = client.delete_documents_from_collection(col, [b, "no-such-document"])
    assert job.completed and kind(job) == "DeleteDocumentsFromCollectionJob", job
    assert len(job.errors) == 1 and "no-such-document" in job.errors[0], job.errors
    left = [d.id for d in client.list_documents_in_collection(col, offset=0, limit=100)]
    assert left == [c], left
    # Collections: the caller's go, another user's stays (the job fails for it).
    doomed = client.create_collection("doomed", "")
    job = client.delete_collections([col, doomed, other_col])
    assert kind(job) == "DeleteCollectionsJob" and len(job.errors) == 1 and other_col in job.errors[0], job
    mine = {x.id for x in client.list_recent_collections(0, 100)}
    assert col not in mine and doomed not in mine, mine
    assert intruder.get_collection(other_col).id == other_col
    # Chat sessions.
    chats = [client.create_chat_session() for _ in range(2)]
    job = client.delete_chat_sessions(chats)
    assert job.completed and kind(job) == "DeleteChatSessionsJob" and not job.errors, job
    for chat in chats:
        try:
            client.list_chat_messages(chat, 0, 1)
            raise AssertionError(f"chat session {chat} is still there")
        except ObjectNotFoundError:
            pass
    # The jobs are the caller's: in their list, not another user's.
    status, answer = http("GET", f"/api/v1/jobs/{job.id}", state["other_key"])
    assert status == 404, (status, answer)
    status, answer = http("POST", "/api/v1/collections/delete_job", state["user_key"], {"collection_ids": []})
    assert status == 400 and answer["code"] == 400, (status, answer)


@check("model calls without a session: answer_question (the system prompt, earlier turns, the "
       "context texts and the question reach the model), summarize_content, extract_data (one "
       "answer per text), a model by name, display name or index; an unknown model is a 404")
def model_calls():
    client = state["client"]
    answer = client.answer_question(
        "[echo the prompt] What colour is the kettle?", system_prompt="Answer briefly.",
        text_context_list=["The kettle is red.", "It holds 1.7 litres."],
        chat_conversation=[("Hello", "Hi, how can I help?")], llm="scripted",
        llm_args={"temperature": 0, "max_new_tokens": 64})
    sent = json.loads(answer.content)
    assert sent[:3] == [["system", "Answer briefly."], ["user", "Hello"],
                        ["assistant", "Hi, how can I help?"]], sent
    role, prompt = sent[-1]
    assert role == "user" and len(sent) == 4, sent
    assert prompt.index("The kettle is red.") < prompt.index("It holds 1.7 litres.") \
        < prompt.index("What colour is the kettle?"), prompt
    assert answer.llm == "scripted" and answer.input_tokens > 0 and answer.output_tokens > 0, answer
    plain = client.answer_question("What is the capital of France?", llm="Scripted")
    assert plain.content == "Paris is the capital of France." and plain.llm == "scripted", plain
    summary = client.summarize_content(["[echo the prompt] first part", "second part"],
                                       prompt_summary="In one line.", llm="scripted")
    (role, prompt), = json.loads(summary.content)
    assert role == "user" and prompt.index("first part") < prompt.index("second part") \
        < prompt.index("In one line."), prompt
    index = [m["display_name"] for m in client.get_llms()].index("Scripted")
    extracted = client.extract_data(["one text", "another text", "a third"], llm=index,
                                    prompt_extract="The colours named.")
    assert extracted.content == ["Paris is the capital of France."] * 3, extracted
    assert extracted.llm == "scripted" and extracted.input_tokens >= 3, extracted
    status, body = http("POST", "/api/v1/models/no-such-model/answer_question", state["user_key"],
                        {"question": "anyone there?"})
    assert status == 404 and body["code"] == 404, (status, body)
    status, body = http("POST", "/api/v1/models/scripted/extract_data", state["user_key"],
                        {"text_context_list": []})
    assert status == 400 and body["code"] == 400, (status, body)
    status, body = http("POST", "/api/v1/models/scripted/answer_question", None, {"question": "q"})
    assert status == 401, (status, body)


@check("/rpc/fs: list_upload's listing (raw: the 1.7.5 client cannot read any JSON answer of "
       "it), delete_upload, another user's upload is a 404, an upload over the body limit is a "
       "413 and leaves nothing")
def rpc_fs():
    client = state["client"]
    up = client.upload("notes.txt", io.BytesIO(b"pending upload"))
    status, listed = http("GET", "/rpc/fs", state["user_key"])
    assert status == 200 and up in listed, (status, listed)
    status, theirs = http("GET", "/rpc/fs", state["other_key"])
    assert status == 200 and up not in theirs, theirs
    status, body = http("DELETE", f"/rpc/fs?id={up}", state["other_key"])
    assert status == 404 and body["code"] == 404, (status, body)
    assert client.delete_upload(up) == up
    status, listed = http("GET", "/rpc/fs", state["user_key"])
    assert up not in listed, listed
    status, body = http("DELETE", f"/rpc/fs?id={up}", state["user_key"])
    assert status == 404, (status, body)
    status, body = http("DELETE", "/rpc/fs", state["user_key"])
    assert status == 400 and body["code"] == 400, (status, body)
    # Over the body limit: 413, and no upload is left behind.
    status, before = http("GET", "/rpc/fs", state["user_key"])
    too_big = (args.max_body_mb + 1) * 1_000_000
    boundary = "docchatboundary"
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"big.bin\"\r\n"
            "Content-Type: application/octet-stream\r\n\r\n").encode()
    tail = f"\r\n--{boundary}--\r\n".encode()
    payload = head + b"\0" * too_big + tail
    status, body = http("PUT", "/rpc/fs", state["user_key"], payload,
                        {"Content-Type": f"multipart/form-data; boundary={boundary}"})
    assert status == 413 and body["code"] == 413, (status, body)
    status, listed = http("GET", "/rpc/fs", state["user_key"])
    assert listed == before, (before, listed)


failed = [name for name, error in results if error]
print(f"{len(results) - len(failed)} passed, {len(failed)} failed")
# Whatever a failed check left open (a socket's receiving thread), the script ends here.
alive = [t.name for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon]
if alive:
    print(f"threads left running: {alive}")
sys.stdout.flush()
os._exit(1 if failed or alive else 0)
