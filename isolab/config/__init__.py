"""`RunConfig`, one GRPO run, and what its fields may take.

`isolab.config.run` defines the dataclass (fields, derived values, run key, YAML I/O and
`with_overrides`); `isolab.config.checks` the choices, ceilings and size guards that every
field is checked against. The names most importers use are re-exported here.
"""

from isolab.config.checks import (
    ALLOCATIONS,
    DEFAULT_BETA,
    DEFAULT_ENTROPY_COEF,
    MAX_SEED,
    SIZE_GUARD_ENV,
    SIZE_GUARDS,
    SPLITS,
    allocator_of,
    is_user_reward,
    pilot_size,
    reward_parts,
)
from isolab.config.run import ADDED_FIELDS, RunConfig, apply_overrides

__all__ = [
    "ALLOCATIONS",
    "ADDED_FIELDS",
    "DEFAULT_BETA",
    "DEFAULT_ENTROPY_COEF",
    "MAX_SEED",
    "SIZE_GUARDS",
    "SIZE_GUARD_ENV",
    "SPLITS",
    "RunConfig",
    "allocator_of",
    "apply_overrides",
    "is_user_reward",
    "pilot_size",
    "reward_parts",
]
