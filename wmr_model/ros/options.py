"""The options of the three nodes: one schema row each (design.md §4).

Every ROS parameter of ``odometry_node``, ``prediction_node`` and ``calibrator_node`` that is
not a model parameter (``slip.*``, ``noise.U.*``, ``wheel.<wheel>.radius``, ... of
:mod:`wmr_model.parameters`) is an :class:`wmr_model.parameters.OptionSpec` here, registered
under the node's name (``NODE_OPTIONS``, the parameters every node declares first).
:func:`wmr_model.ros.params.declare_options` declares them with their description, unit, range or
choices and read-only flag; the README's node parameter tables are
:func:`wmr_model.parameters.markdown_table` of these groups. The calibrator lists the interval
rows of :mod:`wmr_model.calibration.intervals` and the buffer rows of
:mod:`wmr_model.calibration.stream`, the prediction and odometry nodes the
integration rows of :mod:`wmr_model.prediction.rollouts` (one definition each). ROS-free:
importing this module needs no rclpy.
"""

from __future__ import annotations

from wmr_model.calibration.identifiability import DEFAULT_MAX_STD_RATIO, DEFAULT_MIN_INTERVALS
from wmr_model.calibration.intervals import INTERVAL_OPTIONS
from wmr_model.calibration.online import DEFAULT_OUTLIER_PROBABILITY
from wmr_model.calibration.reference import REFERENCE_OPTIONS
from wmr_model.calibration.stream import STREAM_OPTIONS
from wmr_model.estimation.streams import (
    DEFAULT_CONFIRM_COUNT,
    DEFAULT_MAX_ANGULAR_RATE,
    DEFAULT_MAX_WHEEL_ACCELERATION,
    DEFAULT_MAX_WHEEL_SPEED,
)
from wmr_model.parameters import OptionSpec, option, options, register_options
from wmr_model.prediction.rollouts import PREDICTION_OPTIONS

__all__ = ["main", "NODE_OPTIONS", "ODOMETRY_NODE", "PREDICTION_NODE", "CALIBRATOR_NODE",
           "NODE_GROUPS", "LIVE_REORDER_WINDOW", "SIM_TIME_REORDER_WINDOW"]

#: Option groups: the parameters every node declares (calibration file, vehicle, terrain) and
#: each node's own.
NODE_OPTIONS = "nodes"
ODOMETRY_NODE = "odometry_node"
PREDICTION_NODE = "prediction_node"
CALIBRATOR_NODE = "calibrator_node"
NODE_GROUPS = (NODE_OPTIONS, ODOMETRY_NODE, PREDICTION_NODE, CALIBRATOR_NODE)

#: Reorder window defaults [s of stamp time]: live sensors / a bag or simulator on /clock
#: (:func:`wmr_model.ros.params.default_reorder_window`).
LIVE_REORDER_WINDOW = 5.0
SIM_TIME_REORDER_WINDOW = 600.0
_REORDER_NOTE = (f"{SIM_TIME_REORDER_WINDOW:g} with use_sim_time, else "
                 f"{LIVE_REORDER_WINDOW:g}")


def _interval_rows() -> list[OptionSpec]:
    return [s for n, s in options(INTERVAL_OPTIONS).items() if n.startswith("interval.")]


def _prediction_row(name: str) -> OptionSpec:
    return option(PREDICTION_OPTIONS, name)


