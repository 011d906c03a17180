"""launch_testing description of the real-log test (run by test/ros/test_real_log_nodes.py).

As a user runs it: ``bringup.launch.py vehicle:=V use_sim_time:=true use_calibration:=true
reference_topic:=REF [steer_topic:=T]`` and ``wmr play BAG`` (with /clock) playing a real log
of a steered vehicle into it. The test records /odom and the calibrator's states while the bag
plays and writes them, with the checks' numbers, to ``$WMR_REAL_LOG_OUT/results.json``: the
node's odometry must be the offline odometry of the same bag (the core's ``Odometry3D`` fed in
stamp order, with the same steering angles), and its drift against the reference is printed.

Environment: WMR_REAL_LOG_BAG, WMR_REAL_LOG_VEHICLE, WMR_REAL_LOG_REFERENCE (topic),
WMR_REAL_LOG_STEER (topic or empty), WMR_REAL_LOG_POSE_SOURCE (odometry | navsatfix),
WMR_REAL_LOG_CALIBRATOR (JSON of extra calibrator parameters), WMR_REAL_LOG_RATE,
WMR_REAL_LOG_OUT.
"""

from __future__ import annotations

import json
import math
import os
import sys
import threading
import time
import unittest
from pathlib import Path

import launch
import launch_testing.actions
import launch_testing.asserts
import numpy as np
import rclpy
from ament_index_python.packages import get_package_share_directory
from launch.actions import ExecuteProcess, IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource

BAG = Path(os.environ["WMR_REAL_LOG_BAG"])
VEHICLE = os.environ["WMR_REAL_LOG_VEHICLE"]
REFERENCE = os.environ["WMR_REAL_LOG_REFERENCE"]
STEER = os.environ.get("WMR_REAL_LOG_STEER", "")
POSE_SOURCE = os.environ.get("WMR_REAL_LOG_POSE_SOURCE", "odometry")
RATE = float(os.environ.get("WMR_REAL_LOG_RATE", "1"))
OUT = Path(os.environ["WMR_REAL_LOG_OUT"])
BIN = Path(sys.executable).parent
READY_TOPIC = "/real_log_recorder/ready"
RESULTS: dict = {"bag": str(BAG), "vehicle": VEHICLE, "rate": RATE}


def generate_test_description():
    share = Path(get_package_share_directory("wmr_model"))
    args = {"vehicle": VEHICLE, "use_sim_time": "true", "use_calibration": "true",
            "use_prediction": "false", "reference_topic": REFERENCE}
    if STEER:
        args["steer_topic"] = STEER
    params = OUT / "params.yaml"
    OUT.mkdir(parents=True, exist_ok=True)
    extra = json.loads(os.environ.get("WMR_REAL_LOG_CALIBRATOR", "{}"))
    params.write_text("/**/calibrator_node:\n  ros__parameters:\n"
                      f"    pose_source: {POSE_SOURCE}\n    push.enabled: false\n"
                      + "".join(f"    {k}: {v}\n" for k, v in extra.items()))
    args["params_file"] = str(params)
    bringup = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(str(share / "launch" / "bringup.launch.py")),
        launch_arguments=args.items())
    # the player starts once both nodes listen to every input they read (the steering topic
    # too: a command published before they subscribe would be lost to them)
    waits = ["/joint_states:2", f"{REFERENCE}:1", f"{READY_TOPIC}:1"]
    if STEER:
        waits.append(f"{STEER}:2")
    player = ExecuteProcess(
        cmd=[str(BIN / "wmr"), "play", str(BAG), "--rate", str(RATE),
             *[a for w in waits for a in ("--wait-for", w)],
             "--wait-timeout", "300", "--delay", "1.0"],
        output="screen", name="player")
    return launch.LaunchDescription([bringup, player, launch_testing.actions.ReadyToTest()]), \
        {"player": player}


def _stamp(header) -> float:
    return header.stamp.sec + 1e-9 * header.stamp.nanosec


