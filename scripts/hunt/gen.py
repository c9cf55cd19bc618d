#!/usr/bin/env python3
"""Random VLAD program generator for AD mode-agreement hunting.

Each generated program defines one function F of a structured input X (a list of 2-4 reals,
a real, a pair (cons a list), or a 2/3-tuple) whose body uses list operations (map, map2,
fold, dot, list-ref, named let, recursion), closures over reals/data passed to higher-order
functions, `if` on comparisons of active values, and inner derivatives of closures over the
input (gradient-R/F, derivative-R/F, raw *j/j* derivatives, jacobians, hessians, gradient-
descent and Newton steps, min-max style inner ascent).  Then it prints, one per line:
  F(X); gradient-R; gradient-F; raw-reverse; raw-forward (per basis direction); FD;
  optionally the 2nd derivative in 4 nestings + FD of gradient-R;
or, for list-valued F: jacobian by raw forward, raw reverse, FD, and jacobian-R/F.
"""
import random, sys

HEADER = r"""
(define (dR f) (lambda (x) (cdr (unsensitize ((cdr ((*j f) (*j x))) (sensitize 1))))))
(define (dFdir f) (lambda (x dx) (unperturb (tangent ((j* f) (bundle x (perturb dx)))))))
(define (dF1 f) (lambda (x) (unperturb (tangent ((j* f) (bundle x (perturb 1)))))))
(define (axpy h b x) (cond ((real? x) (+ x (* h b))) ((pair? x) (cons (axpy h (car b) (car x)) (axpy h (cdr b) (cdr x)))) (else x)))
(define (zer x) (cond ((real? x) 0) ((pair? x) (cons (zer (car x)) (zer (cdr x)))) (else x)))
(define (sub a b) (cond ((real? a) (- a b)) ((pair? a) (cons (sub (car a) (car b)) (sub (cdr a) (cdr b)))) (else a)))
(define (scl k a) (cond ((real? a) (* k a)) ((pair? a) (cons (scl k (car a)) (scl k (cdr a)))) (else a)))
(define (sdot a b) (cond ((real? a) (* a b)) ((pair? a) (+ (sdot (car a) (car b)) (sdot (cdr a) (cdr b)))) (else 0)))
(define (tot v) (cond ((real? v) v) ((pair? v) (+ (tot (car v)) (tot (cdr v)))) (else 0)))
(define (basis x) (cond ((real? x) (list 1)) ((pair? x) (append (map (lambda (b) (cons b (zer (cdr x)))) (basis (car x))) (map (lambda (b) (cons (zer (car x)) b)) (basis (cdr x))))) (else '())))
(define (fdd f x b) (let ((h 1e-5)) (scl (/ 1 (* 2 h)) (sub (f (axpy h b x)) (f (axpy (- 0 h) b x))))))
(define (fdgrad f x) (map (lambda (b) (fdd f x b)) (basis x)))
(define (fwdgrad f x) (map (lambda (b) ((dFdir f) x b)) (basis x)))
(define (revjac f x) (map (lambda (c) ((dR (lambda (x) (sdot (f x) c))) x)) (basis (f x))))
(define (sq z) (* z z))
(define (twice g z) (g (g z)))
(define ((compose g h) z) (g (h z)))
(define (sum-with g l) (fold (lambda (acc z) (+ acc (g z))) 0 l))
(define (iterate g n z) (if (= n 0) z (iterate g (- n 1) (g z))))
(define (sumsq l) (if (null? l) 0 (+ (* (car l) (car l)) (sumsq (cdr l)))))
(define (horner cs z) (if (null? cs) 0 (+ (car cs) (* z (horner (cdr cs) z)))))
(define (zip-with g a b) (if (null? a) '() (cons (g (car a) (car b)) (zip-with g (cdr a) (cdr b)))))
(define (lsum l) ((reduce + 0) l))
(define (soft-max-ish l) (log (sum-with (lambda (z) (exp (* 0.3 z))) l)))
(define (take-while-sum l lim) (let loop ((l l) (acc 0)) (cond ((null? l) acc) ((> acc lim) acc) (else (loop (cdr l) (+ acc (car l)))))))
(define data (list 0.3 -0.7 1.1 0.5))
"""

