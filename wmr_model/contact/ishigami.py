"""Ishigami terramechanics-based contact model (Seegmiller 2014, App. C, eqs. C.19-C.36).

Rigid wheel in loose soil: entry/exit angles from sinkage (C.21)-(C.22), normal stress with its
peak at theta_m (C.23)-(C.24), Janosi-Hanamoto shear stresses (C.25)-(C.29), forces by
integrating the stresses over the contact patch (C.30)-(C.33) including sidewall bulldozing
(C.34)-(C.36). Slip ratio :math:`s = -v_x / R\\omega` (C.19), slip angle
:math:`\\beta = \\tan^{-1}(v_y / V_x)` (C.20).

Choices (the text notes the signs "may need to be changed"):

* shear stresses oppose slip:
  :math:`\\tau = (c + \\sigma\\tan\\phi)(1 - e^{-|j|/k})\\,\\mathrm{sgn}(j)`
  (the printed form grows without bound for negative soil deformation j);
* lateral force and bulldozing oppose ``v_y``; their direction factor is the smooth sign
  ``-v_y / sqrt(v_y^2 + Vmin^2)`` (the bulldozing term makes f_y jump at beta = 0, Fig. C.5,
  which Newton's method in the force balance cannot cross); ``k_x, k_y`` use ``|beta|`` [rad];
* reverse driving (``R w < 0``) mirrors the longitudinal axis;
* ``|R w|`` and ``|V_x|`` are floored at ``Vmin`` (the singularities under C.19-C.20), s is
  clipped to [-1, 1], sinkage to [0, R].

Integration is the composite trapezoid rule on ``n_theta`` equal intervals of
[theta_r, theta_f], i.e. ``n_theta + 1`` nodes with half weights on both end nodes.

The lookup table (:func:`build_table`) stores the forces over slip ratio, ``|beta|`` and Δz;
:func:`lookup_force` interpolates trilinearly (inputs clamped to the table; a NaN input gives
NaN forces rather than an out-of-range index) and differentiates by finite differences.

``params`` layout (:data:`PARAM_NAMES`), Table C.2 units converted to SI: ``[c Pa, phi rad,
Xc rad, kc N/m^(n+1), kphi N/m^(n+2), n, a0, a1, rho_d kg/m^3, lam, kx0 m, kx1 m/rad, ky0 m,
ky1 m/rad, R m, b m, Vmin m/s, Kd N s/m]`` (``Kd`` optional normal damping, 0 in the thesis;
ramped in over the first :data:`~.piecewise_linear.DAMPING_ONSET_DEPTH` of sinkage).
"""

from __future__ import annotations

import math

import numpy as np

from wmr_model._jit import njit
from wmr_model.contact.piecewise_linear import DAMPING_ONSET_DEPTH

__all__ = ["PARAM_NAMES", "TABLE_C2", "ishigami_direct", "ishigami_force", "build_table",
           "lookup_force", "lookup", "table_force", "table_force_grad", "smooth_sign_slope"]

PARAM_NAMES = ("c", "phi", "Xc", "kc", "kphi", "n", "a0", "a1", "rho_d", "lam", "kx0", "kx1",
               "ky0", "ky1", "R", "b", "Vmin", "Kd")

#: Table C.2 sample values (Ishigami et al. 2007) in SI; R, b default to that paper's wheel.
TABLE_C2 = {"c": 800.0, "phi": math.radians(37.2), "Xc": math.radians(26.4), "kc": 1.37e3,
            "kphi": 8.14e5, "n": 1.0, "a0": 0.40, "a1": 0.15, "rho_d": 1.6e3, "lam": 1.0,
            "kx0": 0.036, "kx1": 0.043, "ky0": 0.013, "ky1": 0.020, "R": 0.09, "b": 0.11,
            "Vmin": 0.01, "Kd": 0.0}

N_THETA = 64


