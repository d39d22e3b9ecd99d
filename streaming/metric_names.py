"""The name of each series the job exports (/metrics), one constant per name.

Code names a series only through these constants; metrics_schemas/exported_metrics.yaml
keeps each one's help text and labels, and tests/unit/test_metric_names.py checks the
constants are exactly its names (each the name without its kafka_health_ prefix, upper
case).
"""


# broker (labels: cluster, broker)
UNDER_MIN_ISR_PARTITIONS = "kafka_health_under_min_isr_partitions"
AT_MIN_ISR_PARTITIONS = "kafka_health_at_min_isr_partitions"
UNDER_REPLICATED_PARTITIONS = "kafka_health_under_replicated_partitions"
ISR_SHRINKS_WINDOW_INCREASE = "kafka_health_isr_shrinks_window_increase"
ISR_EXPANDS_WINDOW_INCREASE = "kafka_health_isr_expands_window_increase"
ISR_CHURN_UNMATCHED_SHRINKS = "kafka_health_isr_churn_unmatched_shrinks"
UNCLEAN_LEADER_ELECTIONS_WINDOW_INCREASE = "kafka_health_unclean_leader_elections_window_increase"
REQUEST_QUEUE_UTILIZATION_RATIO = "kafka_health_request_queue_utilization_ratio"
RESPONSE_QUEUE_SIZE = "kafka_health_response_queue_size"
REQUEST_HANDLER_IDLE_RATIO = "kafka_health_request_handler_idle_ratio"
NETWORK_PROCESSOR_IDLE_RATIO = "kafka_health_network_processor_idle_ratio"
PARTITIONS = "kafka_health_partitions"
LEADERS = "kafka_health_leaders"
OPEN_FILE_DESCRIPTORS = "kafka_health_open_file_descriptors"
MAX_FILE_DESCRIPTORS = "kafka_health_max_file_descriptors"
BROKER_STALE = "kafka_health_broker_stale"
BROKER_LAST_SAMPLE_AGE_SECONDS = "kafka_health_broker_last_sample_age_seconds"
OFFLINE_LOG_DIRECTORIES = "kafka_health_offline_log_directories"
METADATA_LAG_MILLISECONDS = "kafka_health_metadata_lag_milliseconds"
METADATA_ERRORS_WINDOW_INCREASE = "kafka_health_metadata_errors_window_increase"

# cluster (labels: cluster)
OFFLINE_PARTITIONS = "kafka_health_offline_partitions"
ACTIVE_CONTROLLERS = "kafka_health_active_controllers"
BROKERS_REPORTING = "kafka_health_brokers_reporting"
FENCED_BROKERS = "kafka_health_fenced_brokers"
ACTIVE_BROKERS = "kafka_health_active_brokers"
PREFERRED_REPLICA_IMBALANCE = "kafka_health_preferred_replica_imbalance"
CONTROLLER_ELECTIONS_5M = "kafka_health_controller_elections_5m"
ELR_ELECTIONS_WINDOW_INCREASE = "kafka_health_elr_elections_window_increase"
ELR_ENABLED = "kafka_health_elr_enabled"
CLUSTER_LAST_SAMPLE_TIMESTAMP_SECONDS = "kafka_health_cluster_last_sample_timestamp_seconds"

# headroom (labels: cluster, broker)
PARTITION_CEILING = "kafka_health_partition_ceiling"
PARTITION_HEADROOM_RATIO = "kafka_health_partition_headroom_ratio"
PARTITION_HEADROOM = "kafka_health_partition_headroom"
DAYS_TO_PARTITION_CEILING = "kafka_health_days_to_partition_ceiling"

# incidents (labels: cluster, kind)
OPEN_INCIDENTS = "kafka_health_open_incidents"

# metadata (labels: cluster)
METADATA_UP = "kafka_health_metadata_up"
METADATA_LAST_SUCCESS_TIMESTAMP_SECONDS = "kafka_health_metadata_last_success_timestamp_seconds"

# metadata_errors (labels: cluster, error)
METADATA_ERROR = "kafka_health_metadata_error"

# durability_audit (labels: cluster, rule)
DURABILITY_AUDIT_FINDINGS = "kafka_health_durability_audit_findings"

