"""Actuator models f_act = f(theta_dot_act, u) (Seegmiller 2014, eq. 2.73).

Each actuated joint has a kind and a parameter row ``[Kp, f_max, tau_stall, w_noload]``:

* ``IDEAL`` - supplies whatever force meets the commanded rate (§2.4.4, OpenDE "motors");
  handled by the force balance (the joint rate is set to ``u``), never evaluated here.
* ``P_CONTROLLER`` - proportional rate controller with a force/torque limit (2.72):
  ``f = clip(Kp (u - theta_dot), -f_max, f_max)``.
* ``DC_MOTOR`` - proportional controller limited by a DC motor's linear torque-speed curve:
  the available torque in the direction of rotation falls from ``tau_stall`` at standstill to
  zero at ``w_noload``, ``-tau_stall (1 + w / w_noload) <= f <= tau_stall (1 - w / w_noload)``.

Units: torque [N m] and rate [rad/s] for revolute joints, force [N] and [m/s] for prismatic.
"""

from __future__ import annotations

from wmr_model._jit import njit

__all__ = ["IDEAL", "P_CONTROLLER", "DC_MOTOR", "ACTUATOR_KINDS", "actuator_force"]

IDEAL = 0
P_CONTROLLER = 1
DC_MOTOR = 2
ACTUATOR_KINDS = {"ideal": IDEAL, "p": P_CONTROLLER, "dc_motor": DC_MOTOR}


@njit(refcount=False)
def actuator_force(kind, p, w, u):
    """Actuator force and its derivative with respect to the joint rate ``w``, (2.73)."""
    Kp = p[0]
    f = Kp * (u - w)
    df = -Kp
    if kind == P_CONTROLLER:
        lo, hi = -p[1], p[1]
        dlo = 0.0
        dhi = 0.0
    else:
        hi = p[2] * (1.0 - w / p[3])
        lo = -p[2] * (1.0 + w / p[3])
        dhi = -p[2] / p[3]
        dlo = -p[2] / p[3]
    if f > hi:
        return hi, dhi
    if f < lo:
        return lo, dlo
    return f, df
