#!/usr/bin/env python3
"""Third generator: shapes not covered by gen.py / gen2.py.  Uses gen.G for random expressions.

Shapes (meta["shape"]):
  nestout   F : list/real/pair -> nested structure (pair of lists, list of pairs, list of lists,
            (cons real list)); full Jacobian by raw forward, raw reverse (one per output real),
            FD; for list input and list output also jacobian-F vs a reference built from forward
            directional derivatives; for real input derivative-R/-F vs forward.
  closarg   a top-level higher-order function takes a closure (made by a top-level maker or an
            inline lambda) capturing the differentiated data; scalar result.
  tuplelist x is (cons a l), (cons l a), (cons (cons a b) l), (cons l1 l2) or (list a l).
  hessloop  hessian of a function with inner loops (named let iterations, fold over data,
            non-tail recursion); compared with forward-over-reverse, FF, RR, RF, FD and
            hessian-vector-product.
  optim     outer derivative of argmin / argmax / gradient-descent / root / min-max (their
            -using variants with forward or reverse inner operators) w.r.t. a parameter.
  deeprec   recursion over lists of 50-200 elements (data list or x itself) under reverse mode.
  repeat    the same F differentiated 40-150 times in a loop (so the default tier compiles it),
            accumulated; compared between operators and settings.

meta["checks"]: list of (kind, i, j, tol): eq (lines i and j agree), T (line i is the transpose
of j, with m = number of reals in line 0), fd (like eq, lower-priority finite difference).
"""
import random, sys
import gen
from gen import G, Env, fresh, const

HEADER = gen.HEADER + r"""
(define (sadd a b) (cond ((real? a) (+ a b)) ((pair? a) (cons (sadd (car a) (car b)) (sadd (cdr a) (cdr b)))) (else a)))
(define (jacF-ref f x) (let ((m (length (f x)))) (map-n (lambda (i) (map (lambda (b) (list-ref ((dFdir f) x b) i)) (basis x))) m)))
(define (fdgrad-h f x h) (map (lambda (b) (scl (/ 1 (* 2 h)) (sub (f (axpy h b x)) (f (axpy (- 0 h) b x))))) (basis x)))
"""


def rlist(r, n, lo=-1.2, hi=1.2):
    return "(list %s)" % " ".join("%.3f" % r.uniform(lo, hi) for _ in range(n))


def scalar_lines(second, extra_hess=False):
    lines = ["(F X0)", "((gradient-R F) X0)", "((gradient-F F) X0)", "((dR F) X0)", "(fwdgrad F X0)", "(fdgrad F X0)"]
    checks = [("eq", 1, 2, 1e-7), ("eq", 1, 3, 1e-7), ("eq", 1, 4, 1e-7), ("fd", 1, 5, 1e-5)]
    if second:
        lines += ["(map (lambda (b) ((dFdir (gradient-R F)) X0 b)) (basis X0))",
                  "(map (lambda (b) ((dFdir (gradient-F F)) X0 b)) (basis X0))",
                  "(map (lambda (b) ((dR (lambda (x) (sdot ((gradient-R F) x) b))) X0)) (basis X0))",
                  "(map (lambda (b) ((dR (lambda (x) (sdot ((gradient-F F) x) b))) X0)) (basis X0))",
                  "(fdgrad (gradient-R F) X0)"]
        checks += [("eq", 6, 7, 1e-7), ("eq", 6, 8, 1e-7), ("eq", 6, 9, 1e-7), ("fd", 6, 10, 1e-5)]
        if extra_hess:
            lines += ["((hessian F) X0)",
                      "((hessian-vector-product F) X0 (map (lambda (b) (* 0.5 (+ 1 b))) (iota (length X0))))",
                      "(map (lambda (row) (dot row (map (lambda (b) (* 0.5 (+ 1 b))) (iota (length X0))))) (map (lambda (b) ((dFdir (gradient-R F)) X0 b)) (basis X0)))"]
            checks += [("eq", 6, 11, 1e-7), ("eq", 12, 13, 1e-7)]
    return lines, checks


