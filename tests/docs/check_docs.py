#!/usr/bin/python3
"""check_docs.py SRC_DIR BIN_DIR: the docs name what the binaries accept, and only that.

Pure text checks, in seconds, between the sources' own tables and the user's documents
(README.md, docs/*.md) and the binaries' --help:

- head/config.c: every key of config_opts (and each node type key of config_type_keys) is in
  docs/configuration.md: in its "File layout" block, and under a heading (or, for the keys of
  autoscaler.spot_sim and of a node type, as a list item); no key in that block that the
  loader does not know.
- hvctl: every command of its table is in `hvctl --help` and in README.md or docs/*.md as
  `hvctl COMMAND`; every option its parser takes is in `hvctl --help`.
- hvsubmit, hvagent, hvhead: every option of their parsers' tables is in their --help, and in
  README.md or docs/*.md.
- head/services/metrics.c: every metric family is in docs/metrics.md, and every hv_* series
  docs/metrics.md names is one the head serves.
- docs/ARCHITECTURE.md names every .c/.h under head/, agent/, common/, worker_lib/,
  autoscaler/ (unit tests aside), and every module of the Python package.
- docs/ARCHITECTURE.md names every RPC of proto/hv.proto.
- docs/internals.md's sqlite schema names every table head/store/store.c creates and its
  user_version.
- docs/ARCHITECTURE.md stays a ten-minute read (at most 250 lines); its layer table is what the
  code includes (every production file's quoted includes resolve to a folder of its row); the
  circles it lists are the circles of the code (files that call each other in a loop: a call is
  a name one file defines at file scope and another uses), no more, no fewer.
- every HV_* environment variable the binaries and libhv read is in README.md or docs/*.md
  (test-only ones aside).
Exit 0 when all hold, 1 with one line per problem, 77 without PyYAML or without the binaries.
"""
import glob
import os
import re
import subprocess
import sys

try:
    import yaml
except ImportError:
    print("SKIP: python3-yaml is not installed")
    sys.exit(77)

SRC, BIN = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
problems = []


def problem(what):
    problems.append(what)


def read(rel):
    with open(os.path.join(SRC, rel), encoding="utf-8") as f:
        return f.read()


def table(src, start):
    """The text of the C initializer that starts at `start` (up to its closing '};')."""
    i = src.index(start)
    return src[i:src.index("};", i)]


def opt_rows(src, start):
    """(name, short) of each option of a common/opt.h table: {"name", 'x' or 0, HV_OPT_..."""
    return re.findall(r'\{"([a-z-]+)",\s*(0|\'.\'),\s*HV_OPT_', table(src, start))


def help_of(*argv):
    path = os.path.join(BIN, argv[0])
    out = subprocess.run([path] + list(argv[1:]), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         timeout=20, check=False)
    return out.stdout.decode("utf-8", "replace")


for b in ("hvhead", "hvagent", "hvsubmit", "hvctl"):
    if not os.access(os.path.join(BIN, b), os.X_OK):
        print("SKIP: %s is not built in %s" % (b, BIN))
        sys.exit(77)

DOCS = {"README.md": read("README.md")}
for p in sorted(glob.glob(os.path.join(SRC, "docs", "*.md"))):
    DOCS[os.path.relpath(p, SRC)] = read(os.path.relpath(p, SRC))
ALL_DOCS = "\n".join(DOCS.values())


def documented(word):
    return re.search(r"(?<![\w-])" + re.escape(word) + r"(?![\w-])", ALL_DOCS) is not None


# ---- config keys ---------------------------------------------------------------------------------
cfg_src = read("head/config.c")
keys = {}  # dotted name -> type
for sec, name, typ in re.findall(r'\{"([a-z_.]*)",\s*"([a-z_]+)",\s*(CFG_[A-Z0-9_]+)',
                                 table(cfg_src, "config_opts[] = {")):
    keys[(sec + "." if sec else "") + name] = typ
type_keys = re.findall(r'"([a-z_]+)"', table(cfg_src, "config_type_keys[] = {"))
if len(keys) < 20 or len(type_keys) < 5:
    problem("head/config.c: could not read config_opts/config_type_keys (%d, %d keys)" %
            (len(keys), len(type_keys)))
