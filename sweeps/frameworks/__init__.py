"""GRPO trainers' configs in (``spec from-NAME``) and answers out (``recommend --format NAME``) in one budget
vocabulary (sweeps.frameworks.base.Budget). Adding one: a module with a class decorated ``@register_framework``,
imported here."""

from __future__ import annotations

from sweeps.frameworks import easyr1, nemo_rl, openrlhf, prime_rl, skyrl, verl  # each module registers its framework
from sweeps.frameworks.base import FRAMEWORKS, Budget, Config, Framework, Refused, get_framework, register_framework
