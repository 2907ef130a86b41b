"""The compose stack as tests/compose/faults.py and tests/compose/hostile.py see it: REST
calls with a deadline, `docker compose` and SQL on its databases, and the report every check
writes to (expect / figure, printed as a table at the end; any failure exits 1).

`connect(base_url, api_key, compose_command)` first; compose_command is the whole
`docker compose -p X -f a.yml -f b.yml` prefix the stack was brought up with.
"""

import shlex
import subprocess
import sys
import time

import requests

# Every request has a deadline: "never a hang past its timeout".
TIMEOUT = 30
BASE = KEY = ""
COMPOSE = []
H = {}
failures = []
figures = []


def connect(base_url, api_key, compose_command):
    global BASE, KEY, COMPOSE, H
    BASE, KEY = base_url.rstrip("/"), api_key
    COMPOSE = shlex.split(compose_command)
    H = {"Authorization": f"Bearer {KEY}"}


def api(method, path, key=None, **kw):
    """A call of the main API (`path` under /api/v1) with the admin's key or `key`."""
    kw.setdefault("timeout", TIMEOUT)
    headers = {"Authorization": f"Bearer {key or KEY}", **kw.pop("headers", {})}
    return requests.request(method, f"{BASE}/api/v1{path}", headers=headers, **kw)


def ok(response):
    if response.status_code >= 300:
        raise RuntimeError(f"{response.request.method} {response.url}: {response.status_code} {response.text[:300]}")
    return response.json() if response.content else None


def standard_error(response):
    """Whether an answer carries the API's error body: {"code": <its status>, "message": "..."}."""
    try:
        body = response.json()
    except ValueError:
        return False
    return isinstance(body, dict) and body.get("code") == response.status_code and isinstance(body.get("message"), str)


def compose(*args, check=True):
    return subprocess.run(COMPOSE + list(args), check=check, capture_output=True, text=True, timeout=180)


def sql(database, query):
    out = compose("exec", "-T", "postgres", "psql", "-U", "docchat", "-d", database, "-tAc", query).stdout
    return out.strip()


def containers(service):
    """The ids of `service`'s running containers."""
    return compose("ps", "-q", service).stdout.split()


def container_of(hostname, service):
    """The container of `service` whose hostname (Docker's default: the id's first 12
    characters, which the services put in their lease rows) is `hostname`."""
    found = [c for c in containers(service) if c.startswith(hostname[:12])]
    if len(found) != 1:
        raise RuntimeError(f"no single {service} container has hostname {hostname!r}: {containers(service)}")
    return found[0]


def docker(*args, timeout=60):
    return subprocess.run(["docker", *args], check=True, capture_output=True, text=True, timeout=timeout).stdout.strip()


def restart_and_wait(container, deadline_s=120):
    """Starts a stopped or killed container again and waits for its health check."""
    docker("start", container)
    wait_for(f"{container[:12]} to be healthy again",
             lambda: docker("inspect", "-f", "{{.State.Health.Status}}", container) == "healthy", deadline_s)


def ip_of(container):
    out = docker("inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}", container)
    return set(out.split())


def connected_to(client, port):
    """IPv4 peers `client` holds established TCP connections to on `port`."""
    table = docker("exec", client, "cat", "/proc/net/tcp")
    peers = set()
    for line in table.splitlines()[1:]:
        fields = line.split()
        remote, state = fields[2], fields[3]
        address, remote_port = remote.split(":")
        if state == "01" and int(remote_port, 16) == port:
            peers.add(".".join(str(b) for b in reversed(bytes.fromhex(address))))
    return peers


def second_gateway():
    """Another gateway replica beside the compose one (Kubernetes runs two): a container of
    the same image, command and environment on the same network, published on a free
    loopback port, ready. Answers (container id, base URL); remove it with `docker rm -f`."""
    import json
    import socket

    gateway = containers("gateway")[0]
    info = json.loads(docker("inspect", gateway))[0]
    network = next(iter(info["NetworkSettings"]["Networks"]))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = [arg for e in info["Config"]["Env"] for arg in ("-e", e)]
    cid = docker("run", "-d", "--network", network, "-p", f"127.0.0.1:{port}:8080", *env,
                 info["Config"]["Image"], *(info["Config"]["Cmd"] or []))
    base = f"http://127.0.0.1:{port}"
    wait_for("the second gateway to answer", lambda: answering(base), 60)
    return cid, base


def answering(base):
    """Whether the gateway at `base` answers a chat call (a restarting one resets)."""
    try:
        return requests.get(f"{base}/api/v1/chats", headers=H, timeout=5).status_code == 200
    except requests.RequestException:
        return False


def chat_replica_behind(gateway, base):
    """The chat-service container `gateway` (reached at `base`) sends its calls to: it holds
    one HTTP/2 connection to one replica (made on first use)."""
    requests.get(f"{base}/api/v1/chats", headers=H, timeout=TIMEOUT).raise_for_status()
    peers = connected_to(gateway, 50051)
    behind = [c for c in containers("chat-service") if ip_of(c) & peers]
    return behind[0] if len(behind) == 1 else None


def gateways_apart(second, second_base, attempts=10):
    """Restarts the second gateway until it and the compose one call different chat-service
    replicas; answers (the compose gateway's replica, the second's)."""
    first = containers("gateway")[0]
    for _ in range(attempts):
        a, b = chat_replica_behind(first, BASE), chat_replica_behind(second, second_base)
        if a and b and a != b:
            return a, b
        docker("restart", second)
        wait_for("the second gateway to answer again", lambda: answering(second_base), 60)
    raise RuntimeError("the two gateways kept calling the same chat-service replica")


def expect(what, got, want):
    line = f"{what}: {got}" + ("" if got == want else f" (want {want})")
    print(("    ok   " if got == want else "    FAIL ") + line, flush=True)
    if got != want:
        failures.append(line)


def figure(check, checked, value):
    figures.append((check, checked, value))


def wait_for(what, predicate, deadline_s):
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    raise RuntimeError(f"timed out after {deadline_s}s waiting for {what}")


def run_all(checks, wanted, title):
    """Runs the named checks in order, each to its end even when one fails, then prints
    the figures and exits 1 on any failure."""
    for name in wanted:
        t = time.monotonic()
        try:
            checks[name]()
        except Exception as e:  # noqa: BLE001 - report and go on to the next check
            failures.append(f"{name}: {e}")
            print(f"    FAIL {name}: {e}", flush=True)
        print(f"    ({name} took {time.monotonic() - t:.0f}s)", flush=True)
    print(f"\n{title} | checked | figure")
    for check, checked, value in figures:
        print(f"{check} | {checked} | {value}")
    if failures:
        print(f"\n{len(failures)} failure(s):\n  " + "\n  ".join(failures))
        sys.exit(1)
    print(f"\nall {title}s passed")
