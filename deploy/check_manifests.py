#!/usr/bin/env python3
"""Static checks for docchat's deployment files.

Checks what can be checked without a Docker engine or a cluster: that the YAML parses, that
the files agree with each other and with the workspace (binary names, ports, object names,
volume and config references), and that every Kubernetes object, as written and as rendered by
`kubectl kustomize`, is valid against the Kubernetes API schema (PyPI's kubernetes-validate,
which ships the schemas: no cluster, no network) for the oldest supported Kubernetes
(MIN_KUBERNETES) and the newest the package knows. Also the monitoring files: the pods'
scrape annotations and metrics ports, the Prometheus alert rules and scrape configuration
(deploy/prometheus), the PrometheusRule, ServiceMonitor and backlog HPAs of
deploy/k8s/monitoring with the prometheus-adapter rules they need, and the Grafana dashboard
(deploy/grafana): promtool (Debian's prometheus package) parses every PromQL expression, and
every metric they name must be a family of docs/metrics.md. Run from anywhere:

    python3 deploy/check_manifests.py            # repo root = parent of this script's directory
    python3 deploy/check_manifests.py --root DIR

Prints one line per check and ends with "N passed, M failed". Exit status: 0 when everything
passed, 1 when a check failed, 2 when PyYAML is missing. Needs PyYAML and kubernetes-validate
(tests/requirements.txt; scripts/python-env.sh installs both), kubectl for the kustomize
rendering and promtool (on PATH, else scripts/promtool.sh installs it as root). Without
kubernetes-validate, kubectl or promtool those checks are skipped, loudly; with CI set in the
environment they fail instead.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

try:
    import yaml
except ImportError:
    print(
        "check_manifests.py needs PyYAML, which is not installed.\n"
        "Install it with `python3 -m pip install pyyaml` (or `apt-get install python3-yaml`).",
        file=sys.stderr,
    )
    sys.exit(2)

try:  # Python 3.11+; only used to parse the example models.toml
    import tomllib
except ImportError:  # pragma: no cover
    tomllib = None

# cargo package -> binary, as in the workspace's Cargo.toml files.
PACKAGES = {
    "docchat-server": "gateway",
    "docchat-admin-service": "admin-service",
    "docchat-ingest-service": "ingest-service",
    "docchat-chat-service": "chat-service",
    "docchat-agent-service": "agent-service",
    "docchat-scheduler-service": "scheduler-service",
}
BINARIES = set(PACKAGES.values())
# The code sandbox (docs/AGENT.md "The sandbox", libs/sandbox): the Landlock + seccomp helper,
# the binary of docchat-sandbox that must sit next to each service that starts a sandbox.
SANDBOX_HELPER = "docchat-sandbox-exec"
SANDBOX_PACKAGE = "docchat-sandbox"
# Debian packages the image needs for the sandbox (as scripts/sandbox-runtime.sh installs).
SANDBOX_PACKAGES = ("bubblewrap", "util-linux", "python3", "python3-numpy", "python3-pandas", "python3-matplotlib",
                    "chromium")
# ... and for ingest-service's text recognition, run in its sandbox (ingest-service/src/ocr.rs).
OCR_PACKAGES = ("tesseract-ocr", "tesseract-ocr-eng", "poppler-utils")
# The services that start a sandbox of their own: agent-service (code runs) and ingest-service
# (text recognition of uploads). The only containers that run as uid 0, so that each run gets a
# uid of its own; with every capability dropped but exactly these, and a writable data
# directory (SANDBOX_DATA_DIR, DOCCHAT_DATA_DIR) for the runs' workspaces and sandbox state.
SANDBOX_HOSTS = {"agent-service", "ingest-service"}
SANDBOX_CAPS = {"SETUID", "SETGID", "CHOWN", "DAC_OVERRIDE", "KILL"}
SANDBOX_DATA_DIR = "/data"
SERVICE_BINARIES = BINARIES - {"gateway"}  # the ones with a `migrate` subcommand
OUR_IMAGE = "docchat:latest"
# Public images a manifest may use besides ours (repository part, without the tag).
KNOWN_PUBLIC_IMAGES = {"pgvector/pgvector", "postgres", "rabbitmq", "busybox", "minio/minio"}
# Services that scale out (issue 19): no state on a volume of their own, several replicas
# (an HPA with minReplicas >= 2 in Kubernetes, deploy.replicas >= 2 in compose).
SCALED_OUT = {"gateway", "chat-service", "ingest-service", "agent-service"}
SCALED_IN_COMPOSE = {"ingest-service", "chat-service", "agent-service", "scheduler-service"}
# DOCCHAT_<X>_URL gRPC variables and the compose service each must point at.
GRPC_URL_VARS = {
    "DOCCHAT_ADMIN_URL": "admin-service",
    "DOCCHAT_INGEST_URL": "ingest-service",
    "DOCCHAT_CHAT_URL": "chat-service",
    "DOCCHAT_AGENT_URL": "agent-service",
    "DOCCHAT_SCHEDULER_URL": "scheduler-service",
}
GRPC_PORT = 50051
# deploy/README.md: "Kubernetes 1.27+" (native gRPC probes).
MIN_KUBERNETES = "1.27.0"
# Compose bind mounts that may be missing in a fresh clone: scripts/fetch-models.sh creates it.
OPTIONAL_BIND_SOURCES = {"./models"}
PROBE_KINDS = ("startupProbe", "readinessProbe", "livenessProbe")
# Monitoring (docs/metrics.md): every docchat process serves GET /metrics on its probe
# listener, DOCCHAT_PROBE_ADDR, declared as the container port named METRICS_PORT_NAME.
PROBE_ADDR_VAR = "DOCCHAT_PROBE_ADDR"
METRICS_PORT_NAME = "metrics"
METRICS_PATH = "/metrics"
# API groups of custom resources, which kubernetes-validate has no schema for.
CRD_GROUPS = {"monitoring.coreos.com"}
MONITORING_API = "monitoring.coreos.com/v1"
# Services whose HPA the monitoring overlay makes scale on their backlog.
BACKLOG_SCALED = {"ingest-service", "agent-service"}
ALERT_SEVERITIES = {"critical", "warning", "info"}
# Metrics that are not docchat's families but Prometheus' own.
PROMETHEUS_METRICS = {"up"}
# Grafana's built-in interval variables, by the value the PromQL check puts in their place.
GRAFANA_INTERVALS = {"__rate_interval": "5m", "__interval": "1m", "__range": "1h"}


class Report:
    def __init__(self) -> None:
        self.passed = 0
        self.failed = 0

    def check(self, ok: bool, what: str, problems: str | list[str] = "") -> bool:
        if isinstance(problems, list):
            problems = "; ".join(problems)
        if ok:
            self.passed += 1
            print(f"PASS  {what}")
        else:
            self.failed += 1
            print(f"FAIL  {what}: {problems or 'failed'}")
        return ok

    def skip(self, what: str, why: str) -> None:
        print(f"SKIP  {what}: {why}")

    def unavailable(self, what: str, why: str) -> None:
        """A check whose tool is missing: a failure in CI, a loud skip elsewhere."""
        if os.environ.get("CI"):
            self.check(False, what, f"{why} (CI is set, so this fails)")
        else:
            print(f"SKIP  {what}: {why}  <-- NOT CHECKED (this fails in CI)")


def rel(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def image_ok(image: object) -> bool:
    """Our image, or a known public one (any tag or digest, with or without docker.io/)."""
    if image == OUR_IMAGE:
        return True
    if not isinstance(image, str):
        return False
    repo = image.split("@", 1)[0]
    name_and_tag = repo.rsplit("/", 1)[-1]
    if ":" in name_and_tag:
        repo = repo[: repo.rindex(":")]
    for prefix in ("docker.io/library/", "docker.io/"):
        if repo.startswith(prefix):
            repo = repo[len(prefix) :]
    return repo in KNOWN_PUBLIC_IMAGES


# --------------------------------------------------------------------------------------------
# YAML


def load_yaml_files(root: Path, report: Report) -> dict[Path, list]:
    """Parses docker-compose.yml and every YAML file under deploy/; returns the parsed docs."""
    files = [root / "docker-compose.yml"]
    files += sorted(p for p in (root / "deploy").rglob("*") if p.suffix in (".yaml", ".yml"))
    parsed: dict[Path, list] = {}
    for path in files:
        what = f"yaml parses: {rel(path, root)}"
        if not path.is_file():
            report.check(False, what, "file missing")
            continue
        try:
            docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
        except yaml.YAMLError as err:
            report.check(False, what, str(err).replace("\n", " "))
            continue
        report.check(bool(docs), what, "no documents")
        parsed[path] = docs
    return parsed


# --------------------------------------------------------------------------------------------
# Kubernetes


def check_kustomizations(root: Path, parsed: dict[Path, list], report: Report) -> None:
    kfiles = [p for p in parsed if p.name in ("kustomization.yaml", "kustomization.yml")]
    report.check(bool(kfiles), "kustomize: deploy/k8s has a kustomization.yaml",
                 "none found under deploy/k8s")
    for kfile in kfiles:
        doc = parsed[kfile][0]
        kdir = kfile.parent
        listed: set[Path] = set()
        for res in doc.get("resources") or []:
            what = f"kustomize: {rel(kfile, root)} resource {res} exists"
            if "://" in res or res.startswith(("github.com/", "git@")):
                report.skip(what, "remote resource")
                continue
            target = (kdir / res).resolve()
            listed.add(target)
            if target.is_dir():
                ok = any((target / n).is_file() for n in ("kustomization.yaml", "kustomization.yml", "Kustomization"))
                report.check(ok, what, "directory without a kustomization.yaml")
            else:
                report.check(target.is_file(), what, "no such file")
        for patch in doc.get("patches") or []:
            if isinstance(patch, dict) and patch.get("path"):
                listed.add((kdir / patch["path"]).resolve())
        # Catch a manifest written but forgotten in the kustomization.
        unlisted = [
            p.name for p in sorted(kdir.iterdir())
            if p.suffix in (".yaml", ".yml") and p != kfile and p.resolve() not in listed
        ]
        report.check(not unlisted, f"kustomize: every manifest in {rel(kdir, root)} is listed",
                     f"not in resources/patches: {', '.join(unlisted)}")


def k8s_objects(root: Path, parsed: dict[Path, list]) -> list[dict]:
    k8s = root / "deploy" / "k8s"
    out = []
    for path, docs in parsed.items():
        if k8s not in path.parents:
            continue
        for doc in docs:
            if isinstance(doc, dict) and doc.get("kind") and doc.get("kind") != "Kustomization":
                out.append(doc)
    return out


def pod_spec(dep: dict) -> dict:
    return ((dep.get("spec") or {}).get("template") or {}).get("spec") or {}


def all_containers(dep: dict) -> list[dict]:
    spec = pod_spec(dep)
    return list(spec.get("initContainers") or []) + list(spec.get("containers") or [])


def container_ports(container: dict) -> tuple[set[int], set[str]]:
    numbers, names = set(), set()
    for port in container.get("ports") or []:
        if "containerPort" in port:
            numbers.add(port["containerPort"])
        if port.get("name"):
            names.add(port["name"])
    return numbers, names


def probe_port(probe: dict) -> object:
    for handler in ("httpGet", "tcpSocket", "grpc"):
        if handler in probe:
            return (probe[handler] or {}).get("port")
    return None


def check_kubernetes(objects: list[dict], report: Report) -> None:
    by_kind: dict[str, dict[str, dict]] = {}
    for obj in objects:
        name = (obj.get("metadata") or {}).get("name")
        by_kind.setdefault(obj["kind"], {})[name] = obj
    deployments = by_kind.get("Deployment", {})
    configmaps = by_kind.get("ConfigMap", {})
    secrets = by_kind.get("Secret", {})
    pvcs = by_kind.get("PersistentVolumeClaim", {})

    report.check(bool(deployments), "k8s: manifests define Deployments", "no Deployment found")

    for name, dep in sorted(deployments.items()):
        # Images and commands.
        for c in all_containers(dep):
            image = c.get("image")
            report.check(image_ok(image), f"k8s deployment {name}/{c.get('name')}: image {image}",
                         f"not {OUR_IMAGE} or a known public image ({', '.join(sorted(KNOWN_PUBLIC_IMAGES))})")
            if image == OUR_IMAGE:
                cmd = c.get("command") or c.get("args") or []
                problems = []
                if not cmd or cmd[0] not in BINARIES:
                    problems.append(f"command {cmd!r} does not start with one of {sorted(BINARIES)}")
                elif "migrate" in cmd[1:] and cmd[0] not in SERVICE_BINARIES:
                    problems.append(f"{cmd[0]} has no migrate subcommand")
                report.check(not problems, f"k8s deployment {name}/{c.get('name')}: command {cmd}", problems)

        # Probe ports are ports the same container declares.
        for c in all_containers(dep):
            numbers, names = container_ports(c)
            for kind in PROBE_KINDS:
                if kind not in c:
                    continue
                port = probe_port(c[kind])
                ok = port in numbers if isinstance(port, int) else port in names
                report.check(ok, f"k8s deployment {name}/{c.get('name')}: {kind} port {port} is declared",
                             f"declared ports: {sorted(numbers)} {sorted(names)}")

        # Selector matches the pod template, or the Deployment is rejected by the API server.
        selector = ((dep.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        labels = ((dep["spec"].get("template") or {}).get("metadata") or {}).get("labels") or {}
        report.check(bool(selector) and selector.items() <= labels.items(),
                     f"k8s deployment {name}: selector matches its pod template",
                     f"selector {selector} vs template labels {labels}")

        # ConfigMap / Secret / PVC references resolve.
        problems = []
        refs = 0
        for c in all_containers(dep):
            for env in c.get("env") or []:
                src = env.get("valueFrom") or {}
                for key, pool, kind in (("configMapKeyRef", configmaps, "ConfigMap"), ("secretKeyRef", secrets, "Secret")):
                    if key not in src:
                        continue
                    refs += 1
                    ref = src[key]
                    obj = pool.get(ref.get("name"))
                    if ref.get("optional"):
                        continue  # optional covers a missing object as well as a missing key
                    where = f"{c.get('name')} {env['name']}"
                    if obj is None:
                        problems.append(f"{where}: no {kind} {ref.get('name')}")
                        continue
                    data = dict(obj.get("data") or {})
                    data.update(obj.get("stringData") or {})
                    if ref.get("key") not in data:
                        problems.append(f"{where}: {kind} {ref.get('name')} has no key {ref.get('key')}")
            for src in c.get("envFrom") or []:
                for key, pool, kind in (("configMapRef", configmaps, "ConfigMap"), ("secretRef", secrets, "Secret")):
                    if key in src:
                        refs += 1
                        if src[key].get("name") not in pool and not src[key].get("optional"):
                            problems.append(f"{c.get('name')} envFrom: no {kind} {src[key].get('name')}")
        volume_names = set()
        for vol in pod_spec(dep).get("volumes") or []:
            volume_names.add(vol.get("name"))
            for key, pool, field, kind in (
                ("configMap", configmaps, "name", "ConfigMap"),
                ("secret", secrets, "secretName", "Secret"),
                ("persistentVolumeClaim", pvcs, "claimName", "PersistentVolumeClaim"),
            ):
                if key in vol:
                    refs += 1
                    ref_name = vol[key].get(field)
                    if ref_name not in pool and not vol[key].get("optional"):
                        problems.append(f"volume {vol.get('name')}: no {kind} {ref_name}")
        for c in all_containers(dep):
            for mount in c.get("volumeMounts") or []:
                refs += 1
                if mount.get("name") not in volume_names:
                    problems.append(f"{c.get('name')} mounts undefined volume {mount.get('name')}")
        report.check(not problems, f"k8s deployment {name}: {refs} config/secret/volume references resolve", problems)

        # Runs as uid 10001 with a read-only root filesystem and a writable /tmp.
        spec = pod_spec(dep)
        psc = spec.get("securityContext") or {}
        problems = []
        if psc.get("runAsNonRoot") is not True or psc.get("runAsUser") != 10001:
            problems.append("pod securityContext needs runAsNonRoot: true and runAsUser: 10001")
        empty_dirs = {v.get("name") for v in spec.get("volumes") or [] if "emptyDir" in v}
        for c in all_containers(dep):
            if (c.get("securityContext") or {}).get("readOnlyRootFilesystem") is not True:
                problems.append(f"{c.get('name')}: readOnlyRootFilesystem is not true")
            if not any(m.get("mountPath") == "/tmp" and m.get("name") in empty_dirs for m in c.get("volumeMounts") or []):
                problems.append(f"{c.get('name')}: no emptyDir mounted at /tmp")
        report.check(not problems, f"k8s deployment {name}: non-root uid 10001, read-only root, /tmp emptyDir", problems)

        # No container adds privileges, except the sandbox hosts' service containers: uid 0
        # with exactly SANDBOX_CAPS, no privilege escalation, RuntimeDefault seccomp, and a
        # PID 1 that reaps (shareProcessNamespace: the pause container).
        problems = []
        for c in all_containers(dep):
            csc = c.get("securityContext") or {}
            caps = csc.get("capabilities") or {}
            added = set(caps.get("add") or [])
            as_root = csc.get("runAsUser") == 0 or csc.get("runAsNonRoot") is False
            sandbox_host = name in SANDBOX_HOSTS and c.get("name") == name
            if csc.get("privileged"):
                problems.append(f"{c.get('name')}: privileged")
            if csc.get("allowPrivilegeEscalation") is not False:
                problems.append(f"{c.get('name')}: allowPrivilegeEscalation is not false")
            if caps.get("drop") != ["ALL"]:
                problems.append(f"{c.get('name')}: capabilities do not drop ALL")
            if (as_root or added) and not sandbox_host:
                problems.append(f"{c.get('name')}: runs as root or adds capabilities {sorted(added)}")
            if sandbox_host:
                if not added <= SANDBOX_CAPS:
                    problems.append(f"{c.get('name')}: adds {sorted(added - SANDBOX_CAPS)} beyond {sorted(SANDBOX_CAPS)}")
                # Without root and every one of the caps the sandbox still confines its runs,
                # but all as the service's own uid: no per-run process limit, no sweep.
                if csc.get("runAsUser") != 0:
                    problems.append(f"{c.get('name')}: runAsUser is {csc.get('runAsUser')}, want 0 "
                                    "(the sandbox's per-run uids)")
                elif psc.get("runAsNonRoot") is True and csc.get("runAsNonRoot") is not False:
                    problems.append(f"{c.get('name')}: runAsUser 0 under the pod's runAsNonRoot: true "
                                    "without runAsNonRoot: false (the kubelet refuses to start it)")
                if not SANDBOX_CAPS <= added:
                    problems.append(f"{c.get('name')}: does not add {sorted(SANDBOX_CAPS - added)}")
                if (psc.get("seccompProfile") or {}).get("type") != "RuntimeDefault":
                    problems.append("the pod's seccompProfile is not RuntimeDefault")
                if spec.get("shareProcessNamespace") is not True:
                    problems.append("shareProcessNamespace is not true (nothing reaps the sandbox's orphans)")
        report.check(not problems, f"k8s deployment {name}: no added privileges"
                     + (f" ({name}: uid 0 for the sandbox's per-run uids, exactly " + ", ".join(sorted(SANDBOX_CAPS)) + ")"
                        if name in SANDBOX_HOSTS else ""), problems)

        # A sandbox host's runs need a writable data directory: DOCCHAT_DATA_DIR set to
        # SANDBOX_DATA_DIR, where an emptyDir is mounted read-write (the root is read-only).
        if name in SANDBOX_HOSTS:
            problems = []
            main = [c for c in spec.get("containers") or [] if c.get("name") == name]
            if not main:
                problems.append(f"no container named {name}")
            for c in main:
                env = {e.get("name"): e for e in c.get("env") or []}
                data_dir = env.get("DOCCHAT_DATA_DIR") or {}
                if data_dir.get("value") != SANDBOX_DATA_DIR:
                    problems.append(f"DOCCHAT_DATA_DIR is {data_dir.get('value')!r}, want {SANDBOX_DATA_DIR!r}")
                mounts = [m for m in c.get("volumeMounts") or [] if m.get("mountPath") == SANDBOX_DATA_DIR]
                if not mounts:
                    problems.append(f"nothing mounted at {SANDBOX_DATA_DIR}")
                for m in mounts:
                    if m.get("readOnly"):
                        problems.append(f"{SANDBOX_DATA_DIR} is mounted readOnly")
                    if m.get("name") not in empty_dirs:
                        problems.append(f"{SANDBOX_DATA_DIR} is volume {m.get('name')}, not an emptyDir "
                                        "(per-replica scratch)")
            report.check(not problems, f"k8s deployment {name}: DOCCHAT_DATA_DIR={SANDBOX_DATA_DIR} on a writable emptyDir "
                         "(the sandbox's workspaces and state)", problems)

    # Services: selector finds a Deployment and targetPort is one of its container ports.
    for name, svc in sorted(by_kind.get("Service", {}).items()):
        spec = svc.get("spec") or {}
        selector = spec.get("selector") or {}
        matches = [
            dep for dep in deployments.values()
            if selector and selector.items() <= (((dep["spec"].get("template") or {}).get("metadata") or {}).get("labels") or {}).items()
        ]
        if not report.check(bool(matches), f"k8s service {name}: selector {selector} matches a Deployment",
                            "no Deployment's pod template has these labels"):
            continue
        numbers, names = set(), set()
        for dep in matches:
            for c in pod_spec(dep).get("containers") or []:
                n, m = container_ports(c)
                numbers |= n
                names |= m
        for port in spec.get("ports") or []:
            target = port.get("targetPort", port.get("port"))
            ok = target in numbers if isinstance(target, int) else target in names
            report.check(ok, f"k8s service {name}: port {port.get('port')} -> targetPort {target} is a containerPort",
                         f"containers of {', '.join(d['metadata']['name'] for d in matches)} declare {sorted(numbers)} {sorted(names)}")

    # HorizontalPodAutoscalers point at Deployments that exist.
    for name, hpa in sorted(by_kind.get("HorizontalPodAutoscaler", {}).items()):
        ref = (hpa.get("spec") or {}).get("scaleTargetRef") or {}
        problems = []
        if hpa.get("apiVersion") != "autoscaling/v2":
            problems.append(f"apiVersion {hpa.get('apiVersion')}, want autoscaling/v2")
        if ref.get("kind") != "Deployment" or ref.get("name") not in deployments:
            problems.append(f"scaleTargetRef {ref.get('kind')}/{ref.get('name')} is not a defined Deployment")
        report.check(not problems, f"k8s hpa {name}: scales Deployment {ref.get('name')}", problems)

    # Scale-out: the services that scale keep nothing on a PersistentVolumeClaim, leave the
    # replica count to an HPA that keeps at least two; a Deployment that does mount a claim
    # (the object store) is one Recreate replica, since a ReadWriteOnce volume has one writer.
    hpas = {((h.get("spec") or {}).get("scaleTargetRef") or {}).get("name"): h
            for h in by_kind.get("HorizontalPodAutoscaler", {}).values()}
    for name, dep in sorted(deployments.items()):
        spec = dep.get("spec") or {}
        claims = [v.get("name") for v in pod_spec(dep).get("volumes") or [] if "persistentVolumeClaim" in v]
        problems = []
        if name in SCALED_OUT:
            if claims:
                problems.append(f"mounts PersistentVolumeClaim volumes {claims}")
            if "replicas" in spec:
                problems.append(f"fixes replicas: {spec['replicas']} (the HPA owns the count)")
            min_replicas = ((hpas.get(name) or {}).get("spec") or {}).get("minReplicas", 0)
            if min_replicas < 2:
                problems.append(f"no HPA keeping at least 2 replicas (minReplicas {min_replicas})")
            report.check(not problems, f"k8s deployment {name}: scales out (no volume claim, an HPA with minReplicas >= 2)", problems)
        elif claims:
            if spec.get("replicas") != 1 or (spec.get("strategy") or {}).get("type") != "Recreate":
                problems.append("a ReadWriteOnce claim needs replicas: 1 and strategy Recreate")
            report.check(not problems, f"k8s deployment {name}: one Recreate replica for its volume claim {claims}", problems)
    missing = SCALED_OUT - set(deployments)
    report.check(not missing, f"k8s: the scaled-out services {sorted(SCALED_OUT)} are defined", f"missing {sorted(missing)}")

    # The example models.toml in a ConfigMap parses and has the fields the loader needs.
    for name, cm in sorted(configmaps.items()):
        text = (cm.get("data") or {}).get("models.toml")
        if text is None:
            continue
        what = f"k8s configmap {name}: models.toml parses with [[models]] entries"
        if tomllib is None:
            report.skip(what, "tomllib needs Python 3.11+")
            continue
        try:
            models = tomllib.loads(text).get("models") or []
        except tomllib.TOMLDecodeError as err:
            report.check(False, what, str(err))
            continue
        required = ("name", "display_name", "provider", "base_url", "upstream_model")
        problems = [f"entry {i} lacks {k}" for i, m in enumerate(models) for k in required if k not in m]
        report.check(bool(models) and not problems, what, problems or "no [[models]] entry")


# --------------------------------------------------------------------------------------------
# Kubernetes API schema (kubernetes-validate) and the kustomize rendering (kubectl kustomize)


def schema_versions(kv) -> list[str]:
    latest = kv.latest_version()
    return [MIN_KUBERNETES] if latest == MIN_KUBERNETES.rsplit(".", 1)[0] else [MIN_KUBERNETES, latest]


def validate_objects(kv, objects: list[tuple[str, dict]], report: Report) -> None:
    """Strict validation (unknown fields are errors) of each (where, object) for each version;
    custom resources (CRD_GROUPS) are skipped, by name."""
    builtin = []
    for where, obj in objects:
        if str(obj.get("apiVersion", "")).split("/")[0] in CRD_GROUPS:
            report.skip(f"schema: {where} {obj.get('kind')}/{(obj.get('metadata') or {}).get('name')}",
                        "a custom resource (Prometheus Operator CRD): kubernetes-validate has no schema "
                        "for it; the monitoring checks check it")
        else:
            builtin.append((where, obj))
    objects = builtin
    for version in schema_versions(kv):
        for where, obj in objects:
            name = f"{obj.get('kind')}/{(obj.get('metadata') or {}).get('name')}"
            what = f"schema {version}: {where} {name}"
            try:
                kv.validate(obj, version, strict=True)
            except kv.ValidationError as err:
                path = "/".join(str(p) for p in err.path)
                report.check(False, what, f"{path}: {err.message}")
            except (kv.SchemaNotFoundError, kv.InvalidSchemaError) as err:
                report.check(False, what, str(err))
            else:
                report.check(True, what)


def render_kustomizations(root: Path, parsed: dict[Path, list], report: Report) -> list[tuple[str, dict]]:
    """`kubectl kustomize` of every kustomization under deploy/k8s; the rendered objects."""
    kubectl = shutil.which("kubectl")
    out: list[tuple[str, dict]] = []
    for kfile in sorted(p for p in parsed if p.name in ("kustomization.yaml", "kustomization.yml")):
        kdir = rel(kfile.parent, root)
        what = f"kustomize: kubectl kustomize {kdir} renders"
        if kubectl is None:
            report.unavailable(what, "kubectl is not installed")
            continue
        proc = subprocess.run([kubectl, "kustomize", str(kfile.parent)], capture_output=True, text=True)
        if not report.check(proc.returncode == 0, what, proc.stderr.strip().replace("\n", " ")):
            continue
        docs = [d for d in yaml.safe_load_all(proc.stdout) if isinstance(d, dict)]
        report.check(bool(docs), f"kustomize: {kdir} renders objects", "rendered nothing")
        out += [(f"{kdir} (rendered)", d) for d in docs]
    return out


def check_kubernetes_schema(root: Path, parsed: dict[Path, list], rendered: list[tuple[str, dict]],
                            report: Report) -> None:
    try:
        import kubernetes_validate as kv
    except ImportError:
        report.unavailable("schema: Kubernetes API schema validation",
                           "kubernetes-validate is not installed (python3 -m pip install kubernetes-validate)")
        return
    k8s = root / "deploy" / "k8s"
    written = [
        (rel(path, root), doc)
        for path, docs in sorted(parsed.items())
        if k8s in path.parents
        for doc in docs
        if isinstance(doc, dict) and doc.get("kind") and doc.get("kind") != "Kustomization"
    ]
    validate_objects(kv, written + rendered, report)


# --------------------------------------------------------------------------------------------
# Monitoring: /metrics on every docchat pod, the Prometheus rules and configuration (promtool),
# the Prometheus Operator's objects, the prometheus-adapter rules and the Grafana dashboard


def metric_families(root: Path) -> tuple[set[str], tuple[str, ...]]:
    """The families docs/metrics.md lists in its table's first column: the names, and the
    prefixes of `name_*` entries (process_*)."""
    names: set[str] = set()
    prefixes: list[str] = []
    path = root / "docs" / "metrics.md"
    for line in path.read_text().splitlines() if path.is_file() else []:
        if not line.startswith("|"):
            continue
        for name in re.findall(r"`([a-zA-Z_:][a-zA-Z0-9_:]*\*?)`", line.split("|")[1]):
            if name.endswith("*"):
                prefixes.append(name[:-1])
            else:
                names.add(name)
    return names, tuple(prefixes)


def documented(name: str, families: tuple[set[str], tuple[str, ...]]) -> bool:
    """A family of docs/metrics.md, a histogram's _bucket/_sum/_count series, or Prometheus' own."""
    names, prefixes = families
    if name in names or name in PROMETHEUS_METRICS or (prefixes and name.startswith(prefixes)):
        return True
    return any(name.endswith(s) and name[: -len(s)] in names for s in ("_bucket", "_sum", "_count"))


_PROMQL_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_PROMQL_NAME_MATCHER = re.compile(r'__name__\s*=\s*"([a-zA-Z_:][a-zA-Z0-9_:]*)"')
_PROMQL_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_PROMQL_IDENT = re.compile(r"(?<![\w.:$])[a-zA-Z_:][a-zA-Z0-9_:]*(?![\w:])(?!\s*\()")
_PROMQL_KEYWORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right",
                    "bool", "offset", "inf", "nan"}


def promql_metric_names(expr: str) -> set[str]:
    """The metric names an expression selects. Not a parser (promtool checks the syntax): it
    drops strings, label matchers, ranges, grouping labels and function names, and keeps the
    identifiers left, plus __name__="..." matchers."""
    names = set(_PROMQL_NAME_MATCHER.findall(expr))
    rest = _PROMQL_STRING.sub('""', expr)
    rest = re.sub(r"#[^\n]*", " ", rest)
    rest = re.sub(r"\{[^}]*\}|\[[^\]]*\]", " ", rest)
    rest = _PROMQL_GROUPING.sub(" ", rest)
    return names | {m for m in _PROMQL_IDENT.findall(rest) if m.lower() not in _PROMQL_KEYWORDS}


_GRAFANA_VARIABLE = re.compile(r"\$\{(\w+)(?::[^}]*)?\}|\$(\w+)|\[\[(\w+)(?::[^\]]*)?\]\]")


def grafana_expr(expr: str) -> str:
    """A panel's expression as Grafana sends it: interval variables as durations, the
    dashboard's own variables (label values) as a plain value."""
    return _GRAFANA_VARIABLE.sub(lambda m: GRAFANA_INTERVALS.get(m.group(1) or m.group(2) or m.group(3), "x"), expr)


