"""Where results go: Delta tables (delta-rs or delta-spark)."""
