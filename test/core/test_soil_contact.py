"""Bekker-Wong rigid wheel, soil presets and ROAMS traction variability vs closed forms."""

import math

import numpy as np
import pytest
from scipy import integrate, special

from wmr_model.contact import MODEL_KINDS, contact_force, default_params, roams
from wmr_model.contact import bekker as bk
from wmr_model.contact.models import FD_REL_STEP, _params_vector
from wmr_model.errors import ParameterError
from wmr_model.experiments.soil import sinkage_for_load, wheel_equilibrium, wheel_params
from wmr_model.parameters import get_spec
from wmr_model.terrain.soil import SOIL_PARAMETER_NAMES, SOIL_PRESETS, get_soil

R, B = 0.065, 0.05


def _stresses(p, s, h, beta=0.0):
    out = np.empty(7)
    bk.wheel_stresses(p, s, beta, h, bk.N_THETA, out)
    return out


@pytest.mark.parametrize("soil", sorted(SOIL_PRESETS))
def test_bekker_c0_full_slip_traction_is_coulomb_with_tan_phi(soil):
    """c = 0, fully mobilised shear (tiny K, s = 1): patch shear = tan(phi) x patch normal."""
    p = wheel_params(soil, R, B, c=0.0, K=1e-9)
    out = _stresses(p, 1.0, 0.01)
    assert out[5] == pytest.approx(math.tan(p[1]) * out[4], rel=1e-12)
    # the wheel's traction/load ratio tends to tan(phi) as the contact arc shrinks (the stress
    # directions tilt by up to theta1 ~ sqrt(2 h / R) from the vertical)
    ratios = [(o := _stresses(p, 1.0, h))[0] / o[2] for h in (1e-4, 1e-6, 1e-8)]
    assert abs(ratios[-1] - math.tan(p[1])) < abs(ratios[0] - math.tan(p[1]))
    assert ratios[-1] == pytest.approx(math.tan(p[1]), rel=2e-3)


@pytest.mark.parametrize("seed", range(3))
def test_bekker_shear_never_exceeds_mohr_coulomb(seed):
    rng = np.random.default_rng(seed)
    for _ in range(30):
        p = wheel_params("sandy_loam", R, B, c=0.0, K=rng.uniform(1e-4, 0.05))
        out = _stresses(p, rng.uniform(-1, 1), rng.uniform(1e-4, 0.03), rng.uniform(0, 1.2))
        assert out[5] <= math.tan(p[1]) * out[4] * (1 + 1e-12)


def test_roams_c0_slip_limit_is_coulomb_with_tan_phi():
    p = _params_vector("roams", default_params("roams", 100.0, 10.0, R, B),
                       {"c": 0.0, "phi": 0.5}, "test")
    fc, J = np.empty(3), np.empty((3, 5))
    roams.roams(p, np.array([3.0, -4.0, 0.0]), 0.0, -0.01, fc, J)
    assert math.hypot(fc[0], fc[1]) == pytest.approx(math.tan(0.5) * fc[2], rel=1e-14)


def test_bekker_load_matches_independent_quadrature():
    """Front-only stress (c1 = c2 = 0), no shear (huge K): f_z = R b ∫ p cos(theta)."""
    p = wheel_params("dry_sand", R, B, c1=0.0, c2=0.0, K=1e6)
    h = 0.01
    th1 = math.acos(1 - h / R)
    k = p[2] / B + p[3]
    fz, _ = integrate.quad(lambda t: k * (R * (math.cos(t) - math.cos(th1))) ** p[4]
                           * math.cos(t) * R * B, 0.0, th1)
    assert _stresses(p, 0.0, h)[2] == pytest.approx(fz, rel=1e-3)


@pytest.mark.parametrize("soil", ["dry_sand", "sandy_loam", "lunar_regolith"])
def test_bekker_static_sinkage_vs_closed_form(soil):
    """Bekker's z0 replaces ∫_0^1 (1 - u^2)^n du by (3 - n)/3; with the exact integral the
    closed form is the small-sinkage limit of the wheel model (contact length sqrt(D z))."""
    p = wheel_params(soil, R, B, c1=0.0, c2=0.0, K=1e6)
    n = p[4]
    exact = math.sqrt(math.pi) * special.gamma(n + 1) / (2 * special.gamma(n + 1.5))
    corr = ((3 - n) / 3 / exact) ** (2 / (2 * n + 1))
    errs = []
    for W in (0.5, 2.0):
        h = sinkage_for_load(p, 0.0, W)
        z0 = bk.static_sinkage(W, 2 * R, B, p[2], p[3], n)
        assert h / (2 * R) < 0.03
        assert h == pytest.approx(z0, rel=0.05)  # Bekker's approximation itself
        errs.append(abs(h / (z0 * corr) - 1))
    assert errs[0] < 0.01
    assert errs[0] < errs[1]


