"""accel.test_utils.scripts: scripts run on one or several processes (by accel launch, or by
accel.launchers.debug_launcher through their main()), checking accel's distributed behaviour, where
Accelerate keeps its own (accelerate.test_utils.scripts)."""
