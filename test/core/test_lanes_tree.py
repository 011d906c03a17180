"""Lane forward kinematics, sine/cosine and Euler step against the scalar float64 kernels."""

from __future__ import annotations

import math

import numpy as np
import pytest

from wmr_model._jit import njit
from wmr_model.io.vehicles import load_vehicle
from wmr_model.kinematics.integrate import integrate_euler
from wmr_model.kinematics.lanes.tree import euler_lanes, fk_lanes, sincos_lanes
from wmr_model.vehicles.tree import forward_kinematics

F32_EPS = float(np.finfo(np.float32).eps)


@njit
def _sincos_all(x, s, c):
    for l in range(x.shape[0]):
        s[l], c[l] = sincos_lanes(x[l])


def test_sincos_lanes_within_ulps_of_libm():
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.uniform(-4, 4, 4000), rng.uniform(-6000, 6000, 4000),
                        (np.arange(-40, 41) * (math.pi / 4)),
                        [0.0, -0.0, 1e-30, math.pi / 4]]).astype(np.float32)
    s, c = np.empty_like(x), np.empty_like(x)
    _sincos_all(x, s, c)
    xd = x.astype(np.float64)  # the float32 angle, exactly
    # |error| within 4 float32 ulp of 1 (the result's magnitude bound): reduction with a three
    # part pi/2 and a series truncated below float32 rounding
    assert np.max(np.abs(s - np.sin(xd))) < 4 * F32_EPS
    assert np.max(np.abs(c - np.cos(xd))) < 4 * F32_EPS


def _states(model, W, rng):
    q = np.zeros((W, model.nq))
    for l in range(W):
        o = rng.normal(size=4)
        o /= np.linalg.norm(o)
        o *= np.sign(o[0])
        q[l, 0:4] = o
        q[l, 4:7] = rng.uniform(-5, 5, 3)
        q[l, 7:] = rng.uniform(-0.5, 0.5, model.nq - 7)
        q[l, 7 + np.asarray(model.actuated_joints)] = rng.uniform(-300, 300, 4)  # wheel spin
    return q


@pytest.mark.parametrize("W", [16, 5])
def test_fk_lanes_matches_scalar_forward_kinematics(W):
    model = load_vehicle("zoe")
    m = model.kinematic_arrays()
    # the oracle takes the float32 state itself (a 300 rad spin angle is rounded by 1.5e-5 rad
    # in float32: a property of the state's precision, not of the kernel under test)
    q = _states(model, W, np.random.default_rng(W)).astype(np.float32).astype(np.float64)
    nf = m.parent.shape[0]
    R = np.empty((nf, 3, 3, W), np.float32)
    p = np.empty((nf, 3, W), np.float32)
    fk_lanes(m, np.ascontiguousarray(q.T.astype(np.float32)), R, p)
    T = np.empty((nf, 4, 4))
    for l in range(W):
        forward_kinematics(m.parent, m.jtype, m.axis, m.T0, q[l], T)
        # rotations: a few ulp per composed frame (depth <= 3) plus the state's own rounding;
        # positions: the same relative to the 5 m scale of the state
        assert np.max(np.abs(R[..., l] - T[:, :3, :3])) < 30 * F32_EPS
        assert np.max(np.abs(p[..., l] - T[:, :3, 3])) < 30 * F32_EPS * 5.0


@pytest.mark.parametrize("W", [16, 5])
def test_euler_lanes_matches_scalar_integrate_euler(W):
    model = load_vehicle("zoe")
    rng = np.random.default_rng(7 + W)
    q = _states(model, W, rng).astype(np.float32).astype(np.float64)
    qdot = rng.normal(size=(W, model.nv))
    qdot[0, 0:3] = [1e-6, 0.0, 0.0]  # the small-angle branch
    qdot[1, 0:3] = 0.0
    qdot[2, 0:3] = [40.0, -30.0, 10.0]  # a large rotation in one step
    qdot = qdot.astype(np.float32).astype(np.float64)
    dt = 0.04
    qn = np.empty((model.nq, W), np.float32)
    euler_lanes(np.ascontiguousarray(q.T.astype(np.float32)),
                np.ascontiguousarray(qdot.T.astype(np.float32)), dt, qn)
    ref = np.empty(model.nq)
    for l in range(W):
        integrate_euler(q[l], qdot[l], dt, ref)
        assert np.max(np.abs(qn[0:4, l] - ref[0:4])) < 20 * F32_EPS
        assert np.max(np.abs(qn[4:7, l] - ref[4:7])) < 20 * F32_EPS * 5.0
        assert np.max(np.abs(qn[7:, l] - ref[7:])) < 4 * F32_EPS * 300.0
