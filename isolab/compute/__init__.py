"""FLOP accounting: a model's shape and LoRA targets (`shapes`), pure formulas (`flops`) and the
per-step ledger of a run (`ledger`)."""
