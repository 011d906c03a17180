"""Terrain: rigid height fields (collision detection, §2.2.3), soil presets, deformable soil."""
