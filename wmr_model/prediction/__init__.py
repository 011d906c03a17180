"""Motion prediction for planners: batched candidate rollouts with covariance (§2.2, §3.2.1)."""
