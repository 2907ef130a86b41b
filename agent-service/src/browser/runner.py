"""docchat's browser_action runner, run by /usr/bin/python3 inside the sandbox.

`runner.py describe SCRIPT NAME` prints the tool's function (NAME, else `run`), description
and JSON schema, read with `ast` (the script is not executed). `runner.py call SCRIPT
FUNCTION SOCKET TIMEOUT` reads the model's arguments (a JSON object) on stdin, starts
headless chromium, calls FUNCTION(page, **args) and prints what it returns on stdout.

The sandbox has no network: chromium's only way out is an HTTP proxy on this network
namespace's loopback, which forwards every connection to docchat's egress proxy through
the unix socket SOCKET (the proxy applies the egress rule). chromium is
driven over the DevTools protocol on a pipe (--remote-debugging-pipe): no debugging port.
"""

import ast
import json
import os
import selectors
import socket
import subprocess
import sys
import threading
import time

_TYPES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean",
          "list": "array", "dict": "object"}


def _function(path, name):
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    for wanted in (name, "run"):
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name == wanted:
                return node
    raise SystemExit(f"{os.path.basename(path)} defines no function {name}(page, ...) nor run(page, ...)")


def describe(path, name):
    """The description (the docstring's text) and the parameters' JSON schema (every
    parameter after the first, `page`; typed by its annotation; required without a
    default; described by a `name: text` line of the docstring)."""
    fn = _function(path, name)
    doc = ast.get_docstring(fn) or ""
    notes = {}
    for line in doc.splitlines():
        key, sep, text = line.strip().partition(":")
        if sep and key.strip().isidentifier():
            notes[key.strip()] = text.strip()
    params = fn.args.args[1:]
    if not fn.args.args:
        raise SystemExit(f"{name} must take the page as its first parameter")
    defaults = [None] * (len(params) - len(fn.args.defaults)) + list(fn.args.defaults)
    props, required = {}, []
    for arg, default in zip(params, defaults):
        ann = arg.annotation
        kind = _TYPES.get(ann.id if isinstance(ann, ast.Name) else "", "string")
        prop = {"type": kind}
        if arg.arg in notes:
            prop["description"] = notes[arg.arg]
        props[arg.arg] = prop
        if default is None:
            required.append(arg.arg)
    summary = doc.split("\n\n")[0].strip() or f"Browser action {name}"
    print(json.dumps({"function": fn.name, "description": summary, "parameters": {
        "type": "object", "properties": props, "required": required,
        "additionalProperties": False}}))


class BrowserError(Exception):
    """A navigation or DevTools call that failed."""


def _forward(listener, target):
    """Accepts on `listener` and splices each connection with a new one to the unix socket
    `target`, in one thread (threads count against the sandbox's process limit)."""
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, None)
    while True:
        for key, _ in sel.select():
            if key.data is None:
                conn, _ = listener.accept()
                up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    up.connect(target)
                except OSError:
                    conn.close()
                    continue
                sel.register(conn, selectors.EVENT_READ, up)
                sel.register(up, selectors.EVENT_READ, conn)
                continue
            src, dst = key.fileobj, key.data
            try:
                data = src.recv(65536)
                if data:
                    dst.sendall(data)
                    continue
            except OSError:
                pass
            for s in (src, dst):
                try:
                    sel.unregister(s)
                except (KeyError, ValueError):
                    pass
                s.close()


