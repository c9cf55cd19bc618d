#!/usr/bin/env python3
"""Fourth generator: gen.G extended with constructs aimed at the interpreter's special paths
(list-ref's one-step reverse walk over data views and one-hot sensitivities, constant leaves and
small-integer leaves, equal? on reverse values, closure memos of j*/*j, closures returned by the
differentiated function), driven by drive3.py (GEN=gen4).

Shapes: mix (scalar F of list/real/pair/matrix x with the new constructs), closret (F returns a
closure; derivative-R / derivative-F / gradient-F of it applied to a point vs FD and other modes),
memo (many closures of one lambda, each differentiated, vs an analytic or forward reference)."""
import random, sys
import gen, gen3
from gen import G, Env, fresh, const
from gen3 import HEADER, rlist, scalar_lines

HEADER4 = HEADER + r"""
(define DL (map-n (lambda (k) (* 0.8 (sin (+ 0.5 (* 1.7 k))))) 90))
(define DM (map-n (lambda (i) (map-n (lambda (j) (* 0.5 (cos (+ i (* 2.1 j))))) 4)) 5))
"""


class G4(G):
    def S(self, env, d):
        r = self.r
        if d > 0 and r.random() < 0.3:
            c = r.randrange(7)
            if c == 0: return self.lref(env, d)
            if c == 1: return self.cloop(env, d)
            if c == 2: return self.eqq(env, d)
            if c == 3 and self.nest > 0: return self.memo(env, d)
            if c == 4: return self.constarith(env, d)
            if c == 5: return self.mref(env, d)
            if c == 6: return self.closret_inline(env, d)
        return G.S(self, env, d)

    def idx(self, env, k):
        r = self.r
        c = r.randrange(4)
        if c == 0: return str(r.randrange(k))
        if c == 1: return "(if (< %s %s) %d %d)" % (self.S(env, 0), self.S(env, 0), r.randrange(k), r.randrange(k))
        if c == 2: return "(- %d %d)" % (k - 1, r.randrange(k))
        return "(length (cdr %s))" % ("(list %s)" % " ".join("0" for _ in range(r.randint(1, k))))

    def lref(self, env, d):
        r = self.r
        if env.lists and r.random() < 0.6:
            n, k = r.choice(env.lists)
            return "(list-ref %s %s)" % (n, self.idx(env, k))
        if r.random() < 0.5:
            # data list indexed at a point depending on nothing active, times something active
            return "(* (list-ref DL %s) %s)" % (self.idx(env, 90), self.S(env, d - 1))
        k = r.randint(2, 4)
        return "(list-ref %s %s)" % (self.L(env, d - 1, k), self.idx(env, k))

    def mref(self, env, d):
        r = self.r
        i, j = r.randrange(5), r.randrange(4)
        if any(n == "(car M)" for n, _ in env.lists) and r.random() < 0.7:
            return "(list-ref (list-ref M %d) %d)" % (i, j)
        return "(* %s (list-ref (list-ref DM %s) %s))" % (self.S(env, d - 1), self.idx(env, 5), self.idx(env, 4))

    def cloop(self, env, d):
        r = self.r
        K = r.choice([3, 5, 17, 63, 64, 65, 70])
        i, a, lp = fresh("i"), fresh("a"), fresh("lp")
        start = r.choice([0, -20, -17, -16, 60])
        body = self.S(env.add_s(a), 1)
        step = r.choice(["(+ (* 0.9 %s) (* 0.001 (* %s %s)))" % (a, i, body),
                         "(+ %s (* (list-ref DL (- %s %d)) (* 0.01 %s)))" % (a, i, start, body),
                         "(+ %s (* 0.0001 (* (+ %s 3) (- %s %s))))" % (a, i, body, i)])
        return "(let %s ((%s %d) (%s %s)) (if (= %s %d) %s (%s (+ %s 1) %s)))" % (
            lp, i, start, a, self.S(env, 1), i, start + K, a, lp, i, step)

    def eqq(self, env, d):
        r = self.r
        if env.lists and r.random() < 0.6:
            n, k = r.choice(env.lists)
            other = r.choice([n, "(list %s)" % " ".join("0" for _ in range(k)), "(reverse %s)" % n, self.L(env, 1, k)])
            return "(if (equal? %s %s) %s %s)" % (n, other, self.S(env, d - 1), self.S(env, d - 1))
        return "(if (equal? %s %s) %s %s)" % (self.S(env, 1), self.S(env, 1), self.S(env, d - 1), self.S(env, d - 1))

    def memo(self, env, d):
        r = self.r
        k, t = fresh("k"), fresh("t")
        K = r.randint(3, 40)
        sg = G4(r, self.nest - 1)
        inner = sg.S(env.add_s(k).add_s(t), 2)
        op = r.choice(["derivative-F", "derivative-R", "dR", "dF1"])
        return "(* 0.05 (fold + 0 (map (lambda (%s) ((%s (lambda (%s) %s)) (* 0.1 %s))) (iota %d))))" % (
            k, op, t, inner, k, K)

    def constarith(self, env, d):
        r = self.r
        c = r.randrange(4)
        if c == 0: return "(* (* 2 3) %s)" % self.S(env, d - 1)
        if c == 1: return "(+ (- 64 63) %s)" % self.S(env, d - 1)
        if c == 2: return "(* (sin (* 0.5 (length DL))) %s)" % self.S(env, d - 1)
        return "(let ((c (+ 1 (* 0 %s)))) (* c %s))" % (self.S(env, 0), self.S(env, d - 1))

    def closret_inline(self, env, d):
        # a function returning a closure, called inside the differentiated body
        u, z = fresh("u"), fresh("z")
        body = self.S(env.add_s(u).add_s(z), max(1, d - 1))
        return "(((lambda (%s) (lambda (%s) %s)) %s) %s)" % (u, z, body, self.S(env, 1), self.S(env, 1))


