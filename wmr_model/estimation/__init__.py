"""Online estimation: 3D wheel odometry (§2.2.5) and the timestamped streams feeding it."""
