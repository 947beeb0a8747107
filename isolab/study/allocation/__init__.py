"""Study 10 · per-prompt allocation: uniform n against adaptive allocators at equal FLOPs.

`analysis` turns its runs tables into a report, `claims` states the claims it tests, `worlds`
their calibration worlds. It imports no other study's folder (`scripts/check_layers.py`).
"""
