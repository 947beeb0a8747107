"""RL on top of TRL: reward systems (`rewards`), difficulty splits (`difficulty`), evaluation
during training (`evaluate`), a run's planned FLOPs (`plan`), the generation engine (`engines`:
HF generate or TRL's colocated vLLM) and one GRPO run (`train`)."""
