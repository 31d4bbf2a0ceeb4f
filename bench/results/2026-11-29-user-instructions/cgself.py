import sys, re, collections
# cgself.py CALLGRIND_FILE REQUESTS [ROWS]: instructions per request, total and per function (self)
def load(path):
    names = {}; self_ = collections.Counter(); incl = collections.Counter()
    fn = None; skip = False
    def nm(tok, kind):
        m = re.match(r'\((\d+)\)(?: (.*))?', tok)
        if not m: return tok
        k = (kind, m.group(1))
        if m.group(2): names[k] = m.group(2)
        return names.get(k, tok)
    for line in open(path):
        line = line.rstrip('\n')
        if line.startswith('fn='):
            fn = nm(line[3:], 'fn'); continue
        if line.startswith('cfn='):
            cfn = nm(line[4:], 'fn'); continue
        if line.startswith('calls='):
            skip = True; continue
        if line and (line[0].isdigit() or line[0] in '+-*'):
            parts = line.split()
            if len(parts) >= 2 and fn:
                v = int(parts[1])
                if skip: skip = False
                else: self_[fn] += v
    return self_
a = load(sys.argv[1]); n = int(sys.argv[2])
tot = sum(a.values())
print("total per request: %.0f" % (tot / n))
for f, v in a.most_common(int(sys.argv[3]) if len(sys.argv) > 3 else 40):
    print("%8.0f  %5.1f%%  %s" % (v / n, 100 * v / tot, f))
