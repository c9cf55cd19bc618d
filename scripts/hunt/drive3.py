#!/usr/bin/env python3
"""Driver for gen3: drive3.py FIRST COUNT [ONLY-SHAPE]"""
import os, re, sys, json
from concurrent.futures import ThreadPoolExecutor
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import drive, importlib
gen3 = importlib.import_module(os.environ.get('GEN', 'gen3'))
from drive import run, nums, shape, allclose, transpose, SETTINGS
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
    probs = []
    for name, (rc, out, err) in res.items():
        if rc == 124: probs.append("timeout:%s" % name)
        elif rc != 0:
            msg = err.strip().splitlines()[0] if err.strip() else "rc=%d" % rc
            probs.append("error:%s:%s" % (name, re.sub(r"^\S+:\d+:\d+: ", "", msg)[:150]))
    ref = res["off"][1].splitlines()
    for name in [n for n, _ in SETTINGS if n != "off"]:
        o = res[name][1].splitlines()
        if res[name][0] == 0 and res["off"][0] == 0:
            if len(o) != len(ref) or any(shape(a) != shape(b) or not allclose(nums(a), nums(b), 1e-9) for a, b in zip(o, ref)):
                probs.append("jitdiff:%s" % name)
            elif o != ref:
                probs.append("jitdiff-tiny:%s" % name)
    for name in [n for n, _ in SETTINGS]:
        if res[name][0] == 0:
            probs += ["%s:%s" % (name, p) for p in check(meta["checks"], res[name][1].splitlines())]
    if probs:
        with open("%s/d%d.vlad" % (OUT, seed), "w") as f: f.write(prog)
        with open("%s/d%d.out" % (OUT, seed), "w") as f:
            for name, (rc, out, err) in res.items():
                f.write("=== %s rc=%d\n%s\n--- stderr\n%s\n" % (name, rc, out, err[:2000]))
    else:
        os.remove(path)
    return seed, meta, probs

if __name__ == "__main__":
    first, count = int(sys.argv[1]), int(sys.argv[2])
    only = sys.argv[3] if len(sys.argv) > 3 else None
    os.makedirs(os.path.join(HUNT, "work"), exist_ok=True)
    log = open(os.path.join(HUNT, "log-%s-%d%s.jsonl") % (os.environ.get("GEN", "gen3"), first, "-" + only if only else ""), "w")
    with ThreadPoolExecutor(int(os.environ.get("J", "2"))) as ex:
        for seed, meta, probs in ex.map(lambda s: one(s, only), range(first, first + count)):
            log.write(json.dumps({"seed": seed, "shape": meta["shape"], "kind": meta["kind"], "nest": meta["nest"], "probs": probs}) + "\n")
            log.flush()
            if probs:
                print(seed, meta["shape"], meta["nest"], probs, flush=True)
