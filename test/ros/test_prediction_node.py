"""The prediction node as a real process: its answers equal the core run in this process.

Valid JOINT_RATES and BODY_TWIST requests are compared array by array with
:func:`wmr_model.prediction.predict.predict` on the same inputs (DYNAMIC ones with
:func:`wmr_model.dynamics.simulate.simulate_dynamics` per candidate), for every request option
(sampling stride, outputs, float32, 2D poses, time budget); invalid requests and requests over
the memory budget get ``success = false`` with a clear status and the node keeps serving;
candidates that blow up are flagged FLAG_INVALID at the step where their state first became
non-finite; a small request is answered while a large one computes; pushed parameters change
the next answer and invalid ones are refused at set time.
"""

from __future__ import annotations

import math
import re
import time
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
SCRIPT = HERE.parents[1] / "scripts" / "prediction_node"
SERVICE = "/pred/prediction_node/predict"
WHEELS = ["left_wheel_joint", "right_wheel_joint"]

# A node process compiles the numba kernels on its first request when the cache is cold (after
# a core edit): minutes on a loaded 2-core machine. Calls wait that long; nothing is timed.
COLD = 600.0
pytestmark = pytest.mark.timeout(1200)


def _start(ros, *params: str):
    from wmr_model.srv import PredictTrajectory

    args = ["--ros-args", "-r", "__ns:=/pred", "-p", "vehicle:=diffdrive",
            "-p", "max_horizon:=20.0", "-p", "slip.p2:=-0.1"]
    for p in params:
        args += ["-p", p]
    ros.start(SCRIPT, *args, name="prediction_node")
    ros.wait_for(services=[SERVICE], timeout=COLD)  # with warmup:=true it compiles first
    return ros.node.create_client(PredictTrajectory, SERVICE)


@pytest.fixture
def server(ros):
    return _start(ros, "publish_path:=true", "publish_markers:=true")


def _request(C=3, T=20, dt=0.05, fidelity=0, every=1, outputs=None):
    from wmr_model.srv import PredictTrajectory

    Req = PredictTrajectory.Request
    req = Req()
    req.header.frame_id = "odom"
    req.header.stamp.sec = 7
    req.fidelity = fidelity
    req.step_size = dt
    req.initial_pose.position.x = 1.0
    req.initial_pose.position.y = 2.0
    req.initial_pose.position.z = 0.1  # POSE_AUTO with z != 0: taken as given (3D)
    req.initial_pose.orientation.z = math.sin(0.2)
    req.initial_pose.orientation.w = math.cos(0.2)
    req.joint_names = ["caster_swivel_joint"]
    req.joint_positions = [0.1]
    req.command_type = Req.JOINT_RATES
    req.num_candidates = C
    req.num_steps = T
    req.command_joint_names = ["right_wheel_joint", "left_wheel_joint"]  # not model order
    rng = np.random.default_rng(2)
    req.joint_commands = rng.uniform(0.0, 5.0, C * T * 2).tolist()
    req.every = every
    req.outputs = Req.OUTPUT_DEFAULT if outputs is None else outputs
    return req


def _model_order(req):
    C, T = req.num_candidates, req.num_steps
    return np.ascontiguousarray(np.array(req.joint_commands).reshape(C, T, 2)[:, :, ::-1])


def _q0(m):
    q0 = m.neutral_state()
    q0[0:4] = [math.cos(0.2), 0, 0, math.sin(0.2)]
    q0[4:7] = [1.0, 2.0, 0.1]
    q0[7 + m.joint_index("caster_swivel_joint")] = 0.1
    return q0


def _core(req, commands, every=1, q0=None, model=None):
    from wmr_model.estimation.odometry import DEFAULT_QPRIME_U
    from wmr_model.io.vehicles import load_vehicle
    from wmr_model.kinematics.uncertainty import qprime_from_parameters
    from wmr_model.prediction.predict import predict
    from wmr_model.terrain.surface import flat

    m = model or load_vehicle("diffdrive")
    fid = "kinematic" if req.fidelity == 0 else "enhanced"
    return m, predict(m, flat(), _q0(m) if q0 is None else q0, commands, req.step_size,
                      fidelity=fid, slip_params={"slip.p2": -0.1}, every=every,
                      Qprime=qprime_from_parameters(DEFAULT_QPRIME_U))


def _poses(q):
    """(..., 7) response pose layout (x, y, z, qx, qy, qz, qw) of states q (..., nq)."""
    return q[..., [4, 5, 6, 1, 2, 3, 0]]