class Recorder:
    """Subscribes (own context, spun in a thread) to /odom and the calibrator's state."""

    def __init__(self) -> None:
        from nav_msgs.msg import Odometry
        from rclpy.executors import MultiThreadedExecutor
        from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy

        from wmr_model.msg import CalibrationState

        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node("real_log_recorder", context=self.context)
        self.odom: list[tuple] = []
        self.states: list = []
        qos = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE,
                         history=HistoryPolicy.KEEP_ALL)
        n = self.node
        self._outputs = [
            n.create_subscription(Odometry, "/odom", self._on_odom, qos),
            n.create_subscription(CalibrationState, "/calibrator_node/state",
                                  self.states.append, qos)]
        self.executor = MultiThreadedExecutor(context=self.context)
        self.executor.add_node(n)
        threading.Thread(target=self.executor.spin, daemon=True).start()
        threading.Thread(target=self._announce_ready, daemon=True).start()

    def _on_odom(self, m) -> None:
        p, q = m.pose.pose.position, m.pose.pose.orientation
        yaw = math.atan2(2.0 * (q.w * q.z + q.x * q.y), 1.0 - 2.0 * (q.y * q.y + q.z * q.z))
        self.odom.append((_stamp(m.header), p.x, p.y, yaw))

    def _announce_ready(self, timeout: float = 300.0) -> None:
        from std_msgs.msg import Empty

        t0 = time.monotonic()
        while (self._outputs[0].get_publisher_count() < 1
               and time.monotonic() - t0 < timeout):
            time.sleep(0.05)
        self.node.create_subscription(Empty, READY_TOPIC, lambda _m: None, 1)

    def close(self) -> None:
        self.executor.shutdown()
        self.node.destroy_node()
        self.context.try_shutdown()


def _offline_odometry() -> tuple[np.ndarray, np.ndarray]:
    """``(odometry (N, 4) [t, x, y, yaw], reference (M, 3) [t, x, y])``: the core's
    Odometry3D over the bag's encoder and IMU messages in stamp order with the steering angles
    the node sees (the replay's merge), and the reference positions."""
    from wmr_model.estimation.odometry import Odometry3D
    from wmr_model.estimation.steering import steer_inputs
    from wmr_model.io.bags import read_streams, sidecar_steer_topic
    from wmr_model.io.vehicles import load_vehicle
    from wmr_model.pipelines.replay import _with_steer_angles

    model = load_vehicle(VEHICLE)
    topics = {"enc": "/joint_states", "pose": REFERENCE, "imu": "/imu/data"}
    steer = STEER or sidecar_steer_topic(model)
    if steer and steer != "/joint_states":
        topics["steer"] = steer
    kinds = {"enc": "joint_states", "pose": "pose", "imu": "imu", "steer": "joint_states"}
    s = read_streams(BAG, topics, {k: kinds[k] for k in topics}, optional=("imu",))
    enc = s["enc"]
    if steer_inputs(model):
        enc = _with_steer_angles(enc, s.streams.get("steer"), model)
    odo = Odometry3D(model, use_gyro="imu" in s.streams)
    ev = [(t, 1, i) for i, t in enumerate(enc.stamp)]
    if "imu" in s.streams:
        ev += [(t, 0, i) for i, t in enumerate(s["imu"].stamp)]
    out = []
    for t, k, i in sorted(ev):
        if k == 0:
            odo.update_imu(t, s["imu"].angular_velocity[i])
        elif odo.update_encoders(t, enc.names, enc.position[i], enc.velocity[i]).stepped:
            q = odo.q
            out.append((t, q[4], q[5], 2.0 * math.atan2(q[3], q[0])))
    ref = s["pose"]
    return np.array(out), np.column_stack([ref.stamp, ref.position[:, :2]])


