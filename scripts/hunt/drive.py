#!/usr/bin/env python3
"""Run generated cases under three settings and check agreement.
Usage: drive.py FIRST COUNT [GENMODULE]"""
import os, re, subprocess, sys, json, importlib
from concurrent.futures import ThreadPoolExecutor
HUNT = os.environ.get("HUNT_DIR", "/tmp/vlad-hunt")  # cases, failures and logs go here
VLAD_BIN = os.environ.get("VLAD_BIN", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "vlad"))

VLAD = VLAD_BIN
SETTINGS = [("off", {"VLAD_JIT": "off"}), ("default", {}), ("thr1", {"VLAD_JIT_THRESHOLD": "1"})]
OUT = os.path.join(HUNT, "fail")
os.makedirs(OUT, exist_ok=True)

def run(path, extra):
    env = dict(os.environ)
    env.pop("VLAD_JIT", None); env.pop("VLAD_JIT_THRESHOLD", None)
    env.update(extra)
    try:
        p = subprocess.run(["timeout", "20", VLAD, path], capture_output=True, text=True, errors="replace", env=env)
        return p.returncode, p.stdout, p.stderr
    except Exception as e:
        return -999, "", str(e)

TOK = re.compile(r"[()]|[^\s()]+")
def nums(line):
    out = []
    for t in TOK.findall(line):
        if t in "()" or t == ".": continue
        tt = {"+inf": "inf", "-inf": "-inf", "+nan": "nan"}.get(t, t)
        try: out.append(float(tt))
        except ValueError: pass
    return out

def shape(line):
    return re.sub(r"[-+]?(\d+\.?\d*(e[-+]?\d+)?|inf|nan)", "#", line)

def close(a, b, tol):
    if a != a or b != b: return (a != a) and (b != b)
    if a == b: return True
    return abs(a - b) <= tol * max(1.0, abs(a), abs(b))

def allclose(u, v, tol):
    return len(u) == len(v) and all(close(a, b, tol) for a, b in zip(u, v))

def transpose(flat, rows, cols):
    # flat is rows x cols row-major; return cols x rows row-major
    return [flat[r * cols + c] for c in range(cols) for r in range(rows)]

def check_ad(kind, lines):
    """return list of problem strings"""
    probs = []
    if any("nan" in l or "inf" in l for l in lines):
        return []   # sqrt/distance at 0 etc.: IEEE nan/inf, inconclusive
    if kind in ("scalar", "scalar2"):
        if len(lines) < 6: return ["missing output"]
        f0 = nums(lines[0])
        if any(x != x or abs(x) == float("inf") for x in f0): return []
        gR, gF, rR, fw, fd = [nums(l) for l in lines[1:6]]
        for nm, v in (("gradient-F", gF), ("raw-R", rR), ("raw-F", fw)):
            if not allclose(gR, v, 1e-7): probs.append("grad mismatch gradient-R vs %s" % nm)
        if shape(lines[1]) != shape(lines[2]): probs.append("shape gradient-R vs gradient-F")
        if not allclose(gR, fd, 1e-5) and allclose(gR, gF, 1e-7): probs.append("FD1")
        if kind == "scalar2" and len(lines) >= 11:
            FR, FF, RR, RF, fdh = [nums(l) for l in lines[6:11]]
            for nm, v in (("FF", FF), ("RR", RR), ("RF", RF)):
                if not allclose(FR, v, 1e-7): probs.append("hess mismatch FR vs %s" % nm)
            if not allclose(FR, fdh, 1e-5) and allclose(FR, FF, 1e-7): probs.append("FD2")
        elif kind == "scalar2":
            probs.append("missing output")
    else:
        if len(lines) < 4: return ["missing output"]
        y = nums(lines[0])
        if any(x != x or abs(x) == float("inf") for x in y): return []
        m = len(y)
        fw, rj, fd = [nums(l) for l in lines[1:4]]
        n = len(fw) // max(m, 1)
        if len(rj) != len(fw): probs.append("jac size"); return probs
        if not allclose(fw, transpose(rj, m, n), 1e-7): probs.append("jac fwd vs rev")
        if not allclose(fw, fd, 1e-5) and allclose(fw, transpose(rj, m, n), 1e-7): probs.append("FDJ")
        if len(lines) >= 6:
            jR, jF = nums(lines[4]), nums(lines[5])
            if not allclose(rj, jR, 1e-7): probs.append("jacobian-R mismatch")
            if not allclose(rj, jF, 1e-7): probs.append("jacobian-F mismatch")
    return probs