def test_bekker_compaction_resistance_closed_form():
    """With no shear, -f_x = ∫ p dz = b k z0^(n+1) / (n + 1) exactly (dz = -R sin(theta))."""
    for soil in ("dry_sand", "sandy_loam"):
        p = wheel_params(soil, R, B, c1=0.0, c2=0.0, K=1e6)
        h = 0.008
        rc = bk.compaction_resistance(h, B, p[2], p[3], p[4])
        assert -_stresses(p, 0.0, h)[0] == pytest.approx(rc, rel=2e-3)


def test_drawbar_pull_vs_slip_sign_and_zero_crossing():
    p = wheel_params("sandy_loam", R, B)
    W = 18.0
    s = np.linspace(0.0, 1.0, 11)
    dp = np.array([_stresses(p, si, sinkage_for_load(p, si, W))[0] for si in s])
    assert dp[0] < 0.0 < dp[-1]  # motion resistance when rolling, pull at full slip
    assert np.all(np.diff(dp) > 0.0)
    st = wheel_equilibrium(p, W, 0.0)  # self-propelled: zero net pull
    assert 0.0 < st.s < 1.0 and abs(st.fx) < 1e-9 * W and st.fz == pytest.approx(W, rel=1e-9)
    assert st.T > 0.0  # the wheel still needs torque to overcome compaction resistance
    brake = wheel_equilibrium(p, W, -0.3 * W)
    assert brake.s < 0.0 and brake.fx == pytest.approx(-0.3 * W, rel=1e-6)


def test_bekker_dispatcher_force_and_jacobian():
    kind = MODEL_KINDS["bekker"]
    p = _params_vector("bekker", default_params("bekker", 18.0, 1.8, R, B), {}, "test")
    fc, J = np.empty(3), np.empty((3, 5))
    tab, ax = np.zeros((2, 2, 2, 3)), np.array([0.0, 1, 0, 1, 0, 1])
    y = np.array([-0.02, 0.01, 0.0, 0.1, -0.01])
    contact_force(kind, p, tab, ax, y[:3].copy(), y[3], y[4], fc, J)
    direct = np.empty(3)
    bk.bekker_force(p, *y, direct)
    np.testing.assert_array_equal(fc, direct)
    s, beta, h, _ = bk.slip_inputs(p, y[0], y[1], y[3], y[4])
    out = _stresses(p, s, h, beta)
    assert fc[0] == pytest.approx(out[0]) and fc[2] == pytest.approx(out[2])
    assert fc[1] < 0.0  # opposes v_y > 0
    for k in range(5):  # independent central difference with a different step
        a, b_ = y.copy(), y.copy()
        a[k] += 1e-5
        b_[k] -= 1e-5
        fa, fb = np.empty(3), np.empty(3)
        bk.bekker_force(p, *a, fa)
        bk.bekker_force(p, *b_, fb)
        np.testing.assert_allclose(J[:, k], (fa - fb) / 2e-5, rtol=1e-3,
                                   atol=1e-3 * np.abs(J).max())
    contact_force(kind, p, tab, ax, np.zeros(3), 0.1, 0.001, fc, J)
    assert np.all(fc == 0.0) and np.all(J == 0.0)  # out of contact


def test_bekker_jacobian_equals_full_central_differences_bit_for_bit():
    """The dispatcher's Jacobian reuses the unperturbed stresses for the vz column; it must
    equal central differences of the whole force at the same steps, to the last bit, including
    in the damped onset (h < the damping onset depth), at rest and out of contact."""
    kind = MODEL_KINDS["bekker"]
    p = _params_vector("bekker", default_params("bekker", 18.0, 1.8, R, B), {"zc": 0.002,
                                                                             "j0": 0.001}, "t")
    tab, ax = np.zeros((2, 2, 2, 3)), np.array([0.0, 1, 0, 1, 0, 1])
    rng = np.random.default_rng(7)
    cases = [np.array([0.0, 0.0, 0.0, 0.0, -0.004]), np.array([0.1, 0.0, -0.02, 0.1, 0.001]),
             np.array([0.02, -0.03, 0.05, -0.1, -0.0005])]
    cases += [np.concatenate([rng.normal(0.0, 0.1, 4), [-abs(rng.normal(0.0, 0.01))]])
              for _ in range(20)]
    fc, J = np.empty(3), np.empty((3, 5))
    for y in cases:
        contact_force(kind, p, tab, ax, y[:3].copy(), y[3], y[4], fc, J)
        for k in range(5):
            h = FD_REL_STEP * (1.0 + abs(y[k]))
            a, b_ = y.copy(), y.copy()
            a[k] += h
            b_[k] -= h
            fa, fb = np.empty(3), np.empty(3)
            bk.bekker_force(p, *a, fa)
            bk.bekker_force(p, *b_, fb)
            np.testing.assert_array_equal(J[:, k], (fa - fb) / (2.0 * h))


