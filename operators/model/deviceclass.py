"""DeviceClass: the admin-defined selectors and config every request of the class inherits."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from operators.model import fields as f
from operators.model.errors import FieldError
from operators.model.meta import ObjectMeta
from operators.model.selectors import DeviceSelector, parse_device_selectors


@dataclass(frozen=True, slots=True)
class OpaqueDeviceConfiguration:
    driver: str
    parameters: Any  # frozen JSON (see fields.freeze); use fields.thaw to send it on

    def to_api(self) -> dict[str, Any]:
        return {"driver": self.driver, "parameters": f.thaw(self.parameters)}


def parse_opaque(d: Mapping[str, Any]) -> OpaqueDeviceConfiguration | None:
    o = f.opt_obj(d, "opaque")
    if o is None:
        return None
    try:
        return OpaqueDeviceConfiguration(
            driver=f.string(o, "driver", required=True),
            parameters=f.freeze(o.get("parameters")),
        )
    except FieldError as e:
        raise e.at("opaque") from None


@dataclass(frozen=True, slots=True)
class DeviceClassConfiguration:
    opaque: OpaqueDeviceConfiguration | None


@dataclass(frozen=True, slots=True)
class DeviceClass:
    kind = "DeviceClass"

    meta: ObjectMeta
    selectors: tuple[DeviceSelector, ...] = ()
    config: tuple[DeviceClassConfiguration, ...] = ()
    extended_resource_name: str | None = None

    @property
    def name(self) -> str:
        return self.meta.name


def parse_device_class_spec(meta: ObjectMeta, spec: Mapping[str, Any]) -> DeviceClass:
    return DeviceClass(
        meta=meta,
        selectors=parse_device_selectors(spec),
        config=f.objects(spec, "config", lambda c: DeviceClassConfiguration(parse_opaque(c))),
        extended_resource_name=f.opt_string(spec, "extendedResourceName"),
    )
