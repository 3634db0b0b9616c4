"""Configuration: typed sections, YAML loading with ``extends`` and ``--set`` overrides."""
from .errors import ConfigError, InputError, did_you_mean
from .fields import param
from .loader import SimConfig, dump_config, load_config
from .registry import config_section

__all__ = ["ConfigError", "InputError", "SimConfig", "config_section", "did_you_mean",
           "dump_config", "load_config", "param"]
