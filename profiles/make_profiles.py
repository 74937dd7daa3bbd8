#!/usr/bin/env python3
"""Writes the shipped profiles from labelled figures (docs/planning.md, "Profiles").

    /usr/bin/python3 profiles/make_profiles.py [--base profiles/dev-zen3-2core.json]

- dev-zen3-2core.json: this project's 2-core VM. Kernel rates and the vector
  rate: `trillion calibrate` here (CPU time of one thread, so robust to the
  load of a shared machine). Bandwidth: its quiet STREAM-like figures (the
  calibrate run's wall-clock bandwidth was taken under a load of 15-20 on 2
  cores and is not representative).
- mac-studio-m2-ultra-192g.json, mac-studio-m3-ultra-512g.json: NOT measured by
  us. Memory, cores and memory bandwidth are Apple's published
  specifications; the CPU's attainable share of that bandwidth and the NEON
  kernel rates are estimates (how: in each figure's label).
- tb5-rdma.json, tb5-tcp.json: NOT measured by us; published figures as labelled.
"""
import argparse
import copy
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
ap = argparse.ArgumentParser()
ap.add_argument("--calibrated", default=None, help="a `trillion calibrate` profile of this VM (kernel rates)")
args = ap.parse_args()

GiB = 1 << 30
dev_path = os.path.join(HERE, "dev-zen3-2core.json")
if args.calibrated:
    dev = json.load(open(args.calibrated))
    h = dev["host"]
    h["name"] = "dev-zen3-2core"
    h["memory_bytes"] = 24 * GiB
    h["bandwidth_bytes_per_s"] = 30e9
    h["bandwidth_per_core_bytes_per_s"] = 18e9
    h["sources"]["memory_bytes"] = "published: the VM's 24 GiB"
    h["sources"]["bandwidth_bytes_per_s"] = ("measured here when quiet (bench_memory: 28-33 GB/s on 2 "
                                             "threads); calibrate's own figure was taken under heavy load")
    h["sources"]["bandwidth_per_core_bytes_per_s"] = "measured here when quiet (bench_memory: 17-19 GB/s on 1 thread)"
    dev["source"] = "this project's 2 vCPU AMD EPYC Zen 3 VM; kernel rates measured by trillion calibrate"
    json.dump(dev, open(dev_path, "w"), indent=2)
    print("wrote", dev_path)
dev = json.load(open(dev_path))
zen = dev["host"]

# Per-core FP32 FMA peak: Zen 3 2 x 256-bit FMA at ~3 GHz = 98 GFLOP/s (measured on
# that VM by bench_memory); Apple P-cores 4 x 128-bit FMA = 32 FLOP/cycle at their published clocks.
ZEN_PEAK = 98e9


# FP8 on the bf16 path (BFMMLA) against the f32 path (FMLA) on arm64, in
# instructions an output and 32-column group (bench/neon_loop_counts.py on
# the arm64 cross build, 2026-12-07): at 1 token f32 46.0, bf16 56.0 (its
# one-pair loop, half of it padding); at 2 f32 26.5, bf16 28.0; from 4
# tokens f32 26.5 and bf16 4.1 in its tile plus the panel widening's 2.5
# instructions a weight spread over the batch (80 / n).
def bf16_over_f32(batch):
    if batch == 1:
        return 46.0 / 56.0
    if batch == 2:
        return 26.5 / 28.0
    return 26.5 / (4.1 + 80.0 / batch)