conf = DOCS["docs/configuration.md"]
m = re.search(r"^## File layout\n(?:(?!^#).)*?```yaml\n(.*?)^```", conf, re.M | re.S)
layout = set()
if m is None:
    problem("docs/configuration.md: no '## File layout' section with a yaml block")
else:
    def walk(d, prefix):
        for k, v in d.items():
            layout.add(prefix + k)
            if isinstance(v, dict) and k != "node_types":
                walk(v, prefix + k + ".")
    walk(yaml.safe_load(m.group(1)) or {}, "")
for k in sorted(layout - set(keys)):
    problem("docs/configuration.md: the File layout names '%s', which hvhead does not know" % k)
for k in sorted(set(keys) - layout - {"token"}):  # token: given there as a comment, "or token:"
    problem("docs/configuration.md: '%s' (head/config.c) is not in the File layout block" % k)
headings = set()
for h in re.findall(r"^#+ (.*)$", conf, re.M):
    headings.update(re.findall(r"`([a-z_.]+?):?`", h))


def section_text(heading_key):
    """The text under the heading that names heading_key, up to the next heading."""
    mm = re.search(r"^#+ [^\n]*`" + re.escape(heading_key) + r"`[^\n]*\n(.*?)(?=^#)", conf,
                   re.M | re.S)
    return mm.group(1) if mm else ""


for k, typ in sorted(keys.items()):
    leaf, parent = k.rsplit(".", 1)[-1], k.rsplit(".", 1)[0] if "." in k else ""
    if typ == "CFG_MAP":  # a section: its own heading, or headings of its keys
        ok = k in headings or any(h.startswith(k + ".") for h in headings)
    else:
        ok = (k in headings or any(h.startswith(".") and k.endswith(h) for h in headings) or
              re.search(r"^- [^\n]*`%s`" % re.escape(leaf), section_text(parent), re.M) is not None)
    if not ok:
        problem("docs/configuration.md: no heading (or list item under `%s`) for key '%s'" %
                (parent, k))
types_text = section_text("autoscaler.node_types")
for k in type_keys:
    if re.search(r"^\s*- [^\n]*`%s`" % re.escape(k), types_text, re.M) is None:
        problem("docs/configuration.md: node type key '%s' is not listed under "
                "`autoscaler.node_types`" % k)

# ---- hvctl ---------------------------------------------------------------------------------------
ctl_src = read("head/cli/hvctl.c") + read("head/cli/hvctl_actors.c")
ctl_help = help_of("hvctl", "--help")
cmds = re.findall(r'^\s*\{"([a-z -]+)",\s*"', table(ctl_src, "ctl_cmds[] = {"), re.M)
if len(cmds) < 10:
    problem("head/cli/hvctl.c: could not read ctl_cmds (%d commands)" % len(cmds))
# README's synopsis: "hvctl status | nodes | jobs | job ID | ..."
synopsis = set()
for line in re.findall(r"^hvctl (.*)$", DOCS["README.md"], re.M):
    for part in line.split("#")[0].split("|"):
        words = [w for w in part.split() if re.fullmatch(r"[a-z][a-z-]*", w)]
        synopsis.add(" ".join(words[:2]))
        synopsis.add(" ".join(words[:1]))
for c in cmds:
    if not re.search(r"^  " + re.escape(c) + r"\b", ctl_help, re.M):
        problem("hvctl --help: command '%s' is missing" % c)
    if not documented("hvctl " + c) and c not in synopsis:
        problem("README.md, docs/*.md: no 'hvctl %s'" % c)
ctl_opts = set(name for name, _ in opt_rows(ctl_src, "ctl_opts[] = {"))
if len(ctl_opts) < 20:
    problem("head/cli/hvctl.c: could not read ctl_opts (%d options)" % len(ctl_opts))
actor_help = help_of("hvctl", "actor", "create", "--help")
for o in sorted(ctl_opts):
    if "--" + o not in ctl_help and "--" + o not in actor_help:
        problem("hvctl --help (and hvctl actor create --help): option '--%s' is missing" % o)
    if not documented("--" + o):
        problem("README.md, docs/*.md: hvctl's option '--%s' is not named" % o)

