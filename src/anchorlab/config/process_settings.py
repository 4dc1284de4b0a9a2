"""What an unset ``train.malloc_retain`` / ``train.flat_params`` means: the settings that change the process (glibc's
malloc thresholds, never undone) or the model (its parameters re-seated as views of a flat buffer) are on under
the command line and off for a library call unless asked for. Neither is in the run id."""

from __future__ import annotations

import os

PROCESS_SETTINGS = ("malloc_retain", "flat_params")   # the train fields that change the process or the model
PROCESS_SETTINGS_ENV = "ANCHORLAB_PROCESS_SETTINGS"


def ask_for_process_settings() -> None:
    """Turn the settings on for this process and the ones it starts, as the command line does, unless
    ``$ANCHORLAB_PROCESS_SETTINGS`` already says otherwise (for entry points that train outside ``anchorlab``)."""
    os.environ.setdefault(PROCESS_SETTINGS_ENV, "on")


def process_settings() -> bool:
    """What an unset (None) ``train.malloc_retain`` / ``train.flat_params`` means: on where
    ``$ANCHORLAB_PROCESS_SETTINGS`` is ``on`` (the command line sets it for its commands and the processes they
    start), off otherwise, so a library call leaves glibc's malloc and the model's parameters alone unless asked."""
    return os.environ.get(PROCESS_SETTINGS_ENV, "off") == "on"
