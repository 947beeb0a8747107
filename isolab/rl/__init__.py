"""RL on top of TRL: reward systems (`rewards`), difficulty splits (`difficulty`), evaluation
during training (`evaluate`), a run's planned FLOPs (`plan`) and one GRPO run (`train`)."""