# ---- hvsubmit ------------------------------------------------------------------------------------
sub_help = help_of("hvsubmit", "--help")
for name, short in opt_rows(read("head/cli/cli_common.c"), "submit_opts[] = {"):
    flag = ("-" if name == "np" else "--") + name
    if not re.search(r"(?<![\w-])" + re.escape(flag) + r"(?![\w-])", sub_help):
        problem("hvsubmit --help: option '%s' is missing" % flag)
    if short != "0" and "-" + short.strip("'") not in sub_help:
        problem("hvsubmit --help: option '-%s' is missing" % short.strip("'"))
    if not documented(flag):
        problem("README.md, docs/*.md: hvsubmit's option '%s' is not named" % flag)

# ---- hvagent -------------------------------------------------------------------------------------
agent_help = help_of("hvagent", "--help")
for name, _ in opt_rows(read("agent/config.c"), "agent_opts[] = {"):
    if name in ("help", "version"):
        continue
    if "--" + name not in agent_help:
        problem("hvagent --help: option '--%s' is missing" % name)
    if not documented("--" + name):
        problem("README.md, docs/*.md: hvagent's option '--%s' is not named" % name)

# ---- hvhead --------------------------------------------------------------------------------------
head_help = help_of("hvhead", "--help") + help_of("hvhead", "start", "--help")
head_src = read("head/main.c")
for flag in sorted("--" + name for name, _ in opt_rows(head_src, "head_opts[] = {")):
    if flag not in head_help:
        problem("hvhead --help: option '%s' is missing" % flag)
    if not documented(flag):
        problem("README.md, docs/*.md: hvhead's option '%s' is not named" % flag)
for c in ("start", "stop", "token", "backup"):
    if "hvhead " + c not in head_help or not documented("hvhead " + c):
        problem("hvhead %s: missing from hvhead --help or from the docs" % c)

# ---- metrics -------------------------------------------------------------------------------------
met_src = read("head/services/metrics.c")
families = set(re.findall(r'fam\(o, "(hv_[a-z0-9_]+)"', met_src))
families |= set(re.findall(r'\{"(hv_[a-z0-9_]+)",', met_src))
families |= set(re.findall(r'actor_pair\([^"]*"(hv_[a-z0-9_]+)"', met_src, re.S))
if len(families) < 20:
    problem("head/services/metrics.c: could not read the metric families (%d)" % len(families))
mdoc = DOCS["docs/metrics.md"]
listed = set(re.findall(r"^\| `(hv_[a-z0-9_]+)` \|", mdoc, re.M))
for f in sorted(families - listed):
    problem("docs/metrics.md: metric '%s' (head/services/metrics.c) is not in its tables" % f)
served = families | {f + s for f in families for s in ("_bucket", "_count", "_sum")}
for f in sorted(set(re.findall(r"\b(hv_[a-z0-9_]+)", mdoc)) - served):
    if f.endswith("_") or f in ("hv_state_commit",):  # hv_job_*_total; libhv's function
        continue
    problem("docs/metrics.md: names '%s', which the head does not serve" % f)

# ---- ARCHITECTURE.md ----------------------------------------------------------------------------
arch = DOCS["docs/ARCHITECTURE.md"]
named = set(re.findall(r"`([^`\n]+)`", arch))
globs = [n.rstrip("*") for n in named if n.endswith("*") and " " not in n]
for d in ("head", "agent", "common", "worker_lib", "autoscaler"):
    for path in sorted(glob.glob(os.path.join(SRC, d, "**", "*.[ch]"), recursive=True)):
        base = os.path.basename(path)
        stem = base[:-2]
        if stem.endswith("_test"):
            continue
        rel = os.path.relpath(path, SRC)
        if (base in named or stem in named or stem + ".[ch]" in named or rel in named or
                re.search(r"(?<![\w/])" + re.escape(base) + r"\b", arch) is not None or
                any(stem.startswith(g) for g in globs)):
            continue
        problem("docs/ARCHITECTURE.md: %s is not named" % rel)
for path in sorted(glob.glob(os.path.join(SRC, "worker_lib/python/hv/**/*.py"), recursive=True)):
    stem = os.path.basename(path)[:-3]
    if stem != "__init__" and stem not in named and stem + ".py" not in named:
        problem("docs/ARCHITECTURE.md: %s is not named" % os.path.relpath(path, SRC))

