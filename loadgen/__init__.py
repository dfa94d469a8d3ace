"""The load generator (`codec-loadgen`): paced, stamped Kafka traffic in any codec."""
