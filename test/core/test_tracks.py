"""Tracked vehicles (thesis §4.2, seed 003): model, loader, kinematics and the scenario suite."""

from __future__ import annotations

import numpy as np
import pytest

from wmr_model import kinematics as kin
from wmr_model.errors import ModelError
from wmr_model.experiments import tracks as ext
from wmr_model.io.urdf import load_urdf
from wmr_model.io.vehicles import list_vehicles, load_vehicle, vehicle_files
from wmr_model.kinematics.constraints import track_point_jacobian
from wmr_model.kinematics.describe import describe
from wmr_model.kinematics.integrate import integrate_euler
from wmr_model.kinematics.track_collision import _patch_height_error, track_activation
from wmr_model.prediction.predict import predict
from wmr_model.spatial import quat_to_rot, rot_to_euler
from wmr_model.terrain.surface import flat, rough
from wmr_model.vehicles.model import compile_vehicle
from wmr_model.vehicles.tracks import TrackGeometry, contact_path, sample_track

# Final states of a 4 s RK4 simulation and of an enhanced prediction (with covariance) on rough
# terrain, computed with the kinematics as committed before tracks were added (git 88bc754);
# wheeled vehicles must be unaffected. (They matched bit for bit when recorded; the tolerance
# only allows for other CPUs.)
_REFERENCE = {"rocky7": [[0.9920586881398705, -0.04264770741167162, 0.10073758305267314, 0.062069893663783446, 0.37409547929603454, 0.03738894898760354, 0.09895956174469536, 0.0011983652726320188, 8.000000000000005, 8.000000000000005, -0.33223991886162735, 8.000000000000005, 8.000000000000005, -0.0011983652726320184, 8.000000000000005, 8.000000000000005, 0.3567314932282653, 8.000000000000005, 8.000000000000005], [0.9922383578618219, -0.04193083951219857, 0.10156459080359775, 0.058219238919577726, 0.36023225215452487, 0.044437349548003845, 0.09982363520268464, -0.004383673237767453, 8.000000000000005, 8.000000000000005, -0.361134917389787, 8.000000000000005, 8.000000000000005, 0.004383673237767453, 8.000000000000005, 8.000000000000005, 0.33383012906966797, 8.000000000000005, 8.000000000000005]], "zoe": [[0.9997277540002659, -0.010773587552510918, -0.019432189310964305, 0.007123040882594093, 2.4747662158773487, 0.08934600383926283, 0.42600842855510684, 0.04071373852708407, 8.000000000000005, 8.000000000000005, 0.007480626972989919, 0.017124207182786472, 8.000000000000005, 8.000000000000005], [0.9992391821951473, -0.02801487573423637, -0.011734525722383015, 0.024464758524034645, 2.3546737492869583, 0.11589112158304293, 0.44478013238096, 0.03922154538423167, 8.000000000000005, 8.000000000000005, 0.06071223292949843, -0.006997294374128677, 8.000000000000005, 8.000000000000005]]}


@pytest.fixture(scope="module")
def absolem():
    return load_vehicle("absolem")


@pytest.mark.parametrize("name", ["rocky7", "zoe"])
def test_wheeled_vehicles_unchanged(name):
    m = load_vehicle(name)
    assert m.ntp == 0 and m.nc == m.nw and m.track_path.shape == (0, 7, 6)
    t = rough(0.05, 0.2, 3, (-2, 8), (-3, 3))
    q0, _ = kin.initialize_contact(m, t)
    rates = np.tile(np.full(len(m.actuated_joints), 2.0), (200, 1))
    # cold collision search: the reference predates its warm start (issue 10)
    tr = kin.simulate(m, t, q0, rates, 0.02, integrator="rk4", warm_start=False)
    p = predict(m, t, q0, rates, 0.02, fidelity="enhanced",
                slip_params=[0.1, -0.05, 0.2, 0.1, 0.01, -0.1], Qprime=np.eye(6) * 1e-3,
                warm_start=False)
    final, pfinal = _REFERENCE[name]
    np.testing.assert_allclose(tr.q[-1], final, rtol=0, atol=1e-12)
    np.testing.assert_allclose(p.q[0, -1], pfinal, rtol=0, atol=1e-12)


def test_absolem_compiles_with_tracks(absolem):
    m = absolem
    assert m.nw == 0 and m.nj == 6
    assert m.track_names == ("left", "right", "flipper_front_left", "flipper_front_right",
                             "flipper_rear_left", "flipper_rear_right")
    assert m.ntp == 2 * 20 + 4 * 12 and m.nc == m.ntp
    assert list(m.actuated_joints) == [0, 1, 2, 3, 4, 5]
    # flipper belts are driven by the main sprocket of their side
    left = m.frame_index("left_sprocket")
    assert set(m.track_drive[m.track_of == 2]) == {left}
    assert "absolem" not in list_vehicles() and "absolem" in list_vehicles(include_tracked=True)
    assert "track left on base_link, driven by left_sprocket, 20 contact patches" in describe(m)