@njit
def ishigami_direct(params, s, beta_abs, h, n_theta, out):
    """Forces (3,) ``[fx, fy_mag, fz]`` for slip ratio s in [-1, 1], |beta|, sinkage h >= 0.

    (C.21)-(C.36) for forward rolling and positive lateral slip direction; ``fy_mag`` >= 0 is
    the magnitude opposing lateral slip. Trapezoid rule on ``n_theta`` intervals.
    """
    c, phi, Xc, kc, kphi, n = params[0], params[1], params[2], params[3], params[4], params[5]
    a0, a1, rho, lam = params[6], params[7], params[8], params[9]
    kx = params[10] + params[11] * beta_abs
    ky = params[12] + params[13] * beta_abs
    r, b = params[14], params[15]
    out[0] = 0.0
    out[1] = 0.0
    out[2] = 0.0
    if h <= 0.0:
        return
    th_f = math.acos(1.0 - h / r)  # (C.21)
    th_r = math.acos(max(-1.0, 1.0 - lam * h / r))  # (C.22)
    th_r = -th_r  # exit angle lies behind the wheel's bottom
    th_m = (a0 + a1 * s) * th_f  # (C.23)
    k_sig = r ** n * (kc / b + kphi)
    tphi = math.tan(phi)
    tb = math.tan(beta_abs)
    D1 = 1.0 / math.tan(Xc) + math.tan(Xc + phi)  # (C.35)
    D2 = 1.0 / math.tan(Xc) + (1.0 / math.tan(Xc)) ** 2 / (1.0 / tphi)  # (C.36)
    dth = (th_f - th_r) / n_theta
    cf = math.cos(th_f)
    sf = math.sin(th_f)
    for k in range(n_theta + 1):
        th = th_r + k * dth
        w = 0.5 * dth if (k == 0 or k == n_theta) else dth
        if th >= th_m:  # (C.24) front region
            base = math.cos(th) - cf
        else:
            base = math.cos(th_f - (th - th_r) / (th_m - th_r) * (th_f - th_m)) - cf
        sig = k_sig * max(base, 0.0) ** n
        jx = r * (th_f - th - (1.0 - s) * (sf - math.sin(th)))  # (C.28)
        jy = r * (1.0 - s) * (th_f - th) * tb  # (C.29)
        lim = c + sig * tphi
        tx = lim * (1.0 - math.exp(-abs(jx) / kx)) * (1.0 if jx >= 0.0 else -1.0)  # (C.25)
        ty = lim * (1.0 - math.exp(-abs(jy) / ky))  # (C.26)
        hth = max(r * (math.cos(th) - cf), 0.0)  # sinkage at angle theta
        Rb = D1 * (c * hth + D2 * rho * hth * hth / 2.0)  # (C.34)
        ct, st = math.cos(th), math.sin(th)
        out[0] += w * r * b * (tx * ct - sig * st)  # (C.30)
        out[1] += w * (r * b * ty + Rb * (r - hth * ct))  # (C.31)
        out[2] += w * r * b * (tx * st + sig * ct)  # (C.32)


@njit(refcount=False)
def _damping_ramp(h):
    """Fraction of ``Kd`` at sinkage ``h`` [m]: continuous touchdown, as in (C.3) here."""
    return min(1.0, h / DAMPING_ONSET_DEPTH)


@njit(refcount=False, inline="always")
def smooth_sign_slope(vy, vmin):
    """d/dv_y of the smooth sign ``-v_y / sqrt(v_y^2 + V_min^2)`` (:func:`_slip_inputs`):
    ``-V_min^2 / (v_y^2 + V_min^2)^(3/2)``, the power as ``t sqrt(t)`` (a square root and a
    product instead of a ``pow`` call, about a quarter of its time; within 4 ulp of the exact
    value, as the ``pow`` form, ``test_contact_models.py``)."""
    t = vy * vy + vmin * vmin
    return -vmin * vmin / (t * math.sqrt(t))


@njit(refcount=False)
def _slip_inputs(params, vx, vy, Rw, dz):
    """(s, |beta|, h, sign_x, sign_y) from contact velocity, R w and Δz (C.19)-(C.20)."""
    vmin = params[16]
    sx = 1.0 if Rw >= 0.0 else -1.0
    Rabs = max(abs(Rw), vmin)
    s = -sx * vx / Rabs
    s = min(1.0, max(-1.0, s))
    Vx = abs(vx + Rw)
    Vx = max(Vx, vmin)
    beta = math.atan(abs(vy) / Vx)
    h = min(max(-dz, 0.0), params[14])
    sy = -vy / math.sqrt(vy * vy + vmin * vmin)  # smooth -sgn(v_y)
    return s, beta, h, sx, sy


@njit
def ishigami_force(params, vx, vy, vz, Rw, dz, fc):
    """Contact force (3,) by direct integration (no table)."""
    s, beta, h, sx, sy = _slip_inputs(params, vx, vy, Rw, dz)
    out = np.empty(3)
    ishigami_direct(params, s, beta, h, N_THETA, out)
    fc[0] = sx * out[0]
    fc[1] = sy * out[1]
    fc[2] = max(out[2] - _damping_ramp(h) * params[17] * vz, 0.0) if h > 0.0 else 0.0


