"""kafka-health: Kafka fleet health signals from broker metrics on Kafka topics."""
