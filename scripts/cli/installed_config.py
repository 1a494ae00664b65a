"""The gate configuration installed on the cluster: the ConfigMap offhours-gate-config in the serving namespace.

What `submit` checks a service against when no `--config` is given, and what the console names its
services from. Reading it is advisory: a ConfigMap that is absent, unreadable or invalid is a reason
returned beside None, never a failure of the verb.
"""

from typing import Any

from offhours.scripts.policy.config import GateConfig

READ_TIMEOUT_SECONDS = 10


def installed_gate_config(core: Any, serving_namespace: str) -> tuple[GateConfig | None, str]:
    """Return (the installed configuration, '') or (None, why there is none to read) from a CoreV1Api."""
    from offhours.scripts.cluster.errors import describe_api_error
    from offhours.scripts.cluster.handles import ApiError as ApiException
    from offhours.scripts.config.loader import parse_config_text
    from offhours.scripts.names import GATE_CONFIG_KEY, GATE_CONFIG_MAP
    from offhours.scripts.policy.config import ConfigError

    where = f"ConfigMap {serving_namespace}/{GATE_CONFIG_MAP}"
    try:
        cm = core.read_namespaced_config_map(GATE_CONFIG_MAP, serving_namespace, _request_timeout=READ_TIMEOUT_SECONDS)
    except ApiException as err:
        return None, (f"no {where}" if err.status == 404 else describe_api_error(f"read {where}", err))
    except Exception as err:  # noqa: BLE001 - advisory: any failure to read is a reason, not the verb's failure
        return None, describe_api_error(f"read {where}", err)
    data = cm.get("data") if isinstance(cm, dict) else getattr(cm, "data", None)
    text = (data or {}).get(GATE_CONFIG_KEY)
    if not text:
        return None, f"{where} has no key {GATE_CONFIG_KEY}"
    try:
        return parse_config_text(text, where), ""
    except ConfigError as err:
        return None, f"{where} is invalid: {str(err).splitlines()[0] if str(err) else type(err).__name__}"
