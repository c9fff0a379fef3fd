#!/usr/bin/python3
"""Checks the deployment files without a cluster or a Docker engine.

  check_deploy.py k8s      render deploy/k8s (base), its TLS component and
                           deploy/k8s/postgres-example with `kubectl kustomize`
                           and check the objects (Deployments, probes, drain,
                           Services, PDBs, ConfigMap, Secrets, securityContext,
                           metrics port and scrape annotations, HPA,
                           NetworkPolicies, ephemeral storage), and the
                           servicemonitor, backup-cronjob and
                           migration-job components
  check_deploy.py compose  parse deploy/docker-compose.yml and check the
                           default service and the `replicas` profile

Run with Debian's /usr/bin/python3 (python3-yaml, installed by
deploy/install-deps.sh). Exit 0 = pass, 1 = fail, 77 = skipped: no kubectl on
PATH (CTest reports the test as skipped). deploy/install-deps.sh installs
Debian's kubernetes-client (kubectl 1.20, kustomize v2) when no kubectl is on
PATH; it renders the base and postgres-example, but not kustomize Components
(kubectl >= 1.21), so with it the TLS and servicemonitor components' checks
are skipped, saying so.
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
# Config-file keys kls-server knows (server/server_config.cc, kKnownKeys and
# ApplyConfigText); check_known_keys() compares this list with that file.
KNOWN_KEYS = {
    "listen", "data_dir", "workers", "log_level", "max_message_mb", "kernel_cache_mb",
    "tls_cert_file", "tls_key_file", "tls_client_ca_file", "tokens_file",
    "store", "role", "cache_dir", "cache_disk_mb", "lease_seconds", "checkpoint_seconds",
    "max_attempts", "max_lost_attempts", "metrics_listen", "log_format",
    "http_listen", "http_cors_origins", "http_threads", "access_log",
    "backup_dir",
}
SERVER_CONFIG = os.path.join(ROOT, "server", "server_config.cc")
METRICS_PATH = "/metrics"
PG_PORT = 5432
DNS_PORT = 53
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


def check_known_keys():
    """KNOWN_KEYS == the keys server/server_config.cc accepts (skipped without the file)."""
    try:
        text = open(SERVER_CONFIG).read()
    except OSError:
        print(f"note: {SERVER_CONFIG} not readable: KNOWN_KEYS not compared with it")
        return
    m = re.search(r'kKnownKeys\s*=\s*((?:\s*"[^"]*")+)', text)
    listed = set()
    if check(m, "server/server_config.cc: kKnownKeys not found"):
        listed = {k.strip() for k in "".join(re.findall(r'"([^"]*)"', m.group(1))).split(",") if k.strip()}
    parsed = set(re.findall(r'key == "(\w+)"', text))
    for what, keys in (("kKnownKeys", listed), ("ApplyConfigText", parsed)):
        check(keys == KNOWN_KEYS, f"check_deploy.py KNOWN_KEYS differs from server_config.cc {what}: "
              f"missing {sorted(keys - KNOWN_KEYS)}, extra {sorted(KNOWN_KEYS - keys)}")


def listen_port(address):
    """HOST:PORT or [V6]:PORT -> int port, or None."""
    m = re.search(r":(\d+)$", address or "")
    return int(m.group(1)) if m else None


def container_port(c, name):
    return next((p.get("containerPort") for p in c.get("ports", []) if p.get("name") == name), None)


def port_number(port, containers):
    """A NetworkPolicy/Service port (number or container-port name) -> number."""
    if isinstance(port, int):
        return port
    for c in containers:
        n = container_port(c, port)
        if n is not None:
            return n
    return port


def rule_allows(rule, port, protocol, containers, direction):
    """One ingress/egress rule lets `port/protocol` through (from/to anyone or someone)."""
    ports = rule.get("ports")
    if not ports:
        return True
    for p in ports:
        if p.get("protocol", "TCP") != protocol:
            continue
        if "port" not in p:
            return True
        lo = port_number(p["port"], containers if direction == "ingress" else [])
        hi = p.get("endPort", lo)
        if isinstance(lo, int) and lo <= port <= hi:
            return True
    return False


def policy_allows(policies, direction, port, protocol, containers):
    """Policies selecting one pod: is `port` allowed in `direction`? None = not restricted."""
    typed = [p for p in policies
             if direction.capitalize() in p["spec"].get("policyTypes",
                                                         ["Ingress"] + (["Egress"] if "egress" in p["spec"] else []))]
    if not typed:
        return None
    return any(rule_allows(r, port, protocol, containers, direction)
               for p in typed for r in p["spec"].get(direction) or [])


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

    # Metrics: the conf's metrics_listen port, exposed as `metrics`, announced by annotations.
    metrics_port = listen_port(flags.get("--metrics-listen", conf.get("metrics_listen")))
    if check(metrics_port, f"{name}: metrics_listen not set (flag or {config_file}): no Prometheus metrics"):
        check(container_port(c, "metrics") == metrics_port,
              f"{name}: containerPort `metrics` {container_port(c, 'metrics')} != metrics_listen port {metrics_port}")
        ann = spec["template"]["metadata"].get("annotations") or {}
        for key, want in (("prometheus.io/scrape", "true"), ("prometheus.io/port", str(metrics_port)),
                          ("prometheus.io/path", METRICS_PATH)):
            check(ann.get(key) == want, f"{name}: pod annotation {key} = {ann.get(key)!r}, want {want!r}")
    # HTTP/JSON API: on the api pods only, exposed as `http`.
    http = flags.get("--http-listen", conf.get("http_listen", ""))
    if role == "api":
        if check(listen_port(http), f"{name}: no --http-listen HOST:PORT (HTTP/JSON API and console)"):
            check(container_port(c, "http") == listen_port(http),
                  f"{name}: containerPort `http` {container_port(c, 'http')} != --http-listen port {listen_port(http)}")
    else:
        check(not http, f"{name}: serves the HTTP API ({http!r}); only kls-api should")
    # Ephemeral storage: every emptyDir bounded, the requests cover their sum.
    empty = {v["name"]: v["emptyDir"] for v in pod.get("volumes", []) if "emptyDir" in v}
    total = 0.0
    for vname, ed in empty.items():
        if check((ed or {}).get("sizeLimit"), f"{name}: emptyDir {vname} has no sizeLimit"):
            total += quantity(ed["sizeLimit"])
    req = sum(quantity(x.get("resources", {}).get("requests", {}).get("ephemeral-storage", 0)) for x in containers)
    lim = [x.get("resources", {}).get("limits", {}).get("ephemeral-storage") for x in containers]
    check(req >= total, f"{name}: ephemeral-storage requests {req / 2**20:.0f}Mi < the emptyDirs' sizeLimits "
          f"{total / 2**20:.0f}Mi (the scheduler would overcommit the node's disk)")
    if check(all(lim), f"{name}: resources.limits.ephemeral-storage missing"):
        check(sum(quantity(x) for x in lim) >= req, f"{name}: ephemeral-storage limit below its request")
    # The cache's own budget below its emptyDir (else the kubelet evicts the pod when it fills).
    cache_path = flags.get("--cache-dir", conf.get("cache_dir"))
    cache_vol = mounts.get(cache_path, {}).get("emptyDir") or {}
    budget = flags.get("--cache-disk-mb", conf.get("cache_disk_mb", "0"))
    if cache_vol.get("sizeLimit") and check(budget.isdigit() and int(budget) > 0,
                                            f"{name}: cache_disk_mb {budget!r}: unbounded cache on a "
                                            f"{cache_vol['sizeLimit']} emptyDir"):
        check(int(budget) * 2**20 < quantity(cache_vol["sizeLimit"]),
              f"{name}: cache_disk_mb {budget} MiB does not fit the cache emptyDir ({cache_vol['sizeLimit']})")

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


def check_hpa(hpas, deps):
    api = deps.get("kls-api")
    targeting = {n: h for n, h in hpas.items()
                 if h["spec"].get("scaleTargetRef", {}).get("kind") == "Deployment"
                 and h["spec"]["scaleTargetRef"].get("name") == "kls-api"}
    check(len(targeting) == 1, f"{len(targeting)} HorizontalPodAutoscalers target Deployment kls-api, want 1")
    for n, h in hpas.items():
        ref = h["spec"].get("scaleTargetRef", {})
        check(ref.get("kind") == "Deployment" and ref.get("name") in deps,
              f"HPA {n}: scaleTargetRef {ref} is not a Deployment of the render")
        check(h.get("apiVersion") == "autoscaling/v2", f"HPA {n}: apiVersion {h.get('apiVersion')}, want autoscaling/v2")
    for n, h in targeting.items():
        spec = h["spec"]
        check(spec["scaleTargetRef"].get("apiVersion") == "apps/v1", f"HPA {n}: scaleTargetRef apiVersion not apps/v1")
        if api:
            check(spec.get("minReplicas") == api["spec"].get("replicas"),
                  f"HPA {n}: minReplicas {spec.get('minReplicas')} != kls-api replicas {api['spec'].get('replicas')}")
        check(isinstance(spec.get("maxReplicas"), int) and spec["maxReplicas"] > (spec.get("minReplicas") or 1),
              f"HPA {n}: maxReplicas {spec.get('maxReplicas')} not above minReplicas")
        cpu = [m for m in spec.get("metrics", []) if m.get("type") == "Resource"
               and m.get("resource", {}).get("name") == "cpu"]
        if check(cpu, f"HPA {n}: no CPU resource metric"):
            target = cpu[0]["resource"].get("target", {})
            check(target.get("type") == "Utilization" and 0 < target.get("averageUtilization", 0) <= 100,
                  f"HPA {n}: CPU target {target} is not a utilization in (0, 100]")
        down = spec.get("behavior", {}).get("scaleDown", {})
        check(down.get("stabilizationWindowSeconds", 0) >= 300,
              f"HPA {n}: scale-down stabilization {down.get('stabilizationWindowSeconds')} s < 300 s (warm caches)")
        check(any(p.get("type") == "Pods" and p.get("value") == 1 for p in down.get("policies", [])),
              f"HPA {n}: no scale-down policy of 1 pod per period")
    if api:
        c = api["spec"]["template"]["spec"]["containers"][0]
        check("cpu" in c.get("resources", {}).get("requests", {}),
              "kls-api: no CPU request, so the HPA's CPU utilization is undefined")


def check_network_policies(policies, deps):
    check(policies, "no NetworkPolicy in the base")
    pods = {d: (o["spec"]["template"]["metadata"].get("labels", {}), o["spec"]["template"]["spec"]["containers"])
            for d, o in deps.items()}
    for n, p in policies.items():
        sel = p["spec"].get("podSelector", {})
        check(not sel.get("matchExpressions"), f"NetworkPolicy {n}: matchExpressions not checked here; use matchLabels")
        check(sel.get("matchLabels") and any(selects(sel["matchLabels"], l) for l, _ in pods.values()),
              f"NetworkPolicy {n}: podSelector {sel} selects no kls pod of the render")
    for d, (labels, containers) in pods.items():
        mine = [p for p in policies.values() if selects(p["spec"].get("podSelector", {}).get("matchLabels"), labels)]
        if not check(mine, f"{d}: no NetworkPolicy selects its pods"):
            continue
        c = containers[0]
        wanted = [("ingress", container_port(c, "metrics"), "TCP", "metrics (Prometheus)")]
        if d == "kls-api":
            wanted += [("ingress", PORT, "TCP", "grpc (clients)"),
                       ("ingress", container_port(c, "http"), "TCP", "http (clients)")]
        wanted += [("egress", PG_PORT, "TCP", "PostgreSQL"), ("egress", DNS_PORT, "UDP", "DNS"),
                   ("egress", DNS_PORT, "TCP", "DNS over TCP")]
        for direction, port, proto, what in wanted:
            if port is None:
                continue
            got = policy_allows(mine, direction, port, proto, containers)
            check(got is not False, f"{d}: NetworkPolicies drop {direction} {port}/{proto} ({what})")
            check(got is not None, f"{d}: no NetworkPolicy restricts {direction} (expected an explicit allow list)")
        # Metrics (no token) from named peers (Prometheus), never from everyone.
        for p in mine:
            for r in p["spec"].get("ingress") or []:
                if rule_allows(r, container_port(c, "metrics") or 0, "TCP", containers, "ingress"):
                    check(r.get("from"), f"NetworkPolicy {p['metadata']['name']}: a rule opens {d}'s metrics "
                          "port to every source; allow Prometheus' pods only")


def check_component(name):
    """Render base + components/NAME through a throwaway overlay outside the base."""
    with tempfile.TemporaryDirectory() as tmp:
        rel = os.path.relpath(K8S, tmp)
        with open(os.path.join(tmp, "kustomization.yaml"), "w") as f:
            f.write(f"resources: [{rel}]\ncomponents: [{rel}/components/{name}]\n")
        return kustomize(tmp)


def check_servicemonitor(components, minor, svcs, deps):
    if not components:
        print(f"note: kubectl 1.{minor} has no kustomize Components (needs >= 1.21): "
              "components/servicemonitor NOT checked.")
        return
    objs = check_component("servicemonitor")
    sms = [o for o in objs if o.get("kind") == "ServiceMonitor"]
    if not check(len(sms) == 1, f"servicemonitor component: {len(sms)} ServiceMonitors, want 1"):
        return
    sm = sms[0]
    check(sm.get("apiVersion") == "monitoring.coreos.com/v1",
          f"ServiceMonitor: apiVersion {sm.get('apiVersion')}, want monitoring.coreos.com/v1")
    sel = sm["spec"].get("selector", {}).get("matchLabels", {})
    chosen = [n for n, s in by_kind(objs, "Service").items() if selects(sel, s["metadata"].get("labels", {}))]
    check(chosen == ["kls-metrics"], f"ServiceMonitor selects Services {chosen}, want only kls-metrics")
    svc_ports = {p.get("name") for p in svcs.get("kls-metrics", {}).get("spec", {}).get("ports", [])}
    eps = sm["spec"].get("endpoints", [])
    check(eps and all(e.get("port") in svc_ports for e in eps),
          f"ServiceMonitor endpoints {[e.get('port') for e in eps]} are not ports of kls-metrics {sorted(svc_ports)}")
    check(all(e.get("path", METRICS_PATH) == METRICS_PATH and e.get("interval") for e in eps),
          "ServiceMonitor: an endpoint without an interval or not on /metrics")
    # The component changes nothing else.
    check(set(by_kind(objs, "Deployment")) == set(deps), "servicemonitor component: Deployments differ from the base")


def check_backup_cronjob(components, minor, deps):
    """components/backup-cronjob: a CronJob that runs `kls ... backup` with an admin token from a Secret."""
    if not components:
        print(f"note: kubectl 1.{minor} has no kustomize Components (needs >= 1.21): "
              "components/backup-cronjob NOT checked.")
        return
    objs = check_component("backup-cronjob")
    jobs = by_kind(objs, "CronJob")
    if not check(list(jobs) == ["kls-backup"], f"backup-cronjob component: CronJobs {sorted(jobs)}, want kls-backup"):
        return
    spec = jobs["kls-backup"]["spec"]
    check(spec.get("concurrencyPolicy") == "Forbid", "CronJob kls-backup: concurrencyPolicy is not Forbid")
    pod = spec["jobTemplate"]["spec"]["template"]["spec"]
    check(pod.get("restartPolicy") in ("Never", "OnFailure"), "CronJob kls-backup: restartPolicy")
    containers = pod.get("containers", [])
    if not check(len(containers) == 1, "CronJob kls-backup: want one container"):
        return
    c = containers[0]
    cmd = c.get("command", []) + c.get("args", [])
    check(cmd[:1] == ["kls"] and cmd[-1:] == ["backup"] and "--target" in cmd,
          f"CronJob kls-backup: command {cmd} is not `kls --target ... backup`")
    env = {e["name"]: e for e in c.get("env", [])}
    ref = ((env.get("KLS_TOKEN") or {}).get("valueFrom") or {}).get("secretKeyRef") or {}
    check(bool(ref.get("name")) and bool(ref.get("key")), "CronJob kls-backup: KLS_TOKEN does not come from a Secret")
    psc, csc = pod.get("securityContext", {}), c.get("securityContext", {})
    check(psc.get("runAsNonRoot") is True, "CronJob kls-backup: runAsNonRoot not set")
    check(csc.get("readOnlyRootFilesystem") is True and csc.get("allowPrivilegeEscalation") is False,
          "CronJob kls-backup: container securityContext not locked down")
    check(c.get("resources", {}).get("limits"), "CronJob kls-backup: no resource limits")
    labels = jobs["kls-backup"]["spec"]["jobTemplate"]["spec"]["template"]["metadata"].get("labels", {})
    check(labels.get("app.kubernetes.io/name") != "kls",
          "CronJob kls-backup: its pods must not carry app.kubernetes.io/name=kls (Service kls-metrics selects those)")
    check(set(by_kind(objs, "Deployment")) == set(deps), "backup-cronjob component: Deployments differ from the base")


def check_migration_job(components, minor, deps):
    """components/migration-job: a Job running `kls-server --config ... --migrate-only` with the Deployments'
    ConfigMap and database password."""
    if not components:
        print(f"note: kubectl 1.{minor} has no kustomize Components (needs >= 1.21): "
              "components/migration-job NOT checked.")
        return
    objs = check_component("migration-job")
    jobs = by_kind(objs, "Job")
    if not check(list(jobs) == ["kls-migrate"], f"migration-job component: Jobs {sorted(jobs)}, want kls-migrate"):
        return
    pod = jobs["kls-migrate"]["spec"]["template"]["spec"]
    c = pod["containers"][0]
    cmd = c.get("command", []) + c.get("args", [])
    check(cmd[:1] == ["kls-server"] and "--migrate-only" in cmd and "--config" in cmd,
          f"Job kls-migrate: command {cmd} is not `kls-server --config ... --migrate-only`")
    env = {e["name"]: e for e in c.get("env", [])}
    ref = ((env.get("PGPASSWORD") or {}).get("valueFrom") or {}).get("secretKeyRef") or {}
    check(ref.get("name") == "kls-db", "Job kls-migrate: PGPASSWORD does not come from Secret kls-db")
    maps = {v["configMap"]["name"] for v in pod.get("volumes", []) if "configMap" in v}
    dep_maps = {v["configMap"]["name"] for d in by_kind(objs, "Deployment").values()
                for v in d["spec"]["template"]["spec"].get("volumes", []) if "configMap" in v}
    check(maps and maps <= dep_maps, f"Job kls-migrate: ConfigMaps {sorted(maps)} are not the Deployments' {sorted(dep_maps)}")
    check(pod.get("securityContext", {}).get("runAsNonRoot") is True, "Job kls-migrate: runAsNonRoot not set")
    check(c.get("securityContext", {}).get("readOnlyRootFilesystem") is True,
          "Job kls-migrate: readOnlyRootFilesystem not true")
    check(pod.get("restartPolicy") == "Never", "Job kls-migrate: restartPolicy is not Never (the Job retries)")
    labels = jobs["kls-migrate"]["spec"]["template"]["metadata"].get("labels", {})
    check(labels.get("app.kubernetes.io/name") != "kls",
          "Job kls-migrate: its pods must not carry app.kubernetes.io/name=kls (Service kls-metrics selects those)")
    check(set(by_kind(objs, "Deployment")) == set(deps), "migration-job component: Deployments differ from the base")


def check_k8s():
    if shutil.which("kubectl") is None:
        print("SKIPPED: kubectl is not on PATH, so `kubectl kustomize deploy/k8s` cannot be checked. "
              "Run `bash deploy/install-deps.sh` (installs Debian's kubernetes-client) or install kubectl.")
        return SKIP
    version = subprocess.run(["kubectl", "version", "--client", "-o", "yaml"], capture_output=True,
                             text=True, timeout=60)
    minor = re.search(r"minor: \W?(\d+)", version.stdout)
    components = minor is None or int(minor.group(1)) >= 21   # kustomize >= 3.7 inside kubectl

    check_known_keys()
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
        headless = [n for n, s in svcs.items() if s["spec"].get("clusterIP") == "None" and n != "kls-metrics"]
        clusterip = [n for n, s in svcs.items() if s["spec"].get("clusterIP") != "None"
                     and s["spec"].get("type", "ClusterIP") == "ClusterIP"]
        check(headless, "no headless Service (clusterIP: None)")
        check(clusterip, "no ClusterIP Service")
        client_svcs = {n: s for n, s in svcs.items() if n != "kls-metrics"}
        if check("kls-metrics" in svcs, "no Service kls-metrics (headless, every kls pod, port metrics)"):
            ms = svcs["kls-metrics"]["spec"]
            sel = ms.get("selector", {})
            check(ms.get("clusterIP") == "None", "Service kls-metrics is not headless")
            check(selects(sel, api_labels) and selects(sel, worker_labels),
                  "Service kls-metrics does not select both the kls-api and kls-worker pods")
            mport = [p for p in ms.get("ports", []) if p.get("name") == "metrics"]
            check(mport and mport[0].get("targetPort") == "metrics",
                  "Service kls-metrics: no port `metrics` -> targetPort metrics")
        if check("kls-api" in svcs, "no Service kls-api"):
            check(any(p.get("name") == "http" and p.get("targetPort") in ("http", 8080)
                      for p in svcs["kls-api"]["spec"].get("ports", [])),
                  "Service kls-api: no port `http` -> the pods' http port (HTTP/JSON API and console)")
        for n, s in client_svcs.items():
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
        check_hpa(by_kind(objs, "HorizontalPodAutoscaler"), deps)
        check_network_policies(by_kind(objs, "NetworkPolicy"), deps)
    check_servicemonitor(components, minor.group(1) if minor else "?", svcs, deps)
    check_backup_cronjob(components, minor.group(1) if minor else "?", deps)
    check_migration_job(components, minor.group(1) if minor else "?", deps)

    # --- TLS component, through a throwaway overlay outside the base ---
    tls = []
    if components:
        tls = check_component("tls")
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
