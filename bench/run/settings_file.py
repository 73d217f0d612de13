"""A run's settings as one JSON mapping: what the pipeline hands a job (``bench run --settings JSON``) and
what the launcher of ``--backend dist`` hands its ranks (a file), read back by one loader that checks it as
``resolve`` does. JSON rather than ``--set`` text: each value comes back as it was written (0.10 a number,
'0.10' a string), with nothing to parse again. The pipeline builds its DAG with it."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from ..errors import BenchError
from ..files import read_regular_text
from .config import RunConfig, check_keys, resolve

WHERE = "the settings"


def config_of(values: Any, where: str = WHERE) -> RunConfig:
    """The resolved ``RunConfig`` of a mapping of setting names to values (bench's defaults beneath them);
    one line naming ``where`` and the first unknown key or bad value."""
    if not isinstance(values, Mapping):
        raise BenchError(f"{where} must be a mapping of setting names to values, not {type(values).__name__}")
    values = dict(values)
    check_keys(values, where)  # before resolve: its message would name a layer (--set) this did not come from
    return resolve(values, {}, {})


def given(cfg: RunConfig, values: Mapping[str, Any]) -> dict[str, Any]:
    """``cfg``'s own values (coerced and checked) of the settings ``values`` names, in RunConfig's order:
    ``config_of`` of it gives back ``cfg``. What ``values`` leaves out is derived again where the run
    starts, as it was for ``cfg`` (nesterov after momentum 0, a recipe's numbers, a cell's tuned knobs
    read from its YAML), so a mapping without some knob can take it from elsewhere."""
    own = cfg.to_dict()
    names = {k for k in values if k in own}
    if any(k not in own for k in values) and cfg.algorithm_options:  # a knob's shortcut (gamma): it lives there
        names.add("algorithm_options")
    return {k: v for k, v in own.items() if k in names}


def dumps(values: Mapping[str, Any]) -> str:
    """``values`` as one line of JSON, as ``read_settings`` reads it (readable in a job's log)."""
    return json.dumps(dict(values), ensure_ascii=False, default=str)


def write_settings(cfg: RunConfig, path: Path) -> Path:
    """Every setting of ``cfg`` (``to_dict``) into ``path``; ``load_settings(path)`` gives ``cfg`` back."""
    Path(path).write_text(dumps(cfg.to_dict()) + "\n")
    return Path(path)


def read_settings(source: str | Path) -> dict[str, Any]:
    """The mapping of settings in ``source``: a JSON object (text starting with ``{``), or the path of a
    file holding one; its keys checked. One line when it is neither."""
    text, where = str(source), WHERE
    if not text.lstrip().startswith("{"):
        where = f"settings file {text!r}"
        try:
            text = read_regular_text(source)
        except OSError as err:
            raise BenchError(f"{where} cannot be read: {err.strerror or err}") from None
        except UnicodeDecodeError:
            raise BenchError(f"{where} is not text (JSON)") from None
    try:
        values = json.loads(text)
    except (ValueError, RecursionError) as err:
        raise BenchError(f"{where} is not JSON: {str(err)[:200]}") from None
    if not isinstance(values, dict):
        raise BenchError(f"{where} must be a JSON object of setting names to values, e.g. {{\"nodes\": 8}}")
    check_keys(values, where)
    return values


def load_settings(source: str | Path) -> RunConfig:
    """The validated ``RunConfig`` of ``read_settings(source)``."""
    where = WHERE if str(source).lstrip().startswith("{") else f"settings file {str(source)!r}"
    return config_of(read_settings(source), where)