def _check_arrays(res, pred, m, tol=1e-12):
    """A parsed response (wmr_model.ros.client) equals the core prediction ``pred``."""
    C, S = pred.q.shape[:2]
    assert res.success, res.status_message
    assert res.poses.shape == (C, S, 7)
    np.testing.assert_allclose(res.poses, _poses(pred.q), atol=tol)
    np.testing.assert_allclose(res.covariances.reshape(C, S, 36), pred.ros_covariance,
                               atol=tol)
    np.testing.assert_array_equal(res.flags, pred.flags)
    assert np.all(res.invalid_step == -1)
    np.testing.assert_allclose(res.stability_margin, pred.stability_margin, atol=tol)
    if res.joint_positions is not None:
        assert res.joint_names == list(m.joint_names)
        np.testing.assert_allclose(res.joint_positions, pred.q[:, :, 7:], atol=tol)
        rows = np.minimum(np.arange(S), pred.qdot.shape[1] - 1)
        np.testing.assert_allclose(res.joint_rates, pred.qdot[:, rows, 6:], atol=tol)
    assert res.compute_time > 0


def _call(ros, client, req, timeout=COLD):
    from wmr_model.ros.client import parse_response

    return parse_response(ros.call(client, req, timeout=timeout), req.step_size)


@pytest.mark.parametrize("fidelity", [0, 1])
def test_joint_rate_requests_equal_the_core(ros, server, fidelity):
    from nav_msgs.msg import Path as PathMsg
    from visualization_msgs.msg import MarkerArray

    from wmr_model.srv import PredictTrajectory

    Req = PredictTrajectory.Request
    everything = (Req.OUTPUT_DEFAULT | Req.OUTPUT_JOINT_STATES | Req.OUTPUT_PATHS
                  | Req.OUTPUT_JOINT_TRAJECTORIES)
    req = _request(fidelity=fidelity, outputs=everything)
    m, pred = _core(req, _model_order(req))
    path_msgs, marker_msgs = [], []
    ros.node.create_subscription(PathMsg, "/pred/prediction_node/path", path_msgs.append, 1)
    ros.node.create_subscription(MarkerArray, "/pred/prediction_node/covariance_markers",
                                 marker_msgs.append, 1)
    time.sleep(0.3)
    res = _call(ros, server, req)
    _check_arrays(res, pred, m)
    assert res.status_message.startswith("ok: 3 candidates x 20 steps")
    np.testing.assert_array_equal(res.steps, np.arange(21))
    # the message forms, asked for: one Path and JointTrajectory per candidate
    assert len(res.paths) == 3 and len(res.joint_trajectories) == 3
    for c in range(3):
        got = np.array([[p.pose.position.x, p.pose.position.y, p.pose.position.z,
                         p.pose.orientation.x, p.pose.orientation.y, p.pose.orientation.z,
                         p.pose.orientation.w] for p in res.paths[c].poses])
        np.testing.assert_allclose(got, _poses(pred.q[c]), atol=1e-12)
        st = res.paths[c].poses[-1].header.stamp
        assert st.sec + 1e-9 * st.nanosec == pytest.approx(7 + 20 * req.step_size)
        np.testing.assert_allclose([p.positions for p in res.joint_trajectories[c].points],
                                   pred.q[c, :, 7:], atol=1e-12)
    deadline = time.monotonic() + 10
    while not (path_msgs and marker_msgs) and time.monotonic() < deadline:
        ros.spin_once(0.05)
    assert path_msgs and len(path_msgs[-1].poses) == 21
    assert {"candidates", "covariance"} <= {mk.ns for mk in marker_msgs[-1].markers}


