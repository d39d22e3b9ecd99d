"""Helpers below every other package of the project, which import none of it: any package
may use them without an arrow pointing back up."""
