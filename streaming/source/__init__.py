"""Reading the metrics topics: Spark's own kafka source or our confluent-kafka data source."""
