"""FLOP accounting: pure formulas (`flops`) and the per-step ledger of a run (`ledger`)."""