# ------------------------------------------------------------------ nestout
def case_nestout(r, g):
    ins = r.choice(["list", "list", "real", "pair"])
    if ins == "list":
        n = r.randint(2, 3)
        env = Env([], [("x", n)]); param = "x"; x0 = rlist(r, n)
    elif ins == "real":
        env = Env(["x"], []); param = "x"; x0 = "%.3f" % r.uniform(-1.2, 1.2)
    else:
        n = r.randint(2, 3)
        env = Env(["a"], [("l", n)]); param = "(cons a l)"
        x0 = "(cons %.3f %s)" % (r.uniform(-1, 1), rlist(r, n))
    d = r.randint(2, 3)
    out = r.choice(["pairlists", "listpairs", "listlists", "consreal", "deep"])
    if out == "pairlists":
        body = "(cons %s %s)" % (g.L(env, d, r.randint(1, 3)), g.L(env, d, r.randint(1, 3)))
        islist = False
    elif out == "listpairs":
        body = "(list %s)" % " ".join("(cons %s %s)" % (g.S(env, d), g.S(env, d)) for _ in range(r.randint(1, 3)))
        islist = True
    elif out == "listlists":
        body = "(list %s)" % " ".join(g.L(env, d, r.randint(1, 2)) for _ in range(r.randint(2, 3)))
        islist = True
    elif out == "consreal":
        body = "(cons %s %s)" % (g.S(env, d), g.L(env, d, r.randint(2, 3)))
        islist = False
    else:
        # structure built by a map returning pairs, then a let-bound destructuring
        z = fresh("z")
        L = g.L(env, d, r.randint(2, 3))
        body = "(map (lambda (%s) (cons %s (list %s %s))) %s)" % (z, g.S(env.add_s(z), d - 1), z, g.S(env.add_s(z), d - 1), L)
        islist = True
    prog = HEADER + "(define (F %s) %s)\n(define X0 %s)\n" % (param, body, x0)
    lines = ["(F X0)", "(fwdgrad F X0)", "(revjac F X0)", "(fdgrad F X0)"]
    checks = [("T", 1, 2, 1e-7), ("fd", 1, 3, 1e-5)]
    if ins == "list" and islist:
        lines += ["((jacobian-F F) X0)", "(jacF-ref F X0)"]
        checks += [("eq", 4, 5, 1e-7)]
    if ins == "real":
        lines += ["((derivative-R F) X0)", "((derivative-F F) X0)", "(car (fwdgrad F X0))", "((dF1 F) X0)"]
        k = len(lines)
        checks += [("eq", k - 4, k - 2, 1e-7), ("eq", k - 3, k - 2, 1e-7), ("eq", k - 1, k - 2, 1e-7)]
    # gradient of a scalar summary of the nested output
    lines += ["((gradient-R (lambda (x) (tot (F x)))) X0)", "((gradient-F (lambda (x) (tot (F x)))) X0)",
              "(map tot (fwdgrad F X0))"]
    k = len(lines)
    checks += [("eq", k - 3, k - 1, 1e-7), ("eq", k - 2, k - 1, 1e-7)]
    return prog, lines, checks, "nestout-%s-%s" % (ins, out)


# ------------------------------------------------------------------ closarg
HO_DEFS = [
    "(define (HO g l) (fold (lambda (acc z) (+ (* 0.8 acc) (g z))) 0 l))",
    "(define (HO g l) (if (null? l) 0 (+ (g (car l)) (* 0.7 (HO g (cdr l))))))",
    "(define (HO g l) (g (+ (g (car l)) (car (cdr l)))))",
    "(define (HO g l) (let loop ((l l) (a 0.5)) (if (null? l) a (loop (cdr l) (* 0.5 (g (+ a (car l))))))))",
    "(define (HO g l) (lsum (map g (map g l))))",
    "(define (HO g l) (((lambda (h) (lambda (z) (h (h z)))) g) (dot l l)))",
    "(define (HO g l) (let ((h (compose g g))) (+ (h (car l)) (HO2 h (cdr l)))))\n(define (HO2 h l) (if (null? l) 0 (+ (h (car l)) (HO2 h (cdr l)))))",
    "(define (HO g l) (sum-with (lambda (z) (* z (g z))) (map2 (lambda (a b) (+ a (g b))) l (reverse l))))",
]