def find_promtool(root: Path) -> str | None:
    """promtool on PATH, else whatever scripts/promtool.sh installs (Debian's prometheus, as root)."""
    found = shutil.which("promtool")
    script = root / "scripts" / "promtool.sh"
    if found or not script.is_file():
        return found
    proc = subprocess.run([str(script)], capture_output=True, text=True)
    lines = proc.stdout.split()
    return lines[-1] if proc.returncode == 0 and lines else None


def promtool_run(promtool: str, args: list[str]) -> tuple[bool, str]:
    # From /: relative paths in a file must resolve against that file, not the working directory.
    proc = subprocess.run([promtool, *args], capture_output=True, text=True, cwd="/")
    return proc.returncode == 0, " ".join((proc.stdout + proc.stderr).split())


def promtool_check_exprs(promtool: str | None, exprs: list[tuple[str, str]], what: str, report: Report) -> None:
    """Parses (record name, PromQL) pairs: promtool check rules on them as recording rules."""
    if promtool is None:
        report.unavailable(what, "promtool is not installed (scripts/promtool.sh installs it)")
        return
    rules = {"groups": [{"name": "parse", "rules": [{"record": r, "expr": e} for r, e in exprs]}]}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "exprs.yml"
        path.write_text(yaml.safe_dump(rules, sort_keys=False))
        ok, out = promtool_run(promtool, ["check", "rules", str(path)])
    report.check(ok and bool(exprs), what, out or "no expressions")


