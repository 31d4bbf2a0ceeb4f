import sys, re, collections
# cgcallers.py CALLGRIND_FILE FUNCTION REQUESTS: who calls FUNCTION, instructions per request
names = {}
def nm(tok):
    m = re.match(r'\((\d+)\)(?: (.*))?', tok)
    if not m: return tok
    if m.group(2): names[m.group(1)] = m.group(2)
    return names.get(m.group(1), tok)
target = sys.argv[2]; n = int(sys.argv[3])
fn = None; cfn = None; incall = False
acc = collections.Counter()
for line in open(sys.argv[1]):
    line = line.rstrip('\n')
    if line.startswith('fn='): fn = nm(line[3:]); continue
    if line.startswith('cfn='): cfn = nm(line[4:]); continue
    if line.startswith('calls='): incall = True; continue
    if incall and line and (line[0].isdigit() or line[0] in '+-*'):
        incall = False
        if cfn and target in cfn: acc[fn] += int(line.split()[1])
for f, v in acc.most_common(15): print("%8.0f %s" % (v / n, f))
