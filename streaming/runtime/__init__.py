"""The process around the pipeline: the Spark session and its JVM and worker settings,
progress reporting and the pipeline-health series, and the source-lag probe."""
