"""Figures, screenshot overlays, the inspector and the HTML report (no torch)."""
