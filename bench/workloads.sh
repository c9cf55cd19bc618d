# bench/workloads.sh — workload files made from the shared ones and the examples, sourced by
# bench/run.sh and bench/instructions.sh (bash; no output of its own).

# w4file MODE K CALLS: W4's k-th derivative by k-fold nesting of dF (MODE F) or dR (MODE R): the
# first call's form, then CALLS calls twice (the first batch finishes compiling, the second is timed).
w4file() {
  local d=dF; [ "$1" = R ] && d=dR
  cat <<W4
(define (dF f) (lambda (x) (unperturb (tangent ((j* f) (bundle x (perturb 1)))))))
(define (dR f) (lambda (x) (cdr (unsensitize ((cdr ((*j f) (*j x))) (sensitize 1))))))
(define (g x) (exp (sin x)))
(define (nest d k f) (if (= k 0) f (nest d (- k 1) (d f))))
(define (repeat k thunk last) (if (= k 0) last (repeat (- k 1) thunk (thunk))))
(define h (nest $d $2 g))
(h 0.5)
(repeat $3 (lambda () (h 0.5)) 0)
(repeat $3 (lambda () (h 0.5)) 0)
W4
}

# particle_file NESTING EXAMPLES_DIR: scheme-examples/particle.vlad with only one of its four
# aims (ff, fr, rf or rr: outer and inner mode) and none of the other demonstrations.
particle_file() {
  awk '/^\(define ff / { exit } /^;; dE\/dw at w = 0/ { skip = 1 } /^;; Minimise E/ { skip = 0 } !skip { print }' \
    "$2/particle.vlad"
  grep "^(define $1 " "$2/particle.vlad"
}
