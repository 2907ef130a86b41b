"""The h2oGPTe client's chat WebSocket (/ws) beside REST's JSON-lines stream
(POST /chats/{id}/completions with stream: true), on the same question, against one running
docchat whose model `scripted` is tests/client_compat/scripted_upstream.py.

Each question asks the upstream for 20 pieces 50 ms apart, each piece being the upstream's
clock when it sent it (same host, same clock): a piece's lag is when the client read it
minus when the upstream sent it, i.e. what docchat (chat-service, gateway, transport) adds.
Time to first part is from sending the question to reading the first piece of text.
Rounds alternate WebSocket and REST so that drift spoils neither.

Usage: bench.py BASE_URL KEY [--rounds N]
"""

import argparse
import json
import statistics
import time
import uuid

import requests
from websockets.sync.client import connect

MARK = "[answer with send times]"

parser = argparse.ArgumentParser()
parser.add_argument("base")
parser.add_argument("key")
parser.add_argument("--rounds", type=int, default=30)
args = parser.parse_args()
BASE = args.base.rstrip("/")
H = {"Authorization": f"Bearer {args.key}"}


def new_chat():
    r = requests.post(f"{BASE}/api/v1/chats", headers=H, json={}, timeout=30)
    r.raise_for_status()
    return r.json()["id"]


def stamps_of(text, now):
    return [now - float(s) for s in text.split()]


def over_rest(chat):
    body = {"message": f"{MARK} {uuid.uuid4()}", "llm": "scripted", "stream": True,
            "include_chat_history": "off", "rag_config": {"rag_type": "llm_only"}}
    start = time.time()
    first, lags = None, []
    with requests.post(f"{BASE}/api/v1/chats/{chat}/completions", headers=H, json=body,
                       stream=True, timeout=60) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            now = time.time()
            if not line:
                continue
            item = json.loads(line)
            if item.get("body"):
                first = first or now
                lags += stamps_of(item["body"], now)
            if item.get("finished"):
                assert not item.get("error"), item
                break
    return first - start, lags


def over_socket(ws, chat):
    frame = {"t": "cq", "mode": "s", "session_id": chat, "correlation_id": str(uuid.uuid4()),
             "body": f"{MARK} {uuid.uuid4()}", "llm": "scripted", "llm_args": "null",
             "rag_config": json.dumps({"rag_type": "llm_only"}), "include_chat_history": "off"}
    start = time.time()
    ws.send(json.dumps(frame))
    first, lags = None, []
    while True:
        message = ws.recv(timeout=60)
        now = time.time()
        for line in message.splitlines():
            item = json.loads(line)
            if item["t"] == "cp" and item["body"]:
                first = first or now
                lags += stamps_of(item["body"], now)
            elif item["t"] == "ce":
                raise RuntimeError(item)
            elif item["t"] == "ca":
                return first - start, lags


def summary(name, firsts, lags):
    ms = lambda xs: [x * 1000 for x in xs]  # noqa: E731
    f, l = sorted(ms(firsts)), sorted(ms(lags))
    pct = lambda xs, p: xs[min(len(xs) - 1, int(p * len(xs)))]  # noqa: E731
    print(f"| {name} | {statistics.median(f):.2f} | {pct(f, 0.9):.2f} | {statistics.median(l):.2f} "
          f"| {pct(l, 0.9):.2f} | {pct(l, 0.99):.2f} | {len(l)} |")


chat = new_chat()
# Warm both paths once.
over_rest(chat)
with connect(f"{BASE.replace('http', 'ws', 1)}/ws?currentSessionID={chat}&source=py",
             additional_headers=H) as ws:
    over_socket(ws, chat)
    rest_first, rest_lags, ws_first, ws_lags = [], [], [], []
    for _ in range(args.rounds):
        f, l = over_socket(ws, chat)
        ws_first.append(f)
        ws_lags += l
        f, l = over_rest(chat)
        rest_first.append(f)
        rest_lags += l

print(f"{args.rounds} rounds, 20 pieces each, 50 ms apart (ms)")
print("| transport | first part p50 | first part p90 | lag p50 | lag p90 | lag p99 | pieces |")
print("|---|---|---|---|---|---|---|")
summary("WebSocket /ws", ws_first, ws_lags)
summary("REST JSON lines", rest_first, rest_lags)
