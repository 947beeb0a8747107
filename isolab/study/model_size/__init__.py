"""Study 06 · model size at equal FLOPs.

`analysis` turns its runs tables into a report, `claims` states the claims it tests, `worlds`
their calibration worlds; the other modules are its own tests and figures. It imports no other
study's folder (`scripts/check_layers.py`).
"""