def case_mix(r):
    nest = r.choice([0, 0, 1, 1, 2])
    g = G4(r, nest)
    shape = r.choice(["list", "list", "real", "pair", "matrix", "long"])
    if shape == "list":
        n = r.randint(2, 4); env = Env([], [("x", n)]); param = "x"; x0 = rlist(r, n)
    elif shape == "real":
        env = Env(["x"], []); param = "x"; x0 = "%.3f" % r.uniform(-1.2, 1.2)
    elif shape == "pair":
        n = r.randint(2, 3); env = Env(["a"], [("l", n)]); param = "(cons a l)"
        x0 = "(cons %.3f %s)" % (r.uniform(-1, 1), rlist(r, n))
    elif shape == "matrix":
        env = Env([], [("(car M)", 4), ("(list-ref M 3)", 4)]); param = "M"
        x0 = "(list %s)" % " ".join(rlist(r, 4) for _ in range(5))
    else:
        n = r.randint(10, 40); env = Env([], [("x", 4)]); param = "x"; x0 = rlist(r, n)
    d = r.randint(2, 4)
    body = g.S(env, d)
    prog = HEADER4 + "(define (F %s) %s)\n(define X0 %s)\n" % (param, body, x0)
    lines, checks = scalar_lines(shape not in ("long", "matrix") and r.random() < (0.5 if nest < 2 else 0.2))
    return prog, lines, checks, "mix-%s" % shape, nest


