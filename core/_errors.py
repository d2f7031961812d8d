"""The one exception type users see: the CLI turns it into a one-line message."""


class OrthotuneError(Exception):
    """A user-facing error: bad input, a missing file, an unknown name."""


class ConfigError(OrthotuneError, ValueError):
    """A value broke a rule; the message states the value and the rule."""


def check(condition: bool, message: str) -> None:
    """Raise `ConfigError(message)` unless `condition` holds."""
    if not condition:
        raise ConfigError(message)


class SearchInterrupted(OrthotuneError):
    """A search stopped by a signal (SIGINT, SIGTERM): its record is saved as interrupted.

    The CLI exits with ``128 + signal`` (130, 143) and prints the message, which names the
    resume command."""

    def __init__(self, message: str, signal_number: int) -> None:
        super().__init__(message)
        self.signal_number = signal_number


class SearchCrashed(OrthotuneError):
    """A search's driver failed (not the user's input): its record is saved as crashed with
    the reason, and the message names the resume command. The CLI exits with 1."""
