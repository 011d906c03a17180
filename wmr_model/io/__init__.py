"""File input and output of wmr_model (terrains, vehicles, logs)."""
