"""ROS 2 adapters of wmr_model: message conversion, parameter declaration and the nodes.

No physics lives here (style.md §7): the nodes convert messages to arrays, call the core
(:mod:`wmr_model.estimation.odometry`, :mod:`wmr_model.prediction.predict`) and publish the results.
Importing this package needs rclpy and the message packages; the core never imports it.

Modules: :mod:`.conversions` (message <-> array), :mod:`.options` (the nodes' option rows of the
one parameter schema; ROS-free), :mod:`.params` (parameter declaration with descriptors and
ranges from the schema, set-time validation, vehicle loading), :mod:`.odometry_node`,
:mod:`.prediction_node`, :mod:`.client` (NumPy client of the prediction service).
"""

__all__ = ["conversions", "params"]
