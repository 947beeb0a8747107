"""The process-wide stop request, shared by the sweep's workers and the trainer. Bottom layer:
imports nothing, so a signal handler can set it whatever is half-imported when the signal lands.

A sweep worker's SIGINT/SIGTERM handler (`isolab.sweep.local`) sets `STOP`; the trainer's step
callback (`isolab.rl.train`) checks it, so the run in progress ends KILLED at its next step even
if the first KeyboardInterrupt landed where Python ignores it (a `__del__`), and the worker
starts no further run.
"""

from __future__ import annotations

import threading

STOP = threading.Event()