def monitored_services(root: Path, parsed: dict[Path, list], report: Report) -> list[tuple[str, dict]]:
    """Checks that every docchat Deployment of the base serves /metrics where its annotations
    and its Service say; returns the (name, labels as rendered) of the Services with a
    `metrics` port."""
    base = root / "deploy" / "k8s" / "base"
    objects = [d for path, docs in parsed.items() if path.parent == base
               for d in docs if isinstance(d, dict) and d.get("kind")]
    kfile = parsed.get(base / "kustomization.yaml") or [{}]
    common: dict = {}
    for entry in kfile[0].get("labels") or []:
        common.update(entry.get("pairs") or {})
    services = [o for o in objects if o["kind"] == "Service"]
    out = []
    for dep in (o for o in objects if o["kind"] == "Deployment"):
        name = dep["metadata"]["name"]
        main = [c for c in pod_spec(dep).get("containers") or [] if c.get("image") == OUR_IMAGE]
        if not main:
            continue  # not docchat (the object store)
        main = main[0]
        problems = []
        env = {e.get("name"): e.get("value") for e in main.get("env") or []}
        addr = str(env.get(PROBE_ADDR_VAR) or "")
        host, _, port_text = addr.rpartition(":")
        port = int(port_text) if port_text.isdigit() else None
        if port is None:
            problems.append(f"{main.get('name')}: {PROBE_ADDR_VAR} is {addr or 'not set'}, want 0.0.0.0:<port>")
        elif host not in ("0.0.0.0", "[::]"):
            problems.append(f"{PROBE_ADDR_VAR} binds {host}: neither the kubelet nor Prometheus reaches it")
        declared = {p.get("name"): p.get("containerPort") for p in main.get("ports") or []}
        if port is not None and declared.get(METRICS_PORT_NAME) != port:
            problems.append(f"no containerPort {port} named {METRICS_PORT_NAME} (declared: {declared})")
        annotations = ((dep["spec"].get("template") or {}).get("metadata") or {}).get("annotations") or {}
        want = {"prometheus.io/scrape": "true", "prometheus.io/port": str(port), "prometheus.io/path": METRICS_PATH}
        problems += [f"annotation {k} is {annotations.get(k)!r}, want {v!r}" for k, v in want.items() if annotations.get(k) != v]
        labels = ((dep["spec"].get("template") or {}).get("metadata") or {}).get("labels") or {}
        selecting = [s for s in services if (s.get("spec") or {}).get("selector")
                     and s["spec"]["selector"].items() <= labels.items()]
        if not selecting:
            problems.append("no Service selects it")
        for svc in selecting:
            ports = {p.get("name"): p for p in svc["spec"].get("ports") or []}
            target = (ports.get(METRICS_PORT_NAME) or {}).get("targetPort")
            if target not in (METRICS_PORT_NAME, port):
                problems.append(f"Service {svc['metadata']['name']} has no port `{METRICS_PORT_NAME}` "
                                f"targeting containerPort {port} (targetPort {target!r})")
            else:
                out.append((svc["metadata"]["name"], {**(svc["metadata"].get("labels") or {}), **common}))
        report.check(not problems, f"monitoring: {name} serves {METRICS_PATH} on {PROBE_ADDR_VAR} {addr} "
                     f"(containerPort `{METRICS_PORT_NAME}`, prometheus.io annotations, a Service port "
                     f"`{METRICS_PORT_NAME}`)", problems)
    return out


