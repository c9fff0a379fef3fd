#!/usr/bin/python3
"""Checks the deployment files without a cluster or a Docker engine.

  check_deploy.py k8s      render deploy/k8s (base), its TLS component and
                           deploy/k8s/postgres-example with `kubectl kustomize`
                           and check the objects (Deployments, probes, drain,
                           Services, PDBs, ConfigMap, Secrets, securityContext)
  check_deploy.py compose  parse deploy/docker-compose.yml and check the
                           default service and the `replicas` profile

Run with Debian's /usr/bin/python3 (python3-yaml, installed by
deploy/install-deps.sh). Exit 0 = pass, 1 = fail, 77 = skipped: no kubectl on
PATH (CTest reports the test as skipped). deploy/install-deps.sh installs
Debian's kubernetes-client (kubectl 1.20, kustomize v2) when no kubectl is on
PATH; it renders the base and postgres-example, but not kustomize Components
(kubectl >= 1.21), so with it the TLS component's check is skipped, saying so.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

SKIP = 77  # CTest SKIP_RETURN_CODE (tests/deploy/CMakeLists.txt)

try:
    import yaml
except ImportError:
    print("FAIL: python3-yaml is missing: run `bash deploy/install-deps.sh` "
          "(or apt-get install python3-yaml) and use /usr/bin/python3", file=sys.stderr)
    sys.exit(1)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
K8S = os.path.join(ROOT, "deploy", "k8s")

# kls-server's drain after SIGTERM: stop claiming, checkpoint and release jobs,
# finish in-flight queries, exit 0 — "allow ~15 s" (docs; deploy/k8s/README.md).
DRAIN_SECONDS = 15
PORT = 50051
# Config-file keys kls-server knows (server/server_config.h + the replica keys).
KNOWN_KEYS = {
    "listen", "data_dir", "workers", "log_level", "max_message_mb", "kernel_cache_mb",
    "tls_cert_file", "tls_key_file", "tls_client_ca_file", "tokens_file",
    "store", "role", "cache_dir", "lease_seconds",
}
ROLES = {"all", "api", "worker", "query"}

failures = []


def check(cond, message):
    if not cond:
        failures.append(message)
    return cond


def finish(what):
    if failures:
        for f in failures:
            print("FAIL:", f, file=sys.stderr)
        print(f"{what}: {len(failures)} problem(s)", file=sys.stderr)
        return 1
    print(f"{what}: OK")
    return 0


# ---- helpers ---------------------------------------------------------------

def kustomize(directory):
    """`kubectl kustomize DIR` -> list of objects (fails the test on error)."""
    proc = subprocess.run(["kubectl", "kustomize", directory], capture_output=True,
                          text=True, timeout=180)
    if proc.stderr.strip():
        print(f"kubectl kustomize {os.path.relpath(directory, ROOT)} (stderr):\n{proc.stderr}",
              file=sys.stderr)
    if proc.returncode != 0:
        failures.append(f"kubectl kustomize {directory} exited {proc.returncode}")
        return []
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def by_kind(objs, kind):
    return {o["metadata"]["name"]: o for o in objs if o.get("kind") == kind}


def quantity(q):
    """Kubernetes quantity -> float (bytes or cores)."""
    q = str(q)
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 1e3, "M": 1e6,
             "G": 1e9, "T": 1e12, "m": 1e-3}
    for u in sorted(units, key=len, reverse=True):
        if q.endswith(u):
            return float(q[: -len(u)]) * units[u]
    return float(q)


def selects(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def parse_conf(text):
    conf = {}
    for n, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if not check("=" in line, f"kls.conf:{n}: not `key = value`: {line!r}"):
            continue
        key, value = (s.strip() for s in line.split("=", 1))
        check(key in KNOWN_KEYS, f"kls.conf:{n}: unknown key {key!r} (kls-server rejects it)")
        check(key not in conf, f"kls.conf:{n}: repeated key {key!r}")
        conf[key] = value.strip('"')
    return conf


def prestop_seconds(container):
    pre = (container.get("lifecycle") or {}).get("preStop")
    if not pre:
        return 0
    if "sleep" in pre:
        return int(pre["sleep"]["seconds"])
    cmd = (pre.get("exec") or {}).get("command") or []
    if len(cmd) == 2 and os.path.basename(cmd[0]) == "sleep":
        return int(cmd[1])
    failures.append(f"{container['name']}: preStop {pre} is not a plain sleep; cannot check the drain budget")
    return 0


def grpc_probe(container, which, service, dep):
    probe = container.get(which)
    if not check(probe and "grpc" in probe, f"{dep}: {which} is not a native grpc probe"):
        return
    check(probe["grpc"].get("port") == PORT, f"{dep}: {which} port {probe['grpc'].get('port')} != {PORT}")
    got = probe["grpc"].get("service", "")
    check(got == service, f"{dep}: {which} asks service {got!r}, want {service!r}")


# ---- Kubernetes ------------------------------------------------------------

def check_deployment(dep, role, readiness_service, objs, conf_maps, secrets):
    name = dep["metadata"]["name"]
    spec = dep["spec"]
    pod = spec["template"]["spec"]
    labels = spec["template"]["metadata"].get("labels", {})
    check(selects(spec["selector"]["matchLabels"], labels), f"{name}: selector does not match its pod labels")
    containers = pod["containers"]
    check(len(containers) == 1, f"{name}: expected one container")
    c = containers[0]
    argv = (c.get("command") or []) + (c.get("args") or [])
    check(argv and argv[0] == "kls-server", f"{name}: does not run kls-server: {argv}")
    flags = dict(zip(argv[1::2], argv[2::2])) if len(argv) > 1 else {}
    check(flags.get("--role") == role, f"{name}: --role {flags.get('--role')!r}, want {role!r}")
    check(any(p.get("containerPort") == PORT for p in c.get("ports", [])), f"{name}: no containerPort {PORT}")

    grpc_probe(c, "livenessProbe", "", name)
    grpc_probe(c, "readinessProbe", readiness_service, name)
    if "startupProbe" in c:
        grpc_probe(c, "startupProbe", "", name)

    # Drain: grace >= preStop sleep + kls-server's drain.
    grace = pod.get("terminationGracePeriodSeconds", 30)
    sleep = prestop_seconds(c)
    check(grace >= sleep + DRAIN_SECONDS,
          f"{name}: terminationGracePeriodSeconds {grace} < preStop {sleep} + drain {DRAIN_SECONDS}")
    if role == "api":
        check(sleep > 0, f"{name}: no preStop sleep: endpoints may still route to a stopping pod")

    # Resources.
    res = c.get("resources", {})
    for kind in ("requests", "limits"):
        for r in ("cpu", "memory"):
            check(r in res.get(kind, {}), f"{name}: resources.{kind}.{r} missing")
    if "memory" in res.get("requests", {}) and "memory" in res.get("limits", {}):
        check(quantity(res["requests"]["memory"]) <= quantity(res["limits"]["memory"]),
              f"{name}: memory request above limit")

    # Security: non-root (numeric uid), read-only root, no escalation.
    psc, csc = pod.get("securityContext", {}), c.get("securityContext", {})
    check(psc.get("runAsNonRoot") is True or csc.get("runAsNonRoot") is True, f"{name}: runAsNonRoot not set")
    uid = csc.get("runAsUser", psc.get("runAsUser"))
    check(isinstance(uid, int) and uid > 0,
          f"{name}: runAsUser must be a non-zero number (the image's user is a name the kubelet cannot verify)")
    check(csc.get("readOnlyRootFilesystem") is True, f"{name}: readOnlyRootFilesystem not true")
    check(csc.get("allowPrivilegeEscalation") is False, f"{name}: allowPrivilegeEscalation not false")
    check("ALL" in (csc.get("capabilities", {}).get("drop") or []), f"{name}: capabilities not dropped")

    # Volumes: config from the generated ConfigMap, writable dirs on emptyDirs.
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    mounts = {m["mountPath"]: volumes.get(m["name"], {}) for m in c.get("volumeMounts", [])}
    for m in c.get("volumeMounts", []):
        check(m["name"] in volumes, f"{name}: mount {m['mountPath']} names no volume {m['name']!r}")
    config_path = flags.get("--config", "")
    config_dir, config_file = os.path.split(config_path)
    vol = mounts.get(config_dir, {})
    cm_name = (vol.get("configMap") or {}).get("name")
    conf = {}
    if check(cm_name in conf_maps, f"{name}: --config {config_path!r} is not in a mounted ConfigMap of the render"):
        data = conf_maps[cm_name].get("data", {})
        if check(config_file in data, f"{name}: ConfigMap {cm_name} has no key {config_file!r}"):
            conf = parse_conf(data[config_file])
    for key in ("cache_dir", "data_dir"):
        path = flags.get("--" + key.replace("_", "-"), conf.get(key))
        if check(path, f"{name}: {key} not set (flag or {config_file})"):
            check("emptyDir" in mounts.get(path, {}),
                  f"{name}: {key} {path} is not an emptyDir mount (the root filesystem is read-only)")
    check("emptyDir" in mounts.get("/tmp", {}), f"{name}: /tmp is not an emptyDir mount")
    if "tokens_file" in conf:
        tdir, tfile = os.path.split(conf["tokens_file"])
        sname = (mounts.get(tdir, {}).get("secret") or {}).get("secretName")
        if check(sname in secrets, f"{name}: tokens_file {conf['tokens_file']} is not in a mounted Secret of the render"):
            check(tfile in secrets[sname].get("stringData", secrets[sname].get("data", {})),
                  f"{name}: Secret {sname} has no key {tfile!r}")

    # Store: a postgresql URI without a password; PGPASSWORD from a Secret.
    store = flags.get("--store", conf.get("store", ""))
    m = re.match(r"postgresql://([^@/]+)@([^:/]+):(\d+)/(\w+)", store)
    if check(m, f"{name}: store {store!r} is not postgresql://USER@HOST:PORT/DB"):
        check(":" not in m.group(1), f"{name}: the store URI carries a password; use PGPASSWORD")
    env = {e["name"]: e for e in c.get("env", [])}
    ref = (env.get("PGPASSWORD", {}).get("valueFrom") or {}).get("secretKeyRef")
    if check(ref, f"{name}: PGPASSWORD not taken from a Secret"):
        s = secrets.get(ref["name"])
        if check(s, f"{name}: PGPASSWORD Secret {ref['name']!r} not in the render"):
            check(ref["key"] in s.get("stringData", s.get("data", {})),
                  f"{name}: Secret {ref['name']} has no key {ref['key']!r}")
    return labels, c, res, conf


def check_k8s():
    if shutil.which("kubectl") is None:
        print("SKIPPED: kubectl is not on PATH, so `kubectl kustomize deploy/k8s` cannot be checked. "
              "Run `bash deploy/install-deps.sh` (installs Debian's kubernetes-client) or install kubectl.")
        return SKIP
    version = subprocess.run(["kubectl", "version", "--client", "-o", "yaml"], capture_output=True,
                             text=True, timeout=60)
    minor = re.search(r"minor: \W?(\d+)", version.stdout)
    components = minor is None or int(minor.group(1)) >= 21   # kustomize >= 3.7 inside kubectl

    # --- base ---
    objs = kustomize(K8S)
    for o in objs:
        check("namespace" not in o["metadata"],
              f"{o['kind']}/{o['metadata']['name']}: sets a namespace (the base is namespace-agnostic)")
    deps = by_kind(objs, "Deployment")
    svcs = by_kind(objs, "Service")
    pdbs = by_kind(objs, "PodDisruptionBudget")
    cms = by_kind(objs, "ConfigMap")
    secrets = by_kind(objs, "Secret")
    check(set(deps) == {"kls-api", "kls-worker"}, f"Deployments {sorted(deps)}, want kls-api and kls-worker")
    check(not by_kind(objs, "StatefulSet"), "the base must not contain a database StatefulSet")
    check(any(n.startswith("kls-config") for n in cms), f"no kls-config ConfigMap: {sorted(cms)}")
    for s in secrets.values():
        check(s["metadata"].get("annotations", {}).get("kls.example/placeholder"),
              f"Secret {s['metadata']['name']}: not marked as a placeholder")

    if "kls-api" in deps:
        api_labels, _, api_res, conf = check_deployment(deps["kls-api"], "api", "kls.v1.Queries",
                                                        objs, cms, secrets)
        check(deps["kls-api"]["spec"].get("replicas") == 3, "kls-api: replicas != 3")
        if "store" in conf:
            host = re.match(r"postgresql://[^@]+@([^:/]+)", conf["store"])
            check(host and host.group(1) == "kls-postgres", f"store host is not kls-postgres: {conf['store']}")
        check(conf.get("lease_seconds", "10").isdigit(), "lease_seconds is not a number")
    if "kls-worker" in deps:
        worker_labels, _, worker_res, _ = check_deployment(deps["kls-worker"], "worker", "kls.v1.Jobs",
                                                           objs, cms, secrets)
    if "kls-api" in deps and "kls-worker" in deps:
        try:
            check(quantity(worker_res["limits"]["memory"]) > quantity(api_res["limits"]["memory"]),
                  "kls-worker's memory limit is not above kls-api's")
        except KeyError:
            pass
        # Services: both over the api pods only; one headless.
        headless = [n for n, s in svcs.items() if s["spec"].get("clusterIP") == "None"]
        clusterip = [n for n, s in svcs.items() if s["spec"].get("clusterIP") != "None"
                     and s["spec"].get("type", "ClusterIP") == "ClusterIP"]
        check(headless, "no headless Service (clusterIP: None)")
        check(clusterip, "no ClusterIP Service")
        for n, s in svcs.items():
            sel = s["spec"].get("selector", {})
            check(selects(sel, api_labels), f"Service {n} does not select the kls-api pods")
            check(not selects(sel, worker_labels), f"Service {n} also selects kls-worker pods")
            check(any(p.get("port") == PORT and p.get("targetPort") in (PORT, "grpc")
                      for p in s["spec"].get("ports", [])), f"Service {n}: no port {PORT} -> grpc")
        # One PDB per Deployment.
        for dname, labels in (("kls-api", api_labels), ("kls-worker", worker_labels)):
            matching = [n for n, p in pdbs.items() if selects(p["spec"]["selector"].get("matchLabels"), labels)]
            check(len(matching) == 1, f"{dname}: {len(matching)} PodDisruptionBudgets select it, want 1")
            for n in matching:
                spec = pdbs[n]["spec"]
                check("maxUnavailable" in spec or "minAvailable" in spec, f"PDB {n}: no budget")
                if "minAvailable" in spec and isinstance(spec["minAvailable"], int):
                    check(spec["minAvailable"] < deps[dname]["spec"]["replicas"],
                          f"PDB {n}: minAvailable blocks every voluntary eviction")

    # --- TLS component, through a throwaway overlay outside the base ---
    tls = []
    if components:
        with tempfile.TemporaryDirectory() as tmp:
            rel = os.path.relpath(K8S, tmp)
            with open(os.path.join(tmp, "kustomization.yaml"), "w") as f:
                f.write(f"resources: [{rel}]\ncomponents: [{rel}/components/tls]\n")
            tls = kustomize(tmp)
        check("kls-tls" in by_kind(tls, "Secret"), "TLS component: no Secret kls-tls")
    else:
        print(f"note: kubectl 1.{minor.group(1)} has no kustomize Components (needs >= 1.21): "
              "components/tls NOT checked; the base and postgres-example are.")
    tdeps = by_kind(tls, "Deployment")
    for dname, service in (("kls-api", "kls.v1.Queries"), ("kls-worker", "kls.v1.Jobs")):
        if not components or not check(dname in tdeps, f"TLS component: no {dname}"):
            continue
        c = tdeps[dname]["spec"]["template"]["spec"]["containers"][0]
        args = c.get("args", [])
        check("--tls-cert" in args and "--tls-key" in args, f"TLS component: {dname} lacks --tls-cert/--tls-key")
        for which, want in (("livenessProbe", None), ("readinessProbe", service), ("startupProbe", None)):
            p = c.get(which, {})
            cmd = (p.get("exec") or {}).get("command", [])
            if check("grpc" not in p and cmd[:1] == ["kls"] and "health" in cmd and "--tls-ca" in cmd,
                     f"TLS component: {dname} {which} is not an exec `kls --tls-ca … health` "
                     "(the kubelet's grpc probe cannot speak TLS)"):
                got = cmd[cmd.index("--service") + 1] if "--service" in cmd else None
                check(got == want, f"TLS component: {dname} {which} service {got!r}, want {want!r}")

    # --- postgres-example (its own kustomization, not in the base) ---
    base_kust = yaml.safe_load(open(os.path.join(K8S, "kustomization.yaml")))
    check(not any("postgres" in r for r in base_kust.get("resources", [])),
          "postgres-example must not be in the base's resources")
    pg = kustomize(os.path.join(K8S, "postgres-example"))
    sts = by_kind(pg, "StatefulSet")
    pg_svcs = by_kind(pg, "Service")
    check(len(sts) == 1, f"postgres-example: {len(sts)} StatefulSets, want 1")
    if check("kls-postgres" in pg_svcs, "postgres-example: no Service kls-postgres (the store URI's host)"):
        for s in sts.values():
            check(selects(pg_svcs["kls-postgres"]["spec"]["selector"], s["spec"]["template"]["metadata"]["labels"]),
                  "postgres-example: Service kls-postgres does not select the StatefulSet's pods")
            check(any(p.get("port") == 5432 for p in pg_svcs["kls-postgres"]["spec"]["ports"]),
                  "postgres-example: Service kls-postgres has no port 5432")
            env = {e["name"]: e for e in s["spec"]["template"]["spec"]["containers"][0].get("env", [])}
            ref = (env.get("POSTGRES_PASSWORD", {}).get("valueFrom") or {}).get("secretKeyRef", {})
            check(ref.get("name") in secrets and ref.get("key") in secrets[ref["name"]].get("stringData", {}),
                  "postgres-example: POSTGRES_PASSWORD is not the base's kls-db Secret")
    return finish("deploy/k8s")


# ---- docker compose --------------------------------------------------------

def check_compose():
    path = os.path.join(ROOT, "deploy", "docker-compose.yml")
    try:
        doc = yaml.safe_load(open(path))
    except yaml.YAMLError as e:
        print(f"FAIL: {path} is not valid YAML: {e}", file=sys.stderr)
        return 1
    services = doc.get("services", {})
    declared = set((doc.get("volumes") or {}).keys())
    # Default (no profile): the single-node server on its own data volume.
    default = [n for n, s in services.items() if not s.get("profiles")]
    check(default == ["kls"], f"services without a profile: {default}, want only kls")
    if "kls" in services:
        check("--store" not in " ".join(map(str, services["kls"].get("command", []))),
              "the default kls service must keep the embedded store")
    replicas = {n: s for n, s in services.items() if "replicas" in (s.get("profiles") or [])}
    pgs = [n for n, s in replicas.items() if str(s.get("image", "")).startswith("postgres")]
    kls = {n: s for n, s in replicas.items() if n not in pgs}
    check(len(pgs) == 1, f"profile replicas: {len(pgs)} postgres services, want 1")
    check(len(kls) >= 3, f"profile replicas: {len(kls)} kls-server replicas, want 3")
    host_ports, cache_volumes = [], []
    for n, s in services.items():
        for v in s.get("volumes", []):
            src = str(v).split(":", 1)[0]
            if not src.startswith((".", "/")):
                check(src in declared, f"{n}: named volume {src!r} is not declared under volumes:")
        for p in s.get("ports", []):
            host_ports.append(str(p).rsplit(":", 1)[0])
    for n, s in kls.items():
        cmd = [str(x) for x in s.get("command", [])]
        flags = dict(zip(cmd[1::2], cmd[2::2]))
        check(cmd[:1] == ["kls-server"], f"{n}: command does not start kls-server")
        store = flags.get("--store", "")
        if pgs:
            check(re.match(rf"postgresql://\w+@{pgs[0]}:5432/\w+$", store),
                  f"{n}: --store {store!r} does not point at the {pgs[0]} service")
        check(flags.get("--role") in ROLES, f"{n}: --role {flags.get('--role')!r}")
        check("PGPASSWORD" in (s.get("environment") or {}), f"{n}: no PGPASSWORD")
        check(pgs and pgs[0] in (s.get("depends_on") or {}), f"{n}: does not depend on postgres")
        cache = flags.get("--cache-dir", "")
        vols = [str(v).split(":") for v in s.get("volumes", [])]
        owning = [v[0] for v in vols if len(v) >= 2 and (cache == v[1] or cache.startswith(v[1].rstrip("/") + "/"))]
        if check(owning, f"{n}: --cache-dir {cache!r} is not on a volume"):
            cache_volumes.append(owning[0])
    check(len(cache_volumes) == len(set(cache_volumes)), f"replicas share a cache volume: {cache_volumes}")
    check(len(host_ports) == len(set(host_ports)), f"host ports collide: {host_ports}")
    return finish("deploy/docker-compose.yml")


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else ""
    if what == "k8s":
        sys.exit(check_k8s())
    if what == "compose":
        sys.exit(check_compose())
    print(__doc__, file=sys.stderr)
    sys.exit(2)
