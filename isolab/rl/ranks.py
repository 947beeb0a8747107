"""One run on several data-parallel processes (`RunConfig.processes`): who they are, and what
they agree on each step.

TRL's `GRPOTrainer` runs data-parallel under torchrun as it is (accelerate reads torchrun's
environment: gloo on a CPU, NCCL on GPUs). Each process generates and trains on its B/K slice of
the step's batch and TRL gathers the rewards, so a group may span processes. What isolab adds:

- `isolab.rl.train.launch` (there, as it runs `isolab.rl.train`): the parent process starts
  `python -m torch.distributed.run --standalone --nproc_per_node K -m isolab.rl.train`, hands
  the config over in a file and reads the first process's result back; a run that dies
  leaves no MLflow run RUNNING;
- `sum_ints` / `max_floats`: the ledger's per-step totals summed over processes (each process's
  hooks see only its slice), wall times maxed (the step waits for the slowest);
- `is_main`: only the first process logs to MLflow and evaluates.

`accelerate launch --cpu --num_processes K` is not used: without an MPI host file it silently
starts a single process.
"""

from __future__ import annotations

import os


def world_size() -> int:
    """Processes of this run: torchrun's `WORLD_SIZE`, 1 outside a launch."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def rank() -> int:
    return int(os.environ.get("RANK", "0"))


def is_main() -> bool:
    return rank() == 0


def barrier() -> None:
    """Wait for every process of the run (nothing outside a launch)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        dist.barrier()


def _reduce(values: list, dtype, op: str) -> list:
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return list(values)
    tensor = torch.tensor(values, dtype=dtype)
    dist.all_reduce(tensor, op=getattr(dist.ReduceOp, op))
    return tensor.tolist()


def sum_ints(values: list[int]) -> list[int]:
    """Each value summed over the run's processes (int64: FLOP counts stay exact)."""
    import torch

    return [int(v) for v in _reduce([int(v) for v in values], torch.int64, "SUM")]


def max_floats(values: list[float]) -> list[float]:
    """Each value's maximum over the run's processes."""
    import torch

    return [float(v) for v in _reduce([float(v) for v in values], torch.float64, "MAX")]