# The pod role's meta labels (Prometheus' kubernetes_sd_config documentation).
_POD_META = re.compile(r"__meta_kubernetes_(namespace|pod_(name|ip|uid|ready|phase|node_name|host_ip|"
                       r"controller_kind|controller_name|container_(name|id|image|init|port_name|"
                       r"port_number|port_protocol)|(label|labelpresent|annotation|annotationpresent)_\w+))")
_K8S_SD_FIELDS = {"role", "api_server", "kubeconfig_file", "namespaces", "selectors", "attach_metadata",
                  "basic_auth", "authorization", "oauth2", "bearer_token", "bearer_token_file", "tls_config",
                  "proxy_url", "no_proxy", "proxy_from_environment", "proxy_connect_header",
                  "follow_redirects", "enable_http2"}


def check_kubernetes_sd(config: dict, report: Report) -> None:
    """The kubernetes_sd_configs that Debian's promtool cannot load: fields, role, and the pod
    meta labels the relabelings read, which must include the base's prometheus.io annotations."""
    for job in config.get("scrape_configs") or []:
        sds = job.get("kubernetes_sd_configs")
        if not sds:
            continue
        problems = []
        for sd in sds:
            unknown = sorted(set(sd) - _K8S_SD_FIELDS)
            if unknown:
                problems.append(f"unknown fields {unknown}")
            if sd.get("role") != "pod":
                problems.append(f"role {sd.get('role')}, want pod (the annotations are on the pods)")
            if set(sd.get("namespaces") or {}) - {"names", "own_namespace"}:
                problems.append(f"namespaces: {sd.get('namespaces')}")
        read = {label for rc in job.get("relabel_configs") or [] for label in rc.get("source_labels") or []}
        problems += [f"{m} is not a pod meta label" for m in sorted(read)
                     if m.startswith("__meta_kubernetes_") and not _POD_META.fullmatch(m)]
        for key in ("scrape", "port", "path"):
            if f"__meta_kubernetes_pod_annotation_prometheus_io_{key}" not in read:
                problems.append(f"no relabeling reads the prometheus.io/{key} annotation")
        report.check(not problems, f"prometheus: job {job.get('job_name')}: kubernetes_sd_configs (role pod) "
                     "and the pod meta labels its relabelings read", problems)


