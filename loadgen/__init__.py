"""Load generation and the codec A/B runner."""
