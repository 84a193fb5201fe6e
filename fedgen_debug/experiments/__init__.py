"""Train the runs of a comparison, analyze, collect (ARCHITECTURE.md: experiments/): the LM, GAN and T6
runs, and the one loop the demo, the monitor and the evaluation scripts share."""