def check_prometheus_config(promtool: str | None, path: Path, root: Path, report: Report) -> None:
    what = f"prometheus: promtool check config {rel(path, root)} (with the rule files it loads)"
    if promtool is None:
        report.unavailable(what, "promtool is not installed (scripts/promtool.sh installs it)")
        return
    ok, out = promtool_run(promtool, ["check", "config", str(path)])
    if ok or "kubernetes_sd_configs not found" not in out:
        report.check(ok, what, out)
        return
    # Debian builds Prometheus without Kubernetes discovery (its NEWS.Debian: "Kubernetes
    # support has been completely removed"). Check a copy whose kubernetes_sd_configs are
    # static targets, beside copies of its rule files at the same relative paths, so promtool
    # still checks everything else and finds the rules as it would; check_kubernetes_sd
    # checks the discovery blocks.
    config = yaml.safe_load(path.read_text())
    for job in config.get("scrape_configs") or []:
        if job.pop("kubernetes_sd_configs", None) is not None:
            job.setdefault("static_configs", []).append({"targets": ["localhost:8081"]})
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / path.name
        copy.write_text(yaml.safe_dump(config, sort_keys=False))
        for pattern in config.get("rule_files") or []:
            if os.path.isabs(pattern) or ".." in Path(pattern).parts:
                continue  # outside the config's directory: promtool reads the original
            for found in glob.glob(str(path.parent / pattern)):
                dest = Path(tmp) / Path(found).relative_to(path.parent)
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(found, dest)
        ok, out = promtool_run(promtool, ["check", "config", str(copy)])
    report.check(ok, what + "; this promtool has no Kubernetes discovery (Debian's build), so with "
                 "kubernetes_sd_configs swapped for static_configs", out)


def check_alert_rules(promtool: str | None, path: Path, alerts: object, families, root: Path,
                      report: Report) -> None:
    what = f"prometheus: promtool check rules {rel(path, root)}"
    if promtool is None:
        report.unavailable(what, "promtool is not installed (scripts/promtool.sh installs it)")
    else:
        ok, out = promtool_run(promtool, ["check", "rules", str(path)])
        report.check(ok, what, out)
    if not report.check(isinstance(alerts, dict) and bool(alerts.get("groups")),
                        f"prometheus: {rel(path, root)} has rule groups", "missing, or no groups"):
        return
    for rule in (r for g in alerts["groups"] for r in g.get("rules") or []):
        if "alert" not in rule:
            continue
        problems = []
        if not rule.get("for"):
            problems.append("no `for:` (it would fire on a single evaluation)")
        severity = (rule.get("labels") or {}).get("severity")
        if severity not in ALERT_SEVERITIES:
            problems.append(f"severity {severity!r}, want one of {sorted(ALERT_SEVERITIES)}")
        annotations = rule.get("annotations") or {}
        problems += [f"no {k} annotation" for k in ("summary", "description") if not annotations.get(k)]
        unknown = sorted(n for n in promql_metric_names(str(rule.get("expr", ""))) if not documented(n, families))
        if unknown:
            problems.append(f"metrics not in docs/metrics.md: {unknown}")
        report.check(not problems, f"prometheus: alert {rule['alert']} (for {rule.get('for')}, severity "
                     f"{severity}, summary and description, its metrics in docs/metrics.md)", problems)


def check_operator_objects(mdir: Path, parsed: dict[Path, list], alerts: object,
                           services: list[tuple[str, dict]], root: Path, report: Report) -> None:
    """The ServiceMonitor and PrometheusRule of the monitoring overlay."""
    objects = [d for path, docs in parsed.items() if path.parent == mdir for d in docs if isinstance(d, dict)]
    found = {}
    for kind in ("ServiceMonitor", "PrometheusRule"):
        of_kind = [o for o in objects if o.get("kind") == kind]
        if report.check(len(of_kind) == 1 and of_kind[0].get("apiVersion") == MONITORING_API,
                        f"monitoring: {rel(mdir, root)} has one {kind} ({MONITORING_API})",
                        f"found {[(o.get('apiVersion'), (o.get('metadata') or {}).get('name')) for o in of_kind]}"):
            found[kind] = of_kind[0]

    rule = found.get("PrometheusRule")
    if rule is not None and isinstance(alerts, dict):
        mine = {r.get("alert") or r.get("record"): r for g in (rule.get("spec") or {}).get("groups") or []
                for r in g.get("rules") or []}
        theirs = {r.get("alert") or r.get("record"): r for g in alerts.get("groups") or [] for r in g.get("rules") or []}
        problems = [f"{n}: only in the PrometheusRule" for n in sorted(set(mine) - set(theirs))]
        problems += [f"{n}: only in alerts.yml" for n in sorted(set(theirs) - set(mine))]
        problems += [f"{n}: differs" for n in sorted(set(mine) & set(theirs)) if mine[n] != theirs[n]]
        equal = (rule.get("spec") or {}).get("groups") == alerts.get("groups")
        report.check(equal, f"monitoring: PrometheusRule {rule['metadata'].get('name')}'s groups equal "
                     "deploy/prometheus/alerts.yml's", problems or "group names or order differ")

    monitor = found.get("ServiceMonitor")
    if monitor is not None:
        spec = monitor.get("spec") or {}
        problems = []
        endpoints = spec.get("endpoints") or []
        if not any(e.get("port") == METRICS_PORT_NAME and e.get("path", METRICS_PATH) == METRICS_PATH
                   for e in endpoints):
            problems.append(f"no endpoint on port `{METRICS_PORT_NAME}`, path {METRICS_PATH}")
        selector = spec.get("selector") or {}
        if selector.get("matchExpressions") or not selector.get("matchLabels"):
            problems.append("select by matchLabels only (this check evaluates nothing else)")
        missed = [n for n, labels in services if not (selector.get("matchLabels") or {}).items() <= labels.items()]
        if missed:
            problems.append(f"selector {selector.get('matchLabels')} misses the Services {missed}")
        if not services:
            problems.append("no Service of the base has a metrics port")
        report.check(not problems, f"monitoring: ServiceMonitor {monitor['metadata'].get('name')} scrapes "
                     f"`{METRICS_PORT_NAME}` {METRICS_PATH} of the {len(services)} docchat Services", problems)


def adapter_exposed_name(rule: dict) -> str | None:
    """The name prometheus-adapter gives a rule's metric: name.as ($1-style groups of
    name.matches), else the series' own name."""
    series = promql_metric_names(str(rule.get("seriesQuery", "")))
    if len(series) != 1:
        return None
    source = next(iter(series))
    naming = rule.get("name") or {}
    matches = naming.get("matches") or "^(.*)$"
    if not re.search(matches, source):
        return None
    as_ = naming.get("as")
    if not as_:
        return source
    return re.sub(matches, re.sub(r"\$\{?(\d+)\}?", r"\\g<\1>", as_), source)


def check_adapter(path: Path, parsed: dict[Path, list], families, root: Path,
                  report: Report) -> tuple[dict[str, set[str]], list[tuple[str, str]]]:
    """prometheus-adapter's rules: what they expose ({"rules": names, "externalRules": names})
    and their queries, templates filled in, for promtool."""
    exposed: dict[str, set[str]] = {"rules": set(), "externalRules": set()}
    exprs: list[tuple[str, str]] = []
    doc = (parsed.get(path) or [None])[0]
    if not report.check(isinstance(doc, dict) and any(doc.get(k) for k in exposed),
                        f"adapter: {rel(path, root)} has rules or externalRules", "missing or empty"):
        return exposed, exprs
    for section in exposed:
        for i, rule in enumerate(doc.get(section) or []):
            problems = []
            name = adapter_exposed_name(rule)
            series = promql_metric_names(str(rule.get("seriesQuery", "")))
            if name is None:
                problems.append(f"seriesQuery {rule.get('seriesQuery')!r} must select one metric that name.matches")
            overrides = (rule.get("resources") or {}).get("overrides") or {}
            mapped = {(v or {}).get("resource") for v in overrides.values()}
            # Pods metrics need the pod; every HPA metric, the HPA's namespace.
            for resource in ("namespace", "pod") if section == "rules" else ("namespace",):
                if resource not in mapped:
                    problems.append(f"no label mapped to resource {resource}")
            query = str(rule.get("metricsQuery", ""))
            filled = (query.replace("<<.Series>>", next(iter(series)) if series else "x")
                      .replace("<<.LabelMatchers>>", 'namespace="docchat"').replace("<<.GroupBy>>", "namespace"))
            if "<<" in filled:
                problems.append("metricsQuery uses a template other than .Series, .LabelMatchers, .GroupBy")
            unknown = sorted(n for n in promql_metric_names(filled) | series if not documented(n, families))
            if unknown:
                problems.append(f"metrics not in docs/metrics.md: {unknown}")
            if name:
                exposed[section].add(name)
            exprs.append((f"docchat_adapter:{section}_{i}", filled))
            report.check(not problems, f"adapter: {section}[{i}] exposes {name} (resources mapped, its metrics "
                         "in docs/metrics.md)", problems)
    return exposed, exprs


