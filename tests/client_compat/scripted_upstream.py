"""A scripted OpenAI-compatible upstream for the client checks: POST /v1/chat/completions
answers ANSWER, whole or streamed one word an event (WORD_SECONDS apart) with usage last. Prints its port.

An agent's request (with `tools`) whose question carries one of TOOL_MARKS calls that tool,
then answers with its result. One whose question contains CSV_MARK is answered with a call
of the `python` tool that analyses sales.csv where the system prompt says the collection's
documents are, and saves a chart; once the tool's
result is in the conversation, with a text quoting the result's TOTAL line.

A question containing SLOW_MARK is answered after SLOW_SECONDS (the checks cancel it
first). One containing TRICKLE_MARK is streamed one word every TRICKLE_SECONDS, TRICKLE_WORDS
words in all (tests/compose/faults.py kills the replica streaming it); PACED_MARK likewise,
PACED_WORDS words every PACED_SECONDS (the background responses of check_openai_client.py);
STAMP_MARK, pieces that are the upstream's send times (bench/ws). One whose messages contain
ECHO_MARK is answered with the messages it was sent, as JSON [[role, content], ...] (the
checks of what docchat made of a request).

GET /traceparents lists the `traceparent` header of every request received (None where it had
none), in order.

Usage: scripted_upstream.py [HOST]  (runs until killed; HOST defaults to 127.0.0.1: the compose
test binds the Docker bridge's address so that containers reach it)
"""

import json
import re
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ANSWER = "Paris is the capital of France."
# Between the words of a streamed ANSWER.
WORD_SECONDS = 0.02
SLOW_MARK = "[answer slowly]"
SLOW_SECONDS = 60
TRICKLE_MARK = "[answer word by word]"
TRICKLE_SECONDS = 0.5
TRICKLE_WORDS = 80
PACED_MARK = "[answer at a pace]"
PACED_SECONDS = 0.1
PACED_WORDS = 30
# bench/ws: each piece is the upstream's clock when it was sent (STAMP_PIECES of them,
# STAMP_SECONDS apart), so a client on the same host measures each piece's lag.
STAMP_MARK = "[answer with send times]"
STAMP_PIECES = 20
STAMP_SECONDS = 0.05
ECHO_MARK = "[echo the prompt]"
CSV_MARK = "[analyse sales.csv]"
CSV_CODE = """import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd
df = pd.read_csv("DOCUMENTS/sales.csv")
ax = df.plot(x="month", y="amount", kind="bar", legend=False)
ax.set_ylabel("amount")
plt.tight_layout()
plt.savefig("sales_chart.png")
print("TOTAL", int(df["amount"].sum()))
"""


# Questions marked so call one tool once, then answer PREFIX and the tool's result: the
# custom-tool checks (a general_code function, an MCP server's tool).
TOOL_MARKS = {
    "[add 40 and 2]": ("add_numbers", {"a": 40, "b": 2}, "SUM"),
    "[local mcp add 2 and 3]": ("calc__add", {"a": 2, "b": 3}, "LOCAL"),
    "[remote mcp add 4 and 5]": ("remote_calc__add", {"a": 4, "b": 5}, "REMOTE"),
    # A tool run that lasts (tests/compose/faults.py kills the agent replica running it).
    "[sleep in python]": ("python", {"code": "import time\ntime.sleep(45)\nprint('slept')"}, "SLEPT"),
    # The trace check's agent run: one search of the collection.
    "[search the documents]": ("search_documents", {"query": "capital of France"}, "FOUND"),
}

# The `traceparent` headers of the requests received, in order (GET /traceparents): the trace
# check sees docchat's trace reach its model upstream.
TRACEPARENTS = []


def marked_tool_step(mark, messages, results):
    name, args, prefix = TOOL_MARKS[mark]
    if not results:
        return {"call": {"id": "call_tool", "name": name, "arguments": json.dumps(args)}}
    return {"text": f"{prefix} {results[-1].get('content')}"}


