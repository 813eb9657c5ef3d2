"""`cluster_scale`'s figures as one side-by-side table, and as `python -m benchmarks` rows.

Every figure goes next to its target from issue 21 and the load average at the moment it
was taken: on a 2-core machine shared with other work, a figure without its load is not
comparable with the next run's.
"""

from __future__ import annotations

from typing import Any


def _mib(size: float | None) -> str:
    return "-" if size is None else f"{size / 2**20:.0f} MiB"


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else a / b


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _grid(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def _plain(plain: dict[str, Any], sizes: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    lines: list[str] = []
    rows: list[dict[str, Any]] = []
    zero, many = plain.get("without"), plain.get("with")
    n = sizes["plain_pods"]
    lines.append(f"plain pods: k8s 1.34, {sizes['plain_nodes']} kwok nodes, "
                 f"{plain.get('dra_pods')} pods with allocated claims as the base")
    if zero and many:
        def pair(key: str, fmt: Any) -> list[str]:
            return [fmt(zero.get(key)), fmt(many.get(key))]

        table = [
            ["", "0 plain pods", f"{n:,} plain pods", "ratio", "target"],
            ["draco RSS after sync (VmRSS)", *pair("rss", _mib), _x(_ratio(many["rss"], zero["rss"])),
             "<= 1.15x, and <= kube-scheduler's"],
            ["draco RSS peak (VmHWM)", *pair("peak", _mib), _x(_ratio(many["peak"], zero["peak"])), ""],
            ["draco start -> /readyz 200 (median)", *pair("ready_s", lambda v: f"{v:.1f} s"),
             _x(_ratio(many["ready_s"], zero["ready_s"])), "<= 1.5x"],
            ["draco CPU to ready", *pair("cpu_to_ready_s", lambda v: f"{v:.1f} CPU s"),
             _x(_ratio(many["cpu_to_ready_s"], zero["cpu_to_ready_s"])), ""],
            ["draco idle CPU (20 s)", *pair("idle_pct", lambda v: f"{v:.2f} % core"), "",
             "<= 0.5 %"],
            ["one LIST of all pods (JSON)", *pair("list_pods_s", lambda v: "-" if v is None else f"{v:.1f} s"),
             "", "(what any initial sync waits for)"],
            ["kube-scheduler RSS", *pair("kube-scheduler", _mib), "", "(anchor)"],
            ["kube-controller-manager RSS", *pair("kube-controller-manager", _mib), "", "(anchor)"],
            ["load average at start / end", f"{zero['load_start']} / {zero['load']}",
             f"{many['load_start']} / {many['load']}", "", ""],
        ]
        lines += ["  " + line for line in _grid(table)]
        lines.append("  every start -> /readyz: " + " / ".join(
            ", ".join(f"{r['ready_s']:.1f} s" for r in side.get("starts", [])) for side in (zero, many)))
        per_pod = (many["rss"] - zero["rss"]) / max(1, n)
        lines.append(f"  draco RSS per plain pod: {per_pod / 1024:.2f} KiB "
                     f"(kube-scheduler {(many['kube-scheduler'] - zero['kube-scheduler']) / max(1, n) / 1024:.2f} KiB, "
                     f"kcm {(many['kube-controller-manager'] - zero['kube-controller-manager']) / max(1, n) / 1024:.2f} KiB)")
        if plain.get("create_s"):
            lines.append(f"  {n:,} plain pods created and Running in {plain['create_s']:.0f} s "
                         f"({n / plain['create_s']:.0f} pods/s)")
        rows.append({
            "scenario": f"cluster_scale: ready with {n:,} plain pods vs 0",
            "draco_s": many["ready_s"], "baseline_s": zero["ready_s"],
            "ratio": _ratio(many["ready_s"], zero["ready_s"]),
            "rss_with": many["rss"], "rss_without": zero["rss"],
            "rss_ratio": _ratio(many["rss"], zero["rss"]),
            "kube_scheduler_rss": many["kube-scheduler"],
            "kube_controller_manager_rss": many["kube-controller-manager"],
            "idle_pct": many["idle_pct"], "load": many["load"],
            "note": (f"RSS {_mib(zero['rss'])} -> {_mib(many['rss'])} "
                     f"({_x(_ratio(many['rss'], zero['rss']))}, target <= 1.15x); kube-scheduler "
                     f"{_mib(many['kube-scheduler'])}, kcm {_mib(many['kube-controller-manager'])}; "
                     f"idle {many['idle_pct']:.2f} %; ratio = ready with / without "
                     f"(target <= 1.5); load {many['load']}")})
    churn = plain.get("churn")
    if churn:
        lines.append(
            f"  churn: {churn['pods']:,} plain pods created and deleted while draco runs: "
            f"{churn['events']:,} watch events, {churn['cpu_s']:.2f} CPU s "
            f"({churn['net_cpu_s']:.2f} less idle) over {churn['seconds']:.0f} s -> "
            f"{churn['ms_per_event']:.3f} ms of draco CPU per event (target <= 0.1); "
            f"load {churn['load']}")
        rows.append({"scenario": "cluster_scale: draco CPU per plain-pod watch event",
                     "draco_s": churn["ms_per_event"] / 1000, "baseline_s": None, "ratio": None,
                     **{k: churn[k] for k in ("events", "cpu_s", "net_cpu_s", "load")},
                     "note": f"{churn['events']} events; target <= 0.1 ms; load {churn['load']}"})
    soak = plain.get("soak")
    if soak:
        ratio = _ratio(soak["rss_after"], soak["rss_before"])
        before, after = soak["anchors_before"], soak["anchors_after"]
        lines.append(
            f"  soak: {soak['cycles']} x {soak['pods']:,} plain pods created and deleted in "
            f"{soak['seconds']:.0f} s: draco RSS {_mib(soak['rss_before'])} -> "
            f"{_mib(soak['rss_after'])} ({_x(ratio)}, target <= 1.05x; peak {_mib(soak['peak'])}); "
            f"kube-scheduler {_mib(before['kube-scheduler'])} -> {_mib(after['kube-scheduler'])}, "
            f"kcm {_mib(before['kube-controller-manager'])} -> "
            f"{_mib(after['kube-controller-manager'])}; load {soak['load']}")
        rows.append({"scenario": f"cluster_scale: soak {soak['cycles']} x {soak['pods']} plain pods",
                     "draco_s": None, "baseline_s": None, "ratio": ratio,
                     "rss_before": soak["rss_before"], "rss_after": soak["rss_after"],
                     "load": soak["load"],
                     "note": f"ratio = draco RSS after / before (target <= 1.05); load {soak['load']}"})
    return lines, rows


def _dra(dra: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    sync, lat, ev = dra.get("sync"), dra.get("latency"), dra.get("eviction")
    lines = [f"dra: k8s 1.34, {dra['sizes']['nodes']:,} kwok nodes x "
             f"{dra['sizes']['devices'] // max(1, dra['sizes']['nodes'])} devices "
             f"({dra['sizes']['devices']:,}), {dra.get('claims', 0):,} allocated claims with "
             f"Running pods (nodes Ready in {dra.get('nodes_s', 0):.0f} s, claims and pods "
             f"in {dra.get('populate_s', 0):.0f} s)"]
    rows: list[dict[str, Any]] = []
    if sync:
        lines.append(
            f"  draco: ready {sync['ready_s']:.1f} s (median of "
            f"{', '.join(format(r['ready_s'], '.1f') for r in sync.get('starts', []))}; target < 30), "
            f"{sync['cpu_to_ready_s']:.1f} CPU s "
            f"to ready, RSS {_mib(sync['rss'])} (target < 400 MB; peak {_mib(sync['peak'])}), "
            f"idle {sync['idle_pct']:.2f} % core; kube-scheduler {_mib(sync['kube-scheduler'])}, "
            f"kcm {_mib(sync['kube-controller-manager'])}; load {sync['load']}")
        rows.append({"scenario": f"cluster_scale: ready with {dra.get('claims', 0)} claims, "
                                 f"{dra['sizes']['devices']} devices",
                     "draco_s": sync["ready_s"], "baseline_s": None, "ratio": None,
                     "rss": sync["rss"], "idle_pct": sync["idle_pct"], "load": sync["load"],
                     "note": f"RSS {_mib(sync['rss'])} (target < 400 MB), ready target < 30 s; "
                             f"load {sync['load']}"})
    if lat:
        lines.append(
            f"  allocation latency (gated pod POST -> claim's status.allocation), "
            f"{lat['pods']} pods: P50 {lat['p50_ms']:.0f} ms, P99 {lat['p99_ms']:.0f} ms "
            f"(target < 250), max {lat['max_ms']:.0f} ms; draco {lat.get('cpu_s', float('nan')):.1f} CPU s "
            f"meanwhile; load {lat['load']}")
        rows.append({"scenario": "cluster_scale: allocation latency P99 at DRA size",
                     "draco_s": lat["p99_ms"] / 1000, "baseline_s": None, "ratio": None,
                     "p50_s": lat["p50_ms"] / 1000, "load": lat["load"],
                     "note": f"P50 {lat['p50_ms']:.0f} ms over {lat['pods']} pods; target P99 < 250 ms; "
                             f"load {lat['load']}"})
    if ev:
        lines.append(
            f"  eviction: one NoExecute rule over gpu-0, {ev['pods']:,} pods evicted (deletion "
            f"accepted) in {ev.get('accepted_s', float('nan')):.1f} s, gone in "
            f"{ev['gone_s']:.1f} s, EvictionInProgress False at {ev['seconds']:.1f} s (target < 10); "
            f"draco {ev.get('cpu_s', float('nan')):.1f} CPU s meanwhile; "
            f"load {ev['load']}")
        rows.append({"scenario": f"cluster_scale: evict {ev['pods']} pods at DRA size",
                     "draco_s": ev["seconds"], "baseline_s": None, "ratio": None,
                     "gone_s": ev["gone_s"], "accepted_s": ev.get("accepted_s"), "load": ev["load"],
                     "note": f"until gone and EvictionInProgress False; target < 10 s; load {ev['load']}"})
    floor = dra.get("eviction_floor")
    if floor:
        # the two evict different numbers of pods: compared as rates
        draco_rate = ev["pods"] / ev["gone_s"] if ev and ev["gone_s"] else None
        floor_rate = floor["pods"] / floor["gone_s"] if floor["gone_s"] else None
        ratio = _ratio(draco_rate, floor_rate)
        lines.append(
            f"  eviction floor: the same 3 requests per pod from a bare client, 32 at once, for the "
            f"{floor['pods']:,} pods on gpu-1: gone in {floor['gone_s']:.1f} s = "
            f"{floor_rate or float('nan'):.1f} pods/s; draco {draco_rate or float('nan'):.1f} pods/s "
            f"(draco / floor {_x(ratio)}); load {floor['load']}")
        rows.append({"scenario": f"cluster_scale: evictions per second, bare client (floor, {floor['pods']} pods)",
                     "draco_s": ev["gone_s"] / ev["pods"] if ev else None,
                     "baseline_s": floor["gone_s"] / floor["pods"], "ratio": ratio, "load": floor["load"],
                     "note": "seconds per evicted pod; ratio = draco's rate / the floor's; the control "
                             "plane's own speed for the same requests on this machine"})
    return lines, rows


def _gated_side(name: str, side: dict[str, Any] | None) -> str:
    if side is None:
        return f"  {name}: not run"
    if "error" in side:
        return f"  {name}: FAILED: {side['error']}"
    extra = (f"ready {side['ready_s']:.1f} s; {side['cpu_s']:.1f} draco CPU s, peak RSS "
             f"{_mib(side['peak'])}; " if "cpu_s" in side else "")
    return (f"  {name}: {side['rate']:.1f} pods/s ({side['pods']:,} bound {side['seconds']:.1f} s after "
            f"the first POST; all created in {side['create_s']:.1f} s; last claim allocated at "
            f"{side.get('last_allocated_s', float('nan')):.1f} s, last pod ungated at "
            f"{side['last_ungated_s']:.1f} s, ungated -> bound P50 {side['ungated_to_bound_p50_s']:.2f} s; "
            f"{extra}kube-scheduler "
            f"{side['sched_cpu_s']:.1f} CPU s since its start); load {side['load']}")


def _gated(gated: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    up, dr, fl = gated.get("upstream"), gated.get("draco"), gated.get("floor")
    ok_up = up if up and "rate" in up else None
    ok_dr = dr if dr and "rate" in dr else None
    ok_fl = fl if fl and "rate" in fl else None
    ratio = _ratio(ok_dr and ok_dr["rate"], ok_up and ok_up["rate"])
    to_floor = _ratio(ok_dr and ok_dr["rate"], ok_fl and ok_fl["rate"])
    pods = (ok_dr or ok_up or ok_fl or {}).get("pods", 0)
    lines = [
        f"gated flow: {pods:,} DRA pods with PRE-CREATED claims (kube-controller-manager's "
        "claim-from-template rate is not measured), all created at once; pods/s until every pod is bound",
        _gated_side("draco (every controller) + kube-scheduler 1.34, gated pods", dr),
        _gated_side("kube-scheduler 1.37 alone, no gate, draco off", up),
        f"  ratio draco / kube-scheduler: {_x(ratio)} (targets: >= 50 pods/s, >= 2x)",
        _gated_side("floor: bare client, same requests, no decisions + kube-scheduler 1.34", fl),
        f"  ratio draco / floor: {_x(to_floor)} (the control plane's own speed for this flow here)",
    ]
    load = " / ".join(s["load"] for s in (ok_dr, ok_up) if s)
    rows = [{"scenario": f"cluster_scale: gated flow, {pods} pods, pre-created claims",
             "draco_s": ok_dr and ok_dr["seconds"], "baseline_s": ok_up and ok_up["seconds"],
             "ratio": ratio, "draco_pods_per_s": ok_dr and ok_dr["rate"],
             "upstream_pods_per_s": ok_up and ok_up["rate"], "load": load,
             "note": (f"draco 1.34 {ok_dr['rate'] if ok_dr else float('nan'):.1f} pods/s vs "
                      f"kube-scheduler 1.37 {ok_up['rate'] if ok_up else float('nan'):.1f} pods/s; "
                      f"ratio = draco's rate / upstream's (target >= 2, and >= 50 pods/s); load {load}")}]
    if ok_fl:
        rows.append({"scenario": f"cluster_scale: gated flow, {pods} pods, bare client (floor)",
                     "draco_s": ok_dr and ok_dr["seconds"], "baseline_s": ok_fl["seconds"],
                     "ratio": to_floor, "floor_pods_per_s": ok_fl["rate"], "load": ok_fl["load"],
                     "note": "the control plane's own speed for the same requests on this machine"})
    return lines, rows


def report(results: dict[str, Any], sizes: dict[str, Any], quick: bool) -> tuple[str, list[dict[str, Any]]]:
    """The printed table and the JSON rows for RESULTS (parts that did not run are left out)."""
    lines = [f"cluster_scale ({'quick' if quick else 'full'} sizes): draco's cost at cluster size"]
    rows: list[dict[str, Any]] = []
    for name, render in (("plain", lambda r: _plain(r, sizes)), ("dra", _dra), ("gated", _gated)):
        if name in results:
            part_lines, part_rows = render(results[name])
            lines += ["", *part_lines]
            rows += part_rows
    for key, error in results.items():
        if key.endswith("_error"):
            lines += ["", f"{key[:-6]}: FAILED: {error}"]
            rows.append({"scenario": f"cluster_scale: {key[:-6]} FAILED", "draco_s": None,
                         "baseline_s": None, "ratio": None, "note": error})
    return "\n".join(lines) + "\n", rows
