"""The nodes over real DDS (prints numbers, asserts nothing; needs rclpy and the built msg/srv).

1. Prediction service for planners (issue 20): ``~/predict`` of a prediction node process
   (Warthog, flat, ENHANCED with covariance, 5 s horizon at 0.04 s = 125 steps, two body-twist
   segments per candidate), called from this process, for C = 1, 100, 1000, 5000 candidates:
   round-trip wall time with end states only (``every = T``) and with ``every = 10`` (poses
   and covariances), against the same batch computed in this process by
   :func:`wmr_model.prediction.predict.predict` (alone, and with the twist -> joint-rate conversion
   :func:`wmr_model.prediction.predict.twist_commands` the node also does). Then the latency of a C
   = 1 request sent while a C = 1000 request is being computed.
2. Odometry *node* CPU at 100 Hz and 1 kHz JointState (+ Imu at the same rate), published in
   real time for a few seconds (``--odometry``): the node process's CPU time per second of wall
   time. bench/bench_odometry.py measures the core :class:`Odometry3D` alone.

``fill_response_per_element`` keeps the per-element message fill the node had before the bulk
builders (test/ros/test_conversions_bulk.py compares both on the wire).

Run: ``.venv/bin/python bench/bench_nodes.py [--odometry] [--quick]``; prints tables, then one
JSON line. Nodes run on a private ROS domain limited to this host (test/ros/harness.py).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "test" / "ros"))

from harness import acquire_domain_id, ros_environment  # noqa: E402

CANDIDATES = (1, 100, 1000, 5000)
HORIZON, DT = 5.0, 0.04
STEPS = int(round(HORIZON / DT))
VEHICLE = "warthog"


def fill_response_per_element(model, inputs, pred, resp):
    """The response fill before the bulk builders (one constructor chain per pose/point)."""
    import array

    from geometry_msgs.msg import PoseStamped
    from nav_msgs.msg import Path as PathMsg
    from std_msgs.msg import Header
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    from wmr_model.ros import conversions as cv

    def doubles(a):
        out = array.array("d")
        out.frombytes(np.ascontiguousarray(a, dtype=np.float64).tobytes())
        return out

    C, T1 = pred.q.shape[0], pred.q.shape[1]
    dt = inputs.dt
    header = Header(frame_id=inputs.frame_id, stamp=cv.seconds_to_stamp(inputs.stamp))
    stamps = [cv.seconds_to_stamp(inputs.stamp + t * dt) for t in range(T1)]
    durations = [cv.seconds_to_duration(t * dt) for t in range(T1)]
    paths, trajs = [], []
    names = list(model.joint_names)
    for c in range(C):
        q = pred.q[c]
        poses = []
        for t in range(T1):
            ps = PoseStamped()
            ps.header.frame_id = inputs.frame_id
            ps.header.stamp = stamps[t]
            ps.pose = cv.arrays_to_pose(q[t, 4:7], q[t, 0:4])
            poses.append(ps)
        paths.append(PathMsg(header=header, poses=poses))
        rates = pred.qdot[c, :, 6:]
        points = []
        for t in range(T1):
            pt = JointTrajectoryPoint()
            pt.positions = doubles(q[t, 7:])
            pt.velocities = doubles(rates[min(t, T1 - 2)])
            pt.time_from_start = durations[t]
            points.append(pt)
        trajs.append(JointTrajectory(header=header, joint_names=names, points=points))
    resp.paths = paths
    resp.joint_trajectories = trajs
    cov = pred.ros_covariance
    resp.pose_covariances = doubles(cov) if cov is not None else array.array("d")
    resp.flags = array.array("B", pred.flags.astype(np.uint8).tobytes())
    return resp


def serve() -> int:
    """Run a prediction node for the benchmark."""
    from wmr_model.ros import prediction_node

    return prediction_node.main([sys.argv[0], "--ros-args", "-p", f"vehicle:={VEHICLE}",
                                 "-p", "max_horizon:=1000.0", "-p", "max_compute_time:=600.0",
                                 "-p", "max_request_memory_mb:=20000.0",
                                 "-r", "__ns:=/bench_pred"])


def _segments(C: int) -> np.ndarray:
    """(C, 2, 3) two 2.5 s segments (vx, wz, duration) per candidate: a fan of turn rates."""
    wz = np.linspace(-0.5, 0.5, C) if C > 1 else np.array([0.2])
    return np.stack([np.stack([np.full(C, 1.0), wz, np.full(C, HORIZON / 2)], -1),
                     np.stack([np.full(C, 1.0), -wz, np.full(C, HORIZON / 2)], -1)], 1)


def _request(C: int, every: int, outputs: int):
    from wmr_model.ros.client import build_request

    seg = _segments(C)
    return build_request(twists=seg[:, :, :2], twist_durations=seg[0, :, 2], num_steps=STEPS,
                         step_size=DT, pose=(0.0, 0.0, 0.0), fidelity="enhanced",
                         every=every, outputs=outputs)


def _call(node, client, req, timeout=600.0):
    import rclpy

    fut = client.call_async(req)
    rclpy.spin_until_future_complete(node, fut, timeout_sec=timeout)
    if not fut.done():
        raise TimeoutError(f"no answer from {client.srv_name} in {timeout} s")
    return fut.result()


def in_process(C: int, every: int, repeat: int) -> tuple[float, float]:
    """Best of ``repeat + 1`` runs [s] of predict() alone and of twist_commands + predict()."""
    from wmr_model.estimation.odometry import DEFAULT_QPRIME_U
    from wmr_model.io.vehicles import load_vehicle
    from wmr_model.kinematics.uncertainty import qprime_from_parameters
    from wmr_model.prediction.predict import predict, twist_commands
    from wmr_model.prediction.rollouts import place_on_terrain
    from wmr_model.terrain.surface import flat

    m, g = load_vehicle(VEHICLE), flat()
    q0 = place_on_terrain(m, g, m.neutral_state())
    Q = qprime_from_parameters(DEFAULT_QPRIME_U)
    best_p, best_all = np.inf, np.inf
    for _ in range(repeat + 1):
        t0 = time.perf_counter()
        u = twist_commands(m, _segments(C), DT, q=q0)[:, :STEPS]
        if u.shape[1] < STEPS:  # the last segment held to the horizon, as the node does
            u = np.concatenate([u, np.repeat(u[:, -1:], STEPS - u.shape[1], axis=1)], 1)
        t1 = time.perf_counter()
        predict(m, g, q0, u, DT, fidelity="enhanced", Qprime=Q, every=every)
        t2 = time.perf_counter()
        best_p, best_all = min(best_p, t2 - t1), min(best_all, t2 - t0)
    return best_p, best_all


def bench_prediction(node, env, quick: bool = False) -> dict:
    from wmr_model.srv import PredictTrajectory

    Req = PredictTrajectory.Request
    ends = Req.OUTPUT_POSES | Req.OUTPUT_COVARIANCES | Req.OUTPUT_FLAGS
    rows, concurrent = [], []
    proc = subprocess.Popen([sys.executable, __file__, "--serve"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        client = node.create_client(PredictTrajectory, "/bench_pred/prediction_node/predict")
        if not client.wait_for_service(timeout_sec=60):
            raise RuntimeError("prediction node did not come up: "
                               f"{proc.stderr.read().decode() if proc.poll() else ''}")
        for C in CANDIDATES[:3] if quick else CANDIDATES:
            repeat = 5 if C <= 1000 else 3
            for label, every in (("end states", STEPS), ("every 10", 10)):
                req = _request(C, every, ends)
                resp = _call(node, client, req)  # warm-up
                assert resp.success, resp.status_message
                wall, compute, t_pred, t_all = [], [], np.inf, np.inf
                for _ in range(repeat):  # interleaved, so both see the same machine load
                    t0 = time.perf_counter()
                    resp = _call(node, client, req)
                    wall.append(time.perf_counter() - t0)
                    assert resp.success and not resp.partial, resp.status_message
                    compute.append(resp.compute_time)
                    tp, ta = in_process(C, every, 0)
                    t_pred, t_all = min(t_pred, tp), min(t_all, ta)
                rt = float(np.min(wall))
                rows.append({"candidates": C, "steps": STEPS, "output": label,
                             "samples": len(resp.steps),
                             "roundtrip_ms_median": 1e3 * float(np.median(wall)),
                             "roundtrip_ms_min": 1e3 * rt,
                             "node_compute_ms_min": 1e3 * float(np.min(compute)),
                             "predict_ms": 1e3 * t_pred, "twist_and_predict_ms": 1e3 * t_all,
                             "ratio_to_predict": rt / t_pred,
                             "ratio_to_twist_and_predict": rt / t_all,
                             "response_values": len(resp.poses) + len(resp.pose_covariances)})
        # a C = 1 request sent while a C = 1000 request computes
        big, small = _request(1000, STEPS, ends), _request(1, STEPS, ends)
        for _ in range(3 if quick else 5):
            fb = client.call_async(big)
            t_end = time.perf_counter() + 0.1
            while time.perf_counter() < t_end:
                rclpy_spin_once(node, 0.01)
            t0 = time.perf_counter()
            fs = client.call_async(small)
            while not fs.done():
                rclpy_spin_once(node, 0.001)
            lat = time.perf_counter() - t0
            big_running = not fb.done()
            while not fb.done():
                rclpy_spin_once(node, 0.01)
            concurrent.append({"small_latency_ms": 1e3 * lat,
                               "big_still_running_when_small_answered": big_running,
                               "small_ok": fs.result().success, "big_ok": fb.result().success})
        node.destroy_client(client)
    finally:
        proc.send_signal(2)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return {"rows": rows, "concurrent": concurrent}


def rclpy_spin_once(node, timeout: float) -> None:
    import rclpy

    rclpy.spin_once(node, timeout_sec=timeout)


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def bench_odometry_node(node, env, rate: float, seconds: float) -> dict:
    import rclpy
    from nav_msgs.msg import Odometry
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import Imu, JointState

    from wmr_model.ros.conversions import seconds_to_stamp

    ns = f"/bench_odo_{int(rate)}"
    proc = subprocess.Popen([sys.executable, str(REPO / "scripts" / "odometry_node"),
                             "--ros-args", "-r", f"__ns:={ns}", "-p", "vehicle:=warthog",
                             "-p", "publish_tf:=false", "-p", "queue_size:=1000"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    qos = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
    js = node.create_publisher(JointState, f"{ns}/joint_states", qos)
    imu = node.create_publisher(Imu, f"{ns}/imu/data", qos)
    got = []
    sub = node.create_subscription(Odometry, f"{ns}/odom", got.append, qos)
    try:
        deadline = time.monotonic() + 60
        while js.get_subscription_count() < 1 or imu.get_subscription_count() < 1:
            if time.monotonic() > deadline:
                raise RuntimeError("odometry node did not subscribe in 60 s")
            rclpy.spin_once(node, timeout_sec=0.05)
        rclpy.spin_once(node, timeout_sec=1.0)
        n = int(seconds * rate)
        cpu0, t0 = _cpu_seconds(proc.pid), time.perf_counter()
        for k in range(n):
            t = k / rate
            m = JointState()
            m.header.stamp = seconds_to_stamp(100.0 + t)
            m.name = ["left_wheel_joint", "right_wheel_joint"]
            m.velocity = [3.0 + 0.5 * math.sin(0.3 * t), 3.0 + 0.5 * math.sin(0.4 * t)]
            g = Imu()
            g.header.stamp = seconds_to_stamp(100.0 + t - 0.5 / rate)
            g.angular_velocity.z = 0.2 * math.sin(0.5 * t)
            g.orientation_covariance[0] = -1.0
            imu.publish(g)
            js.publish(m)
            rclpy.spin_once(node, timeout_sec=0)
            wait = t0 + (k + 1) / rate - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
        wall = time.perf_counter() - t0
        cpu = _cpu_seconds(proc.pid) - cpu0
        end = time.monotonic() + 2.0
        while time.monotonic() < end and len(got) < n - 1:
            rclpy.spin_once(node, timeout_sec=0.05)
        return {"encoder_rate_hz": rate, "imu_rate_hz": rate, "messages": n,
                "odometry_received": len(got), "wall_s": wall,
                "node_cpu_percent_of_one_core": 100.0 * cpu / wall}
    finally:
        node.destroy_subscription(sub)
        node.destroy_publisher(js)
        node.destroy_publisher(imu)
        proc.send_signal(2)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main(odometry: bool = False, quick: bool = False, seconds: float = 5.0) -> dict:
    domain, lock = acquire_domain_id()
    env = ros_environment(domain)
    for k in ("ROS_DOMAIN_ID", "RMW_IMPLEMENTATION", "ROS_AUTOMATIC_DISCOVERY_RANGE"):
        os.environ[k] = env[k]
    import rclpy

    rclpy.init()
    node = rclpy.create_node("wmr_bench_nodes")
    try:
        pred = bench_prediction(node, env, quick)
        odo = ([bench_odometry_node(node, env, r, seconds) for r in (100.0, 1000.0)]
               if odometry else [])
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
        lock.close()
    print(f"prediction service over DDS, {VEHICLE}, flat, enhanced + covariance, {STEPS} steps "
          f"({HORIZON:g} s), BODY_TWIST 2 segments; best of interleaved runs: round trip vs "
          f"predict() of the batch in process (and twist conversion + predict())")
    print(f"{'C':>5} {'output':>10} {'S':>4} {'round trip ms':>14} {'median':>8} {'node ms':>8} "
          f"{'predict ms':>11} {'ratio':>6} {'tw+pred ms':>11} {'ratio':>6}")
    for r in pred["rows"]:
        print(f"{r['candidates']:5d} {r['output']:>10} {r['samples']:4d} "
              f"{r['roundtrip_ms_min']:14.1f} {r['roundtrip_ms_median']:8.1f} "
              f"{r['node_compute_ms_min']:8.1f} "
              f"{r['predict_ms']:11.1f} {r['ratio_to_predict']:6.2f} "
              f"{r['twist_and_predict_ms']:11.1f} {r['ratio_to_twist_and_predict']:6.2f}")
    print("\nC = 1 request sent 0.1 s into a C = 1000 request (end states)")
    for r in pred["concurrent"]:
        print(f"  latency {r['small_latency_ms']:7.1f} ms, big still running: "
              f"{r['big_still_running_when_small_answered']}")
    if odo:
        print("\nodometry node process (warthog, JointState + Imu in real time)")
        print(f"{'enc Hz':>7} {'msgs':>6} {'odom out':>9} {'CPU % core':>11}")
        for r in odo:
            print(f"{r['encoder_rate_hz']:7.0f} {r['messages']:6d} {r['odometry_received']:9d} "
                  f"{r['node_cpu_percent_of_one_core']:11.1f}")
    out = {"prediction_service": pred, "odometry_node": odo}
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--serve":
        sys.exit(serve())
    main(odometry="--odometry" in sys.argv, quick="--quick" in sys.argv)
