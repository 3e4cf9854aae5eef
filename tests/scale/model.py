#!/usr/bin/env python3
"""A discrete-event model of a tfenc-batch job on 1 to 1,000 ranks.

usage: model.py CALIBRATION.json [--documents N] [--ranks 1,10,100,1000]
                [--fs-write-gbps G] [--fs-syncs-per-s S] [--network-atomic-us U]

CALIBRATION.json (tests/scale/calibrate.sh writes it) holds what was
measured on this machine: the encoding time of one window (real
all-MiniLM-L6-v2, real text), the work queue's counter round trip, the time
to write a window's rows with parallel HDF5 and to flush its metadata, the
bytes per document of the corpus and the rate at which one rank reads and
checks the corpus. What this machine cannot show (a cluster file system's
aggregate bandwidth and sync rate, a network atomic) are parameters with
defaults stated in docs/scale.md.

Each rank, as in core/run/run.c: takes a window from the counter (one server at
rank 0, first come first served: a fetch-and-add occupies it for the
atomic's time), encodes it (the measured time, varied per window and per
node), writes its rows (the file system is one server of the aggregate
bandwidth; a rank's own write cannot beat its measured rate), and every
second flushes its metadata (one fdatasync, served by the file system at
its sync rate). Before that every rank reads and checks its share of the
corpus, and the ranks fingerprint it (both limited by the file system's
bandwidth); at the end the last windows finish (the tail).

It prints, for each rank count, the predicted wall time, throughput,
efficiency against R x one rank's rate, each resource's utilisation, and
the first bottleneck: the resource that costs the most efficiency.
"""
import argparse
import heapq
import json
import math
import random


