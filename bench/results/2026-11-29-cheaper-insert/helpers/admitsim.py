#!/usr/bin/env python3
"""The admission rule simulated on the two hot sets (requests uniformly at random over F files, a cache of
15,648): net us per request saved, with an insert at I and a hit saving S. python3 admitsim.py"""
import random
I, S = 7.0, 2.0
def sim_ad(F, N, cap=15648, earn=3, wary=6, bootf=8, seed=1):
    rnd = random.Random(seed); cnt = {}; cache = set(); ins = hits = 0
    boot = max(64, cap // bootf)
    for i in range(N):
        f = rnd.randrange(F)
        if f in cache: hits += 1; continue
        cnt[f] = cnt.get(f, 0) + 1
        k = 2 if ins < boot or hits >= earn * ins else wary
        if cnt[f] >= k and len(cache) < cap:
            cache.add(f); ins += 1
    return (hits * S - ins * I) / N
for earn, wary, bootf in ((99, 2, 1), (3, 6, 8), (2, 6, 8), (1, 6, 8), (2, 4, 8), (1, 4, 8), (2, 6, 4), (1, 6, 4)):
    r = [sim_ad(F, N, earn=earn, wary=wary, bootf=bootf) for F in (20000, 15000) for N in (50000, 300000)]
    print(f"earn={earn} wary={wary} boot=cap/{bootf}: 2g 50k {r[0]:+.2f} 300k {r[1]:+.2f} | pop 50k {r[2]:+.2f} 300k {r[3]:+.2f}")
