"""Loop closures (closed kinematic chains): sidecar, DOF count, Jacobians, kinematics, dynamics.

The mechanism is a planar crank-rocker four-bar on top of a four-wheel cart, written inline as a
URDF + sidecar. Oracles: finite differences of the residual for the Jacobian rows, and the
textbook planar four-bar position solution (intersection of the coupler and rocker circles,
e.g. Norton, *Design of Machinery*, §4.5) for the joint angles.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from wmr_model import kinematics as kin
from wmr_model.dynamics.simulate import simulate_dynamics
from wmr_model.errors import ModelError, ParameterError
from wmr_model.io.sidecar import load_sidecar
from wmr_model.io.urdf import load_urdf
from wmr_model.kinematics.describe import describe, holonomic_jacobian, independent_dof
from wmr_model.terrain.surface import flat
from wmr_model.vehicles.model import compile_vehicle

# Four-bar link lengths [m]: ground d, crank a, coupler b, rocker c. Grashof: a + b < c + d and
# the crank is the shortest link, so the crank turns fully (crank-rocker).
A, B, C, D = 0.12, 0.40, 0.30, 0.35
A0 = np.array([-0.15, 0.30])   # crank pivot (x, z) in the body frame
B0 = A0 + np.array([D, 0.0])   # rocker pivot
PSI2_0 = math.radians(60.0)    # crank direction at zero joint angle, from +x toward +z


def _circle_solution(psi2: float, branch: float) -> tuple[float, float]:
    """Absolute coupler and rocker directions (x-z plane) for crank direction ``psi2``.

    Independent oracle: the rocker tip Q is an intersection of the circle of radius B about the
    crank tip P and the circle of radius C about B0; ``branch`` (+1/-1) picks the intersection.
    """
    P = A0 + A * np.array([math.cos(psi2), math.sin(psi2)])
    dvec = B0 - P
    L = float(np.hypot(*dvec))
    along = (B * B - C * C + L * L) / (2 * L)
    h = math.sqrt(max(B * B - along * along, 0.0))
    u = dvec / L
    Q = P + along * u + branch * h * np.array([-u[1], u[0]])
    psi3 = math.atan2(Q[1] - P[1], Q[0] - P[0])
    psi4 = math.atan2(Q[1] - B0[1], Q[0] - B0[0])
    return psi3, psi4


# The zero joint configuration is the assembled mechanism with the crank at PSI2_0, upper branch.
PSI3_0, PSI4_0 = _circle_solution(PSI2_0, +1.0)


def _pitch(psi: float) -> float:
    """URDF pitch (rotation about +y) that turns the frame's x axis to direction psi in x-z."""
    return -psi


def _link(name: str, mass: float, length: float) -> str:
    izz = mass * length * length / 12.0
    return (f'<link name="{name}"><inertial><origin xyz="{length / 2} 0 0"/><mass value="{mass}"/>'
            f'<inertia ixx="1e-4" ixy="0" ixz="0" iyy="{izz}" iyz="0" izz="{izz}"/>'
            f'</inertial></link>')


def _wheel(name: str, x: float, y: float) -> str:
    return (f'<link name="{name}_link"><inertial><mass value="1.0"/>'
            f'<inertia ixx="0.005" ixy="0" ixz="0" iyy="0.005" iyz="0" izz="0.005"/></inertial>'
            f'</link><joint name="{name}" type="continuous"><parent link="base"/>'
            f'<child link="{name}_link"/><origin xyz="{x} {y} 0"/><axis xyz="0 1 0"/></joint>')


