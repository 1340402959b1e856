"""JSON can carry neither NaN nor infinity: the one place that replaces them (by None)."""

from __future__ import annotations

import math
from typing import Any


def finite_or_none(value: Any) -> Any:
    """value with every NaN or infinite float replaced by None, through dicts, lists and tuples."""
    if isinstance(value, dict):
        return {k: finite_or_none(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_or_none(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
