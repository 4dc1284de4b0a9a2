"""Task families behind one protocol (:mod:`anchorlab.tasks.base`); ``task.name`` picks one."""

from .base import EvalResult, Task, TensorData, build_task

__all__ = ["EvalResult", "Task", "TensorData", "build_task"]