def case_closarg(r, g):
    shape = r.choice(["list", "list", "real", "pair"])
    if shape == "list":
        n = r.randint(2, 3)
        env = Env([], [("x", n)]); param = "x"; x0 = rlist(r, n); xl = "x"
    elif shape == "real":
        env = Env(["x"], []); param = "x"; x0 = "%.3f" % r.uniform(-1.2, 1.2); xl = "(list x (* 0.5 x))"
    else:
        n = r.randint(2, 3)
        env = Env(["a"], [("l", n)]); param = "(cons a l)"
        x0 = "(cons %.3f %s)" % (r.uniform(-1, 1), rlist(r, n)); xl = "l"
    ho = r.choice(HO_DEFS)
    defs = ho + "\n"
    z = fresh("z")
    how = r.choice(["maker", "inline", "maker-list", "curried"])
    if how == "maker":
        # top-level maker capturing a scalar made from x
        p = fresh("p")
        mbody = g.S(Env([z, p], []), 2)
        defs += "(define (mk %s) (lambda (%s) %s))\n" % (p, z, mbody)
        clos = "(mk %s)" % g.S(env, 2)
    elif how == "maker-list":
        q = fresh("q")
        mbody = g.S(Env([z], [(q, 2)]), 2)
        defs += "(define (mk %s) (lambda (%s) %s))\n" % (q, z, mbody)
        clos = "(mk %s)" % g.L(env, 1, 2)
    elif how == "curried":
        p = fresh("p")
        mbody = g.S(Env([z, p], []), 2)
        defs += "(define ((mk %s) %s) %s)\n" % (p, z, mbody)
        clos = "(mk %s)" % g.S(env, 2)
    else:
        clos = "(lambda (%s) %s)" % (z, g.S(env.add_s(z), 2))
    data = r.choice([xl, rlist(r, r.randint(2, 4)), "data"])
    body = "(HO %s %s)" % (clos, data)
    if r.random() < 0.4:
        body = "(+ %s %s)" % (body, g.S(env, 2))
    if r.random() < 0.3:
        # the closure is bound in a let and used twice (fan-out of a closure)
        c = fresh("c")
        body = "(let ((%s %s)) (* (HO %s %s) (+ 1 (sq (%s %s)))))" % (c, clos, c, data, c, g.S(env, 1))
    prog = HEADER + defs + "(define (F %s) %s)\n(define X0 %s)\n" % (param, body, x0)
    second = r.random() < 0.4
    lines, checks = scalar_lines(second)
    return prog, lines, checks, "closarg-%s-%s" % (shape, how)


# ------------------------------------------------------------------ tuplelist
def case_tuplelist(r, g):
    form = r.choice(["al", "la", "abl", "l1l2", "lista"])
    n = r.randint(2, 3)
    if form == "al":
        env = Env(["a"], [("l", n)]); param = "(cons a l)"; x0 = "(cons %.3f %s)" % (r.uniform(-1, 1), rlist(r, n))
    elif form == "la":
        env = Env(["a"], [("l", n)]); param = "(cons l a)"; x0 = "(cons %s %.3f)" % (rlist(r, n), r.uniform(-1, 1))
    elif form == "abl":
        env = Env(["a", "b"], [("l", n)]); param = "(cons (cons a b) l)"
        x0 = "(cons (cons %.3f %.3f) %s)" % (r.uniform(-1, 1), r.uniform(-1, 1), rlist(r, n))
    elif form == "l1l2":
        m = r.randint(2, 3)
        env = Env([], [("l1", n), ("l2", m)]); param = "(cons l1 l2)"; x0 = "(cons %s %s)" % (rlist(r, n), rlist(r, m))
    else:
        env = Env(["a"], [("l", n)]); param = "(list a l)"; x0 = "(list %.3f %s)" % (r.uniform(-1, 1), rlist(r, n))
    body = g.S(env, r.randint(2, 4))
    prog = HEADER + "(define (F %s) %s)\n(define X0 %s)\n" % (param, body, x0)
    lines, checks = scalar_lines(r.random() < 0.5)
    return prog, lines, checks, "tuplelist-%s" % form