URDF = f"""<robot name="fourbar_cart">
<link name="base"><inertial><mass value="20"/>
<inertia ixx="0.3" ixy="0" ixz="0" iyy="0.5" iyz="0" izz="0.6"/></inertial></link>
{_wheel("FL", 0.3, 0.25)}{_wheel("FR", 0.3, -0.25)}{_wheel("BL", -0.3, 0.25)}{_wheel("BR", -0.3, -0.25)}
{_link("crank_link", 0.5, A)}{_link("coupler_link", 0.8, B)}{_link("rocker_link", 0.6, C)}
<joint name="crank" type="continuous"><parent link="base"/><child link="crank_link"/>
<origin xyz="{A0[0]} 0 {A0[1]}" rpy="0 {_pitch(PSI2_0)} 0"/><axis xyz="0 1 0"/></joint>
<joint name="coupler" type="continuous"><parent link="crank_link"/><child link="coupler_link"/>
<origin xyz="{A} 0 0" rpy="0 {_pitch(PSI3_0 - PSI2_0)} 0"/><axis xyz="0 1 0"/></joint>
<joint name="rocker" type="continuous"><parent link="base"/><child link="rocker_link"/>
<origin xyz="{B0[0]} 0 {B0[1]}" rpy="0 {_pitch(PSI4_0)} 0"/><axis xyz="0 1 0"/></joint>
</robot>"""

SIDECAR = f"""
version: 1
wheels: {{FL: {{radius: 0.1}}, FR: {{radius: 0.1}}, BL: {{radius: 0.1}}, BR: {{radius: 0.1}}}}
actuated: [FL, FR, BL, BR, crank]
loop_closures:
  - {{name: coupler_rocker_pin, type: point, frame_a: coupler, point_a: [{B}, 0, 0],
     frame_b: rocker_link, point_b: [{C}, 0, 0]}}
"""


@pytest.fixture(scope="module")
def cart():
    return compile_vehicle(load_urdf(URDF, SIDECAR))


def _joint_oracle(theta_crank: float) -> tuple[float, float]:
    """Coupler and rocker joint angles implied by the crank angle (joint angle = psi0 - psi)."""
    psi2 = PSI2_0 - theta_crank
    psi3, psi4 = _circle_solution(psi2, +1.0)
    th3 = (psi2 - psi3) - (PSI2_0 - PSI3_0)
    th4 = PSI4_0 - psi4
    wrap = lambda a: (a + math.pi) % (2 * math.pi) - math.pi  # noqa: E731
    return wrap(th3), wrap(th4)


def test_sidecar_zero_configuration_is_assembled_and_dof(cart) -> None:
    assert cart.nlc == 1 and cart.nlr == 3 and cart.nhc == 3
    c, J = holonomic_jacobian(cart)
    assert np.abs(c).max() < 1e-12
    np.testing.assert_array_equal(J[:, :6], 0.0)
    # nv = 6 + 4 wheels + 3 linkage joints; the planar closure removes 2 (its y row is redundant)
    assert cart.nv == 13
    assert independent_dof(cart) == 11
    assert "independent DOF: 11" in describe(cart)
    assert "loop closure coupler_rocker_pin: point coupler - rocker" in describe(cart)


def test_jacobian_matches_finite_differences_for_every_closure_kind() -> None:
    sidecar = SIDECAR + f"""
  - {{name: tie, type: distance, frame_a: crank, point_a: [{A}, 0, 0.05], frame_b: rocker,
     point_b: [0.1, 0.02, 0.0]}}
  - {{name: slot, type: point_on_axis, frame_a: coupler, point_a: [0.2, 0.0, 0.01],
     frame_b: rocker, point_b: [0.05, 0.0, 0.0], axis_b: [1, 0.2, 0.3]}}
"""
    m = compile_vehicle(load_urdf(URDF, sidecar))
    assert m.nlr == 3 + 1 + 2
    c0, _ = holonomic_jacobian(m)
    assert abs(c0[3]) < 1e-12  # default length: the distance at zero joint displacement
    rng = np.random.default_rng(3)
    for _ in range(3):
        q = m.neutral_state()
        q[0:4] = rng.normal(size=4)
        q[0:4] /= np.linalg.norm(q[0:4])
        q[4:] = rng.normal(scale=0.5, size=m.nq - 4)
        c, J = holonomic_jacobian(m, q)
        h = 1e-6
        for k in range(m.nj):
            qp, qm = q.copy(), q.copy()
            qp[7 + k] += h
            qm[7 + k] -= h
            fd = (holonomic_jacobian(m, qp)[0] - holonomic_jacobian(m, qm)[0]) / (2 * h)
            np.testing.assert_allclose(J[:, 6 + k], fd, atol=1e-7)
        # body pose does not change any row: zero body columns are exact
        q2 = q.copy()
        q2[4:7] += [1.0, -2.0, 0.5]
        q2[0:4] = [math.cos(0.4), 0.0, 0.0, math.sin(0.4)]
        np.testing.assert_allclose(holonomic_jacobian(m, q2)[0], c, atol=1e-12)