def test_sampling_stride_precision_and_output_selection(ros, server):
    from wmr_model.srv import PredictTrajectory

    Req = PredictTrajectory.Request
    # every = 7 of T = 20: samples 0, 7, 14, 20, each the full run's, flags ORed in between
    req = _request(fidelity=1, every=7, outputs=Req.OUTPUT_DEFAULT | Req.OUTPUT_JOINT_STATES)
    m, pred = _core(req, _model_order(req), every=7)
    res = _call(ros, server, req)
    np.testing.assert_array_equal(res.steps, [0, 7, 14, 20])
    _check_arrays(res, pred, m)
    _, full = _core(req, _model_order(req))
    np.testing.assert_array_equal(res.poses, _poses(full.q[:, [0, 7, 14, 20]]))
    assert not res.paths and not res.joint_trajectories  # messages only when asked

    # every >= T: start and end only; float32 halves the bytes and rounds to float32
    req = _request(fidelity=1, every=1000)
    req.precision = Req.FLOAT32
    raw = ros.call(server, req, timeout=COLD)
    assert not raw.poses and not raw.pose_covariances and not raw.stability_margin
    from wmr_model.ros.client import parse_response

    res = parse_response(raw, req.step_size)
    np.testing.assert_array_equal(res.steps, [0, 20])
    assert res.poses.dtype == np.float32 and res.covariances.dtype == np.float32
    _, pred = _core(req, _model_order(req), every=20)
    np.testing.assert_array_equal(res.poses, _poses(pred.q).astype(np.float32))
    np.testing.assert_array_equal(res.covariances.reshape(3, 2, 36),
                                  pred.ros_covariance.astype(np.float32))

    # only poses: every other output stays empty
    raw = ros.call(server, _request(every=5, outputs=Req.OUTPUT_POSES), timeout=COLD)
    assert raw.success and len(raw.poses) == 3 * 5 * 7
    assert not (raw.pose_covariances or raw.flags or raw.invalid_step or raw.stability_margin
                or raw.joint_positions_out or raw.paths or raw.joint_trajectories)
    # only flags
    raw = ros.call(server, _request(every=5, outputs=Req.OUTPUT_FLAGS), timeout=COLD)
    assert raw.success and not raw.poses and len(raw.flags) == 3 * 5
    assert list(raw.invalid_step) == [-1, -1, -1]


def test_body_twist_request_equals_the_core(ros, server):
    from geometry_msgs.msg import Twist

    from wmr_model.io.vehicles import load_vehicle
    from wmr_model.prediction.controllers import open_loop_rates, twist_profile
    from wmr_model.srv import PredictTrajectory

    req = _request(C=2, T=30, dt=0.1)
    req.command_type = PredictTrajectory.Request.BODY_TWIST
    req.command_joint_names = []
    req.joint_commands = []
    segs = [[(0.5, 0.0), (0.5, 0.4)], [(0.3, -0.2), (0.0, 0.5)]]
    req.twist_durations = [1.0, 0.5]
    for cand in segs:
        for vx, wz in cand:
            tw = Twist()
            tw.linear.x, tw.angular.z = vx, wz
            req.twist_commands.append(tw)
    res = _call(ros, server, req)
    m = load_vehicle("diffdrive")
    q = m.neutral_state()
    q[7 + m.joint_index("caster_swivel_joint")] = 0.1
    seg = np.array([[(vx, wz, d) for (vx, wz), d in zip(c, (1.0, 2.0))] for c in segs])
    # the node's default controller is the vehicle's: diffdrive's sidecar says differential
    twist = np.stack(twist_profile(seg, 0.1), axis=-1)
    rates = open_loop_rates(m, "vehicle", twist, 0.1, q=q)
    assert rates.shape[1] == 30
    _, pred = _core(req, rates)
    _check_arrays(res, pred, m)