def _ordered_input_rows(inputs: tuple[str, ...], *, idle: float, slowest: str = "",
                        jump: str = "", stray: str = "") -> list[OptionSpec]:
    """The rows of a node's stamp-order input
    (:class:`~wmr_model.estimation.streams.OrderedInput`): ``reorder_window``, ``reorder_idle``
    (default ``idle`` [s]) and ``time_base_confirm``. ``inputs`` name the message streams;
    ``slowest``, ``jump`` and ``stray`` add the node's detail to the descriptions (its slowest
    input, what a jump is, what happens to a stray stamp)."""
    listed = (" and ".join(inputs) if len(inputs) == 2
              else ", ".join(inputs[:-1]) + " and " + inputs[-1])
    other = "the other" if len(inputs) == 2 else "another"
    return [
        OptionSpec("reorder_window", LIVE_REORDER_WINDOW, unit="s", lower=0.0, upper=3600.0,
                   default_note=_REORDER_NOTE, description=(
            f"(stamp time) {listed} messages may wait to be processed in stamp order while "
            f"every input still delivers; default {SIM_TIME_REORDER_WINDOW:g} with use_sim_time "
            f"(a replay faster than the node lets one queue lag {other} by tens of seconds), "
            f"else {LIVE_REORDER_WINDOW:g}; latency about one sensor period while all flow, "
            "reorder_idle when one stops; 0: arrival order")),
        OptionSpec("reorder_idle", idle, unit="s", lower=0.0, upper=10.0, description=(
            "(receive time) a silent input is still waited for by the reorder window; must "
            f"exceed the slowest input's period{slowest}")),
        OptionSpec("time_base_confirm", DEFAULT_CONFIRM_COUNT, lower=1, upper=1000, description=(
            f"consecutive messages that confirm a time jump{jump}; a lone stray stamp is "
            f"dropped{stray} (1: follow every jump)")),
    ]


register_options(NODE_OPTIONS, [
    OptionSpec("calibration_file", "", read_only=True, description=(
        "calibration YAML (the calibrator's ~/save or 'wmr calibrate --overlay' output) whose "
        "values this node starts from; '' = none")),
    OptionSpec("vehicle", "", read_only=True, description=(
        "shipped vehicle name (wmr vehicles), URDF path or frame-table YAML; empty: use "
        "robot_description")),
    OptionSpec("sidecar", "", read_only=True, description=(
        "sidecar YAML of the URDF (wheels, actuated joints, encoder_map); empty: the vehicle's "
        "shipped one or none")),
    OptionSpec("robot_description", "", read_only=True, description=(
        "URDF XML; empty: from the vehicle parameter or the robot_description topic")),
    OptionSpec("terrain", "flat", read_only=True, description=(
        "terrain the model drives on: flat[:Z], plane:SLOPE_DEG[,HEADING_DEG], wmrde:N or "
        "file:PATH (a height map that carries its grid, e.g. gridsurfdata text); the same grammar "
        "as 'wmr simulate --terrain'")),
])

def _steer_topic_row() -> OptionSpec:
    return OptionSpec("steer_topic", "", read_only=True, description=(
        "sensor_msgs/JointState topic with the steering joints' angles (positions) when "
        "joint_states lacks them, e.g. a steering command topic; empty: the vehicle sidecar's "
        "steering.<joint>.topic, else joint_states carries them. A commanded angle (sidecar "
        "steering.<joint>.source: commanded) is followed with its lag"))


