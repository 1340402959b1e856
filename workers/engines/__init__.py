"""The engines' trainers on the workers' side of the torch line, one module each (their declarations: sweeps.engines),
each imported only when it runs (workers.measures.trainer). A trainer trains one outcome trial within the measurement
harness (harness.py): ``train(cfg, report, placement) -> TrialResult``."""
