"""IPEM calibration of wheeled-robot motion models (Seegmiller 2014, chapter 3).

Modules, one concern each:

* :mod:`.logs` - the arrays of a calibration run and builders from bags;
* :mod:`.intervals` - interval policies (time/distance, non-overlapping/sliding);
* :mod:`.residuals` - residuals (3.3), sensor offsets (3.57)-(3.58), residual covariance
  (3.15)-(3.24) in closed form;
* :mod:`.predictors` - batched interval prediction (3D kinematic/enhanced, diff drive);
* :mod:`.systematic` - (3.7)-(3.27); :mod:`.stochastic` - (3.28)-(3.42);
* :mod:`.online` - identification EKF (3.48)-(3.54), outliers (3.68), bounds;
* :mod:`.offline` - (3.44) and (3.46) with SciPy;
* :mod:`.evaluate` - Table 3.3 errors and NEES; :mod:`.synthetic` - logs with known truth;
* :mod:`.overlay` - calibrated values as a vehicle YAML overlay (the calibration file format,
  read and written by :mod:`wmr_model.io.calibration_file`);
* :mod:`.identifiability` - confounded and unobserved parameters from the posterior;
* :mod:`.gnss` - NavSatFix-style fixes plus an INS attitude as ENU poses;
* :mod:`.lever_arm` - the pose sensor's lever arm without editing the description.
"""

from wmr_model.calibration.evaluate import Evaluation, evaluate, nees_bounds
from wmr_model.calibration.intervals import IntervalPolicy, select_intervals
from wmr_model.calibration.logs import CalibrationLog, log_from_streams
from wmr_model.calibration.offline import calibrate_offline, fit_stochastic, fit_systematic
from wmr_model.calibration.online import OnlineCalibrator, UpdateRecord
from wmr_model.calibration.predictors import DiffDrivePredictor, ModelPredictor
from wmr_model.calibration.synthetic import inject_outliers, synthetic_log
from wmr_model.calibration.systematic import systematic_terms

__all__ = [
    "CalibrationLog",
    "log_from_streams",
    "IntervalPolicy",
    "select_intervals",
    "ModelPredictor",
    "DiffDrivePredictor",
    "systematic_terms",
    "OnlineCalibrator",
    "UpdateRecord",
    "fit_systematic",
    "fit_stochastic",
    "calibrate_offline",
    "Evaluation",
    "evaluate",
    "nees_bounds",
    "synthetic_log",
    "inject_outliers",
]