def test_invalid_requests_are_refused_and_the_node_keeps_serving(ros, server):
    from wmr_model.srv import PredictTrajectory

    Req = PredictTrajectory.Request
    cases = []
    r = _request()
    r.command_joint_names = ["left_wheel_joint", "arm_joint"]
    cases.append((r, r"unknown joint 'arm_joint'"))
    r = _request()
    r.command_joint_names = ["left_wheel_joint"]
    r.joint_commands = [1.0] * (3 * 20)
    cases.append((r, r"actuated joints \['right_wheel_joint'\] are not commanded"))
    r = _request()
    r.joint_commands = r.joint_commands[:-1]
    cases.append((r, r"expected num_candidates \* num_steps \* len\(command_joint_names\) = "
                     r"3 \* 20 \* 2 = 120 values, got 119"))
    r = _request()
    r.joint_commands[5] = math.nan
    cases.append((r, r"joint_commands: must be finite; element 5 is nan"))
    r = _request()
    r.initial_pose.position.x = math.inf
    cases.append((r, r"initial_pose.position: must be finite"))
    r = _request(T=1000, dt=0.05)
    r.joint_commands = [1.0] * (3 * 1000 * 2)
    cases.append((r, r"horizon num_steps \* step_size = 50 s exceeds max_horizon 20 s"))
    r = _request()
    r.joint_names = ["ghost"]
    cases.append((r, r"joint_names: unknown joint 'ghost'"))
    r = _request()
    r.joint_positions = [0.1, 0.2]
    cases.append((r, r"joint_positions: 2 values for 1 joint_names"))
    r = _request()
    r.step_size = -0.1
    cases.append((r, r"step_size: must be a finite number > 0 s"))
    r = _request()
    r.fidelity = 7
    cases.append((r, r"fidelity: must be KINEMATIC \(0\), ENHANCED \(1\) or DYNAMIC \(2\)"))
    r = _request()
    r.num_candidates = 0
    cases.append((r, r"num_candidates and num_steps must be >= 1"))
    r = _request()
    r.command_type = Req.BODY_TWIST
    r.twist_durations = [1.0]
    cases.append((r, r"twist_commands: expected num_candidates \* len\(twist_durations\) = "
                     r"3 \* 1 = 3, got 0"))
    r = _request()
    r.use_latest_odometry = True
    cases.append((r, r"use_latest_odometry: no odometry received yet"))
    r = _request()
    r.outputs = 1024
    cases.append((r, r"outputs: unknown bits 0x400"))
    r = _request()
    r.precision = 3
    cases.append((r, r"precision: must be FLOAT64 \(0\) or FLOAT32 \(1\), got 3"))
    r = _request()
    r.initial_pose_mode = 9
    cases.append((r, r"initial_pose_mode: must be POSE_AUTO \(0\), POSE_3D \(1\) or POSE_2D"))
    r = _request()
    r.max_compute_time = -1.0
    cases.append((r, r"max_compute_time: must be a finite number >= 0 s"))
    for req, pattern in cases:
        resp = ros.call(server, req, timeout=COLD)
        assert not resp.success
        assert re.search(pattern, resp.status_message), resp.status_message
        assert not resp.poses and not resp.pose_covariances and not resp.flags
        assert not resp.paths
    ros.check_alive()
    assert ros.call(server, _request(), timeout=COLD).success


def test_use_latest_odometry(ros, server):
    from nav_msgs.msg import Odometry

    pub = ros.node.create_publisher(Odometry, "/pred/odom", 10)
    odom = Odometry()
    odom.header.frame_id = "odom"
    odom.header.stamp.sec = 42
    odom.pose.pose.position.x = 3.0
    odom.pose.pose.position.z = 0.1
    odom.pose.pose.orientation.w = 1.0
    deadline = time.monotonic() + 10
    while pub.get_subscription_count() < 1:
        assert time.monotonic() < deadline
        ros.spin_once(0.05)
    req = _request()
    req.use_latest_odometry = True
    res = None
    while time.monotonic() < deadline:
        pub.publish(odom)
        ros.spin_once(0.1)
        res = _call(ros, server, req)
        if res.success:
            break
    assert res is not None and res.success, res.status_message
    np.testing.assert_array_equal(res.poses[0, 0], [3.0, 0, 0.1, 0, 0, 0, 1.0])


def _dynamic_core(req, commands, q0=None):
    """simulate_dynamics per candidate on the inputs of ``_request`` (diffdrive, flat)."""
    from wmr_model.dynamics.simulate import simulate_dynamics
    from wmr_model.io.vehicles import load_vehicle
    from wmr_model.terrain.surface import flat

    m = load_vehicle("diffdrive")
    tw = req.initial_twist
    qdot0 = np.zeros(m.nv)
    qdot0[0:6] = [tw.angular.x, tw.angular.y, tw.angular.z, tw.linear.x, tw.linear.y,
                  tw.linear.z]
    for n, v in zip(req.joint_names, req.joint_rates):
        qdot0[6 + m.joint_index(n)] = v
    q0 = _q0(m) if q0 is None else q0
    return m, [simulate_dynamics(m, flat(), q0, qdot0, commands[c], req.step_size,
                                 actuator="ideal") for c in range(commands.shape[0])]