def run_problems(res):
    """Timeouts, errors and internal errors of each setting's run."""
    probs = []
    for name, (rc, out, err) in res.items():
        if rc == 124: probs.append("timeout:%s" % name)
        elif rc != 0:
            msg = err.strip().splitlines()[0] if err.strip() else "rc=%d" % rc
            probs.append("error:%s:%s" % (name, re.sub(r"^\S+:\d+:\d+: ", "", msg)[:150]))
        elif "internal" in err.lower():
            probs.append("internal:%s" % name)
    return probs

def tier_diff(name, res):
    """How setting `name`'s output differs from VLAD_JIT=off's (res: name -> (rc, out, err))."""
    ref, o = res["off"][1].splitlines(), res[name][1].splitlines()
    if res[name][0] != 0 or res["off"][0] != 0: return []
    if len(o) != len(ref) or any(shape(a) != shape(b) or not allclose(nums(a), nums(b), 1e-9) for a, b in zip(o, ref)):
        return ["jitdiff:%s" % name]
    return ["jitdiff-tiny:%s" % name] if o != ref else []

def keep_case(out_dir, prefix, seed, prog, res, path, probs):
    """A failing case's program and every setting's output into out_dir; a passing one's file removed."""
    if not probs:
        os.remove(path)
        return
    with open("%s/%s%d.vlad" % (out_dir, prefix, seed), "w") as f: f.write(prog)
    with open("%s/%s%d.out" % (out_dir, prefix, seed), "w") as f:
        for name, (rc, out, err) in res.items():
            f.write("=== %s rc=%d\n%s\n--- stderr\n%s\n" % (name, rc, out, err[:2000]))

def run_seeds(log_path, one_case, first, count, jobs=2):
    """Runs one_case(seed) for count seeds from first, logging each case's problems (JSON lines)."""
    with open(log_path, "w") as log, ThreadPoolExecutor(jobs) as ex:
        for seed, meta, probs in ex.map(one_case, range(first, first + count)):
            log.write(json.dumps({"seed": seed, "shape": meta["shape"], "kind": meta.get("kind"), "nest": meta["nest"], "probs": probs}) + "\n")
            log.flush()
            if probs:
                print(seed, meta["shape"], meta.get("kind", ""), meta["nest"], probs, flush=True)

def one(seed, gen):
    prog, meta = gen.gen_case(seed)
    path = os.path.join(HUNT, "work", "c%d.vlad" % seed)
    with open(path, "w") as f: f.write(prog)
    res = {}
    for name, extra in SETTINGS:
        res[name] = run(path, extra)
    probs = run_problems(res)
    # cross-setting comparison
    ref = res["off"][1].splitlines()
    for name in ("default", "thr1"):
        probs += tier_diff(name, res)
    if res["off"][0] == 0:
        probs += ["off:" + p for p in check_ad(meta["kind"], ref)]
    for name in ("default", "thr1"):
        if res[name][0] == 0:
            probs += ["%s:%s" % (name, p) for p in check_ad(meta["kind"], res[name][1].splitlines())]
    keep_case(OUT, "c", seed, prog, res, path, probs)
    return seed, meta, probs

if __name__ == "__main__":
    first, count = int(sys.argv[1]), int(sys.argv[2])
    gen = importlib.import_module(sys.argv[3] if len(sys.argv) > 3 else "gen")
    os.makedirs(os.path.join(HUNT, "work"), exist_ok=True)
    log = os.path.join(HUNT, "log-%s-%d.jsonl") % (sys.argv[3] if len(sys.argv) > 3 else "gen", first)
    run_seeds(log, lambda s: one(s, gen), first, count)
