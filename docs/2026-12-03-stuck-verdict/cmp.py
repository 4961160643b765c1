import re,subprocess,sys
def load(f):
    out=subprocess.run(['callgrind_annotate','--inclusive=yes','--threshold=100','--auto=no',f],capture_output=True,text=True).stdout
    d={};tot=None
    for l in out.split('\n'):
        m=re.match(r'^\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*?)(?: \[[^\]]*\])?$',l)
        if m:
            v=int(m.group(1).replace(',','')); n=m.group(2)
            if n=='PROGRAM TOTALS': tot=v
            d[n]=d.get(n,0)+v
    return d
fa,na,fb,nb=sys.argv[1],int(sys.argv[2]),sys.argv[3],int(sys.argv[4])
a={k:v/na for k,v in load(fa).items()}; b={k:v/nb for k,v in load(fb).items()}
print("total/req %.0f -> %.0f"%(a['PROGRAM TOTALS'],b['PROGRAM TOTALS']))
rows=sorted(((b.get(n,0)-a.get(n,0),n) for n in set(a)|set(b)))
for d,n in rows[:15]+rows[-15:]:
    if abs(d)>=3: print("%7.0f %7.0f %+6.0f  %s"%(a.get(n,0),b.get(n,0),d,n[-150:]))