# ---- wire contract: every RPC of proto/hv.proto is named in ARCHITECTURE.md ---------------------
for r in re.findall(r"^\s*rpc ([A-Za-z]+)", read("proto/hv.proto"), re.M):
    if not re.search(r"\b%s\b" % r, arch):
        problem("docs/ARCHITECTURE.md: RPC %s (proto/hv.proto) is not named" % r)

# ---- sqlite schema: ARCHITECTURE.md's table of tables and its version --------------------------
store = read("head/store/store.c")
internals = DOCS["docs/internals.md"]
schema = internals[internals.index("## sqlite schema"):]
mv = re.search(r"HV_STORE_SCHEMA_VERSION (\d+)", read("head/store/store.h"))
if mv is None or "`PRAGMA user_version` = %s)" % mv.group(1) not in schema.split("\n")[0]:
    problem("docs/internals.md: the sqlite schema's heading does not give user_version = %s "
            "(head/store/store.h)" % (mv.group(1) if mv else "?"))
for t in sorted(set(re.findall(r"CREATE TABLE (?:IF NOT EXISTS )?([a-z_0-9]+)", store))):
    if re.fullmatch(r".*_v\d+", t):  # a migration's scratch copy
        continue
    if not re.search(r"^\| `%s` " % re.escape(t), schema, re.M):
        problem("docs/internals.md: sqlite table '%s' (head/store/store.c) is not in the "
                "schema table" % t)

# ---- ARCHITECTURE.md: length, layers, circles ----------------------------------------------------
if arch.count("\n") > 250:
    problem("docs/ARCHITECTURE.md: %d lines, more than 250 (move details to docs/internals.md)"
            % arch.count("\n"))

PROD_DIRS = ("common", "head", "agent", "autoscaler", "worker_lib")


def prod_files(exts=("c", "h")):
    """Production C files (relative paths): tests, fuzz targets and test helpers aside."""
    out = []
    for d in PROD_DIRS:
        for e in exts:
            for path in glob.glob(os.path.join(SRC, d, "**", "*." + e), recursive=True):
                rel = os.path.relpath(path, SRC)
                stem = os.path.basename(rel)[:-2]
                if stem.endswith("_test") or stem in ("hv_check", "serve_test", "hvtest"):
                    continue
                out.append(rel)
    return sorted(out)


def folder_of(rel):
    """The layer folder of a file: the longest folder of the layer table it lies in."""
    best = None
    for f in LAYERS:
        if f != "proto" and (rel.startswith(f) if f.endswith("/") else False):
            if best is None or len(f) > len(best):
                best = f
    if best == "head/" and "/" in rel[len("head/"):]:
        return None  # a head/ subfolder with no row
    return best


m = re.search(r"^layer +folder +includes headers of\n(.*?)^```", arch, re.M | re.S)
LAYERS = {}
if m is None:
    problem("docs/ARCHITECTURE.md: no layer table (a block headed 'layer folder includes headers "
            "of')")
else:
    for line in m.group(1).strip().split("\n"):
        cols = line.split()
        LAYERS[cols[1]] = set(cols[2:])
# each header's folders (a name may exist in more than one folder: agent/config.h, head/config.h)
hdr_dirs = {}
for rel in prod_files(("h",)) + glob.glob("**/*.h", root_dir=os.path.join(SRC, "tests/layers")):
    hdr_dirs.setdefault(os.path.basename(rel), set()).add(os.path.dirname(rel) + "/")
for rel in prod_files() if LAYERS else []:
    if rel.startswith("worker_lib/python"):
        continue
    row = folder_of(rel)
    if row is None:
        problem("docs/ARCHITECTURE.md: %s lies in no folder of the layer table" % rel)
        continue
    allowed = LAYERS[row]
    for inc in re.findall(r'^#\s*include "([^"]+)"', read(rel), re.M):
        base = os.path.basename(inc)
        if base.endswith(".pb-c.h"):
            if "proto" not in allowed:
                problem("docs/ARCHITECTURE.md: %s includes %s; its layer (%s) does not list "
                        "proto" % (rel, inc, row))
            continue
        here = os.path.normpath(os.path.join(os.path.dirname(rel), inc))
        dirs = {os.path.dirname(here) + "/"} if os.path.exists(os.path.join(SRC, here)) \
            else hdr_dirs.get(base, set())
        if not dirs:
            continue  # a system or generated header
        # the folder of the layer each candidate header lies in
        rows = {folder_of(d + base) or d for d in dirs}
        if not rows & allowed:
            problem("docs/ARCHITECTURE.md: %s includes %s (%s), which its layer %s does not "
                    "list" % (rel, inc, ", ".join(sorted(rows)), row))

