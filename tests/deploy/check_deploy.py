#!/usr/bin/python3
"""check_deploy.py SRC_DIR BIN_DIR: the static check of everything under deploy/ that CI cannot run.

- deploy/systemd/*.service: `systemd-analyze verify` (with ExecStart pointed at BIN_DIR's binaries;
  any warning fails), and what hv needs of them: Type=notify, WatchdogSec=, the head's sandbox
  (NoNewPrivileges, ProtectSystem=strict with its state directory writable), the agent's stop
  (KillMode=mixed, so SIGTERM reaches the agent alone, and TimeoutStopSec above the drain
  deadline plus the agent's own stop).
- deploy/k8s/*.yaml: every document has apiVersion, kind and metadata.name of a known kind; each
  workload's selector matches its pod labels; each container has an image, the head probes, ports
  that Services name exist; no Secret is inlined and no secret-looking variable has a literal
  value; every Secret and ConfigMap a pod uses is referenced by name; the head keeps its data on a
  volume claim; the agents' grace period covers their drain deadline and they drain in preStop.
- deploy/container/Containerfile.*: Debian 12 base (FROM or ARG BASE's default), installs the hv package, has an ENTRYPOINT.
Exit 0 when all hold, 1 with one line per problem, 77 without PyYAML.
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

try:
    import yaml
except ImportError:
    print("SKIP: python3-yaml is not installed")
    sys.exit(77)

SRC, BIN = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
problems = []


def problem(where, what):
    problems.append("%s: %s" % (os.path.relpath(where, SRC), what))


# ---- systemd units -------------------------------------------------------------------------------
def unit_keys(path):
    keys, section = {}, None
    for line in open(path):
        line = line.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        k, _, v = line.partition("=")
        keys.setdefault((section, k), []).append(v)
    return keys


def seconds(v):
    m = re.fullmatch(r"(\d+)(s|min)?", v)
    return None if m is None else int(m.group(1)) * (60 if m.group(2) == "min" else 1)


units = sorted(glob.glob(os.path.join(SRC, "deploy/systemd/*.service")))
if len(units) < 2:
    problem(os.path.join(SRC, "deploy/systemd"), "hvhead.service and hvagent.service expected")
for u in units:
    k = unit_keys(u)
    get = lambda key: (k.get(("Service", key)) or [None])[-1]
    if get("Type") != "notify":
        problem(u, "Type=notify expected (the daemons speak sd_notify)")
    if seconds(get("WatchdogSec") or "") is None:
        problem(u, "WatchdogSec= in seconds expected")
    if not (get("ExecStart") or "").startswith("/usr/bin/hv"):
        problem(u, "ExecStart= should run /usr/bin/hv*")
    if os.path.basename(u) == "hvhead.service":
        if get("NoNewPrivileges") != "yes":
            problem(u, "NoNewPrivileges=yes expected")
        if get("ProtectSystem") != "strict":
            problem(u, "ProtectSystem=strict expected")
        state = "/var/lib/" + (get("StateDirectory") or "?")
        if state not in (get("ReadWritePaths") or "").split():
            problem(u, "ReadWritePaths= must hold the state directory %s" % state)
        if "--data-dir " + state not in (get("ExecStart") or ""):
            problem(u, "ExecStart= must give --data-dir %s" % state)
    if os.path.basename(u) == "hvagent.service":
        if get("KillMode") != "mixed":
            problem(u, "KillMode=mixed expected: SIGTERM to the agent alone starts the drain")
        env = dict(e.split("=", 1) for v in k.get(("Service", "Environment"), [])
                   for e in v.split() if "=" in e)
        deadline = seconds(env.get("HV_DRAIN_DEADLINE", ""))
        stop = seconds(get("TimeoutStopSec") or "")
        if deadline is None or stop is None or stop < deadline + 10:
            problem(u, "TimeoutStopSec (%s) must exceed HV_DRAIN_DEADLINE (%s) by 10 s or more"
                    % (stop, deadline))

analyze = shutil.which("systemd-analyze")
if analyze is None:
    print("note: systemd-analyze not installed; units checked structurally only")
elif units:
    with tempfile.TemporaryDirectory() as d:
        for u in units:
            text = open(u).read().replace("/usr/bin/hv", os.path.join(BIN, "hv"))
            open(os.path.join(d, os.path.basename(u)), "w").write(text)
        p = subprocess.run([analyze, "verify"] + sorted(glob.glob(d + "/*.service")),
                           capture_output=True, text=True, timeout=60)
        out = (p.stdout + p.stderr).strip()
        if p.returncode != 0 or out:
            problem(os.path.join(SRC, "deploy/systemd"), "systemd-analyze verify: " +
                    out.replace(d + "/", "").replace("\n", " | "))

# ---- Kubernetes manifests ------------------------------------------------------------------------
KNOWN = {("v1", "Namespace"), ("v1", "ConfigMap"), ("v1", "Service"), ("v1", "Secret"),
         ("apps/v1", "StatefulSet"), ("apps/v1", "Deployment")}
SECRETISH = re.compile(r"TOKEN|SECRET|PASSWORD|KEY", re.I)
docs = []
for f in sorted(glob.glob(os.path.join(SRC, "deploy/k8s/*.yaml"))):
    try:
        for d in yaml.safe_load_all(open(f)):
            if d is not None:
                docs.append((f, d))
    except yaml.YAMLError as e:
        problem(f, "not YAML: %s" % str(e).replace("\n", " "))
if not docs:
    problem(os.path.join(SRC, "deploy/k8s"), "no manifests")
configmaps = {d["metadata"]["name"] for _, d in docs if d.get("kind") == "ConfigMap"}
workloads = {}
for f, d in docs:
    kind, api, meta = d.get("kind"), d.get("apiVersion"), d.get("metadata") or {}
    if (api, kind) not in KNOWN:
        problem(f, "unknown apiVersion/kind %s/%s" % (api, kind))
        continue
    if not meta.get("name"):
        problem(f, "%s without metadata.name" % kind)
    if kind != "Namespace" and meta.get("namespace") != "hv":
        problem(f, "%s %s: namespace hv expected" % (kind, meta.get("name")))
    if kind == "Secret":
        problem(f, "Secret %s is inlined: create it with kubectl, reference it by name"
                % meta.get("name"))
    if kind in ("StatefulSet", "Deployment"):
        spec = d.get("spec") or {}
        tmpl = spec.get("template") or {}
        labels = (tmpl.get("metadata") or {}).get("labels") or {}
        sel = (spec.get("selector") or {}).get("matchLabels") or {}
        if not sel or any(labels.get(k) != v for k, v in sel.items()):
            problem(f, "%s %s: selector does not match the pod labels" % (kind, meta.get("name")))
        pod = tmpl.get("spec") or {}
        workloads[meta.get("name")] = (f, kind, spec, pod, labels)
        vols = {v["name"]: v for v in pod.get("volumes") or []}
        for v in vols.values():
            if "secret" in v and not v["secret"].get("secretName"):
                problem(f, "volume %s: a secret volume must name its Secret" % v["name"])
            if "configMap" in v and v["configMap"].get("name") not in configmaps:
                problem(f, "volume %s: ConfigMap %s is not defined" % (v["name"], v["configMap"].get("name")))
        claims = {c["metadata"]["name"] for c in spec.get("volumeClaimTemplates") or []}
        for c in pod.get("containers") or []:
            where = "%s %s container %s" % (kind, meta.get("name"), c.get("name"))
            if not c.get("image"):
                problem(f, where + ": no image")
            for e in c.get("env") or []:
                if SECRETISH.search(e.get("name", "")) and "value" in e:
                    problem(f, where + ": %s has a literal value; use valueFrom.secretKeyRef" % e["name"])
            for m in c.get("volumeMounts") or []:
                if m["name"] not in vols and m["name"] not in claims:
                    problem(f, where + ": mounts undefined volume %s" % m["name"])
            text = yaml.safe_dump(c)
            if re.search(r"--token\s|HV_TOKEN=|token: [0-9a-f]{16,}", text):
                problem(f, where + ": a token on the command line or inline")
# The head: a persistent data directory and probes; the agents: a drain that fits the grace period.
head = workloads.get("hvhead")
if head is None:
    problem(os.path.join(SRC, "deploy/k8s"), "no hvhead StatefulSet")
else:
    f, kind, spec, pod, _ = head
    claims = {c["metadata"]["name"] for c in spec.get("volumeClaimTemplates") or []}
    c = (pod.get("containers") or [{}])[0]
    mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts") or []}
    if kind != "StatefulSet" or mounts.get("/var/lib/hv") not in claims:
        problem(f, "hvhead: /var/lib/hv must be a volumeClaimTemplate of a StatefulSet")
    if "--data-dir" not in (c.get("args") or []) or "/var/lib/hv" not in (c.get("args") or []):
        problem(f, "hvhead: args must give --data-dir /var/lib/hv")
    if not c.get("readinessProbe") or not c.get("livenessProbe"):
        problem(f, "hvhead: readinessProbe and livenessProbe expected")
    ports = {p.get("name") for p in c.get("ports") or []}
    for fs, d in docs:
        if d.get("kind") == "Service":
            for p in d["spec"].get("ports") or []:
                if isinstance(p.get("targetPort"), str) and p["targetPort"] not in ports:
                    problem(fs, "Service %s: targetPort %s is no container port"
                            % (d["metadata"]["name"], p["targetPort"]))
agent = workloads.get("hvagent")
if agent is None:
    problem(os.path.join(SRC, "deploy/k8s"), "no hvagent Deployment")
else:
    f, kind, spec, pod, _ = agent
    c = (pod.get("containers") or [{}])[0]
    args = c.get("args") or []
    deadline = int(args[args.index("--drain-deadline") + 1]) if "--drain-deadline" in args else None
    grace = pod.get("terminationGracePeriodSeconds")
    if kind != "Deployment" or deadline is None or grace is None or grace < deadline + 10:
        problem(f, "hvagent: terminationGracePeriodSeconds (%s) must exceed --drain-deadline "
                "(%s) by 10 s or more" % (grace, deadline))
    pre = ((c.get("lifecycle") or {}).get("preStop") or {}).get("exec", {}).get("command") or []
    if "drain" not in pre:
        problem(f, "hvagent: preStop should run `hvagent drain`")

# The command provider's pod (deploy/providers/kubernetes/launch.sh): the same drain contract.
launch = os.path.join(SRC, "deploy/providers/kubernetes/launch.sh")
if os.path.exists(launch):
    m = re.search(r"<<POD\n(.*?)\nPOD\n", open(launch).read(), re.S)
    text = re.sub(r"\$\{[A-Z0-9_]+:-([^}]*)\}", r"\1", m.group(1) if m else "")
    text = re.sub(r"\$[a-zA-Z_]+", "x", text)
    try:
        pod = (yaml.safe_load(text) or {}).get("spec") or {}
    except yaml.YAMLError as e:
        pod = {}
        problem(launch, "its pod is not YAML: %s" % str(e).replace("\n", " "))
    c = (pod.get("containers") or [{}])[0]
    cmd = c.get("command") or []
    deadline = int(cmd[cmd.index("--drain-deadline") + 1]) if "--drain-deadline" in cmd else None
    grace = pod.get("terminationGracePeriodSeconds")
    if deadline is None or grace is None or grace < deadline + 10:
        problem(launch, "terminationGracePeriodSeconds (%s) must exceed --drain-deadline (%s) by "
                "10 s or more" % (grace, deadline))
    if "drain" not in (((c.get("lifecycle") or {}).get("preStop") or {}).get("exec") or {}).get(
            "command", []):
        problem(launch, "the pod should run `hvagent drain` in preStop")

# ---- Containerfiles ------------------------------------------------------------------------------
for name in ("Containerfile.head", "Containerfile.agent"):
    p = os.path.join(SRC, "deploy/container", name)
    if not os.path.exists(p):
        problem(p, "missing")
        continue
    text = open(p).read()
    # FROM debian:12..., or FROM ${BASE} whose ARG default is one (build.sh passes a local base).
    base = re.search(r"^ARG BASE=(\S+)", text, re.M)
    if not (re.search(r"^FROM \S*debian:(12|bookworm)\S*", text, re.M) or (
            base and re.search(r"debian:(12|bookworm)", base.group(1))
            and re.search(r"^FROM \$\{?BASE\}?\s*$", text, re.M))):
        problem(p, "FROM a Debian 12 image expected (or FROM ${BASE} with ARG BASE=debian:12...)")
    if "/tmp/pkgs/hv_" not in text:
        problem(p, "should install the hv package that cpack builds")
    if not re.search(r"^ENTRYPOINT \[\"/usr/bin/hv", text, re.M):
        problem(p, "ENTRYPOINT [\"/usr/bin/hv...\"] expected")
    if not re.search(r"^USER [1-9]", text, re.M):
        problem(p, "should run as a non-root USER")

for line in problems:
    print("FAIL " + line)
if problems:
    sys.exit(1)
print("PASS deploy/: %d units, %d manifests, 2 Containerfiles" % (len(units), len(docs)))
