"""Application pipelines over the core: bag replay, fleet calibration and their task runner."""