def _drift(odom: np.ndarray, ref: np.ndarray) -> tuple[float, float]:
    """``(end error [m], reference path [m])`` of the odometry aligned (planar, by the
    reference's direction of travel over the first metres and the odometry's own) at the
    reference's first sample inside it."""
    t0 = max(odom[0, 0], ref[0, 0])
    t1 = min(odom[-1, 0], ref[-1, 0])
    r = ref[(ref[:, 0] >= t0) & (ref[:, 0] <= t1)]
    o = np.column_stack([np.interp(r[:, 0], odom[:, 0], odom[:, k]) for k in (1, 2)])
    # rotation laying the odometry track on the reference track (least squares, centred)
    oc, rc = o - o.mean(0), r[:, 1:] - r[:, 1:].mean(0)
    th = math.atan2(float(np.sum(oc[:, 0] * rc[:, 1] - oc[:, 1] * rc[:, 0])),
                    float(np.sum(oc[:, 0] * rc[:, 0] + oc[:, 1] * rc[:, 1])))
    R = np.array([[math.cos(th), -math.sin(th)], [math.sin(th), math.cos(th)]])
    a = (o - o[0]) @ R.T + r[0, 1:]
    path = float(np.sum(np.linalg.norm(np.diff(r[:, 1:], axis=0), axis=1)))
    return float(np.linalg.norm(a[-1] - r[-1, 1:])), path


class TestRealLog(unittest.TestCase):
    rec: Recorder

    @classmethod
    def setUpClass(cls) -> None:
        cls.rec = Recorder()

    @classmethod
    def tearDownClass(cls) -> None:
        OUT.mkdir(parents=True, exist_ok=True)
        (OUT / "results.json").write_text(json.dumps(RESULTS, indent=2, default=float))
        cls.rec.close()

    def test_1_playback(self, proc_info, player) -> None:
        proc_info.assertWaitForShutdown(process=player, timeout=600)
        launch_testing.asserts.assertExitCodes(proc_info, process=player)
        seen, quiet = None, time.monotonic()
        while time.monotonic() - quiet < 5.0:
            now = (len(self.rec.odom), len(self.rec.states))
            if now != seen:
                seen, quiet = now, time.monotonic()
            time.sleep(0.5)

    def test_2_odometry_is_the_offline_odometry(self) -> None:
        odom = np.array(self.rec.odom)
        self.assertGreater(len(odom), 100, "no /odom")
        off, ref = _offline_odometry()
        RESULTS["odom_messages"], RESULTS["offline_steps"] = len(odom), len(off)
        common = np.intersect1d(np.round(odom[:, 0], 6), np.round(off[:, 0], 6))
        self.assertGreaterEqual(len(common), 0.95 * len(off))
        a = {round(r[0], 6): r for r in odom}
        b = {round(r[0], 6): r for r in off}
        d = np.array([np.hypot(a[t][1] - b[t][1], a[t][2] - b[t][2]) for t in common])
        gap = float(d.max())
        RESULTS["max_difference_to_offline_m"] = gap
        RESULTS["first_difference_stamp"] = (float(common[np.argmax(d > 1e-9)])
                                             if gap > 1e-9 else None)
        RESULTS["only_offline"] = sorted(set(np.round(off[:, 0], 6)) - set(common))[:5]
        RESULTS["only_node"] = sorted(set(np.round(odom[:, 0], 6)) - set(common))[:5]
        self.assertLess(gap, 1e-6)
        err, path = _drift(odom, ref)
        RESULTS.update(drift_end_error_m=err, reference_path_m=path,
                       drift_percent=100.0 * err / max(path, 1e-9))
        self.assertGreater(path, 1.0)

    def test_3_calibrator_closes_intervals(self) -> None:
        states = self.rec.states
        RESULTS["calibration_states"] = len(states)
        self.assertTrue(states, "no CalibrationState")
        last = states[-1]
        RESULTS["estimate"] = dict(zip(last.parameter_names, [float(v) for v in last.values]))
        RESULTS["rejected"] = int(last.rejected_count)
        self.assertTrue(all(math.isfinite(v) for v in last.values))


@launch_testing.post_shutdown_test()
class TestShutdown(unittest.TestCase):
    def test_clean_exit(self, proc_info) -> None:
        launch_testing.asserts.assertExitCodes(proc_info, allowable_exit_codes=[0, -2, -15])