def build_table(params: np.ndarray, n_s: int = 41, n_beta: int = 19, n_dz: int = 81,
                dz_min: float | None = None, n_theta: int = N_THETA) -> tuple[np.ndarray,
                                                                             np.ndarray]:
    """Precompute the lookup table of :func:`ishigami_direct` (§2.4.4, App. C).

    Returns ``(table, axes)``: ``table`` (n_s, n_beta, n_dz, 3) of ``[fx, fy_mag, fz]`` and
    ``axes`` (6,) ``[s0, ds, beta0, dbeta, dz0, ddz]`` of the uniform grids s in [-1, 1],
    |beta| in [0, pi/2 - 0.05], Δz in [dz_min, 0]. The default ``dz_min = -R`` covers every
    sinkage the model accepts (h is clipped to [0, R]): on rough terrain a wheel briefly sinks
    far past its static sinkage (Zoë on the wmrde terrains at dt 0.04: 0.145 m = 0.45 R), and a
    table clamped at a shallower depth caps f_z there, so the force balance has no root. 81 Δz
    nodes keep the 4 mm spacing of Zoë's wheel (R 0.325 m).
    """
    params = np.ascontiguousarray(params, dtype=float)
    R = float(params[14])
    if dz_min is None:
        dz_min = -R
    s_ax = np.linspace(-1.0, 1.0, n_s)
    b_ax = np.linspace(0.0, 0.5 * math.pi - 0.05, n_beta)
    z_ax = np.linspace(dz_min, 0.0, n_dz)
    table = np.empty((n_s, n_beta, n_dz, 3))
    _fill_table(params, s_ax, b_ax, z_ax, n_theta, table)
    axes = np.array([s_ax[0], s_ax[1] - s_ax[0], b_ax[0], b_ax[1] - b_ax[0], z_ax[0],
                     z_ax[1] - z_ax[0]])
    return table, axes


@njit
def _fill_table(params, s_ax, b_ax, z_ax, n_theta, table):
    out = np.empty(3)
    for i in range(s_ax.shape[0]):
        for j in range(b_ax.shape[0]):
            for k in range(z_ax.shape[0]):
                ishigami_direct(params, s_ax[i], b_ax[j], -z_ax[k], n_theta, out)
                table[i, j, k, 0] = out[0]
                table[i, j, k, 1] = out[1]
                table[i, j, k, 2] = out[2]


@njit
def table_force(table, axes, s, beta_abs, dz, out):
    """Trilinear interpolation of the table at (s, |beta|, Δz); NaN in -> NaN out."""
    if s != s or beta_abs != beta_abs or dz != dz:
        out[0] = np.nan
        out[1] = np.nan
        out[2] = np.nan
        return
    table_force_grad(table, axes, s, beta_abs, dz, out, np.empty((3, 3)))


@njit(refcount=False)
def _cell_d(u, n):
    """Lower index in [0, n-2], fraction in [0, 1] of grid coordinate u (clamped) and
    d(fraction)/du (0 where u is clamped)."""
    if u <= 0.0:
        return 0, 0.0, 0.0
    if u >= n - 1:
        return n - 2, 1.0, 0.0
    i = int(math.floor(u))
    if i > n - 2:
        i = n - 2
    return i, u - i, 1.0


@njit(refcount=False)
def table_force_grad(table, axes, s, beta_abs, dz, out, grad):
    """:func:`table_force` (finite inputs) and its gradient with respect to ``(s, |beta|,
    Δz)`` in ``grad[:, 0:3]`` (``grad`` (3, >= 3); other columns untouched): the exact
    derivative of the trilinear interpolant inside a cell (the side of the lower cell node on a
    cell face), zero along a clamped axis."""
    i, fi, di = _cell_d((s - axes[0]) / axes[1], table.shape[0])
    j, fj, dj_ = _cell_d((beta_abs - axes[2]) / axes[3], table.shape[1])
    k, fk, dk_ = _cell_d((dz - axes[4]) / axes[5], table.shape[2])
    di /= axes[1]
    dj_ /= axes[3]
    dk_ /= axes[5]
    for r in range(3):
        acc = 0.0
        g0 = 0.0
        g1 = 0.0
        g2 = 0.0
        for a in range(2):
            wi = fi if a else 1.0 - fi
            si = 1.0 if a else -1.0
            for b in range(2):
                wj = fj if b else 1.0 - fj
                sj = 1.0 if b else -1.0
                for c in range(2):
                    wk = fk if c else 1.0 - fk
                    sk = 1.0 if c else -1.0
                    t = table[i + a, j + b, k + c, r]
                    acc += wi * wj * wk * t
                    g0 += si * wj * wk * t
                    g1 += wi * sj * wk * t
                    g2 += wi * wj * sk * t
        out[r] = acc
        grad[r, 0] = g0 * di
        grad[r, 1] = g1 * dj_
        grad[r, 2] = g2 * dk_