def test_soil_presets_and_schema():
    for name in SOIL_PARAMETER_NAMES:
        spec = get_spec(name)
        assert spec.unit and spec.description
    s = get_soil("dry_sand", phi=0.4)
    assert s.phi == 0.4 and s.kphi == SOIL_PRESETS["dry_sand"].kphi
    with pytest.raises(ParameterError, match="soil must be one of"):
        get_soil("mud")
    with pytest.raises(ParameterError, match="unknown constant 'mu'"):
        get_soil("dry_sand", mu=0.5)


def test_multipass_reload_pressure():
    """Pre-compacted soil reloads along k_u z up to the virgin curve k (zc + z)^n."""
    p = wheel_params("dry_sand", R, B, zc=0.01)
    k = p[2] / B + p[3]
    assert bk.pressure(p, 1e-6) == pytest.approx(p[11] * 1e-6)
    assert bk.pressure(p, 0.02) == pytest.approx(k * 0.03 ** p[4])
    assert bk.pressure(wheel_params("dry_sand", R, B), 0.02) == pytest.approx(k * 0.02 ** p[4])


# --- ROAMS traction variability (Sohl and Jain 2005, eqs. 11-13) -----------------------------


def test_traction_scale_std_follows_eqs_12_13():
    phi, p1, p2 = 0.5, 0.3, 0.2
    th = np.array([0.0, 0.25, 0.5, 1.0, 2.0])
    ratio = np.array([0.0, 0.5, 1.0, 0.5, 0.25])
    np.testing.assert_allclose(roams.traction_scale_std(th, phi, p1, p2), p1 - p2 * ratio)
    # spread shrinks as the slope approaches phi, grows again beyond it
    std = roams.traction_scale_std(np.linspace(0.0, 1.5, 31), phi, p1, p2)
    i = int(np.argmin(std))
    assert math.isclose(np.linspace(0.0, 1.5, 31)[i], phi)
    assert np.all(np.diff(std[:i + 1]) < 0) and np.all(np.diff(std[i:]) > 0)
    with pytest.raises(ParameterError, match="phi must be > 0"):
        roams.traction_scale_std(0.1, 0.0, p1, p2)


def test_traction_scale_samples_seeded_and_gaussian():
    th = np.full(40000, 0.1)
    a = roams.sample_traction_scale(th, 0.5, 0.2, 0.1, np.random.default_rng(7))
    b = roams.sample_traction_scale(th, 0.5, 0.2, 0.1, np.random.default_rng(7))
    np.testing.assert_array_equal(a, b)
    std = 0.2 - 0.1 * 0.2
    assert a.mean() == pytest.approx(1.0, abs=4 * std / math.sqrt(th.size))
    assert a.std() == pytest.approx(std, rel=0.02)
    det = roams.sample_traction_scale(th[:5], 0.5, 0.0, 0.0, np.random.default_rng(1))
    np.testing.assert_array_equal(det, 1.0)


def test_roams_scale_multiplies_the_terzaghi_limit():
    base = default_params("roams", 100.0, 10.0, R, B)
    fc1, fc2, J = np.empty(3), np.empty(3), np.empty((3, 5))
    vc = np.array([1.0, 0.5, 0.0])
    roams.roams(_params_vector("roams", base, {"c": 500.0}, "t"), vc, 0.0, -0.01, fc1, J)
    roams.roams(_params_vector("roams", base, {"c": 500.0, "s": 0.7}, "t"), vc, 0.0, -0.01,
                fc2, J)
    np.testing.assert_allclose(fc2[:2], 0.7 * fc1[:2], rtol=1e-14)
    assert fc2[2] == fc1[2]
