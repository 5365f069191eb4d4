"""The worker: claims, the run loop, the watchdog, worker deployments (private)."""