def test_dynamic_requests_equal_simulate_dynamics(ros, server):
    from wmr_model.srv import PredictTrajectory

    Req = PredictTrajectory.Request
    req = _request(C=3, T=15, dt=0.05, fidelity=Req.DYNAMIC,
                   outputs=Req.OUTPUT_DEFAULT | Req.OUTPUT_JOINT_STATES)
    req.initial_twist.linear.x = 0.2
    req.initial_twist.angular.z = 0.1
    req.joint_rates = [0.05]
    u = _model_order(req)
    u[2] = 60.0  # a wheel-spinning step from 0.2 m/s: far beyond the friction limit
    req.joint_commands = u[:, :, ::-1].ravel().tolist()
    _, trajs = _dynamic_core(req, u)
    res = _call(ros, server, req, timeout=COLD)
    assert res.success, res.status_message
    assert res.status_message.startswith("ok: 3 candidates x 15 steps, dynamic")
    assert res.covariances is None  # no propagated covariance for DYNAMIC
    for c, tr in enumerate(trajs):
        np.testing.assert_allclose(res.poses[c], _poses(tr.q), atol=1e-9)
        np.testing.assert_allclose(res.joint_positions[c], tr.q[:, 7:], atol=1e-9)
        np.testing.assert_allclose(res.joint_rates[c], tr.qdot[:, 6:], atol=1e-9)
    assert not np.any(res.flags & ~np.uint8(1 | 2 | 4 | 8))
    assert np.any(res.flags[2] & PredictTrajectory.Response.FLAG_TRACTION_LIMIT)  # the wheels spin
    assert np.all(res.invalid_step == -1)

    # more than the former fixed cap of 32 DYNAMIC candidates: limited by cost only
    res = _call(ros, server, _request(C=40, T=3, fidelity=Req.DYNAMIC), timeout=COLD)
    assert res.success, res.status_message
    assert res.poses.shape == (40, 4, 7)


@pytest.mark.parametrize("spin", [50.0, 1e4])
def test_blown_up_candidates_are_flagged_invalid_at_the_step(ros, server, spin):
    """DYNAMIC spinning in place at +-spin rad/s: the states become NaN (the issue's case);
    the node answers success with FLAG_INVALID from that step and its exact index, also with
    every = 10, and never a non-finite pose without the flag."""
    from wmr_model.prediction.rollouts import place_on_terrain
    from wmr_model.srv import PredictTrajectory
    from wmr_model.terrain.surface import flat

    Req = PredictTrajectory.Request
    T = 80
    req = _request(C=2, T=T, dt=0.05, fidelity=Req.DYNAMIC, every=10)
    req.initial_pose.position.z = 0.0
    req.initial_pose.orientation.z, req.initial_pose.orientation.w = 0.0, 1.0
    req.initial_pose_mode = Req.POSE_2D
    req.initial_pose.position.x, req.initial_pose.position.y = 1.0, 2.0
    u = np.zeros((2, T, 2))
    u[0, :, 0], u[0, :, 1] = spin, -spin
    u[1] = 0.5  # a sane candidate in the same batch
    req.joint_commands = u[:, :, ::-1].ravel().tolist()
    from wmr_model.io.vehicles import load_vehicle

    m = load_vehicle("diffdrive")
    q = m.neutral_state()
    q[4:6] = 1.0, 2.0
    q[7 + m.joint_index("caster_swivel_joint")] = 0.1
    q0 = place_on_terrain(m, flat(), q, (m.joint_index("caster_swivel_joint"),))
    _, trajs = _dynamic_core(req, u, q0=q0)
    bad = ~np.all(np.isfinite(trajs[0].q), axis=1)
    assert bad.any(), "the oracle run should blow up"
    first = int(np.argmax(bad))
    res = _call(ros, server, req, timeout=COLD)
    assert res.success, res.status_message
    assert "1 candidates invalid" in res.status_message
    assert res.invalid_step.tolist() == [first, -1]
    steps = res.steps
    flagged = (res.flags & PredictTrajectory.Response.FLAG_INVALID) != 0
    np.testing.assert_array_equal(flagged[0], steps >= first)
    assert not flagged[1].any()
    nonfinite = ~np.all(np.isfinite(res.poses), axis=2)
    assert not np.any(nonfinite & ~flagged)  # no NaN pose without the flag
    np.testing.assert_allclose(res.poses[1], _poses(trajs[1].q[steps]), atol=1e-9)