def case_closret(r):
    nest = r.choice([0, 0, 1])
    g = G4(r, nest)
    z = fresh("z")
    xs = r.choice(["real", "list"])
    if xs == "real":
        env = Env(["x"], []); x0 = "%.3f" % r.uniform(-1.2, 1.2)
    else:
        n = r.randint(2, 3); env = Env([], [("x", n)]); x0 = rlist(r, n)
    body = g.S(env.add_s(z), r.randint(2, 3))
    pre = ""
    if r.random() < 0.5:
        v = fresh("v")
        pre_e = g.S(env, 2)
        prog_body = "(let ((%s %s)) (lambda (%s) (* %s %s)))" % (v, pre_e, z, v, "(+ 1 (sq %s))" % body)
    else:
        prog_body = "(lambda (%s) %s)" % (z, body)
    prog = HEADER4 + "(define (F x) %s)\n(define X0 %s)\n(define Z0 %.3f)\n" % (prog_body, x0, r.uniform(-1, 1))
    prog += "(define (Fz x) ((F x) Z0))\n"
    if xs == "real":
        lines = ["(Fz X0)", "(((derivative-R F) X0) Z0)", "(((derivative-F F) X0) Z0)", "((derivative-F Fz) X0)",
                 "((derivative-R Fz) X0)", "(car (fdgrad Fz X0))"]
        checks = [("eq", 1, 3, 1e-7), ("eq", 2, 3, 1e-7), ("eq", 4, 3, 1e-7), ("fd", 3, 5, 1e-5)]
    else:
        lines = ["(Fz X0)", "(((gradient-R F) X0) Z0)", "(((gradient-F F) X0) Z0)", "((gradient-F Fz) X0)",
                 "((gradient-R Fz) X0)", "(fdgrad Fz X0)"]
        checks = [("eq", 1, 3, 1e-7), ("eq", 2, 3, 1e-7), ("eq", 4, 3, 1e-7), ("fd", 3, 5, 1e-5)]
    return prog, lines, checks, "closret-%s" % xs, nest


def case_memo(r):
    # many closures of one lambda, each differentiated; analytic reference by hand
    K = r.randint(20, 300)
    op = r.choice(["derivative-F", "derivative-R", "dR", "dF1"])
    t = r.randrange(4)
    if t == 0:
        f = "(lambda (t) (* k (sin (* t k))))"; dfa = "(* k (* k (cos (* t k))))"
    elif t == 1:
        f = "(lambda (t) (exp (* 0.01 (* k t))))"; dfa = "(* (* 0.01 k) (exp (* 0.01 (* k t))))"
    elif t == 2:
        f = "(lambda (t) (let ((g (lambda (s) (* s (+ k s))))) (g (g t))))"
        dfa = "(let* ((g1 (* t (+ k t))) (d1 (+ k (* 2 t)))) (* (+ k (* 2 g1)) d1))"
    else:
        f = "(lambda (t) (fold + 0 (map (lambda (c) (* c (sin (* t c)))) (list k (* 0.5 k)))))"
        dfa = "(+ (* k (* k (cos (* t k)))) (* (* 0.5 k) (* (* 0.5 k) (cos (* t (* 0.5 k))))))"
    tv = "%.3f" % r.uniform(-1, 1)
    scale = "0.01"
    prog = HEADER4 + "(define T0 %s)\n(define KS (map (lambda (i) (* %s i)) (iota %d)))\n" % (tv, scale, K)
    lines = ["(map (lambda (k) ((%s %s) T0)) KS)" % (op, f),
             "(map (lambda (k) (let ((t T0)) %s)) KS)" % dfa,
             "(map (lambda (k) ((%s %s) T0)) KS)" % (r.choice(["derivative-F", "derivative-R"]), f),
             # same closures reused: the memo hits
             "(let ((fs (map (lambda (k) %s) KS))) (map (lambda (f) (+ ((derivative-F f) T0) ((derivative-R f) T0))) (append fs fs)))" % f,
             "(let ((fs (map (lambda (k) %s) KS))) (map (lambda (f) (* 2 ((derivative-F f) T0))) (append fs fs)))" % f]
    checks = [("eq", 0, 1, 1e-9), ("eq", 2, 1, 1e-9), ("eq", 3, 4, 1e-9)]
    return prog, lines, checks, "memo-%d" % t, 0


CASES = {"mix": case_mix, "closret": case_closret, "memo": case_memo}


def gen_case(seed, only=None):
    r = random.Random(seed)
    gen.ID[0] = 0
    name = only or r.choice(["mix", "mix", "mix", "mix", "closret", "memo"])
    prog, lines, checks, sub, nest = CASES[name](r)
    prog += "".join(l + "\n" for l in lines)
    return prog, {"seed": seed, "shape": sub, "kind": name, "nest": nest, "lines": lines, "checks": checks}


if __name__ == "__main__":
    s = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    p, m = gen_case(s, sys.argv[2] if len(sys.argv) > 2 else None)
    sys.stdout.write(p)
    sys.stderr.write(repr(m) + "\n")