def test_kinematic_simulation_keeps_closure_and_matches_four_bar_solution(cart) -> None:
    q0, _ = kin.initialize_contact(cart, flat())
    dt, T = 0.01, 3000  # 30 s, the crank turns ~14 times
    rates = np.zeros((T, 5))
    rates[:, :4] = 2.0
    rates[:, 4] = 3.0
    tr = kin.simulate(cart, flat(), q0, rates, dt)
    jc, jr, jk = (cart.joint_index(n) for n in ("coupler", "rocker", "crank"))
    worst = 0.0
    for i in range(0, T + 1, 10):
        c, _ = holonomic_jacobian(cart, tr.q[i])
        worst = max(worst, float(np.abs(c).max()))
        th3, th4 = _joint_oracle(tr.q[i, 7 + jk])
        wrap = lambda a: (a + math.pi) % (2 * math.pi) - math.pi  # noqa: E731
        assert abs(wrap(tr.q[i, 7 + jc] - th3)) < 1e-6
        assert abs(wrap(tr.q[i, 7 + jr] - th4)) < 1e-6
    assert worst < 1e-6
    assert tr.q[-1, 7 + jk] == pytest.approx(3.0 * T * dt, rel=1e-9)


def test_dynamics_keeps_closure_and_matches_four_bar_solution(cart) -> None:
    q0, _ = kin.initialize_contact(cart, flat())
    dt, T = 0.01, 600
    U = np.zeros((T, 5))
    U[:, :4] = 1.0
    U[:, 4] = 4.0
    tr = simulate_dynamics(cart, flat(), q0, np.zeros(cart.nv), U, dt)
    jc, jr, jk = (cart.joint_index(n) for n in ("coupler", "rocker", "crank"))
    wrap = lambda a: (a + math.pi) % (2 * math.pi) - math.pi  # noqa: E731
    worst = 0.0
    for i in range(0, T + 1, 5):
        c, J = holonomic_jacobian(cart, tr.q[i])
        worst = max(worst, float(np.abs(c).max()))
        th3, th4 = _joint_oracle(tr.q[i, 7 + jk])
        assert abs(wrap(tr.q[i, 7 + jc] - th3)) < 1e-6
        assert abs(wrap(tr.q[i, 7 + jr] - th4)) < 1e-6
        if i < T:  # velocity level: the stiff closure damper (LOOP_DAMPING = 1e3 m g s/m)
            # lets the closure open at (closure force) / D, well below 1 mm/s here
            assert np.abs(J @ tr.qdot[i + 1]).max() < 1e-3
    assert worst < 1e-6
    # the cart still drives: wheel rate 1 rad/s x radius 0.1 m for 6 s
    assert tr.q[-1, 4] == pytest.approx(0.6, abs=0.05)


@pytest.mark.parametrize("entry, match", [
    ("{name: x, type: hinge, frame_a: coupler, point_a: [0, 0, 0], frame_b: rocker}",
     r"loop_closures\[0\] \(x\)\.type must be one of"),
    ("{name: x, type: point, frame_a: coupler, frame_b: rocker}",
     r"loop_closures\[0\] \(x\)\.point_a is required"),
    ("{name: x, type: point_on_axis, frame_a: coupler, point_a: [0, 0, 0], frame_b: rocker}",
     r"\(x\)\.axis_b is required for type point_on_axis"),
    ("{name: x, type: distance, frame_a: coupler, point_a: [0, 0, 0], frame_b: rocker, "
     "length: -1}", r"\(x\)\.length must be > 0 m, got -1"),
    ("{name: x, type: point, frame_a: coupler, point_a: [0, 0, 0], frame_b: rocker, "
     "length: 1}", r"\(x\)\.length is only used by type distance"),
])
def test_sidecar_errors_name_the_closure(entry: str, match: str) -> None:
    with pytest.raises(ModelError, match=match):
        load_sidecar(f"version: 1\nloop_closures:\n  - {entry}\n")


