"""A simulated Kafka cluster producing broker metrics with known ground truth."""
