"""A claim's TGS settings: the opaque config for the driver, validated.

A DeviceClass or a ResourceClaim carries them as `opaque` config for the driver (its
`parameters`, a JSON object); the scheduler copies every config that applies into the claim's
allocation (`status.allocation.devices.config`, the class's first, `source: FromClass`, then
the claim's, `FromClaim`), each for all requests of the claim or for those it names:

    apiVersion  gpu.tgs.io/v1 (optional; <driver>/v1 with another --driver)
    kind        GpuConfig     (optional)
    priority    production | opportunistic                  (default: opportunistic)
    weight      1-1000: share among the opportunistic jobs  (default: 1)
    memory      the job's memory quota: a size as tgs-run --mem takes it (8GiB, 512MiB,
                1.5G, 4096: docs/usage.md "Sizes"), "unlimited", or 0 (unlimited)
                (default: the shares' part of the GPU, k of N shares: k/N of its memory)

A config later in the list overrides an earlier one key by key (the claim's over the
class's). Anything else (an unknown key, a wrong type, a bad size) is a ConfigError, which
the driver answers as the claim's error: nothing is registered for that claim.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from tgs.intercept.sizes import SizeError, parse_limit, show

from ..annotations import PRIORITIES, JobSettings, share_quota
from ..shares import Gpu

KIND = "GpuConfig"
VERSION = "v1"
KEYS = ("apiVersion", "kind", "priority", "weight", "memory")
MAX_WEIGHT = 1000
_UNSET = object()


class ConfigError(ValueError):
    pass


def _val(v: Any) -> str:
    """A config value as an error quotes it: JSON (a string in double quotes, so 3 and "3"
    differ), ASCII, cut at 40 characters."""
    try:
        text = json.dumps(v, ensure_ascii=True, sort_keys=True)
    except (TypeError, ValueError):
        text = ascii(v)
    return text if len(text) <= 40 else text[:40] + "..."


def api_version(driver: str) -> str:
    return f"{driver}/{VERSION}"


def parse(parameters: Any, driver: str) -> dict[str, Any]:
    """The settings one config gives (only the keys it has): priority (str), weight (int),
    memory (bytes, or None for unlimited). ConfigError names the bad key."""
    if not isinstance(parameters, Mapping):
        raise ConfigError(f"parameters must be a JSON object, not {type(parameters).__name__}")
    unknown = [k for k in parameters if k not in KEYS]
    if unknown:
        raise ConfigError(f"unknown key {_val(unknown[0])} (known: {', '.join(KEYS)})")
    want = api_version(driver)
    if "apiVersion" in parameters and parameters["apiVersion"] != want:
        raise ConfigError(f"apiVersion {_val(parameters['apiVersion'])}: this driver "
                          f"reads {want}")
    if "kind" in parameters and parameters["kind"] != KIND:
        raise ConfigError(f"kind {_val(parameters['kind'])}: this driver reads {KIND}")
    out: dict[str, Any] = {}
    if "priority" in parameters:
        prio = parameters["priority"]
        if prio not in PRIORITIES:
            raise ConfigError(f"priority {_val(prio)} is not one of {', '.join(PRIORITIES)}")
        out["priority"] = prio
    if "weight" in parameters:
        w = parameters["weight"]
        if isinstance(w, bool) or not isinstance(w, int) or not 1 <= w <= MAX_WEIGHT:
            raise ConfigError(f"weight {_val(w)} is not an integer from 1 to {MAX_WEIGHT}")
        out["weight"] = w
    if "memory" in parameters:
        m = parameters["memory"]
        if isinstance(m, bool) or not isinstance(m, (str, int)):
            raise ConfigError(f"memory {_val(m)} is not a size (a string such as 8GiB, "
                              "or 'unlimited')")
        try:
            out["memory"] = parse_limit(str(m))               # None: unlimited
        except SizeError as exc:
            raise ConfigError(f"memory: {exc}") from None
    return out


def applies(entry: Mapping[str, Any], request: str) -> bool:
    """Whether an allocation config entry is for this request: it names none (all), or it
    names the request, or the main request of a subrequest (`main/sub`)."""
    names = entry.get("requests") or []
    return not names or request in names or request.split("/", 1)[0] in names


def effective(configs: Sequence[Mapping[str, Any]], request: str,
              driver: str) -> dict[str, Any]:
    """The merged settings of every config for this driver and request: the class's first,
    then the claim's, later keys winning. ConfigError for a bad one (its source said)."""
    ordered = sorted(configs, key=lambda c: c.get("source") != "FromClass")   # stable
    out: dict[str, Any] = {}
    for entry in ordered:
        opaque = entry.get("opaque") or {}
        if opaque.get("driver") != driver or not applies(entry, request):
            continue
        where = "the DeviceClass" if entry.get("source") == "FromClass" else "the claim"
        try:
            out.update(parse(opaque.get("parameters"), driver))
        except ConfigError as exc:
            raise ConfigError(f"config of {driver} from {where}: {exc}") from None
    return out


def settings(given: Mapping[str, Any], gpus: Sequence[tuple[Gpu, int]], nshares: int, *,
             within_shares: bool = True, namespace: str = "",
             production_namespaces: frozenset[str] = frozenset()) -> JobSettings:
    """JobSettings for a request holding `gpus` (each GPU with its number of shares) from
    the merged config. With `within_shares` the memory may not exceed the shares' part of
    the GPU where the request holds the fewest (unlimited is above it): the scheduler, which
    counts shares, then never promises a GPU's memory twice. Production only in
    `production_namespaces` when that is not empty."""
    prio = given.get("priority", "opportunistic")
    if production_namespaces and prio == "production" and namespace not in \
            production_namespaces:
        raise ConfigError(f"priority production: namespace {show(namespace)} may not run "
                          f"production jobs (allowed: {', '.join(sorted(production_namespaces))})")
    gpu, n = min(gpus, key=lambda gn: share_quota(gn[0].mem_total, gn[1], nshares))
    part = share_quota(gpu.mem_total, n, nshares)
    mem = given.get("memory", _UNSET)
    if mem is _UNSET:
        mem = part
    if within_shares and (mem is None or mem > part):
        raise ConfigError(
            f"memory {'unlimited' if mem is None else mem} is above the {part} bytes of the "
            f"{n} of {nshares} shares of {gpu.uuid} this request holds: ask for more share "
            "devices (count) or run the driver with --memory-above-shares")
    return JobSettings(prio, int(given.get("weight", 1)), mem)  # type: ignore[arg-type]
