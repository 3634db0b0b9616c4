"""N copies of the same AHASD window loop at once: per-copy CPU time vs alone."""
import os, sys, time, multiprocessing as mp
def work(q):
    from ahasd_sim.config import load_config
    from ahasd_sim.simulation import load_run_trace, run_simulation
    cfg = load_config('hw_configs/ahasd_mobile.yaml', ['run.mode=ahasd', 'run.generated_tokens=1024', 'run.windows=1', 'run.timeline=false', 'pim.partition_policy=striped'])
    tr = load_run_trace(cfg); run_simulation(cfg, tr)
    q.get()
    t = time.process_time(); w = time.perf_counter()
    for _ in range(15): run_simulation(cfg, tr)
    return time.process_time() - t, time.perf_counter() - w
def spin(q):
    q.get(); t = time.process_time(); w = time.perf_counter(); x = 0
    for i in range(20_000_000): x += i
    return time.process_time() - t, time.perf_counter() - w
if __name__ == '__main__':
    ctx = mp.get_context('fork')
    for fn in (work, spin):
        for n in (1, 8, 16):
            m = ctx.Manager(); q = m.Queue()
            with ctx.Pool(n) as pool:
                rs = [pool.apply_async(fn, (q,)) for _ in range(n)]
                time.sleep(3)
                for _ in range(n): q.put(1)
                res = [r.get() for r in rs]
            cpu = [r[0] for r in res]; wall = [r[1] for r in res]
            print(fn.__name__, n, 'cpu mean %.2f min %.2f max %.2f' % (sum(cpu)/n, min(cpu), max(cpu)), 'wall mean %.2f' % (sum(wall)/n))