def test_unknown_frame_is_reported() -> None:
    bad = SIDECAR.replace("frame_b: rocker_link", "frame_b: nowhere")
    with pytest.raises(ModelError, match=r"loop_closures \(coupler_rocker_pin\)\.frame_b: "
                                         r"'nowhere' is neither a movable joint nor a link"):
        load_urdf(URDF, bad)


def test_joint_constraint_spring_values_reach_the_model() -> None:
    sc = SIDECAR + """
joint_constraints:
  - {name: hold_rocker, terms: {rocker: 1}, offset: 0.0, stiffness: 1234.0, damping: 56.0}
  - {name: plain, terms: {coupler: 1}}
"""
    m = compile_vehicle(load_urdf(URDF, sc))
    assert m.joint_stiffness[0] == 1234.0 and m.joint_damping[0] == 56.0
    assert math.isnan(m.joint_stiffness[1])
    with pytest.raises(ModelError, match=r"hold_rocker\)\.stiffness must be >= 0"):
        load_sidecar(sc.replace("1234.0", "-1.0"))


def test_stiff_ode_baseline_with_penalty_closures_agrees_with_dae(cart) -> None:
    from wmr_model.dynamics.stiff import simulate_stiff

    q0, _ = kin.initialize_contact(cart, flat())
    U = np.zeros((100, 5))
    U[:, :4] = 1.0
    U[:, 4] = 2.0
    kw = dict(actuator="p", actuator_params={"Kp": 200.0})
    s = simulate_stiff(cart, flat(), q0, np.zeros(cart.nv), U, 0.01, **kw)
    d = simulate_dynamics(cart, flat(), q0, np.zeros(cart.nv), U, 0.01, **kw)
    # penalty closure (LOOP_STIFFNESS m g per metre): opens by ~1e-4 m under the link loads
    assert np.abs(holonomic_jacobian(cart, s.q[-1])[0]).max() < 5e-4
    assert np.abs(s.q[-1, 4:7] - d.q[-1, 4:7]).max() < 5e-3
    np.testing.assert_allclose(s.q[-1, 7:], d.q[-1, 7:], atol=5e-3)


def test_ideal_closure_rows_hold_the_velocity_constraint_and_match_penalty(cart) -> None:
    """loop_model "ideal": closure rows of A with their own multipliers (2.65), velocity -c/dt
    (Baumgarte (2.36)); the velocity-level closure then holds to round-off, where the penalty
    damper lets it open at (force)/D."""
    q0, _ = kin.initialize_contact(cart, flat())
    dt, T = 0.01, 150
    U = np.zeros((T, 5))
    U[:, :4] = 1.0
    U[:, 4] = 4.0
    ideal = simulate_dynamics(cart, flat(), q0, np.zeros(cart.nv), U, dt, loop_model="ideal")
    pen = simulate_dynamics(cart, flat(), q0, np.zeros(cart.nv), U, dt, loop_model="penalty")
    jc, jr, jk = (cart.joint_index(n) for n in ("coupler", "rocker", "crank"))
    wrap = lambda a: (a + math.pi) % (2 * math.pi) - math.pi  # noqa: E731
    mg = cart.total_mass * 9.80665
    for i in range(T):
        c, J = holonomic_jacobian(cart, ideal.q[i])
        assert np.abs(c).max() < 1e-6
        assert np.abs(J @ ideal.qdot[i + 1]).max() < 1e-9
        th3, th4 = _joint_oracle(ideal.q[i, 7 + jk])
        assert abs(wrap(ideal.q[i, 7 + jc] - th3)) < 1e-6
        assert abs(wrap(ideal.q[i, 7 + jr] - th4)) < 1e-6
    assert np.sqrt(ideal.cost.max()) < 1e-3 * mg
    # the same motion as the penalty form (whose closure opens by < 1 mm/s)
    assert np.abs(ideal.q - pen.q).max() < 1e-4


def test_unknown_loop_model_is_rejected(cart) -> None:
    q0, _ = kin.initialize_contact(cart, flat())
    with pytest.raises(ParameterError, match=r"loop_model must be one of \['ideal', "
                                             r"'penalty'\], got 'rigid'"):
        simulate_dynamics(cart, flat(), q0, np.zeros(cart.nv), np.zeros((2, 5)), 0.01,
                          loop_model="rigid")