def test_memory_budget_refuses_before_allocating(ros):
    from geometry_msgs.msg import Twist

    from wmr_model.srv import PredictTrajectory

    Req = PredictTrajectory.Request
    # a generous time budget: the node may be the first to compile the twist path's kernels
    client = _start(ros, "max_request_memory_mb:=200.0", f"max_compute_time:={COLD}")
    # 5000 x 10000 steps: tens of GB of states if allocated; sent as 5000 twists (small)
    req = _request(C=5000, T=10000, dt=0.001)
    req.command_type = Req.BODY_TWIST
    req.command_joint_names, req.joint_commands = [], []
    req.twist_durations = [10.0]
    req.twist_commands = [Twist() for _ in range(5000)]
    resp = ros.call(client, req, timeout=COLD)
    assert not resp.success
    m = re.match(r"memory: 5000 candidates x 10000 steps \(10001 samples each, kinematic\) "
                 r"need about (\d+) MB \(commands (\d+), scratch (\d+), results (\d+), "
                 r"response (\d+) MB\) > max_request_memory_mb 200", resp.status_message)
    assert m, resp.status_message
    assert int(m.group(1)) > 20000  # > 20 GB
    assert int(m.group(2)) == round(8 * 5000 * 10000 * 2 / 1e6)  # (C, T, na) float64
    # end states only of the same batch fit: the samples dominate, not the steps
    req.every = 10000
    req.num_candidates, req.twist_commands = 500, req.twist_commands[:500]
    resp = ros.call(client, req, timeout=COLD)
    assert not resp.success and "memory: 500 candidates" in resp.status_message
    req.num_steps, req.step_size, req.twist_durations = 200, 0.05, [10.0]
    resp = ros.call(client, req, timeout=COLD)
    assert resp.success, resp.status_message
    assert list(resp.steps) == [0, 200]
    ros.check_alive()


def test_time_budget_returns_the_finished_candidates_or_fails(ros, server):
    from wmr_model.srv import PredictTrajectory

    Req = PredictTrajectory.Request
    C, T = 4000, 200
    req = _request(C=C, T=T, dt=0.05, fidelity=Req.ENHANCED, every=T)
    req.max_compute_time = 0.05
    resp = ros.call(server, req, timeout=COLD)
    assert not resp.success
    assert re.match(r"max_compute_time 0\.05 s: \d+ of 4000 candidates computed",
                    resp.status_message), resp.status_message
    req.allow_partial = True
    from wmr_model.ros.client import parse_response

    res = parse_response(ros.call(server, req, timeout=COLD), req.step_size)
    assert res.success and res.partial, res.status_message
    n = res.poses.shape[0]
    assert 0 < n < C and f"partial: {n} of {C}" in res.status_message
    _, pred = _core(req, _model_order(req)[:n], every=T)
    np.testing.assert_allclose(res.poses, _poses(pred.q), atol=1e-12)


def test_small_request_is_answered_while_a_large_one_computes(ros, server):
    from wmr_model.srv import PredictTrajectory

    Req = PredictTrajectory.Request
    big = _request(C=3000, T=200, dt=0.05, fidelity=Req.ENHANCED, every=200)
    big.allow_partial = True  # a loaded machine may not finish it within max_compute_time
    small = _request(C=1, T=20, fidelity=Req.ENHANCED, every=20)
    assert ros.call(server, small, timeout=COLD).success  # warm
    assert server.wait_for_service(timeout_sec=10)
    fut_big = server.call_async(big)
    # let the big one start computing, then send the small one
    end = time.monotonic() + 0.5
    while time.monotonic() < end:
        ros.spin_once(0.02)
    fut_small = server.call_async(small)
    deadline = time.monotonic() + COLD
    order = []
    while len(order) < 2 and time.monotonic() < deadline:
        ros.spin_once(0.01)
        for name, f in (("small", fut_small), ("big", fut_big)):
            if f.done() and name not in order:
                order.append(name)
    assert order == ["small", "big"], order
    assert fut_small.result().success and fut_big.result().success


