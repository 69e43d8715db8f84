"""Errors meant for people: each says what is wrong, where (file:line, field, key) and how to fix it.

The CLI prints any ``LitebertError`` as a single message without a traceback. Each also derives from the builtin
exception a Python user would expect to catch (``ValueError``, ``FileNotFoundError``...).
"""


class LitebertError(Exception):
    """Base class of every error litebert raises on purpose."""


class ConfigError(LitebertError, ValueError):
    """A configuration field has a bad value, or a preset name is unknown."""


class CheckpointError(LitebertError, ValueError):
    """A checkpoint is missing, corrupt, truncated, or does not match the model."""


class CheckpointNotFoundError(CheckpointError, FileNotFoundError):
    """A checkpoint folder or file does not exist."""


class DataError(LitebertError, ValueError):
    """An input file is malformed, empty, or was made with a different tokenizer."""


class TokenizerError(LitebertError, ValueError):
    """A tokenizer model is missing, corrupt, or lacks the ALBERT special pieces."""


class WriteError(LitebertError, OSError):
    """A file could not be written (a full disk, no permission); what was there before is left as it was."""
