"""Study 09 · mixed and extremely hard sets: n* on a mix against its components, n on `never`.

`analysis` turns its runs tables into a report, `claims` states the claims it tests, `worlds`
their calibration worlds; the other modules are its own tests and figures. It imports no other
study's folder (`scripts/check_layers.py`).
"""