def check_backlog_hpas(mdir: Path, parsed: dict[Path, list], exposed: dict[str, set[str]],
                       rendered: list[tuple[str, dict]], root: Path, report: Report) -> None:
    """The overlay's HPA patches add a metric the adapter rules expose, to BACKLOG_SCALED."""
    kdoc = (parsed.get(mdir / "kustomization.yaml") or [{}])[0]
    patched = {}
    for patch in kdoc.get("patches") or []:
        target = patch.get("target") or {}
        if target.get("kind") != "HorizontalPodAutoscaler" or not patch.get("path"):
            continue
        ops = (parsed.get(mdir / patch["path"]) or [[]])[0]
        problems, added = [], []
        for op in ops if isinstance(ops, list) else []:
            if op.get("op") == "add" and op.get("path") == "/spec/metrics/-":
                metric = op.get("value") or {}
                kind = metric.get("type")
                name = ((metric.get(str(kind).lower()) or {}).get("metric") or {}).get("name")
                section = "externalRules" if kind == "External" else "rules"
                if kind not in ("External", "Pods", "Object"):
                    problems.append(f"metric type {kind}: not one prometheus-adapter serves")
                elif name not in exposed[section]:
                    problems.append(f"{kind} metric {name} is not in adapter-rules.yaml's {section} "
                                    f"({sorted(exposed[section])})")
                added.append(f"{kind} {name}")
        if not added:
            problems.append("adds no metric at /spec/metrics/-")
        patched[target.get("name")] = added
        report.check(not problems, f"monitoring: HPA {target.get('name')} also scales on {', '.join(added)} "
                     "(prometheus-adapter)", problems)
    report.check(set(patched) == BACKLOG_SCALED, f"monitoring: backlog HPAs for {sorted(BACKLOG_SCALED)}",
                 f"patched: {sorted(patched)}")
    where = f"{rel(mdir, root)} (rendered)"
    out = [o for w, o in rendered if w == where]
    if not out:
        return  # not rendered: kubectl is missing or failed, and said so
    kinds = {o.get("kind") for o in out}
    hpas = {o["metadata"]["name"]: o for o in out if o.get("kind") == "HorizontalPodAutoscaler"}
    problems = [f"no {k}" for k in ("ServiceMonitor", "PrometheusRule", "Deployment") if k not in kinds]
    for name, added in sorted(patched.items()):
        types = [m.get("type") for m in (hpas.get(name) or {}).get("spec", {}).get("metrics") or []]
        if "Resource" not in types or len(types) < 1 + len(added):
            problems.append(f"HPA {name} has metrics {types}, want CPU and {added}")
    report.check(not problems, f"monitoring: {where} holds the base, the ServiceMonitor, the PrometheusRule "
                 "and the patched HPAs", problems)


def dashboard_panels(panels: list | None):
    for panel in panels or []:
        yield panel
        yield from dashboard_panels(panel.get("panels"))  # a collapsed row holds its panels


def check_dashboard(path: Path, families, root: Path, report: Report) -> list[tuple[str, str]]:
    """The Grafana dashboard; returns its queries, variables filled in, for promtool."""
    try:
        dash = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        report.check(False, f"grafana: {rel(path, root)} parses", str(err))
        return []
    report.check(isinstance(dash, dict), f"grafana: {rel(path, root)} parses", "not a JSON object")
    panels = list(dashboard_panels(dash.get("panels")))
    ids = [p.get("id") for p in panels]
    dupes = sorted({i for i in ids if ids.count(i) > 1}, key=str)
    report.check(bool(panels) and all(isinstance(i, int) for i in ids) and not dupes,
                 f"grafana: {len(panels)} panels with unique integer ids", f"duplicate or missing ids: {dupes or ids}")
    variables = {v.get("name"): v for v in (dash.get("templating") or {}).get("list") or []}
    source = variables.get("datasource") or {}
    report.check(source.get("type") == "datasource" and source.get("query") == "prometheus",
                 "grafana: a `datasource` variable of type prometheus", f"found {source or 'none'}")
    problems, exprs, names = [], [], set()
    for panel in panels:
        if panel.get("type") == "row":
            continue
        where = f"panel {panel.get('id')} {panel.get('title')!r}"
        targets = panel.get("targets") or []
        if not targets:
            problems.append(f"{where}: no targets")
        for obj in [panel, *targets]:
            uid = (obj.get("datasource") or {}).get("uid")
            if uid not in (None, "${datasource}"):
                problems.append(f"{where}: datasource {uid}, want ${{datasource}}")
        for target in targets:
            if not target.get("expr"):
                problems.append(f"{where} {target.get('refId')}: no expr")
                continue
            expr = grafana_expr(target["expr"])
            exprs.append((f"docchat_dashboard:panel_{panel.get('id')}_{target.get('refId')}", expr))
            names |= promql_metric_names(expr)
    for var in variables.values():
        query = var.get("definition") or var.get("query")
        query = query.get("query") if isinstance(query, dict) else query
        m = re.fullmatch(r"\s*label_values\((.+),\s*\w+\s*\)\s*", str(query or ""))
        if var.get("type") == "query" and m:
            names |= promql_metric_names(grafana_expr(m.group(1)))
    report.check(not problems, f"grafana: every panel queries ${{datasource}} with a PromQL expr", problems)
    unknown = sorted(n for n in names if not documented(n, families))
    report.check(bool(names) and not unknown, f"grafana: the {len(names)} metrics its queries and variables "
                 "name are in docs/metrics.md", f"not documented: {unknown}")
    return exprs


def check_monitoring(root: Path, parsed: dict[Path, list], rendered: list[tuple[str, dict]], report: Report) -> None:
    families = metric_families(root)
    report.check(bool(families[0]), "monitoring: docs/metrics.md lists the metric families", "no family found")
    services = monitored_services(root, parsed, report)
    promtool = find_promtool(root)

    pdir = root / "deploy" / "prometheus"
    alerts_path, config_path = pdir / "alerts.yml", pdir / "prometheus.yml"
    alerts = (parsed.get(alerts_path) or [None])[0]
    check_alert_rules(promtool, alerts_path, alerts, families, root, report)
    config = (parsed.get(config_path) or [None])[0]
    if report.check(isinstance(config, dict), f"prometheus: {rel(config_path, root)} exists", "missing"):
        # Prometheus joins a relative rule_files pattern to the config file's directory.
        loaded = {Path(f).resolve() for p in config.get("rule_files") or [] for f in glob.glob(str(pdir / p))}
        report.check(alerts_path.resolve() in loaded, f"prometheus: its rule_files load {rel(alerts_path, root)} "
                     "(relative to the config's directory)", f"rule_files {config.get('rule_files')} load "
                     f"{sorted(rel(f, root) for f in loaded)}")
        check_kubernetes_sd(config, report)
        check_prometheus_config(promtool, config_path, root, report)
    # The compose stack's Prometheus (docker-compose.yml's `prometheus`): one job per service,
    # named as alerts.yml's `job` label expects, every replica found by Docker's DNS.
    compose_config_path = pdir / "compose.yml"
    compose_config = (parsed.get(compose_config_path) or [None])[0]
    if report.check(isinstance(compose_config, dict), f"prometheus: {rel(compose_config_path, root)} exists",
                    "missing"):
        check_prometheus_config(promtool, compose_config_path, root, report)
        jobs = {j.get("job_name"): j for j in compose_config.get("scrape_configs") or []}
        want = {name for name, _ in services}
        report.check(set(jobs) == want, f"prometheus: {rel(compose_config_path, root)} scrapes every service "
                     "as a job of its name", f"jobs {sorted(jobs)}, services {sorted(want)}")
        bad = [name for name, j in jobs.items()
               if [(d.get("names"), d.get("type"), d.get("port")) for d in j.get("dns_sd_configs") or []]
               != [([name], "A", 8081)]]
        report.check(not bad, f"prometheus: {rel(compose_config_path, root)} finds each replica by DNS "
                     "(the service's name, type A, the probe port 8081)", f"not so: {bad}")

    mdir = root / "deploy" / "k8s" / "monitoring"
    check_operator_objects(mdir, parsed, alerts, services, root, report)
    exposed, adapter_exprs = check_adapter(pdir / "adapter-rules.yaml", parsed, families, root, report)
    promtool_check_exprs(promtool, adapter_exprs, "adapter: promtool parses every metricsQuery (templates filled in)",
                         report)
    check_backlog_hpas(mdir, parsed, exposed, rendered, root, report)

    dashboard = root / "deploy" / "grafana" / "docchat.json"
    exprs = check_dashboard(dashboard, families, root, report)
    promtool_check_exprs(promtool, exprs, f"grafana: promtool parses the dashboard's {len(exprs)} queries "
                         "(Grafana's variables filled in)", report)


