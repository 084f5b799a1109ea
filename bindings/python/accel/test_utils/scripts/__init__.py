"""accel.test_utils.scripts: scripts run on one or several processes (by accel launch, or by
accel.launchers.debug_launcher through their main()), checking accel's distributed behaviour, where
Accelerate keeps its own (accelerate.test_utils.scripts): test_ops (the collectives), test_sync (gradient
synchronisation), test_script (the process state and the training loop), test_distributed_data_loop (how
prepared loaders deal batches)."""
