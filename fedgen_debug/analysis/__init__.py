"""Verdicts, quality metrics and reports of trained auxiliaries: reads the run store (`runs/`) and rebuilds
released models (`training.gan_run`, `training.lm_run`); never trains (ARCHITECTURE.md: analysis/)."""
