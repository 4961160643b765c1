import re,collections,sys
def calls(path):
    names={};c=collections.Counter();cfn=None
    for l in open(path):
        m=re.match(r'^(fn|cfn)=\((\d+)\)(?: (.*))?$',l.rstrip('\n'))
        if m:
            k,i,n=m.groups()
            if n: names[i]=n
            if k=='cfn': cfn=i
            continue
        m=re.match(r'^calls=(\d+)',l)
        if m and cfn: c[cfn]+=int(m.group(1))
    return {names.get(i,i):v for i,v in c.items()}
a=calls(sys.argv[1]); b=calls(sys.argv[2])
for n in sorted(set(a)|set(b), key=lambda n:-max(a.get(n,0),b.get(n,0))):
    if any(k in n for k in sys.argv[3].split(',')):
        print(a.get(n,0), b.get(n,0), n[:120])