register_options(ODOMETRY_NODE, [
    OptionSpec("odom_frame", "odom", read_only=True, description=(
        "frame of the published pose (REP-105 odom)")),
    _steer_topic_row(),
    OptionSpec("base_frame", "base_link", read_only=True, description=(
        "child frame (the body)")),
    OptionSpec("publish_tf", True, description=(
        "broadcast odom -> base_link on /tf (needs tf2_ros; another node may own this transform)")),
    OptionSpec("fidelity", "kinematic", choices=("kinematic", "enhanced"), read_only=True,
               description=(
        "kinematic: no-slip estimation; enhanced: body slip from slip.p1..p8 (§2.3)")),
    OptionSpec("use_gyro", True, description=(
        "make the IMU angular velocity a known element of the solve; off: encoders only (skid "
        "steer drifts ~7x more)")),
    OptionSpec("impose_imu_attitude", False, description=(
        "replace roll and pitch by the IMU orientation after each step")),
    _prediction_row("stabilization"),
    OptionSpec("max_step", 0.5, unit="s", lower=1e-3, upper=60.0, description=(
        "longest encoder interval integrated; longer gaps are skipped (reported)")),
    OptionSpec("time_jump_threshold", 1.0, unit="s", lower=0.0, upper=3600.0, description=(
        "a stamp this far from the time base is a time jump (bag loop, clock reset) once "
        "confirmed (time_base_confirm); backwards it resets the odometry")),
    OptionSpec("reset_on_gap", False, description=(
        "reset the pose (not only the time base) after a forward gap > max_step")),
    OptionSpec("gyro_timeout", 0.5, unit="s", lower=0.0, upper=10.0, description=(
        "how long a gyro rate or IMU attitude is held without new samples")),
    OptionSpec("late_tolerance", 0.1, unit="s", lower=0.0, upper=5.0, description=(
        "IMU samples this much older than an interval still count for it")),
    OptionSpec("max_wheel_speed", DEFAULT_MAX_WHEEL_SPEED, unit="m/s", lower=1e-3, upper=1e4,
               description=(
        "encoder samples whose wheel rim speed (rate x radius) exceeds this are rejected "
        "(implausible)")),
    OptionSpec("max_wheel_acceleration", DEFAULT_MAX_WHEEL_ACCELERATION, unit="m/s^2", lower=1e-3,
               upper=1e6, description=(
        "encoder samples whose rim acceleration since the last accepted one exceeds this are "
        "rejected")),
    OptionSpec("max_angular_rate", DEFAULT_MAX_ANGULAR_RATE, unit="rad/s", lower=1e-3, upper=1e4,
               description=(
        "IMU samples with a gyro component beyond this are rejected (default: a 2000 deg/s gyro's "
        "full scale)")),
    *_ordered_input_rows(("encoder", "IMU"), idle=0.1),
    OptionSpec("stale_timeout", 1.0, unit="s", lower=0.0, upper=3600.0, description=(
        "an input silent this long (node clock) is reported stale")),
    OptionSpec("diagnostics_period", 1.0, unit="s", lower=0.01, upper=60.0, description=(
        "diagnostics publishing period")),
    OptionSpec("sensor_qos", "reliable", choices=("reliable", "best_effort"), read_only=True,
               description=(
        "reliability of the input subscriptions: reliable (bag replay, no loss) or best_effort "
        "(drivers using SensorDataQoS)")),
    OptionSpec("queue_size", 10000, lower=1, upper=100000, read_only=True, description=(
        "input queue depth (messages): a replay faster than the node lets one input's queue lag "
        "the other's by seconds; a full queue drops messages")),
])

register_options(PREDICTION_NODE, [
    OptionSpec("max_candidates", 100000, lower=1, upper=100_000_000, description=(
        "largest num_candidates served (memory is bounded by max_request_memory_mb)")),
    OptionSpec("max_steps", 100000, lower=1, upper=100_000_000, description=(
        "largest num_steps served")),
    OptionSpec("max_horizon", 60.0, unit="s", lower=0.0, upper=1e6, description=(
        "longest horizon num_steps * step_size served")),
    OptionSpec("max_request_memory_mb", 2048.0, unit="MB", lower=1.0, upper=1e7, description=(
        "memory budget of the requests being served (estimated before anything is allocated; "
        "larger requests are refused, concurrent ones wait)")),
    OptionSpec("max_compute_time", 10.0, unit="s", lower=0.001, upper=1e6, description=(
        "longest time a request computes (a request may ask for less); then it returns the "
        "finished candidates or fails")),
    OptionSpec("worker_threads", 4, lower=1, upper=64, read_only=True, description=(
        "threads of the node's executor: requests served at the same time")),
    OptionSpec("default_frame", "odom", description=(
        "frame of the poses when the request's header.frame_id is empty")),
    _prediction_row("stabilization"),
    _prediction_row("integrator"),
    _prediction_row("controller"),
    OptionSpec("propagate_covariance", True, description=(
        "propagate pose covariances with Q' from noise.U.* (KINEMATIC, ENHANCED)")),
    OptionSpec("publish_path", False, description=(
        "publish candidate 0 of the last prediction on ~/path")),
    OptionSpec("publish_markers", False, description=(
        "publish covariance ellipsoids and candidate lines on ~/covariance_markers")),
    OptionSpec("marker_stride", 5, lower=1, upper=100000, description=(
        "ellipsoid every this many samples")),
    OptionSpec("diagnostics_period", 1.0, unit="s", lower=0.01, upper=60.0, description=(
        "diagnostics publishing period")),
    OptionSpec("warmup", False, read_only=True, description=(
        "serve one tiny request per fidelity before the service is advertised, so that the first "
        "real ones meet max_compute_time: loads the compiled kernels (about 4 s) or compiles them "
        "(minutes, on the first start after an install)")),
])

