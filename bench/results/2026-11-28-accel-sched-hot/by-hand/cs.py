import re
def rd(f):
    d={}
    for l in open(f):
        p=l.split()
        if len(p)>=5: d[(p[0],p[1])]=(p[2],int(p[3]),int(p[4]))
    return d
a=rd('/tmp/pa/cs-before.txt'); b=rd('/tmp/pa/cs-after.txt')
req=int(re.search(r"(\d+) requests in", open('/tmp/pa/wrk.txt').read()).group(1))
tot={}
for k in b:
    if k in a:
        n=b[k][0]; v=b[k][1]-a[k][1]; nv=b[k][2]-a[k][2]
        t=tot.setdefault(n if (n.startswith('sl-') or n=='lighttpd') else 'accel',[0,0])
        t[0]+=v; t[1]+=nv
print(' '.join("%s v%.2f nv%.2f"%(n,v/req,nv/req) for n,(v,nv) in tot.items() if v+nv))