# ------------------------------------------------------------------ hessloop
def case_hessloop(r, g):
    n = r.randint(2, 3)
    env = Env([], [("x", n)])
    t = r.randrange(5)
    z, w, acc, i, lp, l = fresh("z"), fresh("w"), fresh("acc"), fresh("i"), fresh("lp"), fresh("l")
    K = r.randint(2, 8)
    if t == 0:   # iterate a map K times
        step = g.S(Env([z], [("x", n)]), 2)
        body = "(sumsq (let %s ((%s x) (%s 0)) (if (= %s %d) %s (%s (map (lambda (%s) (+ %s (* 0.1 (tanh %s)))) %s) (+ %s 1)))))" % (
            lp, w, i, i, K, w, lp, z, z, step, w, i)
        # note: step refers to the outer x and z; fine
    elif t == 1:  # fold over constant data with a state depending on x
        st = g.S(Env([acc, z], [("x", n)]), 2)
        body = "(fold (lambda (%s %s) (+ (* 0.6 %s) (* 0.3 %s))) (car x) (map-n (lambda (k) (sin (* 0.7 k))) %d))" % (acc, z, acc, st, K + 3)
    elif t == 2:  # non-tail recursion over x
        s = g.S(Env([z], [("x", n)]), 2)
        body = "(let %s ((%s x)) (if (null? %s) 0.5 (* (+ 1 (* 0.2 (tanh (car %s)))) (+ (* 0.3 %s) (%s (cdr %s))))))" % (
            lp, l, l, l, "(let ((%s (car %s))) %s)" % (z, l, s), lp, l)
    elif t == 3:  # newton-like iteration with inner state
        s = g.S(Env([z], [("x", n)]), 2)
        body = "(let %s ((%s (lsum x)) (%s 0)) (if (= %s %d) %s (%s (- %s (* 0.2 (tanh (- %s %s)))) (+ %s 1))))" % (
            lp, z, i, i, K, z, lp, z, z, s, i)
    else:        # generic body from gen with a loop around it
        s = g.S(Env([acc], [("x", n)]), 3)
        body = "(let %s ((%s 0) (%s 0.3)) (if (= %s %d) %s (%s (+ %s 1) (* 0.5 %s))))" % (lp, i, acc, i, K, acc, lp, i, s)
    x0 = rlist(r, n)
    prog = HEADER + "(define (F x) %s)\n(define X0 %s)\n" % (body, x0)
    lines, checks = scalar_lines(True, extra_hess=True)
    return prog, lines, checks, "hessloop-%d" % t


# ------------------------------------------------------------------ optim
def case_optim(r, g):
    t = r.choice(["argmin", "argmin", "argmax", "gd", "root", "root", "minmax"])
    gop = r.choice(["gradient-R", "gradient-F", "gradient"])
    dop = r.choice(["derivative-R", "derivative-F", "derivative"])
    th = r.choice(["real", "list"])
    if th == "real":
        env = Env(["th"], []); param = "th"; x0 = "%.3f" % r.uniform(-1, 1)
    else:
        env = Env([], [("th", 2)]); param = "th"; x0 = rlist(r, 2, -1, 1)
    k = r.randint(1, 2)
    y = fresh("y")
    c = g.L(env, 2, k)
    pert = g.S(env.add_l(y, k), 1)
    obj = "(lambda (%s) (+ (sumsq (v- %s %s)) (* 0.1 (sin %s))))" % (y, y, c, pert)
    y0 = rlist(r, k, -0.5, 0.5) if r.random() < 0.7 else "%.2f" % r.uniform(-0.5, 0.5)
    if y0.startswith("(list") is False:
        # real x0: the objective then takes a real
        obj = "(lambda (%s) (+ (sq (- %s %s)) (* 0.1 (sin %s))))" % (y, y, g.S(env, 1), g.S(env.add_s(y), 1))
    eps = "1e-9"
    if t == "argmin":
        expr = "((argmin-using %s) %s %s %s)" % (gop, obj, y0, eps)
    elif t == "argmax":
        y2 = fresh("y")
        obj2 = "(lambda (%s) (- 0 (%s %s)))" % (y2, obj, y2)
        expr = "((argmax-using %s) %s %s %s)" % (gop, obj2, y0, eps)
    elif t == "gd":
        expr = "(car ((gradient-descent %s) %s %s %s))" % (gop, obj, y0, eps)
    elif t == "root":
        zz = fresh("z")
        gth = g.S(env, 2)
        expr = "((root-using %s) (lambda (%s) (- (+ (* %s (* %s %s)) (+ %s (* 0.1 (sin %s)))) %s)) %.2f 1e-13)" % (
            dop, zz, zz, zz, zz, zz, zz, gth, r.uniform(-1, 1))
    else:
        xx, yy = fresh("xx"), fresh("yy")
        a = g.S(env, 1)
        pay = "(lambda (%s %s) (+ (+ (sumsq %s) (* %s (dot %s %s))) (- (* 0.1 (car %s)) (sumsq %s))))" % (
            xx, yy, xx, a, xx, yy, yy, yy)
        expr = "((min-max-using %s %s) %s (list 0.2 -0.1) (list 0.1 0.3) 1e-7)" % (gop, r.choice(["gradient-R", "gradient-F"]), pay)
    res = fresh("res")
    post = r.choice(["(tot %s)" % res, "(sdot %s %s)" % (res, res), "(* (tot %s) %s)" % (res, g.S(env, 1))])
    body = "(let ((%s %s)) %s)" % (res, expr, post)
    prog = HEADER + "(define (F %s) %s)\n(define X0 %s)\n" % (param, body, x0)
    lines = ["(F X0)", "((gradient-R F) X0)", "((gradient-F F) X0)", "((dR F) X0)", "(fwdgrad F X0)",
             "(fdgrad-h F X0 1e-4)"]
    checks = [("eq", 1, 2, 1e-6), ("eq", 1, 3, 1e-6), ("eq", 1, 4, 1e-6), ("fd", 1, 5, 1e-3)]
    return prog, lines, checks, "optim-%s-%s" % (t, gop if t != "root" else dop)


