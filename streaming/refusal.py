"""Why a job refuses to start: one exception class, which the command line reports as one
line and exit 1, in a module light enough to import before anything else is loaded."""


class NotStarted(RuntimeError):
    """A start refused for a reason the operator has to act on; the message says which."""
