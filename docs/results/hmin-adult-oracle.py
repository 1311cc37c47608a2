"""Independent check of HeuristicMin's Adult answer (docs/results/hmin.md).

Enumerates every cut of sex, race, marital-status and education (1,640
combinations) and, for each, the best cut of age by dynamic programming over
the age interval tree (5-, 10-, 20-year bins, as in configs/adult.toml), with
<all QIs, k>; prints the largest number of distinct rows. Plain Python and
pyarrow, sharing no code with the engine.

    python3 docs/results/hmin-adult-oracle.py 10
"""
import pyarrow.parquet as pq, itertools, collections, time, sys
t=pq.read_table('data/adult/adult.parquet')
cols=['age','sex','race','marital-status','education']
data=[t.column(c).to_pylist() for c in cols]
N=len(data[0])
K=int(sys.argv[1]) if len(sys.argv)>1 else 10
def load(name):
    paths=[l.strip().split(';') for l in open(f'data/adult/hierarchies/{name}.csv') if l.strip()]
    return {p[0]:p for p in paths}
H={c:load(c) for c in cols[1:]}
def cuts_of(paths):
    height=len(next(iter(paths.values())))-1
    children=collections.defaultdict(list)
    for leaf,p in paths.items():
        for j in range(height):
            node=(j,p[j]); par=(j+1,p[j+1])
            if node not in children[par]: children[par].append(node)
    root=(height,next(iter(paths.values()))[height])
    def cuts(n):
        if n[0]==0: return [[n]]
        combos=[[]]
        for c in children[n]:
            combos=[a+b for a in combos for b in cuts(c)]
        return [[n]]+combos
    out=[]
    for cut in cuts(root):
        m={}
        for leaf,p in paths.items():
            for j in range(height+1):
                if (j,p[j]) in cut: m[leaf]=(j,p[j]); break
        out.append(m)
    return out
C={c:cuts_of(H[c]) for c in cols[1:]}
W=[1,5,10,20]
def aid(a,l): return a//W[l] if l<4 else 0
base=collections.Counter(zip(*data))
print(N,{c:len(v) for c,v in C.items()},'classes',len(base))
best=(-1,None); t0=time.time()
for combo in itertools.product(*[range(len(C[c])) for c in cols[1:]]):
    maps=[C[c][i] for c,i in zip(cols[1:],combo)]
    groups=[collections.defaultdict(collections.Counter) for _ in range(5)]
    for (a,*rest),n in base.items():
        r=tuple(m[v] for m,v in zip(maps,rest))
        for l in range(5): groups[l][aid(a,l)][r]+=n
    val={}
    for l in range(5):
        for idx,g in groups[l].items():
            coll=len(g) if min(g.values())>=K else None
            if l==0: val[(0,idx)]=coll; continue
            kids=[ (l-1,j) for j in groups[l-1] if aid(j*W[l-1],l)==idx ]
            s=0
            for kk in kids:
                if val[kk] is None: s=None; break
                s+=val[kk]
            cands=[x for x in (coll,s) if x is not None]
            val[(l,idx)]=max(cands) if cands else None
    v=val[(4,0)]
    if v is not None and v>best[0]: best=(v,combo)
print('best',best,'time',time.time()-t0)
