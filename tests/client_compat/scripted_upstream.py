"""A scripted OpenAI-compatible upstream for the client checks: POST /v1/chat/completions
answers ANSWER, whole or streamed one word an event with usage last. Prints its port.

Usage: scripted_upstream.py [HOST]  (runs until killed; HOST defaults to 127.0.0.1: the compose
test binds the Docker bridge's address so that containers reach it)
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ANSWER = "Paris is the capital of France."


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
        model = body.get("model", "scripted")
        usage = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
        if not body.get("stream"):
            out = json.dumps({
                "id": "chatcmpl-scripted", "object": "chat.completion", "created": 1700000000,
                "model": model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": ANSWER},
                             "finish_reason": "stop"}],
                "usage": usage,
            }).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)
            return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()

        def send(data):
            payload = f"data: {data}\n\n".encode()
            self.wfile.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
            self.wfile.flush()

        for word in ANSWER.split(" "):
            piece = word if word.endswith(".") else word + " "
            send(json.dumps({"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}))
        send(json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}))
        send(json.dumps({"choices": [], "usage": usage}))
        send("[DONE]")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


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