def apple(name, mem_gib, p_cores, spec_bw, ghz, chip):
    peak = 32 * ghz * 1e9
    scale = peak / ZEN_PEAK
    h = {
        "name": name,
        "memory_bytes": mem_gib * GiB,
        "cores": p_cores,
        # AnandTech's M1 Max review measured the CPU cores at ~243 of 409.6 GB/s (59%) and one
        # P-core at ~102 GB/s; the Ultra is two Max dies. The same shares are assumed here.
        "bandwidth_bytes_per_s": 0.59 * spec_bw,
        "bandwidth_per_core_bytes_per_s": 100e9,
        "vector_flops_per_core": zen["vector_flops_per_core"] * scale,
        "dispatch_seconds": zen["dispatch_seconds"],
        "kernels": {k: {b: v * scale for b, v in r.items()} for k, r in zen["kernels"].items()},
        "sources": {
            "memory_bytes": f"published: Apple's {chip} specification ({mem_gib} GB unified memory)",
            "cores": f"published: Apple's {chip} specification ({p_cores} performance cores; threads default to them)",
            "bandwidth_bytes_per_s": f"estimated: 59% of Apple's published {spec_bw / 1e9:.0f} GB/s, the CPU share "
                                     "AnandTech measured on the M1 Max (243 of 409.6 GB/s); not measured by us",
            "bandwidth_per_core_bytes_per_s": "estimated: ~100 GB/s, AnandTech's one-core figure on the M1 Max; "
                                              "not measured by us",
            "vector_flops_per_core": f"estimated: this VM's measured rate x {scale:.2f} (P-core FP32 peak {peak / 1e9:.0f} "
                                     f"GFLOP/s = 4 x 128-bit FMA at {ghz} GHz, vs Zen 3's 98); not measured by us",
            "kernels": f"estimated: this VM's measured AVX2 kernel rates x {scale:.2f} (the same FP32 peak ratio), "
                       "assuming the NEON kernels reach the same fraction of peak; not measured by us",
            "dispatch_seconds": "estimated: this VM's measured figure; not measured by us",
            "kernels.fp8/bf16": "estimated: the fp8/f32 estimate x the ratio of instructions an output of the f32 "
                                "FMLA and bf16 BFMMLA loops (bench/neon_loop_counts.py: 0.82x at batch 1, 1.10x at "
                                "4, 4.0x at 32), assuming a core issues both at one rate; not measured by us",
        },
    }
    h["kernels"]["fp8/bf16"] = {b: v * bf16_over_f32(int(b)) for b, v in h["kernels"]["fp8/f32"].items()}
    return {"format": "trillion-profile/1", "host": h,
            "source": f"{chip}: published specifications and labelled estimates; nothing here is measured by us"}


profiles = {
    "mac-studio-m2-ultra-192g.json": apple("Mac Studio M2 Ultra 192 GB", 192, 16, 800e9, 3.5, "M2 Ultra"),
    "mac-studio-m3-ultra-512g.json": apple("Mac Studio M3 Ultra 512 GB", 512, 24, 819e9, 4.05, "M3 Ultra"),
    "tb5-rdma.json": {"format": "trillion-profile/1", "source": "published figures; not measured by us", "link": {
        "name": "Thunderbolt 5, RDMA (macOS 26.2)",
        "latency_s": 10e-6,
        "bandwidth_bytes_per_s": 8e9,
        "sources": {
            "latency_s": "estimated: reported RDMA-over-Thunderbolt latencies of 3-9 us (NetworkChuck; stabilise.io) "
                         "and Apple's 'under 50 us' (TN3205, as quoted by Jeff Geerling and adwaitx.com); a notified "
                         "put is two writes and a flush, so 10 us one way; not measured by us",
            "bandwidth_bytes_per_s": "estimated: 80% of Thunderbolt 5's 80 Gbit/s per direction (USB4 v2 "
                                     "specification), the share a TB4 bridge reached in iperf3 (16.4 of 20 Gbit/s, "
                                     "jiribrejcha.net); not measured by us"}}},
    "tb5-tcp.json": {"format": "trillion-profile/1", "source": "published figures; not measured by us", "link": {
        "name": "Thunderbolt 5 bridge, TCP (osc pt2pt + progress thread)",
        "latency_s": 200e-6,
        "bandwidth_bytes_per_s": 4e9,
        "sources": {
            "latency_s": "estimated: ~300 us over TCP between Macs (Jeff Geerling; Apple TN3205 as quoted), our RMA "
                         "over TCP across namespaces here ~100 us plus the progress thread's 100 us "
                         "interval; not measured by us",
            "bandwidth_bytes_per_s": "estimated: twice a TB4 bridge's iperf3 16.4 Gbit/s (jiribrejcha.net), ~32 Gbit/s; "
                                     "not measured by us"}}},
}
for name, p in profiles.items():
    json.dump(p, open(os.path.join(HERE, name), "w"), indent=2)
    print("wrote", os.path.join(HERE, name))
