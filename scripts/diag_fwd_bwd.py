import torch, triton, os
from flashtile import flash_attn_func
from flashtile.bench.backends import get_backend
torch.manual_seed(0)
for (B,S,H,D,c) in [(16,1024,16,128,True),(16,1024,16,128,False),(4,4096,16,128,True)]:
    q,k,v = (torch.randn(B,S,H,D,device="cuda",dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    be = get_backend("flashtile")(q.detach(),k.detach(),v.detach(),c, dout=torch.randn(B,S,H,D,device="cuda",dtype=torch.bfloat16))
    fb = triton.testing.do_bench(be.fwd_bwd, warmup=25, rep=100, return_mode="median")
    f = triton.testing.do_bench(be.fwd, warmup=25, rep=100, return_mode="median")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA, torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(3): be.fwd_bwd()
        torch.cuda.synchronize()
    print(B,S,H,D,c, f"fwd {f*1e3:.0f} us fwd+bwd {fb*1e3:.0f} us")
    print(prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=8, max_name_column_width=50))
