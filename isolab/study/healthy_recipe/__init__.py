"""Study 01 · the healthy GRPO recipe: regularisers per split, LR scaling with the batch.

`analysis` turns its runs tables into a report, `claims` states the claims it tests, `worlds`
their calibration worlds; the other modules are its own tests and figures. It imports no other
study's folder (`scripts/check_layers.py`).
"""
