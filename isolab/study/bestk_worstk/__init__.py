"""Study 04 · how the metric (avg@4, best@4, worst@4) moves n*.

`analysis` turns its runs tables into a report, `claims` states the claims it tests, `worlds`
their calibration worlds; the other modules are its own tests and figures. It imports no other
study's folder (`scripts/check_layers.py`).
"""