# circles: a file calls another when it uses a name that the other alone defines at file scope
DEF_RE = re.compile(r"^(?:static\s+)?[A-Za-z_][\w \t\*]*?\b([A-Za-z_]\w*)\s*\([^;]*?\)\s*\{",
                    re.M | re.S)
unit_defs = {}
units = {}
for rel in prod_files(("c",)):
    src = read(rel)
    unit = rel[:-2]
    units[unit] = src
    for name in DEF_RE.findall(src):
        # static functions are the file's own
        if re.search(r"^static\b[^;{]*\b%s\s*\(" % re.escape(name), src, re.M):
            continue
        unit_defs.setdefault(name, set()).add(unit)
owner = {n: next(iter(u)) for n, u in unit_defs.items() if len(u) == 1}
edges = {u: set() for u in units}
for u, src in units.items():
    body = re.sub(r"/\*.*?\*/|//[^\n]*|\"(?:\\.|[^\"\\])*\"", " ", src, flags=re.S)
    for name in set(re.findall(r"\b([A-Za-z_]\w*)\s*\(", body)):
        v = owner.get(name)
        if v is not None and v != u:
            edges[u].add(v)
# strongly connected components (Tarjan, iterative)
index, low, onstack, stack, sccs, counter = {}, {}, set(), [], [], [0]
for root in sorted(edges):
    if root in index:
        continue
    work = [(root, iter(sorted(edges[root])))]
    index[root] = low[root] = counter[0]
    counter[0] += 1
    stack.append(root)
    onstack.add(root)
    while work:
        v, it = work[-1]
        nxt = next(it, None)
        if nxt is not None:
            if nxt not in index:
                index[nxt] = low[nxt] = counter[0]
                counter[0] += 1
                stack.append(nxt)
                onstack.add(nxt)
                work.append((nxt, iter(sorted(edges[nxt]))))
            elif nxt in onstack:
                low[v] = min(low[v], index[nxt])
            continue
        work.pop()
        if work:
            low[work[-1][0]] = min(low[work[-1][0]], low[v])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                onstack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                sccs.append(sorted(comp))
listed = re.search(r"No two production files call each other in a circle(.*?)\n\n", arch, re.S)
listed = listed.group(1) if listed else ""
for comp in sccs:
    if not all("`%s.c`" % u in listed for u in comp):
        problem("docs/ARCHITECTURE.md: a circle not listed: %s" % " <-> ".join(c + ".c" for c in comp))
for pair in re.findall(r"`([\w/]+)\.c` ↔ `([\w/]+)\.c`", listed):
    if not any(set(pair) <= set(comp) for comp in sccs):
        problem("docs/ARCHITECTURE.md: lists the circle %s.c <-> %s.c, which the code no longer has"
                % pair)

# ---- environment variables -----------------------------------------------------------------------
TEST_ONLY = {"HV_SRC_DIR", "HV_BIN_DIR", "HV_TEST_DEVICE", "HV_TEST_TIMEOUT_MULTIPLIER",
             "HV_GPUSIM_DEVICES"}
envs = set()
for d in ("head", "agent", "common", "worker_lib", "autoscaler"):
    for path in glob.glob(os.path.join(SRC, d, "**", "*.[ch]"), recursive=True):
        if path.endswith("_test.c"):
            continue
        with open(path, encoding="utf-8") as f:
            envs |= set(re.findall(r'getenv\("(HV_[A-Z0-9_]+)"\)', f.read()))
        with open(path, encoding="utf-8") as f:
            envs |= set(re.findall(r'\benv_\w+\("(HV_[A-Z0-9_]+)"', f.read()))
wl_readme = read("worker_lib/README.md")
for v in sorted(envs - TEST_ONLY):
    if not documented(v) and v not in wl_readme:
        problem("README.md, docs/*.md, worker_lib/README.md: %s is read but not documented" % v)

for p in problems:
    print(p)
if problems:
    sys.exit(1)
print("ok: config keys, CLI commands and options, metrics, ARCHITECTURE.md files, layers and "
      "circles, HV_* variables")
