"""Clients' truth: what a producer and a consumer see, beside what brokers say of themselves.

Brokers' gauges are counted on partition leaders only, so a hung or cut-off leader takes its
partitions out of every sum. The durability probe (`probe`) writes acks=all records through
every broker's partitions and reads them back: per leader broker and window, how many
writes were acked, failed (and why), how fast, and whether an acked record was lost.
"""
