#!/usr/bin/python3
"""check_functions.py SRC_DIR: no C function is longer than 150 lines.

Measured as the project's code reviews measure it: Universal Ctags over the tracked *.c files,
production code, unit tests (*_test.c), tests/ and examples/ alike (generated code is not
tracked, and a build folder is not read);
a function's length is end - line + 1, so its signature, braces and comments count.
Exit 0 when every function fits, 1 with one line per function over the limit (longest first),
77 without Universal Ctags (skipped).
"""
import os
import shutil
import subprocess
import sys

LIMIT = 150

SRC = os.path.abspath(sys.argv[1])
ctags = shutil.which("ctags")
if ctags is None:
    print("SKIP: ctags is not installed")
    sys.exit(77)
version = subprocess.run([ctags, "--version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         check=False).stdout.decode("utf-8", "replace")
if "Universal Ctags" not in version:
    print("SKIP: ctags is not Universal Ctags")
    sys.exit(77)


def source(path):
    return path.endswith(".c") and not path.endswith(".pb-c.c")


if os.path.isdir(os.path.join(SRC, ".git")) or os.path.isfile(os.path.join(SRC, ".git")):
    listed = subprocess.run(["git", "-C", SRC, "ls-files", "*.c"], stdout=subprocess.PIPE,
                            check=True).stdout.decode().split()
else:  # a source tree without git: every .c outside build folders
    listed = []
    for root, dirs, files in os.walk(SRC):
        dirs[:] = [d for d in dirs if not d.startswith(("build", "."))]
        listed += [os.path.relpath(os.path.join(root, f), SRC) for f in files]
files = sorted(p for p in listed if source(p))
if len(files) < 50:
    print("check_functions: only %d .c files found under %s" % (len(files), SRC))
    sys.exit(1)

out = subprocess.run([ctags, "--kinds-C=f", "--fields=+ne", "-f", "-", "-L", "-"],
                     input="\n".join(files).encode(), stdout=subprocess.PIPE, cwd=SRC,
                     check=True).stdout.decode("utf-8", "replace")
long_ones = []
count = 0
for row in out.splitlines():
    cols = row.split("\t")
    fields = dict(c.split(":", 1) for c in cols[3:] if ":" in c)
    if "line" not in fields or "end" not in fields:
        continue
    count += 1
    n = int(fields["end"]) - int(fields["line"]) + 1
    if n > LIMIT:
        long_ones.append((n, "%s:%s %s" % (cols[1], fields["line"], cols[0])))
if count < 1000:
    print("check_functions: ctags found only %d functions" % count)
    sys.exit(1)
for n, where in sorted(long_ones, reverse=True):
    print("%s: %d lines, more than %d: split it into its steps" % (where, n, LIMIT))
if long_ones:
    sys.exit(1)
print("ok: %d functions in %d files, none over %d lines" % (count, len(files), LIMIT))