# ------------------------------------------------------------------ deeprec
def case_deeprec(r, g):
    N = r.randint(50, 200)
    t = r.randrange(7)
    big = r.random() < 0.35   # x itself is the long list
    n = N if big else r.randint(2, 3)
    xn = "x3" if big else "x"   # random expressions see only the first 3 elements of a long x
    z, acc, l, lp, p = fresh("z"), fresh("acc"), fresh("l"), fresh("lp"), fresh("p")
    data = "(map-n (lambda (k) (* 0.9 (sin (* 1.3 k)))) %d)" % N
    L = "x" if big else "D"
    defs = "(define D %s)\n" % data
    if t == 0:   # non-tail recursion carrying x
        s = g.S(Env([z], [(xn, 3 if big else n)]), 2)
        if big:
            s = "(let ((x3 (list (car x) (car (cdr x)) (car (cdr (cdr x)))))) %s)" % s
        defs += "(define (R %s x) (if (null? %s) 0 (+ (* 0.05 %s) (* 0.9 (R (cdr %s) x)))))\n" % (
            l, l, "(let ((%s (car %s))) %s)" % (z, l, s), l)
        body = "(R %s x)" % L
    elif t == 1:   # tail loop with accumulator
        s = g.S(Env([z, acc], [(xn, 3 if big else n)]), 2)
        body = "(let %s ((%s %s) (%s 0)) (if (null? %s) %s (%s (cdr %s) (+ (* 0.95 %s) (* 0.05 (tanh (let ((%s (car %s))) %s)))))))" % (
            lp, l, L, acc, l, acc, lp, l, acc, z, l, s)
    elif t == 2:   # map then fold
        s = g.S(Env([z], [(xn, 3 if big else n)]), 2)
        body = "(* 0.02 (fold + 0 (map (lambda (%s) %s) %s)))" % (z, s, L)
    elif t == 3:   # RNN-like recurrence
        body = "(let %s ((%s %s) (h 0.1)) (if (null? %s) h (%s (cdr %s) (tanh (+ (* (car x) h) (+ (* (list-ref x 1) (car %s)) 0.1))))))" % (
            lp, l, L, l, lp, l, l)
    elif t == 4:   # recursion building a list then reduce
        s = g.S(Env([], [(xn, 3 if big else n)]), 1)
        defs += "(define (B %s x) (if (null? %s) '() (cons (* (car %s) (sin (+ (car x) (car %s)))) (B (cdr %s) x))))\n" % (l, l, l, l, l)
        body = "(+ (* 0.01 (sumsq (B %s x))) (* 0.01 %s))" % (L, s)
    elif t == 5:   # neighbour products over the long list (x itself if big)
        defs += "(define (NB %s) (if (null? (cdr %s)) 0 (+ (* (car %s) (car (cdr %s))) (NB (cdr %s)))))\n" % (l, l, l, l, l)
        body = "(* 0.05 (NB (map2 (lambda (a b) (* a (+ b (car x)))) %s (reverse %s))))" % (L, L)
    else:          # horner / dot / reverse
        body = "(+ (* 0.1 (horner %s (* 0.3 (tanh (car x))))) (* 0.01 (dot %s (reverse %s))))" % (L, L, L)
    if big:
        body = "(let ((x3 (list (car x) (car (cdr x)) (car (cdr (cdr x)))))) %s)" % body
    x0 = rlist(r, n, -0.9, 0.9)
    prog = HEADER + defs + "(define (F x) %s)\n(define X0 %s)\n" % (body, x0)
    lines, checks = scalar_lines((not big) and r.random() < 0.4)
    return prog, lines, checks, "deeprec-%d-%s" % (t, "bigx" if big else "data")


