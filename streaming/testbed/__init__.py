"""Test-bed tooling: real Apache Kafka clusters on loopback, real faults, the shipper that
carries the brokers' own JMX into the metrics topics, and Kafka's own truth.

For the demo, the tests and the benchmarks. Nothing the production job runs imports it.
"""