def test_belt_geometry_closed_form():
    g = TrackGeometry((0.25, 0.2, 0.0), 0.09, (-0.25, 0.2, 0.0), 0.09, samples=10)
    _, _, length = contact_path(g, 201)
    # lower run + two 120 deg arcs (from 30 deg above horizontal down to the bottom)
    assert length == pytest.approx(0.5 + 2 * 0.09 * (2 * np.pi / 3), rel=1e-4)
    p = sample_track(g)
    assert p.shape == (10, 7, 6)
    mid = p[5, 3]
    # lower run: on the belt's bottom, belt moving backward at r per unit rate
    np.testing.assert_allclose(mid[[1, 2]], [0.2, -0.09], atol=1e-9)
    np.testing.assert_allclose(mid[3:], [-0.09, 0.0, 0.0], atol=1e-9)
    # front face moves down, rear face up (circulation of the belt)
    assert p[-1, -1, 5] == pytest.approx(-0.09 * np.cos(np.pi / 6), abs=2e-3)
    assert p[0, 0, 5] == pytest.approx(0.09 * np.cos(np.pi / 6), abs=2e-3)


def test_activation_is_c1_and_bounded():
    act = np.array([0.005, 0.02, 0.02])
    dzs = np.linspace(-0.01, 0.03, 4001)
    w = np.array([track_activation(d, act) for d in dzs])
    assert w[0] == 1.0 and w[-1] == 0.0 and np.all(np.diff(w) <= 1e-15)
    assert np.abs(np.diff(w)).max() < 2 * 1.5 / 0.015 * (dzs[1] - dzs[0])


def test_track_jacobian_matches_finite_differences(absolem):
    """Rigid part of a patch's Jacobian vs finite differences of its contact point position."""
    m = absolem
    rng = np.random.default_rng(3)
    q = m.neutral_state()
    q[0:4] = [0.99, 0.05, -0.08, 0.03]
    q[0:4] /= np.linalg.norm(q[0:4])
    q[7:] = rng.uniform(-0.5, 0.5, 6)
    d = kin.create_data(m)
    kin.forward_kinematics(m, d, q)
    kin.wheel_contact(m, d, flat(-1.0))
    k = 30  # a lower-run patch of the right track
    blk = np.empty((3, m.nv))
    belt = np.empty(3)
    track_point_jacobian(m.kinematic_arrays(), (m.track_frame, m.track_drive, m.track_path),
                         d.T_world, d.T_contact, d.contact_angle, 0, k, belt, blk)
    Rc = d.T_contact[k, :3, :3]
    u = d.contact_angle[k]
    j = int(np.floor(u))
    f = u - j
    pl = (1 - f) * m.track_path[k, j, :3] + f * m.track_path[k, min(j + 1, 6), :3]
    i = m.track_frame[k]

    def point(qq):
        T = kin.forward_kinematics(m, kin.create_data(m), qq)[i]
        return T[:3, :3] @ pl + T[:3, 3]

    h = 1e-7
    for col in range(m.nv):
        qd = np.zeros(m.nv)
        qd[col] = 1.0
        qp = np.empty(m.nq)
        integrate_euler(q, qd, h, qp)
        fd = Rc.T @ (point(qp) - point(q)) / h
        expect = blk[:, col] - (belt if col == 5 + m.track_drive[k] else 0.0)
        np.testing.assert_allclose(expect, fd, atol=2e-6)
    # the belt term: r_s times the belt direction, rotated into contact coordinates
    np.testing.assert_allclose(np.linalg.norm(belt), 0.09, rtol=1e-9)


def _sidecar(**track):
    base = {"link": "base_link", "sprocket": "left_sprocket", "sprocket_radius": 0.09,
            "sprocket_xyz": [0.25, 0.2, 0.0], "idler_radius": 0.09,
            "idler_xyz": [-0.25, 0.2, 0.0]}
    base.update(track)
    return {"wheels": {}, "tracks": {"left": base}}


@pytest.mark.parametrize(("track", "message"), [
    ({"sprocket_radius": -0.1}, r"<dict>: tracks\.left\.sprocket_radius must be > 0 m, got -0\.1"),
    ({"samples": 1}, r"<dict>: tracks\.left\.samples must be an integer >= 2, got 1"),
    ({"grousers": 3}, r"<dict>: tracks\.left: unknown key\(s\) \['grousers'\]"),
    ({"sprocket": "nope"}, r"<dict>: tracks\.left\.sprocket: joint 'nope' is not a movable joint"),
    ({"link": "nope"}, r"<dict>: tracks\.left\.link: 'nope' is not a link"),
    ({"idler_xyz": [-0.25, 0.1, 0.0]}, r"absolem\.urdf: track 'left': idler_xyz y must equal"),
    ({"link": "left_sprocket_link"}, r"track 'left': frame 'left_sprocket' turns with the sprocket"),
])
def test_track_schema_errors_name_the_field(track, message):
    urdf, _ = vehicle_files("absolem")
    with pytest.raises(ModelError, match=message):
        compile_vehicle(load_urdf(urdf, _sidecar(**track)))


