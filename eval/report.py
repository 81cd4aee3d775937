"""The evaluation report: ``report.md``, a self-contained ``report.html`` (plots embedded as PNG,
no network needed), the plots as files, ``results.json`` and a TensorBoard run.

Plots:
- ``returns.png``: imagined against real normalized score, one point per policy, the identity
  line, and the correlations in the title;
- ``horizon.png``: state error against horizon (median, 25-75% and 10-90% bands), open loop
  (dataset actions replayed) and closed loop (each policy in the model against the simulator);
- ``ranks.png``: each policy's rank in the model against its rank in the simulator.
"""

from __future__ import annotations

import base64
import html
import io
import json
from pathlib import Path

import numpy as np

from envs.atomic_io import atomic_path, write_text

METRIC_LABELS = {"pearson": "Pearson r", "spearman": "Spearman ρ", "kendall": "Kendall τ", "mmrv": "MMRV",
                 "abs_error": "mean abs. error of S against R"}


def _label(name: str) -> str:
    return METRIC_LABELS.get(name, name)


def _fmt_ci(m: dict) -> str:
    return f"{m['value']:.3f} [{m['low']:.3f}, {m['high']:.3f}]"


LOCOMOTION = {"score": "normalized score", "error": "state error (mean |Δ| in data std units)",
              "policies": "Per policy (D4RL-normalized scores)",
              "scale": "MMRV, regret and error are on the normalized return (D4RL score / 100: 0 random, 1 expert)."}


def _figures(result: dict) -> dict[str, bytes]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pol = result["policies"]
    lab = {**LOCOMOTION, **result.get("labels", {})}
    S = np.array([p["imagined_score"] for p in pol])
    R = np.array([p["real_score"] for p in pol])
    rk = result.get("ranking", {})
    figs = {}

    fig, ax = plt.subplots(figsize=(5.2, 5))
    lo, hi = float(min(S.min(), R.min())), float(max(S.max(), R.max()))
    pad = 0.05 * (hi - lo or 1.0)
    ax.plot([lo - pad, hi + pad], [lo - pad, hi + pad], color="0.6", lw=1, ls="--", label="identity")
    ax.scatter(R, S, s=28, color="tab:blue", zorder=3)
    for p in pol:
        ax.annotate(p["policy"], (p["real_score"], p["imagined_score"]), fontsize=6, xytext=(3, 2),
                    textcoords="offset points", color="0.3")
    ax.set_xlabel(f"simulator (real) {lab['score']}")
    ax.set_ylabel(f"world-model (imagined) {lab['score']}")
    if rk:
        ax.set_title(f"Pearson {rk['pearson']['value']:.2f}  Spearman {rk['spearman']['value']:.2f}  "
                     f"Kendall {rk['kendall']['value']:.2f}  MMRV {rk['mmrv']['value']:.3f}", fontsize=9)
    ax.legend(loc="upper left", fontsize=8)
    ax.grid(alpha=0.3)
    figs["returns.png"] = _png(fig, plt)

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for key, color, label in (("open_loop", "tab:green", "open loop (dataset actions)"),
                              ("closed_loop", "tab:orange", "closed loop (policies)")):
        if key not in result:
            continue
        e = result[key]["error"]
        t = np.array(e["step"])
        ax.fill_between(t, e["q10"], e["q90"], color=color, alpha=0.12, lw=0)
        ax.fill_between(t, e["q25"], e["q75"], color=color, alpha=0.25, lw=0)
        ax.plot(t, e["q50"], color=color, lw=1.6, label=f"{label}: median, 25–75%, 10–90%")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("step of the rollout")
    ax.set_ylabel(lab["error"])
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, which="both")
    figs["horizon.png"] = _png(fig, plt)

    fig, ax = plt.subplots(figsize=(5, 5))
    n = len(pol)
    rank_s = np.argsort(np.argsort(-S)) + 1
    rank_r = np.argsort(np.argsort(-R)) + 1
    ax.plot([1, n], [1, n], color="0.6", lw=1, ls="--")
    ax.scatter(rank_r, rank_s, s=28, color="tab:purple", zorder=3)
    for p, a, b in zip(pol, rank_r, rank_s):
        ax.annotate(p["policy"], (a, b), fontsize=6, xytext=(3, 2), textcoords="offset points", color="0.3")
    ax.set_xlabel("rank in the simulator (1 = best)")
    ax.set_ylabel("rank in the world model (1 = best)")
    ax.invert_xaxis()
    ax.invert_yaxis()
    ax.grid(alpha=0.3)
    figs["ranks.png"] = _png(fig, plt)
    return figs


def _png(fig, plt) -> bytes:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()


