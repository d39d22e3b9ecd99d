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
    """Make this checkpoint the tables' owner; CheckpointReplaced when it is new, another
    owns them and the query would read the topics from anywhere but their ends."""
    owner = tables_owner(delta_root, storage_options)
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
    (opened under `app_id`) already holds batches written under it, else None."""
    written = bronze.transaction_version() if bronze.exists() else None
    if written is None:
        return None
    renewed = renew_app_id(checkpoint, storage_options)
    LOG.warning("checkpoint %s has no offsets, but bronze holds batches 0-%d written under "
                "its app id %s: its offsets and commits logs were deleted. Its batches start "
                "from 0 again, which the tables would skip as written, so it takes a new app "
                "id (%s) and starts as a new checkpoint", redact_url(checkpoint), written,
                app_id, renewed)
    return renewed
