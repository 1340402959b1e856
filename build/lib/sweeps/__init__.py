"""Sweep specs, trial planning and the group-size law (no Ray, MLflow or FastAPI here)."""