def _tables(result: dict) -> tuple[list[list[str]], list[list[str]], list[list[str]]]:
    metric_rows = [[_label(k), f"{m['value']:.3f}", f"[{m['low']:.3f}, {m['high']:.3f}]"]
                   for k, m in result.get("ranking", {}).items()]
    policy_rows = [[p["policy"], p["kind"], f"{p['real_score']:.1f}", f"{p['imagined_score']:.1f}",
                    f"{p['imagined_score'] - p['real_score']:+.1f}", f"{p['real_length']:.0f}",
                    f"{p['imagined_length']:.0f}", f"{p['nonfinite_rows']} / {p.get('diverged_rows', 0)}"]
                   for p in result["policies"]]
    model_rows = []
    if "open_loop" in result:
        ol = result["open_loop"]
        for s, m in ol["median_error_at"].items():
            model_rows.append([f"open-loop median error at step {s}", _fmt_ci(m) if "samples" in m else "n/a"])
        if "calibration" in ol:
            model_rows.append(["open-loop calibration (Spearman: uncertainty vs error)", f"{ol['calibration']:.3f}"])
    if "closed_loop" in result:
        cl = result["closed_loop"]
        for s, m in cl.get("median_error_at", {}).items():
            model_rows.append([f"closed-loop median error at step {s}", _fmt_ci(m) if "samples" in m else "n/a"])
        model_rows += [["closed-loop calibration (Spearman: uncertainty vs error)", f"{cl['calibration']:.3f}"],
                       ["kinematic error, imagined (mean abs. of x[t+1] − 2x[t] + x[t−1])",
                        f"{cl['kinematic_imagined']:.4f}"],
                       ["kinematic error, simulator", f"{cl['kinematic_real']:.4f}"]]
    model_rows += result.get("model_rows", [])
    return metric_rows, policy_rows, model_rows


POLICY_HEAD = ["policy", "kind", "real score", "imagined score", "imagined − real", "real length",
               "imagined length", "NaN / diverged rows"]


def _md_table(head: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + ["| " + " | ".join(r) + " |" for r in rows]


def _html_table(head: list[str], rows: list[list[str]]) -> str:
    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def write_report(result: dict, out: Path, header: str, log=None, extra_figures: dict[str, bytes] | None = None,
                 extra_heading: str = "Frames") -> Path:
    """Write the report folder's files (each atomically) and, with ``log``, TensorBoard scalars.
    ``extra_figures`` (PNG bytes by file name) are written too and shown under ``extra_heading``."""
    out.mkdir(parents=True, exist_ok=True)
    lab = {**LOCOMOTION, **result.get("labels", {})}
    figs = _figures(result)
    extra = dict(extra_figures or {})
    for name, data in {**figs, **extra}.items():
        with atomic_path(out / name, suffix=".png") as tmp:
            Path(tmp).write_bytes(data)
    metric_rows, policy_rows, model_rows = _tables(result)
    title = f"World-model policy evaluation: {result['task']}"
    md = [f"# {title}", "", header, "", "## How far the imagined ranking can be trusted", "",
          f"{len(result['policies'])} policies; 95% bootstrap intervals over policies. {lab['scale']}", ""]
    md += _md_table(["metric", "value", "95% interval"], metric_rows)
    md += ["", "![imagined against real](returns.png) ![rank against rank](ranks.png)", "",
           f"## {lab['policies']}", ""] + _md_table(POLICY_HEAD, policy_rows)
    md += ["", "## The model over rollouts", ""] + _md_table(["figure", "value"], model_rows)
    md += ["", "![error against horizon](horizon.png)", ""]
    if extra:
        md += [f"## {extra_heading}", ""] + [f"![{k}]({k})" for k in extra] + [""]
    write_text(out / "report.md", "\n".join(md))

    imgs = {k: base64.b64encode(v).decode() for k, v in figs.items()}
    extra_html = "".join([f"<h2>{html.escape(extra_heading)}</h2>"] + [
        f'<div><img alt="{html.escape(k)}" src="data:image/png;base64,{base64.b64encode(v).decode()}"></div>'
        for k, v in extra.items()]) if extra else ""
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 1100px; margin: 2em auto; color: #222; }}
table {{ border-collapse: collapse; margin: 0.6em 0 1.4em; font-size: 0.9em; }}
th, td {{ border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }}
th {{ background: #f3f3f3; }} td:first-child, th:first-child {{ text-align: left; }}
.figs img {{ max-width: 49%; }} p.header {{ color: #555; }}
</style></head><body>
<h1>{html.escape(title)}</h1>
<p class="header">{html.escape(header)}</p>
<h2>How far the imagined ranking can be trusted</h2>
<p>{len(result['policies'])} policies; 95% bootstrap intervals over policies. {html.escape(lab['scale'])}</p>
{_html_table(["metric", "value", "95% interval"], metric_rows)}
<div class="figs"><img alt="imagined against real" src="data:image/png;base64,{imgs['returns.png']}">
<img alt="rank against rank" src="data:image/png;base64,{imgs['ranks.png']}"></div>
<h2>{html.escape(lab['policies'])}</h2>
{_html_table(POLICY_HEAD, policy_rows)}
<h2>The model over rollouts</h2>
{_html_table(["figure", "value"], model_rows)}
<div class="figs"><img alt="error against horizon" src="data:image/png;base64,{imgs['horizon.png']}"></div>
{extra_html}
</body></html>
"""
    write_text(out / "report.html", page)
    write_text(out / "results.json", json.dumps(result, indent=2, default=float))
    if log is not None:
        log({f"rank/{k}": m["value"] for k, m in result.get("ranking", {}).items()})
        for p in result["policies"]:
            log({f"policy/{p['policy']}/real_score": p["real_score"],
                 f"policy/{p['policy']}/imagined_score": p["imagined_score"]})
        for key in ("open_loop", "closed_loop"):
            if key in result:
                e = result[key]["error"]
                for t, med in zip(e["step"], e["q50"]):
                    if np.isfinite(med):
                        log({f"{key}/median_state_error": med}, t)
    return out / "report.html"
