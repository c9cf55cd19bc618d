#!/usr/bin/env python3
"""Driver for gen3: drive3.py FIRST COUNT [ONLY-SHAPE]"""
import os, re, sys, json
from concurrent.futures import ThreadPoolExecutor
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import drive, importlib
gen3 = importlib.import_module(os.environ.get('GEN', 'gen3'))
from drive import run, nums, shape, allclose, transpose, SETTINGS, tier_diff, keep_case, run_seeds, run_problems
HUNT = os.environ.get("HUNT_DIR", "/tmp/vlad-hunt")  # cases, failures and logs go here
VLAD_BIN = os.environ.get("VLAD_BIN", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "vlad"))
EXTRA = []
for item in filter(None, os.environ.get("EXTRA", "").split(",")):
    nm, kv = item.split(":", 1)
    EXTRA.append((nm, dict(p.split("=", 1) for p in kv.split(";"))))
SETTINGS = SETTINGS + EXTRA
OUT = os.environ.get("OUTDIR") or os.path.join(HUNT, "fail3" if os.environ.get("GEN", "gen3") == "gen3" else "fail4")
os.makedirs(OUT, exist_ok=True)

def bad(l): return "nan" in l or "inf" in l

def check(checks, lines):
    probs = []
    need = max([max(i, j) for _, i, j, _ in checks] + [0])
    if len(lines) <= need: return ["missing output (%d lines)" % len(lines)]
    for kind, i, j, tol in checks:
        a, b = lines[i], lines[j]
        if bad(a) or bad(b) or bad(lines[0]): continue
        u, v = nums(a), nums(b)
        if kind == "T":
            m = len(nums(lines[0])); n = len(u) // max(m, 1)
            if len(v) != len(u): probs.append("T-size %d/%d" % (i, j)); continue
            v = transpose(v, m, n)
        if not allclose(u, v, tol):
            probs.append("%s %d/%d" % ("FD" if kind == "fd" else "mismatch", i, j))
    return probs

def one(seed, only=None):
    prog, meta = gen3.gen_case(seed, only)
    path = os.path.join(HUNT, "work", "%s-%d.vlad" % (os.environ.get("GEN", "gen3"), seed))
    with open(path, "w") as f: f.write(prog)
    res = {name: run(path, extra) for name, extra in SETTINGS}
    probs = run_problems(res)
    for name in [n for n, _ in SETTINGS if n != "off"]:
        probs += tier_diff(name, res)
    for name in [n for n, _ in SETTINGS]:
        if res[name][0] == 0:
            probs += ["%s:%s" % (name, p) for p in check(meta["checks"], res[name][1].splitlines())]
    keep_case(OUT, "d", seed, prog, res, path, probs)
    return seed, meta, probs

if __name__ == "__main__":
    first, count = int(sys.argv[1]), int(sys.argv[2])
    only = sys.argv[3] if len(sys.argv) > 3 else None
    os.makedirs(os.path.join(HUNT, "work"), exist_ok=True)
    log = os.path.join(HUNT, "log-%s-%d%s.jsonl") % (os.environ.get("GEN", "gen3"), first, "-" + only if only else "")
    run_seeds(log, lambda s: one(s, only), first, count, int(os.environ.get("J", "2")))
