"""The DRA CEL environment: device selectors as upstream's k8s.io/dynamic-resource-allocation/cel.

Selectors see `device.driver`, `device.attributes["domain"].name`,
`device.capacity["domain"].name` (quantities) and `device.allowMultipleAllocations`,
with the Kubernetes quantity, semver, strings, lists, regex, sets and optional
libraries and `cel.bind`. Compilation and evaluation never raise: problems come back
as `compile_error` or as `CelResult(False, message)`.
"""

from operators.cel.compiler import Read
from operators.cel.selector import (
    CelDevice,
    CelResult,
    CelStats,
    CompiledSelector,
    clear_caches,
    compile_selector,
    device_value,
    evaluate_selector,
    stats,
)

__all__ = [
    "CelDevice",
    "CelResult",
    "CelStats",
    "CompiledSelector",
    "Read",
    "clear_caches",
    "compile_selector",
    "device_value",
    "evaluate_selector",
    "stats",
]
