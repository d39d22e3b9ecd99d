"""One micro-batch, from decoded rows to every table: the batch step (bronze, quarantine,
quality), the signals writer thread, the crash-recovery marker, and the
after-bronze stages (signals, paging, headroom, incidents)."""