def test_two_d_initial_poses_on_flat_and_sloped_terrain(ros):
    """A planner's 2D pose (z = 0, level) is put on the terrain by contact initialization for
    every fidelity: the start state equals the core's, and standing or driving gently raises
    no flag (before: DYNAMIC flagged WHEEL_LIFTOFF and TIPOVER_RISK from z = 0)."""
    from wmr_model.io.vehicles import load_vehicle
    from wmr_model.prediction.rollouts import place_on_terrain
    from wmr_model.srv import PredictTrajectory
    from wmr_model.terrain import surface as tr

    Req = PredictTrajectory.Request
    m = load_vehicle("diffdrive")
    client = _start(ros, "terrain:=plane:10,30")
    for terrain, node_client in ((tr.inclined_plane(math.radians(10.0), math.radians(30.0)),
                                  client),):
        for fidelity in (Req.KINEMATIC, Req.ENHANCED, Req.DYNAMIC):
            req = _request(C=2, T=40, dt=0.05, fidelity=fidelity, every=10)
            req.joint_names, req.joint_positions = [], []
            req.initial_pose.position.z = 0.0
            req.initial_pose.position.x, req.initial_pose.position.y = 1.0, 2.0
            req.initial_pose.orientation.z = math.sin(0.2)
            req.initial_pose.orientation.w = math.cos(0.2)
            u = np.zeros((2, 40, 2))  # standing, and rolling at 0.05 m/s
            u[1] = 0.5
            req.joint_commands = u.ravel().tolist()
            res = _call(ros, node_client, req, timeout=COLD)
            assert res.success, res.status_message
            assert "2D pose placed on the terrain" in res.status_message
            q = m.neutral_state()
            q[0:4] = [math.cos(0.2), 0, 0, math.sin(0.2)]
            q[4:6] = 1.0, 2.0
            q0 = place_on_terrain(m, terrain, q)
            np.testing.assert_allclose(res.poses[:, 0], np.tile(_poses(q0), (2, 1)),
                                       atol=1e-9)
            assert res.poses[0, 0, 2] > 0.05  # lifted from z = 0 onto the plane
            assert not np.any(res.flags), (fidelity, res.flags)
    ros.stop_all()


def test_flat_ground_two_d_pose_raises_no_flags(ros, server):
    from wmr_model.ros.client import PredictionClient

    client = PredictionClient(ros.node, SERVICE)
    for fidelity in ("kinematic", "enhanced", "dynamic"):
        u = np.zeros((2, 40, 2))
        u[1] = 0.5
        res = client.predict(commands=u, command_joint_names=WHEELS, step_size=0.05,
                             pose=(1.0, 2.0, 0.3), fidelity=fidelity, every=10,
                             executor=ros.executor, timeout=COLD)
        assert res.success, res.status_message
        assert not np.any(res.flags), (fidelity, res.flags)
        assert res.poses[0, 0, 2] > 0.05


def test_client_builds_requests_from_arrays(ros, server):
    """The NumPy client: request from arrays, (N, S, ...) arrays back, equal to the core."""
    from wmr_model.prediction.predict import twist_commands
    from wmr_model.prediction.rollouts import place_on_terrain
    from wmr_model.ros.client import PredictionClient, build_request
    from wmr_model.terrain.surface import flat

    client = PredictionClient(ros.node, SERVICE)
    assert client.wait_for_service(30)
    req = _request(C=4, T=30, fidelity=1)
    u = _model_order(req)
    res = client.predict(commands=u, command_joint_names=WHEELS, step_size=0.05,
                         pose=(1.0, 2.0, 0.1, 0.0, 0.0, math.sin(0.2), math.cos(0.2)),
                         joint_positions={"caster_swivel_joint": 0.1}, every=6,
                         outputs=["poses", "covariances", "flags", "stability_margin",
                                  "joint_states"], frame_id="odom", stamp=7.0,
                         executor=ros.executor)
    m, pred = _core(req, u, every=6)
    _check_arrays(res, pred, m)
    np.testing.assert_allclose(res.times, [0, 0.3, 0.6, 0.9, 1.2, 1.5])
    assert res.valid.tolist() == [True] * 4
    # twists with a 2D pose, float32 end states
    tw = np.array([[[0.5, w]] for w in (-0.3, 0.0, 0.3)])
    res = client.predict(twists=tw, twist_durations=[1.5], num_steps=30, step_size=0.05,
                         pose=(0.0, 0.0, 0.0), every=30, float32=True,
                         executor=ros.executor)
    assert res.success and res.poses.dtype == np.float32 and res.poses.shape == (3, 2, 7)
    q0 = place_on_terrain(m, flat(), m.neutral_state())
    from wmr_model.estimation.odometry import DEFAULT_QPRIME_U
    from wmr_model.kinematics.uncertainty import qprime_from_parameters
    from wmr_model.prediction.predict import predict

    seg = np.concatenate([tw, np.full((3, 1, 1), 1.5)], axis=2)
    rates = twist_commands(m, seg, 0.05, q=q0)
    pred = predict(m, flat(), q0, rates, 0.05, fidelity="enhanced", every=30,
                   slip_params={"slip.p2": -0.1},
                   Qprime=qprime_from_parameters(DEFAULT_QPRIME_U))
    np.testing.assert_allclose(res.poses, _poses(pred.q).astype(np.float32), atol=1e-6)
    with pytest.raises(ValueError, match="outputs: unknown output 'velocities'"):
        build_request(commands=u, command_joint_names=WHEELS, step_size=0.05,
                      outputs=["velocities"])
    with pytest.raises(ValueError, match=r"commands: expected \(C, T, 1\)"):
        build_request(commands=u, command_joint_names=WHEELS[:1], step_size=0.05)