ID = [0]
def fresh(p):
    ID[0] += 1
    return "%s%d" % (p, ID[0])

def const(r):
    return "%.2f" % r.uniform(-1.5, 1.5)

class Env:
    def __init__(self, scal, lists):
        self.scal = list(scal)   # names of real-valued vars
        self.lists = list(lists) # (name, length)
    def add_s(self, n): return Env(self.scal + [n], self.lists)
    def add_l(self, n, k): return Env(self.scal, self.lists + [(n, k)])

class G:
    def __init__(self, r, nest):
        self.r = r
        self.nest = nest  # remaining inner-AD nesting budget

    # ---------------- scalar expressions ----------------
    def leaf(self, env):
        r = self.r
        c = r.random()
        if c < 0.3 and (env.scal or env.lists):
            # prefer the most recently bound variable (an inner lambda's own argument)
            if env.lists and (not env.scal or r.random() < 0.5):
                n, k = env.lists[-1]
                return "(list-ref %s %d)" % (n, r.randrange(k)) if r.random() < 0.6 else "(car %s)" % n
            return env.scal[-1]
        c = r.random() * 0.95
        if env.scal and c < 0.55:
            return r.choice(env.scal)
        if env.lists and c < 0.85:
            n, k = r.choice(env.lists)
            i = r.randrange(k)
            return r.choice(["(list-ref %s %d)" % (n, i), "(car %s)" % n if i == 0 else "(list-ref %s %d)" % (n, i),
                             ("(car (cdr %s))" % n) if k > 1 else "(car %s)" % n])
        return const(r)

    def S(self, env, d):
        r = self.r
        if d <= 0 or r.random() < 0.2:
            return self.leaf(env)
        w = [("bin", 6), ("un", 5), ("if", 1.5), ("list", 4 if env.lists else 0.3), ("let", 1.2),
             ("clos", 1.5), ("inner", 2.5 if self.nest > 0 else 0), ("loop", 1), ("kink", 0.4)]
        kind = r.choices([k for k, _ in w], [x for _, x in w])[0]
        if kind == "bin":
            op = r.choice(["+", "-", "*", "*", "/", "atan", "expt"])
            a, b = self.S(env, d - 1), self.S(env, d - 1)
            if op == "/":
                return "(/ %s (+ 1.5 (sq %s)))" % (a, b)
            if op == "atan":
                return "(atan %s (+ 2 (sq %s)))" % (a, b)
            if op == "expt":
                return "(expt (+ 1 (sq %s)) %s)" % (a, r.choice(["0.5", "1.5", "2", "3", "-0.5"]))
            return "(%s %s %s)" % (op, a, b)
        if kind == "un":
            a = self.S(env, d - 1)
            op = r.choice(["sin", "cos", "exp", "sqrt", "log", "tanh", "sq"])
            if op == "exp": return "(exp (* 0.3 %s))" % a
            if op == "sqrt": return "(sqrt (+ 1 (sq %s)))" % a
            if op == "log": return "(log (+ 1.2 (sq %s)))" % a
            return "(%s %s)" % (op, a)
        if kind == "kink":
            op = r.choice(["max", "min", "abs"])
            if op == "abs": return "(abs (+ 3 %s))" % self.S(env, d - 1)
            return "(%s %s (+ 5 %s))" % (op, self.S(env, d - 1), self.S(env, d - 1))
        if kind == "if":
            cmp = r.choice(["<", ">", "<=", ">="])
            return "(if (%s %s %s) %s %s)" % (cmp, self.S(env, 1), self.S(env, 1), self.S(env, d - 1), self.S(env, d - 1))
        if kind == "list":
            return self.list_to_scalar(env, d)
        if kind == "let":
            v = fresh("v")
            if r.random() < 0.6 or not env.lists:
                return "(let ((%s %s)) %s)" % (v, self.S(env, d - 1), self.S(env.add_s(v), d - 1))
            k = r.randint(2, 3)
            return "(let ((%s %s)) %s)" % (v, self.L(env, d - 1, k), self.S(env.add_l(v, k), d - 1))
        if kind == "clos":
            return self.closure_use(env, d)
        if kind == "inner":
            return self.inner_scalar(env, d)
        if kind == "loop":
            n = r.randint(1, 3)
            i, a, lp = fresh("i"), fresh("a"), fresh("lp")
            body = self.S(env.add_s(a), 2)
            return "(let %s ((%s 0) (%s %s)) (if (= %s %d) %s (%s (+ %s 1) (* 0.5 %s))))" % (
                lp, i, a, self.S(env, 1), i, n, a, lp, i, body)
        return self.leaf(env)

    def lam1(self, env, d):
        z = fresh("z")
        return "(lambda (%s) %s)" % (z, self.S(env.add_s(z), d))

    def closure_use(self, env, d):
        r = self.r
        g = fresh("g")
        lam = self.lam1(env, max(1, d - 1))
        c = r.randrange(6)
        if c == 0:
            use = "(+ (%s %s) (%s %s))" % (g, self.S(env, 1), g, self.S(env, 1))
        elif c == 1:
            use = "(twice %s %s)" % (g, self.S(env, 1))
        elif c == 2:
            use = "(iterate %s %d %s)" % (g, r.randint(1, 3), self.S(env, 1))
        elif c == 3:
            use = "((compose %s %s) %s)" % (g, r.choice(["sin", "tanh", g, self.lam1(env, 1)]), self.S(env, 1))
        elif c == 4:
            use = "(sum-with %s %s)" % (g, self.L(env, 1, r.randint(2, 3)))
        else:
            use = "(fold + 0 (map %s %s))" % (g, self.L(env, 1, r.randint(2, 4)))
        return "(let ((%s %s)) %s)" % (g, lam, use)

    def list_to_scalar(self, env, d):
        r = self.r
        k = r.randint(2, 4)
        if env.lists and r.random() < 0.6:
            n, k = r.choice(env.lists)
            L = n
        else:
            L = self.L(env, d - 1, k)
        c = r.randrange(13)
        if c == 0: return "(dot %s %s)" % (L, self.L(env, d - 1, k))
        if c == 1: return "(fold + 0 %s)" % L
        if c == 2:
            acc, z = fresh("acc"), fresh("z")
            return "(fold (lambda (%s %s) %s) %s %s)" % (acc, z, self.S(env.add_s(acc).add_s(z), 2), self.S(env, 1), L)
        if c == 3: return "(list-ref %s %d)" % (L, r.randrange(k))
        if c == 4: return "(magnitude %s)" % L
        if c == 5: return "(distance %s (v+ %s (list %s)))" % (L, self.L(env, d - 1, k), " ".join(["0.9"] * k))
        if c == 6:
            l, acc = fresh("l"), fresh("acc")
            lp = fresh("lp")
            step = r.choice(["(+ (* %s 0.7) (car %s))" % (acc, l), "(+ %s (sin (car %s)))" % (acc, l),
                             "(* %s (+ 1 (* 0.2 (car %s))))" % (acc, l)])
            return "(let %s ((%s %s) (%s %s)) (if (null? %s) %s (%s (cdr %s) %s)))" % (lp, l, L, acc, self.S(env, 1), l, acc, lp, l, step)
        if c == 7: return "(sumsq %s)" % L
        if c == 8: return "(horner %s %s)" % (L, self.S(env, 1))
        if c == 9: return "(soft-max-ish %s)" % L
        if c == 10: return "(lsum %s)" % L
        if c == 11: return "(take-while-sum %s %s)" % (L, self.S(env, 1))
        return "(car (reverse %s))" % L

    # ---------------- list expressions of length k ----------------
    def L(self, env, d, k):
        r = self.r
        cands = [n for n, kk in env.lists if kk == k]
        if d <= 0 or r.random() < 0.15:
            if cands and r.random() < 0.7:
                return r.choice(cands)
            return "(list %s)" % " ".join(self.S(env, 0) for _ in range(k))
        c = r.randrange(12)
        if c == 0 and cands: return r.choice(cands)
        if c == 1:
            z = fresh("z")
            return "(map (lambda (%s) %s) %s)" % (z, self.S(env.add_s(z), d - 1), self.L(env, d - 1, k))
        if c == 2:
            a, b = fresh("a"), fresh("b")
            return "(%s (lambda (%s %s) %s) %s %s)" % (r.choice(["map2", "zip-with"]), a, b, self.S(env.add_s(a).add_s(b), d - 1),
                                                      self.L(env, d - 1, k), self.L(env, d - 1, k))
        if c == 3: return "(list %s)" % " ".join(self.S(env, d - 1) for _ in range(k))
        if c == 4: return "(reverse %s)" % self.L(env, d - 1, k)
        if c == 5: return "(%s %s %s)" % (r.choice(["v+", "v-"]), self.L(env, d - 1, k), self.L(env, d - 1, k))
        if c == 6: return "(k*v %s %s)" % (self.S(env, d - 1), self.L(env, d - 1, k))
        if c == 7 and k >= 2:
            j = r.randint(1, k - 1)
            return "(append %s %s)" % (self.L(env, d - 1, j), self.L(env, d - 1, k - j))
        if c == 8: return "(cdr %s)" % self.L(env, d - 1, k + 1)
        if c == 9 and self.nest > 0: return self.inner_list(env, d, k)
        if c == 10:
            i = fresh("i")
            return "(map-n (lambda (%s) (* (+ %s 1) %s)) %d)" % (i, i, self.S(env, d - 1), k)
        if c == 11:
            g = fresh("g")
            return "(let ((%s %s)) (map %s %s))" % (g, self.lam1(env, d - 1), g, self.L(env, d - 1, k))
        return "(list %s)" % " ".join(self.S(env, d - 1) for _ in range(k))

    # ---------------- inner derivatives ----------------
    def sub_gen(self):
        return G(self.r, self.nest - 1)

    def inner_fn_list(self, env, m, d):
        """(lambda (y) S[y list of m, env])"""
        y = fresh("y")
        sg = self.sub_gen()
        body = sg.S(env.add_l(y, m), d)
        if self.r.random() < 0.3:
            body = "(+ (* 0.5 (sumsq %s)) %s)" % (y, body)   # make it more convex for GD
        return "(lambda (%s) %s)" % (y, body)

    def inner_fn_real(self, env, d):
        t = fresh("t")
        return "(lambda (%s) %s)" % (t, self.sub_gen().S(env.add_s(t), d))

    def grad_op(self):
        return self.r.choice(["gradient-R", "gradient-F", "dR", "gradient-R", "gradient-F"])

    def der_op(self):
        return self.r.choice(["derivative-R", "derivative-F", "dR", "dF1"])

    def inner_list(self, env, d, k):
        """an inner-AD expression returning a list of length k"""
        r = self.r
        c = r.randrange(5)
        if c == 0:
            return "((%s %s) %s)" % (self.grad_op(), self.inner_fn_list(env, k, 2), self.L(env, 1, k))
        if c in (1, 2):   # several steps of gradient descent (or ascent), then the point
            y, i, lp = fresh("y"), fresh("i"), fresh("lp")
            g = self.inner_fn_list(env, k, 2)
            K = r.randint(1, 3)
            sgn = r.choice(["v-", "v+"])
            return "(let %s ((%s %s) (%s 0)) (if (= %s %d) %s (%s (%s %s (k*v 0.1 ((%s %s) %s))) (+ %s 1))))" % (
                lp, y, self.L(env, 1, k), i, i, K, y, lp, sgn, y, self.grad_op(), g, y, i)
        if c == 3:
            ys = fresh("ys")
            fn = "(lambda (%s) %s)" % (ys, self.sub_gen().L(env.add_l(ys, k), 2, k))
            jop = r.choice(["jacobian-R", "jacobian-F"])
            return "(map lsum ((%s %s) %s))" % (jop, fn, self.L(env, 1, k))
        # hessian-vector product / vjp / directional derivative
        fn = self.inner_fn_list(env, k, 2)
        c2 = r.randrange(3)
        if c2 == 0:
            return "((hessian-vector-product %s) %s %s)" % (fn, self.L(env, 1, k), self.L(env, 1, k))
        ys = fresh("ys")
        lf = "(lambda (%s) %s)" % (ys, self.sub_gen().L(env.add_l(ys, k), 2, k))
        if c2 == 1:
            return "((vjp %s) %s %s)" % (lf, self.L(env, 1, k), self.L(env, 1, k))
        return "((directional-derivative %s) %s %s)" % (lf, self.L(env, 1, k), self.L(env, 1, k))

    def inner_scalar(self, env, d):
        r = self.r
        c = r.randrange(8)
        if c == 0:
            return "((%s %s) %s)" % (self.der_op(), self.inner_fn_real(env, 2), self.S(env, 1))
        if c == 1:   # damped Newton step
            t0, g = fresh("t0"), fresh("g")
            D = self.der_op()
            D2 = self.der_op()
            return "(let* ((%s %s) (%s %s)) (- %s (/ ((%s %s) %s) (+ 2 (sq ((%s (%s %s)) %s))))))" % (
                g, self.inner_fn_real(env, 2), t0, self.S(env, 1), t0, D, g, t0, D2, D, g, t0)
        if c == 2:
            k = r.randint(2, 3)
            return "(dot %s %s)" % (self.inner_list(env, d, k), self.L(env, 1, k))
        if c == 3:
            k = r.randint(2, 3)
            return "(lsum %s)" % self.inner_list(env, d, k)
        if c == 4:   # min-max: payoff at the y found by inner ascent
            k = r.randint(2, 3)
            y, i, lp, p = fresh("y"), fresh("i"), fresh("lp"), fresh("p")
            yy = fresh("yy")
            body = self.sub_gen().S(env.add_l(yy, k), 2)
            pay = "(lambda (%s) (- %s (sumsq %s)))" % (yy, body, yy)
            return ("(let* ((%s %s) (%s (let %s ((%s %s) (%s 0)) (if (= %s 2) %s (%s (v+ %s (k*v 0.2 ((%s %s) %s))) (+ %s 1))))))"
                    " (%s %s))") % (p, pay, y, lp, y, self.L(env, 1, k), i, i, y, lp, y, self.grad_op(), p, y, i, p, y)
        if c == 5:
            k = r.randint(2, 3)
            return "(tot ((hessian %s) %s))" % (self.inner_fn_list(env, k, 2), self.L(env, 1, k))
        if c == 6:   # gradient of a function that itself takes a gradient
            t = fresh("t")
            k = r.randint(2, 3)
            inner = "((%s %s) %s)" % (self.grad_op(), self.inner_fn_list(env.add_s(t), k, 2), self.L(env.add_s(t), 1, k))
            return "((%s (lambda (%s) (lsum %s))) %s)" % (self.der_op(), t, inner, self.S(env, 1))
        # raw primitives inline
        t = fresh("t")
        f = self.inner_fn_real(env, 2)
        c3 = r.randrange(4)
        if c3 == 0:   # value of f through *j and *j-inverse, plus its derivative via the backpropagator
            rr = fresh("r")
            return "(let ((%s ((*j %s) (*j %s)))) (+ (*j-inverse (car %s)) (cdr (unsensitize ((cdr %s) (sensitize %s))))))" % (
                rr, f, self.S(env, 1), rr, rr, self.S(env, 1))
        if c3 == 1:   # primal and tangent of one forward call
            b = fresh("b")
            return "(let ((%s ((j* %s) (bundle %s (perturb %s))))) (* (primal %s) (unperturb (tangent %s))))" % (
                b, f, self.S(env, 1), self.S(env, 1), b, b)
        if c3 == 2:
            return "(cdr (unsensitize ((cdr ((*j %s) (*j %s))) (sensitize 1))))" % (f, self.S(env, 1))
        return "(unperturb (tangent ((j* %s) (bundle %s (perturb 1)))))" % (f, self.S(env, 1))


