"""The one exception type users see: the CLI turns it into a one-line message."""


class OrthotuneError(Exception):
    """A user-facing error: bad input, a missing file, an unknown name."""


class ConfigError(OrthotuneError, ValueError):
    """A value broke a rule; the message states the value and the rule."""


#: The longest a one-line reason is kept where it is stored (a failed trial's row, a measured
#: cell's error): a library's message can run to a whole traceback.
REASON_LIMIT = 500


def one_line(error: BaseException | str, *, typed: bool = False, limit: int | None = None) -> str:
    """A message as one line, the one rule for every place that shows or stores an error:
    its non-empty lines stripped and joined with "; " (a library's multi-line text stays
    readable), the exception's type name in front with ``typed`` (or alone, for an empty
    message), cut at ``limit`` characters. An error that carries its cause (Ray's task
    errors: ``cause``) speaks through the cause, and a message that is a formatted traceback
    (Ray Tune wraps one in its own error) through its last line, the error it ends in."""
    cause = getattr(error, "cause", None)
    if isinstance(cause, BaseException):
        error = cause
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    if lines and lines[0].startswith("Traceback"):
        return lines[-1] if limit is None else lines[-1][:limit]
    text = "; ".join(lines)
    name = type(error).__name__ if isinstance(error, BaseException) else ""
    if typed and name:
        text = f"{name}: {text}" if text else name
    text = text or name
    return text if limit is None else text[:limit]


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