# --------------------------------------------------------------------------------------------
# docker-compose.yml

_INTERPOLATION = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}")


def interpolate(value: str) -> str:
    """Resolves ${VAR:-default} to its default (the shell environment is not consulted)."""
    return _INTERPOLATION.sub(lambda m: m.group(2) or "", value)


def compose_env(service: dict) -> dict[str, str | None]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        out = {}
        for item in env:
            key, sep, value = str(item).partition("=")
            out[key] = value if sep else None
        return out
    return {k: (None if v is None else str(v)) for k, v in env.items()}


def volume_sources(service: dict) -> list[str]:
    """The sources (named volume or bind path) of a compose service's volumes, interpolated;
    anonymous volumes (a bare container path) have none and are left out."""
    sources = []
    for vol in service.get("volumes") or []:
        if isinstance(vol, str):
            vol = interpolate(vol)
            if ":" in vol:
                sources.append(vol.split(":", 1)[0])
        else:
            sources.append((vol or {}).get("source", ""))
    return sources


def volume_targets(service: dict) -> dict[str, bool]:
    """The container paths of a compose service's volumes (bind, named or anonymous), each
    with whether it is mounted read-only."""
    targets = {}
    for vol in service.get("volumes") or []:
        if isinstance(vol, str):
            parts = interpolate(vol).split(":")
            if len(parts) == 1:
                targets[parts[0]] = False  # anonymous: a bare container path
            else:
                targets[parts[1]] = len(parts) > 2 and "ro" in parts[2].split(",")
        else:
            vol = vol or {}
            targets[vol.get("target", "")] = bool(vol.get("read_only"))
    return targets


def is_our_image(service: dict) -> bool:
    build = service.get("build")
    dockerfile = build.get("dockerfile", "") if isinstance(build, dict) else ""
    return interpolate(str(service.get("image", ""))) == OUR_IMAGE or dockerfile.endswith("deploy/Dockerfile")


def check_compose(root: Path, compose: dict, report: Report) -> None:
    services: dict[str, dict] = compose.get("services") or {}
    declared_volumes = set((compose.get("volumes") or {}).keys())
    report.check(bool(services), "compose: defines services", "no services")

    for name, svc in services.items():
        deps = svc.get("depends_on") or []
        if deps:
            items = deps.items() if isinstance(deps, dict) else ((d, {}) for d in deps)
            problems = []
            for dep, opts in items:
                if dep not in services:
                    problems.append(f"{dep} is not a defined service")
                elif (opts or {}).get("condition") == "service_healthy" and "healthcheck" not in services[dep]:
                    problems.append(f"waits for {dep} to be healthy, but {dep} has no healthcheck")
            report.check(not problems, f"compose {name}: depends_on {', '.join(deps)}", problems)

        if is_our_image(svc):
            cmd = svc.get("command")
            cmd = shlex.split(cmd) if isinstance(cmd, str) else list(cmd or [])
            binary = cmd[0] if cmd else None
            report.check(binary in BINARIES, f"compose {name}: command {cmd} runs a docchat binary",
                         f"first element must be one of {sorted(BINARIES)}")
            test = (svc.get("healthcheck") or {}).get("test")
            report.check(test == ["CMD", binary, "healthcheck"], f"compose {name}: healthcheck {test}",
                         f"want ['CMD', '{binary}', 'healthcheck']")
            # Privileges: only the sandbox hosts (the sandbox's per-run uids) run as root,
            # with exactly SANDBOX_CAPS and an init that reaps the runs' orphans.
            added = set(svc.get("cap_add") or [])
            as_root = str(svc.get("user", "")).split(":")[0] in ("0", "root")
            problems = []
            if svc.get("privileged"):
                problems.append("privileged")
            if "ALL" not in (svc.get("cap_drop") or []):
                problems.append("cap_drop lacks ALL")
            if "no-new-privileges:true" not in (svc.get("security_opt") or []):
                problems.append("security_opt lacks no-new-privileges:true")
            if binary in SANDBOX_HOSTS:
                if not added <= SANDBOX_CAPS:
                    problems.append(f"adds {sorted(added - SANDBOX_CAPS)} beyond {sorted(SANDBOX_CAPS)}")
                if not as_root:
                    problems.append("does not run as root (user: \"0:0\"; the sandbox's per-run uids)")
                if not SANDBOX_CAPS <= added:
                    problems.append(f"does not add {sorted(SANDBOX_CAPS - added)}")
                if as_root and svc.get("init") is not True:
                    problems.append("runs as root without init: true (nothing reaps the sandbox's orphans)")
            elif as_root or added:
                problems.append(f"runs as root or adds capabilities {sorted(added)}")
            report.check(not problems, f"compose {name}: privileges (root {as_root}, cap_add {sorted(added)})", problems)

            # A sandbox host's runs need a writable data directory: DOCCHAT_DATA_DIR set to
            # SANDBOX_DATA_DIR, with a writable volume there (read_only covers the rest). An
            # anonymous volume or a tmpfs: a named one would be shared by the replicas.
            if binary in SANDBOX_HOSTS:
                problems = []
                data_dir = compose_env(svc).get("DOCCHAT_DATA_DIR")
                if data_dir != SANDBOX_DATA_DIR:
                    problems.append(f"DOCCHAT_DATA_DIR is {data_dir!r}, want {SANDBOX_DATA_DIR!r}")
                targets = volume_targets(svc)
                tmpfs = svc.get("tmpfs") or []
                tmpfs = [tmpfs] if isinstance(tmpfs, str) else tmpfs
                tmpfs_targets = {str(t).split(":", 1)[0] for t in tmpfs}
                if SANDBOX_DATA_DIR in targets:
                    if targets[SANDBOX_DATA_DIR]:
                        problems.append(f"the volume at {SANDBOX_DATA_DIR} is read-only")
                elif SANDBOX_DATA_DIR not in tmpfs_targets:
                    problems.append(f"no volume or tmpfs at {SANDBOX_DATA_DIR} (the root filesystem is read-only)")
                report.check(not problems, f"compose {name}: DOCCHAT_DATA_DIR={SANDBOX_DATA_DIR} on a writable volume "
                             "(the sandbox's workspaces and state)", problems)

        # DOCCHAT_*_URL: gRPC URLs point at the right service on 50051; the others (database,
        # AMQP) at a defined service; every service has a database of its own.
        problems = []
        checked = 0
        for key, value in compose_env(svc).items():
            if not re.fullmatch(r"DOCCHAT_\w+_URL|DOCCHAT_S3_ENDPOINT", key):
                continue
            checked += 1
            if value is None:
                problems.append(f"{key} has no value")
                continue
            url = urlsplit(interpolate(value))
            if key == "DOCCHAT_BLOB_URL":
                # A bucket, not a host: s3://<bucket>[/<prefix>], with an endpoint beside it.
                if url.scheme != "s3" or not url.hostname:
                    problems.append(f"{key}: {value} is not s3://<bucket>")
                if "DOCCHAT_S3_ENDPOINT" not in compose_env(svc):
                    problems.append(f"{key} without DOCCHAT_S3_ENDPOINT")
                continue
            try:
                port = url.port
            except ValueError:
                port = None
            if url.hostname not in services:
                problems.append(f"{key}: host {url.hostname} is not a defined service")
            elif key in GRPC_URL_VARS:
                if url.hostname != GRPC_URL_VARS[key]:
                    problems.append(f"{key}: points at {url.hostname}, want {GRPC_URL_VARS[key]}")
                if port != GRPC_PORT:
                    problems.append(f"{key}: port {port}, want {GRPC_PORT}")
            elif port is None:
                problems.append(f"{key}: no explicit port")
        if checked:
            report.check(not problems, f"compose {name}: {checked} DOCCHAT_*_URL / DOCCHAT_S3_ENDPOINT values point at defined services", problems)

        # The services that scale out run several replicas and keep nothing on a named volume.
        if name in SCALED_IN_COMPOSE:
            problems = []
            replicas = ((svc.get("deploy") or {}).get("replicas"))
            try:
                replicas = int(interpolate(str(replicas)))
            except ValueError:
                replicas = 0
            if replicas < 2:
                problems.append(f"deploy.replicas is {replicas}, want at least 2")
            for source in volume_sources(svc):
                if source in declared_volumes:
                    problems.append(f"named volume {source}: shared state the replicas would fight over")
            report.check(not problems, f"compose {name}: {replicas} replicas, no named volume", problems)

        # Named volumes are declared; bind-mount sources exist.
        problems = []
        for source in volume_sources(svc):
            if source.startswith((".", "/", "~")):
                if not (root / source).exists() and source not in OPTIONAL_BIND_SOURCES:
                    problems.append(f"bind source {source} does not exist")
            elif source not in declared_volumes:
                problems.append(f"named volume {source} is not declared under volumes:")
        if svc.get("volumes"):
            report.check(not problems, f"compose {name}: volumes resolve", problems)

        build = svc.get("build")
        if isinstance(build, dict):
            context = root / build.get("context", ".")
            dockerfile = context / build.get("dockerfile", "Dockerfile")
            report.check(context.is_dir() and dockerfile.is_file(),
                         f"compose {name}: build {rel(dockerfile, root)} exists", "context or Dockerfile missing")

    # Databases named in DOCCHAT_DATABASE_URL are distinct and created by the postgres init script.
    dbs = {}
    for name, svc in services.items():
        value = compose_env(svc).get("DOCCHAT_DATABASE_URL")
        if value:
            dbs[name] = urlsplit(interpolate(value)).path.lstrip("/")
    if dbs:
        created = set()
        for script in sorted((root / "deploy" / "postgres-init").glob("*.sql")):
            created |= set(re.findall(r"CREATE DATABASE\s+(\w+)", script.read_text(), re.IGNORECASE))
        problems = [f"{svc} uses {db}, not created in deploy/postgres-init" for svc, db in dbs.items() if db not in created]
        if len(set(dbs.values())) != len(dbs):
            problems.append(f"services share a database: {dbs}")
        report.check(not problems, f"compose: {len(dbs)} service databases are distinct and created by the init script", problems)


