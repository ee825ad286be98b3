#!/usr/bin/env python3
"""What a speed goal leaves for attention, from one run's own measurements.

Reads gpu_bench's JSON lines (the profiled phases of each pass: layer GEMMs, attention,
LayerNorm/gather, embedding, head, with the FLOPs and least LayerNorm bytes each executes) and
the PyTorch peer's JSON lines from the same run, and answers: to be RATIO x the best PyTorch
variant, how long may one pass take, and how fast would attention have to run in the time the
GEMMs, LayerNorms and the rest leave? Two budgets per pass:

  measured  GEMMs, LayerNorms, embedding, head and host gaps as measured in the pass;
  floor     GEMMs as measured (cuBLASLt, tuned, at the board's power cap), LayerNorms at the
            least bytes they must move at the HBM's spec bandwidth, no host gaps.

usage: bound.py BENCH.jsonl TORCH.jsonl|LOG... [--ratio 1.6] [--hbm-tbs 4.8]
       (lines not starting with '{' are skipped, so torch logs can be passed as they are)
"""
import argparse
import json


def lines(paths):
    for p in paths:
        with open(p) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    yield json.loads(line)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+")
    ap.add_argument("--ratio", type=float, default=1.6)
    ap.add_argument("--hbm-tbs", type=float, default=4.8, help="HBM bandwidth, TB/s (H200: 4.8)")
    ap.add_argument("--precision", default="fp16")
    a = ap.parse_args()
    recs = list(lines(a.files))
    ours = [r for r in recs if r.get("bench") == "gpu_bench" and r.get("precision") == a.precision
            and "att_exec_tflop" in r]
    peer = [r for r in recs if r.get("bench") == "torch_gpu_peer"]
    if not ours or not peer:
        raise SystemExit("bound.py: need gpu_bench lines (with att_exec_tflop) and torch_gpu_peer "
                         "lines")
    best = max(peer, key=lambda r: r["tickets_per_s"])
    mine = max(ours, key=lambda r: r["tickets_per_s"])
    tickets = mine["tickets"]
    target_s = tickets / (a.ratio * best["tickets_per_s"])
    print(f"best PyTorch: {best['variant']} at {best['budget']} tokens, "
          f"{best['tickets_per_s']:.0f} tickets/s; {a.ratio}x that is "
          f"{a.ratio * best['tickets_per_s']:.0f} tickets/s: a {tickets}-ticket pass in "
          f"{target_s * 1e3:.1f} ms")
    print(f"reclass now: {mine['tickets_per_s']:.0f} tickets/s at {mine['budget']} = "
          f"{mine['tickets_per_s'] / best['tickets_per_s']:.3f}x")
    out = {"bench": "bound", "ratio": a.ratio, "peer_best_tickets_per_s": best["tickets_per_s"],
           "target_ms": round(target_s * 1e3, 1), "budgets": []}
    for r in sorted(ours, key=lambda r: r["budget"]):
        wall = r["seconds"] * 1e3
        phases = r["ms_embed"] + r["ms_gemm"] + r["ms_attention"] + r["ms_norm"] + r["ms_head"]
        gaps = max(wall - phases, 0.0)
        norm_floor = r["norm_bytes"] / (a.hbm_tbs * 1e12) * 1e3
        att_now = r["att_exec_tflop"] / r["ms_attention"] * 1e3
        gemm_now = r["gemm_exec_tflop"] / r["ms_gemm"] * 1e3
        left_meas = target_s * 1e3 - r["ms_gemm"] - r["ms_norm"] - r["ms_embed"] - r["ms_head"] - gaps
        left_floor = target_s * 1e3 - r["ms_gemm"] - norm_floor - r["ms_embed"] - r["ms_head"]

        def need(ms):  # None: nothing left for attention at all
            return round(r["att_exec_tflop"] / ms * 1e3, 1) if ms > 0 else None

        def say(ms):
            return f"needs {need(ms):.0f} TFLOP/s" if ms > 0 else "impossible"

        print(f"budget {r['budget']}: pass {wall:.1f} ms = GEMM {r['ms_gemm']:.1f} "
              f"({gemm_now:.0f} TFLOP/s) + attention {r['ms_attention']:.1f} ({att_now:.0f} "
              f"TFLOP/s on {r['att_exec_tflop']:.2f} TFLOP) + LayerNorm/gather {r['ms_norm']:.1f} "
              f"(HBM floor {norm_floor:.1f} for {r['norm_bytes'] / 1e9:.0f} GB) + embed "
              f"{r['ms_embed']:.1f} + head {r['ms_head']:.1f} + gaps {gaps:.1f}")
        print(f"  for {a.ratio}x attention may take: measured rest {left_meas:.1f} ms -> "
              f"{say(left_meas)}; floor rest {left_floor:.1f} ms -> {say(left_floor)} "
              f"(now {att_now:.0f}); GEMMs alone are {r['ms_gemm'] / (target_s * 1e3):.0%} of "
              f"the {target_s * 1e3:.1f} ms")
        out["budgets"].append({
            "budget": r["budget"], "pass_ms": round(wall, 1), "ms_gemm": r["ms_gemm"],
            "ms_attention": r["ms_attention"], "ms_norm": r["ms_norm"],
            "norm_floor_ms": round(norm_floor, 1), "gaps_ms": round(gaps, 1),
            "att_tflops_now": round(att_now, 1),
            "att_ms_allowed_measured": round(left_meas, 1),
            "att_tflops_needed_measured": need(left_meas),
            "att_ms_allowed_floor": round(left_floor, 1),
            "att_tflops_needed_floor": need(left_floor)})
    print(json.dumps(out))


if __name__ == "__main__":
    main()
