"""Wheel-ground contact models (App. C, ROAMS) against finite differences and closed forms."""

import math

import numpy as np
import pytest
from scipy import integrate, optimize

from wmr_model.contact import contact_force, contact_setup, default_params
from wmr_model.contact import ishigami as ish
from wmr_model.contact import pacejka as pac
from wmr_model.contact.models import MODEL_KINDS, _params_vector
from wmr_model.errors import ParameterError
from wmr_model.io.vehicles import load_vehicle

W, MW, R, B = 500.0, 50.0, 0.325, 0.2


def _eval(name, vc, Rw, dz, **over):
    kind = MODEL_KINDS[name]
    p = _params_vector(name, default_params(name, W, MW, R, B), over, "test")
    table, axes = np.zeros((2, 2, 2, 3)), np.array([0.0, 1, 0, 1, 0, 1])
    if name == "ishigami":
        table, axes = ish.build_table(p)
    fc, J = np.empty(3), np.empty((3, 5))
    contact_force(kind, p, table, axes, np.asarray(vc, float), float(Rw), float(dz), fc, J)
    return fc, J, (kind, p, table, axes)


def _fd_jacobian(args, y, h=1e-7):
    kind, p, table, axes = args
    out = np.empty((3, 5))
    fc, J = np.empty(3), np.empty((3, 5))
    for k in range(5):
        a, b = y.copy(), y.copy()
        a[k] += h
        b[k] -= h
        contact_force(kind, p, table, axes, a[:3].copy(), a[3], a[4], fc, J)
        fp = fc.copy()
        contact_force(kind, p, table, axes, b[:3].copy(), b[3], b[4], fc, J)
        out[:, k] = (fp - fc) / (2 * h)
    return out


@pytest.mark.parametrize("name", ["piecewise_linear", "coulomb_cone", "roams"])
@pytest.mark.parametrize("seed", range(3))
def test_analytic_jacobian_matches_finite_difference(name, seed):
    rng = np.random.default_rng(seed)
    for _ in range(20):
        y = np.concatenate([rng.normal(0, 0.2, 3), rng.uniform(-2, 2, 1),
                            rng.uniform(-0.03, 0.005, 1)])
        _, J, args = _eval(name, y[:3], y[3], y[4])
        Jfd = _fd_jacobian(args, y)
        np.testing.assert_allclose(J, Jfd, rtol=1e-5, atol=1e-4 * (1 + np.abs(Jfd).max()))


def test_piecewise_linear_saturates_at_mu_fz():
    """Pyramid (C.7)-(C.8): each tangential component is clipped to mu f_z separately."""
    fc, _, _ = _eval("piecewise_linear", [-1.0, 2.0, 0.0], 0.0, -0.01, mu_x=0.5, mu_y=0.7)
    assert fc[2] == pytest.approx(W)  # spring only: Kp * 1 cm = W
    assert fc[0] == pytest.approx(0.5 * W)
    assert fc[1] == pytest.approx(-0.7 * W)
    fc, _, _ = _eval("piecewise_linear", [-1e-4, 0.0, 0.0], 0.0, -0.01)
    assert fc[0] == pytest.approx(default_params("piecewise_linear", W, MW, R, B)["Cx"] * 1e-4)


def test_cone_within_pyramid_and_on_circle():
    """True Coulomb (C.9): |f_t| = mu f_z when sliding, direction opposing slip."""
    v = np.array([0.3, -0.4, 0.0])
    cone, _, _ = _eval("coulomb_cone", v, 0.0, -0.01, mu_x=0.6)
    pyr, _, _ = _eval("piecewise_linear", v, 0.0, -0.01, mu_x=0.6, mu_y=0.6)
    assert np.hypot(*cone[:2]) == pytest.approx(0.6 * cone[2])
    np.testing.assert_allclose(cone[:2] / np.hypot(*cone[:2]), -v[:2] / 0.5)
    assert np.hypot(*pyr[:2]) == pytest.approx(math.sqrt(2) * 0.6 * pyr[2])


def test_no_force_out_of_contact_or_pulling():
    for name in MODEL_KINDS:
        fc, J, _ = _eval(name, [0.1, 0.1, 0.0], 1.0, 0.01)
        assert np.all(fc == 0.0) and np.all(J == 0.0), name
        fc, _, _ = _eval(name, [0.1, 0.1, 5.0], 1.0, -0.001)  # separating fast: f_z >= 0
        assert fc[2] >= 0.0, name