register_options(CALIBRATOR_NODE, [
    OptionSpec("params", ("slip.p2", "slip.p3", "slip.p4", "slip.p5", "slip.p6"), read_only=True,
               description=(
        "systematic parameters to calibrate (schema names); [''] for none")),
    _steer_topic_row(),
    OptionSpec("noise", ("noise.U.wz_wz", "noise.U.vx_vx", "noise.U.vy_vy"), read_only=True,
               description=(
        "Q' Cholesky entries to calibrate; [''] for none (Q' then stays at this node's noise.U.* "
        "values)")),
    OptionSpec("fidelity", "enhanced", choices=("kinematic", "enhanced"), read_only=True,
               description=(
        "interval prediction model: enhanced (slip.p*, §2.3) or kinematic (no slip parameters)")),
    OptionSpec("dt", 0.05, unit="s", lower=1e-4, upper=1.0, read_only=True, description=(
        "prediction step of each interval (whole steps of about this size)")),
    OptionSpec("pose_sensor", "", read_only=True, description=(
        "sensor frame of the vehicle the ground-truth poses are of; '' = the body (base) frame")),
    OptionSpec("pose_source", "odometry", choices=("odometry", "pose", "navsatfix"),
               read_only=True, description=(
        "ground truth input, one of: odometry (nav_msgs/Odometry on ground_truth/odom), pose "
        "(geometry_msgs/PoseWithCovarianceStamped on ground_truth/pose), navsatfix "
        "(sensor_msgs/NavSatFix on gps/fix with the attitude of the INS/IMU orientation on "
        "imu/data)")),
    OptionSpec("datum.first_fix", True, read_only=True, description=(
        "navsatfix: the first fix is the origin of the local ENU frame; false: "
        "datum.latitude/longitude/altitude are")),
    OptionSpec("datum.latitude", 0.0, unit="deg", lower=-90.0, upper=90.0, read_only=True,
               description="latitude of the local ENU frame's origin for navsatfix (with "
               "datum.first_fix false)"),
    OptionSpec("datum.longitude", 0.0, unit="deg", lower=-180.0, upper=180.0, read_only=True,
               description="longitude of the local ENU frame's origin for navsatfix (with "
               "datum.first_fix false)"),
    OptionSpec("datum.altitude", 0.0, unit="m above the WGS-84 ellipsoid", lower=-1e4,
               upper=1e5, read_only=True, description="altitude of the local ENU frame's "
               "origin for navsatfix (with datum.first_fix false)"),
    OptionSpec("navsatfix.unknown_position_std", 0.0, unit="m", lower=0.0, upper=1e4,
               read_only=True, description=(
        "position std used for fixes with position_covariance_type UNKNOWN; 0 rejects them "
        "(counted)")),
    OptionSpec("navsatfix.heading", "auto", choices=("auto", "imu", "derived"), read_only=True,
               description=(
        "the fixes' attitude: imu = the nearest imu/data orientation (an INS); derived = the "
        "gyro's heading laid onto the fixes' track over a trailing window (GNSS without an "
        "INS; level assumed); auto = imu while imu/data provides orientations, else derived")),
    OptionSpec("navsatfix.attitude_tolerance", 0.05, unit="s", lower=0.0, upper=10.0,
               read_only=True, description=(
        "largest stamp difference between a fix and the INS/IMU orientation used as its attitude "
        "(the nearest one)")),
    OptionSpec("identifiability.max_std_ratio", DEFAULT_MAX_STD_RATIO, unit="-", lower=0.0,
               upper=1.0, description=(
        "after identifiability.min_intervals accepted intervals, a parameter (or a combination of "
        "correlated parameters, in prior units) whose std is above this times its prior std is "
        "unobserved (confounded): reported (WARN) and never pushed")),
    OptionSpec("identifiability.min_intervals", DEFAULT_MIN_INTERVALS, lower=1, upper=1_000_000,
               description=(
        "accepted intervals before the identifiability check runs (nothing is pushed before)")),
    OptionSpec("base_frame", "base_link", description=(
        "frame_id of the published CalibrationState (the frame the parameters refer to)")),
    OptionSpec("components", ("x", "y", "yaw"), read_only=True, description=(
        "residual components (rot_x, rot_y, yaw, x, y, z); yaw, x, y for planar ground truth")),
    *_interval_rows(),
    *options(REFERENCE_OPTIONS).values(),
    OptionSpec("outlier_probability", DEFAULT_OUTLIER_PROBABILITY, unit="-", lower=0.5, upper=1.0,
               read_only=True, description=(
        "intervals whose Mahalanobis distance (3.68) exceeds the chi-square quantile of this "
        "probability are rejected; 1.0 disables the gate")),
    OptionSpec("qprime_bound", 0.1, unit="unit/s^0.5", lower=0.0, upper=100.0, read_only=True,
               description=(
        "bound of the calibrated |noise.U.*| during the first qprime_bound_intervals accepted "
        "updates (end of §3.2.4); 0 disables")),
    OptionSpec("qprime_bound_intervals", 20, lower=0, upper=1_000_000, read_only=True,
               description=(
        "accepted updates the Q' bound applies for")),
    OptionSpec("history_size", 1000, lower=1, upper=10_000_000, read_only=True, description=(
        "update records kept in memory (oldest dropped; counts in ~/state are not affected); "
        "bounds the node's memory on long runs")),
    OptionSpec("iterations", 1, lower=1, upper=20, read_only=True, description=(
        "Gauss-Newton iterations per update (1: EKF; 2-3 help a time offset)")),
    *options(STREAM_OPTIONS).values(),
    *_ordered_input_rows(("encoder", "IMU", "pose"), idle=0.3, slowest=" (the pose)",
                         jump=" (more than time_jump_threshold from the time base)",
                         stray=" and counted"),
    OptionSpec("push.enabled", True, description=(
        "push accepted estimates to the targets' parameter services")),
    OptionSpec("push.targets", ("odometry_node", "prediction_node"), description=(
        "nodes to update (relative to this node's namespace, or absolute); their "
        "<node>/set_parameters is called")),
    OptionSpec("push.period", 5.0, unit="s", lower=0.01, upper=3600.0, read_only=True,
               description=(
        "(node clock) at most one push per period")),
    OptionSpec("push.min_intervals", 10, lower=0, upper=1_000_000, description=(
        "accepted intervals before the first push")),
    OptionSpec("push.max_relative_std", 0.2, unit="-", lower=0.0, upper=1e6, description=(
        "push a value only when its std <= this x |value|")),
    OptionSpec("push.max_std", 0.0, unit="unit", lower=0.0, upper=1e6, description=(
        "... or when its std <= this (absolute; 0: relative test only)")),
    OptionSpec("push.params", ("",), description=(
        "names to push; [''] = every calibrated slip.*, noise.U.* and wheel.*.radius")),
    OptionSpec("save_path", "", description=(
        "calibration file (YAML overlay with 1-sigma, loadable as calibration_file) written by "
        "~/save; '' = $ROS_HOME/wmr_model/<vehicle>.calibration.yaml (ROS_HOME default ~/.ros)")),
    OptionSpec("diagnostics_period", 1.0, unit="s", lower=0.01, upper=60.0, read_only=True,
               description=(
        "diagnostics publishing period")),
    OptionSpec("sensor_qos", "reliable", choices=("reliable", "best_effort"), read_only=True,
               description=(
        "reliability of the input subscriptions: reliable (bag replay) or best_effort")),
    OptionSpec("queue_size", 10000, lower=1, upper=100000, read_only=True, description=(
        "input queue depth (messages): a replay faster than the node lets one input's queue lag "
        "another's; a full queue drops messages")),
])


def main(argv: list[str] | None = None) -> int:
    """``python -m wmr_model.ros.options [README.md]``: rewrite the marked option tables."""
    import sys

    from wmr_model.parameters import write_readme_tables

    args = sys.argv[1:] if argv is None else argv
    for group in write_readme_tables(args[0] if args else "README.md"):
        print(f"{group}: {len(options(group))} options")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
