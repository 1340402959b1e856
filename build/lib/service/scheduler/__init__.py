"""Runs sweeps: the loop (loop.py), the kinds of work (jobs.py), what they share and the MLflow thread
(context.py), the Optuna driver (adaptive.py), Ray (ray_backend.py)."""

from service.scheduler.loop import Scheduler

__all__ = ["Scheduler"]
