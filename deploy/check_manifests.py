#!/usr/bin/env python3
"""Static checks for docchat's deployment files.

Checks what can be checked without a Docker engine or a cluster: that the YAML parses, that
the files agree with each other and with the workspace (binary names, ports, object names,
volume and config references), and that every Kubernetes object, as written and as rendered by
`kubectl kustomize`, is valid against the Kubernetes API schema (PyPI's kubernetes-validate,
which ships the schemas: no cluster, no network) for the oldest supported Kubernetes
(MIN_KUBERNETES) and the newest the package knows. Run from anywhere:

    python3 deploy/check_manifests.py            # repo root = parent of this script's directory
    python3 deploy/check_manifests.py --root DIR

Prints one line per check and ends with "N passed, M failed". Exit status: 0 when everything
passed, 1 when a check failed, 2 when PyYAML is missing. Needs PyYAML and kubernetes-validate
(tests/requirements.txt; scripts/python-env.sh installs both) and kubectl for the
kustomize rendering. Without kubernetes-validate or kubectl those checks are skipped, loudly;
with CI set in the environment they fail instead.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
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
# agent-service's code sandbox (docs/AGENT.md "The sandbox"): the Landlock + seccomp helper,
# the binary of docchat-sandbox (libs/sandbox) that must sit next to agent-service in the image.
SANDBOX_HELPER = "docchat-sandbox-exec"
SANDBOX_PACKAGE = "docchat-sandbox"
# Debian packages the image needs for the sandbox (as scripts/sandbox-runtime.sh installs).
SANDBOX_PACKAGES = ("bubblewrap", "util-linux", "python3", "python3-numpy", "python3-pandas", "python3-matplotlib",
                    "chromium")
# The one container that runs as uid 0: agent-service, so that each code run gets a uid of its
# own; with every capability dropped but these.
SANDBOX_HOST = "agent-service"
SANDBOX_CAPS = {"SETUID", "SETGID", "CHOWN", "DAC_OVERRIDE", "KILL"}
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

        # No container adds privileges, except agent-service's sandbox host: uid 0 with only
        # SANDBOX_CAPS, no privilege escalation, RuntimeDefault seccomp, and a PID 1 that
        # reaps (shareProcessNamespace: the pause container).
        problems = []
        for c in all_containers(dep):
            csc = c.get("securityContext") or {}
            caps = csc.get("capabilities") or {}
            added = set(caps.get("add") or [])
            as_root = csc.get("runAsUser") == 0 or csc.get("runAsNonRoot") is False
            sandbox_host = name == SANDBOX_HOST and c.get("name") == SANDBOX_HOST
            if csc.get("privileged"):
                problems.append(f"{c.get('name')}: privileged")
            if csc.get("allowPrivilegeEscalation") is not False:
                problems.append(f"{c.get('name')}: allowPrivilegeEscalation is not false")
            if caps.get("drop") != ["ALL"]:
                problems.append(f"{c.get('name')}: capabilities do not drop ALL")
            if (as_root or added) and not sandbox_host:
                problems.append(f"{c.get('name')}: runs as root or adds capabilities {sorted(added)}")
            if sandbox_host and as_root:
                if not added <= SANDBOX_CAPS:
                    problems.append(f"{c.get('name')}: adds {sorted(added - SANDBOX_CAPS)} beyond {sorted(SANDBOX_CAPS)}")
                if (psc.get("seccompProfile") or {}).get("type") != "RuntimeDefault":
                    problems.append("the pod's seccompProfile is not RuntimeDefault")
                if spec.get("shareProcessNamespace") is not True:
                    problems.append("shareProcessNamespace is not true (nothing reaps the sandbox's orphans)")
        report.check(not problems, f"k8s deployment {name}: no added privileges"
                     + (" (agent-service: uid 0 for the sandbox's per-run uids, only " + ", ".join(sorted(SANDBOX_CAPS)) + ")"
                        if name == SANDBOX_HOST else ""), problems)

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
    """Strict validation (unknown fields are errors) of each (where, object) for each version."""
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


def check_kubernetes_schema(root: Path, parsed: dict[Path, list], report: Report) -> None:
    rendered = render_kustomizations(root, parsed, report)
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
            # Privileges: only agent-service (the sandbox's per-run uids) runs as root, with
            # SANDBOX_CAPS at most and an init that reaps the runs' orphans.
            added = set(svc.get("cap_add") or [])
            as_root = str(svc.get("user", "")).split(":")[0] in ("0", "root")
            problems = []
            if svc.get("privileged"):
                problems.append("privileged")
            if "ALL" not in (svc.get("cap_drop") or []):
                problems.append("cap_drop lacks ALL")
            if "no-new-privileges:true" not in (svc.get("security_opt") or []):
                problems.append("security_opt lacks no-new-privileges:true")
            if binary == SANDBOX_HOST:
                if not added <= SANDBOX_CAPS:
                    problems.append(f"adds {sorted(added - SANDBOX_CAPS)} beyond {sorted(SANDBOX_CAPS)}")
                if as_root and svc.get("init") is not True:
                    problems.append("runs as root without init: true (nothing reaps the sandbox's orphans)")
            elif as_root or added:
                problems.append(f"runs as root or adds capabilities {sorted(added)}")
            report.check(not problems, f"compose {name}: privileges (root {as_root}, cap_add {sorted(added)})", problems)

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

    # agent-service's code sandbox: the helper beside agent-service in both targets, and the
    # sandbox's Debian packages in the runtime base.
    problems = []
    if "prebuilt" in by_name and SANDBOX_HELPER not in copied_binaries(chain("prebuilt"), None):
        problems.append(f"prebuilt does not COPY {SANDBOX_HELPER} from the build context")
    if SANDBOX_PACKAGE not in built:
        problems.append(f"cargo build lacks -p {SANDBOX_PACKAGE}")
    if SANDBOX_HELPER not in out_of_target:
        problems.append(f"target/release/{SANDBOX_HELPER} is not copied out of the target dir")
    if SANDBOX_HELPER not in copied:
        problems.append(f"final stage does not COPY --from {SANDBOX_HELPER} into /usr/local/bin")
    installs = " ".join(a for k, a in final if k == "RUN" and "apt-get install" in a).split()
    missing = [p for p in SANDBOX_PACKAGES if p not in installs]
    if missing:
        problems.append(f"the runtime does not apt-get install {missing}")
    report.check(not problems, f"dockerfile: agent-service's sandbox ({SANDBOX_HELPER} beside agent-service, "
                 + ", ".join(SANDBOX_PACKAGES) + ")", problems)

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
    check_kubernetes_schema(root, parsed, report)
    compose_docs = parsed.get(root / "docker-compose.yml")
    if compose_docs:
        check_compose(root, compose_docs[0], report)
    check_dockerfile(root, report)

    print(f"{report.passed} passed, {report.failed} failed")
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
