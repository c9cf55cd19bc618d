#!/usr/bin/env python3
"""Greedy s-expression reducer.  reduce.py IN.vlad OUT.vlad 'needle' [settings]
Keeps the program failing with stderr/stdout containing needle (under VLAD_JIT=off by default,
or the env given by settings: off|default|thr1|any).  Tries: deleting top-level forms, replacing a
node by a child, by a leaf among a few candidates."""
import re, subprocess, sys, os
HUNT = os.environ.get("HUNT_DIR", "/tmp/vlad-hunt")  # cases, failures and logs go here
VLAD_BIN = os.environ.get("VLAD_BIN", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "vlad"))

VLAD = VLAD_BIN
def tokenize(s):
    s = re.sub(r";[^\n]*", "", s)
    return re.findall(r'\(|\)|"[^"]*"|\'|[^\s()\']+', s)

def parse(toks, i=0):
    out = []
    while i < len(toks):
        t = toks[i]
        if t == "(":
            sub, i = parse(toks, i + 1)
            out.append(sub)
        elif t == ")":
            return out, i + 1
        elif t == "'":
            nxt, i2 = parse_one(toks, i + 1)
            out.append(["quote", nxt]); i = i2; continue
        else:
            out.append(t)
        i += 1 if t != "(" else 0
    return out, i

def parse_one(toks, i):
    t = toks[i]
    if t == "(":
        sub, j = parse(toks, i + 1)
        return sub, j
    return t, i + 1

def unparse(x):
    if isinstance(x, list):
        return "(" + " ".join(unparse(y) for y in x) + ")"
    return x

def size(x):
    return 1 + sum(size(y) for y in x) if isinstance(x, list) else 1

ENVS = {"off": {"VLAD_JIT": "off"}, "default": {}, "thr1": {"VLAD_JIT_THRESHOLD": "1"}}

def fails(forms, needle, settings, path=None):
    path = path or TRY
    with open(path, "w") as f:
        f.write("\n".join(unparse(x) for x in forms) + "\n")
    if "!" in settings:   # NAME!OK: needle under NAME while OK runs cleanly (rc 0)
        bad, ok = settings.split("!")
        env = dict(os.environ); env.pop("VLAD_JIT", None); env.pop("VLAD_JIT_THRESHOLD", None)
        env.update(ENVS[ok])
        p = subprocess.run(["timeout", "10", VLAD, path], capture_output=True, text=True, errors="replace", env=env)
        if p.returncode != 0: return False
        settings = bad
    names = ["off", "default", "thr1"] if settings == "any" else [settings]
    for n in names:
        env = dict(os.environ); env.pop("VLAD_JIT", None); env.pop("VLAD_JIT_THRESHOLD", None)
        env.update(ENVS[n])
        p = subprocess.run(["timeout", "10", VLAD, path], capture_output=True, text=True, errors="replace", env=env)
        if needle == "CRASH" and (p.returncode < 0 or p.returncode >= 128 and p.returncode != 124):
            return True
        if needle != "CRASH" and (needle in p.stderr or needle in p.stdout):
            return True
    return False

def paths(x, pre=()):
    yield pre
    if isinstance(x, list):
        for i, y in enumerate(x):
            yield from paths(y, pre + (i,))

def get(x, p):
    for i in p: x = x[i]
    return x

def put(x, p, v):
    if not p: return v
    x = list(x)
    x[p[0]] = put(x[p[0]], p[1:], v)
    return x

def main():
    global TRY
    src, dst, needle = sys.argv[1], sys.argv[2], sys.argv[3]
    TRY = dst + ".try.vlad"
    settings = sys.argv[4] if len(sys.argv) > 4 else "off"
    forms, _ = parse(tokenize(open(src).read()))
    assert fails(forms, needle, settings), "does not fail initially"
    leaves = ["0", "1", "0.5", "w", "x", "a", "b", "c", "l", "(list 0.5 0.7)"]
    changed = True
    while changed:
        changed = False
        # drop top-level forms
        i = 0
        while i < len(forms):
            t = forms[:i] + forms[i + 1:]
            if fails(t, needle, settings):
                forms = t; changed = True
            else:
                i += 1
        # node replacements, biggest first
        ps = sorted(paths(forms), key=lambda p: -size(get(forms, p)))
        for p in ps:
            if len(p) < 1: continue
            try:
                node = get(forms, p)
            except (IndexError, TypeError):
                continue
            if not isinstance(node, list): continue
            cands = [c for c in node[1:] if size(c) < size(node)]
            cands += [parse(tokenize(l))[0][0] for l in leaves]
            for c in cands:
                t = put(forms, p, c)
                if fails(t, needle, settings):
                    forms = t; changed = True
                    break
        with open(dst, "w") as f:
            f.write("\n".join(unparse(x) for x in forms) + "\n")
    print(open(dst).read())

if __name__ == "__main__":
    main()
