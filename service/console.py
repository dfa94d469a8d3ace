"""The `codec-worker` entry point: signals are held before anything heavy is imported."""

from __future__ import annotations

from service.lifecycle import signals


def main() -> int:
    """Hold SIGTERM/SIGINT (`service.lifecycle.signals`), then run the worker's command line."""
    signals.hold()
    from service.cli import main as run

    return run()
