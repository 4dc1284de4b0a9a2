"""Frozen, typed experiment configuration (see :mod:`.base` for the machinery, :mod:`.experiment` for the sections)."""

from anchorlab.config.base import (ConfigError, PRESET_DIR, Select, apply_overrides, check_choice, check_range, config_hash,
                   dump_config, fail, from_dict, identity_dict, load_yaml, options_from_strings, parse_scalar,
                   preset_names, resolve_config_path, resolve_named, set_dotted, to_dict)
from anchorlab.config.experiment import (ARCHS, INIT_ROLES, ExperimentConfig, InitConfig, ModelConfig, OptimConfig, TaskConfig,
                         TrainConfig, experiment_from_dict, load_config, parse_stop_rule)

__all__ = ["ConfigError", "PRESET_DIR", "Select", "apply_overrides", "check_choice", "check_range", "config_hash",
           "dump_config", "fail", "from_dict", "identity_dict", "load_yaml", "options_from_strings",
           "parse_scalar", "preset_names", "resolve_config_path", "resolve_named", "set_dotted", "to_dict", "ARCHS", "INIT_ROLES",
           "ExperimentConfig", "InitConfig", "ModelConfig", "OptimConfig", "TaskConfig", "TrainConfig",
           "experiment_from_dict", "load_config", "parse_stop_rule"]