def agent_step(body):
    """The agent's next step for a marked question: a tool call, a text, or None (not ours)."""
    if not body.get("tools"):
        return None
    messages = body.get("messages", [])
    users = [m for m in messages if m.get("role") == "user"]
    if not users:
        return None
    question = str(users[-1].get("content"))
    last_user = max(i for i, m in enumerate(messages) if m.get("role") == "user")
    results = [m for m in messages[last_user:] if m.get("role") == "tool"]
    mark = next((m for m in TOOL_MARKS if m in question), None)
    if mark:
        return marked_tool_step(mark, messages, results)
    if CSV_MARK not in question:
        return None
    if not results:
        # Where the collection's documents are, as the system prompt says (the sandbox's
        # /documents, or their host path under a backend without a mount namespace).
        system = " ".join(str(m.get("content")) for m in messages if m.get("role") == "system")
        found = re.search(r"readable \(not writable\) by your code at (\S+?):", system)
        code = CSV_CODE.replace("DOCUMENTS", found.group(1) if found else "/documents")
        return {"call": {"id": "call_csv", "name": "python", "arguments": json.dumps({"code": code})}}
    out = str(results[-1].get("content"))
    total = next((line for line in out.splitlines() if line.startswith("TOTAL")), "no total: " + out[:200])
    return {"text": f"{total}. The chart is sales_chart.png."}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path != "/traceparents":
            self.send_response(404)
            self.send_header("content-length", "0")
            self.end_headers()
            return
        self.send_whole(json.dumps(TRACEPARENTS).encode())

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
        TRACEPARENTS.append(self.headers.get("traceparent"))
        model = body.get("model", "scripted")
        usage = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
        if SLOW_MARK in json.dumps(body.get("messages", [])):
            time.sleep(SLOW_SECONDS)
        step = agent_step(body)
        if step is not None:
            self.agent_reply(body, step, usage)
            return
        if ECHO_MARK in json.dumps(body.get("messages", [])):
            self.echo(body, model, usage)
            return
        if not body.get("stream"):
            out = json.dumps({
                "id": "chatcmpl-scripted", "object": "chat.completion", "created": 1700000000,
                "model": model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": ANSWER},
                             "finish_reason": "stop"}],
                "usage": usage,
            }).encode()
            self.send_whole(out)
            return
        # The last message only: a later question in the same session (its history holds
        # the marked one) is answered at once.
        last = json.dumps((body.get("messages") or [{}])[-1])
        if TRICKLE_MARK in last:
            self.trickle(usage, TRICKLE_WORDS, TRICKLE_SECONDS)
            return
        if PACED_MARK in last:
            self.trickle(usage, PACED_WORDS, PACED_SECONDS)
            return
        if STAMP_MARK in last:
            self.stamps(usage)
            return
        send = self.start_stream()
        for word in ANSWER.split(" "):
            piece = word if word.endswith(".") else word + " "
            send(json.dumps({"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}))
            # A model streams over time: pieces sent at once may reach the client as one.
            time.sleep(WORD_SECONDS)
        send(json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}))
        send(json.dumps({"choices": [], "usage": usage}))
        self.end_stream(send)


    def echo(self, body, model, usage):
        echo = json.dumps([[m.get("role"), m.get("content")] for m in body.get("messages", [])])
        if not body.get("stream"):
            self.send_whole(json.dumps({
                "id": "chatcmpl-scripted", "object": "chat.completion", "created": 1700000000,
                "model": model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": echo},
                             "finish_reason": "stop"}],
                "usage": usage,
            }).encode())
            return
        send = self.start_stream()
        send(json.dumps({"choices": [{"index": 0, "delta": {"content": echo}, "finish_reason": None}]}))
        send(json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}))
        send(json.dumps({"choices": [], "usage": usage}))
        self.end_stream(send)

    def trickle(self, usage, words, seconds):
        send = self.start_stream()
        try:
            for i in range(words):
                send(json.dumps({"choices": [{"index": 0, "delta": {"content": f"word{i} "}, "finish_reason": None}]}))
                time.sleep(seconds)
            send(json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}))
            send(json.dumps({"choices": [], "usage": usage}))
            self.end_stream(send)
        except OSError:
            pass  # the caller went away (killed): nothing to answer

    def stamps(self, usage):
        send = self.start_stream()
        try:
            for _ in range(STAMP_PIECES):
                piece = f"{time.time():.6f} "
                send(json.dumps({"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}))
                time.sleep(STAMP_SECONDS)
            send(json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}))
            send(json.dumps({"choices": [], "usage": usage}))
            self.end_stream(send)
        except OSError:
            pass

    def send_whole(self, out):
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def start_stream(self):
        """Starts a chunked event stream; answers the function that sends one event."""
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()

        def send(data):
            payload = f"data: {data}\n\n".encode()
            self.wfile.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
            self.wfile.flush()

        return send

    def end_stream(self, send):
        send("[DONE]")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def agent_reply(self, body, step, usage):
        """One agent step, streamed (the arguments in two pieces) or whole."""
        if "call" in step:
            c = step["call"]
            message = {"role": "assistant", "content": None, "tool_calls": [
                {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}]}
            finish = "tool_calls"
        else:
            message = {"role": "assistant", "content": step["text"]}
            finish = "stop"
        if not body.get("stream"):
            out = json.dumps({"id": "chatcmpl-scripted", "object": "chat.completion", "created": 1700000000,
                              "model": body.get("model", "scripted"),
                              "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                              "usage": usage}).encode()
            self.send_whole(out)
            return
        send = self.start_stream()
        if "call" in step:
            c = step["call"]
            half = len(c["arguments"]) // 2
            send(json.dumps({"choices": [{"index": 0, "delta": {"tool_calls": [
                {"index": 0, "id": c["id"], "type": "function",
                 "function": {"name": c["name"], "arguments": c["arguments"][:half]}}]}, "finish_reason": None}]}))
            send(json.dumps({"choices": [{"index": 0, "delta": {"tool_calls": [
                {"index": 0, "function": {"arguments": c["arguments"][half:]}}]}, "finish_reason": None}]}))
        else:
            send(json.dumps({"choices": [{"index": 0, "delta": {"content": step["text"]}, "finish_reason": None}]}))
        send(json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}))
        send(json.dumps({"choices": [], "usage": usage}))
        self.end_stream(send)


def main():
    host = sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1"
    server = ThreadingHTTPServer((host, 0), Handler)
    print(server.server_address[1], flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
