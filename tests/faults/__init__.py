"""Fault scenarios for the worker on a real broker, and their checker."""
