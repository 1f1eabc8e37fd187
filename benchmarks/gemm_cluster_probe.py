import os, sys, torch
os.environ.setdefault("TILECRAFT_TUNE","0")
from dataclasses import replace
from tilecraft.bench import gemm as bench
from tilecraft.hardware.device import detect
from tilecraft.tuning.gemm import GemmConfig as T
info=detect()
items=[]
g64=T("gluon",64,128,64,8,4,4); g256=T("gluon",128,256,64,8,8,4)
for dt,m,n,k,lay,c in [("bf16",1000,1000,1000,"NT",g64),("bf16",1000,1000,1000,"TT",g64),("bf16",8192,8192,8192,"NT",g256),("bf16",4096,4096,4096,"NT",g256)]:
    case=bench.Case(dt,m,n,k,lay)
    pm=None
    for rep in range(2):
        for cc in (replace(c,cluster_m=2), c):
            r=bench.run_case(case, info, cfg=cc, budget_s=0.2, peer_ms=pm)
            pm=r.extra["peer_time_ms"]
            print(f"{case.name:26s} {cc.short():32s} ours {r.ours:7.1f} peer {r.peer_value:7.1f} x{r.ratio:.3f} t {r.extra['time_ms']*1e3:.2f}us", flush=True)
