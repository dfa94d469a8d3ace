"""Codec A/B stream-processing worker for Kafka."""

__version__ = "0.1.0"
