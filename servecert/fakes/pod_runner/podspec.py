"""What a container would see inside a pod, computed from the pod object: env, args, Downward API files.

Pure functions over the pod as a dict (camelCase, as the API serves it):

    field_value(pod, "metadata.labels['x']")       the Downward API field paths kubelet supports
    container_env(pod, container, lookup)          env + envFrom, valueFrom (fieldRef, resourceFieldRef,
                                                   configMapKeyRef, secretKeyRef), $(VAR) expansion
    expand(text, env)                              kubelet's $(VAR) / $$ rules, for args too
    downward_files(pod, volume)                    relative path -> content for downwardAPI volumes and
                                                   projected downwardAPI sources
    mounts(container)                              (volume name, mountPath) pairs

Why pure: the runner calls these on every pod change (labels and annotations can change while
the process runs), and the rules are subtle enough to deserve unit tests without a cluster.
Values follow kubelet: a whole label map is ``key="value"`` lines sorted by key, with the value
quoted like Go's ``%q``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

Lookup = Callable[[str, str, str], Mapping[str, str] | None]
"""(kind 'configmap'|'secret', namespace, name) -> its data (secrets decoded), or None when missing."""

_SUBSCRIPT = re.compile(r"^metadata\.(labels|annotations)\['([^']+)'\]$")
_VAR = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


class PodSpecError(ValueError):
    """The pod asks for something the runner cannot provide; the message names the field."""


def _quote(value: str) -> str:
    # json.dumps escapes like Go's %q for the characters labels and annotations can hold.
    return json.dumps(value, ensure_ascii=False)


def format_map(values: Mapping[str, str]) -> str:
    return "\n".join(f"{k}={_quote(str(values[k]))}" for k in sorted(values))


def field_value(pod: Mapping[str, Any], path: str) -> str | None:
    """Resolve a Downward API ``fieldPath``; None when the field is absent (e.g. a missing label)."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    match = _SUBSCRIPT.match(path)
    if match:
        value = (meta.get(match.group(1)) or {}).get(match.group(2))
        return None if value is None else str(value)
    simple: dict[str, Any] = {
        "metadata.name": meta.get("name"),
        "metadata.namespace": meta.get("namespace"),
        "metadata.uid": meta.get("uid"),
        "spec.nodeName": spec.get("nodeName"),
        "spec.serviceAccountName": spec.get("serviceAccountName"),
        "status.podIP": status.get("podIP"),
        "status.hostIP": status.get("hostIP"),
        "status.podIPs": ",".join(ip.get("ip", "") for ip in status.get("podIPs") or []) or None,
        "status.hostIPs": ",".join(ip.get("ip", "") for ip in status.get("hostIPs") or []) or None,
    }
    if path in ("metadata.labels", "metadata.annotations"):
        return format_map(meta.get(path.split(".")[1]) or {})
    if path not in simple:
        raise PodSpecError(f"fieldPath {path!r} is not supported by the pod runner")
    value = simple[path]
    return None if value is None else str(value)


def _quantity(container: Mapping[str, Any], resource: str) -> str:
    kind, _, name = resource.partition(".")
    value = ((container.get("resources") or {}).get(kind) or {}).get(name)
    if value is None and kind == "requests":
        value = ((container.get("resources") or {}).get("limits") or {}).get(name)
    return "0" if value is None else str(value)


def expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes ``$(VAR)`` expansion: known vars replaced, unknown left as is, ``$$`` -> ``$``."""

    def sub(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1)
        return env.get(name, match.group(0))

    return _VAR.sub(sub, text)


def _value_from(pod: Mapping[str, Any], container: Mapping[str, Any], source: Mapping[str, Any], lookup: Lookup) -> str | None:
    namespace = (pod.get("metadata") or {}).get("namespace", "default")
    if "fieldRef" in source:
        return field_value(pod, source["fieldRef"]["fieldPath"])
    if "resourceFieldRef" in source:
        return _quantity(container, source["resourceFieldRef"]["resource"])
    for kind, key in (("configmap", "configMapKeyRef"), ("secret", "secretKeyRef")):
        if key in source:
            ref = source[key]
            data = lookup(kind, namespace, ref["name"])
            value = None if data is None else data.get(ref["key"])
            if value is None and not ref.get("optional"):
                raise PodSpecError(f"{key} {ref['name']}/{ref['key']} not found (and not optional)")
            return value
    raise PodSpecError(f"unsupported valueFrom {sorted(source)}")


def container_env(
    pod: Mapping[str, Any],
    container: Mapping[str, Any],
    lookup: Lookup | None = None,
) -> dict[str, str]:
    """The container's environment in kubelet's order: envFrom first, then env (later wins)."""
    get: Lookup = lookup or (lambda _k, _ns, _n: None)
    env: dict[str, str] = {}
    namespace = (pod.get("metadata") or {}).get("namespace", "default")
    for source in container.get("envFrom") or []:
        prefix = source.get("prefix", "")
        for kind, key in (("configmap", "configMapRef"), ("secret", "secretRef")):
            if key in source:
                data = get(kind, namespace, source[key]["name"])
                if data is None:
                    if not source[key].get("optional"):
                        raise PodSpecError(f"envFrom {key} {source[key]['name']} not found (and not optional)")
                    continue
                for k, v in data.items():
                    env[prefix + k] = str(v)
    for item in container.get("env") or []:
        if "valueFrom" in item:
            value = _value_from(pod, container, item["valueFrom"], get)
            if value is not None:
                env[item["name"]] = value
        else:
            env[item["name"]] = expand(str(item.get("value", "")), env)
    return env


def downward_files(pod: Mapping[str, Any], volume: Mapping[str, Any]) -> dict[str, str]:
    """Relative path -> file content for a ``downwardAPI`` volume or a projected volume's sources."""
    items: list[Mapping[str, Any]] = []
    if "downwardAPI" in volume:
        items.extend((volume["downwardAPI"] or {}).get("items") or [])
    for source in ((volume.get("projected") or {}).get("sources")) or []:
        if "downwardAPI" in source:
            items.extend((source["downwardAPI"] or {}).get("items") or [])
    files: dict[str, str] = {}
    for item in items:
        path = item["path"]
        if path.startswith("/") or ".." in path.split("/"):
            raise PodSpecError(f"downwardAPI item path {path!r} must be relative and stay inside the volume")
        if "fieldRef" in item:
            value = field_value(pod, item["fieldRef"]["fieldPath"])
            files[path] = value if value is not None else ""
        elif "resourceFieldRef" in item:
            container: Mapping[str, Any] = next(
                (c for c in (pod.get("spec") or {}).get("containers") or [] if c["name"] == item["resourceFieldRef"].get("containerName")),
                {},
            )
            files[path] = _quantity(container, item["resourceFieldRef"]["resource"])
    return files


def is_downward(volume: Mapping[str, Any]) -> bool:
    projected = (volume.get("projected") or {}).get("sources") or []
    return "downwardAPI" in volume or any("downwardAPI" in s for s in projected)


def mounts(container: Mapping[str, Any]) -> list[tuple[str, str]]:
    return [(m["name"], m["mountPath"]) for m in container.get("volumeMounts") or []]


def remap_path(value: str, mapping: Mapping[str, str]) -> str:
    """Rewrite an in-container path (a mountPath or below it) to its host directory."""
    for mount_path, host in sorted(mapping.items(), key=lambda kv: -len(kv[0])):
        stripped = mount_path.rstrip("/")
        if value in (stripped, mount_path):
            return host
        if value.startswith(stripped + "/"):
            return host + value[len(stripped) :]
    return value


def container_port(container: Mapping[str, Any], default: int, port_flag: str | None, args: list[str]) -> int:
    """The port the process must listen on: a declared containerPort, else ``--port N`` in args, else default."""
    ports = container.get("ports") or []
    if ports:
        return int(ports[0]["containerPort"])
    if port_flag:
        for i, arg in enumerate(args):
            if arg == port_flag and i + 1 < len(args):
                return int(args[i + 1])
            if arg.startswith(port_flag + "="):
                return int(arg.split("=", 1)[1])
    return default


def readiness_path(container: Mapping[str, Any], default: str) -> str:
    probe = ((container.get("readinessProbe") or {}).get("httpGet")) or {}
    return str(probe.get("path") or default)