def gen_case(seed):
    r = random.Random(seed)
    ID[0] = 0
    nest = r.choice([0, 1, 1, 1, 2])
    g = G(r, nest)
    shape = r.choice(["list", "list", "list", "real", "pair", "tuple2", "tuple3"])
    listout = r.random() < 0.25
    d = r.randint(2, 4)
    if shape == "list":
        n = r.randint(2, 4)
        env = Env([], [("x", n)])
        param = "x"
        x0 = "(list %s)" % " ".join("%.3f" % r.uniform(-1.2, 1.2) for _ in range(n))
        if r.random() < 0.3:
            names = ["x%d" % i for i in range(n)]
            param = "(list %s)" % " ".join(names)
            env = Env(names, [])
            if r.random() < 0.5:
                param = "x"
                body_wrap = "(let (((list %s) x)) %%s)" % " ".join(names)
                env = Env(names, [("x", n)])
            else:
                body_wrap = "%s"
        else:
            body_wrap = "%s"
        fdef_param = param
    elif shape == "real":
        env = Env(["x"], [])
        fdef_param = "x"; body_wrap = "%s"
        x0 = "%.3f" % r.uniform(-1.2, 1.2)
    elif shape == "pair":
        n = r.randint(2, 3)
        env = Env(["a"], [("l", n)])
        fdef_param = "(cons a l)"; body_wrap = "%s"
        x0 = "(cons %.3f (list %s))" % (r.uniform(-1, 1), " ".join("%.3f" % r.uniform(-1.2, 1.2) for _ in range(n)))
    elif shape == "tuple2":
        env = Env(["a", "b"], [])
        fdef_param = "(cons a b)"; body_wrap = "%s"
        x0 = "(cons %.3f %.3f)" % (r.uniform(-1, 1), r.uniform(-1, 1))
    else:
        env = Env(["a", "b", "c"], [])
        fdef_param = "(cons* a b c)"; body_wrap = "%s"
        x0 = "(cons* %.3f %.3f %.3f)" % (r.uniform(-1, 1), r.uniform(-1, 1), r.uniform(-1, 1))
    if listout:
        k = r.randint(2, 3)
        body = g.L(env, d, k)
    else:
        body = g.S(env, d)
        if r.random() < 0.5 and nest > 0:
            body = "(+ %s %s)" % (body, g.inner_scalar(env, 2))
    body = body_wrap % body
    prog = HEADER + "(define (F %s) %s)\n(define X0 %s)\n" % (fdef_param, body, x0)
    lines = ["(F X0)"]
    if not listout:
        second = r.random() < (0.5 if nest <= 1 else 0.25)
        lines += ["((gradient-R F) X0)", "((gradient-F F) X0)", "((dR F) X0)", "(fwdgrad F X0)", "(fdgrad F X0)"]
        if second:
            lines += ["(map (lambda (b) ((dFdir (gradient-R F)) X0 b)) (basis X0))",   # FR
                      "(map (lambda (b) ((dFdir (gradient-F F)) X0 b)) (basis X0))",   # FF
                      "(map (lambda (b) ((dR (lambda (x) (sdot ((gradient-R F) x) b))) X0)) (basis X0))",  # RR
                      "(map (lambda (b) ((dR (lambda (x) (sdot ((gradient-F F) x) b))) X0)) (basis X0))",  # RF
                      "(fdgrad (gradient-R F) X0)"]
        kind = "scalar2" if second else "scalar"
    else:
        lines += ["(fwdgrad F X0)", "(revjac F X0)", "(fdgrad F X0)"]
        if shape == "list":
            lines += ["((jacobian-R F) X0)", "((jacobian-F F) X0)"]
        kind = "listout"
    prog += "".join(l + "\n" for l in lines)
    meta = {"seed": seed, "shape": shape, "kind": kind, "nest": nest, "lines": lines}
    return prog, meta

if __name__ == "__main__":
    s = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    p, m = gen_case(s)
    sys.stdout.write(p)
    sys.stderr.write(repr(m) + "\n")
