"""MoE layers under CUDA graphs and H2D copy bursts on a CUDA GPU (docs/moe_offload.md).

Run as is (terse on purpose: the device tool takes a command of at most 2,000 characters, so it
was sent zlib+base64-compressed in a ``python3 -c`` on 2026-12-02, one call, ~22 s wall on the
lent H200) with ``OUT=dir python3 scripts/measure_moe_graph.py``; writes ``$OUT/moe_graph.csv``
(committed as ``validation/h200_moe_graph_measured.csv``). Per (run, shape, tokens n, distinct
experts u): a routing of n tokens x top-8 over u experts (seeded per run), then

* ``fused_grouped_mm``: sort by expert, gather, ``torch._grouped_mm`` (gate-up) over all experts'
  weights in place (empty groups for experts not hit), SwiGLU, ``torch._grouped_mm`` (down),
  ``index_add_`` combine;
* ``per_expert_loop``: per hit expert a gather, two GEMMs, SwiGLU, ``index_add_``;

both captured in one CUDA graph over R = 4 layers (distinct weights, so no layer's weights stay in
L2), replayed 10 x 5 times, median per layer. ``h2d_burst``: n expert-sized pinned copies on one
stream, CUDA events, median of 7. The MoEfied FFN width 140 is padded to 144 (16-byte alignment
of the grouped GEMM).
"""
import torch,torch.nn.functional as F,os,time
d='cuda';b=torch.bfloat16;R=4;k=8
S={'qwen3-30b-a3b':(2048,768,128),'moefied-qwen2.5-coder-1.5b-e64':(1536,144,64)}
out=open(os.environ.get('OUT','.')+'/moe_graph.csv','w')
def P(*a):
 s=','.join(str(x) for x in a);print(s);out.write(s+'\n');out.flush()
P('run','model','kind','n_tokens','distinct_experts','bytes','n_copies','latency_s')
def route(n,u,E,g):
 p=torch.randperm(E,generator=g)[:u].tolist()
 return torch.tensor([[p[(t*k+j)%u] for j in range(k)] for t in range(n)])
def fused(W,e):
 fl=e.flatten();o=torch.argsort(fl,stable=True);tok=(o//k).to(d)
 offs=torch.cumsum(torch.bincount(fl[o],minlength=W[0][0].shape[0]),0).to(torch.int32).to(d)
 def f(x):
  y=torch.zeros_like(x)
  for W1,W2 in W:
   h=torch._grouped_mm(x.index_select(0,tok),W1,offs=offs);m=h.shape[1]//2
   y.index_add_(0,tok,torch._grouped_mm(F.silu(h[:,:m])*h[:,m:],W2,offs=offs))
  return y
 return f
def loop(W,e):
 ix=[(j,(e==j).any(1).nonzero().flatten().to(d)) for j in sorted(set(e.flatten().tolist()))]
 def f(x):
  y=torch.zeros_like(x)
  for W1,W2 in W:
   for j,i in ix:
    h=x.index_select(0,i)@W1[j];m=h.shape[1]//2;y.index_add_(0,i,(F.silu(h[:,:m])*h[:,m:])@W2[j])
  return y
 return f
def tg(f,x,reps=10):
 s=torch.cuda.Stream();s.wait_stream(torch.cuda.current_stream())
 with torch.cuda.stream(s):
  for _ in range(2):f(x)
 torch.cuda.current_stream().wait_stream(s);g=torch.cuda.CUDAGraph()
 with torch.cuda.graph(g):f(x)
 a,c=torch.cuda.Event(enable_timing=True),torch.cuda.Event(enable_timing=True);ts=[]
 for _ in range(5):
  a.record()
  for _ in range(reps):g.replay()
  c.record();c.synchronize();ts.append(a.elapsed_time(c)/reps*1e-3)
 return sorted(ts)[2]
T0=time.time()
m_=torch.randn(8192,8192,device=d,dtype=b)
while time.time()-T0<1.5:m_@m_
torch.cuda.synchronize();del m_
for run in (1,2):
 g=torch.Generator().manual_seed(run)
 for nm,(D,Fh,E) in S.items():
  W=[(torch.randn(E,2*Fh,D,device=d,dtype=b).mul_(.02).transpose(1,2),torch.randn(E,D,Fh,device=d,dtype=b).mul_(.02).transpose(1,2)) for _ in range(R)]
  eb=3*D*Fh*2
  for n in (1,4,16,64):
   for u in (8,16,32,64,128):
    if u>E or u>n*k:continue
    e=route(n,u,E,g);x=torch.randn(n,D,device=d,dtype=b)
    for kn,mk in (('fused_grouped_mm',fused),('per_expert_loop',loop)):
     try:P(run,nm,kn,n,u,eb,'',tg(mk(W,e),x)/R)
     except Exception as ex:print('ERR',kn,nm,n,u,repr(ex)[:200])
  del W;torch.cuda.empty_cache()
  h=torch.empty(64*eb,dtype=torch.uint8,pin_memory=True);gd=torch.empty_like(h,device=d)
  for n in (1,8,32,64):
   def cp():
    for i in range(n):gd[i*eb:(i+1)*eb].copy_(h[i*eb:(i+1)*eb],non_blocking=True)
   a,c=torch.cuda.Event(enable_timing=True),torch.cuda.Event(enable_timing=True);ts=[]
   for _ in range(7):
    torch.cuda.synchronize();a.record();cp();c.record();c.synchronize();ts.append(a.elapsed_time(c)*1e-3)
   P(run,nm,'h2d_burst','','',eb,n,sorted(ts)[3])
print('wall',time.time()-T0,torch.__version__,torch.cuda.get_device_name())