@njit(refcount=False)
def lookup(params, table, axes, vc, Rw, dz, fc, J):
    """Contact force ``fc`` (3,) of :func:`lookup_force` and its analytic Jacobian ``J`` (3, 5)
    with respect to ``[vx, vy, vz, Rw, dz]``: the interpolant's gradient
    (:func:`table_force_grad`) chained through (C.19)-(C.20) and the floors and clips of
    :func:`_slip_inputs` (zero derivative where an input is clipped). Allocation-free: the
    interpolant and its gradient are written into ``fc`` and ``J[:, 0:3]`` first; each row is
    read back into scalars before it is replaced."""
    vx, vy, vz = vc[0], vc[1], vc[2]
    for r in range(3):
        for k in range(5):
            J[r, k] = 0.0
    s, beta, h, sx, sy = _slip_inputs(params, vx, vy, Rw, dz)
    if s != s or beta != beta or h != h:
        for r in range(3):
            fc[r] = np.nan
        return
    if h <= 0.0:
        for r in range(3):
            fc[r] = 0.0
        return
    vmin = params[16]
    table_force_grad(table, axes, s, beta, -h, fc, J)
    o0, o1, o2 = fc[0], fc[1], fc[2]
    # d s / d(vx, Rw): s = -sx vx / max(|Rw|, vmin), clipped to [-1, 1]
    ds_dvx = 0.0
    ds_dRw = 0.0
    s_raw = -sx * vx / max(abs(Rw), vmin)
    if -1.0 < s_raw < 1.0:
        if abs(Rw) > vmin:
            ds_dvx = -sx / abs(Rw)
            ds_dRw = vx / (Rw * Rw)
        else:
            ds_dvx = -sx / vmin
    # d beta / d(vx, vy, Rw): beta = atan(|vy| / max(|vx + Rw|, vmin))
    Vs = vx + Rw
    Vx = max(abs(Vs), vmin)
    b = abs(vy) / Vx
    dbeta_db = 1.0 / (1.0 + b * b)
    dbeta_dvy = dbeta_db * (1.0 if vy >= 0.0 else -1.0) / Vx
    dbeta_dV = 0.0
    if abs(Vs) > vmin:
        dbeta_dV = -dbeta_db * b / Vx * (1.0 if Vs >= 0.0 else -1.0)
    # d(table Δz)/d dz = 1 while 0 < -dz < R (h = -dz), else 0
    dzt = 1.0 if -dz < params[14] else 0.0
    ramp = _damping_ramp(h)
    dramp = 1.0 / DAMPING_ONSET_DEPTH if h < DAMPING_ONSET_DEPTH else 0.0
    dsy_dvy = smooth_sign_slope(vy, vmin)
    fz = o2 - ramp * params[17] * vz
    fc[0] = sx * o0
    fc[1] = sy * o1
    fc[2] = max(fz, 0.0)
    for r in range(3):  # row r's gradient (J[r, 0:3]) is read, then replaced by row r
        ga, gb, gc = J[r, 0], J[r, 1], J[r, 2]
        J[r, 2] = 0.0
        if r == 2 and fz <= 0.0:
            J[r, 0] = 0.0
            J[r, 1] = 0.0
            continue
        sc = sx if r == 0 else (sy if r == 1 else 1.0)
        J[r, 0] = sc * (ga * ds_dvx + gb * dbeta_dV)
        J[r, 1] = sc * gb * dbeta_dvy
        J[r, 3] = sc * (ga * ds_dRw + gb * dbeta_dV)
        J[r, 4] = sc * gc * dzt
    J[1, 1] += dsy_dvy * o1
    if fz > 0.0:
        J[2, 2] = -ramp * params[17]
        J[2, 4] += dramp * params[17] * vz * dzt  # d(-ramp Kd vz)/d dz, h = -dz


@njit
def lookup_force(params, table, axes, vx, vy, vz, Rw, dz, fc):
    """Contact force (3,) from the lookup table (:func:`lookup` without the Jacobian)."""
    lookup(params, table, axes, np.array([vx, vy, vz]), Rw, dz, fc, np.empty((3, 5)))