def test_magic_formula_peak_location():
    """(C.13) peaks where B(1-E)Ks + E atan(BKs) = tan(pi / 2C): Table C.1 gives s ~ 0.3."""
    c = pac.TABLE_C1
    args = (c["Bs"], c["Cs"], c["Ds"], c["Es"], c["Ks"])
    res = optimize.minimize_scalar(lambda s: -pac.magic_formula(*args, s), bounds=(0.01, 1.0),
                                   method="bounded", options={"xatol": 1e-10})
    root = optimize.brentq(lambda s: c["Bs"] * (1 - c["Es"]) * c["Ks"] * s
                           + c["Es"] * math.atan(c["Bs"] * c["Ks"] * s)
                           - math.tan(math.pi / (2 * c["Cs"])), 0.01, 1.0)
    assert res.x == pytest.approx(root, abs=1e-6)
    assert 0.15 < root < 0.35
    assert -res.fun == pytest.approx(c["Ds"])
    assert pac.magic_formula(*args, 2.0) < pac.magic_formula(*args, root)  # decreases past it


def test_pacejka_pure_longitudinal_and_bounds():
    """alpha = 0: f_x = mu f_z F s with the thresholded (C.18); |f_t| <= mu f_z always."""
    rng = np.random.default_rng(3)
    for _ in range(200):
        vc = rng.normal(0, 1.0, 3)
        vc[2] = 0.0
        fc, _, _ = _eval("pacejka", vc, rng.uniform(-3, 3), -0.01, mu=0.6, Vmin=1e-3)
        assert np.hypot(*fc[:2]) <= 0.6 * fc[2] * (1 + 1e-12)
    # driving (contact point slides backward) pushes the wheel forward, and vice versa
    assert _eval("pacejka", [-0.2, 0, 0], 1.2, -0.01)[0][0] > 0
    assert _eval("pacejka", [0.2, 0, 0], 0.8, -0.01)[0][0] < 0
    assert _eval("pacejka", [0, 0.2, 0], 1.0, -0.01)[0][1] < 0


def test_pacejka_jacobian_matches_coarser_difference():
    rng = np.random.default_rng(5)
    for _ in range(10):
        y = np.array([*rng.normal(0, 0.3, 3), rng.uniform(0.5, 2), -0.01])
        _, J, args = _eval("pacejka", y[:3], y[3], y[4])
        np.testing.assert_allclose(J, _fd_jacobian(args, y, h=1e-5), rtol=1e-4, atol=1e-2)


def test_ishigami_trapezoid_matches_quadrature():
    """The n+1-node trapezoid rule converges to adaptive quadrature of (C.30)-(C.32)."""
    p = _params_vector("ishigami", default_params("ishigami", W, MW, R, B), {}, "t")
    s, beta, h = 0.3, 0.2, 0.03
    fine = np.empty(3)
    ish.ishigami_direct(p, s, beta, h, 4000, fine)
    coarse = np.empty(3)
    ish.ishigami_direct(p, s, beta, h, ish.N_THETA, coarse)
    np.testing.assert_allclose(coarse, fine, rtol=2e-3)
    # independent check of f_z for a pure-sinkage case by scipy quad over the same integrand
    r, b = p[14], p[15]
    th_f = math.acos(1 - h / r)
    th_r = -math.acos(1 - p[9] * h / r)
    th_m = (p[6] + p[7] * s) * th_f
    ks = r ** p[5] * (p[3] / b + p[4])

    def sig(th):
        if th >= th_m:
            return ks * max(math.cos(th) - math.cos(th_f), 0) ** p[5]
        return ks * (math.cos(th_f - (th - th_r) / (th_m - th_r) * (th_f - th_m))
                     - math.cos(th_f)) ** p[5]

    def tau(th):
        jx = r * (th_f - th - (1 - s) * (math.sin(th_f) - math.sin(th)))
        return (p[0] + sig(th) * math.tan(p[1])) * (1 - math.exp(-abs(jx) / (p[10] + p[11] * beta))
                                                     ) * np.sign(jx)

    fz = r * b * integrate.quad(lambda t: tau(t) * math.sin(t) + sig(t) * math.cos(t), th_r,
                                th_f, points=[th_m], limit=200)[0]
    assert fine[2] == pytest.approx(fz, rel=1e-5)