# pipeline_source_error (labels: error)
PIPELINE_SOURCE_ERROR = "kafka_health_pipeline_source_error"

# metadata_causes (labels: cluster, kind, broker)
METADATA_CAUSE_BROKER_PARTITIONS = "kafka_health_metadata_cause_broker_partitions"

# metadata_cause_info (labels: cluster, kind, leader, cause)
METADATA_CAUSE_INFO = "kafka_health_metadata_cause_info"

# pipeline (labels: none)
PIPELINE_UP = "kafka_health_pipeline_up"
PIPELINE_LAST_BATCH_TIMESTAMP_SECONDS = "kafka_health_pipeline_last_batch_timestamp_seconds"
PIPELINE_BATCH_DURATION_SECONDS = "kafka_health_pipeline_batch_duration_seconds"
PIPELINE_INPUT_ROWS_PER_SECOND = "kafka_health_pipeline_input_rows_per_second"
PIPELINE_SOURCE_LAG_RECORDS = "kafka_health_pipeline_source_lag_records"
PIPELINE_NEWEST_EVENT_TIMESTAMP_SECONDS = "kafka_health_pipeline_newest_event_timestamp_seconds"
PIPELINE_SOURCE_UP = "kafka_health_pipeline_source_up"
PIPELINE_SOURCE_PARTITIONS = "kafka_health_pipeline_source_partitions"
PIPELINE_EXPORTED_SERIES = "kafka_health_pipeline_exported_series"
PIPELINE_BATCHES_TOTAL = "kafka_health_pipeline_batches_total"
PIPELINE_INPUT_RECORDS_TOTAL = "kafka_health_pipeline_input_records_total"
PIPELINE_QUARANTINED_RECORDS_TOTAL = "kafka_health_pipeline_quarantined_records_total"
PIPELINE_IDENTITY_DEFAULTED_SAMPLES_TOTAL = "kafka_health_pipeline_identity_defaulted_samples_total"
PIPELINE_DQ_FAILURES_TOTAL = "kafka_health_pipeline_dq_failures_total"
PIPELINE_SOURCE_DATA_LOSS_TOTAL = "kafka_health_pipeline_source_data_loss_total"
PIPELINE_ALERT_PUSH_FAILURES_TOTAL = "kafka_health_pipeline_alert_push_failures_total"
PIPELINE_SERIES_DROPPED_TOTAL = "kafka_health_pipeline_series_dropped_total"
PIPELINE_VIEW_DISAGREEMENTS_TOTAL = "kafka_health_pipeline_view_disagreements_total"

# the durability probe (streaming/clients; labels: cluster, and broker; error)
PROBE_UP = "kafka_health_probe_up"
PROBE_PENDING_WRITES = "kafka_health_probe_pending_writes"
PROBE_WRITES_ATTEMPTED = "kafka_health_probe_writes_attempted"
PROBE_WRITES_ACKED = "kafka_health_probe_writes_acked"
PROBE_AVAILABILITY_RATIO = "kafka_health_probe_availability_ratio"
PROBE_ACK_LATENCY_P99_SECONDS = "kafka_health_probe_ack_latency_p99_seconds"
PROBE_READ_LATENCY_P99_SECONDS = "kafka_health_probe_read_latency_p99_seconds"
PROBE_LOST_RECORDS_TOTAL = "kafka_health_probe_lost_records_total"
PROBE_DUPLICATE_RECORDS_TOTAL = "kafka_health_probe_duplicate_records_total"
PROBE_WRITES_FAILED = "kafka_health_probe_writes_failed"

# consumer groups (streaming/clients; labels: cluster, and group, topic; status)
CONSUMER_GROUPS_UP = "kafka_health_consumer_groups_up"
CONSUMER_GROUP_PARTITIONS_LEFT_OUT = "kafka_health_consumer_group_partitions_left_out"
CONSUMER_GROUP_LAG_RECORDS = "kafka_health_consumer_group_lag_records"
CONSUMER_GROUP_LAG_SECONDS = "kafka_health_consumer_group_lag_seconds"
CONSUMER_GROUP_LOST_TO_RETENTION_RECORDS_TOTAL = (
    "kafka_health_consumer_group_lost_to_retention_records_total")
CONSUMER_GROUP_STATUS = "kafka_health_consumer_group_status"
