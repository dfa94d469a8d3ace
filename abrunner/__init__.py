"""The codec A/B runner: a worker per codec under the same load, then one report."""