# --------------------------------------------------------------------------------------------
# Dockerfile


def dockerfile_instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs with line continuations joined and comments dropped."""
    out, current = [], ""
    for line in text.splitlines():
        stripped = line.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if current and stripped.startswith("#"):
            continue  # comment line inside a continued instruction
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        current += stripped
        keyword, _, args = current.partition(" ")
        out.append((keyword.upper(), args.strip()))
        current = ""
    if current:
        keyword, _, args = current.partition(" ")
        out.append((keyword.upper(), args.strip()))
    return out


def copied_binaries(stage: list[tuple[str, str]], from_stage: str | None) -> set[str]:
    """Binaries a stage COPYs into /usr/local/bin: from another stage (`--from=`), or from the
    build context when from_stage is None. ${ARG} prefixes are dropped."""
    out: set[str] = set()
    for keyword, args in stage:
        if keyword != "COPY":
            continue
        has_from = "--from=" in args
        if (from_stage is None) == has_from:
            continue
        tokens = [t for t in shlex.split(args) if not t.startswith("--")]
        if len(tokens) < 2:
            continue
        *sources, dest = tokens
        for src in sources:
            base = src.rstrip("/").rsplit("/", 1)[-1]
            if dest.rstrip("/") == "/usr/local/bin" or dest == f"/usr/local/bin/{base}":
                out.add(base)
    return out


def check_dockerfile(root: Path, report: Report) -> None:
    path = root / "deploy" / "Dockerfile"
    if not report.check(path.is_file(), "dockerfile: deploy/Dockerfile exists", "missing"):
        return
    # (name, base, instructions) per stage, in file order.
    stages: list[tuple[str, str, list[tuple[str, str]]]] = []
    for keyword, args in dockerfile_instructions(path.read_text()):
        if keyword == "FROM":
            parts = args.split()
            name = parts[2] if len(parts) >= 3 and parts[1].upper() == "AS" else str(len(stages))
            stages.append((name, parts[0], []))
        if stages:
            stages[-1][2].append((keyword, args))
    if not report.check(len(stages) >= 2, "dockerfile: multi-stage build", f"{len(stages)} stage(s)"):
        return
    by_name = {name: (base, body) for name, base, body in stages}
    order = [name for name, _, _ in stages]

    def chain(name: str) -> list[tuple[str, str]]:
        """A stage's instructions, those of the stages it is built FROM first."""
        base, body = by_name[name]
        return (chain(base) if base in by_name and base != name else []) + body

    final_name = order[-1]
    final = chain(final_name)

    build_runs = [a for name, _, body in stages if name != final_name for k, a in body
                  if k == "RUN" and "cargo build" in a]
    build_text = " ".join(build_runs)
    report.check(bool(build_runs) and all("--release" in a and "--locked" in a for a in build_runs),
                 "dockerfile: builder runs cargo build --release --locked", "no such RUN instruction")
    built = set(re.findall(r"(?:-p|--package)[ =](\S+)", build_text))
    out_of_target = set(re.findall(r"target/release/([\w.-]+)", build_text))
    copied = copied_binaries(final, "builder")

    for package, binary in PACKAGES.items():
        problems = []
        if package not in built:
            problems.append(f"cargo build lacks -p {package}")
        if binary not in out_of_target:
            problems.append(f"target/release/{binary} is not copied out of the cache-mounted target dir")
        if binary not in copied:
            problems.append(f"final stage does not COPY --from {binary} into /usr/local/bin")
        report.check(not problems, f"dockerfile: builds {package} and installs {binary} in /usr/local/bin", problems)

    # The host-binaries target (scripts/compose-test.sh builds it): takes all six from the build
    # context, and comes before the builder so that the legacy builder, which builds every stage
    # above the target, compiles nothing for it.
    if report.check("prebuilt" in by_name, "dockerfile: has a `prebuilt` target (binaries built on the host)",
                    "no stage named prebuilt"):
        from_context = copied_binaries(chain("prebuilt"), None)
        missing = sorted(BINARIES - from_context)
        report.check(not missing, "dockerfile: prebuilt copies all six binaries from the build context "
                     "into /usr/local/bin", f"missing {missing}")
        builders = [name for name, _, body in stages if any(k == "RUN" and "cargo build" in a for k, a in body)]
        late = [b for b in builders if order.index(b) < order.index("prebuilt")]
        report.check(not late, "dockerfile: prebuilt comes before the cargo builder stage",
                     f"{late} above it: `--target prebuilt` would compile with the legacy builder")
        users = [a for k, a in chain("prebuilt") if k == "USER"]
        report.check(bool(users) and users[-1].split(":")[0] not in ("root", "0"),
                     f"dockerfile: prebuilt runs as non-root ({users[-1] if users else 'no USER'})",
                     "add USER 10001:10001")

    user = [a for k, a in final if k == "USER"]
    report.check(bool(user) and user[-1].split(":")[0] not in ("root", "0"),
                 f"dockerfile: final stage runs as non-root ({user[-1] if user else 'no USER'})",
                 "add USER 10001:10001")

    # The code sandbox: the helper beside each sandbox host in both targets (all of them in
    # /usr/local/bin, where a service looks for it next to its own binary), and the sandbox's
    # Debian packages in the runtime base.
    hosts = sorted(SANDBOX_HOSTS)
    problems = []
    if "prebuilt" in by_name:
        from_context = copied_binaries(chain("prebuilt"), None)
        for binary in [SANDBOX_HELPER] + hosts:
            if binary not in from_context:
                problems.append(f"prebuilt does not COPY {binary} from the build context into /usr/local/bin")
    if SANDBOX_PACKAGE not in built:
        problems.append(f"cargo build lacks -p {SANDBOX_PACKAGE}")
    if SANDBOX_HELPER not in out_of_target:
        problems.append(f"target/release/{SANDBOX_HELPER} is not copied out of the target dir")
    for binary in [SANDBOX_HELPER] + hosts:
        if binary not in copied:
            problems.append(f"final stage does not COPY --from {binary} into /usr/local/bin")
    installs = " ".join(a for k, a in final if k == "RUN" and "apt-get install" in a).split()
    missing = [p for p in SANDBOX_PACKAGES if p not in installs]
    if missing:
        problems.append(f"the runtime does not apt-get install {missing}")
    report.check(not problems, f"dockerfile: the sandbox ({SANDBOX_HELPER} beside {' and '.join(hosts)}, "
                 + ", ".join(SANDBOX_PACKAGES) + ")", problems)

    # ingest-service's text recognition: its programs in the runtime base, in a RUN of their
    # own after the sandbox's (so adding them left that big layer cached).
    runs = [a for k, a in final if k == "RUN" and "apt-get install" in a]
    ocr_runs = [i for i, a in enumerate(runs) if any(p in a.split() for p in OCR_PACKAGES)]
    sandbox_runs = [i for i, a in enumerate(runs) if any(p in a.split() for p in SANDBOX_PACKAGES)]
    problems = []
    missing = [p for p in OCR_PACKAGES if p not in installs]
    if missing:
        problems.append(f"the runtime does not apt-get install {missing}")
    elif set(ocr_runs) & set(sandbox_runs) or min(ocr_runs) < max(sandbox_runs, default=-1):
        problems.append("install them in a RUN of their own after the sandbox's packages")
    report.check(not problems, "dockerfile: text recognition (" + ", ".join(OCR_PACKAGES) + ", a layer of their own)",
                 problems)

    ignore = root / ".dockerignore"
    entries = set(ignore.read_text().split()) if ignore.is_file() else set()
    missing = [e for e in ("target", ".git") if e not in entries]
    report.check(not missing, "dockerfile: .dockerignore excludes target and .git", f"missing {missing}")


# --------------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent,
                        help="repository root (default: the parent of deploy/)")
    root = parser.parse_args().root.resolve()
    report = Report()

    parsed = load_yaml_files(root, report)
    check_kustomizations(root, parsed, report)
    check_kubernetes(k8s_objects(root, parsed), report)
    rendered = render_kustomizations(root, parsed, report)
    check_kubernetes_schema(root, parsed, rendered, report)
    check_monitoring(root, parsed, rendered, report)
    compose_docs = parsed.get(root / "docker-compose.yml")
    if compose_docs:
        check_compose(root, compose_docs[0], report)
    check_dockerfile(root, report)

    print(f"{report.passed} passed, {report.failed} failed")
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
