"""Variant of gen.py limited to at most three levels of AD in total (outer derivative(s) plus
inner ones), to look past the failure family of four-level nestings (reverse over forward over
reverse over reverse). Inner operators that are two levels deep (Newton step with a second
derivative, hessian, hessian-vector product, gradient of a gradient) are excluded."""
import random, gen
from gen import G

orig_inner_scalar = G.inner_scalar
orig_inner_list = G.inner_list

def inner_scalar(self, env, d):
    r = self.r
    for _ in range(20):
        st = r.getstate()
        c = r.randrange(8)
        if c in (1, 5, 6):
            continue
        r.setstate(st)
        out = orig_inner_scalar(self, env, d)
        if "hessian" in out or "(D (D" in out: continue
        return out
    return "((derivative-R %s) %s)" % (self.inner_fn_real(env, 2), self.S(env, 1))

def inner_list(self, env, d, k):
    for _ in range(20):
        out = orig_inner_list(self, env, d, k)
        if "hessian" not in out:
            return out
    return "((gradient-F %s) %s)" % (self.inner_fn_list(env, k, 2), self.L(env, 1, k))

G.inner_scalar = inner_scalar
G.inner_list = inner_list

def gen_case(seed):
    prog, meta = gen.gen_case(seed)
    # levels: count outer levels (2 for scalar2) + nest; regenerate with other seeds while too deep
    s = seed
    while True:
        lv = (2 if meta["kind"] == "scalar2" else 1) + meta["nest"]
        if lv <= 3:
            return prog, meta
        s += 1000003
        prog, meta = gen.gen_case(s)
        meta["seed"] = seed
