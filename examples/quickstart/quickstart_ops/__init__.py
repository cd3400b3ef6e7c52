"""Python ops of the quickstart example (imported through py://quickstart_ops.pricing:…)."""
