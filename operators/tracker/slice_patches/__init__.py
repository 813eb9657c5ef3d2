"""ResourceSlicePatch (KEP-5027) as a tracker overlay: parse, match, merge, report.

This lives in the tracker layer (not in `operators.patches`) because the tracker, the
allocator and the offline views all need patched devices and may only import
downwards; `operators.patches` keeps the Event/status decisions and the kopf shell.
That holds for the pure merge too: the controller packages may not import each other,
so a merge kept in `operators.patches` would be out of the allocator's and the
narrowing controller's reach, while they need the overlay on their tracker and its
verdicts (`patched`, `matching_patches`) to explain an allocation.

Read it bottom-up, one seam per module:

    objects.py  the parsed ResourceSlicePatch and its filter
    parse.py    API dict -> ResourceSlicePatch, errors naming the bad field
    match.py    does a filter match a device (names, DeviceClass, CEL), candidates
    merge.py    the pure merge: per-name winners, the verdict for one device
    index.py    the incremental index: which patch matches which device, failures
    report.py   PatchReport and the sentences users read about problems
    overlay.py  SlicePatchOverlay: the plumbing from events to the index and merges

Merging rules (pinned by tests/patches/merge_cases.yaml):

* every filter criterion must hold; no filter matches every device; a DeviceClass
  filter means the class's selectors must match;
* filters read the device *as published*, so no patch's matching depends on another
  patch's output;
* conflicts are settled per attribute/capacity name: highest priority (unset = 0),
  then older creationTimestamp (a missing one counts as newest), then lower name;
* an attribute set to `null` removes the published attribute; capacity can only be set;
* a selector that fails for a device (runtime error, non-boolean) means the patch does
  not apply there; the failure is kept for reporting. A selector that does not compile
  makes the patch match nothing. Errors in the DeviceClass's own selectors only make
  the class not match: they are the class's problem, not the patch's.

Queries (for `draco devices`, the allocator and the reporter):
`patched(device_id) -> PatchedDevice | None`, `error_records() -> [{"object", "message"}]`,
`report(name) -> PatchReport | None`, `reports()`, `patch_names()`, `matched(name)`.

Re-evaluation is incremental: a slice change re-checks its devices against every patch,
a patch change only that patch's candidates (narrowed by driver and pool first), a
DeviceClass change only the patches naming it. CEL results come from the CEL layer's
caches, keyed by the values an expression reads.
"""

from operators.tracker.slice_patches.merge import PatchedDevice
from operators.tracker.slice_patches.objects import (
    KIND,
    MAX_ENTRIES,
    PatchFilter,
    ResourceSlicePatch,
)
from operators.tracker.slice_patches.overlay import SlicePatchOverlay, SlicePatchStats
from operators.tracker.slice_patches.parse import parse_patch_filter, parse_resource_slice_patch
from operators.tracker.slice_patches.report import (
    MAX_EXAMPLES,
    MAX_FAILURE_MESSAGES,
    PatchReport,
    SelectorFailure,
    problem_messages,
)

__all__ = [
    "KIND",
    "MAX_ENTRIES",
    "MAX_EXAMPLES",
    "MAX_FAILURE_MESSAGES",
    "PatchFilter",
    "PatchReport",
    "PatchedDevice",
    "ResourceSlicePatch",
    "SelectorFailure",
    "SlicePatchOverlay",
    "SlicePatchStats",
    "parse_patch_filter",
    "parse_resource_slice_patch",
    "problem_messages",
]
