"""Which checkpoint the Delta tables were written under, so that a new checkpoint does not
read the topics into them a second time.

A checkpoint deleted or moved (or `spark.checkpoint` changed) leaves a job with no offsets:
it starts from `source.starting_offsets`, and with `earliest` it reads what Kafka still
holds into tables that already hold it, every record twice in bronze, with nothing said.
The tables' root keeps the owning checkpoint's app id (`kafka_health_checkpoint.json`);
a new checkpoint that meets another's tables refuses to start unless told to.

A checkpoint that lost only its offsets and commits logs keeps its app id, and numbers its
batches from 0 again: the tables, which skip a batch id their app transaction already
holds (a replay), would skip every new batch up to the newest one written, and their
records with it. Such a checkpoint takes a new app id, and is then a new checkpoint.

The other way round, tables behind their checkpoint (bronze's newest commits lost: a
restore from an older copy, a write the store did not keep) would never get the batches
Spark committed since, and nothing would say so. The checkpoint's logs are cut back to
the first batch bronze lacks, which Spark then replays from Kafka.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping

from streaming import locations
from streaming.pipeline.recovery import renew_app_id
from streaming.redact import redact_url
from streaming.refusal import NotStarted
from streaming.sinks.base import DeltaSink

LOG = logging.getLogger("kafka_health.recovery")
TABLES_OWNER = "kafka_health_checkpoint.json"


class CheckpointReplaced(NotStarted):
    """The tables were written under another checkpoint, and this one has no offsets."""


def tables_owner(delta_root: str, storage_options: Mapping[str, str] | None = None
                 ) -> dict[str, str] | None:
    """The app id and checkpoint the tables were last written under; None when unknown."""
    text = locations.read_text(locations.join(delta_root, TABLES_OWNER), storage_options)
    try:
        owner = json.loads(text) if text else None
    except ValueError:
        return None
    return owner if isinstance(owner, dict) and owner.get("app_id") else None


def claim_tables(delta_root: str, checkpoint: str, app_id: str, checkpoint_is_new: bool,
                 starting_offsets: str, accept_new: bool,
                 storage_options: Mapping[str, str] | None = None) -> None:
    """Make this checkpoint the tables' owner; CheckpointReplaced when another owns them
    and this one either has offsets of its own (another job's checkpoint) or is new and
    would read the topics from anywhere but their ends."""
    owner = tables_owner(delta_root, storage_options)
    if owner is not None and owner["app_id"] != app_id and not checkpoint_is_new:
        # another job's checkpoint, offsets and all: its batches go on from where that job
        # stopped, over records these tables' own job wrote already
        was = (f"{redact_url(delta_root)} holds tables written under checkpoint "
               f"{owner.get('checkpoint', '?')} (app id {owner['app_id']}), and checkpoint "
               f"{redact_url(checkpoint)} (app id {app_id}) holds another job's offsets")
        if not accept_new:
            raise CheckpointReplaced(
                f"{was}: started, it would write that job's batches into these tables, a "
                "record both jobs read twice in bronze. Point spark.checkpoint and delta.path "
                "at the same job's checkpoint and tables; to hand these tables to this "
                "checkpoint anyway, start once with spark.accept_new_checkpoint: true")
        LOG.warning("%s. spark.accept_new_checkpoint: its batches are written into those "
                    "tables", was)
    if owner is not None and owner["app_id"] != app_id and checkpoint_is_new:
        here = redact_url(checkpoint)
        was = (f"{redact_url(delta_root)} holds tables written under checkpoint "
               f"{owner.get('checkpoint', '?')} (app id {owner['app_id']}), and checkpoint "
               f"{here} is new (no offsets): "
               + ("it was deleted or emptied since" if owner.get("checkpoint") == here else
                  "spark.checkpoint changed, or the old checkpoint was moved"))
        if starting_offsets == "latest":
            LOG.warning("%s. The query starts at the topics' ends: what they received since "
                        "the old checkpoint's last batch is not read", was)
        elif not accept_new:
            raise CheckpointReplaced(
                f"{was}. Started, it would read the topics again from source.starting_offsets "
                f"({starting_offsets}) into those tables: every record still in Kafka twice in "
                "bronze. Point spark.checkpoint back at the old checkpoint, or delta.path at "
                "new tables; to read them again anyway, start once with "
                "spark.accept_new_checkpoint: true (KAFKA_HEALTH__SPARK__ACCEPT_NEW_CHECKPOINT"
                "=true) and unset it once the job runs")
        else:
            LOG.warning("%s. spark.accept_new_checkpoint: reading the topics from %s again "
                        "into those tables", was, starting_offsets)
    if owner is None or owner["app_id"] != app_id:
        locations.write_text(locations.join(delta_root, TABLES_OWNER),
                             json.dumps({"app_id": app_id,
                                         "checkpoint": redact_url(checkpoint)}),
                             storage_options)


def renew_if_logs_lost(checkpoint: str, app_id: str, bronze: DeltaSink,
                       storage_options: Mapping[str, str] | None = None) -> str | None:
    """For a checkpoint with no offsets and the app id `app_id`: a new app id when bronze
    (opened under `app_id`) already holds batches written under it, else None. What is
    left of its commits log goes first (Spark would refuse to commit batch 0 over it), so
    a start stopped in between renews on the next one."""
    written = bronze.transaction_version() if bronze.exists() else None
    if written is None:
        return None
    _cut(checkpoint, "commits", checkpoint_batches(checkpoint, "commits", storage_options),
         storage_options)
    renewed = renew_app_id(checkpoint, storage_options)
    LOG.warning("checkpoint %s has no offsets, but bronze holds batches 0-%d written under "
                "its app id %s: its offsets and commits logs were deleted. Its batches start "
                "from 0 again, which the tables would skip as written, so it takes a new app "
                "id (%s) and starts as a new checkpoint", redact_url(checkpoint), written,
                app_id, renewed)
    return renewed


class TablesBehind(NotStarted):
    """Bronze lacks batches the checkpoint committed, and the checkpoint no longer holds
    the offsets to read them again."""


def rewind_to_tables(checkpoint: str, bronze: DeltaSink,
                     storage_options: Mapping[str, str] | None = None) -> int | None:
    """When bronze (opened under the checkpoint's app id) holds fewer batches than the
    checkpoint committed: cut the offsets and commits logs back so that Spark replays the
    first batch bronze lacks, and return its id; None when bronze is not behind."""
    commits = checkpoint_batches(checkpoint, "commits", storage_options)
    written = bronze.transaction_version() if commits and bronze.exists() else None
    if written is None or written >= commits[-1]:
        return None
    replay = written + 1
    offsets = checkpoint_batches(checkpoint, "offsets", storage_options)
    # Spark replays a batch from its own offsets and the previous batch's (its start)
    needed = {replay, replay - 1} if replay else {replay}
    if not needed <= set(offsets):
        raise TablesBehind(
            f"bronze holds batches up to {written} of checkpoint {redact_url(checkpoint)}, "
            f"which committed batches up to {commits[-1]} and no longer has the offsets of "
            f"batch {replay} (or of the one before, its start): batches "
            f"{replay}-{commits[-1]} are not in the tables and cannot "
            "be read again from this checkpoint. Restore the tables' newer commits, or start "
            "a new checkpoint on them (spark.accept_new_checkpoint)")
    # Offsets first: a start stopped midway still finds the commits ahead of bronze
    _cut(checkpoint, "offsets", [b for b in offsets if b > replay], storage_options)
    _cut(checkpoint, "commits", [b for b in commits if b >= replay], storage_options)
    LOG.warning("bronze holds batches up to %d, but checkpoint %s committed batches up to "
                "%d: the tables lost their newest commits (restored from an older copy, or "
                "writes the store did not keep). The checkpoint's logs are cut back to "
                "batch %d, which is read again from Kafka", written, redact_url(checkpoint),
                commits[-1], replay)
    return replay


def checkpoint_batches(checkpoint: str, log: str,
                       storage_options: Mapping[str, str] | None = None) -> list[int]:
    """The batch ids in one of the checkpoint's logs ("offsets", "commits"), oldest first;
    a store that cannot list them raises (a read error is not an empty log)."""
    return locations.numbered_files(locations.join(checkpoint, log), storage_options)


def _cut(checkpoint: str, log: str, batches: list[int],
         storage_options: Mapping[str, str] | None) -> None:
    """Delete `batches` from a log, newest first, each with Hadoop's local checksum."""
    for batch in sorted(batches, reverse=True):
        for name in (str(batch), f".{batch}.crc"):
            locations.delete(locations.join(checkpoint, log, name), storage_options)