class Page:
    """One tab of headless chromium, driven over the DevTools protocol."""

    def __init__(self, proc, write_fd, read_fd, timeout):
        self._proc = proc
        self._w = os.fdopen(write_fd, "wb", buffering=0)
        self._r = os.fdopen(read_fd, "rb", buffering=0)
        self._buf = b""
        self._id = 0
        self._events = []
        self.timeout = timeout
        target = self._call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self._session = self._call("Target.attachToTarget",
                                   {"targetId": target, "flatten": True})["sessionId"]
        self.send("Page.enable")
        self.send("Runtime.enable")

    def _message(self):
        while b"\0" not in self._buf:
            chunk = self._r.read(65536)
            if not chunk:
                raise BrowserError("chromium exited")
            self._buf += chunk
        raw, _, self._buf = self._buf.partition(b"\0")
        return json.loads(raw)

    def _call(self, method, params=None, session=None):
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        self._w.write(json.dumps(msg).encode() + b"\0")
        while True:
            m = self._message()
            if m.get("id") == self._id:
                if "error" in m:
                    raise BrowserError(f"{method}: {m['error'].get('message')}")
                return m.get("result", {})
            if "method" in m:
                self._events.append(m)

    def send(self, method, params=None):
        """Any DevTools protocol command on this tab; its result."""
        return self._call(method, params, self._session)

    def wait_event(self, method, timeout=None):
        """Waits for the DevTools event `method` on this tab; its params."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            for i, m in enumerate(self._events):
                if m.get("method") == method:
                    del self._events[i]
                    return m.get("params", {})
            if time.monotonic() > deadline:
                raise BrowserError(f"timed out waiting for {method}")
            self.evaluate("0")  # pumps events

    def goto(self, url):
        """Opens `url` and waits for its load event. A page the egress rule refuses raises
        BrowserError."""
        self._events.clear()
        res = self.send("Page.navigate", {"url": url})
        if res.get("errorText"):
            raise BrowserError(f"{url}: {res['errorText']}")
        self.wait_event("Page.loadEventFired")
        # docchat's egress proxy answers a refused http request with a page of its own.
        if (self.title() or "").startswith("docchat egress:"):
            raise BrowserError(f"{url}: {self.text()}")
        return self

    def evaluate(self, expression):
        """The value of a JavaScript expression (promises awaited)."""
        res = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                             "awaitPromise": True})
        if "exceptionDetails" in res:
            raise BrowserError(res["exceptionDetails"].get("text", "script error") + ": " +
                               str(res["exceptionDetails"].get("exception", {}).get("description", "")))
        return res.get("result", {}).get("value")

    def title(self):
        return self.evaluate("document.title")

    def url(self):
        return self.evaluate("location.href")

    def text(self, selector="body"):
        """The visible text of the first element matching `selector`."""
        return self.evaluate(f"document.querySelector({json.dumps(selector)}).innerText")

    def content(self):
        return self.evaluate("document.documentElement.outerHTML")

    def wait_for(self, selector, timeout=None):
        """Waits until an element matches `selector`."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while not self.evaluate(f"!!document.querySelector({json.dumps(selector)})"):
            if time.monotonic() > deadline:
                raise BrowserError(f"no element matches {selector}")
            time.sleep(0.05)
        return self

    def click(self, selector):
        """Clicks the first element matching `selector`."""
        self.wait_for(selector)
        self.evaluate(f"document.querySelector({json.dumps(selector)}).click()")
        return self

    def fill(self, selector, value):
        """Sets an input's value, as typing would (input and change events)."""
        self.wait_for(selector)
        self.evaluate(
            f"(e => {{ e.value = {json.dumps(value)};"
            " e.dispatchEvent(new Event('input', {bubbles: true}));"
            " e.dispatchEvent(new Event('change', {bubbles: true})); })"
            f"(document.querySelector({json.dumps(selector)}))")
        return self

    def screenshot(self, path):
        """Saves a PNG of the page (in the workspace, where the run's files are kept)."""
        import base64
        data = self.send("Page.captureScreenshot", {"format": "png"})["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))
        return path

    def close(self):
        try:
            self._call("Browser.close")
        except Exception:
            pass
        try:
            self._proc.wait(5)
        except subprocess.TimeoutExpired:
            self._proc.kill()


def _chromium(port, log):
    """chromium, headless, its DevTools on fds 3 (commands) and 4 (replies)."""
    to_chrome_r, to_chrome_w = os.pipe()
    from_chrome_r, from_chrome_w = os.pipe()
    profile = os.path.join(os.environ.get("TMPDIR", "/tmp"), "chromium")
    argv = [
        "/usr/lib/chromium/chromium", "--headless", "--remote-debugging-pipe",
        # Our sandbox is the boundary: chromium's own needs namespaces it cannot make here.
        "--no-sandbox",
        f"--proxy-server=http://127.0.0.1:{port}",
        # Loopback too goes through the proxy (chromium bypasses it for loopback by default).
        "--proxy-bypass-list=<-loopback>",
        f"--user-data-dir={profile}", "--disk-cache-size=1", "--disable-dev-shm-usage",
        "--disable-gpu", "--no-first-run", "--no-default-browser-check",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-extensions", "--disable-default-apps", "--mute-audio",
        "--disable-breakpad", "--disable-crash-reporter", "--no-zygote",
        "--renderer-process-limit=1", "--js-flags=--max-old-space-size=512",
        # As little background traffic of chromium's own as it allows.
        "--disable-component-extensions-with-background-pages", "--no-pings",
        "--disable-client-side-phishing-detection", "--disable-domain-reliability",
        "--disable-features=Translate,MediaRouter,OptimizationHints,AutofillServerCommunication,"
        "CertificateTransparencyComponentUpdater,OptimizationGuideModelDownloading",
        "about:blank",
    ]

    def fds():
        os.dup2(to_chrome_r, 3)
        os.dup2(from_chrome_w, 4)

    proc = subprocess.Popen(argv, preexec_fn=fds, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=log,
                            close_fds=False)
    for fd in (to_chrome_r, from_chrome_w):
        os.close(fd)
    return proc, to_chrome_w, from_chrome_r


def call(path, name, target, timeout):
    args = json.loads(sys.stdin.read() or "{}")
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    log = open(os.path.join(os.environ.get("TMPDIR", "/tmp"), "chromium.log"), "w+b")
    proc, w, r = _chromium(listener.getsockname()[1], log)
    threading.Thread(target=_forward, args=(listener, target), daemon=True).start()
    sys.path.insert(0, os.path.dirname(path))
    scope = {"__name__": "browser_action", "__file__": path,
             "BrowserError": BrowserError}
    out = sys.stdout
    sys.stdout = sys.stderr  # the script's prints are logs; stdout is its answer
    try:
        # Waits end well before the call's own time limit, so a failure can say why.
        page = Page(proc, w, r, min(30.0, max(1.0, float(timeout) * 0.6)))
    except BrowserError:
        log.seek(0)
        sys.stderr.write(log.read()[-4000:].decode(errors="replace"))
        raise
    try:
        exec(compile(open(path, encoding="utf-8").read(), path, "exec"), scope)
        result = scope[name](page, **args)
    except BrowserError as e:
        # The browser's own failure says enough; a script's bug keeps its traceback.
        sys.exit(f"BrowserError: {e}")
    finally:
        page.close()
    sys.stdout = out
    if not isinstance(result, str):
        result = json.dumps(result, default=str)
    print(result)


if __name__ == "__main__":
    if sys.argv[1] == "describe":
        describe(*sys.argv[2:4])
    else:
        call(*sys.argv[2:6])
