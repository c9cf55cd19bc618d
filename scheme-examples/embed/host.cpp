// host.cpp — embedding vlad in a C++ program (SPEC §7, docs/embedding.md).
// The host supplies the physics: a quadratic air-drag force, registered as a VLAD primitive together
// with its partial derivatives. VLAD code simulates a ball thrown straight up and measures how far
// it ends from a target height; the host then finds the launch speed by gradient descent, taking
// the derivative of the whole simulation — host primitive included — with reverse-mode AD.
#include <vlad/vlad.hpp>

#include <cmath>
#include <cstdio>
#include <vector>

namespace {

const double kSmooth = 1e-6;  // |v| is smoothed as sqrt(v² + kSmooth) so the force is differentiable

// Drag force per unit mass on a body moving at velocity v with drag coefficient c: -c v |v|.
double drag(const std::vector<double>& a) {
  double v = a[0], c = a[1];
  return -c * v * std::sqrt(v * v + kSmooth);
}
// ∂drag/∂v and ∂drag/∂c.
double drag_dv(const std::vector<double>& a) {
  double v = a[0], c = a[1], s = std::sqrt(v * v + kSmooth);
  return -c * (s + v * v / s);
}
double drag_dc(const std::vector<double>& a) {
  double v = a[0];
  return -v * std::sqrt(v * v + kSmooth);
}

const char* program = R"VLAD(
(define gravity 9.81)
(define dt 0.01)
(define steps 100)   ; one second
(define c 0.05)      ; drag coefficient

;; Height after `steps` explicit Euler steps of a ball launched upward at speed v0.
(define (height v0)
  (let loop ((i 0) (x 0) (v v0))
    (if (= i steps)
        x
        (loop (+ i 1) (+ x (* dt v)) (+ v (* dt (- (drag v c) gravity)))))))

;; Squared miss distance from a target height of 10 m.
(define (loss v0)
  (let ((miss (- (height v0) 10)))
    (* miss miss)))
)VLAD";

}  // namespace

int main() {
  try {
    vlad::Interpreter vm;
    vm.define_primitive("drag", 2, vlad::HostFunction(drag, {drag_dv, drag_dc}));
    vm.eval_string(program, "host.cpp:program");

    vlad::Value loss = vm.global("loss");
    vlad::Value height = vm.global("height");
    double v0 = 5.0;
    const double rate = 1.5;  // about 1 / (d²loss/dv0²): close to a Newton step
    std::printf("minimising the miss distance over the launch speed v0\n");
    for (int step = 0; step < 100; step++) {
      double l = vlad::to_real(vm.call(loss, v0));
      double g = vm.gradient(loss, v0);
      std::printf("step %2d: v0 = %9.6f  loss = %.3e  dloss/dv0 = %+.3e\n", step, v0, l, g);
      if (std::fabs(g) < 1e-8) break;
      v0 -= rate * g;
    }
    double h = vlad::to_real(vm.call(height, v0));
    std::printf("launch speed %.6f m/s reaches %.6f m after 1 s\n", v0, h);

    // Derivatives of the simulation are available directly too: dh/dv0 in both modes.
    double forward = vlad::to_real(vm.derivative(height, v0));
    double reverse = vm.gradient(height, v0);
    std::printf("dheight/dv0 = %.6f (forward) %.6f (reverse)\n", forward, reverse);

    // Errors in VLAD code arrive as vlad::Error, with a location; the interpreter stays usable.
    try {
      vm.eval_string("(height (cons 1 2))", "oops.vlad");
    } catch (const vlad::Error& e) {
      std::printf("caught: %s\n", e.located().c_str());
    }
    std::printf("still usable: (height 0) = %.6f\n", vlad::to_real(vm.call(height, 0.0)));
  } catch (const vlad::Error& e) {
    std::fprintf(stderr, "%s\n", e.report().c_str());
    return 1;
  }
  return 0;
}