def test_smooth_sign_slope_within_4_ulp_of_exact():
    """The slope of the Ishigami model's smooth sign of v_y, written with a square root instead
    of a 1.5 power, against the exact value (60-digit decimal arithmetic on the same doubles):
    within 4 ulp, as the power form it replaced."""
    from decimal import Decimal, getcontext

    getcontext().prec = 60
    rng = np.random.default_rng(5)
    vys = np.concatenate([rng.normal(0, 0.3, 400), rng.normal(0, 1e-3, 100), [0.0, 1e-12, 5.0]])
    worst = 0.0
    for vy in vys:
        for vmin in (0.01, 0.05, float(rng.uniform(1e-3, 1.0))):
            got = ish.smooth_sign_slope(float(vy), vmin)
            t = Decimal(float(vy)) ** 2 + Decimal(vmin) ** 2
            exact = -Decimal(vmin) ** 2 / (t * t.sqrt())
            rel = abs((Decimal(got) - exact) / exact)
            assert rel <= Decimal(4 * 2.0 ** -52), (vy, vmin, got, exact)
            pow_form = -vmin * vmin / (vy * vy + vmin * vmin) ** 1.5
            assert abs(got - pow_form) <= 4 * 2.0 ** -52 * abs(pow_form)
            worst = max(worst, float(rel))
    assert worst > 0.0  # the oracle resolves the round-off it bounds


def test_ishigami_lookup_matches_direct():
    p = _params_vector("ishigami", default_params("ishigami", W, MW, R, B), {}, "t")
    table, axes = ish.build_table(p)
    out, ref = np.empty(3), np.empty(3)
    # exactly on nodes (including the last node of every axis): identical
    for i, j, k in [(0, 0, 0), (40, 18, 20), (20, 5, 3), (40, 0, 0)]:
        s, b, z = axes[0] + i * axes[1], axes[2] + j * axes[3], axes[4] + k * axes[5]
        ish.table_force(table, axes, s, b, z, out)
        np.testing.assert_allclose(out, table[i, j, k], rtol=1e-12, atol=1e-9)
    rng = np.random.default_rng(0)
    scale = np.abs(table).max(axis=(0, 1, 2))
    for _ in range(50):
        s, b, z = rng.uniform(-1, 1), rng.uniform(0, 1.4), rng.uniform(axes[4], 0)
        ish.table_force(table, axes, s, b, z, out)
        ish.ishigami_direct(p, s, b, -z, ish.N_THETA, ref)
        assert np.all(np.abs(out - ref) <= 0.03 * scale)
    ish.table_force(table, axes, np.nan, 0.1, -0.01, out)
    assert np.all(np.isnan(out))
    ish.table_force(table, axes, 5.0, 9.0, -9.0, out)  # clamped, finite
    np.testing.assert_allclose(out, table[-1, -1, 0])


def test_roams_cohesionless_is_coulomb_tan_phi():
    phi = 0.6
    fc, _, _ = _eval("roams", [0.5, 0.5, 0.0], 1.0, -0.01, c=0.0, phi=phi)
    assert np.hypot(*fc[:2]) == pytest.approx(math.tan(phi) * fc[2])
    fc2, _, _ = _eval("roams", [0.5, 0.5, 0.0], 1.0, -0.01, c=2000.0, phi=phi)
    d = 0.01
    A = 2 * B * math.sqrt(2 * R * d - d * d)
    assert np.hypot(*fc2[:2]) == pytest.approx(2000.0 * A + math.tan(phi) * fc2[2])
    # Hunt-Crossley at rest: k_N delta^n
    p = default_params("roams", W, MW, R, B)
    assert fc[2] == pytest.approx(p["kN"] * d ** p["n"])


def test_setup_reads_options_per_wheel():
    m = load_vehicle("zoe")
    opts = dict(m.options)
    opts.update(contact_model="pacejka", contact_params={"mu": 0.6},
                wheel_contact={"FL": {"contact_model": "roams"}})
    object.__setattr__(m, "options", opts)
    cs = contact_setup(m)
    assert cs.names == ("roams", "pacejka", "pacejka", "pacejka")
    assert cs.params[1, 2] == 0.6
    with pytest.raises(ParameterError, match=r"unknown parameter 'nope' of pacejka"):
        contact_setup(m, contact_params={"nope": 1})
    with pytest.raises(ParameterError, match=r"contact_model must be one of .* got 'magic'"):
        contact_setup(m, contact_model="magic")
