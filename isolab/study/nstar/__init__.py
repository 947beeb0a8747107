"""Study 02 · n*(C): the compute-optimal rollouts per problem against compute, and its saturation.

`analysis` turns its runs tables into a report, `claims` states the claims it tests, `worlds`
their calibration worlds; the other modules are its own tests and figures. It imports no other
study's folder (`scripts/check_layers.py`).
"""