# ------------------------------------------------------------------ repeat
def case_repeat(r, g):
    n = r.randint(2, 3)
    shape = r.choice(["list", "list", "real", "pair"])
    if shape == "list":
        env = Env([], [("x", n)]); param = "x"; x0 = rlist(r, n); b = "(list %s)" % " ".join(["1"] * n)
    elif shape == "real":
        env = Env(["x"], []); param = "x"; x0 = "%.3f" % r.uniform(-1.2, 1.2); b = "1"
    else:
        env = Env(["a"], [("l", n)]); param = "(cons a l)"; x0 = "(cons %.3f %s)" % (r.uniform(-1, 1), rlist(r, n))
        b = "(cons 1 (list %s))" % " ".join(["1"] * n)
    body = g.S(env, r.randint(2, 4))
    N = r.randint(40, 150)
    prog = HEADER + "(define (F %s) %s)\n(define X0 %s)\n(define B %s)\n" % (param, body, x0, b)
    prog += ("(define (rep op n acc) (if (= n 0) acc (rep op (- n 1) (sadd acc (op (axpy (* 0.013 n) B X0))))))\n"
             "(define (Z v) (zer v))\n")
    ops = ["(gradient-R F)", "(gradient-F F)", "(dR F)", "(lambda (x) (fwdgrad F x))", "(lambda (x) (fdgrad F x))"]
    lines = ["(rep F %d 0)" % N]
    for o in ops:
        init = "(Z X0)" if "grad F x" not in o else "(map (lambda (b) (zer (F X0))) (basis X0))"
        lines.append("(rep %s %d %s)" % (o, N, init))
    checks = [("eq", 1, 2, 1e-7), ("eq", 1, 3, 1e-7), ("eq", 1, 4, 1e-7), ("fd", 1, 5, 1e-5)]
    if r.random() < 0.4:
        # second derivatives repeated: gradient of a directional derivative, two ways
        lines.append("(rep (lambda (x) (sdot ((gradient-R F) x) B)) %d 0)" % (N // 2))
        lines.append("(rep (lambda (x) ((dFdir F) x B)) %d 0)" % (N // 2))
        lines.append("(rep (gradient-R (lambda (x) ((dFdir F) x B))) %d (Z X0))" % (N // 2))
        lines.append("(rep (gradient-F (lambda (x) (sdot ((gradient-R F) x) B))) %d (Z X0))" % (N // 2))
        checks += [("eq", 6, 7, 1e-7), ("eq", 8, 9, 1e-7)]
    return prog, lines, checks, "repeat-%s" % shape


CASES = {"nestout": case_nestout, "closarg": case_closarg, "tuplelist": case_tuplelist,
         "hessloop": case_hessloop, "optim": case_optim, "deeprec": case_deeprec, "repeat": case_repeat}


def gen_case(seed, only=None):
    r = random.Random(seed)
    gen.ID[0] = 0
    names = sorted(CASES)
    name = only or names[seed % len(names)]
    nest = r.choice([0, 0, 1]) if name not in ("optim", "hessloop", "repeat") else 0
    g = G(r, nest)
    prog, lines, checks, sub = CASES[name](r, g)
    prog += "".join(l + "\n" for l in lines)
    meta = {"seed": seed, "shape": sub, "kind": name, "nest": nest, "lines": lines, "checks": checks}
    return prog, meta


if __name__ == "__main__":
    s = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    p, m = gen_case(s, sys.argv[2] if len(sys.argv) > 2 else None)
    sys.stdout.write(p)
    sys.stderr.write(repr(m) + "\n")
