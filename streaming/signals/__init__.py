"""Windowed health signals per broker and per cluster, computed from canonical samples."""
