"""RL on top of TRL: reward systems (`rewards`), evaluation during training (`evaluate`), the
generation engine (`engines`: HF generate or TRL's colocated vLLM, `vllm_cpu` for vLLM on a
CPU), isolab's hooks into TRL's trainer (`trainer`) and one GRPO run (`train`). A run's problems
come from `isolab.difficulty`, its planned FLOPs from `isolab.planning`."""