def test_required_track_key():
    urdf, _ = vehicle_files("absolem")
    sc = _sidecar()
    del sc["tracks"]["left"]["idler_radius"]
    with pytest.raises(ModelError, match=r"tracks\.left\.idler_radius is required"):
        load_urdf(urdf, sc)


@pytest.fixture(scope="module")
def flat_results(absolem):
    return {n: ext.run_scenario(absolem, n) for n in ("straight", "rotate", "back_and_forth",
                                                      "circular")}


def test_straight_matches_commanded_kinematics(flat_results):
    assert flat_results["straight"].metrics["d_t"] <= 0.1


def test_rotate_in_place(flat_results):
    m = flat_results["rotate"].metrics
    assert m["d_omega"] <= 0.1
    assert m["centre_drift"] < 1e-3


def test_back_and_forth_returns(flat_results):
    assert flat_results["back_and_forth"].metrics["d_st"] <= 0.05


def test_circular_turns_left_with_skid_steer_width(flat_results):
    m = flat_results["circular"].metrics
    # least-squares skid steering: the effective track width exceeds the geometric 0.4 m, so
    # the circle is wider than the no-slip differential-drive one (radius 0.4 m)
    assert m["yaw"] > 0 and m["radius"] > 0.4


def test_track_speed_map_is_symmetric(absolem):
    M = ext.body_from_track_speeds(absolem, (ext.FLIPPERS_FLAT,) * 4)
    # vx = (vl + vr) / 2 up to the partly active end-arc patches (2 % at the settled start)
    np.testing.assert_allclose(M[0], [0.5, 0.5], atol=0.015)
    assert M[1, 1] == pytest.approx(-M[1, 0], rel=1e-9) and M[1, 1] > 0


def test_stand_on_staircase_does_not_drift(absolem):
    m = ext.run_scenario(absolem, "stand_on_stairs").metrics
    assert m["d_st"] < 0.01 and m["d_omega"] < 0.01


def test_descends_staircase_without_stalling(absolem):
    m = ext.run_scenario(absolem, "staircase").metrics
    assert m["dz"] < -0.8 and m["min_speed_1s"] > 0.1


def test_crosses_pallet_without_stalling(absolem):
    m = ext.run_scenario(absolem, "pallet").metrics
    assert m["dx"] > 2.0 and m["min_speed_1s"] > 0.03


def test_edge_height_error_measures_the_tread_above_a_nosing():
    """Closed form: a point 4 mm past a stair nosing and 50 mm above it is 50 mm from the
    tread plane (the riser below it would say millimetres, with a horizontal normal)."""
    t = ext.staircase_terrain(nosing=0.30)
    tk, tp, tg = t.kernel_args()
    top = ext.STAIR_STEPS * ext.STAIR_RISE
    pl = np.zeros(6)
    pl[[0, 2]] = 0.304, top + 0.05
    dz, rx, _, rz, nx, _, nz = _patch_height_error(tk, tp, tg, np.eye(4), pl)
    assert dz == pytest.approx(0.05, abs=1e-12) and (nx, nz) == (0.0, 1.0)
    assert (rx, rz) == (0.304, top + 0.05)
    # on the flat tread itself the correction changes nothing
    pl[[0, 2]] = 0.1, top + 0.02
    assert _patch_height_error(tk, tp, tg, np.eye(4), pl)[0] == pytest.approx(0.02, abs=1e-12)


def test_patch_contact_normal_is_the_belt_normal(absolem):
    m = absolem
    q = m.neutral_state()
    q[0:4] = [np.cos(0.05), 0.0, np.sin(0.05), 0.0]  # pitched 0.1 rad
    q[6] = 0.5
    q[9:13] = ext.FLIPPERS_FLAT
    d = kin.create_data(m)
    kin.forward_kinematics(m, d, q)
    kin.wheel_contact(m, d, flat())
    zb = d.T_world[0, :3, 2]
    for k in (8, 10, 28):  # lower-run patches of the main tracks: normal = body z axis
        np.testing.assert_allclose(d.T_contact[k, :3, 2], zb, atol=1e-12)


def test_levels_out_on_the_floor_after_the_stairs(absolem):
    r = ext.run_scenario(absolem, "staircase")
    # one-sided contacts: nothing holds the robot tilted on two edges ahead of its centre
    assert r.metrics["dz"] == pytest.approx(-ext.STAIR_STEPS * ext.STAIR_RISE, abs=0.005)
    roll, pitch, _ = rot_to_euler(quat_to_rot(r.q[-1, 0:4]))
    assert abs(pitch) < 0.01 and abs(roll) < 1e-9