def _set_parameters(ros, values: dict):
    from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
    from rcl_interfaces.srv import SetParameters

    cli = ros.node.create_client(SetParameters, "/pred/prediction_node/set_parameters")
    req = SetParameters.Request()
    for k, v in values.items():
        pv = ParameterValue()
        if isinstance(v, str):
            pv.type, pv.string_value = ParameterType.PARAMETER_STRING, v
        else:
            pv.type, pv.double_value = ParameterType.PARAMETER_DOUBLE, float(v)
        req.parameters.append(Parameter(name=k, value=pv))
    return ros.call(cli, req).results


def test_pushed_parameters_apply_and_invalid_ones_are_refused(ros, server):
    """The calibrator's pushes (wheel.<wheel>.radius, slip.*) change the next answer; an
    invalid value (integrator rk9, a negative radius) is refused at set time with the reason
    and the node keeps serving (before: rk9 was accepted and every request failed)."""
    from harness import DiagnosticsRecorder
    from rclpy.qos import QoSProfile

    u = np.full((1, 40, 2), 4.0)  # straight at 0.4 m/s for 2 s
    req = _request(C=1, T=40, every=40)
    req.joint_commands = u.ravel().tolist()
    req.initial_pose_mode = req.POSE_2D
    before = _call(ros, server, req)
    d0 = before.poses[0, -1, 0] - before.poses[0, 0, 0]
    results = _set_parameters(ros, {"wheel.left_wheel_joint.radius": 0.12,
                                    "wheel.right_wheel_joint.radius": 0.12})
    assert [r.successful for r in results] == [True, True], [r.reason for r in results]
    after = _call(ros, server, req)
    d1 = after.poses[0, -1, 0] - after.poses[0, 0, 0]
    assert d1 / d0 == pytest.approx(1.2 * 1.0, rel=2e-2)  # distance scales with the radius
    [bad] = _set_parameters(ros, {"integrator": "rk9"})
    assert not bad.successful
    assert bad.reason == "integrator: must be one of ['euler', 'rk4'], got 'rk9'"
    [bad] = _set_parameters(ros, {"wheel.left_wheel_joint.radius": -0.1})
    assert not bad.successful and "wheel.left_wheel_joint.radius" in bad.reason
    [ok] = _set_parameters(ros, {"integrator": "rk4"})
    assert ok.successful
    assert _call(ros, server, req).success
    # diagnostics: requests, rejections by reason, compute time
    bad_req = _request()
    bad_req.step_size = -1.0
    assert not ros.call(server, bad_req, timeout=COLD).success
    rec = DiagnosticsRecorder(ros, "/pred/prediction_node", QoSProfile(depth=10))
    st, kv = rec.wait(lambda st, kv: int(kv.get("rejected invalid_request", 0)) >= 1)
    from diagnostic_msgs.msg import DiagnosticStatus

    assert st.level == DiagnosticStatus.OK and st.name == "/pred/prediction_node: prediction"
    assert int(kv["requests"]) >= 4 and int(kv["succeeded"]) >= 3
    assert "step_size" in kv["last rejection"]


def test_warmup_compiles_before_serving_and_is_not_counted(ros):
    """warmup:=true serves one tiny request per fidelity before ~/predict is advertised (its
    log says so); diagnostics count only the callers' requests."""
    from harness import DiagnosticsRecorder
    from rclpy.qos import QoSProfile

    client = _start(ros, "warmup:=true")
    _, log = ros.processes[-1].output()
    assert "kernels ready in" in log, log
    rec = DiagnosticsRecorder(ros, "/pred/prediction_node", QoSProfile(depth=10))
    _, kv = rec.wait(lambda st, kv: "requests" in kv)
    assert int(kv["requests"]) == 0 and int(kv["rejected"]) == 0
    req = _request(C=2, T=20, every=5)
    res = _call(ros, client, req)
    assert res.success and np.isfinite(res.poses).all()
    _, kv = rec.wait(lambda st, kv: int(kv.get("requests", 0)) >= 1)
    assert int(kv["requests"]) == 1 and int(kv["succeeded"]) == 1
