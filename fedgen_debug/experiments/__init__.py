"""Train the runs of a comparison, analyze, collect (ARCHITECTURE.md: experiments/): the LM, GAN and T6
runs (`lm`, `gan`, `t6_topic`), and the one loop the demo, the monitor and the evaluation scripts share
(`sweep`: nothing else calls `train_lm` or `train_gan`)."""
