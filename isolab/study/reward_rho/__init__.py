"""Study 05 · reward systems and the update fraction ρ at equal FLOPs; the RACE pilot.

`analysis` turns its runs tables into a report, `claims` states the claims it tests, `worlds`
their calibration worlds; the other modules are its own tests and figures. It imports no other
study's folder (`scripts/check_layers.py`).
"""
