"""The status every frontier fit ends with, read by the verdicts (``Status``)."""

from __future__ import annotations

from typing import Literal

#: ``ok``; ``extrapolated`` (a parameter lies beyond what the data resolve); ``boundary`` (pinned
#: at the box of A/R0); ``flat`` (no significant rise); ``not identifiable`` (no fit).
Status = Literal["ok", "extrapolated", "boundary", "flat", "not identifiable"]