def window_sizes(documents, width):
    """The windows' sizes as core/input/windows.c cuts them: W documents, then
    toward the end 1/1024 of what is left, a multiple of the grain
    (ceil(W / 64), at least 32, at most W), between the grain and W."""
    grain = min(max(-(-width // 64), 32), width)
    sizes, at = [], 0
    while at < documents:
        left = documents - at
        size = min(max(left // 1024 // grain * grain, grain), width)
        sizes.append(min(size, left))
        at += sizes[-1]
    return sizes


def simulate(cal, ranks, documents, fs_write_bps, fs_syncs_per_s, atomic_s, seed=1):
    rng = random.Random(seed)
    window = cal["window_documents"]
    # Full windows are all alike: only the tapering tail is listed.
    full = max(0, documents - 2048 * window) // window
    tail = window_sizes(documents - full * window, window)
    n_windows = full + len(tail)
    compute = cal["window_compute_s"]
    write_bytes = cal["window_bytes"]
    # A rank's own write rate as measured here; the file system's aggregate
    # caps the sum.
    rank_write_bps = write_bytes / cal["window_write_s"]
    # A sync occupies the file system for 1 / its sync rate (syncs of many
    # clients proceed side by side); the writer waits the latency measured.
    sync_occupancy = 1.0 / fs_syncs_per_s
    sync_latency = cal["metadata_flush_s"]
    counter_s = max(cal["counter_round_trip_s"], atomic_s if ranks > 1 else 0.0)

    # Startup: read and check the corpus once (pass 0), then fingerprint it
    # (hashing), both spread over the ranks and capped by the file system.
    corpus_bytes = documents * cal["corpus_bytes_per_document"]
    read_bps = min(ranks * cal["scan_bytes_per_s"], fs_write_bps * 2)
    hash_bps = min(ranks * cal["hash_bytes_per_s"], fs_write_bps * 2)
    startup = corpus_bytes / read_bps + corpus_bytes / hash_bps + cal["fixed_startup_s"]

    # Node speeds differ a little (a heterogeneous or busy cluster), and
    # windows differ in tokens.
    # (lognormal with mean 1: no systematic speed-up)
    def around_one(cv):
        return rng.lognormvariate(-cv * cv / 2, cv)
    node_speed = [around_one(cal["rank_speed_cv"]) for _ in range(ranks)]
    counter_free = 0.0
    fs_write_free = 0.0
    fs_sync_free = 0.0
    counter_busy = fs_write_busy = fs_sync_busy = 0.0
    # Rank-seconds lost waiting for each shared resource.
    counter_wait = fs_write_wait = fs_sync_wait = 0.0
    first_idle = None
    next_window = 0
    events = [(startup, r, "take") for r in range(ranks)]
    last_flush = [startup] * ranks
    finish = startup
    heapq.heapify(events)
    while events:
        t, r, what = heapq.heappop(events)
        if what == "take":
            start = max(t, counter_free)
            counter_free = start + counter_s
            counter_busy += counter_s
            counter_wait += start - t
            if next_window >= n_windows:
                finish = max(finish, counter_free)
                if first_idle is None:
                    first_idle = counter_free
                continue
            share = 1.0 if next_window < full else tail[next_window - full] / window
            next_window += 1
            cost = share * compute * around_one(cal["window_compute_cv"]) / node_speed[r]
            heapq.heappush(events, (counter_free + cost, r, ("write", share)))
        else:
            # The file system serves writes in turn at its aggregate rate;
            # a rank's own write takes at least its measured time.
            share = what[1]
            own = share * write_bytes / rank_write_bps
            shared = share * write_bytes / fs_write_bps
            fs_write_free = max(fs_write_free, t) + shared
            fs_write_busy += shared
            done = max(t + own, fs_write_free)
            fs_write_wait += done - (t + own)
            # The writer's group interval: a second, stretched past 1,000
            # writers so that the job asks for ~1,000 syncs a second at most.
            if done - last_flush[r] >= max(1.0, ranks / 1000.0):
                s = max(done, fs_sync_free)
                fs_sync_free = s + sync_occupancy
                fs_sync_busy += sync_occupancy
                fs_sync_wait += s - done
                done = s + max(sync_latency, sync_occupancy)
                last_flush[r] = done
            heapq.heappush(events, (done, r, "take"))
    wall = finish
    # The ideal: every window's encoding spread over the ranks in proportion
    # to their speeds, nothing else.
    ideal = documents / window * compute / sum(node_speed)
    return {
        "ranks": ranks, "wall_s": wall, "documents_per_s": documents / wall,
        "efficiency": ideal / wall, "startup_s": startup,
        "counter_utilisation": counter_busy / wall,
        "fs_write_utilisation": fs_write_busy / wall,
        "fs_sync_utilisation": fs_sync_busy / wall,
        # Where the lost efficiency goes, in seconds of the wall time.
        "losses": {"startup (reading, checking, fingerprinting the corpus)": startup,
                   "the tail (ranks idle while the last windows finish)":
                       finish - (first_idle if first_idle is not None else finish),
                   "waiting for the counter": counter_wait / ranks,
                   "waiting for file system bandwidth": fs_write_wait / ranks,
                   "waiting for file system syncs": fs_sync_wait / ranks},
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("calibration")
    parser.add_argument("--documents", type=int, default=100_000_000)
    parser.add_argument("--ranks", default="1,10,100,1000")
    parser.add_argument("--fs-write-gbps", type=float, default=10.0,
                        help="the file system's aggregate write bandwidth, GB/s")
    parser.add_argument("--fs-syncs-per-s", type=float, default=5000.0,
                        help="fdatasync calls the file system serves per second, in all")
    parser.add_argument("--network-atomic-us", type=float, default=5.0,
                        help="an MPI fetch-and-add across the network, microseconds")
    args = parser.parse_args()
    with open(args.calibration) as f:
        cal = json.load(f)
    cal.setdefault("window_compute_cv", 0.10)
    cal.setdefault("rank_speed_cv", 0.05)
    cal.setdefault("fixed_startup_s", 2.0)
    fs = args.fs_write_gbps * 1e9
    print(f"model: {args.documents:,} documents in windows of {cal['window_documents']}; "
          f"one window {cal['window_compute_s']:.2f} s to encode on one rank "
          f"({cal['window_bytes'] / 1e6:.1f} MB of rows); calibration {args.calibration}")
    print(f"model: measured here: counter round trip {cal['counter_round_trip_s'] * 1e6:.1f} us, "
          f"window write {cal['window_write_s'] * 1e3:.1f} ms, metadata flush "
          f"{cal['metadata_flush_s'] * 1e3:.1f} ms, corpus scan "
          f"{cal['scan_bytes_per_s'] / 1e6:.0f} MB/s and hash {cal['hash_bytes_per_s'] / 1e6:.0f} "
          f"MB/s per rank")
    print(f"model: assumed (a cluster): file system {args.fs_write_gbps:g} GB/s and "
          f"{args.fs_syncs_per_s:g} syncs/s in all, network atomic {args.network_atomic_us:g} us")
    print(f"{'ranks':>6} {'wall s':>10} {'docs/s':>12} {'efficiency':>10} {'startup s':>10} "
          f"{'counter':>8} {'fs write':>9} {'fs sync':>8}")
    results = []
    for ranks in (int(x) for x in args.ranks.split(",")):
        r = simulate(cal, ranks, args.documents, fs, args.fs_syncs_per_s,
                     args.network_atomic_us * 1e-6)
        results.append(r)
        print(f"{ranks:>6} {r['wall_s']:>10.1f} {r['documents_per_s']:>12.0f} "
              f"{100 * r['efficiency']:>9.1f}% {r['startup_s']:>10.1f} "
              f"{100 * r['counter_utilisation']:>7.2f}% {100 * r['fs_write_utilisation']:>8.2f}% "
              f"{100 * r['fs_sync_utilisation']:>7.2f}%")
    n_windows = math.ceil(args.documents / cal["window_documents"])
    for r in results:
        if r["ranks"] == 1:
            continue
        losses = r["losses"]
        first = max(losses, key=losses.get)
        print(f"model: {r['ranks']} ranks ({n_windows / r['ranks']:.0f} windows each): "
              f"the largest loss is {first}, {losses[first]:.1f} s of {r['wall_s']:.0f} s; "
              + ", ".join(f"{k.split(' (')[0]} {v:.1f} s" for k, v in losses.items()
                          if k != first))


if __name__ == "__main__":
    main()
