"""The gate: the controller that lends and reclaims (one tick), its loop, and the exit hook that returns GPUs."""
